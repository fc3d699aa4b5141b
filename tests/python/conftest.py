"""Shared pytest setup: make the repository importable; one in-root build per suite and session."""

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gdrkit.vm import SuiteRoot, build_in_root, prepare_suite_root  # noqa: E402


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
            report = build_in_root(suite_root)
            failures = "\n\n".join(f"{step.name}:\n{step.output[-3000:]}" for step in report.failed)
            assert not report.failed, f"building in the {suite_root.suite} root failed:\n{failures}"
            built[suite] = suite_root
        return built[suite]

    return get
