"""Building for a root of another architecture with Debian's cross toolchain.

A root of another architecture (arm64) holds no compiler: its programs
would run under qemu-user, many times slower.  Everything is built instead
in a *cross root*: the same suite for the host's architecture with
`gcc-<triplet>` (the suite's compiler, the one its kernels were built
with), the cross libc, the suite's `linux-kbuild` (host tools) and the
target kernel's headers, unpacked from the target architecture's
`linux-headers-<abi>` (its own dependencies name an arm64 gcc, which
cannot be installed next to the host's).  The parts are installed into a
staging directory there and copied into the target root, where ldconfig
and depmod then run under qemu-user (binfmt_misc).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from gdrkit.distro.arch import HOST_ARCH, Arch
from gdrkit.distro.debian import mmdebstrap_command
from gdrkit.system import die, ensure_debian_packages, log, run
from gdrkit.vm.rootfs import (
    APT_OPTIONS,
    DPKG_EXCLUDES,
    SOURCE_DIR,
    BuildReport,
    StepResult,
    SuiteRoot,
    build_in_root,
    build_root_with_mmdebstrap,
    default_steps,
    in_root,
    locked,
    lock_file,
    roots_dir,
    sync_source,
)
from gdrkit.vm.foreign import ensure_foreign_exec
from gdrkit.vm.suites import KernelChoice, suite_lists

# Libraries of the target architecture the cross root gets through multiarch:
# what the library's unit tests link (they then run there under qemu-user).
TARGET_LIBRARIES = ("libcmocka-dev",)
# Where the cross build installs, inside the cross root.
STAGE = "/stage"
_DEPENDS = re.compile(r"^Depends: (.*)$", re.MULTILINE)


def cross_packages(arch: Arch, headers_depends: list[str]) -> list[str]:
    """What a cross root for `arch` is built with, given the Depends of the target's headers package (pure).

    Of those Depends, the host-architecture parts: `linux-kbuild-*` (Multi-Arch:
    foreign host tools) and `linux-headers-*-common` (Architecture: all).
    """
    keep = [name for name in headers_depends if name.startswith("linux-kbuild-") or name.endswith("-common")]
    return ["build-essential", f"gcc-{arch.triplet}", f"libc6-dev-{arch.debian}-cross", *keep]


def parse_depends(show: str) -> list[str]:
    """The package names of the first `Depends:` line of `apt-cache show` output, alternatives' first (pure)."""
    found = _DEPENDS.search(show)
    if not found:
        return []
    names = []
    for clause in found.group(1).split(","):
        first = clause.split("|")[0].strip()
        names.append(first.split()[0].split(":")[0] if first else "")
    return [name for name in names if name]


def cross_root_name(choice: KernelChoice) -> str:
    """`trixie-6.12.57+deb13-cross-arm64`: one per suite, kernel build and target architecture (pure)."""
    return f"{choice.suite.name}-{choice.version}-cross-{choice.arch.debian}"


def cross_mmdebstrap_command(choice: KernelChoice, target: Path, packages: list[str]) -> list[str]:
    """The mmdebstrap command line of the cross root (pure)."""
    return mmdebstrap_command(choice.suite, str(target), packages, apt_options=APT_OPTIONS, dpkg_excludes=DPKG_EXCLUDES)


def prepare_cross_root(choice: KernelChoice, *, refresh: bool = False) -> SuiteRoot:
    """The cross root for `choice`, built once, with the headers of `choice.abi` unpacked in it."""
    target_lists = suite_lists(choice.suite, refresh=refresh, arch=choice.arch)
    headers = f"linux-headers-{choice.abi}"
    status, show = target_lists.query(["show", "--no-all-versions", headers])
    if status != 0 or f"Package: {headers}" not in show:
        raise die(f"{choice.suite.name} has no {headers} for {choice.arch.debian}", "try again with --refresh")
    name = cross_root_name(choice)
    root = SuiteRoot(choice.suite.name, choice.abi, roots_dir() / name, HOST_ARCH)
    stamp = roots_dir() / f"{name}.json"
    with locked(lock_file(root.root_dir)):
        if not stamp.exists() or not (root.root_dir / "usr").is_dir():
            packages = cross_packages(choice.arch, parse_depends(show))
            seconds = _build(choice, root.root_dir, packages)
            stamp.write_text(json.dumps({"suite": choice.suite.name, "cross": choice.arch.debian,
                                         "packages": packages, "build_seconds": round(seconds, 1)}))  # fmt: skip
        _add_target_libraries(root, stamp, choice.arch)
        if not (root.root_dir / "usr" / "src" / headers).is_dir():
            deb = target_lists.download(headers)
            log(f"unpacking {deb.name} into the cross root {root.root_dir.name}")
            # Unpacked aside, then copied as the root sees its paths: unpacked
            # in place, bookworm's /lib/modules/... would replace the /lib link.
            with tempfile.TemporaryDirectory(prefix="gdrkit-headers-") as scratch:
                run(["dpkg-deb", "-x", str(deb), scratch])
                install_stage(Path(scratch), root.root_dir)
    return root


def target_library_script(arch: Arch, packages: Sequence[str] = TARGET_LIBRARIES) -> str:
    """The shell that adds `arch` to a cross root's dpkg and installs its `packages` (pure)."""
    wanted = " ".join(f"{name}:{arch.debian}" for name in packages)
    return (
        f"dpkg --add-architecture {arch.debian} && apt-get -q update"
        f" && DEBIAN_FRONTEND=noninteractive apt-get -q -y install --no-install-recommends {wanted}"
        " && apt-get clean"
    )


def _add_target_libraries(root: SuiteRoot, stamp: Path, arch: Arch) -> None:
    facts = json.loads(stamp.read_text())
    if facts.get("target_libraries") == list(TARGET_LIBRARIES):
        return
    log(f"adding {', '.join(TARGET_LIBRARIES)} for {arch.debian} to the cross root {root.root_dir.name}")
    status, output = in_root(root.root_dir, target_library_script(arch))
    if status != 0:
        raise die(
            f"installing {arch.debian} libraries into {root.root_dir} failed:\n{output[-2000:]}",
            "check network access to deb.debian.org",
        )
    facts["target_libraries"] = list(TARGET_LIBRARIES)
    stamp.write_text(json.dumps(facts))


def unit_test_script(arch: Arch) -> str:
    """The library's unit tests built with the cross compiler; binfmt runs them under qemu-user (pure).

    The copy tests' own report (which routine sets ran) follows the summary.
    """
    unit = f"/{SOURCE_DIR}/tests/unit"
    return f"make -C {unit} check CC={arch.cross_prefix}gcc; rc=$?; cat {unit}/build/test_copy.tap; exit $rc"


def cross_unit_tests(choice: KernelChoice, *, refresh: bool = False) -> tuple[int, str]:
    """Build and run the library's unit tests for `choice.arch` in its cross root: (status, output)."""
    ensure_foreign_exec(choice.arch)
    cross = prepare_cross_root(choice, refresh=refresh)
    with locked(lock_file(cross.root_dir)):
        sync_source(cross)
        return in_root(cross.root_dir, unit_test_script(choice.arch))


def _build(choice: KernelChoice, target: Path, packages: list[str]) -> float:
    return build_root_with_mmdebstrap(
        f"the {choice.suite.name} cross root for {choice.arch.debian}",
        target,
        lambda partial: cross_mmdebstrap_command(choice, partial, packages),
    )


def inside(root: Path, relative: PurePosixPath) -> Path:
    """Where `relative` lands in `root` as a chroot sees it: symbolic links followed within `root`, never out of it (pure but for reading links)."""
    resolved = PurePosixPath("/")
    parts = list(relative.parts)
    hops = 0
    while parts:
        part = parts.pop(0)
        if part in ("", "/", "."):
            continue
        if part == "..":
            resolved = resolved.parent
            continue
        candidate = root / resolved.relative_to("/") / part
        if parts and candidate.is_symlink():
            hops += 1
            if hops > 40:
                raise die(f"too many symbolic links under {root} resolving {relative}")
            link = PurePosixPath(os.readlink(candidate))
            if link.is_absolute():
                resolved = PurePosixPath("/")
            parts = list(link.parts) + parts
            continue
        resolved = resolved / part
    return root / resolved.relative_to("/")


def install_stage(stage: Path, target_root: Path) -> int:
    """Copy the staged files into `target_root` as a chroot would see the paths; returns how many."""
    count = 0
    for directory, _, files in os.walk(stage):
        for name in files:
            source = Path(directory) / name
            destination = inside(target_root, PurePosixPath("/", source.relative_to(stage).as_posix()))
            destination.parent.mkdir(parents=True, exist_ok=True)
            if destination.is_symlink() or destination.exists():
                destination.unlink()
            if source.is_symlink():
                destination.symlink_to(os.readlink(source))
            else:
                shutil.copy2(source, destination)
            count += 1
    return count


_WARNING = re.compile(r"\bwarning:|^WARNING: ", re.IGNORECASE | re.MULTILINE)


def compiler_warnings(outputs: Iterable[str]) -> list[str]:
    """The compiler's and kbuild's warning lines in build outputs (pure)."""
    return [line for text in outputs for line in text.splitlines() if _WARNING.search(line)]


def cross_build(root: SuiteRoot, choice: KernelChoice, *, refresh: bool = False) -> BuildReport:
    """Cross-build and install everything vm-test needs into `root` (of another architecture)."""
    cross = prepare_cross_root(choice, refresh=refresh)
    report = build_in_root(cross, default_steps(root.abi, cross=root.arch, destdir=STAGE))
    if report.failed:
        return report
    warnings = compiler_warnings(step.output for step in report.steps)
    if warnings:
        # The cross build must stay warning-free (kbuild's and the compiler's warnings alike).
        report.steps.append(StepResult("warnings", "failed", 0.0, "\n".join(warnings), f"{len(warnings)} warning(s)"))
        return report
    start = time.monotonic()
    count = install_stage(cross.root_dir / STAGE.lstrip("/"), root.root_dir)
    report.steps.append(StepResult("install_stage", "ok", time.monotonic() - start, f"{count} files"))
    start = time.monotonic()
    # ldconfig is the root's own, under qemu-user; depmod the host's (module
    # files are data to it, and the root's emulated one takes a minute).
    status, output = in_root(root.root_dir, "ldconfig")
    if status == 0:
        ensure_debian_packages(["kmod"])  # the host's depmod
        done = run(["depmod", "-b", str(root.root_dir), root.abi], capture=True, check=False)
        status, output = done.returncode, done.stdout + done.stderr
    report.steps.append(
        StepResult("ldconfig_depmod", "ok" if status == 0 else "failed", time.monotonic() - start, output,
                   "" if status == 0 else f"exit {status}")
    )  # fmt: skip
    return report
