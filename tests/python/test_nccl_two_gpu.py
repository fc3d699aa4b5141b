"""tools/h200/nccl_two_gpu.{py,sh} without a GPU or torch: the value formulas, the library check,
the summary from a fixture run, and the script's refusal on a machine with fewer than 2 GPUs."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools" / "h200"
sys.path.insert(0, str(TOOLS))

import nccl_two_gpu as two  # noqa: E402

ROUNDS = 2
# A trimmed NCCL INFO log of one rank with GDRCopy on, and our library's debug lines.
LOG_WITH = """\
h200:4242:4242 [0] NCCL INFO NCCL_GDRCOPY_ENABLE set by environment to 1.
h200:4242:4242 [0] NCCL INFO GDRCOPY enabled library 2.6 driver 2.6
DBG:  gdr_pin_buffer: imported the 2097152-byte cuMemCreate allocation at 0x7f5dc0030000 on NVIDIA H200: CPU 0x7f1234560000
h200:4242:4250 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0
nccl-two-gpu rank 0: our library is mapped: /repo/libgdrapi/build/libgdrapi.so.2.6.0
"""
LOG_WITHOUT = "h200:4243:4243 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/Socket/0\n"


def float32_exact(value: int) -> bool:
    rounded: float = struct.unpack("f", struct.pack("f", value))[0]
    return rounded == value


@pytest.mark.parametrize("world", [1, 2, 3, 8])
def test_the_expected_sum_is_the_sum_of_the_contributions_and_exact_in_float32(world: int) -> None:
    for index in [0, 1, 7, two.VALUE_PERIOD - 1, two.VALUE_PERIOD, 123456789]:
        values = [two.contribution(index, rank) for rank in range(world)]
        assert sum(values) == two.expected_sum(index, world)
        assert len(set(values)) == world and min(values) > 0  # a gather from the wrong rank shows
        assert all(float32_exact(v) for v in values + [two.expected_sum(index, world)])
    assert two.exact_in_float32(world)


def test_too_many_ranks_for_float32_are_refused() -> None:
    assert not two.exact_in_float32(4096)
    assert not float32_exact(two.expected_sum(two.VALUE_PERIOD - 1, 4096) + 1)


def test_sizes_run_from_8_bytes_to_64_mib() -> None:
    assert two.CHECK_SIZES[0] == 8 and two.CHECK_SIZES[-1] == 64 << 20
    assert two.LATENCY_SIZES[0] == 8 and two.LATENCY_SIZES[-1] == 64 << 10
    assert [two.size_name(s) for s in (8, 2048, 32 << 20)] == ["8 B", "2 KiB", "32 MiB"]


MAPS = """\
7f10000000-7f10001000 r--p 00000000 fd:01 123 /work/repo/libgdrapi/build/libgdrapi.so.2.6.0
7f10001000-7f10009000 r-xp 00001000 fd:01 123 /work/repo/libgdrapi/build/libgdrapi.so.2.6.0
7f20000000-7f20001000 r--p 00000000 fd:01 456 /usr/lib/libc.so.6
7ffd0000-7ffd1000 rw-p 00000000 00:00 0
7f30000000-7f30001000 rw-s 00000000 00:05 9 /dev/nvidia0
"""


def test_mapped_libraries_lists_each_libgdrapi_file_once() -> None:
    assert two.mapped_libraries(MAPS) == ["/work/repo/libgdrapi/build/libgdrapi.so.2.6.0"]
    assert two.mapped_libraries(MAPS, "libc") == ["/usr/lib/libc.so.6"]


def test_library_verdict() -> None:
    ours = ["/work/repo/libgdrapi/build/libgdrapi.so.2.6.0"]
    ok, why = two.library_verdict(ours, True, "/work/repo/libgdrapi/build")
    assert ok and "our library is mapped" in why
    ok, why = two.library_verdict([], True, "/work/repo/libgdrapi/build")
    assert not ok and "NCCL_GDRCOPY_ENABLE=1 but no libgdrapi is mapped" in why
    ok, why = two.library_verdict(["/usr/lib/libgdrapi.so.2.4"], True, "/work/repo/libgdrapi/build")
    assert not ok and "not ours" in why
    # A folder whose name only starts like ours is not ours.
    assert not two.library_verdict(["/work/repo/libgdrapi/build2/libgdrapi.so"], True, "/work/repo/libgdrapi/build")[0]
    assert two.library_verdict([], False, "/x") == (True, "no libgdrapi mapped (NCCL_GDRCOPY_ENABLE=0)")


def fixture_run(results: Path, wrong: bool = False, crashed: tuple[int, int, int] = (0, 0, 0)) -> None:
    """What nccl_two_gpu.sh leaves for ROUNDS rounds, both modes, both ranks.

    `wrong` spoils one check; the rank at `crashed` (round, gdrcopy, rank) writes no JSON line and exits 134.
    """
    runs = []
    for round_ in range(1, ROUNDS + 1):
        for gdrcopy in (1, 0):
            for rank in (0, 1):
                name = f"r{round_}-gdrcopy{gdrcopy}-rank{rank}"
                common = {"rank": rank, "gdrcopy": gdrcopy, "round": round_}
                rows: list[dict[str, Any]] = [
                    {"kind": "env", **common, "gpu": "NVIDIA H200", "torch": "2.9.0", "nccl": "2.28.9", "world": 2}
                ]
                for op, dtype in two.OPS:
                    for size in two.CHECK_SIZES:
                        bad = wrong and (round_, gdrcopy, rank, op, dtype, size) == (
                            2,
                            1,
                            1,
                            "all_gather",
                            "float32",
                            512,
                        )
                        rows.append(
                            {
                                "kind": "check",
                                **common,
                                "op": op,
                                "dtype": dtype,
                                "bytes": size,
                                "ok": not bad,
                                "detail": "1 of 256 elements wrong" if bad else "",
                            }
                        )
                for size in two.LATENCY_SIZES:
                    # With GDRCopy 5 µs faster; round 2 3 µs slower than round 1.
                    median = 20.0 + (0 if gdrcopy else 5) + 3 * (round_ - 1) + size / 65536
                    rows.append(
                        {
                            "kind": "latency",
                            **common,
                            "op": "all_reduce",
                            "bytes": size,
                            "iterations": 300,
                            "median_us": median,
                            "min_us": median - 1,
                            "p90_us": median + 2,
                        }
                    )
                path = "/repo/libgdrapi/build/libgdrapi.so.2.6.0"
                rows.append(
                    {
                        "kind": "library",
                        **common,
                        "paths": [path] if gdrcopy else [],
                        "ok": True,
                        "why": f"our library is mapped: {path}" if gdrcopy else "no libgdrapi mapped",
                    }
                )
                rows.append({"kind": "verdict", **common, "ok": not wrong, "failures": []})
                if (round_, gdrcopy, rank) != crashed:
                    (results / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
                (results / f"{name}.log").write_text(LOG_WITH if gdrcopy else LOG_WITHOUT)
                runs.append({"kind": "run", **common, "rc": 134 if (round_, gdrcopy, rank) == crashed else 0})
    (results / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))


def test_summary_of_a_good_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fixture_run(tmp_path)
    assert two.main(["summary", str(tmp_path), "--rounds", str(ROUNDS)]) == 0
    out = capsys.readouterr().out
    assert "GPU NVIDIA H200, NCCL 2.28.9, PyTorch 2.9.0" in out
    # NCCL's lines, host:pid:tid and addresses dropped, counted over the 4 rank logs with GDRCopy.
    assert "   4  [0] NCCL INFO GDRCOPY enabled library 2.6 driver 2.6" in out
    assert "   4  DBG:  gdr_pin_buffer: imported the 2097152-byte cuMemCreate allocation at ADDR" in out
    assert "- ok   with GDRCopy: 208 of 208 collectives" in out
    assert "- ok   with GDRCopy: 4 of 4 rank processes ran, each exit 0" in out
    assert "nccl-two-gpu rank" not in out.split("## Checks")[0]  # our own lines are not NCCL's
    assert "- ok   with GDRCopy: NCCL says 'GDRCOPY enabled' in 4 of 4 rank logs" in out
    assert "- ok   without GDRCopy: NCCL's log names NET/Socket channels in 4 of 4 rank logs" in out
    # 8 B: rounds of 20.0 and 23.0 µs with GDRCopy, 25.0 and 28.0 without.
    assert "| 8 B | 21.5 [20.0–23.0] (2) | 26.5 [25.0–28.0] (2) | 0.81 |" in out
    assert "| 64 KiB | 22.5 [21.0–24.0] (2) | 27.5 [26.0–29.0] (2) | 0.82 |" in out
    assert out.rstrip().endswith("nccl-two-gpu: PASS")


def test_summary_fails_on_wrong_data_a_missing_rank_and_a_silent_nccl(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture_run(tmp_path, wrong=True, crashed=(1, 0, 1))
    (tmp_path / "r2-gdrcopy1-rank0.log").write_text(LOG_WITHOUT)  # NCCL ran without GDRCopy there
    # NCCL enabled GDRCopy there, but the pin failed: an error about a pin is not a pin.
    (tmp_path / "r1-gdrcopy1-rank1.log").write_text(
        LOG_WITH.replace("DBG:  gdr_pin_buffer: imported the", "ERR:  gdr_pin_buffer: not")
    )
    assert two.main(["summary", str(tmp_path), "--rounds", str(ROUNDS)]) == 1
    out = capsys.readouterr().out
    assert "- FAIL with GDRCopy: 207 of 208 collectives" in out
    assert "round 2 rank 1 all_gather float32 512 B: 1 of 256 elements wrong" in out
    assert "- FAIL without GDRCopy: 156 of 208 collectives" in out
    assert "- FAIL without GDRCopy: 4 of 4 rank processes ran; not exit 0: round 1 rank 1: exit 134" in out
    assert "- FAIL without GDRCopy: libgdrapi in 3 of 4 processes" in out
    assert "- FAIL with GDRCopy: NCCL says 'GDRCOPY enabled' in 3 of 4 rank logs" in out
    assert "- FAIL with GDRCopy: our library pinned NCCL memory (gdr_pin_buffer) in 2 of 4 rank logs" in out
    assert "   1  ERR:  gdr_pin_buffer: not" in out
    assert out.rstrip().endswith("nccl-two-gpu: FAIL (6 checks failed)")


def test_summary_of_no_folder_says_what_to_give(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        two.main(["summary", str(tmp_path / "nothing"), "--rounds", "3"])
    assert "give the folder nccl_two_gpu.sh wrote" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("listing", "found"),
    [("echo 'GPU 0: NVIDIA H200 (UUID: GPU-1)'", 1), ("exit 9", 0)],
    ids=["one-gpu", "nvidia-smi-fails"],
)
def test_the_script_stops_at_once_with_fewer_than_2_gpus(tmp_path: Path, listing: str, found: int) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text(f"#!/bin/sh\n{listing}\n")
    # Nothing past the GPU count may run: no build, no loader install.
    for tool in ("make", "dpkg"):
        (fake / tool).write_text(f"#!/bin/sh\ntouch {tmp_path}/ran-{tool}\nexit 1\n")
    for program in fake.iterdir():
        program.chmod(0o755)
    out = tmp_path / "out"
    result = subprocess.run(
        ["bash", str(TOOLS / "nccl_two_gpu.sh")],
        cwd=TOOLS.parents[1],
        env={**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "OUT": str(out)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 77, result.stdout + result.stderr
    assert f"needs 2 GPUs, found {found}" in result.stdout
    assert f"needs 2 GPUs, found {found}" in (out / "steps.log").read_text()
    assert not list(tmp_path.glob("ran-*"))
