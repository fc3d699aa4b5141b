"""Per-call latency from Python: gdrcopy's copy paths against cuMemcpy and NumPy.

    python -m gdrcopy.bench [--backend vulkan] [--rounds 15] [--calls 2000]

Times, from one Python process, a write (host -> GPU memory) and a read
(GPU memory -> host) of 64 B and 4 KiB four ways:

  fast      Mapping.copy_to / copy_from through the compiled calls (gdrcopy._fastcopy)
  ctypes    the same library calls through ctypes (the fallback)
  cuMemcpy  cuMemcpyHtoD / cuMemcpyDtoH from pinned host memory (cuda-python when
            installed, else libcuda through ctypes; the header says which)
  numpy     assignment into / out of a NumPy view of the mapping (plain stores
            and uncached loads on write-combined memory)

A method that cannot run here is left out, and the output says why.  Each
round times `--calls` back-to-back calls of every case in turn (interleaved,
because shared machines drift); the table shows the median per-call time
over the rounds with the min and max, then one JSON object per case.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import platform
import statistics
import sys
import time
import types
from collections.abc import Callable
from typing import Any, Optional

import gdrcopy
from gdrcopy import _cuda
from gdrcopy._lib import GdrError, LibraryNotFound

SIZES = (64, 4096)
METHODS = ("fast", "ctypes", "cuMemcpy", "numpy")
TARGET_WRITE_US = 0.3
Call = tuple[Callable[..., Any], tuple[Any, ...]]


def _time_calls(call: Call, calls: int) -> float:
    """Seconds per call, over `calls` back-to-back calls of fn(*args)."""
    fn, args = call
    loop = range(calls)
    start = time.perf_counter_ns()
    for _ in loop:
        fn(*args)
    return (time.perf_counter_ns() - start) / calls / 1e9


def _cases(
    mapping: gdrcopy.Mapping, cuda: Optional[_cuda.Driver], gpu_ptr: int, host: int, skipped: dict[str, str]
) -> list[tuple[str, str, int, Call]]:
    cases: list[tuple[str, str, int, Call]] = []
    try:
        import numpy
    except ImportError:
        numpy = None  # type: ignore[assignment]
        skipped["numpy"] = "NumPy is not installed (pip install numpy)"
    # The ctypes path is the class's methods; a mapping's own attributes are the compiled ones.
    ctypes_to = types.MethodType(gdrcopy.Mapping.copy_to, mapping)
    ctypes_from = types.MethodType(gdrcopy.Mapping.copy_from, mapping)
    if mapping.copy_path != "compiled":
        skipped["fast"] = gdrcopy.fast_path()
    for size in SIZES:
        src = bytearray(b"\x5a" * size)
        dst = bytearray(size)
        # Bound methods and fixed buffers: what a tight loop in a program looks like.
        if "fast" not in skipped:
            cases.append(("fast", "write", size, (mapping.copy_to, (src,))))
            cases.append(("fast", "read", size, (mapping.copy_from, (dst,))))
        cases.append(("ctypes", "write", size, (ctypes_to, (src,))))
        cases.append(("ctypes", "read", size, (ctypes_from, (bytearray(size),))))
        if cuda is not None:
            cases.append(("cuMemcpy", "write", size, cuda.bound_htod(gpu_ptr, host, size)))
            cases.append(("cuMemcpy", "read", size, cuda.bound_dtoh(host, gpu_ptr, size)))
        if numpy is not None:
            view = mapping.ndarray(numpy.uint8, size)
            data = numpy.full(size, 0x5A, numpy.uint8)
            out = numpy.empty(size, numpy.uint8)
            everything = slice(None)
            cases.append(("numpy", "write", size, (view.__setitem__, (everything, data))))
            cases.append(("numpy", "read", size, (out.__setitem__, (everything, view))))
    return cases


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gdrcopy.bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", default=None, help="gdrdrv, dmabuf or vulkan (default: the library's choice)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000, help="calls per case per round")
    parser.add_argument(
        "--cuda",
        default="auto",
        choices=("auto", "cuda-python", "ctypes"),
        help="how cuMemcpy is called (default: cuda-python if installed)",
    )
    parser.add_argument(
        "--check-targets",
        action="store_true",
        help=f"exit 1 unless a 64 B write through the fast path takes <= {TARGET_WRITE_US} us median",
    )
    args = parser.parse_args(argv)

    skipped: dict[str, str] = {}
    cuda: Optional[_cuda.Driver]
    try:
        cuda = _cuda.driver(args.cuda)
    except (_cuda.CudaError, OSError, AttributeError) as error:
        cuda = None
        skipped["cuMemcpy"] = f"no CUDA driver to call: {error}"
    nbytes = 1 << 16
    try:
        opened = gdrcopy.open(args.backend)
    except (GdrError, LibraryNotFound) as error:
        # No GPU, driver or library here: what is missing and what to do, not a traceback.
        print(f"gdrcopy.bench: error: {error}", file=sys.stderr)
        return 1
    with opened as g:
        backend = g.backend_name
        allocation = None
        if backend == "vulkan":
            allocation = g.alloc_mapped(nbytes)
            gpu_ptr = allocation.gpu_ptr
            mapping = allocation.map()
        elif cuda is not None:
            gpu_ptr = cuda.mem_alloc(nbytes)
            mapping = g.map((gpu_ptr, nbytes))
        else:
            print(f"the {backend} backend maps memory CUDA allocates, and {skipped['cuMemcpy']}", file=sys.stderr)
            return 2
        host = 0
        if cuda is not None:
            host = cuda.host_alloc(max(SIZES))  # pinned, as cuMemcpy is fastest from
            ctypes.memset(host, 0x5A, max(SIZES))
        cases = _cases(mapping, cuda, gpu_ptr, host, skipped)
        for _, _, _, call in cases:  # warm up: first touches, lazy initialisation
            _time_calls(call, 100)
        samples: list[list[float]] = [[] for _ in cases]
        for _ in range(args.rounds):
            for i, (_, _, _, call) in enumerate(cases):
                samples[i].append(_time_calls(call, args.calls))
        mapping_type = mapping.mapping_type.name
        copy_path = mapping.copy_path
        labels = [(method, direction, size) for method, direction, size, _ in cases]
        del cases, call  # the NumPy views, before the mapping closes
        mapping.close()
        if allocation is not None:
            allocation.close()
        elif cuda is not None:
            cuda.mem_free(gpu_ptr)

    header = {
        "backend": backend,
        "mapping_type": mapping_type,
        "copy_path": copy_path,
        "cuda": cuda.name if cuda is not None else None,
        "cuda_driver_version": cuda.driver_version() if cuda is not None else None,
        "library": gdrcopy.library_path(),
        "library_source": gdrcopy.library_info()["source"],
        "library_version": gdrcopy.library_version(),
        "gdrcopy": gdrcopy.__version__,
        "python": platform.python_version(),
        "rounds": args.rounds,
        "calls": args.calls,
    }
    records: dict[tuple[str, str, int], dict[str, Any]] = {}
    for label, times in zip(labels, samples):
        us = [s * 1e6 for s in times]
        method, direction, size = label
        records[label] = dict(
            header,
            method=method,
            direction=direction,
            size=size,
            median_us=round(statistics.median(us), 4),
            min_us=round(min(us), 4),
            max_us=round(max(us), 4),
        )

    print(
        f"gdrcopy {gdrcopy.__version__} from Python {header['python']}: {backend} backend ({mapping_type} mapping), "
        f"library {header['library']} ({header['library_source']}), copies {copy_path}, cuMemcpy via "
        f"{header['cuda'] or 'nothing'} (CUDA driver {header['cuda_driver_version']}); per-call time in us, "
        f"median [min-max] of {args.rounds} rounds x {args.calls} calls"
    )
    methods = [m for m in METHODS if m not in skipped]
    print(f"{'size':>6} {'direction':<9} " + " ".join(f"{m:>24}" for m in methods))
    for size in SIZES:
        for direction in ("write", "read"):
            cells = []
            for method in methods:
                record = records.get((method, direction, size))
                cells.append("{median_us:8.3f} [{min_us:.3f}-{max_us:.3f}]".format(**record) if record else "-")
            print(f"{size:>6} {direction:<9} " + " ".join(f"{c:>24}" for c in cells))
    for method, why in skipped.items():
        print(f"not measured: {method}: {why}")
    for record in records.values():
        print(json.dumps(record, sort_keys=True))

    fast = records.get(("fast", "write", 64))
    if fast is None:
        print(f"target: 64 B write <= {TARGET_WRITE_US} us through the fast path: MISSED (no fast path: "
              f"{skipped['fast']})")  # fmt: skip
        return 1 if args.check_targets else 0
    write64 = fast["median_us"]
    ratios = []
    for other in ("ctypes", "cuMemcpy", "numpy"):
        theirs = records.get((other, "write", 64))
        if theirs:
            ratios.append(f"{theirs['median_us'] / write64:.1f}x faster than {other}")
    met = write64 <= TARGET_WRITE_US
    print(
        f"target: 64 B write <= {TARGET_WRITE_US} us through the fast path: {write64:.3f} us "
        f"({', '.join(ratios)}): {'met' if met else 'MISSED'}"
    )
    return 1 if args.check_targets and not met else 0


if __name__ == "__main__":
    sys.exit(main())
