"""NCCL's own GDRCopy start-up and collectives, against whichever libgdrapi the environment offers.

Run by tools/h200/consumers.sh on the H200 machine, once per cell (no library,
our library on each backend and package layout).  One process, one GPU:
NCCL opens libgdrapi.so at communicator start (NCCL_GDRCOPY_ENABLE=1), judges
its versions and, when it enables it, pins a buffer of its own for the work
FIFO.  Every all-reduce and all-gather of 8 B to 64 MiB must return the right
bytes; the script prints one line per size and a verdict, and exits 1 when a
collective fails or a result is wrong.
"""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist

SIZES = [8 << shift for shift in range(0, 24, 3)] + [64 << 20]  # 8 B ... 64 MiB


def main() -> int:
    torch.cuda.set_device(0)
    port = os.environ.get("NCCL_CHECK_PORT", "29511")
    started = time.monotonic()
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    failures = 0
    try:
        # The communicator starts lazily: the first collective runs NCCL's GDRCopy start-up.
        for size in SIZES:
            count = max(size // 4, 1)
            data = torch.arange(count, dtype=torch.float32, device="cuda").remainder_(8191)
            expected = data.clone()
            dist.all_reduce(data)
            gathered = [torch.empty_like(expected)]
            dist.all_gather(gathered, expected)
            torch.cuda.synchronize()
            ok = torch.equal(data, expected) and torch.equal(gathered[0], expected)
            failures += not ok
            print(f"nccl-check: all_reduce+all_gather {size} B: {'ok' if ok else 'WRONG DATA'}", flush=True)
    except Exception as error:  # NCCL errors arrive as RuntimeError/DistBackendError: report, don't trace
        print(f"nccl-check: collective failed: {type(error).__name__}: {error}", flush=True)
        return 1
    finally:
        dist.destroy_process_group()
    elapsed = time.monotonic() - started
    verdict = "PASS" if failures == 0 else f"FAIL ({failures} sizes wrong)"
    print(f"nccl-check: {len(SIZES)} sizes, {verdict} in {elapsed:.1f} s (NCCL {torch.cuda.nccl.version()})")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
