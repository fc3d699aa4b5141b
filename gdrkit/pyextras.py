"""The toolkit's Python extras: tools a task installs into .venv when it first needs them.

`./toolkit` installs only requirements.txt (the base: what building packages
needs).  The rest comes in groups, one pinned file each under requirements/:
a task names the groups it uses (gdrkit.tasks.convention's `extras=`), and
before it runs, any pin of those groups that the environment does not hold
is installed with pip, once.  pip's own settings apply (PIP_INDEX_URL,
PIP_FIND_LINKS with PIP_NO_INDEX for an offline cache: docs/developers.md).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from gdrkit.system import die, step
from gdrkit.version import REPO_ROOT

REQUIREMENTS_DIR = REPO_ROOT / "requirements"
# The groups, and what each is for (the file's own first line says it too).
EXTRAS = {
    "test": "pytest, mypy, ruff, import-linter, NumPy: ./toolkit test and lint",
    "containers": "the Docker SDK: matrix, compile-sweep, build-image, molecule",
    "kube": "kubernetes-validate: k8s-manifests",
    "fleet": "ansible-core, ansible-lint, Molecule: molecule, lint",
}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==(\S+)$")


def requirements_file(group: str) -> Path:
    """The pinned file of extra `group`; dies with the known groups."""
    if group not in EXTRAS:
        raise die(f"unknown Python extra {group!r}", f"use one of: {', '.join(EXTRAS)}")
    return REQUIREMENTS_DIR / f"{group}.txt"


def pins(text: str) -> list[tuple[str, str]]:
    """(distribution, version) of each `name==version` line of a requirements file (pure).

    Every line is a pin or a comment: a looser line would leave "installed"
    undecidable, so it is refused.
    """
    found = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = PIN.match(line)
        if match is None:
            raise die(f"requirements line {number} {raw.strip()!r} is not NAME==VERSION", "pin it exactly")
        found.append((match.group(1), match.group(3)))
    return found


def installed_version(distribution: str) -> str:
    """The version of `distribution` in this environment ("" when it has none)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return ""


def missing(groups: Iterable[str]) -> dict[str, list[str]]:
    """Per group, its pins this environment does not hold at that version."""
    result: dict[str, list[str]] = {}
    for group in dict.fromkeys(groups):
        wanted = pins(requirements_file(group).read_text())
        lacking = [f"{name}=={version}" for name, version in wanted if installed_version(name) != version]
        if lacking:
            result[group] = lacking
    return result


def ensure(groups: Iterable[str], *, dry_run: bool = False) -> None:
    """Install the extras `groups` into this environment where any pin is missing (idempotent)."""
    for group, lacking in missing(groups).items():
        path = requirements_file(group)
        argv = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(path)]
        if dry_run:
            print(f"[dry-run] would install the {group} extra ({', '.join(lacking)}): {' '.join(argv)}")
            continue
        with step(f"installing the toolkit's {group} extra ({EXTRAS[group]}; once)") as current:
            current.run(
                argv,
                hint="PyPI must be reachable, or a prepared cache named by PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR"
                " (docs/developers.md#building-offline)",
            )
