"""Empty package files whose headers say what their names say, for tests of code that reads built packages.

gdrkit asks dpkg-deb and rpm which package a file is (gdrkit.packaging.build.package_fields),
never its file name; a test that hands it built packages must hand it real ones.
These hold no files and take a fraction of a second to make.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from gdrkit.system import have_command, run


def empty_package(path: Path) -> Path:
    """Make `path` (name_version_arch.deb or name-version-release.arch.rpm) a package of that name, version and arch."""
    if path.suffix == ".deb":
        return _empty_deb(path)
    if path.suffix == ".rpm":
        return _empty_rpm(path)
    raise ValueError(f"{path.name}: not a .deb or .rpm file name")


def _empty_deb(path: Path) -> Path:
    name, version, arch = path.stem.split("_")
    with tempfile.TemporaryDirectory(prefix="gdrkit-empty-deb-") as work:
        control = Path(work, "DEBIAN", "control")
        control.parent.mkdir()
        control.write_text(
            f"Package: {name}\nVersion: {version}\nArchitecture: {arch}\n"
            "Maintainer: gdrkit tests <tests@invalid>\nDescription: empty test package\n"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        run(["dpkg-deb", "--root-owner-group", "--build", work, path], capture=True)
    return path


def _empty_rpm(path: Path) -> Path:
    if not have_command("rpmbuild"):
        pytest.skip("rpmbuild is not installed (apt-get install rpm): these tests need real .rpm files")
    base, arch = path.name.removesuffix(".rpm").rsplit(".", 1)
    name, version, release = base.rsplit("-", 2)
    with tempfile.TemporaryDirectory(prefix="gdrkit-empty-rpm-") as work:
        spec = Path(work, "empty.spec")
        spec.write_text(
            f"Name: {name}\nVersion: {version}\nRelease: {release}\nSummary: empty test package\n"
            f"License: MIT\nBuildArch: {arch}\n%description\nempty test package\n%files\n"
        )
        run(["rpmbuild", "--quiet", "--define", f"_topdir {work}", "-bb", spec], capture=True)
        (built,) = Path(work, "RPMS").rglob("*.rpm")
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, path)
    return path
