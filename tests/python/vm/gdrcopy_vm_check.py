"""The gdrcopy Python package against the real gdrdrv and softgpu, inside the test VM.

Run by tests/python/test_in_vm.py in the VM, with the suite's own python3 and
NumPy, PYTHONPATH=/src/python and the libgdrapi.so.2 built and installed in
the VM root:

    python3 gdrcopy_vm_check.py --backend gdrdrv|dmabuf --pins persistent|legacy

Every byte that goes through the package (copy_to, copy_from, the NumPy
view) is checked against the GPU memory itself, read and written through
softgpu's libcuda.so.1 (cuMemcpyHtoD/DtoH, cuMemsetD8) with ctypes of this
file's own, so the oracle shares no code with the package.  `--pins` is how
the test loaded gdrdrv (use_persistent_mapping); the check that the library
reports that mode is part of the run.  Prints one `ok` line per group of
checks and `gdrcopy_vm_check: N checks passed` last; exits 1 at the first
failure, saying what differed.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import gdrcopy

GPU_PAGE = 1 << 16
# Sizes and offsets that cross every path of the copy routines: single bytes,
# unaligned heads and tails, 64-byte lines, the 512-byte inline limit, pages,
# the 64 KiB GPU page and the 1 MiB top.
SIZES = (
    1,
    2,
    3,
    4,
    5,
    7,
    8,
    9,
    15,
    16,
    17,
    31,
    32,
    33,
    63,
    64,
    65,
    127,
    128,
    129,
    255,
    256,
    511,
    512,
    513,
    1000,
    4095,
    4096,
    4097,
    65535,
    65536,
    65537,
    300000,
    1 << 20,
)
OFFSETS = (0, 1, 3, 7, 8, 63, 64, 65, 511, 4096, 4099, GPU_PAGE - 1, GPU_PAGE + 5)
# One cuMemAlloc that every size fits at every offset, with room for the guard bytes.
BUFFER_SIZE = 2 << 20
GUARD = 64
BACKGROUND = 0xA5
CHILD_MARK = "fault-child: reading through the mapping of freed GPU memory"


class Failed(Exception):
    pass


class Checks:
    def __init__(self) -> None:
        self.count = 0

    def that(self, condition: bool, what: str) -> None:
        self.count += 1
        if not condition:
            raise Failed(what)

    def same(self, got: bytes, want: bytes, what: str) -> None:
        """got == want, or fail naming the first byte that differs."""
        self.count += 1
        if got != want:
            at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            raise Failed(
                f"{what}: first difference at byte {at} of {len(want)} "
                f"(got {got[at : at + 8].hex()}, want {want[at : at + 8].hex()})"
            )

    def raises(self, kind: type[BaseException], call: Callable[[], object], what: str) -> BaseException:
        self.count += 1
        try:
            call()
        except kind as error:
            return error
        except Exception as error:  # noqa: BLE001 - named in the failure
            raise Failed(f"{what}: raised {type(error).__name__}: {error}, expected {kind.__name__}") from None
        raise Failed(f"{what}: did not raise {kind.__name__}")


class Cuda:
    """softgpu's libcuda.so.1: the oracle for what the GPU memory holds."""

    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as error:
            raise Failed(
                f"cannot load softgpu's libcuda.so.1 ({error}): is `make softgpu_install` in the root's build?"
            )
        u64, size, pointer = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p
        signatures: dict[str, list[Any]] = {
            "cuInit": [ctypes.c_uint],
            "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
            "cuDevicePrimaryCtxRetain": [ctypes.POINTER(pointer), ctypes.c_int],
            "cuCtxSetCurrent": [pointer],
            "cuMemAlloc_v2": [ctypes.POINTER(u64), size],
            "cuMemFree_v2": [u64],
            "cuMemcpyHtoD_v2": [u64, pointer, size],
            "cuMemcpyDtoH_v2": [pointer, u64, size],
            "cuMemsetD8_v2": [u64, ctypes.c_ubyte, size],
        }
        for name, argtypes in signatures.items():
            function = getattr(self.lib, name)
            function.argtypes, function.restype = argtypes, ctypes.c_int
        self.call("cuInit", 0)
        device = ctypes.c_int()
        self.call("cuDeviceGet", ctypes.byref(device), 0)
        context = ctypes.c_void_p()
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device.value)
        self.call("cuCtxSetCurrent", context)

    def call(self, name: str, *args: Any) -> None:
        status = getattr(self.lib, name)(*args)
        if status:
            raise Failed(f"{name}{args} failed: CUDA error {status}")

    def alloc(self, n: int) -> int:
        out = ctypes.c_uint64()
        self.call("cuMemAlloc_v2", ctypes.byref(out), n)
        return out.value

    def free(self, pointer: int) -> None:
        self.call("cuMemFree_v2", pointer)

    def read(self, pointer: int, n: int) -> bytes:
        out = ctypes.create_string_buffer(n)
        self.call("cuMemcpyDtoH_v2", out, pointer, n)
        return out.raw

    def write(self, pointer: int, data: bytes) -> None:
        self.call("cuMemcpyHtoD_v2", pointer, data, len(data))

    def fill(self, pointer: int, value: int, n: int) -> None:
        self.call("cuMemsetD8_v2", pointer, value, n)


def cases() -> list[tuple[int, int]]:
    return [(size, offset) for size in SIZES for offset in OFFSETS if offset + size + GUARD <= BUFFER_SIZE]


def check_copies(check: Checks, cuda: Cuda, gpu: int, mapping: gdrcopy.Mapping, rng: random.Random) -> None:
    """copy_to and copy_from at every (size, offset), GPU memory and guard bytes checked."""
    for size, offset in cases():
        start = max(offset - GUARD, 0)
        window = offset + size + GUARD - start
        data = rng.randbytes(size)
        cuda.fill(gpu + start, BACKGROUND, window)
        mapping.copy_to(data, offset)
        got = cuda.read(gpu + start, window)
        want = bytes([BACKGROUND]) * (offset - start) + data + bytes([BACKGROUND]) * GUARD
        check.same(got, want, f"copy_to({size} B, offset {offset})")

        data = rng.randbytes(size)
        cuda.write(gpu + offset, data)
        host = bytearray(b"\x5a" * (size + 2 * GUARD))
        # Into the middle of a bigger host buffer: nothing outside `size` may change.
        mapping.copy_from(memoryview(host)[GUARD : GUARD + size], offset)
        expected = b"\x5a" * GUARD + data + b"\x5a" * GUARD
        check.same(bytes(host), expected, f"copy_from({size} B, offset {offset})")
    print(f"ok copy_to and copy_from: {len(cases())} sizes x offsets from 1 B to 1 MiB, checked through cuMemcpy")


def check_host_buffers(check: Checks, cuda: Cuda, gpu: int, mapping: gdrcopy.Mapping, rng: random.Random) -> None:
    """Every kind of host buffer the documentation names, both directions, and the size argument."""
    import numpy

    data = rng.randbytes(4096)
    sources: list[tuple[str, object]] = [
        ("bytes", data),
        ("bytearray", bytearray(data)),
        ("memoryview", memoryview(data)),
        ("numpy uint8", numpy.frombuffer(data, dtype=numpy.uint8).copy()),
        ("numpy float64", numpy.frombuffer(data, dtype=numpy.float64).copy()),
    ]
    for name, source in sources:
        cuda.fill(gpu, 0, 8192)
        mapping.copy_to(source, 100)
        got = cuda.read(gpu + 100, 4096)
        check.same(got, data, f"copy_to from {name}")
    cuda.fill(gpu, 0, 8192)
    mapping.copy_to(data, 0, size=10)
    got = cuda.read(gpu, 11)
    check.that(got == data[:10] + b"\0", f"copy_to(size=10) wrote {got.hex()}")
    cuda.write(gpu, data)
    array = numpy.zeros(512, dtype=numpy.float64)
    mapping.copy_from(array)
    check.same(array.tobytes(), data, "copy_from into a float64 array")
    check.that(mapping.read(8, 16) == data[8:24], f"read(8, 16) gave {mapping.read(8, 16).hex()}")
    print("ok host buffers: bytes, bytearray, memoryview, NumPy arrays, size= and read()")


def check_errors(check: Checks, mapping: gdrcopy.Mapping) -> None:
    n = mapping.nbytes
    check.raises(ValueError, lambda: mapping.copy_to(b"x" * 16, n - 8), "copy_to past the end")
    check.raises(ValueError, lambda: mapping.copy_to(b"x", -1), "copy_to at a negative offset")
    check.raises(ValueError, lambda: mapping.copy_from(bytearray(2), n - 1), "copy_from past the end")
    check.raises(TypeError, lambda: mapping.copy_from(b"read-only"), "copy_from into bytes")
    check.raises(ValueError, lambda: mapping.copy_to(b"abc", 0, size=4), "copy_to with size over the host buffer")
    check.raises(ValueError, lambda: mapping.ndarray("uint8", shape=n + 1), "ndarray bigger than the mapping")
    print("ok range and type errors")


def check_ndarray(check: Checks, cuda: Cuda, gpu: int, mapping: gdrcopy.Mapping, rng: random.Random) -> None:
    """The zero-copy view: writes through it land in GPU memory, GPU writes show in it."""
    import numpy

    view = mapping.ndarray()
    check.that(view.shape == (mapping.nbytes,) and view.dtype == numpy.uint8, f"ndarray() is {view.shape} {view.dtype}")
    for size, offset in cases()[::3]:
        data = rng.randbytes(size)
        start = max(offset - GUARD, 0)
        window = offset + size + GUARD - start
        cuda.fill(gpu + start, BACKGROUND, window)
        view[offset : offset + size] = numpy.frombuffer(data, dtype=numpy.uint8)
        got = cuda.read(gpu + start, window)
        want = bytes([BACKGROUND]) * (offset - start) + data + bytes([BACKGROUND]) * GUARD
        check.same(got, want, f"ndarray store ({size} B, offset {offset})")
        data = rng.randbytes(size)
        cuda.write(gpu + offset, data)
        seen = view[offset : offset + size].tobytes()
        check.same(seen, data, f"ndarray load ({size} B, offset {offset})")
    data = rng.randbytes(4096)
    cuda.write(gpu + 4096, data)
    words = mapping.ndarray("uint32", shape=(32, 32), offset=4096)
    want_words = numpy.frombuffer(data, dtype=numpy.uint32).reshape(32, 32)
    check.that(bool((words == want_words).all()), "uint32 (32, 32) view at offset 4096 differs from the GPU memory")
    words[3, 5] = 0xDEADBEEF
    got = cuda.read(gpu + 4096 + 4 * (3 * 32 + 5), 4)
    check.that(got == (0xDEADBEEF).to_bytes(4, "little"), f"store through the uint32 view: GPU has {got.hex()}")
    check.raises(BufferError, mapping.close, "closing a mapping while a NumPy view of it is alive")
    del view, words
    print(f"ok NumPy view: {len(cases()[::3])} stores and loads, a 2-D uint32 view; close() refused while views live")


def check_unaligned_pins(check: Checks, cuda: Cuda, g: gdrcopy.Gdr, rng: random.Random) -> None:
    """Small cuMemAllocs share 64 KiB GPU pages and start anywhere in them."""
    pointers = [cuda.alloc(n) for n in (100, 1000, 4097, 70000)]
    unaligned = [p for p in pointers if p % GPU_PAGE]
    check.that(bool(unaligned), f"softgpu gave only page-aligned small allocations: {[hex(p) for p in pointers]}")
    for pointer, n in zip(pointers, (100, 1000, 4097, 70000)):
        with g.map((pointer, n)) as mapping:
            data = rng.randbytes(n)
            mapping.copy_to(data)
            got = cuda.read(pointer, n)
            check.same(got, data, f"pin at {pointer:#x} ({n} B)")
            data = rng.randbytes(n)
            cuda.write(pointer, data)
            check.that(mapping.read() == data, f"read back at {pointer:#x} ({n} B) differs")
            check.that(mapping.info().va == pointer, f"info().va {mapping.info().va:#x} != {pointer:#x}")
    for pointer in pointers:
        cuda.free(pointer)
    print(f"ok pins of small allocations, {len(unaligned)} of them not page aligned")


def check_invalidation(check: Checks, cuda: Cuda, g: gdrcopy.Gdr, pins: str, backend: str) -> None:
    """Free the GPU memory while it is mapped: what the C API's gdr_get_callback_flag says."""
    expect_persistent = pins == "persistent" or backend == "dmabuf"
    check.that(
        g.persistent_mapping == expect_persistent,
        f"GDR_ATTR_USE_PERSISTENT_MAPPING is {g.persistent_mapping}, expected {expect_persistent}",
    )
    pointer = cuda.alloc(2 * GPU_PAGE)
    mapping = g.map((pointer, 2 * GPU_PAGE))
    mapping.copy_to(b"\x01\x00\xad\xde")
    check.that(cuda.read(pointer, 4) == b"\x01\x00\xad\xde", "the word written before the free is not in GPU memory")
    check.that(not mapping.invalidated, "invalidated before the memory was freed")
    cuda.free(pointer)
    if expect_persistent:
        # A persistent pin keeps the pages until it is unpinned.
        check.that(not mapping.invalidated, "a persistent pin reports invalidated after cuMemFree")
        mapping.check()
        check.that(mapping.read(0, 4) == b"\x01\x00\xad\xde", "a persistent mapping lost its data after cuMemFree")
    else:
        check.that(mapping.invalidated, "a legacy pin does not report invalidated after cuMemFree")
        error = check.raises(gdrcopy.InvalidatedError, mapping.check, "check() after the GPU memory was freed")
        check.that("freed" in str(error), f"InvalidatedError says {error!r}")
        child = subprocess.run(
            [sys.executable, __file__, "--fault-child", "--backend", backend],
            capture_output=True,
            text=True,
            timeout=300,
        )
        check.that(
            CHILD_MARK in child.stdout and child.returncode in (-signal.SIGBUS, -signal.SIGSEGV),
            f"reading a revoked mapping: child exited {child.returncode}, expected SIGBUS or SIGSEGV;\n"
            f"{child.stdout}{child.stderr}",
        )
    mapping.close()  # unmap and unpin still succeed, as gdr_unmap/gdr_unpin_buffer do
    check.that(mapping.closed and mapping.pin.closed, "the mapping or its pin is not closed")
    print(
        f"ok invalidation ({'persistent pin: data kept' if expect_persistent else 'legacy pin: flag set, access faults'})"
    )


def fault_child(backend: str) -> int:
    """Map, free the memory, then read through the revoked mapping: this process must die of it."""
    cuda = Cuda()
    g = gdrcopy.open(backend)
    pointer = cuda.alloc(2 * GPU_PAGE)
    mapping = g.map((pointer, 2 * GPU_PAGE))
    view = mapping.ndarray()
    cuda.free(pointer)
    print(CHILD_MARK, flush=True)
    value = int(view[0])
    print(f"fault-child: read {value:#x} and did not fault", flush=True)
    return 0


def check_close_order_and_fork(check: Checks, cuda: Cuda, backend: str) -> None:
    """Closing the instance closes what was made from it; a fork child can use none of it."""
    pointer = cuda.alloc(GPU_PAGE)
    g = gdrcopy.open(backend)
    mapping = g.map((pointer, GPU_PAGE))
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            mapping.copy_to(b"child")
            code = 3
        except gdrcopy.ClosedError:
            pass
        except BaseException:  # noqa: BLE001 - any other outcome fails the parent's check
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    check.that(
        os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0,
        f"fork child: wait status {status:#x} (3: the parent's mapping worked in the child)",
    )
    mapping.copy_to(b"parent")
    check.that(cuda.read(pointer, 6) == b"parent", "the parent's mapping stopped working after fork()")
    g.close()
    check.that(mapping.closed and mapping.pin.closed, "gdr close left the mapping or pin open")
    check.raises(gdrcopy.ClosedError, lambda: mapping.copy_to(b"x"), "copy_to after the instance was closed")
    cuda.free(pointer)
    print("ok close() closes mappings and pins first; a fork child gets ClosedError")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("gdrdrv", "dmabuf"), required=True)
    parser.add_argument("--pins", choices=("persistent", "legacy"), default="persistent")
    parser.add_argument("--fault-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fault_child:
        return fault_child(args.backend)
    check = Checks()
    try:
        cuda = Cuda()
        rng = random.Random(13)
        print(
            f"gdrcopy {gdrcopy.__version__} from {os.path.dirname(gdrcopy.__file__)}, "
            f"library {gdrcopy.library_version()} ({gdrcopy.library_path()}), Python {sys.version.split()[0]}"
        )
        check.that(gdrcopy.library_version() == "2.6", f"library_version() is {gdrcopy.library_version()}")
        with gdrcopy.open(args.backend) as g:
            print(f"instance: {g.info()}")
            check.that(g.backend_name == args.backend, f"backend_name is {g.backend_name}, asked {args.backend}")
            gpu = cuda.alloc(BUFFER_SIZE)
            with g.map((gpu, BUFFER_SIZE)) as mapping:
                print(f"mapping: {BUFFER_SIZE} B at GPU {gpu:#x}, {mapping.mapping_type.name}, {mapping.info()}")
                check_copies(check, cuda, gpu, mapping, rng)
                check_host_buffers(check, cuda, gpu, mapping, rng)
                check_errors(check, mapping)
                check_ndarray(check, cuda, gpu, mapping, rng)
            check.that(mapping.closed, "the mapping is open after its with block")
            cuda.free(gpu)
            check_unaligned_pins(check, cuda, g, rng)
            check_invalidation(check, cuda, g, args.pins, args.backend)
        check_close_order_and_fork(check, cuda, args.backend)
    except Failed as failure:
        print(f"FAILED after {check.count} checks: {failure}")
        return 1
    print(f"gdrcopy_vm_check: {check.count} checks passed ({args.backend} backend, {args.pins} pins)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
