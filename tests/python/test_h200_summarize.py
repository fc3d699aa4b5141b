"""tools/h200/summarize.py on real H200 results kept in the tree (no GPU needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools/h200/summarize.py"
RESULTS = ROOT / "tools/h200/results"


def summarize(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(path)], capture_output=True, text=True, check=False)


def test_builds_side_by_side_pair_ours_with_the_reference_round_by_round() -> None:
    run = summarize(RESULTS / "2026-12-03-ab-wait-vs-overlap")
    assert run.returncode == 0, run.stderr
    header = next(line for line in run.stdout.splitlines() if line.startswith("| figure |"))
    assert header == "| figure | size | `before` | `now` | `overlap` |"
    row = next(line for line in run.stdout.splitlines() if line.startswith("| ping-pong round trip (µs) | 16 B |"))
    # now's median of 9 rounds, and ours / NVIDIA's routines of the same process, round by round
    assert "2.128 [2.095–2.351]; ×0.51 [0.44–0.58]" in row.split("|")[4]


def test_paired_ratios_need_the_same_rounds() -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    import summarize as s  # noqa: PLC0415 - the script is not a package

    figures = {("median_us", "ours", 16): [2.0, 3.0], ("median_us", "reference", 16): [4.0, 3.0]}
    assert s.paired_ratios(figures, "median_us", 16, "reference") == [0.5, 1.0]
    figures[("median_us", "reference", 16)].append(1.0)
    assert s.paired_ratios(figures, "median_us", 16, "reference") == []


def test_a_folder_without_results_says_what_it_expected(tmp_path: Path) -> None:
    run = summarize(tmp_path)
    assert run.returncode == 1
    assert "expected copylat-*.jsonl" in run.stderr
