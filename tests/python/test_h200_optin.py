"""tools/h200/optin_summary.py, issue 35's judge, on synthetic records (no GPU needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools/h200/optin_summary.py"

# NCCL 2.28.9 with cuMem off, as the H200 printed it before the fix (off failed) and after (off passes).
CONTROL = "nccl\t2.28.9\tNCCL_CUMEM_ENABLE=0\tcontrol\t0\t0\tFailed to open libgdrapi.so;nccl-check: 9 sizes, PASS;\tx"
OFF_OK = "nccl\t2.28.9\tNCCL_CUMEM_ENABLE=0\toff\t0\t0\tnccl-check: 9 sizes, PASS;\tx"
OFF_BROKEN = "nccl\t2.28.9\tNCCL_CUMEM_ENABLE=0\toff\t1\t1\tgdr_pin_buffer(addr 0x7f, size 1048576) failed: 22;\tx"
ON_FAILS = "nccl\t2.28.9\tNCCL_CUMEM_ENABLE=0\ton\t1\t1\tGDRCOPY enabled library 2.6 driver 2.6;ncclSystemError;\tx"
ON_USES = "nccl\t2.28.9\tcuMem default\ton\t0\t1\tGDRCOPY enabled library 2.6 driver 2.6;\tNCCL_GDRCOPY_ENABLE=1 nccl_check.py"
CONTROL_DEFAULT = "nccl\t2.28.9\tcuMem default\tcontrol\t0\t0\tFailed to open libgdrapi.so;\tx"


def summarize(tmp_path: Path, cells: list[str], latency: str | None = None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "cells.tsv").write_text("\n".join(cells) + "\n")
    argv = [sys.executable, str(SCRIPT), str(tmp_path / "cells.tsv")]
    if latency is not None:
        (tmp_path / "latency.txt").write_text(latency)
        argv.append(str(tmp_path / "latency.txt"))
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def rows(out: str) -> dict[tuple[str, str], list[str]]:
    table = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if len(cells) == 8 and cells[0] == "nccl":
            table[(cells[2], cells[3])] = cells
    return table


def test_a_cell_passes_when_ours_does_what_the_control_does(tmp_path: Path) -> None:
    run = summarize(tmp_path, [CONTROL, OFF_OK, ON_FAILS, CONTROL_DEFAULT, ON_USES])
    assert run.returncode == 0, run.stderr
    table = rows(run.stdout)
    off = table[("NCCL_CUMEM_ENABLE=0", "ours, no opt-in")]
    assert off[4:6] == ["runs without", "pass"]
    on = table[("NCCL_CUMEM_ENABLE=0", "ours, GDRCOPY_BACKEND=vulkan")]
    # Unsafe with the opt-in: documented, not the invariant; the line NCCL printed is in the row.
    assert on[4:6] == ["fails", "FAIL"] and "ncclSystemError" in on[6]
    uses = table[("cuMem default", "ours, GDRCOPY_BACKEND=vulkan")]
    assert uses[4:6] == ["uses GDRCopy", "pass"] and uses[7] == "`NCCL_GDRCOPY_ENABLE=1 nccl_check.py`"
    assert table[("cuMem default", "control (no libgdrapi)")][5] == "control"


def test_a_cell_that_fails_without_the_opt_in_breaks_the_invariant(tmp_path: Path) -> None:
    run = summarize(tmp_path, [CONTROL, OFF_BROKEN])
    assert run.returncode == 1
    assert "invariant broken: nccl 2.28.9 NCCL_CUMEM_ENABLE=0 fails without the opt-in" in run.stderr


def test_a_failing_control_excuses_ours(tmp_path: Path) -> None:
    failing_control = CONTROL.replace("\tcontrol\t0\t", "\tcontrol\t1\t")
    run = summarize(tmp_path, [failing_control, OFF_BROKEN])
    assert run.returncode == 0, run.stderr
    assert rows(run.stdout)[("NCCL_CUMEM_ENABLE=0", "ours, no opt-in")][5] == "pass"


def test_latency_is_the_median_and_range_of_the_rounds_per_transport(tmp_path: Path) -> None:
    lines = []
    for rnd, (gdr, cuda) in enumerate([(0.20, 7.1), (0.25, 6.9), (0.22, 8.0)], 1):
        lines.append(f"UCX-LAT: tl=gdr_copy op=put size=8 round={rnd} us={gdr}")
        lines.append(f"UCX-LAT: tl=cuda_copy op=put size=8 round={rnd} us={cuda}")
        lines.append(f"UCX-LAT: tl=gdr_copy op=get size=8192 round={rnd} us={gdr * 20}")
    run = summarize(tmp_path, [CONTROL, OFF_OK], "\n".join(lines) + "\nucx_copy_lat: exit status 0\n")
    assert run.returncode == 0, run.stderr
    assert "median [range] of 3 interleaved rounds" in run.stdout
    row8 = next(line for line in run.stdout.splitlines() if line.startswith("| 8 B |"))
    assert row8 == "| 8 B | 0.22 [0.20–0.25] | 7.10 [6.90–8.00] | – | – |"
    row8k = next(line for line in run.stdout.splitlines() if line.startswith("| 8 KiB |"))
    assert row8k.split(" | ")[3] == "4.40 [4.00–5.00]"


def test_a_malformed_line_is_refused_with_its_number(tmp_path: Path) -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    import optin_summary  # noqa: PLC0415 - the script is not a package

    with pytest.raises(ValueError, match="line 2: expected 8 tab-separated fields"):
        optin_summary.read_cells(CONTROL + "\nnccl\t2.28\tx\tmaybe\t0\t0\tsaid\tcmd\n")
