"""What GPU memory a Python object names: (device pointer, byte count).

Three spellings are understood: `__cuda_array_interface__` (CuPy, Numba,
PyTorch), DLPack (`__dlpack__()` or a "dltensor" capsule), and a plain
`(device_pointer, nbytes)` pair.  Only contiguous buffers qualify: a pin
covers one address range.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

# DLPack device types (dlpack.h): plain CUDA device memory only; managed
# memory cannot be pinned through the NVIDIA P2P API.
KDL_CUDA = 2
KDL_CUDA_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA host", 13: "CUDA managed"}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


# DLManagedTensorVersioned (DLPack >= 1.0): the tensor follows the header.
class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", _DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _is_capsule(obj: object) -> bool:
    return type(obj).__name__ == "PyCapsule"


def _contiguous(shape: tuple[int, ...], strides: tuple[int, ...] | None, itemsize: int) -> bool:
    if strides is None:
        return True
    expected = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def _from_cuda_array_interface(cai: Any, what: str) -> tuple[int, int]:
    try:
        pointer = int(cai["data"][0])
        shape = tuple(int(n) for n in cai["shape"])
        typestr = str(cai["typestr"])
        strides = cai.get("strides")
    except (KeyError, TypeError, IndexError, ValueError) as error:
        raise TypeError(f"{what}: malformed __cuda_array_interface__ ({error!r})") from None
    itemsize = int(typestr[2:]) if len(typestr) > 2 and typestr[2:].isdigit() else 0
    if itemsize <= 0:
        raise TypeError(f"{what}: __cuda_array_interface__ typestr {typestr!r} has no item size")
    if strides is not None and not _contiguous(shape, tuple(int(s) for s in strides), itemsize):
        raise ValueError(
            f"{what}: the GPU array is not contiguous; pin a contiguous copy (e.g. cupy.ascontiguousarray)"
        )
    if cai.get("mask") is not None:
        raise ValueError(f"{what}: masked GPU arrays cannot be pinned")
    return pointer, math.prod(shape) * itemsize


def _tensor_extent(tensor: _DLTensor, what: str) -> tuple[int, int]:
    if tensor.device.device_type != KDL_CUDA:
        kind = KDL_CUDA_NAMES.get(tensor.device.device_type, f"device type {tensor.device.device_type}")
        raise ValueError(f"{what}: the DLPack tensor lives in {kind} memory; only CUDA device memory can be pinned")
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    bits = tensor.dtype.bits * tensor.dtype.lanes
    if bits % 8:
        raise ValueError(f"{what}: DLPack element type of {bits} bits is not a whole number of bytes")
    itemsize = bits // 8
    strides = None
    if tensor.strides:
        # DLPack strides count elements, not bytes.
        strides = tuple(tensor.strides[i] * itemsize for i in range(tensor.ndim))
    if not _contiguous(shape, strides, itemsize):
        raise ValueError(f"{what}: the DLPack tensor is not contiguous; pin a contiguous copy")
    return (tensor.data or 0) + tensor.byte_offset, math.prod(shape) * itemsize


def _from_capsule(capsule: object, what: str) -> tuple[int, int]:
    # The capsule is only read, never consumed: the caller keeps it (or the
    # object it came from) alive for as long as the memory is pinned, and its
    # own destructor releases the tensor.
    name = _capsule_name(capsule)
    if name == b"dltensor":
        address = _capsule_pointer(capsule, name)
        return _tensor_extent(_DLTensor.from_address(address), what)
    if name == b"dltensor_versioned":
        address = _capsule_pointer(capsule, name)
        managed = _DLManagedTensorVersioned.from_address(address)
        if managed.version.major != 1:
            raise ValueError(
                f"{what}: DLPack version {managed.version.major}.{managed.version.minor} is not understood (1.x is)"
            )
        return _tensor_extent(managed.dl_tensor, what)
    raise TypeError(f"{what}: capsule {name!r} is not a DLPack tensor (or was already consumed)")


def describe(buffer: object, what: str = "pin") -> tuple[int, int, object]:
    """(device pointer, byte count, the object to keep alive) of a GPU buffer."""
    cai = getattr(buffer, "__cuda_array_interface__", None)
    if cai is not None:
        pointer, nbytes = _from_cuda_array_interface(cai, what)
        return pointer, nbytes, buffer
    if hasattr(buffer, "__dlpack__"):
        capsule = buffer.__dlpack__()
        pointer, nbytes = _from_capsule(capsule, what)
        return pointer, nbytes, (buffer, capsule)
    if _is_capsule(buffer):
        pointer, nbytes = _from_capsule(buffer, what)
        return pointer, nbytes, buffer
    if isinstance(buffer, tuple) and len(buffer) == 2 and all(isinstance(v, int) for v in buffer):
        pointer, nbytes = buffer
        if pointer <= 0 or nbytes <= 0:
            raise ValueError(f"{what}: (device_pointer, nbytes) needs both positive, got {buffer!r}")
        return pointer, nbytes, None
    raise TypeError(
        f"{what}: {type(buffer).__name__} is not a GPU buffer: pass an object with __cuda_array_interface__ "
        "(CuPy, Numba, PyTorch), a CUDA DLPack tensor or capsule, or (device_pointer, nbytes)"
    )
