"""Per-call latency from Python: gdrcopy's mapping against cuMemcpy.

    python -m gdrcopy.bench [--backend vulkan] [--rounds 15] [--calls 2000]

Times, from one Python process, a write (host -> GPU memory) and a read
(GPU memory -> host) of 64 B and 4 KiB through a gdrcopy Mapping
(copy_to / copy_from) and through cuMemcpyHtoD / cuMemcpyDtoH of the same
sizes from pinned host memory (cuda-python when installed, else libcuda
through ctypes; the table says which).  Each round times `--calls` back-to-
back calls of every case in turn (interleaved, because shared machines
drift); the table shows the median per-call time over the rounds with the
min and max, then one JSON object per case.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any, Optional

import gdrcopy
from gdrcopy import _cuda

SIZES = (64, 4096)
TARGET_WRITE_US = 1.0
TARGET_SPEEDUP = 5.0


def _time_calls(call: tuple[Callable[..., Any], tuple[Any, ...]], calls: int) -> float:
    """Seconds per call, over `calls` back-to-back calls of fn(*args)."""
    fn, args = call
    loop = range(calls)
    start = time.perf_counter_ns()
    for _ in loop:
        fn(*args)
    return (time.perf_counter_ns() - start) / calls / 1e9


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
        help=f"exit 1 unless a 64 B write takes <= {TARGET_WRITE_US} us median "
        f"and is >= {TARGET_SPEEDUP}x faster than cuMemcpyHtoD",
    )
    args = parser.parse_args(argv)

    cuda = _cuda.driver(args.cuda)
    nbytes = 1 << 16
    with gdrcopy.open(args.backend) as g:
        backend = g.backend_name
        allocation = None
        if backend == "vulkan":
            allocation = g.alloc_mapped(nbytes)
            gpu_ptr = allocation.gpu_ptr
            mapping = allocation.map()
        else:
            gpu_ptr = cuda.mem_alloc(nbytes)
            mapping = g.map((gpu_ptr, nbytes))
        host = cuda.host_alloc(max(SIZES))  # pinned, as cuMemcpy is fastest from
        ctypes.memset(host, 0x5A, max(SIZES))
        cases: list[tuple[str, str, int, tuple[Callable[..., Any], tuple[Any, ...]]]] = []
        for size in SIZES:
            src = bytearray(b"\x5a" * size)
            dst = bytearray(size)
            # Bound methods and fixed buffers: what a tight loop in a program looks like.
            write, read = mapping.copy_to, mapping.copy_from
            cases.append(("gdrcopy", "write", size, (write, (src,))))
            cases.append(("gdrcopy", "read", size, (read, (dst,))))
            cases.append(("cuMemcpy", "write", size, cuda.bound_htod(gpu_ptr, host, size)))
            cases.append(("cuMemcpy", "read", size, cuda.bound_dtoh(host, gpu_ptr, size)))
        for _, _, _, call in cases:  # warm up: first touches, lazy initialisation
            _time_calls(call, 100)
        samples: list[list[float]] = [[] for _ in cases]
        for _ in range(args.rounds):
            for i, (_, _, _, call) in enumerate(cases):
                samples[i].append(_time_calls(call, args.calls))
        mapping_type = mapping.mapping_type.name
        mapping.close()
        if allocation is not None:
            allocation.close()
        else:
            cuda.mem_free(gpu_ptr)

    header = {
        "backend": backend,
        "mapping_type": mapping_type,
        "cuda": cuda.name,
        "cuda_driver_version": cuda.driver_version(),
        "library": gdrcopy.library_path(),
        "library_version": gdrcopy.library_version(),
        "gdrcopy": gdrcopy.__version__,
        "python": platform.python_version(),
        "rounds": args.rounds,
        "calls": args.calls,
    }
    medians: dict[tuple[str, str, int], float] = {}
    records = []
    for (method, direction, size, _), times in zip(cases, samples):
        us = [t * 1e6 for t in times]
        medians[(method, direction, size)] = statistics.median(us)
        records.append(
            dict(
                header,
                method=method,
                direction=direction,
                size=size,
                median_us=round(statistics.median(us), 4),
                min_us=round(min(us), 4),
                max_us=round(max(us), 4),
            )
        )

    print(
        f"gdrcopy {gdrcopy.__version__} from Python {header['python']}: {backend} backend "
        f"({mapping_type} mapping), cuMemcpy via {cuda.name} (CUDA driver {header['cuda_driver_version']}); "
        f"per-call time in us, median [min-max] of {args.rounds} rounds x {args.calls} calls"
    )
    print(f"{'size':>6} {'direction':<9} {'gdrcopy':>24} {'cuMemcpy':>24} {'speedup':>8}")
    for size in SIZES:
        for direction in ("write", "read"):
            ours = next(
                r for r in records if r["method"] == "gdrcopy" and r["direction"] == direction and r["size"] == size
            )
            theirs = next(
                r for r in records if r["method"] == "cuMemcpy" and r["direction"] == direction and r["size"] == size
            )
            cell = "{median_us:8.3f} [{min_us:.3f}-{max_us:.3f}]"
            speedup = theirs["median_us"] / ours["median_us"]
            print(f"{size:>6} {direction:<9} {cell.format(**ours):>24} {cell.format(**theirs):>24} {speedup:7.1f}x")
    for record in records:
        print(json.dumps(record, sort_keys=True))

    write64 = medians[("gdrcopy", "write", 64)]
    speedup64 = medians[("cuMemcpy", "write", 64)] / write64
    met = write64 <= TARGET_WRITE_US and speedup64 >= TARGET_SPEEDUP
    print(
        f"target: 64 B write <= {TARGET_WRITE_US} us and >= {TARGET_SPEEDUP:.0f}x cuMemcpyHtoD: "
        f"{write64:.3f} us, {speedup64:.1f}x: {'met' if met else 'MISSED'}"
    )
    return 1 if args.check_targets and not met else 0


if __name__ == "__main__":
    sys.exit(main())
