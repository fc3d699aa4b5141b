"""The edge between host checks and the machine: files and commands.

Host logic (doctor, insmod) asks a Probe, never the OS directly, so unit
tests replace it with FakeProbe and run in milliseconds on any machine.
The standard library only: the packages install this module with doctor
(gdrkit.gdrcopy_doctor.facts says why).
"""

from __future__ import annotations

import os
import platform
import shutil
import json
import stat
import subprocess
import sys
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
class Account:
    """A passwd entry: who a uid is and its primary group."""

    name: str
    uid: int
    gid: int


@dataclass(frozen=True)
class Output:
    returncode: int
    stdout: str


@dataclass(frozen=True)
class Loaded:
    """What the dynamic loader made of one library name, as a program that dlopen()s it sees it."""

    name: str
    path: str = ""  # the file it opened (symbolic links resolved); "" when dlopen failed
    error: str = ""  # dlerror()'s text when it failed
    # gdr_runtime_get_version() of the library opened, where it has that function.
    runtime_version: tuple[int, int] | None = None


# Run in a child Python (a library loaded for a look must not stay in doctor, and a
# crashing constructor must not take doctor down): dlopen() argv[1] by name exactly as
# consumers do, say which file the loader opened and, for libgdrapi, the version its
# gdr_runtime_get_version() reports.  It calls nothing that opens a backend.
DLOPEN_SCRIPT = """
import ctypes, json, os, sys
name = sys.argv[1]
stem = name.split(".so")[0] + ".so"
def mapped():
    with open("/proc/self/maps") as maps:
        return {line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6}
before = mapped()
out = {"name": name}
try:
    lib = ctypes.CDLL(name, mode=ctypes.RTLD_LOCAL)
except OSError as error:
    out["error"] = str(error)
else:
    after = mapped()
    # The file it mapped now; one mapped already (libc) is the one it returned.
    new = sorted(p for p in after - before if os.path.basename(p).startswith(stem))
    new = new or sorted(p for p in after if os.path.basename(p).startswith(stem))
    out["path"] = os.path.realpath(new[0]) if new else ""
    if hasattr(lib, "gdr_runtime_get_version"):
        major, minor = ctypes.c_int(-1), ctypes.c_int(-1)
        lib.gdr_runtime_get_version(ctypes.byref(major), ctypes.byref(minor))
        out["runtime_version"] = [major.value, minor.value]
print(json.dumps(out))
"""

# cuDriverGetVersion() of libcuda.so.1 (no cuInit, no GPU touched): 13000 for CUDA 13.0.
CUDA_VERSION_SCRIPT = """
import ctypes
version = ctypes.c_int(0)
if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version)) == 0:
    print(version.value)
"""


class Probe:
    """The real machine."""

    _facts: Facts | None = None

    def __init__(self, facts: Facts | None = None) -> None:
        self._facts = facts
        self._loaded: dict[str, Loaded] = {}

    @property
    def facts(self) -> Facts:
        """What doctor knows about distributions and this release (gdrkit.gdrcopy_doctor.facts)."""
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

    def _python(self, script: str, *args: str) -> str | None:
        """A child Python's output, or None when it failed (-I: none of this process's paths)."""
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-c", script, *args], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    def dlopen(self, name: str) -> Loaded:
        """dlopen(name) by the real dynamic loader, in a child process (once per name and Probe)."""
        if name not in self._loaded:
            out = self._python(DLOPEN_SCRIPT, name)
            if out is None:
                self._loaded[name] = Loaded(name, error="the loader check itself failed (its constructor crashed?)")
            else:
                data = json.loads(out)
                version = data.get("runtime_version")
                self._loaded[name] = Loaded(
                    name,
                    data.get("path", ""),
                    data.get("error", ""),
                    (int(version[0]), int(version[1])) if version else None,
                )
        return self._loaded[name]

    def cuda_driver_version(self) -> int | None:
        """cuDriverGetVersion() of the installed libcuda.so.1 (13000 = CUDA 13.0), None without one."""
        out = (self._python(CUDA_VERSION_SCRIPT) or "").strip()
        return int(out) if out.isdigit() else None

    def environ(self, name: str) -> str:
        return os.environ.get(name, "")

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

    def group_members(self, gid: int) -> tuple[str, ...]:
        """The users the group database lists in group gid (getent group's last field)."""
        try:
            import grp

            return tuple(grp.getgrgid(gid).gr_mem)
        except (KeyError, ImportError):
            return ()

    def accounts(self) -> list[Account]:
        """The passwd entries NSS enumerates (with a directory that does not enumerate: the local ones)."""
        try:
            import pwd

            return [Account(entry.pw_name, entry.pw_uid, entry.pw_gid) for entry in pwd.getpwall()]
        except ImportError:
            return []

    def user_name(self, uid: int) -> str:
        try:
            import pwd

            return pwd.getpwuid(uid).pw_name
        except (KeyError, ImportError):
            return f"uid {uid}"

    def euid(self) -> int:
        return os.geteuid()

    def pids(self) -> list[int]:
        """The processes /proc shows this user (with hidepid, only its own unless root)."""
        return sorted(int(name) for name in self.listdir("/proc") if name.isdigit())

    def open_files(self, pid: int) -> list[str] | None:
        """What process pid's file descriptors point to; None where this user may not look."""
        base = f"/proc/{pid}/fd"
        try:
            names = os.listdir(base)
        except PermissionError:
            return None
        except OSError:  # it exited
            return []
        targets = []
        for name in names:
            try:
                targets.append(os.readlink(f"{base}/{name}"))
            except PermissionError:
                return None
            except OSError:  # closed meanwhile
                continue
        return targets


@dataclass
class FakeProbe(Probe):
    """A machine described by data, for tests."""

    files: Mapping[str, str] = field(default_factory=dict)
    nodes: Mapping[str, Node] = field(default_factory=dict)
    commands: Mapping[str, Output] = field(default_factory=dict)  # key: " ".join(argv)
    kernel: str = "6.1.0-56-amd64"
    groups: Mapping[int, str] = field(default_factory=dict)
    # Library name -> what dlopen() gives; a name not here is not found.
    libraries: Mapping[str, Loaded] = field(default_factory=dict)
    cuda_version: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    # gid -> the users the group database lists in it; the passwd entries.
    members: Mapping[int, Sequence[str]] = field(default_factory=dict)
    users: Sequence[Account] = ()
    # pid -> what its file descriptors point to, None where the doctor may not look
    # (its /proc/PID/status is a file); a pid not here has none open.
    fds: Mapping[int, Sequence[str] | None] = field(default_factory=dict)
    effective_uid: int = 0

    def dlopen(self, name: str) -> Loaded:
        return self.libraries.get(
            name, Loaded(name, error=f"{name}: cannot open shared object file: No such file or directory")
        )

    def cuda_driver_version(self) -> int | None:
        return self.cuda_version

    def environ(self, name: str) -> str:
        return self.env.get(name, "")

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

    def group_members(self, gid: int) -> tuple[str, ...]:
        return tuple(self.members.get(gid, ()))

    def accounts(self) -> list[Account]:
        return list(self.users)

    def user_name(self, uid: int) -> str:
        return next((a.name for a in self.users if a.uid == uid), f"uid {uid}")

    def euid(self) -> int:
        return self.effective_uid

    def open_files(self, pid: int) -> list[str] | None:
        files = self.fds.get(pid, [])
        return None if files is None else list(files)
