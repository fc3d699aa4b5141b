"""`invoke test`: the whole test suite, as the README and .ci/run run it."""

from __future__ import annotations

import os
import subprocess
import sys

from invoke.context import Context
from gdrkit.tasks.convention import task
from invoke.exceptions import Exit

from gdrkit.version import REPO_ROOT


@task(
    extras=("test", "containers", "kube", "fleet"),
    help={
        "quick": "only the tests that need no VM, container or package build (minutes: lint alone takes one)",
        "soak": "only the long soak tier that .ci/run leaves out: full-count race tests, fuzzing, slab poisoning (hours)",
        "keyword": "only tests whose name matches this pytest -k expression",
    },
)
def test(c: Context, quick: bool = False, soak: bool = False, keyword: str = "") -> None:
    """Run the whole test suite (pytest over tests/python); fails on any failing test.

    The soak tier is left out unless --soak asks for it (then only it runs).
    """
    if quick and soak:
        raise Exit("--quick and --soak exclude each other: the soak tier is all VM runs", code=2)
    # --durations: every run (CI included) names its slowest tests, to keep .ci/run inside its 45 minutes.
    argv = [sys.executable, "-m", "pytest", "tests/python", "-ra", "-v", "--durations=25"]
    if soak:
        argv += ["-m", "soak"]
    elif quick:
        argv += ["-m", "not slow and not soak"]
    else:
        argv += ["-m", "not soak"]
    if keyword:
        argv += ["-k", keyword]
    status = subprocess.call(argv, cwd=REPO_ROOT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    if status != 0:
        raise Exit(f"test suite failed (pytest exit {status})", code=status)


TASKS = [test]
