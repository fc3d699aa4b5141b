"""Ansible from the toolkit's environment (.venv, its fleet extra: requirements/fleet.txt), and what it runs with.

Molecule's docker driver (molecule-plugins) drives Docker through the
community.docker and ansible.posix collections.  Ansible Galaxy is out of
reach here, but PyPI's `ansible` package carries every community collection:
its wheel is downloaded once with pip and only the collections below are
unpacked into the cache, where ANSIBLE_COLLECTIONS_PATH points.
"""

from __future__ import annotations

import os
import shutil
import sys
import zipfile
from pathlib import Path

from gdrkit.system import cache_dir, die, step
from gdrkit.version import REPO_ROOT

ANSIBLE_DIR = REPO_ROOT / "ansible"
ROLE = "gdrcopy"
ROLE_DIR = ANSIBLE_DIR / "roles" / ROLE
# molecule-plugins' docker driver's required_collections, and community.docker's own dependency.
COLLECTIONS = ("community.docker", "ansible.posix", "community.library_inventory_filtering_v1")
# The community package of the ansible-core that requirements/fleet.txt pins (2.19: ansible 12).
COLLECTIONS_PACKAGE = "ansible==12.3.0"


def bindir() -> Path:
    """The toolkit environment's bin/ (ansible-playbook, molecule, ansible-lint)."""
    return Path(sys.executable).parent


def collections_dir() -> Path:
    return cache_dir() / "ansible" / COLLECTIONS_PACKAGE.replace("==", "-")


def _collection_path(root: Path, name: str) -> Path:
    namespace, collection = name.split(".")
    return root / "ansible_collections" / namespace / collection


def have_collections(root: Path) -> bool:
    return all((_collection_path(root, name) / "MANIFEST.json").is_file() for name in COLLECTIONS)


def unpack_collections(wheel: Path, root: Path) -> None:
    """Only COLLECTIONS out of the `ansible` wheel, into root/ansible_collections (then renamed into place)."""
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    prefixes = tuple(f"ansible_collections/{name.replace('.', '/')}/" for name in COLLECTIONS)
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.namelist() if m.startswith(prefixes)]
        if not members:
            raise die(
                f"{wheel.name} holds none of {', '.join(COLLECTIONS)}", f"is {COLLECTIONS_PACKAGE} the right pin?"
            )
        archive.extractall(partial, members)
    if not have_collections(partial):
        missing = [n for n in COLLECTIONS if not (_collection_path(partial, n) / "MANIFEST.json").is_file()]
        raise die(f"{wheel.name} lacks {', '.join(missing)}", f"pick an `ansible` release that has them ({__file__})")
    shutil.rmtree(root, ignore_errors=True)
    partial.rename(root)


def ensure_collections(*, dry_run: bool = False) -> Path:
    """The directory for ANSIBLE_COLLECTIONS_PATH, with COLLECTIONS in it (downloaded once)."""
    root = collections_dir()
    if have_collections(root):
        return root
    wheels = cache_dir() / "ansible" / "wheels"
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q"]
    argv += ["-d", str(wheels), COLLECTIONS_PACKAGE]
    if dry_run:
        print(f"[dry-run] {' '.join(argv)}; unpack {', '.join(COLLECTIONS)} into {root}")
        return root
    version = COLLECTIONS_PACKAGE.split("==")[1]
    with step(f"downloading {COLLECTIONS_PACKAGE} from PyPI for {', '.join(COLLECTIONS)} (once)") as current:
        current.run(argv, hint="PyPI must be reachable (pip's own settings apply)")
        wheel = wheels / f"ansible-{version}-py3-none-any.whl"
        if not wheel.is_file():
            raise die(f"pip left no {wheel.name} in {wheels}")
        unpack_collections(wheel, root)
    return root


def environment(**extra: str) -> dict[str, str]:
    """What ansible-playbook and molecule run with: this environment's programs, our roles, the collections."""
    return {
        "PATH": f"{bindir()}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_COLLECTIONS_PATH": str(collections_dir()),
        "ANSIBLE_ROLES_PATH": str(ANSIBLE_DIR / "roles"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "NO_COLOR": "1",
        "PY_COLORS": "0",
        **extra,
    }
