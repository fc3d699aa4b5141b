"""Ask a CUDA driver library (NVIDIA's or softgpu's) what it answers, from a child process.

Run as `python -m gdrkit.cudaprobe COMMAND LIBRARY`, with the command's
JSON argument (if any) on stdin; prints one JSON document.  The library is loaded with ctypes in this process only, so a
crash, or a real libcuda creating device nodes, never reaches the caller
(which runs it under tests/realcuda/no-driver.sh).  Needs no GPU: everything
asked here is answered by the library alone.

  version LIB                     cuDriverGetVersion
  procs LIB  [[name, version]...]  cuGetProcAddress_v2 of each, and the exported
                                  symbol the returned address is (dladdr)
  errors LIB [code...]            cuGetErrorName / cuGetErrorString
  init LIB                        cuInit(0) twice, then cuDeviceGetCount
  gdr-open LIBGDRAPI              gdr_open(): handle or errno (the log is on stderr)
"""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


_dladdr = ctypes.CDLL(None).dladdr  # in libc (glibc 2.34 and later) or libdl, loaded already
_dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]


def exported_name(address: int) -> str | None:
    """The dynamic symbol that starts exactly at `address`, if one does."""
    info = _DlInfo()
    if not _dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_sname:
        return None
    if info.dli_saddr != address:
        return None
    return bytes(info.dli_sname).decode()


def driver_version(lib: ctypes.CDLL) -> int:
    version = ctypes.c_int(0)
    status = lib.cuDriverGetVersion(ctypes.byref(version))
    return version.value if status == 0 else -status


def procs(lib: ctypes.CDLL, queries: list[list[Any]]) -> list[dict[str, Any]]:
    get_proc = lib.cuGetProcAddress_v2
    get_proc.argtypes = [
        ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_ulonglong,
        ctypes.POINTER(ctypes.c_int),
    ]  # fmt: skip
    answers = []
    for name, version in queries:
        fn = ctypes.c_void_p(0)
        status = ctypes.c_int(-1)
        result = get_proc(str(name).encode(), ctypes.byref(fn), int(version), 0, ctypes.byref(status))
        address = fn.value or 0
        answers.append({
            "name": name, "version": version, "result": result, "status": status.value,
            "symbol": exported_name(address) if address else None,
        })  # fmt: skip
    return answers


def errors(lib: ctypes.CDLL, codes: list[int]) -> list[dict[str, Any]]:
    answers = []
    for code in codes:
        name = ctypes.c_char_p()
        text = ctypes.c_char_p()
        name_result = lib.cuGetErrorName(code, ctypes.byref(name))
        text_result = lib.cuGetErrorString(code, ctypes.byref(text))
        answers.append({
            "code": code,
            "name": name.value.decode() if name_result == 0 and name.value else None,
            "text": text.value.decode() if text_result == 0 and text.value else None,
        })  # fmt: skip
    return answers


def init(lib: ctypes.CDLL) -> dict[str, Any]:
    first = lib.cuInit(0)
    again = lib.cuInit(0)
    count = ctypes.c_int(-1)
    count_result = lib.cuDeviceGetCount(ctypes.byref(count))
    name = ctypes.c_char_p()
    lib.cuGetErrorName(first, ctypes.byref(name))
    return {
        "cuInit": first,
        "name": name.value.decode() if name.value else None,
        "again": again,
        "cuDeviceGetCount": count_result,
    }


def gdr_open(path: str) -> dict[str, Any]:
    lib = ctypes.CDLL(path, use_errno=True)
    lib.gdr_open.restype = ctypes.c_void_p
    handle = lib.gdr_open()
    err = ctypes.get_errno()
    answer: dict[str, Any] = {"opened": bool(handle), "errno": 0 if handle else err}
    if handle:
        lib.gdr_get_backend_name.restype = ctypes.c_char_p
        lib.gdr_get_backend_name.argtypes = [ctypes.c_void_p]
        answer["backend"] = (lib.gdr_get_backend_name(handle) or b"").decode()
        lib.gdr_close.argtypes = [ctypes.c_void_p]
        lib.gdr_close(handle)
    return answer


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    command, path = argv
    extra = json.loads(sys.stdin.read() or "[]") if command in ("procs", "errors") else []
    if command == "gdr-open":
        print(json.dumps(gdr_open(path)))
        return 0
    lib = ctypes.CDLL(path)
    answer: Any
    if command == "version":
        answer = driver_version(lib)
    elif command == "procs":
        answer = procs(lib, extra)
    elif command == "errors":
        answer = errors(lib, extra)
    elif command == "init":
        answer = init(lib)
    else:
        print(f"unknown command {command!r}\n{__doc__}", file=sys.stderr)
        return 2
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
