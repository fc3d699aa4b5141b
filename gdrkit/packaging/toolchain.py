"""The C toolchain a package build links with: this host's, or Zig's for an older glibc.

A program linked here against this host's glibc (Debian 12: 2.36) may need
symbol versions up to 2.36, which EL8 (2.28), EL9 (2.34) and SLE 15 (2.31)
lack.  Zig's `cc` (clang, with every glibc's symbol lists and start files)
links against a chosen glibc version instead: `-target x86_64-linux-gnu.2.28`
gives binaries that need nothing newer.  It comes from PyPI (the `ziglang`
wheel), installed on first use into the toolkit's cache, pinned.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from gdrkit.distro.arch import Arch
from gdrkit.system import cache_dir, die, log, step

ZIG_PIN = "ziglang==0.17.0"
# lld (Zig's linker) collects unreferenced sections unless told not to; the
# test programs find their tests through a section's __start_/__stop_
# symbols, which lld does not count as references (GNU ld does).  And only
# the GNU hash section, as GNU ld writes by default (lld adds the SYSV one):
# the files are alike whichever linker made them, and packages/rpmlintrc's
# filter for rpmlint's missing-hash-section holds for both.
ZIG_CC_FLAGS = ("-Wl,--no-gc-sections", "-Wl,--hash-style=gnu")

# The hardening every package's ELF files get (gdrkit.packaging.hardening
# checks them), as Fedora's and Debian's build flags give it: a strong stack
# protector, _FORTIFY_SOURCE (which needs -O), full RELRO and BIND_NOW, a
# build-id; -g for the debug packages.  The .deb builds take theirs from
# dpkg-buildflags (DEB_BUILD_MAINT_OPTIONS=hardening=+all); the .rpm builds
# these, exported as the environment, where the Makefiles add to them.
# build-id=sha1: 20 bytes, what debugedit (find-debuginfo) handles; lld's default is 8.
# PIE: this host's gcc makes it by default; Zig's cc gets -fPIE and -pie
# from its wrapper for programs (Zig refuses either with -shared).
HARDENING_FLAGS = {
    "CFLAGS": "-O2 -g -fstack-protector-strong",
    "CPPFLAGS": "-D_FORTIFY_SOURCE=2",
    "LDFLAGS": "-Wl,-z,relro -Wl,-z,now -Wl,--build-id=sha1",
}


def version_key(version: str) -> tuple[int, ...]:
    """2.28 -> (2, 28), for comparing glibc and Python versions (pure)."""
    return tuple(int(part) for part in re.findall(r"\d+", version))


def host_glibc() -> str:
    """The glibc this host links against ("2.36")."""
    found = os.confstr("CS_GNU_LIBC_VERSION") or ""
    return found.split()[-1] if found else ""


def needs_baseline_toolchain(target_glibc: str, host: str) -> bool:
    """Whether a build for `target_glibc` must link against that glibc rather than this host's (pure).

    This host's toolchain is fine where its glibc is not newer than the target's.
    """
    if not target_glibc or not host:
        return False
    return version_key(host) > version_key(target_glibc)


def zig_target(target_arch: Arch, glibc: str) -> str:
    """Zig's target triple for `target_arch` with glibc `glibc` (pure): x86_64-linux-gnu.2.28."""
    return f"{target_arch.uname}-linux-gnu.{glibc}"


def manylinux_tag(target_arch: Arch, glibc: str) -> str:
    """The wheel platform tag for `target_arch` at glibc `glibc` (pure): manylinux_2_28_x86_64.

    PEP 600 spells the architecture as uname -m does, as Zig's triple does.
    """
    parts = glibc.split(".")
    if len(parts) != 2 or not all(part.isdigit() for part in parts):
        raise die(f"glibc version {glibc!r} is not MAJOR.MINOR", "fix the release's glibc in gdrkit/distro")
    return f"manylinux_{parts[0]}_{parts[1]}_{target_arch.uname}"


@dataclass(frozen=True)
class Toolchain:
    """The programs a build uses as CC and AR (wrappers around one Zig)."""

    cc: Path
    ar: Path
    target: str  # the Zig target they build for


def zig_home() -> Path:
    return cache_dir() / "toolchains" / ZIG_PIN.replace("==", "-")


def ensure_zig(*, dry_run: bool = False) -> Path:
    """The pinned Zig compiler (installed from PyPI into the cache on first use; idempotent)."""
    home = zig_home()
    binary = home / "ziglang" / "zig"
    if binary.is_file() or dry_run:
        if dry_run and not binary.is_file():
            print(f"[dry-run] pip install --target {home} {ZIG_PIN}")
        return binary
    partial = home.with_name(home.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with step(f"installing {ZIG_PIN} (Zig's cc, for an older glibc; once, into {home})") as current:
        current.run(
            [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target", partial, ZIG_PIN],
            hint="PyPI must be reachable (pip's own settings apply)",
        )
    if not (partial / "ziglang" / "zig").is_file():
        raise die(f"{ZIG_PIN} installed no ziglang/zig under {partial}")
    partial.rename(home)
    return binary


def wrapper_script(zig: Path, tool: str, target: str) -> str:
    """A CC or AR program: one exec of Zig's `tool` for `target` (pure); make and rpm take one word.

    The cc builds programs as PIE: -fPIE -pie when it links, -fPIE when it
    only compiles (-c, -S, -E), neither for a shared object or its objects
    (-shared, -fPIC): Zig refuses PIE flags with -shared.
    """
    if tool != "cc":
        return f'#!/bin/sh\nexec {shlex.join([str(zig), tool])} "$@"\n'
    argv = [str(zig), "cc", "-target", target, *ZIG_CC_FLAGS]
    return (
        "#!/bin/sh\n"
        'pie="-fPIE -pie"\n'
        'for arg in "$@"; do\n'
        '    case "$arg" in\n'
        '        -shared | -fPIC | -fpic) pie="" ;;\n'
        '        -c | -S | -E) [ -z "$pie" ] || pie="-fPIE" ;;\n'
        "    esac\n"
        "done\n"
        f'exec {shlex.join(argv)} $pie "$@"\n'
    )


def zig_toolchain(directory: Path, target_arch: Arch, glibc: str, *, dry_run: bool = False) -> Toolchain:
    """CC and AR wrappers in `directory` that build for `target_arch` against glibc `glibc`."""
    zig = ensure_zig(dry_run=dry_run)
    target = zig_target(target_arch, glibc)
    paths = {}
    for tool in ("cc", "ar"):
        path = directory / f"zig-{tool}"
        paths[tool] = path
        if dry_run:
            continue
        directory.mkdir(parents=True, exist_ok=True)
        path.write_text(wrapper_script(zig, tool, target))
        path.chmod(0o755)
    log(f"toolchain: zig cc -target {target} (links against glibc {glibc})")
    return Toolchain(cc=paths["cc"], ar=paths["ar"], target=target)


def warm_up(tools: Toolchain, directory: Path) -> None:
    """Link one empty program with `tools`: Zig builds its glibc stubs and start files for the target
    once (seconds, cached in its own cache), so a timed build measures only the build."""
    source = directory / "warm_up.c"
    directory.mkdir(parents=True, exist_ok=True)
    source.write_text("int main(void) { return 0; }\n")
    with step(f"preparing zig cc -target {tools.target} (once)") as current:
        current.run([str(tools.cc), "-o", str(directory / "warm_up"), str(source)])
