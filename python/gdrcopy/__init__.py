"""gdrcopy: low-latency CPU access to GPU memory, over libgdrapi.so.2.

    import gdrcopy
    with gdrcopy.open() as g, g.map(gpu_array) as m:
        m.copy_to(b"hello")

Pure Python (ctypes): the library is loaded on first use, from the system
(`libgdrapi.so.2`) or from GDRCOPY_LIBRARY.  NumPy is needed only for the
ndarray views.  See docs/python.md.
"""

from __future__ import annotations

from gdrcopy._core import (
    BACKENDS,
    GPU_PAGE_SIZE,
    Allocation,
    ClosedError,
    Gdr,
    Info,
    InvalidatedError,
    Mapping,
    MappingType,
    Pin,
    open,
)
from gdrcopy._lib import LIBRARY_ENV, GdrError, LibraryNotFound, library
from gdrcopy._version import __version__

__all__ = [
    "BACKENDS",
    "GPU_PAGE_SIZE",
    "LIBRARY_ENV",
    "Allocation",
    "ClosedError",
    "Gdr",
    "GdrError",
    "Info",
    "InvalidatedError",
    "LibraryNotFound",
    "Mapping",
    "MappingType",
    "Pin",
    "__version__",
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
    """The name or path the library was loaded from."""
    return library().path
