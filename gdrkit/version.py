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
