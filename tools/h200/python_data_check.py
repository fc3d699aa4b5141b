"""Real-GPU data check of the gdrcopy Python package (run by python_bindings.sh).

GPU memory from gdr_alloc_mapped (the vulkan backend), reached both ways:
bytes written from NumPy (through the zero-copy view and through copy_to)
must come back through CUDA (cuMemcpyDtoH, via cuda-python), and bytes
written by CUDA (cuMemcpyHtoD, cuMemsetD8) must come back through the
mapping (copy_from and the view), at many sizes and offsets.  Prints one line
per failure and a summary; exits 1 on any failure.
"""

from __future__ import annotations

import ctypes
import sys

import numpy

import gdrcopy
from gdrcopy import _cuda

SIZE = 4 << 20
SIZES = (1, 3, 8, 63, 64, 65, 255, 4096, 4097, 65536, 65537, 1 << 20, SIZE - 4096)
OFFSETS = (0, 1, 7, 64, 4095, 65536 + 13)


def main() -> int:
    cuda = _cuda.driver("cuda-python")
    print(
        f"CUDA: {cuda.name}, driver {cuda.driver_version()}; gdrcopy {gdrcopy.__version__}, "
        f"library {gdrcopy.library_version()} ({gdrcopy.library_path()})"
    )
    rng = numpy.random.default_rng(13)
    host = cuda.host_alloc(SIZE)
    host_view = numpy.ctypeslib.as_array(ctypes.cast(host, ctypes.POINTER(ctypes.c_uint8)), (SIZE,))
    failures = checks = 0

    def expect(ok: bool, what: str) -> None:
        nonlocal failures, checks
        checks += 1
        if not ok:
            failures += 1
            print(f"FAIL: {what}")

    with gdrcopy.open("vulkan") as g:
        print(f"backend {g.backend_name}: {g.info()}")
        alloc = g.alloc_mapped(SIZE)
        view = alloc.ndarray()
        with alloc.map() as m:
            print(f"mapping type {m.mapping_type.name}, GPU {alloc.gpu_ptr:#x}, CPU {alloc.cpu_ptr:#x}")
            for size in SIZES:
                for offset in OFFSETS:
                    if offset + size > SIZE:
                        continue
                    data = rng.integers(0, 256, size, dtype=numpy.uint8)
                    # NumPy -> GPU through copy_to; CUDA reads it back.
                    m.copy_to(data, offset)
                    host_view[:size] = 0
                    cuda.dtoh(host, alloc.gpu_ptr + offset, size)
                    expect(
                        bool((host_view[:size] == data).all()), f"copy_to {size} B at {offset}, read by cuMemcpyDtoH"
                    )
                    # NumPy view assignment (plain stores into the WC mapping), then CUDA.
                    data2 = data[::-1].copy()
                    view[offset : offset + size] = data2
                    cuda.dtoh(host, alloc.gpu_ptr + offset, size)
                    expect(
                        bool((host_view[:size] == data2).all()),
                        f"view store {size} B at {offset}, read by cuMemcpyDtoH",
                    )
                    # CUDA -> GPU memory; the mapping reads it.
                    data3 = rng.integers(0, 256, size, dtype=numpy.uint8)
                    host_view[:size] = data3
                    cuda.htod(alloc.gpu_ptr + offset, host, size)
                    out = numpy.empty(size, numpy.uint8)
                    m.copy_from(out, offset)
                    expect(bool((out == data3).all()), f"cuMemcpyHtoD {size} B at {offset}, read by copy_from")
                    expect(
                        bool((view[offset : offset + size] == data3).all()),
                        f"cuMemcpyHtoD {size} B at {offset}, read through the NumPy view",
                    )
            cuda.memset(alloc.gpu_ptr, 0xA5, SIZE)
            cuda.synchronize()
            expect(m.read(0, 4096) == b"\xa5" * 4096, "cuMemsetD8 seen by copy_from")

        # A second pin of part of it, named through __cuda_array_interface__ as CuPy and PyTorch name theirs.
        class Part:
            __cuda_array_interface__ = {
                "version": 3,
                "data": (alloc.gpu_ptr + 65536 + 100, False),
                "shape": (1000,),
                "typestr": "<u4",
                "strides": None,
            }

        with g.map(Part()) as part:
            words = numpy.arange(1000, dtype=numpy.uint32) * 2654435761
            part.copy_to(words)
            cuda.dtoh(host, alloc.gpu_ptr + 65536 + 100, 4000)
            expect(bytes(host_view[:4000]) == words.tobytes(), "pin through __cuda_array_interface__, copy_to")
        del view
        alloc.close()
        try:
            alloc.ndarray()
            expect(False, "a freed allocation still gives views")
        except gdrcopy.ClosedError:
            expect(True, "")
    print(f"{checks - failures} of {checks} checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
