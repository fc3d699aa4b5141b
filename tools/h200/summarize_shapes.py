#!/usr/bin/env python3
"""Shape by shape, every routine and candidate of one tools/h200/pingpong_shapes.sh run (issue 39), as Markdown.

    python3 tools/h200/summarize_shapes.py RESULTS_DIR

Reads RESULTS_DIR/pingpong.jsonl (tools/h200/pingpong.cu: each record's
variant is the candidate's label, "default" for the library's defaults) and
RESULTS_DIR/pplat-line-ROUND.jsonl (gdrcopy_pplat -L/-W).  Each figure is the
median over rounds with the lowest and highest round.  Per shape: round trip,
polls per round trip, torn reads (a 64-byte line holding two writes) and
apart reads (lines of two writes, each whole) under a GPU writer; then reads
with nothing writing; then the candidates against the routines beside them,
paired round by round (a candidate's round trip over the fastest of NVIDIA's
routines, the plain loops and memcpy in the same round), and which one the
run would make the default.  Records of older runs (no shape) count as the
whole entry of their size.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

SHAPES = {  # name -> what it is
    "16": "the whole 16 B entry",
    "32": "the whole 32 B entry",
    "64": "the whole 64 B line",
    "128": "every line of a 128 B entry",
    "128/first": "the first 64-byte line of a 128 B entry (the second unchanged)",
    "128/last": "the last 64-byte line of a 128 B entry",
    "256": "every line of a 256 B entry",
    "256/first": "the first 64-byte line of a 256 B entry",
    "256/last": "the last 64-byte line of a 256 B entry",
}
OTHERS = {  # the routines ours is held against -> their column
    "reference": "NVIDIA's routines",
    "loop16": "16-byte loads",
    "loop32": "32-byte loads",
    "loop64": "64-byte loads",
    "loop64plain": "64-byte ordinary loads",
    "loop64back": "64-byte loads, last line first",
    "memcpy": "memcpy",
}
OURS = ("ours", "exported")
# Which variable each family of candidates sets, the shapes it changes, and the #define that holds its default.
FAMILIES = {
    "GDRCOPY_READ_WAIT": (("16", "32", "64"), "GDR_READ_WAIT_DEFAULT"),
    "GDRCOPY_POLL_READS": (("128", "128/first", "128/last", "256", "256/first", "256/last"), "GDR_POLL_READS_DEFAULT"),
}

Figures = dict[tuple[str, str, str, str], dict[int, float]]  # (field, routine, variant, shape) -> round -> value


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def shape_of(rec: dict[str, Any]) -> str:
    return str(rec.get("shape") or rec["size"])


def load(results: Path) -> tuple[Figures, dict[tuple[str, str, str], str], dict[str, str]]:
    """The figures; (routine, variant, shape) -> why it was not run; variant -> the setting it ran with."""
    figures: Figures = defaultdict(dict)
    not_run: dict[tuple[str, str, str], str] = {}
    settings: dict[str, str] = {}
    fields = {
        "pingpong": ("median_us", "polls_per_trip"),
        "torn": ("torn_fraction", "apart_fraction", "values_per_us"),
        "reads": ("b2b_us", "single_us", "ring_us"),
    }
    path = results / "pingpong.jsonl"
    for rec in records(path) if path.exists() else []:
        if rec.get("tool") != "pingpong":
            continue
        variant, test = rec.get("variant", "default"), rec.get("test", "")
        if test == "setup":
            setting = [f"GDRCOPY_{k.upper()}={v}" for k in ("read_wait", "poll_reads") if (v := rec.get(k))]
            settings[variant] = ", ".join(setting) or "defaults"
            continue
        if "not_run" in rec:
            not_run[(rec["routine"], variant, shape_of(rec))] = rec["not_run"]
            continue
        for field in fields.get(test, ()):
            if field in rec:
                figures[(field, rec["routine"], variant, shape_of(rec))][int(rec["round"])] = float(rec[field])
    line_fields = {"line_pingpong": ("median_us", "polls_per_trip"), "line_torn": ("torn_fraction",)}
    for line_path in sorted(results.glob("pplat-line-*.jsonl")):
        round_no = int(line_path.stem.rsplit("-", 1)[1])
        for rec in records(line_path):
            for field in line_fields.get(rec.get("test", ""), ()):
                figures[(field, "pplat", "default", shape_of(rec))][round_no] = float(rec[field])
    return figures, not_run, settings


def cell(values: dict[int, float] | None, digits: int = 3) -> str:
    if not values:
        return "–"
    v = list(values.values())
    return f"{statistics.median(v):.{digits}f} [{min(v):.{digits}f}–{max(v):.{digits}f}]"


def columns(figures: Figures, field: str, shapes: list[str]) -> list[tuple[str, str]]:
    """(routine, variant) pairs with figures for this field in any of these shapes: ours first, then the others."""
    present = {(k[1], k[2]) for k in figures if k[0] == field and k[3] in shapes}
    variants = sorted({v for _, v in present if v != "default"})
    order = [(r, "default") for r in OURS] + [(r, v) for v in variants for r in OURS]
    order += [(r, "default") for r in OTHERS] + [("pplat", "default")]
    return [c for c in order if c in present]


def column_name(routine: str, variant: str, settings: dict[str, str]) -> str:
    if routine == "pplat":
        return "`gdrcopy_pplat -L/-W`"
    if routine in OTHERS:
        return OTHERS[routine]
    if variant == "default":
        return f"{routine} (defaults)"
    return f"{routine}, {variant} ({settings.get(variant, variant)})"


def shape_tables(figures: Figures, not_run: dict[tuple[str, str, str], str], settings: dict[str, str]) -> list[str]:
    lines = []
    for shape, what in SHAPES.items():
        cols = columns(figures, "median_us", [shape])
        if not cols:
            continue
        lines += [
            f"\n### {shape}: the answer in {what}\n",
            "| routine | round trip (µs) | polls per round trip | torn (a line of two writes) | apart (lines of two writes) |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for routine, variant in cols:
            why = not_run.get((routine, variant, shape))
            trip = figures.get(("median_us", routine, variant, shape))
            cells = [
                cell(trip) if trip else f"not run: {why}" if why else "–",
                cell(figures.get(("polls_per_trip", routine, variant, shape)), 2),
                cell(figures.get(("torn_fraction", routine, variant, shape)), 4),
                cell(figures.get(("apart_fraction", routine, variant, shape)), 4),
            ]
            lines.append(f"| {column_name(routine, variant, settings)} | " + " | ".join(cells) + " |")
    return lines


def reads_tables(figures: Figures, settings: dict[str, str]) -> list[str]:
    titles = {
        "b2b_us": "Reads back to back on one address, nothing writing (µs per call)",
        "ring_us": "Reads back to back over 8 distinct entries in turn, nothing writing (µs per call)",
        "single_us": "Single reads, nothing writing (µs per call)",
    }
    lines = []
    for field, title in titles.items():
        sizes = sorted({int(k[3]) for k in figures if k[0] == field}, key=int)
        cols = columns(figures, field, [str(s) for s in sizes])
        if not cols:
            continue
        lines += [
            f"\n### {title}\n",
            "| routine | " + " | ".join(f"{s} B" for s in sizes) + " |",
            "| --- | " + " | ".join("---:" for _ in sizes) + " |",
        ]
        for routine, variant in cols:
            cells = [cell(figures.get((field, routine, variant, str(s)))) for s in sizes]
            lines.append(f"| {column_name(routine, variant, settings)} | " + " | ".join(cells) + " |")
    return lines


def best_other(figures: Figures, shape: str, round_no: int) -> tuple[float, str] | None:
    """The fastest round trip of NVIDIA's routines, the plain loops and memcpy in this round, and whose."""
    times = [
        (v[round_no], r) for r in OTHERS if (v := figures.get(("median_us", r, "default", shape))) and round_no in v
    ]
    return min(times) if times else None


def paired(figures: Figures, routine: str, variant: str, shape: str) -> list[float]:
    """Round by round: this routine's round trip over the fastest other routine's of the same round."""
    ratios = []
    for round_no, value in sorted(figures.get(("median_us", routine, variant, shape), {}).items()):
        if (best := best_other(figures, shape, round_no)) is not None:
            ratios.append(value / best[0])
    return ratios


def torn_max(figures: Figures, routine: str, variant: str, shapes: tuple[str, ...]) -> float:
    values = [max(v.values()) for s in shapes if (v := figures.get(("torn_fraction", routine, variant, s)))]
    return max(values, default=0.0)


def candidate_tables(figures: Figures, settings: dict[str, str]) -> list[str]:
    lines = [
        "\n## Candidates\n",
        "Each cell: ours (`gdr_copy_from_mapping`) with that setting, its round trip over the fastest of NVIDIA's",
        "routines, the plain 16/32/64-byte loads and memcpy in the same round, median [range] of the rounds",
        "(below 1: ours is faster). *torn*: the most reads of one line that mixed two writes in any round.",
    ]
    for variable, (shapes, define) in FAMILIES.items():
        variants = ["default"] + sorted(v for v, s in settings.items() if s.startswith(f"{variable}="))
        variants = [v for v in variants if any(("median_us", "ours", v, s) in figures for s in shapes)]
        if not variants:
            continue
        extra = ("16", "32") if variable == "GDRCOPY_READ_WAIT" else ()
        header = ["setting", *shapes, "worst", "torn", *(f"back to back {s} B (µs)" for s in extra)]
        lines += [
            f"\n### {variable}: the {', '.join(shapes)} shapes\n",
            "| " + " | ".join(header) + " |",
            "| --- |" + " ---: |" * (len(header) - 1),
        ]
        verdicts: list[tuple[float, str]] = []
        prices: dict[str, list[float]] = {}
        for variant in variants:
            ratios = {s: paired(figures, "ours", variant, s) for s in shapes}
            medians = [statistics.median(r) for r in ratios.values() if r]
            worst = max(medians) if medians else float("nan")
            torn = torn_max(figures, "ours", variant, shapes)
            cells = [f"{statistics.median(r):.3f} [{min(r):.3f}–{max(r):.3f}]" if r else "–" for r in ratios.values()]
            b2b = [cell(figures.get(("b2b_us", "ours", variant, s))) for s in extra]
            name = settings.get(variant, "defaults") if variant != "default" else "defaults"
            lines.append("| " + " | ".join([f"{variant}: {name}", *cells, f"{worst:.3f}", f"{torn:.4f}", *b2b]) + " |")
            if medians and len(medians) == len(shapes) and torn == 0:
                verdicts.append((worst, variant))
                prices[variant] = [
                    statistics.median(v.values()) for s in extra if (v := figures.get(("b2b_us", "ours", variant, s)))
                ]
        if verdicts:
            worst, winner = min(verdicts)
            how = (
                "already the library's default"
                if winner == "default"
                else f"to make it the default, set `{define}` to "
                f'`"{settings.get(winner, "").split("=", 1)[-1]}"` in `libgdrapi/src/copy_fast.h`'
            )
            lines.append(f"\nFastest with no torn line in these shapes: **{winner}** (worst ratio {worst:.3f}); {how}.")
            if worst > 1:
                lines.append("It is still slower than another routine in some shape (a ratio above 1).")
            # The wait's price (issue 39, item 3): among settings whose ping-pong is within 2 % of the best, the
            # cheapest back-to-back reads of 16 and 32 B.
            cheap = [
                (max(prices[v]), v) for w, v in verdicts if extra and w <= worst * 1.02 and len(prices.get(v, [])) == 2
            ]
            if cheap:
                price, thrifty = min(cheap)
                lines.append(
                    f"Cheapest back-to-back 16/32 B reads among those within 2 % of it: **{thrifty}** "
                    f"({price:.3f} µs a read at worst)."
                )
        else:
            lines.append("\nNo setting ran every shape of this family without a torn line.")
    return lines


def summary(results: Path) -> list[str]:
    figures, not_run, settings = load(results)
    if not figures:
        raise SystemExit(f"summarize_shapes: no pingpong.cu records in {results}/pingpong.jsonl")
    head = ["# Shapes of a poll (issue 39)"]
    gpu = results / "gpu.txt"
    if gpu.exists():
        head += ["", "```", gpu.read_text().strip(), "```"]
    head += ["", "Variants: " + "; ".join(f"`{v}`: {s}" for v, s in sorted(settings.items()))]
    return (
        head
        + shape_tables(figures, not_run, settings)
        + reads_tables(figures, settings)
        + candidate_tables(figures, settings)
    )


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    print("\n".join(summary(Path(sys.argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
