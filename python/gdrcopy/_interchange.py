"""Zero-copy exchange of mapped GPU memory with NumPy, CuPy, PyTorch and others.

One mapped buffer has two sides, and each protocol names one of them:

- the GPU side (the CUDA device address): DLPack (`__dlpack__`,
  `__dlpack_device__`) and `__cuda_array_interface__`, what
  `torch.from_dlpack`, `cupy.asarray`/`cupy.from_dlpack` and Numba take;
- the CPU side (this process's mapping of the same bytes through the GPU's
  BAR): `__array_interface__` (`numpy.asarray`), `memoryview()`, and the
  buffer protocol itself on Python >= 3.12 (`__buffer__`).

The CPU side is normally write-combined: stores are fast (buffered and sent
in bursts, in no guaranteed order until a fence), loads are uncached PCIe
reads, each a round trip (about 1 us for 64 B on an H200; 16-20 times slower
per byte than `Mapping.copy_from`, which uses streaming loads).  Views are for
convenience; `copy_to`/`copy_from` for speed.

Every CPU view and every DLPack export counts as a live view of the mapping:
`close()` refuses while one is alive (the memory would be unmapped under it).
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any, Callable, Optional

from gdrcopy._gpubuf import KDL_CUDA, _DLDataType, _DLDevice, _DLTensor

KDL_UINT = 1
# CUpointer_attribute CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL (cuda.h).
_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9


class _DLManagedTensor(ctypes.Structure):
    """DLManagedTensor (dlpack.h, the unversioned "dltensor" capsule every consumer reads)."""

    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# Kept for the capsule's lifetime (PyCapsule stores the pointer, not a copy).
_DLTENSOR_NAME = ctypes.create_string_buffer(b"dltensor")

# Raw PyObject* arguments: the destructor runs while the capsule is being freed,
# where making a Python reference to it would resurrect it.
# Function objects of our own: ctypes.pythonapi.X is shared, and _gpubuf gives the
# same functions other argument types.
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi)
)
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi)
)
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)

# Address of each exported DLManagedTensor -> (the struct, its shape, the release of its view).
_exports: dict[int, tuple[_DLManagedTensor, Any, Callable[[], None]]] = {}
_exports_lock = threading.Lock()


def _release_export(address: int) -> None:
    with _exports_lock:
        entry = _exports.pop(address, None)
    if entry is not None:
        entry[2]()


def _delete(address: Optional[int]) -> None:
    # The consumer is done with the tensor (any thread: ctypes takes the GIL).
    if address:
        _release_export(address)


def _destroy_capsule(capsule: Optional[int]) -> None:
    # A consumer renames the capsule "used_dltensor" and owns the tensor from then on;
    # a capsule still named "dltensor" was never consumed, and its tensor is ours to free.
    if capsule and _capsule_is_valid(capsule, ctypes.addressof(_DLTENSOR_NAME)):
        _release_export(_capsule_get_pointer(capsule, ctypes.addressof(_DLTENSOR_NAME)) or 0)


# The C callbacks, kept alive for the life of the process (consumers may call them late).
_deleter = _DELETER(_delete)
_capsule_destructor = _CAPSULE_DESTRUCTOR(_destroy_capsule)
_DELETER_ADDRESS = ctypes.cast(_deleter, ctypes.c_void_p).value
_DESTRUCTOR_ADDRESS = ctypes.cast(_capsule_destructor, ctypes.c_void_p).value


def dlpack_capsule(gpu_ptr: int, nbytes: int, device_id: int, acquire_view: Callable[[], Callable[[], None]]) -> Any:
    """A "dltensor" capsule of `nbytes` uint8 at CUDA address `gpu_ptr` on `device_id`.

    acquire_view() counts a live view and returns its release, called when
    the consumer's deleter runs (or the capsule dies unconsumed).
    """
    managed = _DLManagedTensor()
    shape = (ctypes.c_int64 * 1)(nbytes)
    tensor = managed.dl_tensor
    tensor.data = gpu_ptr
    tensor.device = _DLDevice(KDL_CUDA, device_id)
    tensor.ndim = 1
    tensor.dtype = _DLDataType(KDL_UINT, 8, 1)
    tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    tensor.strides = None  # compact row-major
    tensor.byte_offset = 0
    managed.deleter = _DELETER_ADDRESS
    address = ctypes.addressof(managed)
    with _exports_lock:
        _exports[address] = (managed, shape, acquire_view())
    try:
        return _capsule_new(address, ctypes.addressof(_DLTENSOR_NAME), _DESTRUCTOR_ADDRESS)
    except BaseException:
        _release_export(address)
        raise


def live_exports() -> int:
    """DLPack tensors handed out and not yet released (for tests)."""
    with _exports_lock:
        return len(_exports)


def cpu_window(address: int, nbytes: int, acquire_view: Callable[[], Callable[[], None]]) -> Any:
    """A ctypes uint8 array over mapped memory whose lifetime counts as a live view."""
    window = (ctypes.c_ubyte * nbytes).from_address(address)
    weakref.finalize(window, acquire_view())
    return window


_cuda_lock = threading.Lock()
_cuda_pointer_attribute: list[Any] = []


def device_of(gpu_ptr: int) -> Optional[int]:
    """The CUDA device ordinal holding gpu_ptr (cuPointerGetAttribute), or None if CUDA cannot say."""
    with _cuda_lock:
        if not _cuda_pointer_attribute:
            function = None
            try:
                cuda = ctypes.CDLL("libcuda.so.1")
                if cuda.cuInit(0) == 0:
                    function = cuda.cuPointerGetAttribute
                    function.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
                    function.restype = ctypes.c_int
            except (OSError, AttributeError):
                function = None
            _cuda_pointer_attribute.append(function)
        function = _cuda_pointer_attribute[0]
    if function is None:
        return None
    ordinal = ctypes.c_int(-1)
    if function(ctypes.byref(ordinal), _CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, gpu_ptr) != 0 or ordinal.value < 0:
        return None
    return ordinal.value


def device_of_object(buffer: object) -> Optional[int]:
    """The CUDA device a producer says its buffer is on (`__dlpack_device__`), if it says."""
    ask = getattr(buffer, "__dlpack_device__", None)
    if ask is None:
        return None
    try:
        kind, ordinal = ask()
    except Exception:  # noqa: BLE001 - a producer that cannot say leaves the question to CUDA
        return None
    return int(ordinal) if int(kind) == KDL_CUDA else None
