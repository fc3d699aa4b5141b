"""tools/h200/summarize_shapes.py and pingpong_shapes.sh's checks, on made-up and on kept H200 results (no GPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools/h200/summarize_shapes.py"
RESULTS = ROOT / "tools/h200/results"
SHAPES = ("16", "32", "64", "128", "128/first", "128/last", "256", "256/first", "256/last")


def summarize(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(path)], capture_output=True, text=True, check=False)


def pingpong(variant: str, routine: str, shape: str, round_no: int, us: float, torn: float = 0.0) -> list[str]:
    """The records pingpong.cu prints for one routine, shape and round: its round trip and its torn reads."""
    size = int(shape.split("/")[0])
    base = {"tool": "pingpong", "variant": variant, "round": round_no, "routine": routine, "size": size, "shape": shape}
    trip = {**base, "test": "pingpong", "median_us": us, "polls_per_trip": 2.0}
    reads = {**base, "test": "torn", "torn_fraction": torn, "apart_fraction": 0.0, "values_per_us": 0.9}
    return [json.dumps(trip), json.dumps(reads)]


def setup(variant: str, round_no: int, **env: str) -> str:
    return json.dumps({"tool": "pingpong", "test": "setup", "variant": variant, "round": round_no, **env})


def made_up_run(folder: Path) -> None:
    """Three rounds: the defaults with NVIDIA's routines, two poll candidates, one wait candidate."""
    lines = []
    for r in (1, 2, 3):
        lines.append(setup("default", r))
        lines.append(setup("halves", r, poll_reads="halves"))
        lines.append(setup("lines_wait", r, poll_reads="lines_wait"))
        lines.append(setup("wait2", r, read_wait="2"))
        for shape in SHAPES:
            # Round 3 is a slow spell for everyone: pairing round by round keeps the ratios.
            slow = 2.0 if r == 3 else 1.0
            lines += pingpong("default", "ours", shape, r, 2.2 * slow)
            lines += pingpong("default", "reference", shape, r, 2.0 * slow, torn=0.3 if shape != "16" else 0.0)
            lines += pingpong("default", "loop32", shape, r, 2.5 * slow)
        for shape in SHAPES[3:]:
            lines += pingpong("halves", "ours", shape, r, 1.8 * (2.0 if r == 3 else 1.0), torn=0.2)
            lines += pingpong("lines_wait", "ours", shape, r, 1.9 * (2.0 if r == 3 else 1.0))
        for shape in SHAPES[:3]:
            lines += pingpong("wait2", "ours", shape, r, 2.21 * (2.0 if r == 3 else 1.0))
        for size, ours, wait2 in ((16, 1.0, 0.5), (32, 0.9, 0.45)):
            for variant, us in (("default", ours), ("wait2", wait2)):
                rec = {"tool": "pingpong", "test": "reads", "variant": variant, "round": r, "routine": "ours"}
                lines.append(json.dumps({**rec, "size": size, "b2b_us": us, "single_us": 1.1, "ring_us": us}))
    (folder / "pingpong.jsonl").write_text("\n".join(lines) + "\n")
    line = {"tool": "gdrcopy_pplat", "test": "line_pingpong", "size": 128, "shape": "128/first", "median_us": 2.1}
    (folder / "pplat-line-1.jsonl").write_text(json.dumps({**line, "round": 1, "polls_per_trip": 2.0}) + "\n")


def test_each_shape_has_its_table_and_the_candidates_are_paired_round_by_round(tmp_path: Path) -> None:
    made_up_run(tmp_path)
    run = summarize(tmp_path)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    for shape in SHAPES:
        assert f"\n### {shape}: the answer in " in out
    first = out.split("\n### 128/first:", 1)[1].split("\n### ", 1)[0]
    # Median [range] over the three rounds, and the benchmark's own line modes in the same table.
    assert "| ours (defaults) | 2.200 [2.200–4.400] | 2.00 [2.00–2.00] | 0.0000 [0.0000–0.0000] |" in first
    assert "| NVIDIA's routines | 2.000 [2.000–4.000] | 2.00 [2.00–2.00] | 0.3000 [0.3000–0.3000] |" in first
    assert "| `gdrcopy_pplat -L/-W` | 2.100 [2.100–2.100] |" in first
    polls = out.split("### GDRCOPY_POLL_READS", 1)[1]
    # halves is faster than lines_wait but tears a line: lines_wait is the choice, 1.9 / 2.0 in every round.
    assert "| lines_wait: GDRCOPY_POLL_READS=lines_wait | 0.950 [0.950–0.950] |" in polls
    assert "**lines_wait** (worst ratio 0.950)" in polls
    assert '`GDR_POLL_READS_DEFAULT` to `"lines_wait"`' in polls
    waits = out.split("### GDRCOPY_READ_WAIT", 1)[1].split("### GDRCOPY_POLL_READS", 1)[0]
    # wait2's ping-pong is within 2 % of the defaults' and its back-to-back reads cost half.
    assert "**default** (worst ratio 1.100); already the library's default" in waits
    assert "Cheapest back-to-back 16/32 B reads among those within 2 % of it: **wait2** (0.500 µs" in waits


def test_an_older_run_without_shapes_counts_as_whole_entries() -> None:
    run = summarize(RESULTS / "2026-12-03-polling-7")
    assert run.returncode == 0, run.stderr
    assert "\n### 64: the answer in the whole 64 B line\n" in run.stdout
    assert "\n### 128/first" not in run.stdout


def test_a_folder_without_records_says_so(tmp_path: Path) -> None:
    run = summarize(tmp_path)
    assert run.returncode == 1
    assert "no pingpong.cu records" in run.stderr


def test_the_run_script_refuses_a_candidate_it_cannot_set_before_building(tmp_path: Path) -> None:
    env = {**os.environ, "CANDIDATES": "x:GDRCOPY_COPY_ROUTINE=sse", "RESULTS": str(tmp_path / "r")}
    env.pop("OUT", None)
    run = subprocess.run(
        ["bash", str(ROOT / "tools/h200/pingpong_shapes.sh")], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert run.returncode == 2
    assert "is not LABEL:GDRCOPY_READ_WAIT=VALUE or LABEL:GDRCOPY_POLL_READS=VALUE" in run.stderr
    assert not (tmp_path / "r" / "build.log").exists()
