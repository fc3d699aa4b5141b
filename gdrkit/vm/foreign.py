"""Running another architecture's programs on this host: qemu-user through binfmt_misc.

Its own module below rootfs.py and cross.py, which both need it (a root of
another architecture runs its maintainer scripts this way; the cross build
runs ldconfig and depmod in it).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from gdrkit.distro.arch import HOST_ARCH, Arch
from gdrkit.system import die, run

BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")


def binfmt_ready(entry_text: str) -> bool:
    """Whether a binfmt_misc entry is enabled with the F flag (the interpreter opened at registration,
    so it works inside chroots and containers that lack it) (pure)."""
    lines = entry_text.splitlines()
    flags = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("flags:")), "")
    return bool(lines) and lines[0].strip() == "enabled" and "F" in flags


def ensure_foreign_exec(arch: Arch) -> None:
    """Make the kernel run `arch`'s programs through qemu-user (binfmt_misc), or die saying how."""
    if arch == HOST_ARCH:
        return
    entry = BINFMT_DIR / f"qemu-{arch.uname}"
    if not (BINFMT_DIR / "status").exists():
        run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT_DIR)], check=False)
    if not entry.exists() and shutil.which("update-binfmts"):
        run(["update-binfmts", "--enable", f"qemu-{arch.uname}"], check=False)
    text = entry.read_text() if entry.exists() else ""
    if not binfmt_ready(text):
        raise die(
            f"this host cannot run {arch.debian} programs: binfmt_misc has no enabled qemu-{arch.uname}"
            " entry with the F flag",
            f"as root: mount -t binfmt_misc binfmt_misc {BINFMT_DIR}; apt-get install qemu-user-static"
            f" binfmt-support; update-binfmts --enable qemu-{arch.uname}",
        )
