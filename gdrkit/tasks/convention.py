"""The toolkit's one option convention, which every task is declared with.

Invoke gives each option the first free letter of its name as a short flag,
so `-d` ended up meaning --dry-run, --driver, --dkms or --dist depending on
the task.  Here short flags come from one table instead: a letter means the
same option in every task that has it, and an option outside the table is
long-only.  tests/python/test_cli_convention.py reads every task's options
and fails on a clash or a task that changes the system without --dry-run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from invoke.tasks import Task
from invoke.tasks import task as invoke_task

from gdrkit import pyextras

# Option name (as in the task's signature) -> its short flag, everywhere.
SHORT_FLAGS: dict[str, str] = {
    "dry_run": "n",  # make -n, rsync -n, git clean -n
    "keyword": "k",  # pytest -k
    "quick": "q",
    "json": "j",
    "json_": "j",  # matrix-list's parameter, spelled --json
    "output": "o",
    "ref": "r",
    "suite": "s",
}

# Tasks that change nothing on the system (they read, print or run read-only
# checks), with why; every other task must take --dry-run/-n.
READ_ONLY_TASKS: dict[str, str] = {
    "doctor": "reads the host's state and prints findings",
    "imports": "prints the import map",
    "matrix-list": "prints ci/matrix.yaml's entries",
    "test": "runs the test suite, whose heavy tests work in their own scratch directories",
    "sanity": "runs gdrcopy_sanity against the library just built",
    "copybw": "runs gdrcopy_copybw against the library just built",
    "copylat": "runs gdrcopy_copylat against the library just built",
    "apiperf": "runs gdrcopy_apiperf against the library just built",
    "pplat": "runs gdrcopy_pplat against the library just built",
}


class ConventionTask(Task[Callable[..., Any]]):
    """An Invoke task whose short flags come from SHORT_FLAGS, never from the first free letter."""

    # The Python extras it installs before running (gdrkit.pyextras).
    extras: tuple[str, ...] = ()

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict[str, Any]:
        opts = super().arg_opts(name, default, taken_names)
        short = SHORT_FLAGS.get(name)
        if short is not None and short not in taken_names:
            opts["names"] = [*opts["names"], short]
        return opts


def task(*, extras: tuple[str, ...] = (), **kwargs: Any) -> Callable[[Callable[..., Any]], ConventionTask]:
    """invoke.tasks.task(...) with the toolkit's convention: explicit short flags only.

    `extras`: the Python extras (gdrkit.pyextras) the task uses, installed
    into the toolkit's environment before it runs (with --dry-run: only said).
    """
    kwargs.setdefault("klass", ConventionTask)
    kwargs.setdefault("auto_shortflags", False)

    def decorate(body: Callable[..., Any]) -> ConventionTask:
        if extras:
            inner = body

            # functools.wraps keeps the signature Invoke reads the flags from.
            @functools.wraps(inner)
            def body(*args: Any, **flags: Any) -> Any:
                pyextras.ensure(extras, dry_run=bool(flags.get("dry_run", False)))
                return inner(*args, **flags)

        made = invoke_task(**kwargs)(body)
        assert isinstance(made, ConventionTask)
        made.extras = extras
        return made

    return decorate
