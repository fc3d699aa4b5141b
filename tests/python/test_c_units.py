"""The C test tiers that need no kernel: library unit tests (faked syscalls and CUDA),
the same under ASan+UBSan, and softgpu's libcuda unit and symbol checks."""

from __future__ import annotations

import re
import subprocess

import pytest

from gdrkit.system import ensure_debian_packages
from gdrkit.version import REPO_ROOT

SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed", re.MULTILINE)


@pytest.fixture(scope="module", autouse=True)
def build_tools() -> None:
    ensure_debian_packages(["build-essential", "libcmocka-dev", "pkg-config", "cmake"])


def make(*args: str) -> str:
    result = subprocess.run(["make", "-j2", *args], cwd=REPO_ROOT, capture_output=True, text=True)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"make {' '.join(args)} failed:\n{output[-6000:]}"
    return output


def test_library_unit_tests() -> None:
    output = make("-C", "tests/unit", "check")
    passed, failed = (int(x) for x in SUMMARY.findall(output)[-1])
    assert failed == 0 and passed > 50, output[-3000:]


@pytest.mark.slow
def test_library_unit_tests_under_asan_and_ubsan() -> None:
    output = make("-C", "tests/unit", "check", "SANITIZE=1")
    passed, failed = (int(x) for x in SUMMARY.findall(output)[-1])
    assert failed == 0 and passed > 50, output[-3000:]


def test_softgpu_libcuda_units_and_exported_symbols() -> None:
    output = make("-C", "tests/softgpu/libcuda", "check")
    assert "OK:" in output, output[-3000:]
