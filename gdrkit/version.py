"""The project version, read from its one source: include/gdrcopy_version.h."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
VERSION_HEADER = REPO_ROOT / "include" / "gdrcopy_version.h"


def _read_version(header: Path = VERSION_HEADER) -> tuple[int, int, int]:
    text = header.read_text()
    parts = []
    for name in ("MAJOR", "MINOR", "PATCH"):
        match = re.search(rf"^#define GDRCOPY_VERSION_{name} (\d+)$", text, re.MULTILINE)
        if match is None:
            raise RuntimeError(f"{header}: no GDRCOPY_VERSION_{name} line")
        parts.append(int(match.group(1)))
    return parts[0], parts[1], parts[2]


MAJOR, MINOR, PATCH = _read_version()
VERSION = f"{MAJOR}.{MINOR}.{PATCH}"


def api_version() -> str:
    """The interface version (MAJOR.MINOR) that library and driver report."""
    return f"{MAJOR}.{MINOR}"


# What our .deb and .rpm packages are versioned (before the release, -1):
# MAJOR.MINOR+dropinPATCH, e.g. 2.6+dropin1 for 2.6.1.  NVIDIA versions its
# packages MAJOR.MINOR[.PATCH] (2.6-1, 2.5.1-1, 2.4.4-1) and never uses "+",
# so no package of ours can ever carry an NVIDIA version string, and the
# maintainer scripts tell our packages from NVIDIA's by the mark.  The "+"
# sorts below "." in dpkg's and rpm's comparisons: ours sort above the
# NVIDIA release whose interface they implement (2.6+dropin1 > 2.6-1) and
# below NVIDIA's next one (< 2.6.1-1 < 2.7-1), which upgrades ours in place.
# The programs, library and module keep MAJOR.MINOR.PATCH (2.6.1).
PACKAGE_MARK = "+dropin"


def package_version(version: str = VERSION) -> str:
    """The package version of implementation version MAJOR.MINOR.PATCH (pure)."""
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version)
    if match is None:
        raise ValueError(f"version {version!r} is not MAJOR.MINOR.PATCH")
    major, minor, patch = match.groups()
    return f"{major}.{minor}{PACKAGE_MARK}{patch}"
