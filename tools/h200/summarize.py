#!/usr/bin/env python3
"""Medians and ranges over the rounds of one tools/h200/run.sh or pingpong.sh run, as Markdown tables.

    python3 tools/h200/summarize.py RESULTS_DIR [--plots DIR]
    python3 tools/h200/summarize.py AB_DIR          (a tools/h200/ab_libs.sh run)

Each figure is the median over rounds of that round's median (copylat, pplat
and pingpong report per-bucket medians); the range is the lowest and highest
round.  For an ab_libs.sh run (one folder per library build), the builds
side by side: ours per build, and ours against NVIDIA's routines paired
round by round (both in the same process).  gdrcopy_pplat's line modes (pplat-line-ROUND.jsonl) join pingpong.cu's
routines as one more column.  --plots draws the curves (SVG, matplotlib: `pip install matplotlib`
where it is missing) into DIR.
"""

from __future__ import annotations

import importlib
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
    kinds = tuple(k for k in ("auto (chosen)", "lines", "halves", "blocks") if any(f[2] == k for f in figures))
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


def pplat_trips(results: Path) -> dict[str, list[float]]:
    """pplat's flag ping-pong per configuration (pplat-CONFIGURATION-ROUND.jsonl): its round trips, one per round."""
    trips: dict[str, list[float]] = defaultdict(list)
    for path in sorted(results.glob("pplat-*.jsonl")):
        variant = path.name[len("pplat-") :].rsplit("-", 1)[0]
        for rec in records(path):
            if rec.get("test") == "pplat":  # the flag ping-pong; the line modes have tables of their own
                trips[variant].append(rec["median_us"])
    return trips


def pplat_table(results: Path) -> list[str]:
    trips = pplat_trips(results)
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


# pingpong.cu's read routines, in the tables' order, with their column names.
PINGPONG_ROUTINES = {
    "ours": "ours",
    "exported": "exported",
    "general": "ours, general path",
    "overlap": "ours, GDRCOPY_READ_WAIT=0",
    "reference": "reference",
    "loop16": "16 B loads",
    "loop32": "32 B loads",
    "loop64": "64 B loads",
    "memcpy": "memcpy",
    "pplat": "gdrcopy_pplat -L/-W",  # our benchmark's line modes (pplat_line.c), same protocol
}
PINGPONG_SIZES = (16, 32, 64, 128)
# pingpong.sh's runs of "ours" under another setting, by label: each is a column of its own.
VARIANT_ROUTINES = {"general_path": "general", "read_overlap": "overlap"}


def pingpong_figures(results: Path) -> tuple[dict[tuple[str, str, int], list[float]], dict[tuple[str, int], str]]:
    """(figure, routine, size) -> per-round values; (routine, size) -> why it was not run."""
    figures: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    not_run: dict[tuple[str, int], str] = {}
    path = results / "pingpong.jsonl"
    for rec in records(path) if path.exists() else []:
        # The shapes with the answer in one line of a larger entry have tables of their own (summarize_shapes.py).
        if rec.get("tool") != "pingpong" or "size" not in rec or "/" in rec.get("shape", ""):
            continue
        routine = VARIANT_ROUTINES.get(rec["variant"], rec["routine"])
        if "not_run" in rec:
            not_run[(routine, rec["size"])] = rec["not_run"]
            continue
        fields = {
            "pingpong": ("median_us", "polls_per_trip"),
            "torn": ("torn_fraction", "values_per_us", "us_per_read"),
            "reads": ("b2b_us", "single_us"),
        }.get(rec["test"], ())
        for field in fields:
            figures[(field, routine, rec["size"])].append(rec[field])
    # gdrcopy_pplat -L/-W, one run per round (pplat-line-ROUND.jsonl).
    line_fields = {"line_pingpong": ("median_us", "polls_per_trip"), "line_torn": ("torn_fraction", "values_per_us")}
    for line_path in sorted(results.glob("pplat-line-*.jsonl")):
        for rec in records(line_path):
            if "/" in rec.get("shape", ""):
                continue
            for field in line_fields.get(rec.get("test", ""), ()):
                figures[(field, "pplat", rec["size"])].append(rec[field])
    return figures, not_run


def pingpong_table(
    title: str,
    field: str,
    figures: dict[tuple[str, str, int], list[float]],
    not_run: dict[tuple[str, int], str],
    digits: int = 3,
) -> list[str]:
    routines = [r for r in PINGPONG_ROUTINES if any((field, r, size) in figures for size in PINGPONG_SIZES)]
    if not routines:
        return []
    lines = [
        f"\n### {title}\n",
        "| size | " + " | ".join(PINGPONG_ROUTINES[r] for r in routines) + " |",
        "| ---: | " + " | ".join("---:" for _ in routines) + " |",
    ]
    for size in PINGPONG_SIZES:
        cells = []
        for routine in routines:
            values = figures.get((field, routine, size), [])
            why = not_run.get((routine, size))
            cells.append(cell(values, digits) if values else f"not run: {why}" if why else "–")
        lines.append(f"| {size} B | " + " | ".join(cells) + " |")
    return lines


def line_summary_table(results: Path) -> list[str]:
    """gdrcopy_pplat -L against the fastest routine of pingpong.cu in the same run, per size."""
    figures, _ = pingpong_figures(results)
    lines = []
    for size in PINGPONG_SIZES:
        ours = figures.get(("median_us", "pplat", size))
        others = {
            r: statistics.median(v)
            for r in PINGPONG_ROUTINES
            if r != "pplat" and (v := figures.get(("median_us", r, size)))
        }
        if not ours or not others:
            continue
        best = min(others, key=lambda r: others[r])
        torn = figures.get(("torn_fraction", "pplat", size), [])
        lines.append(
            f"| {size} B | {cell(ours)} | {PINGPONG_ROUTINES[best]}: {others[best]:.3f} | "
            f"{statistics.median(ours) / others[best]:.3f} | {cell(torn, 4) if torn else '–'} |"
        )
    if not lines:
        return []
    return [
        "\n### gdrcopy_pplat -L against the fastest routine of the same run\n",
        "| size | pplat -L round trip (µs) | fastest other (median µs) | ratio | pplat -W torn fraction |",
        "| ---: | ---: | --- | ---: | ---: |",
        *lines,
    ]


def floor_table(results: Path) -> list[str]:
    """pplat's round trip (each kernel it ran with) against the hand-written 8-byte flag ping-pong of the same run."""
    path = results / "pingpong.jsonl"
    floor = [r["median_us"] for r in records(path) if r.get("test") == "floor"] if path.exists() else []
    trips = pplat_trips(results)
    if not floor or not trips:
        return []
    lines = [
        "\n### gdrcopy_pplat against the floor (µs per round trip)\n",
        "| floor: 8-byte flag each way | `gdrcopy_pplat` | round trip | pplat / floor |",
        "| ---: | --- | ---: | ---: |",
    ]
    for variant, values in sorted(trips.items()):
        ratio = statistics.median(values) / statistics.median(floor)
        lines.append(f"| {cell(floor)} | `{variant}` | {cell(values)} | {ratio:.3f} |")
    return lines


def pingpong_tables(results: Path) -> list[str]:
    figures, not_run = pingpong_figures(results)
    if not figures:
        return []
    return (
        pingpong_table("Ping-pong round trip through GPU memory (µs)", "median_us", figures, not_run)
        + pingpong_table("Polls per round trip", "polls_per_trip", figures, not_run, 2)
        + pingpong_table(
            "Torn reads while the GPU rewrites the line once a µs (fraction of reads)",
            "torn_fraction",
            figures,
            not_run,
            4,
        )
        + pingpong_table("Distinct values seen per µs under that writer", "values_per_us", figures, not_run, 2)
        + pingpong_table("Reads back to back, nothing writing (µs per call)", "b2b_us", figures, not_run)
        + pingpong_table("Single reads, nothing writing (µs per call)", "single_us", figures, not_run)
        + line_summary_table(results)
    )


def paired_ratios(figures: dict[tuple[str, str, int], list[float]], field: str, size: int, other: str) -> list[float]:
    """ours / other, round by round (each round is one process: both saw the same machine)."""
    ours, theirs = figures.get((field, "ours", size), []), figures.get((field, other, size), [])
    return [a / b for a, b in zip(ours, theirs) if b] if len(ours) == len(theirs) else []


def builds_tables(results: Path) -> list[str]:
    """An ab_libs.sh run: ping-pong and back-to-back reads of ours per build, in one table."""
    builds = sorted(p.parent for p in results.glob("*/pingpong.jsonl"))
    if not builds:
        return []
    figures = {b.name: pingpong_figures(b)[0] for b in builds}
    rows = (
        ("ping-pong round trip (µs)", "median_us", 3),
        ("polls per round trip", "polls_per_trip", 2),
        ("reads back to back, nothing writing (µs)", "b2b_us", 3),
    )
    lines = [
        "\n### Builds side by side: ours, and ours / NVIDIA's routines paired round by round\n",
        "| figure | size | " + " | ".join(f"`{b}`" for b in figures) + " |",
        "| --- | ---: | " + " | ".join("---:" for _ in figures) + " |",
    ]
    for title, field, digits in rows:
        for size in PINGPONG_SIZES:
            cells = []
            for fig in figures.values():
                values = fig.get((field, "ours", size), [])
                ratios = paired_ratios(fig, field, size, "reference") if field != "polls_per_trip" else []
                text = cell(values, digits) if values else "–"
                cells.append(f"{text}; ×{cell(ratios, 2)}" if ratios else text)
            lines.append(f"| {title} | {size} B | " + " | ".join(cells) + " |")
    return lines


def draw_plots(results: Path, out: Path) -> list[Path]:
    """Latency against size with the rounds' range as a band, one picture per figure; SVG files written."""
    matplotlib = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "gdrcopy"  # the same data draws the same file
    plt = importlib.import_module("matplotlib.pyplot")
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    figures, _ = pingpong_figures(results)
    charts = [
        ("pingpong-round-trip", "median_us", "ping-pong round trip (µs)", False),
        ("pingpong-torn", "torn_fraction", "torn reads (fraction), GPU rewriting once a µs", False),
        ("reads-b2b", "b2b_us", "reads back to back (µs per call)", True),
        ("reads-single", "single_us", "single reads (µs per call)", False),
    ]
    for name, field, label, log in charts:
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        for index, (routine, column) in enumerate(PINGPONG_ROUTINES.items()):
            sizes = [s for s in PINGPONG_SIZES if figures.get((field, routine, s))]
            if not sizes:
                continue
            vals = [figures[(field, routine, s)] for s in sizes]
            color = f"C{index}"  # one colour per routine in every picture
            ax.plot(sizes, [statistics.median(v) for v in vals], marker="o", label=column, color=color)
            ax.fill_between(sizes, [min(v) for v in vals], [max(v) for v in vals], alpha=0.2, color=color)
        ax.set_xscale("log", base=2)
        if log:
            ax.set_yscale("log")
        ax.set_xticks(list(PINGPONG_SIZES), [f"{s} B" for s in PINGPONG_SIZES])
        ax.set_ylabel(label)
        ax.set_xlabel("line size")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = out / f"{name}.svg"
        fig.savefig(path, metadata={"Date": None})
        plt.close(fig)
        written.append(path)
    # copylat: ours against the other routines per direction and mode, 1 B and up.
    lat: dict[tuple[str, str, str, int], list[float]] = defaultdict(list)
    for path in sorted(results.glob("copylat-small-*.jsonl")):
        for rec in records(path):
            if rec.get("tool") == "gdrcopy_copylat" and rec["test"] in ROWS:
                direction, column = ROWS[rec["test"]]
                lat[(direction, rec.get("mode", "b2b"), column, rec["size"])].append(rec["median_us"])
    # NVIDIA's read routines, where pingpong.cu timed them in the same run (16-128 B reads).
    for size in PINGPONG_SIZES:
        for mode, field in (("b2b", "b2b_us"), ("single", "single_us")):
            for value in figures.get((field, "reference", size), []):
                lat[("GPU → CPU", mode, "reference", size)].append(value)
    if lat:
        fig, axes = plt.subplots(2, 2, figsize=(9.6, 6.4), sharex=True)
        for row, direction in enumerate(("CPU → GPU", "GPU → CPU")):
            for col, mode in enumerate(("b2b", "single")):
                ax = axes[row][col]
                for index, column in enumerate((*COLUMNS, "reference")):
                    sizes = sorted(k[3] for k in lat if k[:3] == (direction, mode, column))
                    if not sizes:
                        continue
                    vals = [lat[(direction, mode, column, s)] for s in sizes]
                    color = f"C{index}"  # the same colour for a routine in every panel
                    ax.plot(sizes, [statistics.median(v) for v in vals], marker=".", label=column, color=color)
                    ax.fill_between(sizes, [min(v) for v in vals], [max(v) for v in vals], alpha=0.2, color=color)
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                ax.set_title(f"{direction}, {'back to back' if mode == 'b2b' else 'single calls'}", fontsize=9)
                ax.set_ylabel("µs per call")
                ax.grid(alpha=0.3)
                ax.legend(fontsize=7)
        for ax in axes[1]:
            ax.set_xlabel("bytes")
        fig.tight_layout()
        path = out / "copylat.svg"
        fig.savefig(path, metadata={"Date": None})
        plt.close(fig)
        written.append(path)
    return written


def main() -> int:
    args = sys.argv[1:]
    plots = None
    if len(args) == 3 and args[1] == "--plots":
        plots = Path(args[2])
        args = args[:1]
    if len(args) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    results = Path(args[0])
    lines = (
        copylat_tables(results)
        + poll_table(results)
        + parallel_table(results)
        + pplat_table(results)
        + pingpong_tables(results)
        + floor_table(results)
        + builds_tables(results)
    )
    if not lines:
        print(
            f"no results in {results}: expected copylat-*.jsonl, parallel-*.jsonl, pplat-*.jsonl or pingpong.jsonl",
            file=sys.stderr,
        )
        return 1
    print("\n".join(lines))
    if plots is not None:
        try:
            for path in draw_plots(results, plots):
                print(f"drew {path}", file=sys.stderr)
        except ModuleNotFoundError as e:
            print(f"no plots: {e.name} is missing; pip install matplotlib, then run again", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
