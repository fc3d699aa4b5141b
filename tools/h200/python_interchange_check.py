"""Real-GPU check of gdrcopy's zero-copy interchange (run by python_bindings.sh).

GPU memory from gdr_alloc_mapped (the vulkan backend) handed, without a copy,
to PyTorch (torch.from_dlpack: DLPack; torch.as_tensor: CUDA array interface),
CuPy (cupy.from_dlpack and cupy.asarray) and NumPy (numpy.asarray of the CPU
mapping), and the data checked both ways for each: bytes the CPU writes
(Mapping.copy_to, stores through the NumPy view) must be what the GPU library
reads, and bytes the GPU library writes (a device-side fill and copy, then a
synchronize) must be what the CPU reads (copy_from, the NumPy view).  Also:
the consumers' tensors start at the same device address and device, and the
allocation counts a consumer's tensor as a live view until the consumer's
DLPack deleter runs.

Prints one line per check and a summary; exits 1 on any failure, and says
which consumer is missing (a missing one is a failure: the machine has both).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from typing import Any

import numpy

import gdrcopy

SIZE = 1 << 20
KDL_CUDA = 2


class Checks:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def expect(self, ok: bool, what: str) -> None:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"{'ok  ' if ok else 'FAIL'} {what}")


def both_ways(
    checks: Checks,
    name: str,
    mapping: gdrcopy.Mapping,
    view: numpy.ndarray,
    gpu_read: Callable[[], bytes],
    gpu_write: Callable[[int], None],
    rng: numpy.random.Generator,
) -> None:
    """CPU -> consumer and consumer -> CPU through one consumer's zero-copy tensor."""
    data = rng.integers(0, 256, SIZE, dtype=numpy.uint8)
    mapping.copy_to(data)
    checks.expect(gpu_read() == data.tobytes(), f"{name}: copy_to, read on the GPU by {name}")
    data2 = rng.integers(0, 256, SIZE, dtype=numpy.uint8)
    view[:] = data2  # plain stores into the write-combined view
    checks.expect(gpu_read() == data2.tobytes(), f"{name}: NumPy view stores, read on the GPU by {name}")
    for value in (0x3C, 0xA5):
        gpu_write(value)
        out = bytearray(SIZE)
        mapping.copy_from(out)
        checks.expect(out == bytes([value]) * SIZE, f"{name}: GPU fill {value:#x} by {name}, read by copy_from")
        checks.expect(
            bool((view[:4096] == value).all()) and int(view[-1]) == value,
            f"{name}: GPU fill {value:#x} by {name}, read through the NumPy view",
        )


def check_torch(checks: Checks, alloc: gdrcopy.Allocation, mapping: gdrcopy.Mapping, view: Any, rng: Any) -> None:
    import torch

    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}")
    tensor = torch.from_dlpack(alloc)
    checks.expect(tensor.is_cuda and tensor.dtype == torch.uint8, f"torch.from_dlpack: {tensor.device} {tensor.dtype}")
    checks.expect(tensor.data_ptr() == alloc.gpu_ptr, "torch.from_dlpack: the same device address (no copy)")
    checks.expect(
        alloc.__dlpack_device__() == (KDL_CUDA, tensor.device.index),
        f"__dlpack_device__ {alloc.__dlpack_device__()} is the tensor's device {tensor.device}",
    )

    def read(tensor: Any = tensor) -> bytes:
        torch.cuda.synchronize()
        return bytes(tensor.cpu().numpy().tobytes())

    def write(value: int, tensor: Any = tensor) -> None:
        # A kernel fill and a device-to-device copy: the GPU writes every byte.
        scratch = torch.full((SIZE,), value, dtype=torch.uint8, device=tensor.device)
        tensor.copy_(scratch)
        torch.cuda.synchronize()

    both_ways(checks, "torch (DLPack)", mapping, view, read, write, rng)
    # The tensor counts as a live view until torch calls the DLPack deleter.
    held = alloc._node.live_views()
    del tensor, read, write
    gc.collect()
    checks.expect(alloc._node.live_views() == held - 1, "torch released its DLPack tensor (the deleter ran)")
    via_cai = torch.as_tensor(alloc, device="cuda")
    checks.expect(via_cai.data_ptr() == alloc.gpu_ptr, "torch.as_tensor (CUDA array interface): same address")
    del via_cai
    gc.collect()


def check_cupy(checks: Checks, alloc: gdrcopy.Allocation, mapping: gdrcopy.Mapping, view: Any, rng: Any) -> None:
    import cupy

    print(f"cupy {cupy.__version__}")
    for how, array in (("cupy.from_dlpack", cupy.from_dlpack(alloc)), ("cupy.asarray", cupy.asarray(alloc))):
        checks.expect(array.data.ptr == alloc.gpu_ptr and array.dtype == cupy.uint8, f"{how}: same address, uint8")

        def read(array: Any = array) -> bytes:
            cupy.cuda.runtime.deviceSynchronize()
            return bytes(cupy.asnumpy(array).tobytes())

        def write(value: int, array: Any = array) -> None:
            array.fill(value)
            cupy.cuda.runtime.deviceSynchronize()

        both_ways(checks, how, mapping, view, read, write, rng)
        del array
    gc.collect()


def main() -> int:
    checks = Checks()
    rng = numpy.random.default_rng(27)
    info = gdrcopy.library_info()
    print(f"gdrcopy {gdrcopy.__version__}: {info}")
    consumers: list[tuple[str, Callable[..., None]]] = [("torch", check_torch), ("cupy", check_cupy)]
    # Make the consumer's context current first: the library imports its memory into it.
    try:
        import torch

        torch.zeros(1, device="cuda")
    except ImportError:
        pass  # check_torch reports it
    with gdrcopy.open("vulkan") as g:
        alloc = g.alloc_mapped(SIZE)
        view = numpy.asarray(alloc)
        checks.expect(
            view.__array_interface__["data"][0] == alloc.cpu_ptr and view.nbytes == SIZE,
            "numpy.asarray: the CPU mapping itself (no copy)",
        )
        with alloc.map() as mapping:
            print(f"mapping {mapping.mapping_type.name}, copies {mapping.copy_path}, GPU {alloc.gpu_ptr:#x}")
            for name, check in consumers:
                try:
                    check(checks, alloc, mapping, view, rng)
                except ImportError as error:
                    checks.expect(False, f"{name} is not importable here: {error}")
        del view
        gc.collect()
        try:
            alloc.close()
            checks.expect(True, "every consumer released the memory: the allocation closes")
        except BufferError as error:
            checks.expect(False, f"a consumer still holds the memory after it was deleted: {error}")
    print(f"interchange: {checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
