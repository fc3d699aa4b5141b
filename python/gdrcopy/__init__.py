"""gdrcopy: low-latency CPU access to GPU memory, over libgdrapi.so.2.

    import gdrcopy
    with gdrcopy.open() as g, g.map(gpu_array) as m:
        m.copy_to(b"hello")

The library is loaded on first use: the one a bundled wheel carries, or the
system's (`libgdrapi.so.2`), or GDRCOPY_LIBRARY (see `library_info()`).
Copies go through compiled code where gdrcopy._fastcopy is built, else
through ctypes (`fast_path()`).  NumPy is needed only for the ndarray views.
See docs/python.md.
"""

from __future__ import annotations

from gdrcopy._core import (
    FAST_PATH_ENV,
    GPU_PAGE_SIZE,
    Allocation,
    ClosedError,
    Gdr,
    Info,
    InvalidatedError,
    Mapping,
    MappingType,
    OpenError,
    Pin,
    backends,
    fast_path,
    open,
)
from gdrcopy._lib import LIBRARY_ENV, PREFER_SYSTEM_ENV, GdrError, LibraryNotFound, library
from gdrcopy._version import __version__

__all__ = [
    "FAST_PATH_ENV",
    "GPU_PAGE_SIZE",
    "LIBRARY_ENV",
    "PREFER_SYSTEM_ENV",
    "Allocation",
    "ClosedError",
    "Gdr",
    "GdrError",
    "Info",
    "InvalidatedError",
    "LibraryNotFound",
    "Mapping",
    "MappingType",
    "OpenError",
    "Pin",
    "__version__",
    "backends",
    "fast_path",
    "library_info",
    "library_path",
    "library_version",
    "open",
]


def library_version() -> str:
    """The loaded libgdrapi's interface version, "MAJOR.MINOR" (gdr_runtime_get_version)."""
    import ctypes

    major, minor = ctypes.c_int(), ctypes.c_int()
    library().fn["gdr_runtime_get_version"](ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}"


def library_path() -> str:
    """The file the library was loaded from (or the name dlopen() was given)."""
    return library().path


def library_info() -> dict[str, str]:
    """Which libgdrapi was loaded and why: path, source ("bundled", "system", "GDRCOPY_LIBRARY"), why, version."""
    lib = library()
    return {
        "path": lib.path,
        "source": lib.choice.source,
        "why": lib.choice.why,
        "version": library_version(),
        "fast_path": fast_path(),
    }


def __getattr__(name: str) -> object:
    # The former constant, now asked of the library (which loads it).
    if name == "BACKENDS":
        return backends()
    raise AttributeError(f"module 'gdrcopy' has no attribute {name!r}")
