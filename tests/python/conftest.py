"""Shared pytest setup: make the repository importable; fixtures several test files share."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gdrkit.packaging import doctor_facts  # noqa: E402, F401  (the registry hands the tree's doctor its facts)
from gdrkit.vm import SuiteRoot, build_in_root, debugkernel, prepare_suite_root  # noqa: E402

# Every test is held to what a new machine has, or what it asked the toolkit to install (issue 34).
pytest_plugins = ["hostneeds"]

# GDRKIT_DEBUG_KERNEL=kasan (or kcsan): the bookworm root boots gdrkit's debug kernel of that name.
DEBUG_KERNEL = os.environ.get("GDRKIT_DEBUG_KERNEL", "")

if TYPE_CHECKING:
    from pkgkit.faults import DebSets


@pytest.fixture(scope="session")
def built_root() -> Callable[[str], SuiteRoot]:
    """The project built and installed in a suite's VM root (gdrkit.vm), once per session.

    Every module that boots the suite's kernel shares the build, so the
    in-root make runs once per suite however many test files boot it.
    """
    built: dict[str, SuiteRoot] = {}

    def get(suite: str) -> SuiteRoot:
        if suite not in built:
            suite_root = prepare_suite_root(suite)
            if DEBUG_KERNEL and suite_root.suite == debugkernel.SOURCE_SUITE:
                # Every VM tier under the kernel's own judges (gdrkit.vm.debugkernel; a soak-tier run).
                suite_root = debugkernel.install_into_root(debugkernel.build(DEBUG_KERNEL), suite_root)
            report = build_in_root(suite_root)
            failures = "\n\n".join(f"{step.name}:\n{step.output[-3000:]}" for step in report.failed)
            assert not report.failed, f"building in the {suite_root.suite} root failed:\n{failures}"
            built[suite] = suite_root
        return built[suite]

    return get


@pytest.fixture(scope="session")
def deb_sets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DebSets]:
    """The DKMS set of .deb packages of HEAD, as this release and as the previous
    one: built once per session for every container and VM package test (slow)."""
    from gdrkit import containers
    from pkgkit import faults

    yield faults.build_deb_sets(tmp_path_factory.mktemp("debs-new"), tmp_path_factory.mktemp("debs-old"))
    containers.cleanup()


@pytest.fixture(scope="session")
def reference_debs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in for NVIDIA's 2.6-1 .deb set (pkgkit.reference), built once per session."""
    from gdrkit.packaging import build
    from pkgkit import reference

    out = tmp_path_factory.mktemp("debs-reference")
    reference.build_debs(build.source_at("HEAD"), out)
    return out


@pytest.fixture(scope="session")
def tree_programs() -> None:
    """The library and test programs built in this tree by `./toolkit build --no-driver` (which
    installs the compiler first): tests that run or read them get them here, not from whatever
    an earlier test built."""
    from gdrkit.packaging import pipeline

    pipeline.build_tree(with_driver=False)
