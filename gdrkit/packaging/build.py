"""Build the .deb and .rpm packages of a Plan from one git commit.

Reproducibility: the source is `git archive` of one commit (not the working
tree), every file gets that commit's time as mtime, SOURCE_DATE_EPOCH is that
time, the build happens in a fixed directory, and the RPM tarball is written
by tarfile in sorted order with fixed owners.  Two builds of the same commit
give byte-identical packages.

The builds call the top-level Makefile's targets (lib, exes, install, driver,
driver_install); nothing here compiles anything itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import io
import os
import platform
import re
import shutil
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from gdrkit.packaging import model, render, suiteroot, toolchain
from gdrkit.packaging.toolchain import Toolchain
from gdrkit.distro.arch import arch
from gdrkit.distro.families import DebianFamily, Family, RpmFamily
from gdrkit.system import bad_input, die, ensure_debian_packages, log, run, run_step
from gdrkit.version import REPO_ROOT

BUILD_ROOT = REPO_ROOT / "build" / "gdrkit-pkg"
# The builds' raw output (outside the work directories, which each build starts by removing).
LOG_DIR = BUILD_ROOT / "logs"
DIST = REPO_ROOT / "dist"
PACKAGING_README = REPO_ROOT / "packages" / "README.md"
LINTIAN_SUPPRESS = suiteroot.LINTIAN_SUPPRESS


@dataclass(frozen=True)
class Source:
    """One commit of a git repository: what packages are built from."""

    repo: Path
    commit: str
    epoch: int


def source_at(ref: str = "HEAD", repo: Path = REPO_ROOT) -> Source:
    """Resolve `ref` once, so that every later step sees the same commit (an input error if it names none)."""
    commit = run(
        ["git", "-C", repo, "rev-parse", "--quiet", "--verify", f"{ref}^{{commit}}"], capture=True, check=False
    )
    if commit.returncode != 0 or not ref.strip():
        raise bad_input(
            f"--ref {ref!r}: no commit of {repo} by that name",
            "give a branch, tag or commit id of this repository (git log --oneline lists commits; default HEAD);"
            " uncommitted changes are never packaged: commit them first",
        )
    sha = commit.stdout.strip()
    epoch = run(["git", "-C", repo, "log", "-1", "--format=%ct", sha], capture=True)
    return Source(repo=repo, commit=sha, epoch=int(epoch.stdout.strip()))


# A kernel release as `uname -r` prints it: 6.1.0-31-amd64, 5.14.0-427.13.1.el9_4.x86_64, 6.8.0-1015-aws.
KERNEL_RELEASE = re.compile(r"[1-9][0-9]*\.[0-9]+(\.[0-9]+)?([-+~_.][0-9A-Za-z][0-9A-Za-z+~_.-]*)?")


def check_kernel_releases(kernels: Iterable[str], option: str = "--kernel") -> list[str]:
    """`kernels`, each checked to look like a kernel release (`uname -r`), or an input error naming `option`."""
    checked = []
    for kernel in kernels:
        if not KERNEL_RELEASE.fullmatch(kernel):
            raise bad_input(
                f"{option} {kernel!r} is not a kernel release",
                f"give releases as `uname -r` prints them, e.g. {option} {platform.release()}"
                " (ls /lib/modules lists this host's)",
            )
        checked.append(kernel)
    return checked


def default_kernels() -> list[str]:
    """The running kernel if its headers are installed, else the newest that has them."""
    running = platform.release()
    if (Path("/lib/modules") / running / "build").exists():
        return [running]
    with_headers = sorted(
        (p.name for p in Path("/lib/modules").glob("*") if (p / "build").exists()),
        key=_kernel_sort_key,
    )
    if with_headers:
        log(f"no headers for the running kernel {running}; using {with_headers[-1]}")
        return [with_headers[-1]]
    return []


def _kernel_sort_key(release: str) -> list[int]:
    return [int(part) for part in "".join(c if c.isdigit() else " " for c in release).split()]


def ensure_build_deps(
    kernels: Iterable[str], *, kinds: Iterable[str] = ("deb", "rpm"), lint: bool = True, dry_run: bool = False
) -> None:
    """Install what building (and linting) the given package kinds needs on this Debian host."""
    deb = DebianFamily()
    wanted = list(deb.build_deps)
    for kind in kinds:
        wanted += deb.kind_build_deps[kind]
        if lint:
            wanted += deb.kind_lint_deps[kind]
    wanted += [deb.kernel_headers_package.format(kver=k) for k in kernels]
    ensure_debian_packages(wanted, dry_run=dry_run)


def extract_commit(source: Source, dest: Path) -> Path:
    """The files of the commit under `dest`, every mtime set to the commit time."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    archive = dest.parent / f".{dest.name}.tar"
    run(["git", "-C", source.repo, "archive", "--format=tar", "-o", archive, source.commit])
    with tarfile.open(archive) as tar:
        # Our own `git archive` output (no absolute or `..` paths); Python
        # 3.11.2 has no extraction filters yet.
        tar.extractall(dest)
    archive.unlink()
    _clamp_mtimes(dest, source.epoch)
    return dest


def _clamp_mtimes(root: Path, epoch: int) -> None:
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            os.utime(path, (epoch, epoch))


VERSION_HEADER = "include/gdrcopy_version.h"
UAPI_HEADER = "include/uapi/gdrdrv.h"


def _replace_define(text: str, pattern: str, line: str, header: str, name: str) -> str:
    """`text` with its one line matching `pattern` replaced by `line`; none or several is an error."""
    text, count = re.subn(pattern, line, text, flags=re.MULTILINE)
    if count != 1:
        raise die(f"{header}: expected one {name} line, found {count}")
    return text


def stamp_version_text(text: str, package_version: str) -> str:
    """The version header's text with MAJOR.MINOR.PATCH set to `package_version` (pure)."""
    parts = package_version.split(".")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        raise die(f"package version {package_version!r} is not MAJOR.MINOR.PATCH")
    for name, value in zip(("MAJOR", "MINOR", "PATCH"), parts):
        define = f"GDRCOPY_VERSION_{name}"
        text = _replace_define(text, rf"^#define {define} \d+$", f"#define {define} {value}", VERSION_HEADER, define)
    return text


def stamp_uapi_version_text(text: str, package_version: str) -> str:
    """The uapi header's text with GDRDRV_VERSION set to `package_version`'s MAJOR.MINOR (pure).

    The header is self-contained (a literal, not the version header), and the
    driver and library refuse to build when the two differ."""
    major, minor = package_version.split(".")[:2]
    return _replace_define(
        text,
        r"^#define GDRDRV_VERSION GDRDRV_MAKE_VERSION\(\d+, \d+\)$",
        f"#define GDRDRV_VERSION GDRDRV_MAKE_VERSION({major}, {minor})",
        UAPI_HEADER,
        "GDRDRV_VERSION",
    )


def _write_if_changed(path: Path, text: str, stamped: str) -> None:
    if stamped != text:
        path.write_text(stamped)


def stamp_version(tree: Path, package_version: str) -> None:
    """Packages built as another version (the "previous release" of the upgrade and
    downgrade tests, a stand-in for a later NVIDIA release) must report that
    version everywhere, module and library included, so the version header and
    the uapi header's GDRDRV_VERSION in the staged tree are rewritten to it."""
    header = tree / VERSION_HEADER
    text = header.read_text()
    _write_if_changed(header, text, stamp_version_text(text, package_version))
    uapi = tree / UAPI_HEADER
    text = uapi.read_text() if uapi.exists() else ""
    if "#define GDRDRV_VERSION " in text:  # the packaging tests' fixture project has a uapi without it
        _write_if_changed(uapi, text, stamp_uapi_version_text(text, package_version))


def stage(plan: model.Plan, source: Source, dest: Path) -> Path:
    """A build tree: the commit's files, the DKMS source tree and rendered files."""
    extract_commit(source, dest)
    stamp_version(dest, plan.version)
    files = render.render(plan)
    render.write(files, dest)
    if plan.package_type == "rpm":
        # Copied, not rendered: the commit's packaging README as the rpm's %doc.
        readme = dest / PACKAGING_README.relative_to(REPO_ROOT)
        if not readme.exists():
            raise die(f"{readme.relative_to(dest)} is missing at commit {source.commit[:12]}")
        shutil.copy2(readme, dest / "pkgdoc" / "README.md")
    if plan.package_type == "deb":
        for package in plan.packages:
            if package.symbols_file:
                # The library's own symbols file: dpkg-gensymbols fails the
                # build if the built library lost a symbol listed there.
                symbols = dest / package.symbols_file
                if not symbols.exists():
                    raise die(f"{package.symbols_file} is missing at commit {source.commit[:12]}")
                shutil.copy2(symbols, dest / "debian" / f"{package.name}.symbols")
    if plan.with_dkms:
        dkms_root = dest / "pkgroot" / plan.dkms_src.lstrip("/")
        driver = dest / plan.kernel_module.name
        if not driver.is_dir():
            raise die(f"no {plan.kernel_module.name}/ directory at commit {source.commit[:12]}")
        # Dotfiles (.gitignore, editor state) are not module sources.
        shutil.copytree(driver, dkms_root, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".*"))
        for src, dst in plan.kernel_module.extra_sources.items():
            target = dkms_root / dst
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(dest / src, target)
    _clamp_mtimes(dest, source.epoch)
    return dest


@contextlib.contextmanager
def _exclusive(workdir: Path) -> Iterator[None]:
    """One build at a time in a fixed build directory (tests may run side by side)."""
    BUILD_ROOT.mkdir(parents=True, exist_ok=True)
    with (BUILD_ROOT / f".{workdir.name}.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another build in {workdir}")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# What a prebuilt module is built for without NVIDIA sources (gdrdrv/Makefile's variables).
PREBUILT_NVIDIA_TARGET = {"NVIDIA_IS_OPENSOURCE": "y", "GDRDRV_P2P_PT_MAJOR": "2"}


def _build_env(epoch: int, jobs: int, nvidia_src_dir: str = "") -> dict[str, str]:
    env = {
        "SOURCE_DATE_EPOCH": str(epoch),
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "DEB_BUILD_OPTIONS": f"parallel={jobs} nocheck",
        "MAKEFLAGS": "",
    }
    if nvidia_src_dir:
        env["NVIDIA_SRC_DIR"] = nvidia_src_dir  # gdrdrv's make builds against that driver's P2P symbols
    else:
        # The prebuilt-module packages are built where no NVIDIA driver is: they are
        # named for the open kernel modules and page table 2.x (drivers 580 and newer),
        # and gdrcopy_doctor on a node reports a driver that differs.  (gdrdrv's make
        # takes variables from the environment, and refuses to guess without them.)
        env.update(PREBUILT_NVIDIA_TARGET)
    return env


def build_debs(
    plan: model.Plan,
    source: Source,
    output: Path = DIST,
    *,
    jobs: int = 2,
    dry_run: bool = False,
    check_deps: bool = True,
    host_arch: str = "",
    nvidia_src_dir: str = "",
    suite_root: Path | None = None,
) -> list[Path]:
    """dpkg-buildpackage in a fixed directory; the .deb files land in `output`.

    `check_deps=False` lets dpkg-buildpackage go on with Build-Depends missing (-d).
    `host_arch` (a Debian architecture): cross-build for it with Debian's cross toolchain.
    `suite_root`: build chrooted in that suite's root (gdrkit.packaging.suiteroot), not on this host.
    """
    workdir = BUILD_ROOT / "deb"
    tree = workdir / f"{plan.project.source}-{plan.version}"
    log(f"deb: staging {source.commit[:12]} in {tree}")
    if dry_run:
        cross = " ".join(cross_deb_args(host_arch))
        where = f" chrooted in {suite_root}" if suite_root else ""
        print(
            f"[dry-run] stage {source.commit[:12]} into {tree}; dpkg-buildpackage -b {cross}{where};"
            f" copy *.deb to {output}"
        )
        return []
    with _exclusive(workdir):
        return _build_debs_locked(
            plan, source, output, workdir, tree, jobs, check_deps, host_arch, nvidia_src_dir, suite_root
        )


def _build_debs_locked(
    plan: model.Plan,
    source: Source,
    output: Path,
    workdir: Path,
    tree: Path,
    jobs: int,
    check_deps: bool = True,
    host_arch: str = "",
    nvidia_src_dir: str = "",
    suite_root: Path | None = None,
) -> list[Path]:
    if workdir.exists():
        shutil.rmtree(workdir)
    stage(plan, source, tree)
    if suite_root is not None:
        suite = plan.family.release.build_suite if isinstance(plan.family, DebianFamily) else suite_root.name
        built = suiteroot.build(suite_root, workdir, tree, epoch=source.epoch, jobs=jobs, suite=suite, log_dir=LOG_DIR)
        _copy_debug(_deb_debug(workdir), output)
        return _copy_out([p for p in built if not _is_deb_debug(p)], output)
    run_step(
        f"deb: dpkg-buildpackage ({', '.join(p.name for p in plan.packages)})",
        [
            "dpkg-buildpackage",
            "-b",
            "-us",
            "-uc",
            "--no-sign",
            f"-j{jobs}",
            *([] if check_deps or host_arch else ["-d"]),
            *cross_deb_args(host_arch),
        ],  # fmt: skip
        log_dir=LOG_DIR,
        cwd=tree,
        env=_build_env(source.epoch, jobs, nvidia_src_dir),
        hint=f"the packaging files are staged in {tree}",
    )
    built = [p for p in sorted(workdir.glob("*.deb")) if not _is_deb_debug(p)]
    if not built:
        raise die(f"dpkg-buildpackage produced no .deb in {workdir}")
    _copy_debug(_deb_debug(workdir), output)
    return _copy_out(built, output)


# The debug packages (-dbgsym .ddeb, -debuginfo and -debugsource .rpm) go
# beside the others, in their own directory: published repositories, images
# and the install tests take the package directory's files as they are.
DEBUG_SUBDIR = "debug"


def _is_deb_debug(path: Path) -> bool:
    """A -dbgsym package (dh_strip's: .deb on Debian, .ddeb on Ubuntu)."""
    return "-dbgsym_" in path.name


def _deb_debug(workdir: Path) -> list[Path]:
    return sorted(p for p in [*workdir.glob("*.deb"), *workdir.glob("*.ddeb")] if _is_deb_debug(p))


def _copy_debug(built: Iterable[Path], output: Path) -> None:
    _copy_out(built, output / DEBUG_SUBDIR)


def debug_packages(built: Iterable[Path]) -> list[Path]:
    """The debug packages of the same build as `built` (in their output's debug/), by name and version."""
    found: dict[Path, None] = {}
    for path in built:
        fields = package_fields(path)
        directory = path.parent / DEBUG_SUBDIR
        if path.suffix == ".rpm":
            pattern = f"*-debug*-{fields.version}.*.rpm"
        else:
            pattern = f"*-dbgsym_{fields.version.split(':')[-1]}_*.*deb"
        for candidate in sorted(directory.glob(pattern)):
            found[candidate] = None
    return list(found)


def _copy_out(built: Iterable[Path], output: Path) -> list[Path]:
    output.mkdir(parents=True, exist_ok=True)
    result = []
    for deb in built:
        target = output / deb.name
        shutil.copy2(deb, target)
        result.append(target)
    return result


def _deterministic_tarball(tree: Path, tarball: Path, epoch: int) -> None:
    """A .tar.gz whose bytes depend only on the files: sorted, fixed owners and times."""
    prefix = tree.name
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in [tree, *sorted(tree.rglob("*"))]:
            info = tar.gettarinfo(str(path), arcname=f"{prefix}/{path.relative_to(tree)}".rstrip("/."))
            if path == tree:
                info.name = prefix
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = epoch
            info.pax_headers = {}
            if info.isfile():
                info.mode = 0o755 if info.mode & 0o111 else 0o644
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                if info.isdir():
                    info.mode = 0o755
                tar.addfile(info)
    with tarball.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        gz.write(buffer.getvalue())


RPM_REPRODUCIBLE_DEFINES = {
    # Build host and times must not leak into the headers.
    "_buildhost": "reproducible",
    "use_source_date_epoch_as_buildtime": "1",
    "clamp_mtime_to_source_date_epoch": "1",
    "source_date_epoch_from_changelog": "0",
    # The debuginfo packages find the stripped files' debug data by their
    # debuglink (find-debuginfo adds it); /usr/lib/debug/.build-id links
    # would be per-build noise.
    "_build_id_links": "none",
    # Doc and license dirs named as on RHEL and SUSE (Debian's rpm adds -%{VERSION}).
    "_docdir_fmt": "%{NAME}",
    # Debian's rpm runs brp-elfperms only where elfutils happens to be installed; it drops
    # the x bit of shared objects (rpmlint: shared-library-not-executable), so the package
    # would depend on the build host.  RHEL's own libraries are 0755, as make install leaves them.
    "__brp_elfperms": "%{nil}",
}


def cross_rpm_args(host_arch: str) -> list[str]:
    """rpmbuild's arguments for a cross build (pure): the target, and the cross tools for the spec's
    CC and for rpm's own strip and objdump (which must read the target's ELF files)."""
    if not host_arch:
        return []
    target = arch(host_arch)
    argv = ["--target", f"{target.uname}-linux"]
    for macro, tool in (("__cc", "gcc"), ("__strip", "strip"), ("__objdump", "objdump")):
        argv += ["--define", f"{macro} {target.cross_prefix}{tool}"]
    return argv


def rpm_dist_tag(fam: Family) -> str:
    """What %{?dist} is for the release a family builds for: .el8, .sle15 (pure)."""
    return fam.target_release.dist_tag if isinstance(fam, RpmFamily) else ""


def toolchain_rpm_args(toolchain: Toolchain | None) -> list[str]:
    """rpmbuild's arguments that make the spec's CC and AR those of `toolchain` (pure)."""
    if toolchain is None:
        return []
    return ["--define", f"__cc {toolchain.cc}", "--define", f"__ar {toolchain.ar}"]


def rpm_toolchain(fam: Family, host_arch: str, directory: Path, *, dry_run: bool = False) -> Toolchain | None:
    """Zig's cc for the family's release where this host's glibc is newer than the release's, else None."""
    if not toolchain.needs_baseline_toolchain(fam.glibc, toolchain.host_glibc()):
        return None
    return toolchain.zig_toolchain(directory, arch(host_arch or platform.machine()), fam.glibc, dry_run=dry_run)


def build_rpms(
    plan: model.Plan,
    source: Source,
    output: Path = DIST,
    *,
    jobs: int = 2,
    dry_run: bool = False,
    host_arch: str = "",
    nvidia_src_dir: str = "",
) -> list[Path]:
    """rpmbuild -bb from a deterministic tarball; the .rpm files land in `output` (cross-built for `host_arch`).

    They carry the release's dist tag, and link against its glibc (Zig's cc where this host's is newer).
    """
    topdir = BUILD_ROOT / f"rpm-{plan.family.name}"
    tree = topdir / "BUILD-SOURCE" / f"{plan.project.source}-{plan.version}"
    tools = rpm_toolchain(plan.family, host_arch, BUILD_ROOT / "toolchain" / plan.family.release_name, dry_run=dry_run)
    if dry_run:
        cross = " ".join([*cross_rpm_args(host_arch), *toolchain_rpm_args(tools)])
        print(f"[dry-run] stage {source.commit[:12]} into {tree}; rpmbuild -bb {cross}; copy *.rpm to {output}")
        return []
    with _exclusive(topdir):
        return _build_rpms_locked(plan, source, output, topdir, tree, jobs, host_arch, nvidia_src_dir, tools)


def _build_rpms_locked(
    plan: model.Plan,
    source: Source,
    output: Path,
    topdir: Path,
    tree: Path,
    jobs: int,
    host_arch: str = "",
    nvidia_src_dir: str = "",
    tools: Toolchain | None = None,
) -> list[Path]:
    if topdir.exists():
        shutil.rmtree(topdir)
    log(f"rpm ({plan.family.name}, {plan.family.release_name}): staging {source.commit[:12]}")
    stage(plan, source, tree)
    (topdir / "SOURCES").mkdir(parents=True)
    (topdir / "SPECS").mkdir()
    tarball = topdir / "SOURCES" / f"{plan.project.source}-{plan.version}.tar.gz"
    _deterministic_tarball(tree, tarball, source.epoch)
    spec = topdir / "SPECS" / "gdrcopy.spec"
    shutil.copy2(tree / "gdrcopy.spec", spec)
    defines = dict(RPM_REPRODUCIBLE_DEFINES, _topdir=str(topdir), _smp_mflags=f"-j{jobs}")
    defines["dist"] = rpm_dist_tag(plan.family) or "%{nil}"
    argv: list[str] = ["rpmbuild", "-bb", "--nodeps", *cross_rpm_args(host_arch), *toolchain_rpm_args(tools)]
    for name, value in defines.items():
        argv += ["--define", f"{name} {value}"]
    argv.append(str(spec))
    run_step(
        f"rpm ({plan.family.name}): rpmbuild ({', '.join(p.name for p in plan.packages)})",
        argv,
        log_dir=LOG_DIR,
        env=_build_env(source.epoch, jobs, nvidia_src_dir),
        hint=f"the spec is {spec}",
    )
    output.mkdir(parents=True, exist_ok=True)
    result = []
    rpms = sorted((topdir / "RPMS").rglob("*.rpm"))
    debug = [rpm for rpm in rpms if re.search(r"-debug(info|source)-", rpm.name)]
    _copy_debug(debug, output)
    for rpm in rpms:
        if rpm in debug:
            continue
        target = output / rpm.name
        shutil.copy2(rpm, target)
        result.append(target)
    if not result:
        raise die(f"rpmbuild produced no .rpm under {topdir / 'RPMS'}")
    return result


def deb_files(deb: Path) -> list[str]:
    """The paths a .deb installs (files and links, not directories)."""
    listing = run(["dpkg-deb", "--contents", deb], capture=True).stdout
    paths = []
    for line in listing.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 6 or fields[0].startswith("d"):
            continue
        path = fields[5].split(" -> ")[0]
        paths.append(path[1:] if path.startswith("./") else path)
    return paths


def rpm_files(rpm: Path) -> list[str]:
    """The paths an .rpm installs (`rpm -qlp`, directories dropped)."""
    listing = run(["rpm", "-qp", "--qf", "[%{FILEMODES:perms} %{FILENAMES}\n]", rpm], capture=True).stdout
    return [line.split(" ", 1)[1] for line in listing.splitlines() if line and not line.startswith("d")]


@dataclass(frozen=True)
class PackageFields:
    """Who a package file is, as its package manager reads it."""

    name: str
    version: str  # deb: [epoch:]upstream[-revision]; rpm: [epoch:]version-release
    arch: str


def package_fields(path: Path) -> PackageFields:
    """A .deb's or .rpm's name, version and architecture from its header (dpkg-deb, rpm), never from its file name.

    The one place gdrkit asks: file names need not follow the package's
    fields (a release's pool, a renamed download, a kernel ABI with dashes).
    """
    if path.suffix == ".deb":
        out = run(["dpkg-deb", "--field", path, "Package", "Version", "Architecture"], capture=True).stdout
        fields = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
        return PackageFields(fields["Package"], fields["Version"], fields["Architecture"])
    if path.suffix != ".rpm":
        raise die(f"{path}: not a .deb or .rpm file")
    query = "%{NAME}\\t%{EPOCHNUM}\\t%{VERSION}\\t%{RELEASE}\\t%{ARCH}"
    out = run(["rpm", "-qp", "--nosignature", "--qf", query, path], capture=True).stdout
    name, epoch, version, release, architecture = out.strip().split("\t")
    return PackageFields(name, f"{epoch + ':' if epoch != '0' else ''}{version}-{release}", architecture)


def package_name(path: Path) -> str:
    """The package a .deb or .rpm file holds (package_fields)."""
    return package_fields(path).name


def verify_contents(plan: model.Plan, built: Iterable[Path], host_arch: str = "") -> list[str]:
    """Every built package's files against packages/gdrcopy.yaml; problems, one per line."""
    values = {"multiarch": _multiarch(host_arch)}
    problems = []
    seen = set()
    for path in built:
        name = package_name(path)
        seen.add(name)
        try:
            package = plan.package(name)
        except KeyError:
            problems.append(f"{path.name}: package {name} is not in the description")
            continue
        files = deb_files(path) if path.suffix == ".deb" else rpm_files(path)
        problems += model.check_contents(package, files, values)
    for package in plan.packages:
        if package.name not in seen:
            problems.append(f"{package.name}: described but not built")
    return problems


def _multiarch(host_arch: str = "") -> str:
    if host_arch:
        return arch(host_arch).triplet
    if shutil.which("dpkg-architecture"):
        return run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], capture=True).stdout.strip()
    return f"{platform.machine()}-linux-gnu"


def cross_deb_args(host_arch: str) -> list[str]:
    """dpkg-buildpackage's arguments for a cross build (pure): the host architecture, and -d.

    -d: the Build-Depends are the build machine's (debhelper, dkms); checked for
    the host architecture they would ask for an arm64 debhelper.
    """
    return [f"--host-arch={arch(host_arch).debian}", "-d"] if host_arch else []


def ensure_cross_build_deps(host_arch: str, *, dry_run: bool = False) -> None:
    """Debian's cross toolchain for `host_arch` and its libc through multiarch (dpkg-shlibdeps reads it)."""
    target = arch(host_arch)
    foreign = run(["dpkg", "--print-foreign-architectures"], capture=True).stdout.split()
    if target.debian not in foreign:
        if dry_run:
            print(f"[dry-run] dpkg --add-architecture {target.debian}; apt-get update")
        else:
            log(f"adding {target.debian} to dpkg's architectures (for its libc6-dev, which cross builds link)")
            run(["dpkg", "--add-architecture", target.debian])
            run(["apt-get", "update", "-q"], capture=True)
    wanted = [name.format(arch=target.debian) for name in DebianFamily.cross_build_deps]
    wanted.append(f"binutils-{target.triplet}")  # rpm's strip and objdump for the target's ELF
    ensure_debian_packages(wanted, dry_run=dry_run)


def lint(paths: Iterable[Path]) -> tuple[int, str]:
    """lintian on .deb, rpmlint on .rpm files (with packages/rpmlintrc): (number of errors, the report)."""
    debs = [str(p) for p in paths if p.suffix == ".deb"]
    rpms = [str(p) for p in paths if p.suffix == ".rpm"]
    report = []
    errors = 0
    if debs:
        result = run(
            ["lintian", "--no-tag-display-limit", "--suppress-tags-from-file", str(LINTIAN_SUPPRESS), *debs],
            capture=True,
            check=False,
        )
        report.append(result.stdout + result.stderr)
        errors += sum(1 for line in result.stdout.splitlines() if line.startswith("E: "))
    if rpms:
        rc = REPO_ROOT / "packages" / "rpmlintrc"
        argv = ["rpmlint", "-r", str(rc), *rpms] if rc.exists() else ["rpmlint", *rpms]
        result = run(argv, capture=True, check=False)
        report.append(result.stdout + result.stderr)
        errors += sum(1 for line in result.stdout.splitlines() if ": E: " in line)
    return errors, "\n".join(report)
