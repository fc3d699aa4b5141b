"""The edge between host checks and the machine: files and commands.

Host logic (doctor, insmod) asks a Probe, never the OS directly, so unit
tests replace it with FakeProbe and run in milliseconds on any machine.
The standard library only: the packages install this module with doctor
(gdrkit.host.facts says why).
"""

from __future__ import annotations

import os
import platform
import shutil
import stat
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .facts import Facts, current


@dataclass(frozen=True)
class Node:
    """What doctor needs of a device node's stat()."""

    is_char: bool
    major: int
    minor: int
    mode: int  # permission bits
    gid: int


@dataclass(frozen=True)
class Output:
    returncode: int
    stdout: str


class Probe:
    """The real machine."""

    _facts: Facts | None = None

    def __init__(self, facts: Facts | None = None) -> None:
        self._facts = facts

    @property
    def facts(self) -> Facts:
        """What doctor knows about distributions and this release (gdrkit.host.facts)."""
        if self._facts is None:
            self._facts = current()
        return self._facts

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except OSError:
            return []

    def read(self, path: str) -> str | None:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except OSError:
            return None

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def node(self, path: str) -> Node | None:
        try:
            info = os.stat(path)
        except OSError:
            return None
        return Node(
            stat.S_ISCHR(info.st_mode),
            os.major(info.st_rdev),
            os.minor(info.st_rdev),
            stat.S_IMODE(info.st_mode),
            info.st_gid,
        )

    def which(self, name: str) -> bool:
        return shutil.which(name) is not None

    def command(self, argv: Sequence[str]) -> Output | None:
        """Run a read-only query; None when the program is not installed."""
        if shutil.which(argv[0]) is None:
            return None
        try:
            done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return Output(done.returncode, done.stdout + done.stderr)

    def release(self) -> str:
        return platform.release()

    def group_name(self, gid: int) -> str:
        try:
            import grp

            return grp.getgrgid(gid).gr_name
        except (KeyError, ImportError):
            return str(gid)

    def group_id(self, name: str) -> int | None:
        try:
            import grp

            return grp.getgrnam(name).gr_gid
        except (KeyError, ImportError):
            return None


@dataclass
class FakeProbe(Probe):
    """A machine described by data, for tests."""

    files: Mapping[str, str] = field(default_factory=dict)
    nodes: Mapping[str, Node] = field(default_factory=dict)
    commands: Mapping[str, Output] = field(default_factory=dict)  # key: " ".join(argv)
    kernel: str = "6.1.0-56-amd64"
    groups: Mapping[int, str] = field(default_factory=dict)

    def read(self, path: str) -> str | None:
        return self.files.get(path)

    def exists(self, path: str) -> bool:
        return path in self.files or path in self.nodes or any(f.startswith(path.rstrip("/") + "/") for f in self.files)

    def node(self, path: str) -> Node | None:
        return self.nodes.get(path)

    def listdir(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted({f[len(prefix) :].split("/")[0] for f in self.files if f.startswith(prefix)})

    def which(self, name: str) -> bool:
        return any(key.split()[0] == name for key in self.commands)

    def command(self, argv: Sequence[str]) -> Output | None:
        if not self.which(argv[0]):
            return None
        return self.commands.get(" ".join(argv), Output(1, ""))

    def release(self) -> str:
        return self.kernel

    def group_name(self, gid: int) -> str:
        return self.groups.get(gid, str(gid))

    def group_id(self, name: str) -> int | None:
        return next((gid for gid, group in self.groups.items() if group == name), None)
