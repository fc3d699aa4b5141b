"""Package builds: contents, lint, reproducibility, timing, RPM scriptlets (slow).

Two trees are built: the fixture tree (pkgkit.fixture), which
tests the packaging pipeline by itself in seconds, and the real tree at
HEAD, which tests the packages users get.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gdrkit.distro import families, targets
from gdrkit.packaging import baseline, build, hardening, model, pipeline, toolchain
from pkgkit import fixture, reference
from gdrkit.system import ensure_debian_packages
from gdrkit.version import REPO_ROOT

pytestmark = pytest.mark.slow

KERNEL = "6.1.0-56-amd64"
BUILD_LIMIT_S = 120  # "build-deb and build-rpm each under 2 minutes on 2 cores"


# What _build_all returns: per family, its packages, the build's seconds and its plan.
Builds = dict[str, tuple[list[Path], float, model.Plan]]


def _build_all(source: build.Source, out: Path) -> Builds:
    results = {}
    # The .deb packages are for this host's release: its lintian judges them.
    debian = families.DebianFamily(release=pipeline.deb_target_release())
    for kind, fam in (("deb", debian), ("rpm", families.family("rhel"))):
        # No prebuilt-module packages: what this builds must not depend on which
        # kernels' headers the host has (issue 34); the per-suite lintian test
        # below builds and judges them for its suite's own kernel.
        plan = model.plan(fam, kernels=(), source_date_epoch=source.epoch)
        builder = build.build_debs if kind == "deb" else build.build_rpms
        started = time.monotonic()
        paths = builder(plan, source, out)
        results[kind] = (paths, time.monotonic() - started, plan)
    return results


@pytest.fixture(scope="session")
def build_deps(tmp_path_factory: pytest.TempPathFactory) -> None:
    build.ensure_build_deps(())
    # Zig's cc for EL9 (whose glibc is older than this host's): installed and
    # prepared once, not inside a timed build.
    work = tmp_path_factory.mktemp("toolchain")
    tools = build.rpm_toolchain(families.family("rhel"), "", work)
    if tools is not None:
        toolchain.warm_up(tools, work)


@pytest.fixture(scope="session")
def fixture_source(tmp_path_factory: pytest.TempPathFactory, build_deps: None) -> build.Source:
    root = fixture.make_tree(tmp_path_factory.mktemp("fixture-tree"))
    return build.source_at("HEAD", root)


@pytest.fixture(scope="session")
def fixture_builds(
    tmp_path_factory: pytest.TempPathFactory, fixture_source: build.Source
) -> Iterator[tuple[Builds, Builds]]:
    first = _build_all(fixture_source, tmp_path_factory.mktemp("fixture-1"))
    second = _build_all(fixture_source, tmp_path_factory.mktemp("fixture-2"))
    yield first, second


def _assert_identical(first: Builds, second: Builds) -> list[str]:
    checked = []
    for kind in ("deb", "rpm"):
        a = sorted(first[kind][0], key=lambda p: p.name)
        b = sorted(second[kind][0], key=lambda p: p.name)
        assert [p.name for p in a] == [p.name for p in b]
        for x, y in zip(a, b):
            assert x.read_bytes() == y.read_bytes(), f"{x.name} differs between two builds of one commit"
            checked.append(x.name)
    return checked


def _assert_good(results: Builds) -> None:
    for kind, (paths, seconds, plan) in results.items():
        assert paths, kind
        assert build.verify_contents(plan, paths) == []
        errors, report = build.lint(paths)
        assert errors == 0, report
        assert seconds < BUILD_LIMIT_S, f"{kind} build took {seconds:.0f} s"
        # Every ELF file and requirement against the release built for (el9; this host's Debian release).
        reports = baseline.check_packages(targets.target_for(plan.family), paths)
        print(baseline.table(reports))
        assert not [p for r in reports for p in r.problems], baseline.table(reports)


def test_fixture_packages_are_complete_lint_clean_and_reproducible(fixture_builds: tuple[Builds, Builds]) -> None:
    first, second = fixture_builds
    _assert_good(first)
    print("identical:", _assert_identical(first, second))


def _extract(package: Path, root: Path) -> Path:
    root.mkdir(parents=True)
    if package.suffix == ".deb":
        subprocess.run(["dpkg-deb", "-x", str(package), str(root)], check=True)
    else:
        subprocess.run(f"rpm2cpio {package} | cpio -idm --quiet", shell=True, cwd=root, check=True)
    return root


# Prints the file the dynamic loader opened for each name NCCL, aws-ofi-nccl,
# DPDK and libfabric (libgdrapi.so) or NVSHMEM and DOCA (libgdrapi.so.2) pass to dlopen().
DLOPEN_BY_NAME = """
import ctypes, sys
for name in sys.argv[1:]:
    ctypes.CDLL(name)
    maps = open("/proc/self/maps").read().split()
    print(name, "->", sorted({m for m in maps if "/libgdrapi.so" in m}))
"""


def assert_runtime_package_alone_is_dlopened_by_name(results: Builds, tmp_path: Path) -> None:
    """The runtime package by itself, unpacked: libgdrapi.so -> libgdrapi.so.2..., and dlopen() by both names works."""
    for kind, (paths, _, _) in results.items():
        runtime = model.load().runtime_package(kind)
        package = next(p for p in paths if build.package_name(p) == runtime)
        root = _extract(package, tmp_path / kind)
        links = list(root.glob("usr/lib*/**/libgdrapi.so"))
        assert links, (
            f"{package.name} has no libgdrapi.so: NCCL, aws-ofi-nccl, DPDK and libfabric < 2.4 would not find it"
        )
        link = links[0]
        assert link.is_symlink() and os.readlink(link).startswith("libgdrapi.so.2"), (link, os.readlink(link))
        loaded = subprocess.run(
            [sys.executable, "-c", DLOPEN_BY_NAME, "libgdrapi.so", "libgdrapi.so.2"],
            env={**os.environ, "LD_LIBRARY_PATH": str(link.parent)},
            capture_output=True,
            text=True,
        )
        print(f"{package.name} alone: {link.relative_to(root)} -> {os.readlink(link)}\n{loaded.stdout}{loaded.stderr}")
        assert loaded.returncode == 0, loaded.stderr
        assert loaded.stdout.count(str(root)) == 2, f"not loaded from {package.name}'s files: {loaded.stdout}"


def test_runtime_package_alone_is_dlopened_by_the_names_consumers_use(
    fixture_builds: tuple[Builds, Builds], tmp_path: Path
) -> None:
    assert_runtime_package_alone_is_dlopened_by_name(fixture_builds[0], tmp_path)


def test_tests_package_never_depends_on_libcuda(fixture_builds: tuple[Builds, Builds]) -> None:
    first, _ = fixture_builds
    for path in first["deb"][0]:
        depends = subprocess.run(["dpkg-deb", "-f", str(path), "Depends"], capture_output=True, text=True).stdout
        assert "cuda" not in depends.lower(), (path.name, depends)
    for path in first["rpm"][0]:
        requires = subprocess.run(["rpm", "-qpR", str(path)], capture_output=True, text=True).stdout
        assert "libcuda" not in requires, (path.name, requires)


def test_library_has_a_gnu_hash_section(fixture_builds: tuple[Builds, Builds], tmp_path: Path) -> None:
    # packages/rpmlintrc filters rpmlint's missing-hash-section on this ground.
    rpm = next(p for p in fixture_builds[0]["rpm"][0] if p.name.startswith("gdrcopy-2"))
    subprocess.run(f"rpm2cpio {rpm} | cpio -idm --quiet", shell=True, cwd=tmp_path, check=True)
    lib = next(tmp_path.glob("usr/lib64/libgdrapi.so.2.*"))
    assert ".gnu.hash" in subprocess.run(["readelf", "-S", str(lib)], capture_output=True, text=True).stdout


def _scratch_root(root: Path) -> Path:
    """A tiny chroot for rpm scriptlets: busybox as /bin/sh and a dkms that logs its calls."""
    # An installed kernel (its modules' kernel/ folder) with its headers (build/include).
    for d in ("bin", "dev", "usr/sbin", "var/lib/rpm", "var/log", "tmp",
              f"lib/modules/{KERNEL}/kernel", f"lib/modules/{KERNEL}/build/include"):  # fmt: skip
        (root / d).mkdir(parents=True, exist_ok=True)
    # The scriptlets redirect to /dev/null; a plain file serves where mknod is not allowed.
    if subprocess.run(["mknod", "-m", "666", str(root / "dev/null"), "c", "1", "3"]).returncode != 0:
        (root / "dev/null").touch()
    shutil.copy2("/bin/busybox", root / "bin" / "busybox")
    subprocess.run(["chroot", str(root), "/bin/busybox", "--install", "-s", "/bin"], check=True)
    dkms = root / "usr/sbin/dkms"
    dkms.write_text('#!/bin/sh\necho "$*" >> /var/log/dkms.calls\nexit 0\n')
    dkms.chmod(0o755)
    return root


def test_rpm_dkms_scriptlets_in_a_scratch_root(fixture_builds: tuple[Builds, Builds], tmp_path: Path) -> None:
    ensure_debian_packages(["busybox-static"])
    root = _scratch_root(tmp_path / "root")
    rpm = next(p for p in fixture_builds[0]["rpm"][0] if p.name.startswith("gdrcopy-kmod-2"))
    version = fixture_builds[0]["rpm"][2].version
    rpmargs = ["rpm", "--root", str(root), "--dbpath", "/var/lib/rpm", "--nodeps", "--noplugins"]
    subprocess.run([*rpmargs, "-i", str(rpm)], check=True)
    calls = (root / "var/log/dkms.calls").read_text().splitlines()
    print("after install:", calls)
    assert f"add -m gdrdrv -v {version} --rpm_safe_upgrade" in calls
    assert f"build -m gdrdrv -v {version} -k {KERNEL}" in calls
    assert f"install -m gdrdrv -v {version} -k {KERNEL} --force" in calls
    assert (root / f"usr/src/gdrdrv-{version}/dkms.conf").exists()
    subprocess.run([*rpmargs, "-e", "gdrcopy-kmod"], check=True)
    calls = (root / "var/log/dkms.calls").read_text().splitlines()
    print("after erase:", calls)
    assert f"remove -m gdrdrv -v {version} --all --rpm_safe_upgrade" in calls
    assert not (root / f"usr/src/gdrdrv-{version}").exists()


# Directories a RHEL or SUSE host has before our packages: owned by
# `filesystem` or by a package ours require (systemd, kmod, dkms).  Every
# other directory our files need must be owned by one of our RPMs (%dir),
# or it stays behind after erase (as /etc/cdi and /usr/lib64/cmake did).
BASE_SYSTEM_DIRS = {
    "/etc", "/usr", "/usr/bin", "/usr/include", "/usr/lib", "/usr/lib64", "/usr/lib64/pkgconfig",
    "/usr/libexec", "/usr/share", "/usr/share/doc", "/usr/share/licenses", "/usr/src",
    "/usr/lib/systemd", "/usr/lib/systemd/system", "/usr/lib/udev", "/usr/lib/udev/rules.d", "/usr/lib/modprobe.d",
    "/var", "/var/tmp",  # rpm makes /var/tmp for its scriptlets
    "/usr/share/man", "/usr/share/man/man1",  # EL's and SLE's filesystem package owns each man section
}  # fmt: skip


def _directories(root: Path) -> set[str]:
    return {"/" + str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir() and not p.is_symlink()}


def test_rpm_erase_leaves_no_directory_that_the_packages_created(
    fixture_builds: tuple[Builds, Builds], tmp_path: Path
) -> None:
    ensure_debian_packages(["busybox-static"])
    root = _scratch_root(tmp_path / "root")
    for base in BASE_SYSTEM_DIRS:
        (root / base.lstrip("/")).mkdir(parents=True, exist_ok=True)
    # The library's %post/%postun run ldconfig (-p: no shell to stand in for it).
    (root / "sbin").mkdir(exist_ok=True)
    (root / "sbin/ldconfig").write_text("#!/bin/sh\nexit 0\n")
    (root / "sbin/ldconfig").chmod(0o755)
    before = _directories(root)
    rpms = [
        str(p)
        for p in fixture_builds[0]["rpm"][0]
        if build.package_name(p) in ("gdrcopy", "gdrcopy-devel", "gdrcopy-kmod")
    ]
    assert len(rpms) == 3, rpms
    rpmargs = ["rpm", "--root", str(root), "--dbpath", "/var/lib/rpm", "--nodeps", "--noplugins"]
    # Scriptlets included: %posttrans finds no /sys and no gdrdrv to load, and fails nothing.
    subprocess.run([*rpmargs, "-i", *rpms], check=True)
    installed = _directories(root) - before
    print("directories the packages made:", sorted(installed))
    assert {"/etc/cdi", "/usr/lib64/cmake", "/usr/lib64/cmake/gdrapi"} <= installed
    subprocess.run([*rpmargs, "-e", "gdrcopy-devel", "gdrcopy-kmod", "gdrcopy"], check=True)
    left = sorted(_directories(root) - before)
    assert not left, f"left after erase (own them with `dirs:` in packages/gdrcopy.yaml): {left}"


def _stub(root: Path, path: str, body: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("#!/bin/sh\n" + body)
    target.chmod(0o755)


def test_rpm_posttrans_loads_gdrdrv_again_after_the_reference_preun_unloaded_it(
    fixture_builds: tuple[Builds, Builds], tmp_path: Path
) -> None:
    # The reference's gdrcopy-kmod 2.6-1dkms is installed and its gdrdrv
    # loaded (not in use), the NVIDIA driver too; /sys is a plain directory
    # of the scratch root, and modprobe, modinfo and systemctl are stubs that
    # log their calls.  Upgrading to ours runs our %post, then the old
    # %preun (`systemctl stop gdrcopy`: rmmod, node deleted), then our
    # %posttrans, which must load gdrdrv again.
    ensure_debian_packages(["busybox-static"])
    root = _scratch_root(tmp_path / "root")
    (root / "sbin").mkdir(exist_ok=True)
    _stub(root, "/sbin/ldconfig", "exit 0\n")
    # gdrdrv 2.6.1 for the running kernel as DKMS would install it, linked
    # against nvidia: busybox's modinfo (an applet of its sh, so no stub
    # can stand in) reads the fields from the file.
    kernel_dir = root / "lib/modules" / platform.release()
    (kernel_dir / "updates").mkdir(parents=True)
    (kernel_dir / "modules.dep").write_text("updates/gdrdrv.ko:\n")
    (kernel_dir / "updates/gdrdrv.ko").write_bytes(b"\0version=2.6.1\0depends=nvidia\0name=gdrdrv\0")
    _stub(root, "/usr/sbin/modprobe", (
        'echo "modprobe $*" >> /var/log/calls\n'
        'if [ "$1" = -r ]; then rm -rf "/sys/module/$2"; exit 0; fi\n'
        'mkdir -p "/sys/module/$1" && echo 2.6.1 > "/sys/module/$1/version" && echo 0 > "/sys/module/$1/refcnt"\n'
        'mknod -m 660 /dev/gdrdrv c 10 123 2>/dev/null || :\n'
    ))  # fmt: skip
    # GDRCopy's `gdrcopy stop`: unload gdrdrv, delete the node.
    _stub(root, "/usr/bin/systemctl", (
        'echo "systemctl $*" >> /var/log/calls\n'
        'if [ "$1 $2" = "stop gdrcopy" ]; then /usr/sbin/modprobe -r gdrdrv; rm -f /dev/gdrdrv; fi\n'
    ))  # fmt: skip
    for module, version in (("nvidia", "550"), ("gdrdrv", reference.VERSION)):
        (root / "sys/module" / module).mkdir(parents=True)
        (root / "sys/module" / module / "version").write_text(version + "\n")
        (root / "sys/module" / module / "refcnt").write_text("0\n")
    rpmargs = ["rpm", "--root", str(root), "--dbpath", "/var/lib/rpm", "--nodeps", "--noplugins"]
    old = reference.build_kmod_rpm(tmp_path / "reference")
    subprocess.run([*rpmargs, "-i", str(old)], check=True)
    # Its %post loaded gdrdrv and started gdrcopy: only the upgrade's calls count.
    (root / "var/log/calls").unlink(missing_ok=True)
    ours = next(p for p in fixture_builds[0]["rpm"][0] if p.name.startswith("gdrcopy-kmod-2"))
    upgrade = subprocess.run([*rpmargs, "-U", str(ours)], capture_output=True, text=True)
    print(upgrade.stdout + upgrade.stderr)
    assert upgrade.returncode == 0
    calls = (root / "var/log/calls").read_text().splitlines()
    print("calls:", calls)
    assert calls.index("systemctl stop gdrcopy") < calls.index("modprobe gdrdrv"), "loaded before the old %preun ran"
    assert calls[-1] == "modprobe gdrdrv"
    assert (root / "sys/module/gdrdrv/version").read_text().strip() == "2.6.1"
    assert "gdrdrv: version 2.6 stays loaded (not in use)" in upgrade.stderr, "our %post, before the old %preun"
    assert re.search(r"^gdrdrv: (version 2\.6\.1 loaded, /dev/gdrdrv ready|loaded, but /dev/gdrdrv does not exist)",
                     upgrade.stdout + upgrade.stderr, re.MULTILINE)  # fmt: skip


def test_rpm_file_lists_match_the_description(fixture_builds: tuple[Builds, Builds]) -> None:
    paths, _, plan = fixture_builds[0]["rpm"]
    for path in paths:
        package = plan.package(build.package_name(path))
        files = build.rpm_files(path)
        print(path.name, files)
        assert model.check_contents(package, files, {}) == []


@pytest.mark.skipif(
    not (REPO_ROOT / "gdrdrv" / "Makefile").exists() or not (REPO_ROOT / "libgdrapi" / "Makefile").exists(),
    reason="the C parts have no Makefiles yet",
)
def test_real_tree_packages_are_complete_and_lint_clean(
    tmp_path_factory: pytest.TempPathFactory, build_deps: None
) -> None:
    first = _build_all(build.source_at("HEAD"), tmp_path_factory.mktemp("real-1"))
    _assert_good(first)
    for kind, (paths, _, _) in first.items():
        # Every ELF file hardened, stripped, its debug data in the -dbgsym/-debuginfo package (issue 36).
        debug = build.debug_packages(paths)
        elf_reports = hardening.check_packages(paths, debug)
        print(f"{kind}: debug packages {[p.name for p in debug]}\n{hardening.table(elf_reports)}")
        assert debug, f"{kind}: no debug package built"
        assert any(r.verdicts.get("stripped") for r in elf_reports), f"{kind}: no ELF file judged"
        assert not hardening.misses(elf_reports), "\n".join(hardening.misses(elf_reports))
        # No lint warning left but those filtered with a reason (packages/rpmlintrc, packages/lintian-suppress).
        _, report = build.lint(paths)
        warnings = [line for line in report.splitlines() if pipeline.lint_severity(line) == "W"]
        assert not warnings, "\n".join(warnings)
    assert_runtime_package_alone_is_dlopened_by_name(first, tmp_path_factory.mktemp("real-runtime"))
    for kind, (_, seconds, _) in first.items():
        print(f"{kind}: {seconds:.0f} s")


# Soak: the second build costs 1.5 minutes of .ci/run.  Reproducibility of the
# packaging itself is judged on every run by the fixture packages' test above.
@pytest.mark.soak
@pytest.mark.skipif(
    not (REPO_ROOT / "gdrdrv" / "Makefile").exists() or not (REPO_ROOT / "libgdrapi" / "Makefile").exists(),
    reason="the C parts have no Makefiles yet",
)
def test_real_tree_packages_are_reproducible(tmp_path_factory: pytest.TempPathFactory, build_deps: None) -> None:
    source = build.source_at("HEAD")
    first = _build_all(source, tmp_path_factory.mktemp("real-1"))
    second = _build_all(source, tmp_path_factory.mktemp("real-2"))
    print("identical:", _assert_identical(first, second))


@pytest.mark.soak
def test_el8_packages_need_nothing_newer_than_el8_has(build_deps: None, tmp_path: Path) -> None:
    """EL8 (glibc 2.28, python3 3.6): linked by Zig's cc against 2.28, named .el8, the Python parts for python3.11.

    Soak: about two minutes on 2 cores (one RPM build).  The slow tier checks
    EL9 and this host's Debian release with the builds it makes anyway
    (_assert_good); every build runs the same checks.
    """
    request = pipeline.Request(
        kinds=("rpm",), rpm_release="el8", with_kmod=False, output=tmp_path, lint=False, install_deps=False
    )
    rows = pipeline.execute(pipeline.plan_request(request))
    print(pipeline.summary_table(rows) + "\n" + pipeline.baseline_table(rows))
    pipeline.check_rows(rows)
    assert rows and all(Path(r.file).name.endswith((".el8.x86_64.rpm", ".el8.noarch.rpm")) for r in rows)
    by_name = {build.package_name(r.path): r.baseline for r in rows if r.path and r.baseline}
    assert by_name["gdrcopy"].newest_glibc and toolchain.version_key(by_name["gdrcopy"].newest_glibc) <= (2, 28)
    assert "python(abi) = 3.11" in by_name["python3-gdrcopy"].python
    assert "/usr/bin/python3.11" in by_name["gdrcopy"].python  # gdrcopy_doctor's interpreter


# bookworm's lintian already judges every .ci/run on this Debian 12 host
# (test_real_tree_packages_are_complete_and_lint_clean); its clean
# image adds 5 minutes, so that row runs in the soak tier.  trixie's lintian,
# which differs (aliased-location), stays.
@pytest.mark.parametrize("suite", [pytest.param("bookworm", marks=pytest.mark.soak), "trixie"])
def test_debs_built_in_a_suite_pass_that_suites_lintian(suite: str, tmp_path: Path) -> None:
    """Built in the suite's matrix image (its debhelper, its /etc/os-release) and linted by its lintian.

    trixie's lintian reports every path through /lib as an error (aliased-location),
    bookworm's wants units under /lib: each suite's packages must follow their own.
    """
    from gdrkit.containers import engine
    from gdrkit.matrix import model as matrix_model, runner

    entry = next(e for e in matrix_model.load() if e.name == f"debian-{suite}")
    workspace = runner.Workspace(tmp_path)
    with engine() as docker:
        entry_run = runner.EntryRun(runner.plan_entry(entry, offline=True), docker, workspace, refresh=False)
        assert entry_run.step_image(), entry_run.result.steps["image"].detail
        runner.clone_committed_tree(workspace.source)
        # In the image itself, not the row's per-target build (which lints on this host): this suite's own tools.
        built = runner.build_in_image(docker, entry_run.image, entry, entry_run.abi, workspace.source)
        assert built.status == 0, runner.tail(built.output)
        # The full report, warnings too (build-deb prints only the errors).
        linted, _ = docker.run(
            entry_run.image,
            "lintian --version && lintian --tag-display-limit 0 /src/dist/*.deb",
            mounts={workspace.source: "/src"},
            stream=False,
        )
    print(f"\n{suite}: lintian on {len(list(workspace.dist.glob('*.deb')))} packages:\n{linted.output}")
    tags = [line for line in linted.output.splitlines() if re.match(r"[EWIPXO]: ", line)]
    assert not [t for t in tags if t.startswith("E: ")], linted.output
    assert not [t for t in tags if "aliased-location" in t], linted.output
    below = "/usr/lib" if suite == "trixie" else "/lib"
    dkms = next(workspace.dist.glob("gdrdrv-dkms_*.deb"))
    assert f"{below}/systemd/system/gdrdrv.service" in build.deb_files(dkms)
    kmod = next(workspace.dist.glob(f"gdrdrv-modules-{entry_run.abi}_*.deb"))
    assert f"{below}/modules/{entry_run.abi}/updates/gdrdrv.ko" in build.deb_files(kmod)


def test_every_packaged_program_has_its_man_page(fixture_builds: tuple[Builds, Builds]) -> None:
    """Debian policy 12.1 and lintian's no-manual-page; rpmlint 2.4 cannot tell (packages/rpmlintrc says why)."""
    for kind in ("deb", "rpm"):
        for path in fixture_builds[0][kind][0]:
            if kind == "deb":
                listing = subprocess.run(["dpkg-deb", "-c", str(path)], capture_output=True, text=True, check=True)
                files = ["/" + line.split()[5].lstrip("./") for line in listing.stdout.splitlines()]
            else:
                files = build.rpm_files(path)
            programs = [f.rsplit("/", 1)[1] for f in files if re.fullmatch(r"/usr/s?bin/[^/]+", f)]
            pages = {f.rsplit("/", 1)[1].split(".")[0] for f in files if re.fullmatch(r"/usr/share/man/man1/[^/]+", f)}
            missing = sorted(set(programs) - pages)
            print(path.name, "programs:", programs, "pages:", sorted(pages))
            assert not missing, f"{path.name}: no man page of {missing}"
