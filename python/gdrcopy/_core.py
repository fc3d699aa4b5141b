"""Open instances, pins, mappings and Vulkan allocations.

Ownership.  Every native resource is a `_Node`: a plain record with its
release function, its parent (strong) and its children (strong, in creation
order).  The user-facing objects (Gdr, Pin, Mapping, Allocation) each hold
their node and their parent object; a node only holds a weak reference back
to its object.  Closing a node closes its children first, newest first, so
the library always sees unmap -> unpin -> free -> close, whatever order the
garbage collector finalizes the Python objects in (their finalizers only
close their node, and a node already closed by its parent does nothing).

Explicit close() refuses (BufferError) while a NumPy view of any mapping
underneath is alive, as mmap.close() does: the view would point at unmapped
memory.

Fork.  The C API gives a fork child nothing of its parent's: gdrdrv refuses
the child's ioctls and mmaps and mappings are not inherited.  In the child,
every object made before the fork is marked closed without any call into the
library (which could unmap addresses the child reuses); the child opens its
own instance.
"""

from __future__ import annotations

import builtins
import ctypes
import enum
import importlib
import os
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Optional, TypeVar

from gdrcopy import _gpubuf, _interchange
from gdrcopy._lib import OPEN_FLAG_ALLOW_VULKAN, GdrError, captured_log, check, errno_of_null, library

GPU_PAGE_SIZE = 1 << 16
GPU_PAGE_MASK = GPU_PAGE_SIZE - 1
FAST_PATH_ENV = "GDRCOPY_NO_FAST_PATH"

# The compiled copy calls (python/src), where the wheel was built with them.
_fastcopy: Any
try:
    _fastcopy = importlib.import_module("gdrcopy._fastcopy")
except ImportError as error:
    _fastcopy = None
    _FAST_PATH_MISSING = f"gdrcopy._fastcopy is not built ({error}): copies go through ctypes"
else:
    _FAST_PATH_MISSING = ""

_R = TypeVar("_R", bound="_Resource")


def backends() -> tuple[str, ...]:
    """The loaded library's backends, in the order gdr_open() tries them (gdr_get_backend_list)."""
    return library().backends()


def fast_path() -> str:
    """Which code copies: "compiled" (gdrcopy._fastcopy) or "ctypes", with the reason for ctypes."""
    if os.environ.get(FAST_PATH_ENV, "") not in ("", "0"):
        return f"ctypes ({FAST_PATH_ENV} is set)"
    if _fastcopy is None:
        return f"ctypes ({_FAST_PATH_MISSING})"
    return "compiled"


class ClosedError(ValueError):
    """The object was closed (or belongs to the parent of a fork)."""


class InvalidatedError(GdrError):
    """The GPU memory behind a pin was freed (the library's callback flag is set)."""


class OpenError(GdrError):
    """gdr_open() failed: `reasons` maps each backend the library has to why it declined."""

    def __init__(self, code: int, what: str, reasons: dict[str, str], log: list[str]) -> None:
        self.reasons = reasons
        detail = "; ".join(f"{name}: {why}" for name, why in reasons.items()) or " / ".join(log)
        super().__init__(code, "gdr_open", what, detail)


class MappingType(enum.IntEnum):
    """gdr_mapping_type_t."""

    NONE = 0
    WC = 1
    CACHING = 2
    DEVICE = 3


# gdr_map_flags_t by the name callers pass.
_MAP_FLAGS = {"default": 0, "wc": 1, "caching": 2, "device": 3}
_ATTR_PERSISTENT, _ATTR_FORCE_PCIE, _ATTR_DMA_BUF, _ATTR_VMA_INHERITED_ON_FORK = 1, 2, 3, 4


@dataclass(frozen=True)
class Info:
    """gdr_get_info() of a pin."""

    va: int
    mapped_size: int
    page_size: int
    mapped: bool
    wc_mapping: bool
    mapping_type: MappingType


# ---- the ownership tree --------------------------------------------------

_live_roots: dict["_Node", None] = {}
_tree_lock = threading.RLock()


class _Node:
    __slots__ = ("what", "parent", "children", "release", "closed_why", "views", "owner", "__weakref__")

    def __init__(self, what: str, parent: Optional["_Node"], release: Callable[[], None]) -> None:
        self.what = what
        self.parent = parent
        self.children: dict[_Node, None] = {}
        self.release: Optional[Callable[[], None]] = release
        self.closed_why = ""
        self.views = 0
        self.owner: Optional[weakref.ref[Any]] = None
        with _tree_lock:
            if parent is None:
                _live_roots[self] = None
            else:
                if parent.closed_why:
                    raise ClosedError(f"{parent.what} is {parent.closed_why}")
                parent.children[self] = None

    def live_views(self) -> int:
        return self.views + sum(child.live_views() for child in self.children)

    def close(self, *, check_views: bool) -> None:
        """Close the children, newest first, then release this node."""
        errors: list[BaseException] = []
        with _tree_lock:
            if self.closed_why:
                return
            if check_views:
                views = self.live_views()
                if views:
                    raise BufferError(
                        f"cannot close {self.what}: {views} view(s) of its mapped memory (NumPy arrays, memoryviews, "
                        "DLPack tensors) are still alive; delete them (del view) first"
                    )
            for child in reversed(list(self.children)):
                try:
                    child.close(check_views=False)
                except GdrError as error:
                    errors.append(error)
            release, self.release = self.release, None
            self._detach("closed")
        if release is not None:
            release()
        if errors:
            raise errors[0]

    def abandon(self, why: str) -> None:
        """Forget the native resource without releasing it (fork child)."""
        for child in list(self.children):
            child.abandon(why)
        self.release = None
        self._detach(why)

    def _detach(self, why: str) -> None:
        self.closed_why = why
        if self.parent is not None:
            self.parent.children.pop(self, None)
        else:
            _live_roots.pop(self, None)
        obj = self.owner() if self.owner is not None else None
        if obj is not None:
            obj._closed_hook()


def _finalize(node: _Node) -> None:
    try:
        node.close(check_views=False)
    except Exception:
        pass  # nobody left to tell, and the resource is released regardless


def _after_fork_in_child() -> None:
    why = f"unusable in this process: made in process {_parent_pid[0]} before os.fork() (open gdrcopy again here)"
    for root in list(_live_roots):
        root.abandon(why)


_parent_pid = [os.getpid()]


def _before_fork() -> None:
    _parent_pid[0] = os.getpid()


os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


class _Resource:
    """Common handling: node, close(), the context manager."""

    _node: _Node

    def _adopt(self, node: _Node) -> None:
        self._node = node
        node.owner = weakref.ref(self)
        weakref.finalize(self, _finalize, node)

    def _closed_hook(self) -> None:
        pass

    def _live(self) -> None:
        if self._node.closed_why:
            raise ClosedError(f"{self._node.what} is {self._node.closed_why}")

    @property
    def closed(self) -> bool:
        return bool(self._node.closed_why)

    def close(self) -> None:
        """Release it, and first everything made from it (idempotent)."""
        self._node.close(check_views=True)

    def __enter__(self: _R) -> _R:
        self._live()
        return self

    def __exit__(
        self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()


# ---- host buffers ----------------------------------------------------------


class _PyBuffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None
_PYBUF_SIMPLE = 0


def _host_buffer(obj: object, writable: bool, what: str) -> tuple[object, Any, int]:
    """(what keeps it exported, its pointer for ctypes, its byte count).

    The returned memoryview holds the buffer's export, so the memory cannot
    move (a bytearray cannot be resized) while it is kept.  bytes are passed
    to ctypes as they are: they are immutable and ctypes passes their data.
    """
    if type(obj) is bytes:
        if writable:
            raise TypeError(f"{what}: bytes are read-only; pass a bytearray, memoryview or NumPy array to copy into")
        return obj, obj, len(obj)
    try:
        view = memoryview(obj)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"{what}: {type(obj).__name__} is not a host buffer; pass bytes, bytearray, memoryview, "
            "a NumPy array or anything with the buffer protocol"
        ) from None
    if not view.contiguous:
        raise ValueError(f"{what}: the host buffer is not contiguous; pass a contiguous one (numpy.ascontiguousarray)")
    if writable and view.readonly:
        raise TypeError(f"{what}: the host buffer is read-only; pass a writable one to copy into")
    raw = _PyBuffer()
    # The memoryview's own export keeps the address valid after this release.
    if _get_buffer(view, ctypes.byref(raw), _PYBUF_SIMPLE if view.c_contiguous else 0x0080 | 0x0004 | 0x0008 | 0x0010):
        raise TypeError(f"{what}: cannot read the host buffer's address")
    address = raw.buf or 0
    _release_buffer(ctypes.byref(raw))
    return view, address, view.nbytes


# ---- the open instance -------------------------------------------------------

_env_lock = threading.Lock()


class Gdr(_Resource):
    """An open libgdrapi instance (gdr_t): use gdrcopy.open()."""

    def __init__(self, backend: Optional[str] = None) -> None:
        lib = library()
        self._lib = lib
        fn = lib.fn
        known = lib.backends()
        if backend == "dma-buf":
            backend = "dmabuf"  # the spelling of the README and of GDRCOPY_BACKEND
        if backend in (None, "", "auto"):
            wanted = None
        elif backend in known:
            wanted = backend
        else:
            raise ValueError(f"unknown backend {backend!r}: {lib.path} has {', '.join(known)}; or use 'auto'")
        if wanted is not None and wanted != "gdrdrv" and not lib.has("gdr_get_backend_name"):
            raise GdrError(
                95,
                "gdr_open",
                f"backend {wanted!r}",
                f"{lib.path} is a GDRCopy 2.6 library without backends; use ours (GDRCOPY_LIBRARY)",
            )
        with _env_lock, captured_log() as log:
            # The library reads GDRCOPY_BACKEND in gdr_open() and nowhere else.
            saved = os.environ.get("GDRCOPY_BACKEND")
            try:
                if wanted is not None:
                    os.environ["GDRCOPY_BACKEND"] = wanted
                elif saved is not None and backend == "auto":
                    del os.environ["GDRCOPY_BACKEND"]
                if wanted is None and lib.has("gdr_open_ex"):
                    # A program on these bindings chose gdrcopy itself, and a pin
                    # the vulkan backend refuses (cudaMalloc memory) raises
                    # GdrError with the library's reason at that call: so they take
                    # vulkan after gdrdrv and dma-buf, where gdr_open() would not
                    # (issue 35; gdrapi.h, gdr_open_ex).
                    handle = fn["gdr_open_ex"](OPEN_FLAG_ALLOW_VULKAN)
                else:
                    handle = fn["gdr_open"]()
                code = errno_of_null() if not handle else 0
                reasons = lib.open_failure() if not handle else {}
            finally:
                if saved is None:
                    os.environ.pop("GDRCOPY_BACKEND", None)
                else:
                    os.environ["GDRCOPY_BACKEND"] = saved
        if not handle:
            hint = f"backend {wanted}" if wanted else "no backend could map GPU memory"
            raise OpenError(code, hint, reasons, log)
        self._g: int = handle
        close = fn["gdr_close"]

        def release() -> None:
            with captured_log() as log:
                rc = close(handle)
            check(rc, "gdr_close", log)

        self._adopt(_Node("the gdrcopy instance", None, release))

    @property
    def handle(self) -> int:
        """The gdr_t, for C code that shares this instance."""
        self._live()
        return self._g

    @property
    def backend_name(self) -> str:
        """ "gdrdrv", "dmabuf" or "vulkan"."""
        self._live()
        get = self._lib.fn["gdr_get_backend_name"]
        if get is not None:
            return str(get(self._g).decode())
        # GDRCopy 2.6 itself: gdrdrv, or dma-buf mmap when it says so.
        return "dmabuf" if self.attribute(_ATTR_DMA_BUF) else "gdrdrv"

    def attribute(self, attr: int) -> int:
        """gdr_get_attribute() (GDR_ATTR_* numbers)."""
        self._live()
        value = ctypes.c_int()
        with captured_log() as log:
            rc = self._lib.fn["gdr_get_attribute"](self._g, attr, ctypes.byref(value))
        check(rc, "gdr_get_attribute", log, f"attribute {attr}")
        return value.value

    @property
    def persistent_mapping(self) -> bool:
        """Pins stay valid after the GPU memory is freed (GDR_ATTR_USE_PERSISTENT_MAPPING)."""
        return bool(self.attribute(_ATTR_PERSISTENT))

    @property
    def supports_force_pcie(self) -> bool:
        return bool(self.attribute(_ATTR_FORCE_PCIE))

    @property
    def using_dma_buf_mmap(self) -> bool:
        return bool(self.attribute(_ATTR_DMA_BUF))

    @property
    def mappings_inherited_on_fork(self) -> bool:
        """A fork() child inherits this instance's mappings (GDR_ATTR_VMA_INHERITED_ON_FORK)."""
        return bool(self.attribute(_ATTR_VMA_INHERITED_ON_FORK))

    def driver_version(self) -> tuple[int, int]:
        """gdr_driver_get_version(): the gdrdrv version (the backend's, elsewhere)."""
        self._live()
        major, minor = ctypes.c_int(), ctypes.c_int()
        with captured_log() as log:
            rc = self._lib.fn["gdr_driver_get_version"](self._g, ctypes.byref(major), ctypes.byref(minor))
        check(rc, "gdr_driver_get_version", log)
        return major.value, minor.value

    def info(self) -> dict[str, object]:
        """What this instance is: backend, versions, attributes."""
        out: dict[str, object] = {"backend": self.backend_name, "library": self._lib.path}
        try:
            out["driver_version"] = "%d.%d" % self.driver_version()
        except GdrError as error:
            out["driver_version"] = f"unavailable ({os.strerror(error.errno or 0)})"
        for name, attr in (
            ("persistent_mapping", _ATTR_PERSISTENT),
            ("supports_force_pcie", _ATTR_FORCE_PCIE),
            ("using_dma_buf_mmap", _ATTR_DMA_BUF),
            # None with a library older than the attribute (EINVAL).
            ("mappings_inherited_on_fork", _ATTR_VMA_INHERITED_ON_FORK),
        ):
            try:
                out[name] = bool(self.attribute(attr))
            except GdrError:
                out[name] = None
        return out

    def pin(self, buffer: object, *, force_pcie: bool = False, device: Optional[int] = None) -> "Pin":
        """Pin the GPU pages holding `buffer` (see gdrcopy._gpubuf for what it may be).

        `device` is the CUDA device ordinal the memory is on, for DLPack
        exports; by default the buffer's `__dlpack_device__` or CUDA says.
        """
        self._live()
        return Pin(self, buffer, force_pcie, device)

    def map(
        self, buffer: object, *, mapping: str = "default", force_pcie: bool = False, device: Optional[int] = None
    ) -> "Mapping":
        """Pin and map `buffer`: a Mapping whose close() also unpins."""
        pin = self.pin(buffer, force_pcie=force_pcie, device=device)
        try:
            return pin._map(mapping, owns_pin=True)
        except BaseException:
            pin.close()
            raise

    def alloc_mapped(self, nbytes: int, *, device: Optional[int] = None) -> "Allocation":
        """GPU memory with its CPU mapping already made (the vulkan backend only).

        `device`: the CUDA device ordinal, for DLPack exports (default: CUDA says).
        """
        self._live()
        return Allocation(self, nbytes, device)


def open(backend: Optional[str] = None) -> Gdr:  # noqa: A001 - the library's own verb
    """Open libgdrapi: `backend` None/"auto", or "gdrdrv", "dmabuf" ("dma-buf"), "vulkan".

    "auto" takes gdrdrv, then dma-buf, then vulkan (gdr_open_ex with
    GDR_OPEN_FLAG_ALLOW_VULKAN), which pins only cuMemCreate memory with a
    POSIX fd handle and alloc_mapped() memory; pinning other memory there
    raises GdrError saying so.
    """
    return Gdr(backend)


# ---- pins ------------------------------------------------------------------


class Pin(_Resource):
    """A pinned GPU buffer (gdr_mh_t)."""

    def __init__(self, gdr: Gdr, buffer: object, force_pcie: bool, device: Optional[int] = None) -> None:
        pointer, nbytes, keep = _gpubuf.describe(buffer, "pin")
        if device is None:
            device = _interchange.device_of_object(buffer)
        if device is None and isinstance(buffer, Allocation):
            device = buffer._device
        self._device = device
        if nbytes <= 0:
            raise ValueError("pin: the GPU buffer is empty; pin at least one byte")
        self.gdr = gdr
        self._keep = keep  # the producer's memory must outlive the pin
        self.gpu_ptr = pointer
        self.nbytes = nbytes
        # The driver pins whole 64 KiB GPU pages anyway; pinning from the page
        # start lets gdr_map (which needs a page-aligned pin) map it.
        self._delta = pointer & GPU_PAGE_MASK
        base = pointer - self._delta
        fn = gdr._lib.fn
        handle = ctypes.c_ulong()
        parent = buffer._node if isinstance(buffer, Allocation) else gdr._node
        with captured_log() as log:
            rc = fn["gdr_pin_buffer_v2"](
                gdr._g, base, self._delta + nbytes, 1 if force_pcie else 0, ctypes.byref(handle)
            )
        check(rc, "gdr_pin_buffer_v2", log, f"pin {nbytes} bytes at GPU address {pointer:#x}")
        self._mh = handle.value
        g, mh, unpin = gdr._g, self._mh, fn["gdr_unpin_buffer"]

        def release() -> None:
            with captured_log() as log:
                rc = unpin(g, mh)
            check(rc, "gdr_unpin_buffer", log)

        try:
            node = _Node(f"pin of {nbytes} bytes at {pointer:#x}", parent, release)
        except ClosedError:
            release()
            raise
        self._adopt(node)
        self._mapping: Optional[weakref.ref[Mapping]] = None

    @property
    def handle(self) -> int:
        """gdr_mh_t.h, for C code sharing the instance."""
        self._live()
        return self._mh

    @property
    def invalidated(self) -> bool:
        """gdr_get_callback_flag(): the GPU memory was freed under this pin (legacy mode)."""
        self._live()
        flag = ctypes.c_int()
        with captured_log() as log:
            rc = self.gdr._lib.fn["gdr_get_callback_flag"](self.gdr._g, self._mh, ctypes.byref(flag))
        check(rc, "gdr_get_callback_flag", log)
        return bool(flag.value)

    def check(self) -> None:
        """Raise InvalidatedError if the GPU memory behind the pin was freed."""
        if self.invalidated:
            raise InvalidatedError(
                14, "gdr_get_callback_flag", f"{self._node.what}: the GPU memory was freed while pinned; unpin it"
            )

    def info(self) -> Info:
        self._live()
        raw = _lib_info(self.gdr, self._mh)
        return Info(
            va=raw.va + self._delta,
            mapped_size=raw.mapped_size,
            page_size=raw.page_size,
            mapped=bool(raw.mapped),
            wc_mapping=bool(raw.wc_mapping),
            mapping_type=MappingType(raw.mapping_type),
        )

    def map(self, mapping: str = "default") -> "Mapping":
        """Map the pinned buffer into this process (once at a time)."""
        return self._map(mapping, owns_pin=False)

    def _map(self, mapping: str, owns_pin: bool) -> "Mapping":
        self._live()
        if mapping not in _MAP_FLAGS:
            raise ValueError(f"unknown mapping {mapping!r}; use one of {', '.join(_MAP_FLAGS)}")
        return Mapping(self, _MAP_FLAGS[mapping], owns_pin)

    def unpin(self) -> None:
        self.close()


def _lib_info(gdr: Gdr, mh: int) -> Any:
    from gdrcopy._lib import InfoV2

    raw = InfoV2()
    with captured_log() as log:
        rc = gdr._lib.fn["gdr_get_info_v2"](gdr._g, mh, ctypes.byref(raw))
    check(rc, "gdr_get_info_v2", log)
    return raw


# ---- mappings ----------------------------------------------------------------


def _acquire_view(node: _Node) -> Callable[[], None]:
    """Count one live view of node's memory; the returned function (idempotent) uncounts it."""
    with _tree_lock:
        if node.closed_why:
            raise ClosedError(f"{node.what} is {node.closed_why}")
        node.views += 1
    released = [False]

    def release() -> None:
        with _tree_lock:
            if not released[0]:
                released[0] = True
                node.views -= 1

    return release


class _View:
    """The owner of NumPy views: counts them for close()."""

    def __init__(self, node: _Node, keep: object, address: int, dtype: Any, shape: tuple[int, ...]) -> None:
        self._keep = keep
        self.__array_interface__ = {
            "version": 3,
            "data": (address, False),
            "shape": shape,
            "typestr": dtype.str,
            "descr": dtype.descr,
            "strides": None,
        }
        weakref.finalize(self, _acquire_view(node))


def _ndarray(node: _Node, keep: object, address: int, nbytes: int, dtype: Any, shape: Any, offset: int) -> Any:
    try:
        import numpy
    except ImportError:
        raise ImportError("ndarray views need NumPy: pip install numpy (or apt-get install python3-numpy)") from None
    dt = numpy.dtype(dtype)
    if shape is None:
        shape = ((nbytes - offset) // dt.itemsize,) if dt.itemsize else (0,)
    elif isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(n) for n in shape)
    if any(n < 0 for n in shape):
        raise ValueError(f"ndarray: negative extent in shape {shape}")
    size = dt.itemsize
    for n in shape:
        size *= n
    if offset < 0 or size > nbytes - offset:
        raise ValueError(f"ndarray: {size} bytes at offset {offset} do not fit the {nbytes}-byte mapping")
    return numpy.asarray(_View(node, keep, address + offset, dt, shape))


class _Exchange(_Resource):
    """The zero-copy protocols of mapped GPU memory (see gdrcopy._interchange).

    GPU side: `__dlpack__`/`__dlpack_device__` and `__cuda_array_interface__`
    (torch.from_dlpack, cupy.asarray, numba.cuda.as_cuda_array).  CPU side:
    `__array_interface__` (numpy.asarray), `memoryview()` and, on Python >=
    3.12, the buffer protocol (`__buffer__`).  All as uint8 of `nbytes`.
    The CPU side is write-combined (see `mapping_type`): stores are fast,
    loads are uncached reads across PCIe.
    """

    nbytes: int

    def _gpu_address(self) -> int:
        raise NotImplementedError

    def _cpu_address(self) -> int:
        raise NotImplementedError

    def _known_device(self) -> Optional[int]:
        return None

    @property
    def device_id(self) -> int:
        """The CUDA device ordinal of the GPU memory (for DLPack)."""
        self._live()
        device = self._known_device()
        if device is None:
            device = _interchange.device_of(self._gpu_address())
        if device is None:
            raise BufferError(
                f"cannot tell which CUDA device holds GPU address {self._gpu_address():#x} (libcuda.so.1 is not "
                "loadable here or does not know the address): pass device=N to Gdr.map() or Gdr.pin()"
            )
        return device

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_gpubuf.KDL_CUDA, self.device_id)

    def __dlpack__(
        self,
        *,
        stream: Optional[Any] = None,
        max_version: Optional[tuple[int, int]] = None,
        dl_device: Optional[tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any:
        """A DLPack "dltensor" capsule of the GPU side (uint8, no copy).

        `stream` needs no synchronisation: nothing is queued on the GPU for
        this memory (CPU stores reach it through the mapping; copy_to fences
        them).  A legacy capsule is returned whatever `max_version` asks,
        which the DLPack protocol allows and every consumer reads.
        """
        self._live()
        if copy:
            raise BufferError("gdrcopy exports mapped GPU memory without copying; copy=True cannot be honoured")
        device = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != device:
            raise BufferError(f"the memory is on DLPack device {device}, not {tuple(dl_device)}; copy it yourself")
        return _interchange.dlpack_capsule(
            self._gpu_address(), self.nbytes, device[1], lambda: _acquire_view(self._node)
        )

    @property
    def __cuda_array_interface__(self) -> dict[str, object]:
        self._live()
        return {
            "version": 3,
            "shape": (self.nbytes,),
            "typestr": "|u1",
            "data": (self._gpu_address(), False),
            "strides": None,
            "stream": None,
        }

    def _window(self) -> Any:
        self._live()
        return _interchange.cpu_window(self._cpu_address(), self.nbytes, lambda: _acquire_view(self._node))

    @property
    def __array_interface__(self) -> dict[str, object]:
        # The data object is the window: NumPy keeps it as the array's base, so the
        # array counts as a live view for as long as it lives.
        return {"version": 3, "shape": (self.nbytes,), "typestr": "|u1", "data": self._window(), "strides": None}

    def memoryview(self) -> builtins.memoryview:
        """A writable memoryview of the CPU mapping (format "B"; a live view until released)."""
        return memoryview(self._window()).cast("B")

    def __buffer__(self, flags: int) -> builtins.memoryview:
        return self.memoryview()

    def ndarray(self, dtype: Any = "uint8", shape: Any = None, offset: int = 0) -> Any:
        """A NumPy array over the CPU mapping itself (no copy; see the class notes)."""
        self._live()
        return _ndarray(self._node, self, self._cpu_address(), self.nbytes, dtype, shape, offset)


def _fast_copy(fn: Any) -> Any:
    """The same C function, called with the GIL held: for small copies, where
    releasing and retaking the GIL would cost more than the copy itself."""
    address = ctypes.cast(fn, ctypes.c_void_p).value
    assert address is not None
    return ctypes.PYFUNCTYPE(fn.restype, *fn.argtypes)(address)


# Copies up to this size keep the GIL (they take well under a microsecond).
_GIL_KEPT_MAX = 64 * 1024
# (the object passed, what keeps it exported, its address, its byte count): the
# object is the cache key, so a repeated copy from it skips the export.
_NO_BUFFER: tuple[object, object, Any, int] = (object(), None, None, 0)


class Mapping(_Exchange):
    """A CPU mapping of a pinned GPU buffer.

    `copy_to()` and `copy_from()` are the fast path: they use the library's
    copy routines for the mapping type (streaming stores and loads with
    fences for write-combined memory), called from compiled code
    (gdrcopy._fastcopy) where it is built, else through ctypes.  The mapping
    also hands its memory to other libraries without a copy (see _Exchange):
    the GPU side to PyTorch and CuPy, the CPU side to NumPy.  Reads through a
    write-combined view are uncached and 10-20 times slower than copy_from(),
    and the order of plain stores is only guaranteed after a fence, so use
    views for convenience and the copy functions for speed.
    """

    def __init__(self, pin: Pin, flags: int, owns_pin: bool) -> None:
        gdr = pin.gdr
        fn = gdr._lib.fn
        self.pin = pin
        self.nbytes = pin.nbytes
        length = pin._delta + pin.nbytes
        va = ctypes.c_void_p()
        with captured_log() as log:
            rc = fn["gdr_map_v2"](gdr._g, pin._mh, ctypes.byref(va), length, flags)
        check(rc, "gdr_map_v2", log, f"map {pin._node.what}")
        base = va.value or 0
        g, mh, unmap = gdr._g, pin._mh, fn["gdr_unmap"]

        def release() -> None:
            with captured_log() as log:
                rc = unmap(g, mh, base, length)
            check(rc, "gdr_unmap", log)

        try:
            node = _Node(f"mapping of {pin._node.what}", pin._node, release)
        except ClosedError:
            release()
            raise
        self._adopt(node)
        self._owns_pin = owns_pin
        self.ptr = base + pin._delta
        # The fast path reads these, nothing else: see copy_to().
        self._mh = mh
        self._va = self.ptr
        self._size = pin.nbytes
        self._to = fn["gdr_copy_to_mapping"]
        self._from = fn["gdr_copy_from_mapping"]
        self._to_gil = _fast_copy(self._to)
        self._from_gil = _fast_copy(self._from)
        self._src: tuple[object, object, Any, int] = _NO_BUFFER
        self._dst: tuple[object, object, Any, int] = _NO_BUFFER
        raw = _lib_info(gdr, mh)
        self.mapping_type = MappingType(raw.mapping_type)
        self._copier: Any = None
        if fast_path() == "compiled":
            lib = gdr._lib
            self._copier = _fastcopy.Copier(
                lib.address_of("gdr_copy_to_mapping"), lib.address_of("gdr_copy_from_mapping"), mh, self.ptr,
                pin.nbytes,
            )  # fmt: skip
            # Instance attributes shadow the ctypes methods: a copy is then one C call.
            vars(self).update(copy_to=self._copier.copy_to, copy_from=self._copier.copy_from)

    @property
    def copy_path(self) -> str:
        """ "compiled" or "ctypes": which code this mapping's copy_to/copy_from run."""
        return "compiled" if self._copier is not None else "ctypes"

    def _gpu_address(self) -> int:
        return self.pin.gpu_ptr

    def _cpu_address(self) -> int:
        return self.ptr

    def _known_device(self) -> Optional[int]:
        return self.pin._device

    def close(self) -> None:
        """Unmap (and unpin, for a mapping made by Gdr.map or Allocation.map)."""
        super().close()
        if self._owns_pin:
            self.pin.close()

    def _closed_hook(self) -> None:
        # A closed mapping fails every range check of the fast path.
        self._size = -1
        self._src = self._dst = _NO_BUFFER
        if self._copier is not None:
            self._copier.close(f"{self._node.what} is {self._node.closed_why}")

    def _range_error(self, what: str, offset: int, n: int) -> None:
        self._live()
        raise ValueError(f"{what}: {n} bytes at offset {offset} do not fit the {self.nbytes}-byte mapping")

    def copy_to(self, src: object, offset: int = 0, size: Optional[int] = None) -> None:
        """Copy host buffer `src` (or its first `size` bytes) to the mapping at `offset`.

        The last buffer passed stays exported (a bytearray cannot be resized)
        until another is passed or the mapping is closed; that is what makes
        repeated copies from the same buffer cost one C call.
        """
        cached = self._src
        if src is not cached[0]:
            cached = (src, *_host_buffer(src, False, "copy_to"))
            self._src = cached
        ptr, n = cached[2], cached[3]
        if size is not None:
            if not 0 <= size <= n:
                raise ValueError(f"copy_to: size {size} is outside the {n}-byte host buffer")
            n = size
        if offset < 0 or n > self._size - offset:
            self._range_error("copy_to", offset, n)
        if not n:
            return
        rc = (self._to_gil if n <= _GIL_KEPT_MAX else self._to)(self._mh, self._va + offset, ptr, n)
        if rc:
            self._live()
            raise GdrError(rc, "gdr_copy_to_mapping")

    def copy_from(self, dst: object, offset: int = 0, size: Optional[int] = None) -> None:
        """Copy from the mapping at `offset` into host buffer `dst` (or its first `size` bytes)."""
        # copy_to's steps, written out again: a shared helper would be one more Python call per copy.
        cached = self._dst
        if dst is not cached[0]:
            cached = (dst, *_host_buffer(dst, True, "copy_from"))
            self._dst = cached
        ptr, n = cached[2], cached[3]
        if size is not None:
            if not 0 <= size <= n:
                raise ValueError(f"copy_from: size {size} is outside the {n}-byte host buffer")
            n = size
        if offset < 0 or n > self._size - offset:
            self._range_error("copy_from", offset, n)
        if not n:
            return
        rc = (self._from_gil if n <= _GIL_KEPT_MAX else self._from)(self._mh, ptr, self._va + offset, n)
        if rc:
            self._live()
            raise GdrError(rc, "gdr_copy_from_mapping")

    def read(self, offset: int = 0, size: Optional[int] = None) -> bytes:
        """A copy of `size` bytes (default: to the end) from `offset`, as bytes."""
        self._live()
        if size is None:
            size = self.nbytes - offset
        out = bytearray(max(size, 0))
        self.copy_from(out, offset, size)
        # Do not keep the temporary exported.
        self._dst = _NO_BUFFER
        if self._copier is not None:
            self._copier.forget()
        return bytes(out)

    def info(self) -> Info:
        return self.pin.info()

    @property
    def invalidated(self) -> bool:
        return self.pin.invalidated

    def check(self) -> None:
        """Raise InvalidatedError if the GPU memory behind it was freed."""
        self.pin.check()

    def unmap(self) -> None:
        self.close()


# ---- Vulkan allocations ----------------------------------------------------


class Allocation(_Exchange):
    """GPU memory from gdr_alloc_mapped(): a CUDA pointer and a CPU mapping of it.

    DLPack and `__cuda_array_interface__` let PyTorch, CuPy or Numba wrap the
    GPU side, `__array_interface__` and `ndarray()` give NumPy the CPU side
    (see _Exchange); `map()` gives a Mapping with the library's fast copy
    functions.
    """

    def __init__(self, gdr: Gdr, nbytes: int, device: Optional[int] = None) -> None:
        if not isinstance(nbytes, int) or nbytes <= 0:
            raise ValueError(f"alloc_mapped: nbytes must be a positive int, got {nbytes!r}")
        fn = gdr._lib.fn
        alloc, free = fn["gdr_alloc_mapped"], fn["gdr_free_mapped"]
        if alloc is None or free is None:
            raise GdrError(
                95,
                "gdr_alloc_mapped",
                "alloc_mapped",
                f"{gdr._lib.path} has no gdr_alloc_mapped (a GDRCopy 2.6 library); use ours",
            )
        self.gdr = gdr
        gpu = ctypes.c_uint64()
        cpu = ctypes.c_void_p()
        with captured_log() as log:
            rc = alloc(gdr._g, nbytes, ctypes.byref(gpu), ctypes.byref(cpu))
        check(
            rc,
            "gdr_alloc_mapped",
            log,
            f"alloc_mapped({nbytes}) on the {gdr.backend_name} backend"
            + ("" if gdr.backend_name == "vulkan" else " (only the vulkan backend allocates)"),
        )
        self.gpu_ptr = gpu.value
        self.cpu_ptr = cpu.value or 0
        self.nbytes = nbytes
        self._device = device
        g, gpu_ptr = gdr._g, self.gpu_ptr

        def release() -> None:
            with captured_log() as log:
                rc = free(g, gpu_ptr)
            check(rc, "gdr_free_mapped", log)

        try:
            node = _Node(f"allocation of {nbytes} bytes at GPU {gpu_ptr:#x}", gdr._node, release)
        except ClosedError:
            release()
            raise
        self._adopt(node)

    def _gpu_address(self) -> int:
        return self.gpu_ptr

    def _cpu_address(self) -> int:
        return self.cpu_ptr

    def _known_device(self) -> Optional[int]:
        return self._device

    def map(self, mapping: str = "default") -> Mapping:
        """Pin and map the allocation: a Mapping (closing it unpins)."""
        return self.gdr.map(self, mapping=mapping)

    def free(self) -> None:
        self.close()


if _fastcopy is not None:

    def _host_buffer_error(obj: object, writable: bool, what: str) -> None:
        # Raises the same clear error the ctypes path would.
        _host_buffer(obj, writable, what)

    _fastcopy.configure(ClosedError, GdrError, _host_buffer_error)
