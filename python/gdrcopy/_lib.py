"""libgdrapi.so.2 loaded through ctypes: the C functions, bound once.

Nothing is loaded at import: the first call that needs the library loads it,
so that `import gdrcopy` works (and says what is missing) on a host without
it.  Which library (`choose()`):

1. GDRCOPY_LIBRARY=/path/to/libgdrapi.so.2, when set;
2. the system's (the libgdrapi/gdrcopy package: LD_LIBRARY_PATH, then
   ld.so.cache) when GDRCOPY_PREFER_SYSTEM_LIBRARY=1, or when it is newer
   than the one a bundled wheel carries (gdrcopy/lib);
3. else the bundled one, else the system's.

`gdrcopy.library_info()` says which was loaded and why.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import sys
import tempfile
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

LIBRARY_ENV = "GDRCOPY_LIBRARY"
PREFER_SYSTEM_ENV = "GDRCOPY_PREFER_SYSTEM_LIBRARY"
SONAME = "libgdrapi.so.2"
# Where a bundled wheel keeps its library (python/setup.py, GDRCOPY_WHEEL=bundled).
PACKAGE_DIR = Path(__file__).resolve().parent
BUNDLED_LIBRARY = PACKAGE_DIR / "lib" / SONAME
LOG_ENV = "GDRCOPY_ENABLE_LOGGING"
# The library's log line prefixes (libgdrapi/src/log.c).
_LOG_PREFIXES = ("ERR:  ", "WARN: ", "INFO: ", "DBG:  ")


class GdrError(OSError):
    """A libgdrapi call failed.

    `errno` is the library's error number, `function` the C function and
    `reason` what the library logged about it (only when
    GDRCOPY_ENABLE_LOGGING is set: the library is silent otherwise).
    """

    def __init__(self, code: int, function: str, what: str = "", reason: str = "") -> None:
        self.function = function
        self.reason = reason
        text = f"{function} failed: {os.strerror(code)}"
        if what:
            text = f"{what}: {text}"
        if reason:
            text += f"; the library says: {reason}"
        elif LOG_ENV not in os.environ:
            text += f" (set {LOG_ENV}=1 to include the library's reason)"
        super().__init__(code, text)

    def __str__(self) -> str:
        return str(self.strerror)


class LibraryNotFound(ImportError):
    """libgdrapi.so.2 could not be loaded."""


# gdr_mh_t is `struct { unsigned long h; }` passed by value.  A one-member
# struct of an integer goes in the same register as a bare unsigned long on
# every ABI the library supports (x86-64 SysV, AArch64 AAPCS64, ppc64le
# ELFv2), and ctypes passes a c_ulong much faster than a Structure.
MH = ctypes.c_ulong
_P = ctypes.c_void_p
_I = ctypes.c_int
_U32 = ctypes.c_uint32
_U64 = ctypes.c_uint64
_SZ = ctypes.c_size_t


class InfoV2(ctypes.Structure):
    """gdr_info_v2_t (include/gdrapi.h)."""

    _fields_ = [
        ("va", ctypes.c_uint64),
        ("mapped_size", ctypes.c_uint64),
        ("page_size", ctypes.c_uint32),
        ("tm_cycles", ctypes.c_uint64),
        ("cycles_per_ms", ctypes.c_uint32),
        ("mapped", ctypes.c_uint, 1),
        ("wc_mapping", ctypes.c_uint, 1),
        ("mapping_type", ctypes.c_int),
    ]


# name: (restype, argtypes); those after the first group are extensions a
# GDRCopy 2.6 library lacks (bound as None there).
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "gdr_open": (_P, []),
    "gdr_close": (_I, [_P]),
    "gdr_pin_buffer": (_I, [_P, ctypes.c_ulong, _SZ, _U64, _U32, ctypes.POINTER(MH)]),
    "gdr_pin_buffer_v2": (_I, [_P, ctypes.c_ulong, _SZ, _U32, ctypes.POINTER(MH)]),
    "gdr_unpin_buffer": (_I, [_P, MH]),
    "gdr_get_callback_flag": (_I, [_P, MH, ctypes.POINTER(_I)]),
    "gdr_get_info_v2": (_I, [_P, MH, ctypes.POINTER(InfoV2)]),
    "gdr_map_v2": (_I, [_P, MH, ctypes.POINTER(_P), _SZ, _I]),
    "gdr_unmap": (_I, [_P, MH, _P, _SZ]),
    "gdr_copy_to_mapping": (_I, [MH, _P, _P, _SZ]),
    "gdr_copy_from_mapping": (_I, [MH, _P, _P, _SZ]),
    "gdr_runtime_get_version": (None, [ctypes.POINTER(_I), ctypes.POINTER(_I)]),
    "gdr_driver_get_version": (_I, [_P, ctypes.POINTER(_I), ctypes.POINTER(_I)]),
    "gdr_get_attribute": (_I, [_P, _I, ctypes.POINTER(_I)]),
    "gdr_get_mapping_type_string": (_I, [_I, ctypes.POINTER(ctypes.c_char_p)]),
}
_EXTENSIONS: dict[str, tuple[Any, list[Any]]] = {
    "gdr_get_backend_name": (ctypes.c_char_p, [_P]),
    "gdr_get_backend_list": (ctypes.c_char_p, []),
    "gdr_get_open_failure": (ctypes.c_char_p, []),
    "gdr_alloc_mapped": (_I, [_P, _SZ, ctypes.POINTER(_U64), ctypes.POINTER(_P)]),
    "gdr_free_mapped": (_I, [_P, _U64]),
    "gdr_copy_to_mapping_parallel": (_I, [MH, _P, _P, _SZ, ctypes.c_uint]),
    "gdr_copy_from_mapping_parallel": (_I, [MH, _P, _P, _SZ, ctypes.c_uint]),
    "gdr_open_ex": (_P, [_U32]),
}
# gdr_open_ex(): the caller pins only what the vulkan backend can (gdrapi.h).
OPEN_FLAG_ALLOW_VULKAN = 1 << 0


@dataclass(frozen=True)
class Choice:
    """A library to load: its name or path, where it comes from, and why it was chosen."""

    path: str
    source: str  # "GDRCOPY_LIBRARY", "bundled" or "system"
    why: str


class Library:
    """The bound functions of one loaded libgdrapi.so.2."""

    def __init__(self, cdll: ctypes.CDLL, choice: Choice) -> None:
        self.cdll = cdll
        self.choice = choice
        self.path = _file_of(cdll) or choice.path
        self.fn: dict[str, Any] = {}
        for name, (restype, argtypes) in _SIGNATURES.items():
            try:
                func = getattr(cdll, name)
            except AttributeError:
                raise LibraryNotFound(
                    f"{choice.path} has no {name}: it is not a GDRCopy 2.x libgdrapi; point {LIBRARY_ENV} at libgdrapi.so.2"
                ) from None
            func.restype = restype
            func.argtypes = argtypes
            self.fn[name] = func
        for name, (restype, argtypes) in _EXTENSIONS.items():
            func = getattr(cdll, name, None)
            if func is not None:
                func.restype = restype
                func.argtypes = argtypes
            self.fn[name] = func

    def has(self, name: str) -> bool:
        return self.fn.get(name) is not None

    def address_of(self, name: str) -> int:
        """The C function's address (for the compiled copy calls)."""
        address = ctypes.cast(self.fn[name], ctypes.c_void_p).value
        if not address:
            raise LibraryNotFound(f"{self.path}: {name} has no address")
        return address

    def backends(self) -> tuple[str, ...]:
        """The library's backends in the order gdr_open() tries them (gdr_get_backend_list)."""
        listing = self.fn["gdr_get_backend_list"]
        if listing is None:
            # GDRCopy 2.6 itself: its only backend is gdrdrv (dma-buf mmap is a mode of it).
            return ("gdrdrv",)
        return tuple(str(listing().decode()).split())

    def open_failure(self) -> dict[str, str]:
        """Why each backend declined in this thread's last failed gdr_open() (gdr_get_open_failure)."""
        report = self.fn["gdr_get_open_failure"]
        if report is None:
            return {}
        reasons = {}
        for line in report().decode(errors="replace").splitlines():
            name, _, why = line.partition(": ")
            if name:
                reasons[name] = why
        return reasons


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]  # fmt: skip


def _file_of(cdll: ctypes.CDLL) -> Optional[str]:
    """The file dlopen() loaded (dladdr of one of its functions), for the report."""
    for libc in (None, "libdl.so.2"):
        try:
            dladdr = ctypes.CDLL(libc).dladdr
        except (OSError, AttributeError):
            continue
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        info = _DlInfo()
        if dladdr(ctypes.cast(cdll.gdr_open, ctypes.c_void_p), ctypes.byref(info)) and info.dli_fname:
            return os.path.realpath(str(info.dli_fname.decode()))
    return None


def _elf_machine(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as elf:
            head = elf.read(20)
    except OSError:
        return None
    return head[18:20] if head[:4] == b"\x7fELF" else None


def version_of(path: str) -> tuple[int, ...]:
    """The version in a library's real file name (libgdrapi.so.2.6.1 -> (2, 6, 1)); () if none."""
    name = os.path.basename(os.path.realpath(path))
    tail = name[len("libgdrapi.so.") :] if name.startswith("libgdrapi.so.") else ""
    parts = tail.split(".")
    return tuple(int(p) for p in parts) if tail and all(p.isdigit() for p in parts) else ()


def system_library() -> Optional[str]:
    """The system's libgdrapi.so.2 as dlopen() would find it, without loading it."""
    machine = _elf_machine(sys.executable)
    candidates = [
        os.path.join(directory, SONAME) for directory in os.environ.get("LD_LIBRARY_PATH", "").split(":") if directory
    ]
    for ldconfig in ("/sbin/ldconfig", "/usr/sbin/ldconfig"):
        if os.access(ldconfig, os.X_OK):
            try:
                listing = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=10).stdout
            except (OSError, subprocess.SubprocessError):
                break
            candidates += [line.split(" => ")[1].strip() for line in listing.splitlines()
                           if line.strip().startswith(SONAME + " ") and " => " in line]  # fmt: skip
            break
    for path in candidates:
        if os.path.isfile(path) and _elf_machine(path) == machine:
            return path
    return None


def _version_text(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version)) if version else "unknown version"


def choose() -> list[Choice]:
    """The libraries to try, in order (see the module's notes)."""
    override = os.environ.get(LIBRARY_ENV)
    if override:
        return [Choice(override, "GDRCOPY_LIBRARY", f"{LIBRARY_ENV} names it")]
    bundled = str(BUNDLED_LIBRARY) if BUNDLED_LIBRARY.is_file() else None
    if bundled is None:
        # dlopen's own search (LD_LIBRARY_PATH, ld.so.cache) first; find_library
        # adds the ldconfig name where the soname alone is not found.
        names = [SONAME]
        found = ctypes.util.find_library("gdrapi")
        if found and found not in names:
            names.append(found)
        return [Choice(name, "system", "the package carries no library of its own") for name in names]
    from gdrcopy._version import __version__

    ours = tuple(int(p) for p in __version__.split(".") if p.isdigit())
    system = system_library()
    theirs = version_of(system) if system else ()
    bundled_choice = Choice(
        bundled,
        "bundled",
        f"the wheel's own {__version__}"
        + (f" (the system's {system} is {_version_text(theirs)}, not newer)" if system else " (no system libgdrapi)"),
    )
    if system is None:
        return [bundled_choice]
    if os.environ.get(PREFER_SYSTEM_ENV, "") not in ("", "0"):
        return [Choice(system, "system", f"{PREFER_SYSTEM_ENV} asks for it"), bundled_choice]
    if theirs > ours:
        why = f"{_version_text(theirs)} is newer than the bundled {__version__}"
        return [Choice(system, "system", why), bundled_choice]
    return [bundled_choice, Choice(system, "system", "the bundled library did not load")]


_loaded: Optional[Library] = None
_load_lock = threading.Lock()


def library() -> Library:
    """The loaded library (loading it on the first call)."""
    global _loaded
    lib = _loaded
    if lib is not None:
        return lib
    with _load_lock:
        if _loaded is not None:
            return _loaded
        failures = []
        for choice in choose():
            try:
                cdll = ctypes.CDLL(choice.path, use_errno=True)
            except OSError as error:
                failures.append(f"{choice.path}: {error}")
                continue
            _loaded = Library(cdll, choice)
            if os.environ.get(LOG_ENV):
                print(f"gdrcopy: loaded {_loaded.path} ({choice.source}: {choice.why})", file=sys.stderr)
            return _loaded
        raise LibraryNotFound(
            "cannot load libgdrapi.so.2 (" + "; ".join(failures) + "): install the libgdrapi package "
            f"(Debian/Ubuntu) or gdrcopy (RPM), pip install a gdrcopy wheel that carries it, "
            f"or set {LIBRARY_ENV}=/path/to/libgdrapi.so.2"
        )


def reset_for_tests() -> None:
    """Forget the loaded library (tests load different ones in turn)."""
    global _loaded
    with _load_lock:
        _loaded = None


# ---- the library's reason for a failure --------------------------------

# Reentrant: a finalizer run by the garbage collector inside a captured call
# releases its resource through a captured call of its own (nesting works:
# the inner block saves and restores the outer one's redirection).
_capture_lock = threading.RLock()


@contextlib.contextmanager
def captured_log() -> Iterator[list[str]]:
    """Collect what the library logs to stderr during the block.

    Only while GDRCOPY_ENABLE_LOGGING is set (otherwise the library logs
    nothing and stderr is left alone).  File descriptor 2 is redirected for
    the block; everything written there is written back to the real stderr
    afterwards, so nothing is lost, and the library's lines are also
    returned in the list, for the exception.
    """
    lines: list[str] = []
    if LOG_ENV not in os.environ:
        yield lines
        return
    with _capture_lock:
        try:
            sys.stderr.flush()
        except (AttributeError, ValueError, OSError):
            pass
        saved = os.dup(2)
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield lines
            finally:
                os.dup2(saved, 2)
                os.close(saved)
                sink.seek(0)
                data = sink.read()
        if data:
            os.write(2, data)
            for line in data.decode(errors="replace").splitlines():
                if line.startswith(_LOG_PREFIXES):
                    lines.append(line[len(_LOG_PREFIXES[0]) :].strip())


def check(rc: int, function: str, log: list[str], what: str = "") -> None:
    if rc:
        raise GdrError(rc, function, what, " / ".join(log))


def errno_of_null() -> int:
    code = ctypes.get_errno()
    return code if code else errno.ENODEV
