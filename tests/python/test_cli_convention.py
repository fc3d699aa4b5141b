"""The CLI's one convention (gdrkit.tasks.convention), read from Invoke's collection of every task.

A short flag means one option everywhere; an option has one short flag
everywhere; every task that changes the system takes --dry-run as -n; the
toolkit prints the project's version and exits 2 on a usage error.
"""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict

from gdrkit.tasks import ns
from gdrkit.tasks.convention import READ_ONLY_TASKS, SHORT_FLAGS, ConventionTask
from gdrkit.version import REPO_ROOT, VERSION


def options() -> dict[str, dict[str, set[str]]]:
    """task -> long option -> its short flags, as Invoke's parser will see them."""
    found: dict[str, dict[str, set[str]]] = {}
    for name in sorted(ns.task_names):
        found[name] = {}
        for argument in ns[name].get_arguments():
            longs = [n for n in argument.names if len(n) > 1]
            shorts = {n for n in argument.names if len(n) == 1}
            found[name][longs[0]] = shorts
    return found


def test_every_task_follows_the_convention() -> None:
    plain = [name for name in ns.task_names if not isinstance(ns[name], ConventionTask)]
    assert not plain, f"declared with invoke.tasks.task, not gdrkit.tasks.convention.task: {plain}"


def test_a_short_flag_means_one_option_and_an_option_has_one_short_flag() -> None:
    meanings: dict[str, set[str]] = defaultdict(set)
    spellings: dict[str, set[str]] = defaultdict(set)
    for task_options in options().values():
        for long_name, shorts in task_options.items():
            for short in shorts:
                meanings[short].add(long_name)
            spellings[long_name].add("".join(sorted(shorts)) or "(none)")
    clashes = {short: sorted(longs) for short, longs in meanings.items() if len(longs) > 1}
    assert not clashes, f"short flags with two meanings: {clashes}"
    uneven = {long_name: sorted(s) for long_name, s in spellings.items() if len(s) > 1}
    assert not uneven, f"options spelled differently across tasks: {uneven}"
    print("short flags:", ", ".join(f"-{s} --{sorted(meanings[s])[0]}" for s in sorted(meanings)))


def test_every_task_that_changes_the_system_takes_dry_run_as_n() -> None:
    missing = []
    for task_name, task_options in options().items():
        if task_name in READ_ONLY_TASKS:
            assert "dry-run" not in task_options, f"{task_name} is listed read-only but takes --dry-run"
            continue
        if task_options.get("dry-run") != {"n"}:
            missing.append(f"{task_name} ({'-n missing' if 'dry-run' in task_options else 'no --dry-run'})")
    assert not missing, f"tasks that change the system without --dry-run/-n: {missing}"
    unknown = sorted(set(READ_ONLY_TASKS) - set(ns.task_names))
    assert not unknown, f"READ_ONLY_TASKS names tasks that do not exist: {unknown}"
    print(f"{len(ns.task_names) - len(READ_ONLY_TASKS & ns.task_names.keys())} tasks take --dry-run/-n")


def test_the_table_names_only_options_some_task_has() -> None:
    used = {long_name.replace("-", "_") for task_options in options().values() for long_name in task_options}
    unused = sorted(set(SHORT_FLAGS) - used - {"json_"})
    assert not unused, f"SHORT_FLAGS entries no task has: {unused}"


def toolkit(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gdrkit.tasks.program", *argv],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_version_is_the_projects() -> None:
    result = toolkit("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"gdrcopy toolkit {VERSION}"


def test_an_unknown_option_or_task_exits_2_with_where_to_look() -> None:
    for argv, hint in ((["doctor", "--bogus"], "./toolkit doctor --help"), (["no-such-task"], "./toolkit --list")):
        result = toolkit(*argv)
        assert result.returncode == 2, (argv, result.returncode, result.stderr)
        assert "No idea what" in result.stderr and hint in result.stderr
