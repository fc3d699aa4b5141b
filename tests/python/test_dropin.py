"""Drop-in for automation written for GDRCopy 2.6 (docs/nodes.md, "Drop-in for existing automation").

What EasyBuild, Ansible, AWS ParallelCluster and EKS loader DaemonSets run
against GDRCopy's tree must work against ours: `make config lib`,
`make prefix=... DESTDIR=... CUDA=... all install lib_install exes_install`,
`./insmod.sh`, `packages/build-deb-packages.sh` / `build-rpm-packages.sh`
with their options and file names, and the RPMs' `gdrcopy.service` with
`/usr/libexec/gdrcopy/gdrcopy {start|stop|restart|status}`.

Fast tests check the Makefile, the version macros and the two package scripts
(over a stand-in toolkit that records its arguments); the slow ones build the
real packages from a fresh clone and run insmod.sh and the service script in
a VM.
"""

from __future__ import annotations

import os
import platform
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from gdrkit import version
from gdrkit.distro import families
from gdrkit.packaging import model, render
from gdrkit.system import ensure_debian_packages
from gdrkit.version import REPO_ROOT

SCRIPTS = [
    REPO_ROOT / "insmod.sh",
    REPO_ROOT / "packages" / "build-deb-packages.sh",
    REPO_ROOT / "packages" / "build-rpm-packages.sh",
]
SERVICE_SCRIPT = render.GDRCOPY_SERVICE_SCRIPT


def _make(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    ensure_debian_packages(["make"])
    return subprocess.run(["make", *args], cwd=cwd, capture_output=True, text=True)


def _service_script(family_name: str = "rhel") -> render.RenderedFile:
    plan = model.plan(families.family(family_name))
    return render.system_files(plan)[f"pkgroot{SERVICE_SCRIPT}"]


# --- version macros ---------------------------------------------------------------------


def _awk_header(name: str, header: Path) -> str:
    # Exactly how GDRCopy's package scripts read the version.
    script = f"/#define {name}/ {{ print $3 }}"
    return subprocess.run(["awk", script, str(header)], capture_output=True, text=True, check=True).stdout.strip()


def test_gdrapi_h_version_macros_are_literal_and_equal_the_version_header() -> None:
    header = REPO_ROOT / "include" / "gdrapi.h"
    assert _awk_header("GDR_API_MAJOR_VERSION", header) == str(version.MAJOR)
    assert _awk_header("GDR_API_MINOR_VERSION", header) == str(version.MINOR)


def test_gdrapi_h_does_not_compile_when_its_version_drifts(tmp_path: Path) -> None:
    include = tmp_path / "include"
    shutil.copytree(REPO_ROOT / "include", include)
    program = tmp_path / "use.c"
    program.write_text('#include "gdrapi.h"\nint main(void) { return GDR_API_VERSION == 0; }\n')
    ensure_debian_packages(["gcc", "libc6-dev"])
    compile_it = ["cc", "-fsyntax-only", f"-I{include}", str(program)]
    assert subprocess.run(compile_it, capture_output=True).returncode == 0
    drifted = include / "gdrcopy_version.h"
    drifted.write_text(
        drifted.read_text().replace(
            f"#define GDRCOPY_VERSION_MINOR {version.MINOR}\n", f"#define GDRCOPY_VERSION_MINOR {version.MINOR + 1}\n"
        )
    )
    result = subprocess.run(compile_it, capture_output=True, text=True)
    assert result.returncode != 0 and "differ from gdrcopy_version.h" in result.stderr, result.stderr


def test_the_uapi_header_stands_alone_and_carries_the_interface_version(tmp_path: Path) -> None:
    # Only the header itself: no product version header beside or above it.
    (tmp_path / "uapi").mkdir()
    shutil.copy(REPO_ROOT / "include" / "uapi" / "gdrdrv.h", tmp_path / "uapi" / "gdrdrv.h")
    program = tmp_path / "use.c"
    program.write_text(
        '#include "uapi/gdrdrv.h"\n'
        f'_Static_assert(GDRDRV_VERSION == GDRDRV_MAKE_VERSION({version.MAJOR}, {version.MINOR}), "version");\n'
        "int main(void) { return 0; }\n"
    )
    ensure_debian_packages(["gcc", "libc6-dev", "linux-libc-dev"])
    result = subprocess.run(["cc", "-fsyntax-only", f"-I{tmp_path}", str(program)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# --- the Makefile -----------------------------------------------------------------------


def test_make_config_prints_the_architecture() -> None:
    result = _make("-s", "config")
    expected = {"x86_64": "X86", "aarch64": "ARM64", "ppc64le": "POWER"}.get(platform.machine(), platform.machine())
    assert result.returncode == 0 and result.stdout == f"GDRAPI_ARCH={expected}\n", result.stdout + result.stderr


def test_make_all_builds_the_driver_where_the_kernel_headers_are(tmp_path: Path) -> None:
    missing = _make("-n", "all", f"KDIR={tmp_path / 'none'}")
    assert missing.returncode == 0, missing.stderr
    assert "gdrdrv.ko not built: no kernel headers" in missing.stdout + missing.stderr
    assert not [line for line in missing.stdout.splitlines() if line.startswith(("make driver", "make -C gdrdrv"))]
    (tmp_path / "Makefile").write_text("all:\n")
    present = _make("-n", "all", f"KDIR={tmp_path}")
    assert [line for line in present.stdout.splitlines() if line.startswith("make -C gdrdrv")], present.stdout[-3000:]
    assert "GDRAPI_ARCH=" in present.stdout


def test_reference_build_and_install_targets_with_a_relative_destdir(tmp_path: Path) -> None:
    ensure_debian_packages(["build-essential"])
    # EasyBuild: `make config lib prefix=X`, then `make lib_install prefix=X`.
    prefix = tmp_path / "easybuild"
    for args in (["config", "lib", f"prefix={prefix}"], ["lib_install", f"prefix={prefix}"]):
        result = _make("-j2", *args)
        assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert (prefix / "lib" / "libgdrapi.so").is_symlink() and (prefix / "include" / "gdrapi.h").is_file()
    # Ansible-style install into a staging directory given relative to the tree.
    stage = Path(os.path.relpath(tmp_path / "stage", REPO_ROOT))
    result = _make(
        "-j2",
        "prefix=/opt/gdrcopy",
        f"DESTDIR={stage}",
        "CUDA=/nonexistent/cuda",
        "KDIR=/nonexistent",
        "all",
        "install",
        "lib_install",
        "exes_install",
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    root = tmp_path / "stage" / "opt" / "gdrcopy"
    for rel in (
        "lib/libgdrapi.so",
        f"lib/libgdrapi.so.{version.MAJOR}",
        "include/gdrapi.h",
        "bin/gdrcopy_sanity",
        "bin/gdrcopy_copybw",
        "bin/gdrcopy_pplat",
        "bin/sanity",
        "bin/copylat",
        # The program its man page describes is installed with it (the toolkit's .venv has PyYAML and Jinja2).
        "bin/gdrcopy_doctor",
        "share/man/man1/gdrcopy_doctor.1",
        "share/gdrcopy/gdrcopy_doctor/facts.json",
    ):
        assert (root / rel).exists(), rel
    assert "/opt/gdrcopy/share/gdrcopy" in (root / "bin/gdrcopy_doctor").read_text()
    assert not (REPO_ROOT / stage).exists() or (REPO_ROOT / stage).resolve() == (tmp_path / "stage").resolve()


@pytest.mark.parametrize("layout", ["destdir", "prefix"])
def test_make_uninstall_removes_exactly_what_make_install_put(tmp_path: Path, layout: str) -> None:
    # Users of NVIDIA's tree ask for it (issue 24): install, uninstall, no file of ours left.
    ensure_debian_packages(["build-essential"])
    if layout == "destdir":
        tree, args = (
            tmp_path / "stage",
            [f"DESTDIR={tmp_path / 'stage'}", "prefix=/usr/local", "CUDA=/nonexistent/cuda"],
        )
    else:
        tree = tmp_path / "opt"
        args = [f"prefix={tree}", f"libdir={tree}/lib64", "CUDA=/nonexistent/cuda"]
    # Something else's file in a shared directory must survive the uninstall.
    other = (tree / "usr/local/lib" if layout == "destdir" else tree / "lib64") / "libother.so.1"
    other.parent.mkdir(parents=True)
    other.write_text("not ours\n")
    installed = _make("-j2", "install", *args)
    assert installed.returncode == 0, (installed.stdout + installed.stderr)[-4000:]
    files = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if not p.is_dir())
    assert len(files) > 10 and any(name.endswith("gdrapiConfig.cmake") for name in files), files
    removed = _make("uninstall", *args)
    assert removed.returncode == 0, (removed.stdout + removed.stderr)[-4000:]
    left = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if not p.is_dir())
    assert left == [str(other.relative_to(tree))], f"make uninstall left {left}"
    assert not any(p.name == "gdrapi" for p in tree.rglob("*")), "cmake/gdrapi is ours alone and goes"


def test_make_dist_builds_the_references_three_tarballs() -> None:
    ensure_debian_packages(["build-essential"])
    result = _make("-j2", "dist", "CUDA=/nonexistent/cuda")
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    machine = platform.machine()
    members = {}
    for name in ("libgdrapi", "gdrcopy-tests", "gdrdrv"):
        tarball = REPO_ROOT / "build" / f"{name}-linux-{machine}-{version.VERSION}.tar.gz"
        assert f"built build/{tarball.name}" in result.stdout
        with tarfile.open(tarball) as tar:
            members[name] = {m.name for m in tar.getmembers()}
            assert all(m.uid == 0 and m.gid == 0 for m in tar.getmembers()), name
    assert {"LICENSE", "lib64/libgdrapi.so", f"lib64/libgdrapi.so.{version.MAJOR}", "include/gdrapi.h"} <= members[
        "libgdrapi"
    ]
    assert {"LICENSE", "bin/gdrcopy_sanity", "bin/gdrcopy_copylat", "bin/gdrcopy_pplat"} <= members["gdrcopy-tests"]
    # gdrdrv's sources with the two headers its Kbuild looks for beside it (src/include).
    assert {"LICENSE", "src/Makefile", "src/Kbuild", "src/gdrdrv.c", "src/include/uapi/gdrdrv.h",
            "src/include/gdrcopy_version.h", "src/scripts/conftest.sh"} <= members["gdrdrv"]  # fmt: skip
    assert not [m for m in members["gdrdrv"] if m.endswith((".o", ".ko", ".cmd"))]


# --- shell --------------------------------------------------------------------------------


def _shellcheck(path: Path) -> None:
    ensure_debian_packages(["shellcheck"])
    result = subprocess.run(["shellcheck", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_are_shellcheck_clean_and_executable(script: Path) -> None:
    assert script.stat().st_mode & stat.S_IXUSR, f"{script} is not executable"
    _shellcheck(script)


@pytest.mark.parametrize("family_name", [n for n, f in families.Family.registry.items() if f.package_type == "rpm"])
def test_service_script_is_shellcheck_clean(family_name: str, tmp_path: Path) -> None:
    rendered = _service_script(family_name)
    assert rendered.mode == 0o755
    path = tmp_path / "gdrcopy"
    path.write_text(rendered.text)
    _shellcheck(path)


def test_service_script_usage_and_status_here(tmp_path: Path) -> None:
    path = tmp_path / "gdrcopy"
    path.write_text(_service_script().text)
    path.chmod(0o755)
    usage = subprocess.run([str(path), "bogus"], capture_output=True, text=True)
    assert usage.returncode == 2 and "{start|stop|restart|status}" in usage.stderr
    if Path("/sys/module/gdrdrv").exists():
        pytest.skip("gdrdrv is loaded on this host: the not-loaded status cannot be checked here")
    status = subprocess.run([str(path), "status"], capture_output=True, text=True)
    assert status.returncode == 3 and "gdrdrv is not loaded" in status.stdout, status


def test_the_rpm_families_ship_gdrcopy_service_and_the_debian_family_does_not() -> None:
    for name, cls in families.Family.registry.items():
        fam = cls()
        files = render.system_files(model.plan(fam))
        unit = f"pkgroot{fam.unitdir}/gdrcopy.service"
        if fam.package_type == "rpm":
            text = files[unit].text
            for verb, key in (("start", "ExecStart"), ("stop", "ExecStop"), ("restart", "ExecReload")):
                assert f"{key}={SERVICE_SCRIPT} {verb}\n" in text, name
            assert "WantedBy=multi-user.target" in text
        else:
            assert unit not in files and f"pkgroot{SERVICE_SCRIPT}" not in files, name


# --- the package scripts, over a stand-in toolkit ------------------------------------------

FAKE_TOOLKIT = r"""#!/bin/bash
# Records its arguments and environment, then writes package files named as the real toolkit names them.
printf '%s\n' "$@" > "$(dirname "$0")/toolkit.args"
echo "CUDA=${CUDA-unset}" > "$(dirname "$0")/toolkit.env"
out=""
while [ $# -gt 0 ]; do
    [ "$1" = --output ] && out="$2"
    shift
done
mkdir -p "$out"
for name in $FAKE_PACKAGES; do echo "$name" > "$out/$name"; done
"""


def _fake_tree(
    tmp_path: Path, packages: list[str], path_bin: dict[str, str] | None = None
) -> tuple[Path, dict[str, str]]:
    top = tmp_path / "tree"
    (top / "packages").mkdir(parents=True)
    for script in SCRIPTS[1:]:
        shutil.copy2(script, top / "packages" / script.name)
    toolkit = top / "toolkit"
    toolkit.write_text(FAKE_TOOLKIT)
    toolkit.chmod(0o755)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, body in (path_bin or {}).items():
        (bindir / name).write_text("#!/bin/sh\n" + body)
        (bindir / name).chmod(0o755)
    env = dict(os.environ, FAKE_PACKAGES=" ".join(packages), PATH=f"{bindir}:{os.environ['PATH']}")
    env.pop("CUDA", None)
    return top, env


def _run(top: Path, script: str, args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(exist_ok=True)
    result = subprocess.run(
        ["bash", str(top / "packages" / script), *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


DEBS = [
    "gdrdrv-dkms_2.6.1-1_all.deb",
    "libgdrapi_2.6.1-1_amd64.deb",
    "gdrcopy-tests_2.6.1-1_amd64.deb",
    "gdrcopy_2.6.1-1_all.deb",
]
LSB = 'case "$1" in -is) echo Ubuntu ;; -rs) echo 22.04 ;; esac\n'


def _dpkg_arch() -> str:
    return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout.strip()


def test_build_deb_packages_names_the_results_as_gdrcopy_does(tmp_path: Path) -> None:
    top, env = _fake_tree(tmp_path, DEBS, {"lsb_release": LSB})
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    (cuda / "bin" / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.4, V12.4.131'\n")
    (cuda / "bin" / "nvcc").chmod(0o755)
    out = tmp_path / "out"
    _run(top, "build-deb-packages.sh", [], dict(env, CUDA=str(cuda)), out)
    arch = _dpkg_arch()
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            f"gdrdrv-dkms_2.6.1-1_{arch}.Ubuntu22_04.deb",
            "libgdrapi_2.6.1-1_amd64.Ubuntu22_04.deb",
            "gdrcopy-tests_2.6.1-1_amd64.Ubuntu22_04.deb",
            "gdrcopy-tests_2.6.1-1_amd64.Ubuntu22_04+cuda12.4.deb",
            f"gdrcopy_2.6.1-1_{arch}.Ubuntu22_04.deb",
        ]
    )
    assert sorted(p.name for p in (top / "dist").iterdir()) == sorted(DEBS)
    args = (top / "toolkit.args").read_text().split()
    assert args[:3] == ["build-deb", "--no-kmod", "--no-lint"] and "--no-deps" not in args
    # The build never sees a CUDA toolkit: the programs are built without one.
    assert (top / "toolkit.env").read_text() == "CUDA=unset\n"


def test_build_deb_packages_options_skip_and_no_lsb_release(tmp_path: Path) -> None:
    top, env = _fake_tree(tmp_path, DEBS)
    env["PATH"] = str(_path_without("lsb_release", tmp_path / "path"))
    out = tmp_path / "out"
    _run(top, "build-deb-packages.sh", ["-d", "-t", "-k"], env, out)
    arch = _dpkg_arch()
    # No lsb_release: GDRCopy adds no distribution suffix either.
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["libgdrapi_2.6.1-1_amd64.deb", f"gdrcopy_2.6.1-1_{arch}.deb"]
    )
    assert "--no-deps" in (top / "toolkit.args").read_text().split()
    usage = subprocess.run(
        ["bash", str(top / "packages" / "build-deb-packages.sh"), "-h"], capture_output=True, text=True
    )
    assert usage.returncode == 0 and "[-d] [-t] [-k] [-h]" in usage.stdout


def _path_without(command: str, bindir: Path) -> Path:
    """A directory of links to every command on PATH but `command`: a PATH without it."""
    bindir.mkdir()
    for directory in reversed(os.environ["PATH"].split(":")):
        if not directory or not Path(directory).is_dir():
            continue
        for entry in Path(directory).iterdir():
            if entry.name != command:
                link = bindir / entry.name
                if link.is_symlink():
                    link.unlink()
                link.symlink_to(entry)
    return bindir


def _rpm_release_and_tag() -> tuple[str, str]:
    """The release build-rpm-packages.sh builds for here, and the tag its file names carry.

    On a host of that release GDRCopy's own tag; on any other (this Debian
    host) the target's: the packages are el9's, never named for the build host.
    """
    for name in ("/etc/redhat-release", "/etc/centos-release"):
        if Path(name).exists():
            text = Path(name).read_text()
            tag = ".el" + text.split("release ")[1].split(".")[0].split()[0]
            return tag[1:], tag
    fields = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
    clean = {k: v.strip().strip('"') for k, v in fields.items()}
    if "suse" in f"{clean.get('ID', '')} {clean.get('ID_LIKE', '')}":
        return "sle15", f".{clean['ID']}-{clean.get('VERSION_ID', '')}"
    return "el9", ".el9"


# The toolkit's names carry its dist tag (.el9 where no release is named), which gives way to GDRCopy's.
RPMS = ["gdrcopy-2.6.1-1.el9.x86_64.rpm", "gdrcopy-devel-2.6.1-1.el9.x86_64.rpm", "gdrcopy-kmod-2.6.1-1.el9.noarch.rpm"]


def test_build_rpm_packages_names_the_results_as_gdrcopy_does(tmp_path: Path) -> None:
    kmod = "gdrcopy-kmod-6.1.0-57-amd64-2.6.1-1.el9.x86_64.rpm"
    top, env = _fake_tree(tmp_path, RPMS + [kmod])
    out = tmp_path / "out"
    _run(top, "build-rpm-packages.sh", ["-m"], dict(env, NVIDIA_SRC_DIR="/usr/src/nvidia-550/nvidia"), out)
    release, tag = _rpm_release_and_tag()
    assert "debian" not in tag and "ubuntu" not in tag
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            f"gdrcopy-2.6.1-1{tag}.x86_64.rpm",
            f"gdrcopy-devel-2.6.1-1{tag}.noarch.rpm",
            f"gdrcopy-kmod-2.6.1-1dkms{tag}.noarch.rpm",
            f"gdrcopy-kmod-6.1.0-57-amd64-2.6.1-1{tag}.x86_64.rpm",
        ]
    )
    args = (top / "toolkit.args").read_text().split()
    assert args[:3] == ["build-rpm", "--release", release]
    # -m: the running kernel's module, named, never one the host's headers happen to offer.
    assert args[args.index("--kernel") + 1] == platform.release()
    assert "--no-kmod" not in args and args[args.index("--nvidia-src-dir") + 1] == "/usr/src/nvidia-550/nvidia"
    out2 = tmp_path / "out2"
    _run(top, "build-rpm-packages.sh", [], env, out2)
    assert "--no-kmod" in (top / "toolkit.args").read_text().split()


# --- the real thing ----------------------------------------------------------------------------


@pytest.mark.slow
def test_fresh_clone_builds_gdrcopys_file_names_and_the_rpm_has_gdrcopy_service(tmp_path: Path) -> None:
    from gdrkit.packaging import build

    build.ensure_build_deps((), kinds=("deb", "rpm"), lint=False)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(clone)], check=True)
    # The toolkit's own environment, as ./toolkit made it here (its stamp keeps it).
    if (REPO_ROOT / ".venv").exists():
        (clone / ".venv").symlink_to(REPO_ROOT / ".venv")
    out = tmp_path / "out"
    out.mkdir()
    for script in ("build-deb-packages.sh", "build-rpm-packages.sh"):
        result = subprocess.run(["bash", str(clone / "packages" / script)], cwd=out, capture_output=True, text=True)
        print(result.stdout[-2000:])
        assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
    names = sorted(p.name for p in out.iterdir())
    print("\n".join(names))
    v = version.package_version()  # the packages' version (2.6+dropin1), not the program's
    for package in ("gdrdrv-dkms", "libgdrapi", "gdrcopy-tests", "gdrcopy"):
        assert any(n.startswith(f"{package}_{v}-1_") and n.endswith(".deb") for n in names), (package, names)
    [kmod] = [p for p in out.iterdir() if p.name.startswith(f"gdrcopy-kmod-{v}-1dkms")]
    assert kmod.name.endswith(".noarch.rpm")
    files = subprocess.run(["rpm", "-qlp", str(kmod)], capture_output=True, text=True, check=True).stdout.split()
    assert "/usr/lib/systemd/system/gdrcopy.service" in files and SERVICE_SCRIPT in files
    # `systemctl enable gdrcopy` in the installed file tree (offline, --root).
    root = tmp_path / "root"
    root.mkdir()
    subprocess.run(f"rpm2cpio {kmod} | cpio -idm --quiet", shell=True, cwd=root, check=True)
    assert os.access(root / SERVICE_SCRIPT.lstrip("/"), os.X_OK)
    if shutil.which("systemctl") is None:
        pytest.fail("systemctl is missing: cannot check `systemctl enable gdrcopy` (apt-get install systemd)")
    enabled = subprocess.run(
        ["systemctl", f"--root={root}", "enable", "gdrcopy.service"], capture_output=True, text=True
    )
    assert enabled.returncode == 0, enabled.stderr
    link = root / "etc/systemd/system/multi-user.target.wants/gdrcopy.service"
    assert os.readlink(link) == "/usr/lib/systemd/system/gdrcopy.service"


@pytest.mark.slow
def test_insmod_sh_and_the_service_script_in_a_vm() -> None:
    from gdrkit.vm import BuildStep, boot, build_in_root, default_steps, prepare_suite_root
    from gdrkit.vm.runner import default_loads

    root = prepare_suite_root("bookworm")
    wanted = ("softgpu_kmod", "softgpu_lib", "driver", "softgpu_install")
    steps = [s for s in default_steps(root.abi) if s.name in wanted]
    [install] = [s for s in default_steps(root.abi) if s.name == "driver_install"]
    # GDRCopy's target name for installing the module (make drv_install).
    steps.append(BuildStep("drv_install", install.script.replace(" driver_install ", " drv_install "), ("driver",)))
    steps += [s for s in default_steps(root.abi) if s.name == "depmod"]
    report = build_in_root(root, steps)
    assert not report.failed, "\n".join(f"{s.name}: {s.output[-3000:]}" for s in report.failed)
    # The RPMs' service script, rendered as packaged, placed outside /src.
    script = root.root_dir / "opt" / "gdrcopy-dropin" / "gdrcopy"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(_service_script().text)
    script.chmod(0o755)
    loads = default_loads()
    result = boot(
        root.kernel_image,
        root.modules_dir,
        root.root_dir,
        "bash /src/tests/python/dropin_guest.sh /opt/gdrcopy-dropin/gdrcopy",
        loads=loads,
    )
    console = result.console_log.read_text(errors="replace")
    print("\n".join(line for line in console.splitlines() if line.startswith(("CHECK:", "FAILED:"))))
    assert result.status == 0, console[-6000:]
    assert console.count("CHECK: ") == 5, console[-6000:]
    assert not result.problems(loads), (result.problems(loads), console[-6000:])
