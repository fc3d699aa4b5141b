"""Shared pytest setup: make the repository importable; fixtures several test files share."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

if TYPE_CHECKING:
    from gdrkit.packaging.faults import DebSets


@pytest.fixture(scope="session")
def deb_sets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DebSets]:
    """The DKMS set of .deb packages of HEAD, as this release and as the previous
    one: built once per session for every container and VM package test (slow)."""
    from gdrkit import containers
    from gdrkit.packaging import faults

    yield faults.build_deb_sets(tmp_path_factory.mktemp("debs-new"), tmp_path_factory.mktemp("debs-old"))
    containers.cleanup()
