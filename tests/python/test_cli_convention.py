"""The CLI's one convention (gdrkit.tasks.convention), read from Invoke's collection of every task.

A short flag means one option everywhere; an option has one short flag
everywhere; every task that changes the system takes --dry-run as -n; the
toolkit prints the project's version and exits 2 on a usage error.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from gdrkit import lint as checks
from gdrkit.distro import arch, debian, rpm, targets
from gdrkit.kube import images, manifests
from gdrkit.system import UserError
from gdrkit.tasks import ns
from gdrkit.tasks.convention import READ_ONLY_TASKS, SHORT_FLAGS, ConventionTask
from gdrkit.version import REPO_ROOT, VERSION
from gdrkit.vm import modparams


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


# ---- help texts against the options they describe ----


def must(condition: bool, why: str) -> bool:
    if not condition:
        raise ValueError(why)
    return condition


# Option -> (what finds the values its help names, what accepts a value: raises on one it refuses).
# Each entry reads the help as a reader does; the acceptor is the code the task itself calls.
NAMED_VALUES: dict[str, tuple[str, Callable[[str], object]]] = {
    "softgpu_args": (r"e\.g\. '([^']+)'", lambda v: modparams.check_args("softgpu", v, "--softgpu-args")),
    "gdrdrv_args": (r"e\.g\. '([^']+)'", lambda v: modparams.check_args("gdrdrv", v, "--gdrdrv-args")),
    "params": (r"e\.g\. '([^']+)'", lambda v: modparams.check_args("gdrdrv", v, "--params")),
    "arch": (r"\b(amd64|arm64|x86_64|aarch64|i386|armhf|armel|ppc64el|ppc64le|riscv64|s390x)\b", arch.arch),
    "release": (r"\b((?:el|sle)\d+)\b", rpm.rpm_release),
    "rpm_release": (r"\b((?:el|sle)\d+)\b", rpm.rpm_release),
    "suite": (r"\(((?:[a-z]+, )+)\.\.\.\)", lambda v: [debian.debian_release(s) for s in v.split(", ") if s]),
    "targets": (r"names \(([^)]+)\)", lambda v: targets.targets(v.replace("; -arm64 for arm64", ""))),
    "os": (r"\(((?:[a-z]+[\d.]+, )+)\.\.\.", lambda v: [images.node_os(s) for s in v.split(", ") if s]),
    "only": (r"\(default all\): (.*)$", lambda v: checks.select(v.replace(" ", ""))),
    "kubernetes": (r"\(default: ([\d.]+),", lambda v: must(v == manifests.KUBERNETES_VERSION, "not the default")),
    # A flavour some architecture has: check_flavour of that architecture accepts it.
    "flavour": (
        r"(?:e\.g\. |; )([\w-]+)(?=[;)]| for)",
        lambda v: must(any(v in a.kernel_flavours for a in arch.ARCHES.values()), "no architecture has it"),
    ),
}
# Options whose help shows a value in quotes that is not the option's own kind of value, with why.
FREE_FORM = {"args": "passed whole to the program, whose own -h says what it takes"}


def helps() -> list[tuple[str, str, str]]:
    """(task, option as the signature names it, help text) of every option, as --help prints them.

    Read in a fresh process: Invoke moves each help text onto its parser Argument the first time
    a task's arguments are made, and the other tests here make them."""
    dump = "import json; from gdrkit.tasks import ns; print(json.dumps({n: ns[n].help for n in ns.task_names}))"
    out = subprocess.run([sys.executable, "-c", dump], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    texts: dict[str, dict[str, str]] = json.loads(out.stdout)
    return [(task, option, text) for task in sorted(texts) for option, text in sorted(texts[task].items())]


def named_values(task_name: str, option: str, text: str) -> list[str]:
    """The values the help text of option names, as NAMED_VALUES finds them."""
    pattern, _ = NAMED_VALUES[option]
    if option == "only" and task_name != "lint":
        return []
    return [m.group(1).rstrip(", ") for m in re.finditer(pattern, text)]


def refused_values(task_name: str, option: str, text: str) -> list[str]:
    """The values option's help names that the option refuses, each with why."""
    _, accepts = NAMED_VALUES[option]
    refused = []
    for value in named_values(task_name, option, text):
        try:
            accepts(value)
        except (UserError, ValueError) as error:
            why = error.message if isinstance(error, UserError) else str(error)
            refused.append(f"{task_name} --{option.replace('_', '-')}: {value!r}: {why}")
    return refused


def test_every_value_a_help_names_is_one_its_option_accepts() -> None:
    refused: list[str] = []
    unchecked: list[str] = []
    checked = 0
    for task_name, option, text in helps():
        if option in NAMED_VALUES:
            checked += len(named_values(task_name, option, text))
            refused += refused_values(task_name, option, text)
        elif re.search(r"e\.g\.|(?<!\w)'[^'\s][^']*'(?!\w)", text) and option not in FREE_FORM:
            unchecked.append(f"{task_name} --{option}: {text}")
    assert refused == []
    assert unchecked == [], "add these options to NAMED_VALUES (or FREE_FORM, with why)"
    # What the helps name today (a wording NAMED_VALUES no longer reads shows as fewer).
    assert checked >= 40, checked


def test_a_help_naming_a_value_its_option_refuses_fails() -> None:
    # The help vm-test had: softgpu has no parameter `mode`.
    wrong = "module parameters for softgpu, e.g. 'mode=ram'"
    assert refused_values("vm-test", "softgpu_args", wrong) == [
        "vm-test --softgpu-args: 'mode=ram': error: --softgpu-args: softgpu has no parameter 'mode'"
        "\n  hint: use NAME=VALUE with one of: "
        + ", ".join(f"{n} ({t or 'see its source'})" for n, t in sorted(modparams.parameters("softgpu").items()))
    ]
    assert len(refused_values("build-rpm", "arch", "architecture the packages are for: amd64 or armhf")) == 1
    assert len(refused_values("k8s-manifests", "kubernetes", "MAJOR.MINOR (default: 1.31.0, the constant)")) == 1


def test_the_list_shows_each_tasks_whole_first_sentence() -> None:
    """`--list` shows the first line of a task's docstring: that line must be a whole sentence."""
    cut = []
    for task_name in sorted(ns.task_names):
        lines = (ns[task_name].__doc__ or "").strip().splitlines()
        if not lines or not lines[0].rstrip().endswith(".") or (len(lines) > 1 and lines[1].strip()):
            cut.append(f"{task_name}: {lines[:2]}")
    assert cut == [], "end the docstring's first line with its first sentence, then a blank line"


def test_a_dry_run_claims_nothing_it_did_not_do(tmp_path: Path) -> None:
    from gdrkit.matrix import workflow

    installed = workflow.INSTALLED_WORKFLOW
    before = installed.exists()
    result = subprocess.run([sys.executable, "-m", "gdrkit.tasks.program", "ci-install-workflow", "--dry-run"],
                            cwd=REPO_ROOT, capture_output=True, text=True, check=True)  # fmt: skip
    assert result.stdout.splitlines() == [f"[dry-run] copy {workflow.WORKFLOW} -> {installed}"]
    assert installed.exists() == before
