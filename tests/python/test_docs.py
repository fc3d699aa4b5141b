"""The README and the docs/ pages against the toolkit: no statement about a task goes stale (quick).

Every `./toolkit <task> ...` command in README.md, docs/*.md and the Ansible
role's README, in a fenced block or an inline code span, is parsed by
Invoke's own parser with the toolkit's collection: the task must exist and
each option must be one of its options (or the program's own, --help).
Placeholders written in capitals (`./toolkit TASK --help`) stand for any
task.  The task table of docs/developers.md must name every task.  The
README keeps its two commands first and stays under 1,500 words.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from invoke.exceptions import ParseError
from invoke.parser.context import ParserContext
from invoke.parser.parser import Parser
from invoke.program import Program

from gdrkit.tasks import ns
from gdrkit.version import REPO_ROOT

PAGES = sorted(
    [REPO_ROOT / "README.md", *(REPO_ROOT / "docs").glob("*.md"), REPO_ROOT / "ansible/roles/gdrcopy/README.md"]
)
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`(\./toolkit [^`]+)`")
# Shell that ends one command and may start another.
SEPARATORS = {"&&", "||", ";", "|"}
README_WORD_LIMIT = 1500


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    argv: tuple[str, ...]  # after ./toolkit

    def where(self) -> str:
        return f"{self.page}:{self.line}: ./toolkit {shlex.join(self.argv)}"


def toolkit_argv(text: str) -> Iterator[tuple[str, ...]]:
    """The argument lists of the ./toolkit commands in one shell line (a comment and what follows it cut)."""
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        words = text.split()
    for index, word in enumerate(words):
        if word == "./toolkit":
            argv = []
            for token in words[index + 1 :]:
                if token in SEPARATORS:
                    break
                argv.append(token)
            yield tuple(argv)


def commands(page: Path) -> list[Command]:
    text = page.read_text()
    name = str(page.relative_to(REPO_ROOT))
    found = []
    for block in FENCE.finditer(text):
        if block.group(1) not in ("", "sh", "bash", "console", "shell"):
            continue
        first_line = text.count("\n", 0, block.start(2)) + 1
        # Lines ending in a backslash go on.
        joined = block.group(2).replace("\\\n", " \n")
        for offset, line in enumerate(joined.splitlines()):
            for argv in toolkit_argv(line.removeprefix("$ ")):
                found.append(Command(name, first_line + offset, argv))
    outside = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for span in INLINE.finditer(outside):
        # Optional parts in brackets are options all the same.
        for argv in toolkit_argv(span.group(1).replace("[", " ").replace("]", " ")):
            found.append(Command(name, outside.count("\n", 0, span.start()) + 1, argv))
    return found


def all_commands() -> list[Command]:
    return [command for page in PAGES for command in commands(page)]


def parser() -> Parser:
    core = ParserContext(args=Program(namespace=ns).core_args())
    return Parser(initial=core, contexts=ns.to_contexts())


def is_placeholder(word: str) -> bool:
    return word == "..." or bool(re.fullmatch(r"[A-Z][A-Z_]*", word))


def problem(command: Command) -> str:
    """What is wrong with `command` ('' if nothing): Invoke's own words for an unknown task or option."""
    argv = list(command.argv)
    if argv and is_placeholder(argv[0]):
        # ./toolkit TASK --help: only the program's own options are known.
        argv = argv[1:]
        if any(not is_placeholder(a) and a not in ("--help", "-h", "--list", "-l") for a in argv):
            return f"a placeholder task with task options {argv}"
        return ""
    # A value in capitals (N, KVER) stands for any: 1 passes for a number or a string.
    argv = ["1" if is_placeholder(word) else word for word in argv]
    try:
        result = parser().parse_argv(argv)
    except (ParseError, ValueError) as error:
        return str(error)
    tasks = [context.name for context in result if context.name]
    unknown = [name for name in tasks if name not in ns.task_names]
    return f"unknown task {unknown}" if unknown else ""


def test_the_pages_have_toolkit_commands_to_check() -> None:
    found = all_commands()
    pages = {command.page for command in found}
    assert len(found) > 40 and {"README.md", "docs/developers.md", "docs/kubernetes.md"} <= pages, pages


@pytest.mark.parametrize("page", [str(p.relative_to(REPO_ROOT)) for p in PAGES])
def test_every_toolkit_command_names_a_real_task_with_real_options(page: str) -> None:
    found = commands(REPO_ROOT / page)
    bad = [f"{command.where()}: {why}" for command in found if (why := problem(command))]
    print(f"{page}: {len(found)} ./toolkit commands checked")
    assert not bad, "\n".join(bad)


def test_the_check_refuses_what_is_stale() -> None:
    """A made-up task, a made-up option and a real one on the wrong task are each reported."""
    for argv in (("build-everything",), ("build-deb", "--suit", "trixie"), ("lint", "--kernel", "bookworm")):
        assert problem(Command("x.md", 1, argv)), argv
    assert problem(Command("x.md", 1, ("build-deb", "--suite", "trixie", "--dry-run"))) == ""
    assert problem(Command("x.md", 1, ("TASK", "--help"))) == ""
    line = "flock /tmp/l ./toolkit vm-test --kernel bookworm --cmd 'a b' && ./toolkit test --quick  # why"
    assert list(toolkit_argv(line)) == [("vm-test", "--kernel", "bookworm", "--cmd", "a b"), ("test", "--quick")]


def test_developers_task_table_names_every_task() -> None:
    text = (REPO_ROOT / "docs" / "developers.md").read_text()
    # The section's own table: the subsections after it (the extras, offline builds) have tables of their own.
    section = text[text.index("## Toolkit tasks") :].split("\n### ")[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    named = {name for cell in rows for name in re.findall(r"`([\w-]+)`", cell)}
    assert named == set(ns.task_names), f"missing {set(ns.task_names) - named}, unknown {named - set(ns.task_names)}"


def test_readme_starts_with_its_two_commands_and_stays_short() -> None:
    text = (REPO_ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert (
        lines[2] == "```sh"
        and lines[3].startswith("./toolkit build-packages ")
        and lines[4].startswith("./toolkit test ")
    ), lines[:6]
    words = len(text.split())
    print(f"README.md: {words} words")
    assert words < README_WORD_LIMIT, f"README.md has {words} words: move detail into docs/"
