"""The host-needs check (hostneeds.py) catches a test that uses the host without asking.

Planted tests run in a pytest of their own with the check loaded, as every
test of the suite is: those that use a kernel's headers, a kernel listing or
a program without asking the toolkit's install step fail, naming what they
used; the same uses after asking pass.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gdrkit.system import ensure_debian_packages
from gdrkit.version import REPO_ROOT
from hostneeds import tree_package, trees_named

TESTS = Path(__file__).resolve().parent


def test_kernel_build_trees_name_their_headers_package() -> None:
    assert tree_package("/lib/modules/6.1.0-57-amd64/build") == "linux-headers-6.1.0-57-amd64"
    assert tree_package("/usr/lib/modules/6.1.0-57-amd64/build/Makefile") == "linux-headers-6.1.0-57-amd64"
    assert tree_package("/usr/src/linux-headers-6.1.0-57-common/include") == "linux-headers-6.1.0-57-common"
    assert tree_package("/lib/modules/6.1.0-57-amd64/modules.dep") is None
    assert tree_package("/srv/root/lib/modules/6.1.0-57-amd64/build") is None
    assert trees_named("KDIR=/lib/modules/6.12.57+deb13-amd64/build") == ["linux-headers-6.12.57+deb13-amd64"]
    assert trees_named("/tmp/x/usr/src/linux-headers-6.1.0-57-amd64") == []


PLANTED = """
import subprocess
from gdrkit.packaging.build import default_kernels
from gdrkit.system import ensure_debian_packages

ABI = {abi!r}

def test_lists_kernels_without_asking():
    default_kernels()

def test_builds_against_a_kernel_without_asking():
    subprocess.run(["make", "-s", "-C", f"/lib/modules/{{ABI}}/build", "kernelversion"], check=True)

def test_runs_a_program_without_asking():
    subprocess.run(["make", "--version"], check=True, capture_output=True)

def test_asks_then_uses_the_same():
    ensure_debian_packages(["linux-headers-amd64", "make"])
    default_kernels()
    subprocess.run(["make", "-s", "-C", f"/lib/modules/{{ABI}}/build", "kernelversion"], check=True)
    subprocess.run(["make", "--version"], check=True, capture_output=True)
"""


@pytest.mark.slow
def test_a_planted_test_that_uses_kernel_headers_without_asking_fails(tmp_path: Path) -> None:
    # This test's own needs: the planted ones find these installed, so only the check can fail them.
    ensure_debian_packages(["linux-headers-amd64", "make"])
    depends = subprocess.run(
        ["dpkg-query", "-W", "-f=${Depends}", "linux-headers-amd64"], capture_output=True, text=True
    )
    abi = depends.stdout.split(",")[0].split()[0].removeprefix("linux-headers-")
    (tmp_path / "test_planted.py").write_text(textwrap.dedent(PLANTED.format(abi=abi)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(REPO_ROOT)]))
    env.pop("GDRKIT_HOST_NEEDS_REPORT", None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "hostneeds", "-rA", "--rootdir", str(tmp_path),
         str(tmp_path / "test_planted.py")],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    out = result.stdout
    assert result.returncode == 1, out
    assert "3 failed, 1 passed" in out, out
    assert "PASSED test_planted.py::test_asks_then_uses_the_same" in out, out
    assert (
        "listed /lib/modules to find a kernel tree without asking for a linux-headers-<release> or linux-source package"
        in out
    )
    assert (
        f"named a kernel build tree in `make ... /lib/modules/{abi}/build` without asking for linux-headers-{abi}"
        in out
    )
    assert "ran make without asking for make" in out
    assert out.count("ran make without asking for make") == 2, out
