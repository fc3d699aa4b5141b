"""The C test tiers that need no kernel: library unit tests (faked syscalls and CUDA),
the same under ASan+UBSan, softgpu's libcuda unit and symbol checks, and its
context-less probe record against the real driver's."""

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
    # unit_test.c runs tools/probe-contextless.c on the fake device and compares it with the H200's.
    assert "[       OK ] test_probe_contextless_matches_real_driver" in output, output[-3000:]


def probe_lines(name: str) -> list[str]:
    """The compared lines of a committed probe-contextless output: no comments, driver version or skips."""
    text = (REPO_ROOT / "tests" / "softgpu" / "libcuda" / "tools" / name).read_text()
    lines = [line.rstrip("\r") for line in text.splitlines()]
    return [x for x in lines if not x.startswith(("#", "CUDA driver ")) and " skipped: " not in x]


def test_softgpu_probe_contextless_record_matches_the_real_driver() -> None:
    # The record from a softgpu VM (see tools/probe-contextless.c for how it is made) must
    # say what the real driver said, line for line.
    ours, real = probe_lines("probe-contextless-on-softgpu.out"), probe_lines("probe-contextless-on-h200.out")
    differ = [f"softgpu: {a}\nreal:    {b}" for a, b in zip(ours, real, strict=False) if a != b]
    assert not differ and len(ours) == len(real) > 40, "\n".join(differ) or f"{len(ours)} vs {len(real)} lines"
