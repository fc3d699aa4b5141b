"""The few CUDA driver calls the benchmark and the GPU tests need.

Through cuda-python (`cuda.bindings.driver`, what users have) when it is
installed, else through libcuda.so.1 with ctypes (the NVIDIA driver's, or
softgpu's stand-in in the VM).  Not part of the public API.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable


class CudaError(RuntimeError):
    pass


class Driver:
    """One CUDA context made current on device 0 (its primary context)."""

    name = ""

    def htod(self, dst: int, src: int, n: int) -> None:
        raise NotImplementedError

    def dtoh(self, dst: int, src: int, n: int) -> None:
        raise NotImplementedError

    def bound_htod(self, dst: int, src: int, n: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """(function, arguments) of one cuMemcpyHtoD, the arguments made ready."""
        raise NotImplementedError

    def bound_dtoh(self, dst: int, src: int, n: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        raise NotImplementedError

    def mem_alloc(self, n: int) -> int:
        raise NotImplementedError

    def mem_free(self, ptr: int) -> None:
        raise NotImplementedError

    def host_alloc(self, n: int) -> int:
        raise NotImplementedError

    def memset(self, ptr: int, value: int, n: int) -> None:
        raise NotImplementedError

    def synchronize(self) -> None:
        raise NotImplementedError

    def driver_version(self) -> int:
        raise NotImplementedError


class _CudaPython(Driver):
    def __init__(self, module: Any) -> None:
        self.d = module
        self.ok = module.CUresult.CUDA_SUCCESS
        version = getattr(__import__("cuda.bindings", fromlist=["__version__"]), "__version__", "?")
        self.name = f"cuda-python {version}"
        self._call("cuInit", 0)
        dev = self._call("cuDeviceGet", 0)
        ctx = self._call("cuDevicePrimaryCtxRetain", dev)
        self._call("cuCtxSetCurrent", ctx)

    def _call(self, name: str, *args: Any) -> Any:
        out = getattr(self.d, name)(*args)
        err = out[0]
        if err != self.ok:
            raise CudaError(f"{name} failed: {err}")
        return out[1] if len(out) == 2 else out[1:] if len(out) > 2 else None

    def htod(self, dst: int, src: int, n: int) -> None:
        self._call("cuMemcpyHtoD", self.d.CUdeviceptr(dst), src, n)

    def dtoh(self, dst: int, src: int, n: int) -> None:
        self._call("cuMemcpyDtoH", dst, self.d.CUdeviceptr(src), n)

    def bound_htod(self, dst: int, src: int, n: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return self.d.cuMemcpyHtoD, (self.d.CUdeviceptr(dst), src, n)

    def bound_dtoh(self, dst: int, src: int, n: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return self.d.cuMemcpyDtoH, (dst, self.d.CUdeviceptr(src), n)

    def mem_alloc(self, n: int) -> int:
        return int(self._call("cuMemAlloc", n))

    def mem_free(self, ptr: int) -> None:
        self._call("cuMemFree", self.d.CUdeviceptr(ptr))

    def host_alloc(self, n: int) -> int:
        return int(self._call("cuMemHostAlloc", n, 0))

    def memset(self, ptr: int, value: int, n: int) -> None:
        self._call("cuMemsetD8", self.d.CUdeviceptr(ptr), value, n)

    def synchronize(self) -> None:
        self._call("cuCtxSynchronize")

    def driver_version(self) -> int:
        return int(self._call("cuDriverGetVersion"))


class _Ctypes(Driver):
    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as error:
            raise CudaError(f"no CUDA driver: {error}; install the NVIDIA driver, or cuda-python") from None
        self.name = "libcuda.so.1 through ctypes"
        u64, sz, vp = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p
        sigs: dict[str, list[Any]] = {
            "cuInit": [ctypes.c_uint],
            "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
            "cuDevicePrimaryCtxRetain": [ctypes.POINTER(vp), ctypes.c_int],
            "cuCtxSetCurrent": [vp],
            "cuMemAlloc_v2": [ctypes.POINTER(u64), sz],
            "cuMemFree_v2": [u64],
            "cuMemHostAlloc": [ctypes.POINTER(vp), sz, ctypes.c_uint],
            "cuMemcpyHtoD_v2": [u64, vp, sz],
            "cuMemcpyDtoH_v2": [vp, u64, sz],
            "cuMemsetD8_v2": [u64, ctypes.c_ubyte, sz],
            "cuCtxSynchronize": [],
            "cuDriverGetVersion": [ctypes.POINTER(ctypes.c_int)],
        }
        self.fn: dict[str, Any] = {}
        for name, argtypes in sigs.items():
            f = getattr(self.lib, name)
            f.argtypes, f.restype = argtypes, ctypes.c_int
            self.fn[name] = f
        self._check("cuInit", 0)
        dev = ctypes.c_int()
        self._check("cuDeviceGet", ctypes.byref(dev), 0)
        ctx = vp()
        self._check("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev.value)
        self._check("cuCtxSetCurrent", ctx)

    def _check(self, name: str, *args: Any) -> None:
        rc = self.fn[name](*args)
        if rc:
            raise CudaError(f"{name} failed: CUDA error {rc}")

    def htod(self, dst: int, src: int, n: int) -> None:
        self._check("cuMemcpyHtoD_v2", dst, src, n)

    def dtoh(self, dst: int, src: int, n: int) -> None:
        self._check("cuMemcpyDtoH_v2", dst, src, n)

    def bound_htod(self, dst: int, src: int, n: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return self.fn["cuMemcpyHtoD_v2"], (dst, src, n)

    def bound_dtoh(self, dst: int, src: int, n: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return self.fn["cuMemcpyDtoH_v2"], (dst, src, n)

    def mem_alloc(self, n: int) -> int:
        out = ctypes.c_uint64()
        self._check("cuMemAlloc_v2", ctypes.byref(out), n)
        return out.value

    def mem_free(self, ptr: int) -> None:
        self._check("cuMemFree_v2", ptr)

    def host_alloc(self, n: int) -> int:
        out = ctypes.c_void_p()
        self._check("cuMemHostAlloc", ctypes.byref(out), n, 0)
        return out.value or 0

    def memset(self, ptr: int, value: int, n: int) -> None:
        self._check("cuMemsetD8_v2", ptr, value, n)

    def synchronize(self) -> None:
        self._check("cuCtxSynchronize")

    def driver_version(self) -> int:
        out = ctypes.c_int()
        self._check("cuDriverGetVersion", ctypes.byref(out))
        return out.value


def driver(prefer: str = "auto") -> Driver:
    """cuda-python if installed (or `prefer` == "cuda-python", which then must be), else ctypes."""
    if prefer in ("auto", "cuda-python"):
        try:
            from cuda.bindings import driver as module
        except ImportError:
            if prefer == "cuda-python":
                raise CudaError("cuda-python is not installed: pip install cuda-python") from None
        else:
            return _CudaPython(module)
    return _Ctypes()
