#!/usr/bin/env python3
"""NCCL's GDRCopy data path across two GPUs (issue 29): one rank's checks and timings, and the summary.

    python3 nccl_two_gpu.py rank --jsonl FILE      one rank (RANK, WORLD_SIZE, MASTER_ADDR/PORT from the env)
    python3 nccl_two_gpu.py summary RESULTS_DIR   NCCL's GDRCopy lines, the checks, the latency table

tools/h200/nccl_two_gpu.sh starts two ranks per run, one GPU each, with NCCL
forced onto its socket network transport, so that NCCL's proxy runs its FIFO
and flags through libgdrapi when NCCL_GDRCOPY_ENABLE=1.  A rank checks every
all-reduce and all-gather of 8 B to 64 MiB exactly, times small all-reduces,
and says which libgdrapi, if any, is mapped in its process.  torch is imported
only by `rank`: the summary and the value formulas run anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

CHECK_SIZES = [8 << (2 * k) for k in range(12)] + [64 << 20]  # 8 B, 32 B, ... 32 MiB, 64 MiB
LATENCY_SIZES = [8 << (2 * k) for k in range(7)] + [64 << 10]  # 8 B ... 32 KiB, 64 KiB
OPS = [("all_reduce", "float32"), ("all_reduce", "int32"), ("all_gather", "float32"), ("all_gather", "int32")]
MODES = {1: "with GDRCopy", 0: "without GDRCopy"}

# Element i of rank r is i % VALUE_PERIOD + 1 + r * RANK_STRIDE: never zero, different on
# every rank (so a gather from the wrong rank shows), and small enough that the sums stay
# exact integers in float32.
VALUE_PERIOD = 4093
RANK_STRIDE = 8192


def contribution(index: Any, rank: int) -> Any:
    """Rank `rank`'s value at `index` (an int or a tensor of indices)."""
    return index % VALUE_PERIOD + 1 + rank * RANK_STRIDE


def expected_sum(index: Any, world: int) -> Any:
    """The all-reduce (sum) of every rank's contribution at `index`."""
    return (index % VALUE_PERIOD + 1) * world + RANK_STRIDE * (world * (world - 1) // 2)


def exact_in_float32(world: int) -> bool:
    """Whether every value and sum for `world` ranks is an integer float32 holds exactly."""
    largest: int = expected_sum(VALUE_PERIOD - 1, world)
    return largest < 1 << 24


def size_name(size: int) -> str:
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def mapped_libraries(maps_text: str, name: str = "libgdrapi") -> list[str]:
    """The distinct files in a /proc/PID/maps text whose file name contains `name`."""
    paths = []
    for line in maps_text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and name in os.path.basename(fields[5]) and fields[5] not in paths:
            paths.append(fields[5])
    return paths


def library_verdict(paths: list[str], gdrcopy_enabled: bool, our_dir: str) -> tuple[bool, str]:
    """Whether the libgdrapi mappings fit the run, and why (the run fails when they do not)."""
    ours = [p for p in paths if our_dir and os.path.realpath(p).startswith(os.path.realpath(our_dir) + os.sep)]
    if gdrcopy_enabled:
        if not paths:
            return False, (
                "NCCL_GDRCOPY_ENABLE=1 but no libgdrapi is mapped in this process: NCCL did not load it "
                "(put the folder with our libgdrapi.so first on LD_LIBRARY_PATH)"
            )
        if not ours:
            return False, f"the libgdrapi mapped is not ours ({', '.join(paths)}; ours is under {our_dir})"
        return True, f"our library is mapped: {', '.join(ours)}"
    if paths:
        return True, f"libgdrapi is mapped although NCCL_GDRCOPY_ENABLE=0: {', '.join(paths)}"
    return True, "no libgdrapi mapped (NCCL_GDRCOPY_ENABLE=0)"


# ---------------------------------------------------------------- one rank (needs torch and a GPU)


def run_rank(jsonl: Path, iterations: int, warmup: int) -> int:
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    gdrcopy = os.environ.get("NCCL_GDRCOPY_ENABLE", "0") == "1"
    common = {"rank": rank, "gdrcopy": int(gdrcopy), "round": int(os.environ.get("ROUND", "0"))}
    out = jsonl.open("a")

    def emit(kind: str, **fields: Any) -> None:
        out.write(json.dumps({"kind": kind, **common, **fields}) + "\n")
        out.flush()

    def say(text: str) -> None:
        print(f"nccl-two-gpu rank {rank}: {text}", flush=True)

    if not exact_in_float32(world):
        say(f"{world} ranks: the sums would not be exact in float32; run 2")
        return 2
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    nccl = torch.cuda.nccl.version()  # a tuple in recent PyTorch, an int in old ones
    emit(
        "env",
        gpu=torch.cuda.get_device_name(device),
        torch=torch.__version__,
        nccl=".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl),
        world=world,
    )
    failures: list[str] = []
    try:
        dist.init_process_group("nccl", rank=rank, world_size=world)
        dtypes = {"float32": torch.float32, "int32": torch.int32}
        for op, dtype_name in OPS:
            dtype = dtypes[dtype_name]
            for size in CHECK_SIZES:
                count = max(size // 4, 1)
                index = torch.arange(count, device=device, dtype=torch.int64)
                mine = contribution(index, rank).to(dtype)
                if op == "all_reduce":
                    result = mine.clone()
                    dist.all_reduce(result)
                    expected = expected_sum(index, world).to(dtype)
                else:
                    result = torch.empty(count * world, device=device, dtype=dtype)
                    dist.all_gather_into_tensor(result, mine)
                    expected = torch.cat([contribution(index, r).to(dtype) for r in range(world)])
                torch.cuda.synchronize()
                wrong = int((result != expected).sum().item())
                detail = ""
                if wrong:
                    first = int((result != expected).nonzero()[0].item())
                    detail = (
                        f"{wrong} of {result.numel()} elements wrong, first at {first}: "
                        f"{result[first].item()} != {expected[first].item()}"
                    )
                    failures.append(f"{op} {dtype_name} {size_name(size)}: {detail}")
                emit("check", op=op, dtype=dtype_name, bytes=size, ok=not wrong, detail=detail)
                say(f"{op} {dtype_name} {size_name(size)}: {'ok' if not wrong else 'FAIL ' + detail}")

        for size in LATENCY_SIZES:
            data = torch.zeros(size // 4, device=device, dtype=torch.float32)
            for _ in range(warmup):
                dist.all_reduce(data)
            torch.cuda.synchronize()
            dist.barrier()
            torch.cuda.synchronize()
            times = []
            for _ in range(iterations):
                start = time.perf_counter_ns()
                dist.all_reduce(data)
                torch.cuda.synchronize()
                times.append((time.perf_counter_ns() - start) / 1000)
            times.sort()
            emit(
                "latency",
                op="all_reduce",
                bytes=size,
                iterations=iterations,
                median_us=statistics.median(times),
                min_us=times[0],
                p90_us=times[int(len(times) * 0.9)],
            )
            say(f"all_reduce {size_name(size)}: median {statistics.median(times):.1f} µs over {iterations}")
    except Exception as error:  # NCCL's errors arrive as RuntimeError/DistBackendError: report them, no trace
        failures.append(f"collective failed: {type(error).__name__}: {error}")
        say(failures[-1])
    finally:
        # NCCL loads libgdrapi (or not) at communicator start: by now the mapping tells.
        paths = mapped_libraries(Path("/proc/self/maps").read_text())
        library_ok, why = library_verdict(paths, gdrcopy, os.environ.get("OUR_LIBGDRAPI_DIR", ""))
        emit("library", paths=paths, ok=library_ok, why=why)
        say(why)
        if not library_ok:
            failures.append(why)
        if dist.is_initialized():
            dist.destroy_process_group()
    emit("verdict", ok=not failures, failures=failures)
    say("PASS" if not failures else f"FAIL: {len(failures)} problems, the first: {failures[0]}")
    out.close()
    return 0 if not failures else 1


# ---------------------------------------------------------------- summary (plain Python)

NCCL_PREFIX = re.compile(r"^\S+:\d+:\d+ ")  # host:pid:tid, which differs in every line
GDRCOPY_LINE = re.compile(r"GDR|gdr_(open|pin_buffer|map)|libgdrapi|^(ERR|WARN):")
# Our vulkan backend's debug line for each buffer it pins (an error about a pin is not one).
PINNED = re.compile(r"gdr_pin_buffer: (imported the|\S+ shares the import)")
SOCKET_CHANNEL = re.compile(r"via NET/Socket")


def read_records(results: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(results.glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
    return rows


def gdrcopy_lines(log_texts: Iterable[str]) -> list[tuple[int, str]]:
    """Lines about GDRCopy (NCCL's and our library's), host:pid:tid and addresses dropped, with counts."""
    counts: dict[str, int] = defaultdict(int)
    for text in log_texts:
        for line in text.splitlines():
            # This program's own lines about the library are among the checks already.
            if GDRCOPY_LINE.search(line) and not line.startswith("nccl-two-gpu"):
                counts[re.sub(r"0x[0-9a-f]+|\b[0-9a-f]{12}\b", "ADDR", NCCL_PREFIX.sub("", line.strip()))] += 1
    return sorted(((n, line) for line, n in counts.items()), key=lambda item: item[1])


def checks(rows: list[dict[str, Any]], logs: dict[str, str], rounds: int, world: int = 2) -> list[tuple[bool, str]]:
    """Every check of the whole run: (passed, what)."""
    found: list[tuple[bool, str]] = []
    for gdrcopy, mode in MODES.items():
        mine = [r for r in rows if r.get("gdrcopy") == gdrcopy]
        runs = [r for r in mine if r["kind"] == "run"]
        bad_rc = [f"round {r['round']} rank {r['rank']}: exit {r['rc']}" for r in runs if r["rc"] != 0]
        found.append(
            (
                len(runs) == rounds * world and not bad_rc,
                f"{mode}: {len(runs)} of {rounds * world} rank processes ran"
                + (f"; not exit 0: {'; '.join(bad_rc)}" if bad_rc else ", each exit 0"),
            )
        )
        results = [r for r in mine if r["kind"] == "check"]
        wrong = [
            f"round {r['round']} rank {r['rank']} {r['op']} {r['dtype']} {size_name(r['bytes'])}: {r['detail']}"
            for r in results
            if not r["ok"]
        ]
        want = rounds * world * len(OPS) * len(CHECK_SIZES)
        found.append(
            (
                len(results) == want and not wrong,
                f"{mode}: {len(results) - len(wrong)} of {want} collectives (all-reduce, all-gather; "
                f"float32, int32; {size_name(CHECK_SIZES[0])} - {size_name(CHECK_SIZES[-1])}) gave the exact values"
                + (f"; wrong: {'; '.join(wrong[:5])}" if wrong else ""),
            )
        )
        libraries = [r for r in mine if r["kind"] == "library"]
        bad = sorted({r["why"] for r in libraries if not r["ok"]})
        said = sorted({r["why"] for r in libraries if r["ok"]})
        found.append(
            (
                len(libraries) == rounds * world and not bad,
                f"{mode}: libgdrapi in {len(libraries)} of {rounds * world} processes: "
                + "; ".join(bad + said or ["no process reported"]),
            )
        )
        mode_logs = {name: text for name, text in logs.items() if f"gdrcopy{gdrcopy}" in name}
        socket = [name for name, text in mode_logs.items() if SOCKET_CHANNEL.search(text)]
        found.append(
            (
                bool(mode_logs) and len(socket) == len(mode_logs),
                f"{mode}: NCCL's log names NET/Socket channels in {len(socket)} of {len(mode_logs)} rank logs",
            )
        )
        if gdrcopy:
            enabled = [name for name, text in mode_logs.items() if "GDRCOPY enabled" in text]
            pinned = [name for name, text in mode_logs.items() if PINNED.search(text)]
            found.append(
                (
                    bool(mode_logs) and len(enabled) == len(mode_logs),
                    f"{mode}: NCCL says 'GDRCOPY enabled' in {len(enabled)} of {len(mode_logs)} rank logs",
                )
            )
            found.append(
                (
                    bool(mode_logs) and len(pinned) == len(mode_logs),
                    f"{mode}: our library pinned NCCL memory (gdr_pin_buffer) in {len(pinned)} of "
                    f"{len(mode_logs)} rank logs",
                )
            )
    return found


def latency_table(rows: list[dict[str, Any]], rank: int = 0) -> list[str]:
    """Markdown: per size, the median over rounds of each round's median µs, [lowest - highest round]."""
    per: dict[tuple[int, int], list[float]] = defaultdict(list)
    for r in rows:
        if r["kind"] == "latency" and r["rank"] == rank:
            per[(r["bytes"], r["gdrcopy"])].append(r["median_us"])
    lines = [
        f"| all-reduce size | {MODES[1]} (µs) | {MODES[0]} (µs) | with / without |",
        "| ---: | ---: | ---: | ---: |",
    ]

    def cell(values: list[float]) -> str:
        if not values:
            return "–"
        return f"{statistics.median(values):.1f} [{min(values):.1f}–{max(values):.1f}] ({len(values)})"

    for size in sorted({size for size, _ in per}):
        with_, without = per.get((size, 1), []), per.get((size, 0), [])
        ratio = f"{statistics.median(with_) / statistics.median(without):.2f}" if with_ and without else "–"
        lines.append(f"| {size_name(size)} | {cell(with_)} | {cell(without)} | {ratio} |")
    return lines


def summarize(results: Path, rounds: int) -> int:
    rows = read_records(results)
    logs = {p.name: p.read_text(errors="replace") for p in sorted(results.glob("*.log")) if "-gdrcopy" in p.name}
    print(f"# NCCL across two GPUs: {rounds} rounds, results in {results}\n")
    for env in {(r["gpu"], r["nccl"], r["torch"]) for r in rows if r["kind"] == "env"}:
        print(f"GPU {env[0]}, NCCL {env[1]}, PyTorch {env[2]}")
    print("\n## NCCL's and our library's lines about GDRCopy (count over all rank logs)\n```")
    for mode_flag, mode in MODES.items():
        print(f"-- {mode}")
        for count, line in gdrcopy_lines(t for n, t in logs.items() if f"gdrcopy{mode_flag}" in n):
            print(f"{count:4d}  {line}")
    print("```\n\n## Checks\n")
    found = checks(rows, logs, rounds)
    for passed, what in found:
        print(f"- {'ok  ' if passed else 'FAIL'} {what}")
    print("\n## Small all-reduces, rank 0: median [min–max] over rounds of each round's median (rounds)\n")
    print("\n".join(latency_table(rows)))
    failed = sum(not passed for passed, _ in found)
    print(f"\nnccl-two-gpu: {'PASS' if not failed else f'FAIL ({failed} checks failed)'}")
    return 0 if not failed else 1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    rank = sub.add_parser("rank", help="one rank's checks and timings (torch, one GPU)")
    rank.add_argument("--jsonl", type=Path, required=True, help="file the JSON lines are appended to")
    rank.add_argument("--iterations", type=int, default=300, help="timed all-reduces per size")
    rank.add_argument("--warmup", type=int, default=50, help="untimed all-reduces per size first")
    summary = sub.add_parser("summary", help="the GDRCopy log lines, the checks and the latency table")
    summary.add_argument("results", type=Path, help="the folder nccl_two_gpu.sh wrote")
    summary.add_argument("--rounds", type=int, required=True, help="rounds the run was asked for")
    args = parser.parse_args(argv)
    if args.command == "rank":
        return run_rank(args.jsonl, args.iterations, args.warmup)
    if not args.results.is_dir():
        parser.error(f"{args.results} is not a folder: give the folder nccl_two_gpu.sh wrote ($OUT there)")
    return summarize(args.results, args.rounds)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
