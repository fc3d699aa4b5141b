#!/usr/bin/env python3
"""The judge's tables from what tools/h200/consumers_optin.sh recorded (standard library only).

    optin_summary.py CELLS.tsv [LATENCY.txt]

CELLS.tsv has one line per run of a consumer (tab-separated):
    consumer  version  setting  optin  rc  uses  said  command
where optin is "control" (no libgdrapi on the path), "off" (ours, not asked
for vulkan) or "on" (ours, GDRCOPY_BACKEND=vulkan), uses is 1 when the run
used GDRCopy (the consumer said so, or our library opened a backend in it),
and said is the line the consumer printed about it.  A run's outcome is
"uses GDRCopy" (rc 0, used it), "runs without" (rc 0, did not) or "fails".
A cell (consumer, version, setting, opt-in) passes when our library's run
does at least what the control did: it does not fail, or the control failed
too.  LATENCY.txt holds ucx_copy_lat's "UCX-LAT: tl=... op=... size=...
round=... us=..." lines; each figure is the median over the rounds with its
range.  Prints Markdown; exits 1 when a cell without the opt-in fails (that
is the invariant of issue 35), 0 otherwise: cells that fail only with the
opt-in are the documented unsafe ones.
"""

from __future__ import annotations

import re
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

USES, WITHOUT, FAILS = "uses GDRCopy", "runs without", "fails"
OPTINS = {"control": "control (no libgdrapi)", "off": "ours, no opt-in", "on": "ours, GDRCOPY_BACKEND=vulkan"}
LAT = re.compile(r"UCX-LAT: tl=(\S+) op=(\S+) size=(\d+) round=(\d+) us=([0-9.]+)")


@dataclass(frozen=True)
class Run:
    consumer: str
    version: str
    setting: str
    optin: str
    rc: int
    uses: bool
    said: str
    command: str

    @property
    def outcome(self) -> str:
        if self.rc != 0:
            return FAILS
        return USES if self.uses else WITHOUT


def read_cells(text: str) -> list[Run]:
    runs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 8 or fields[3] not in OPTINS or not re.fullmatch(r"-?\d+", fields[4]):
            raise ValueError(
                f"line {number}: expected 8 tab-separated fields (optin control|off|on, rc a number): {line!r}"
            )
        consumer, version, setting, optin, rc, uses, said, command = fields
        runs.append(Run(consumer, version, setting, optin, int(rc), uses == "1", said, command))
    return runs


def verdicts(runs: list[Run]) -> list[tuple[Run, str]]:
    """Each run of ours with "pass"/"FAIL" against its control; a control's own row says "control"."""
    controls = {(r.consumer, r.version, r.setting): r for r in runs if r.optin == "control"}
    out = []
    for run in runs:
        if run.optin == "control":
            out.append((run, "control"))
            continue
        control = controls.get((run.consumer, run.version, run.setting))
        if control is None:
            out.append((run, "no control"))
        elif run.outcome != FAILS or control.outcome == FAILS:
            out.append((run, "pass"))
        else:
            out.append((run, "FAIL"))
    return out


def cells_table(runs: list[Run]) -> str:
    lines = [
        "| consumer | version | setting | opt-in | outcome | verdict | what it printed | command |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run, verdict in verdicts(runs):
        said = run.said.replace("|", "\\|") or "-"
        lines.append(
            f"| {run.consumer} | {run.version} | {run.setting} | {OPTINS[run.optin]} | {run.outcome} | {verdict}"
            f" | {said} | `{run.command}` |"
        )
    return "\n".join(lines)


def latency_table(text: str) -> str:
    """Median [min-max] per transport, operation and size over the rounds, gdr_copy beside cuda_copy."""
    samples: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for tl, op, size, _, us in LAT.findall(text):
        samples[(tl, op, int(size))].append(float(us))
    if not samples:
        return "no UCX-LAT figures"
    rounds = max(len(v) for v in samples.values())

    def cell(key: tuple[str, str, int]) -> str:
        values = samples.get(key)
        if not values:
            return "–"
        return f"{statistics.median(values):.2f} [{min(values):.2f}–{max(values):.2f}]"

    lines = [
        f"µs per call, median [range] of {rounds} interleaved rounds",
        "",
        "| size | put gdr_copy | put cuda_copy | get gdr_copy | get cuda_copy |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for size in sorted({k[2] for k in samples}):
        row = [cell((tl, op, size)) for op in ("put", "get") for tl in ("gdr_copy", "cuda_copy")]
        label = f"{size // 1024} KiB" if size >= 1024 else f"{size} B"
        lines.append(f"| {label} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    runs = read_cells(Path(argv[1]).read_text())
    print(cells_table(runs))
    if len(argv) == 3:
        print()
        print(latency_table(Path(argv[2]).read_text()))
    broken = [r for r, v in verdicts(runs) if v == "FAIL" and r.optin == "off"]
    for run in broken:
        print(f"invariant broken: {run.consumer} {run.version} {run.setting} fails without the opt-in", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
