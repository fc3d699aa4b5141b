"""The host-needs check: a test uses of the host only what a new machine has,
or what the test, or a fixture it uses, asked the toolkit to install.

A new Debian 12 machine has Debian's required and important packages, git
(it cloned the tree) and what ./toolkit installs before any task (python3,
python3-venv).  Everything else a test touches (a kernel's headers, a
compiler, docker, qemu) must come through the toolkit's idempotent install
step, gdrkit.system.ensure_debian_packages, called by the test or by one of
its fixtures.  Otherwise the test passes wherever an earlier run, or an
earlier test, left the package behind, and fails on the next new machine
(issue 34: a test took the first kernel whose headers the host happened to
have; a new host had none).

What is seen, through Python's audit hooks in the pytest process:
- ensure_debian_packages announces the packages it was asked for
  (gdrkit.system.ENSURE_EVENT);
- a kernel build tree opened or listed (/lib/modules/<release>/build,
  /usr/src/linux-headers-<release>), or named in a command's arguments, needs
  that tree's headers package; listing /lib/modules or /usr/src to find one
  needs some headers package;
- a program started (subprocess.Popen) needs the Debian package that holds it.
A package counts as asked for with everything it depends on.  Not seen:
os.stat (Path.exists), and what child processes do (a child ./toolkit asks
for its own packages).  Commands that enter another root (chroot, docker,
qemu) name that root's paths, not the host's, so their arguments are not
read.

A test marked `probes_host` (it runs the doctor against this host, whose
probes run what they find) is exempt.  A test that breaks the rule fails, naming what it used and the package to
ask for.  GDRKIT_HOST_NEEDS_REPORT=<file> records each finding there as a JSON
line instead of failing (to survey a whole run).
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gdrkit.system import ENSURE_EVENT

DPKG_STATUS = Path("/var/lib/dpkg/status")
DPKG_INFO = Path("/var/lib/dpkg/info")
# What a new machine has beyond Debian's required and important packages.
NEW_MACHINE_PRIORITIES = frozenset({"required", "important"})
NEW_MACHINE_PACKAGES = frozenset({"git", "python3", "python3-venv"})
PROGRAM_DIRS = ("/usr/bin/", "/usr/sbin/", "/bin/", "/sbin/")
# Programs whose arguments name paths inside another root or machine.
ROOT_ENTERING = frozenset({"chroot", "unshare", "systemd-nspawn", "bwrap", "docker", "podman", "ssh", "mmdebstrap"})

# The marker of a test that looks at the host as it is (the doctor's probes run
# what they find): what it runs or reads is a probe, not a need.
PROBES_HOST = "probes_host"

_TREE = re.compile(
    r"(?:/usr)?/lib/modules/([^/\s'\"]+)/(?:build|source)(?=/|$|[\s'\"])|/usr/src/(linux-headers-[^/\s'\"]+)"
)
_TREE_IN_ARG = re.compile(r"(?:^|(?<=[=\s:'\"]))(?:" + _TREE.pattern + ")")
_KERNEL_LISTINGS = frozenset({"/lib/modules", "/usr/lib/modules", "/usr/src"})
_HEADERS = "linux-headers-"


def tree_package(path: str) -> str | None:
    """The headers package that holds the kernel build tree `path` is in, if it is one."""
    found = _TREE.match(path)
    if not found:
        return None
    return f"{_HEADERS}{found.group(1)}" if found.group(1) else found.group(2)


def trees_named(argument: str) -> list[str]:
    """The headers packages of the kernel build trees an argument names (KDIR=..., -C ...)."""
    return [f"{_HEADERS}{m.group(1)}" if m.group(1) else m.group(2) for m in _TREE_IN_ARG.finditer(argument)]


@dataclass
class Packages:
    """The host's dpkg database: what is installed, its priority and dependencies, who holds a program."""

    stamp: float = -1.0
    priority: dict[str, str] = field(default_factory=dict)
    depends: dict[str, set[str]] = field(default_factory=dict)
    providers: dict[str, set[str]] = field(default_factory=dict)
    programs: dict[str, str] = field(default_factory=dict)

    def refresh(self) -> None:
        """Read the database again if an install changed it since."""
        try:
            stamp = DPKG_STATUS.stat().st_mtime
        except OSError:
            return
        if stamp == self.stamp:
            return
        self.stamp = stamp
        self.priority, self.depends, self.providers, self.programs = {}, {}, {}, {}
        for stanza in DPKG_STATUS.read_text(errors="replace").split("\n\n"):
            fields = dict(_fields(stanza))
            name = fields.get("Package")
            if not name or "installed" not in fields.get("Status", "").split()[-1:]:
                continue
            self.priority[name] = fields.get("Priority", "")
            self.depends[name] = {
                alt for key in ("Depends", "Pre-Depends") for alt in _alternatives(fields.get(key, ""))
            }
            for provided in _alternatives(fields.get("Provides", "")):
                self.providers.setdefault(provided, set()).add(name)
        for listing in DPKG_INFO.glob("*.list"):
            package = listing.name.removesuffix(".list").split(":")[0]
            for line in listing.read_text(errors="replace").splitlines():
                if line.startswith(PROGRAM_DIRS):
                    self.programs[line] = package

    def holder(self, program: str) -> str | None:
        """The package that installed `program` (a path), following links and merged /usr."""
        self.refresh()
        for path in (program, os.path.realpath(program)):
            for form in (path, path.removeprefix("/usr"), "/usr" + path):
                if form in self.programs:
                    return self.programs[form]
        return None

    def closure(self, packages: Iterable[str]) -> set[str]:
        """`packages` with every installed package they depend on, directly or not."""
        self.refresh()
        seen: set[str] = set()
        todo = list(packages)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo += self.depends.get(name, ())
            todo += self.providers.get(name, ())
        return seen

    def new_machine(self) -> set[str]:
        self.refresh()
        base = {name for name, prio in self.priority.items() if prio in NEW_MACHINE_PRIORITIES}
        return self.closure(base | NEW_MACHINE_PACKAGES)


def _fields(stanza: str) -> Iterator[tuple[str, str]]:
    for line in stanza.splitlines():
        if line[:1] not in (" ", "\t") and ":" in line:
            key, _, value = line.partition(":")
            yield key, value.strip()


def _alternatives(relation: str) -> set[str]:
    """Every package an (installed-state) dependency field names, alternatives included."""
    names = set()
    for part in relation.replace("|", ",").split(","):
        name = part.strip().split(" ", 1)[0].split(":", 1)[0]
        if name:
            names.add(name)
    return names


@dataclass
class Ledger:
    """Who asked for which packages, and what each test used without asking."""

    packages: Packages = field(default_factory=Packages)
    asked: dict[str, set[str]] = field(default_factory=dict)
    findings: dict[str, list[str]] = field(default_factory=dict)
    item: pytest.Item | None = None
    fixtures: list[str] = field(default_factory=list)
    busy: threading.local = field(default_factory=threading.local)
    _base: set[str] | None = None

    def owner(self) -> str:
        """Who an install asked for now is credited to: the fixture being set up, else the test."""
        if self.fixtures:
            return self.fixtures[-1]
        return self.item.nodeid if self.item is not None else "session"

    def allowed(self) -> set[str]:
        if self._base is None or self.packages.stamp != _status_stamp():
            self._base = self.packages.new_machine()
        owners = {"session"}
        if self.item is not None:
            owners |= {self.item.nodeid, *getattr(self.item, "fixturenames", ())}
        asked = set().union(*(self.asked.get(owner, set()) for owner in owners))
        return self._base | self.packages.closure(asked)

    def asked_for_kernel_trees(self) -> bool:
        """Whether a kernel's headers or sources were asked for: what listing /lib/modules or /usr/src looks for."""
        asked = self.allowed() - (self._base or set())
        return any(name.startswith((_HEADERS, "linux-source")) for name in asked)

    def use(self, what: str, package: str | None) -> None:
        """Note a use of the host; a finding unless `package` (None: any headers package) was asked for."""
        if self.item is not None and self.item.get_closest_marker(PROBES_HOST):
            return
        if package is None:
            if self.asked_for_kernel_trees():
                return
            need = "a linux-headers-<release> or linux-source package"
        elif package in self.allowed():
            return
        else:
            need = package
        where = self.item.nodeid if self.item is not None else "session"
        line = (
            f"{what} without asking for {need}: call gdrkit.system.ensure_debian_packages([...]) "
            "(or a gdrkit helper that does) in the test or a fixture it uses"
        )
        if line not in self.findings.setdefault(where, []):
            self.findings[where].append(line)

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if getattr(self.busy, "on", False):
            return
        self.busy.on = True
        try:
            self._seen(event, args)
        finally:
            self.busy.on = False

    def _seen(self, event: str, args: tuple[Any, ...]) -> None:
        if event == ENSURE_EVENT:
            self.asked.setdefault(self.owner(), set()).update(args[0])
        elif event == "open" and isinstance(args[0], str):
            package = tree_package(args[0])
            if package:
                self.use(f"opened {args[0]}", package)
        elif event in ("os.listdir", "os.scandir") and isinstance(args[0], str):
            path = args[0].rstrip("/") or "/"
            if path in _KERNEL_LISTINGS:
                self.use(f"listed {path} to find a kernel tree", None)
            elif tree_package(path):
                self.use(f"listed {path}", tree_package(path))
        elif event == "subprocess.Popen":
            self._started(args[0], args[1], args[3])

    def _started(self, executable: Any, argv: Any, env: Any) -> None:
        words = [os.fsdecode(a) for a in argv] if isinstance(argv, (list, tuple)) else [os.fsdecode(argv)]
        if not words:
            return
        program = os.fsdecode(executable) if executable else words[0]
        search = (env or os.environ).get("PATH", os.defpath) if isinstance(env, dict) else os.environ.get("PATH")
        resolved = program if "/" in program else _which(program, search)
        if resolved and resolved.startswith(PROGRAM_DIRS):
            package = self.packages.holder(resolved)
            if package:
                self.use(f"ran {Path(program).name}", package)
        if Path(words[0]).name in ROOT_ENTERING or Path(words[0]).name.startswith("qemu-"):
            return
        for word in words[1:]:
            for package in trees_named(word):
                self.use(f"named a kernel build tree in `{Path(words[0]).name} ... {word}`", package)


def _which(program: str, search: str | None) -> str | None:
    """The PATH lookup exec makes; not shutil.which, which tests replace with fakes."""
    for folder in (search or os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or ".", program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _status_stamp() -> float:
    try:
        return DPKG_STATUS.stat().st_mtime
    except OSError:
        return -1.0


LEDGER = Ledger()
_INSTALLED = False
# The tools many tests share, asked for once before any test runs (so in every
# order and selection): shell and RPM checks, signing, the VM roots' tools.
SUITE_TOOLS = ("shellcheck", "rpm", "gpg", "zstd", "mmdebstrap")


def pytest_sessionstart(session: pytest.Session) -> None:
    if _INSTALLED:
        from gdrkit.system import ensure_debian_packages

        ensure_debian_packages(SUITE_TOOLS)


def pytest_configure(config: pytest.Config) -> None:
    global _INSTALLED
    if not _INSTALLED and DPKG_STATUS.exists():
        # Audit hooks cannot be removed: one for the life of the process.
        sys.addaudithook(LEDGER.hook)
        _INSTALLED = True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    LEDGER.item = item
    yield
    LEDGER.item = None


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Iterator[None]:
    LEDGER.fixtures.append(fixturedef.argname)
    try:
        yield
    finally:
        LEDGER.fixtures.pop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    if call.when == "setup":
        return
    found = LEDGER.findings.pop(item.nodeid, [])
    if not found:
        return
    report = outcome.get_result()
    survey = os.environ.get("GDRKIT_HOST_NEEDS_REPORT")
    if survey:
        with open(survey, "a") as out:
            out.write(json.dumps({"test": item.nodeid, "findings": found}) + "\n")
        return
    text = "host-needs check (tests/python/hostneeds.py): this test used the host beyond a new machine:\n" + "\n".join(
        f"  - {line}" for line in found
    )
    if report.passed:
        report.outcome = "failed"
        report.longrepr = text
    else:
        report.sections.append(("host-needs check", text))
