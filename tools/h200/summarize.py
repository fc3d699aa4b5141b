#!/usr/bin/env python3
"""Medians and ranges over the rounds of one tools/h200/run.sh run, as Markdown tables.

    python3 tools/h200/summarize.py RESULTS_DIR

Each figure is the median over rounds of that round's median (copylat and pplat
report per-bucket medians); the range is the lowest and highest round.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROWS = {  # copylat test name -> (direction, column)
    "gdr_copy_to_mapping": ("CPU → GPU", "ours"),
    "memcpy_to_mapping": ("CPU → GPU", "memcpy"),
    "stream_loop_to_mapping": ("CPU → GPU", "stream loop"),
    "cuMemcpy_H2D": ("CPU → GPU", "cuMemcpy"),
    "gdr_copy_from_mapping": ("GPU → CPU", "ours"),
    "memcpy_from_mapping": ("GPU → CPU", "memcpy"),
    "stream_loop_from_mapping": ("GPU → CPU", "stream loop"),
    "cuMemcpy_D2H": ("GPU → CPU", "cuMemcpy"),
}
COLUMNS = ("ours", "memcpy", "stream loop", "cuMemcpy")


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def size_name(size: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def cell(values: list[float], digits: int = 3) -> str:
    if not values:
        return "–"
    med = statistics.median(values)
    return f"{med:.{digits}f} [{min(values):.{digits}f}–{max(values):.{digits}f}]"


def copylat_tables(results: Path) -> list[str]:
    # (direction, mode, size, column) -> per-round medians
    figures: dict[tuple[str, str, int, str], list[float]] = defaultdict(list)
    for path in sorted(results.glob("copylat-*.jsonl")):
        small = "small" in path.name
        for rec in records(path):
            if rec.get("tool") != "gdrcopy_copylat" or rec["test"] not in ROWS:
                continue
            # The small run owns sizes up to 64 KiB; the large one the rest.
            if not small and rec["size"] <= 65536:
                continue
            direction, column = ROWS[rec["test"]]
            figures[(direction, rec.get("mode", "b2b"), rec["size"], column)].append(rec["median_us"])
    lines = []
    for direction in ("CPU → GPU", "GPU → CPU"):
        for mode in ("b2b", "single"):
            sizes = sorted({k[2] for k in figures if k[0] == direction and k[1] == mode})
            if not sizes:
                continue
            lines += [
                f"\n### {direction}, {'calls back to back' if mode == 'b2b' else 'single calls'} (µs per call)\n",
                "| size | " + " | ".join(COLUMNS) + " | ours vs best other |",
                "| ---: | " + " | ".join("---:" for _ in COLUMNS) + " | ---: |",
            ]
            for size in sizes:
                cells = [figures.get((direction, mode, size, c), []) for c in COLUMNS]
                others = [statistics.median(v) for v in cells[1:] if v]
                ratio = f"{statistics.median(cells[0]) / min(others):.2f}×" if cells[0] and others else "–"
                lines.append(f"| {size_name(size)} | " + " | ".join(cell(v) for v in cells) + f" | {ratio} |")
    return lines


def poll_table(results: Path) -> list[str]:
    """Reads of whole lines back to back and single: the engine's own choice against each kind forced."""
    figures: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    sources = [("auto (chosen)", p) for p in results.glob("copylat-small-*.jsonl")]
    sources += [(p.name.split("-")[1], p) for p in results.glob("poll-*-*.jsonl")]
    for kind, path in sources:
        for rec in records(path):
            if rec.get("test") == "gdr_copy_from_mapping" and 64 <= rec["size"] <= 512:
                figures[(rec.get("mode", "b2b"), rec["size"], kind)].append(rec["median_us"])
    if not any(k[2] != "auto (chosen)" for k in figures):
        return []
    kinds = ("auto (chosen)", "lines", "blocks")
    lines = [
        "\n### Reads of whole lines, GDRCOPY_POLL_READS (µs per call)\n",
        "| mode | size | " + " | ".join(kinds) + " |",
        "| --- | ---: | " + " | ".join("---:" for _ in kinds) + " |",
    ]
    for mode, size in sorted({(k[0], k[1]) for k in figures}):
        lines.append(
            f"| {mode} | {size_name(size)} | " + " | ".join(cell(figures[(mode, size, k)]) for k in kinds) + " |"
        )
    return lines


def parallel_table(results: Path) -> list[str]:
    rates: dict[tuple[int, str], list[float]] = defaultdict(list)
    for path in sorted(results.glob("parallel-*-*.jsonl")):
        threads = int(path.name.split("-")[1])
        for rec in records(path):
            if rec.get("size") == 16 << 20 and rec["test"] in ("gdr_copy_to_mapping", "gdr_copy_from_mapping"):
                rates[(threads, ROWS[rec["test"]][0])].append((16 << 20) / rec["median_us"] / 1e3)
    if not rates:
        return []
    lines = ["\n### Parallel copies, 16 MiB (GB/s)\n", "| threads | CPU → GPU | GPU → CPU |", "| ---: | ---: | ---: |"]
    for threads in sorted({k[0] for k in rates}):
        lines.append(
            f"| {threads} | {cell(rates[(threads, 'CPU → GPU')], 2)} | {cell(rates[(threads, 'GPU → CPU')], 2)} |"
        )
    return lines


def pplat_table(results: Path) -> list[str]:
    trips: dict[str, list[float]] = defaultdict(list)
    for path in sorted(results.glob("pplat-*.jsonl")):
        variant = path.name[len("pplat-") :].rsplit("-", 1)[0]
        for rec in records(path):
            trips[variant].append(rec["median_us"])
    if not trips:
        return []
    lines = [
        "\n### pplat round trip (µs, median of bucket medians)\n",
        "| configuration | round trip |",
        "| --- | ---: |",
    ]
    for variant, values in sorted(trips.items()):
        lines.append(f"| `{variant.replace('_', ' ').strip()}` | {cell(values)} |")
    return lines


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    results = Path(sys.argv[1])
    lines = copylat_tables(results) + poll_table(results) + parallel_table(results) + pplat_table(results)
    if not lines:
        print(f"no results in {results}: expected copylat-*.jsonl, parallel-*.jsonl, pplat-*.jsonl", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
