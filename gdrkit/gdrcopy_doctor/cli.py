"""`gdrcopy_doctor [--json]` (installed on nodes) and `./toolkit doctor`: one command line, one set of exit statuses.

Exit statuses, for node health checkers (NHC, Kubernetes probes, a cluster's
verify step; docs/nodes.md, "Checking nodes", has an example of each):

  0  healthy: no check failed (warnings and skipped checks allowed)
  1  at least one check failed: the findings say which and how to fix it
  2  usage: an unknown option (argparse's own status)
  3  nothing to check: no NVIDIA GPU, no NVIDIA driver and no provider of
     the NVIDIA P2P API on this host (a CPU-only node); the findings are
     still printed, and `--no-gpu-ok` turns this into 0
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import doctor
from .probe import Probe

HEALTHY, FAILED, USAGE, NO_GPU = 0, 1, 2, 3
PROGRAM = "gdrcopy_doctor"
NOTHING_TO_CHECK = "nothing to check: no NVIDIA GPU, NVIDIA driver or P2P API provider on this host"


def exit_status(findings: Sequence[doctor.Finding], gpu: bool, no_gpu_ok: bool = False) -> int:
    """The exit status of a run that found `findings` on a host with (or without) a GPU (pure)."""
    if not gpu:
        return HEALTHY if no_gpu_ok else NO_GPU
    return FAILED if any(f.status == doctor.FAIL for f in findings) else HEALTHY


def parser(prog: str = PROGRAM) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Check this host for GDRCopy: NVIDIA driver, P2P API, headers, DKMS, versions,"
        " /dev/gdrdrv and who may open it, the library by the names consumers dlopen, module age,"
        " the backend and versions consumers (NCCL, UCX, NVSHMEM, aws-ofi-nccl, MSCCL++) see and their"
        " gates, BAR1, Secure Boot.  Changes nothing.",
        epilog=f"exit status: {HEALTHY} healthy, {FAILED} a check failed, {USAGE} usage,"
        f" {NO_GPU} no NVIDIA GPU or driver here (nothing to check)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the findings as a JSON list (check, status, detail, fix; and gates on consumer gates)",
    )
    p.add_argument(
        "--no-gpu-ok", action="store_true", help=f"exit {HEALTHY} instead of {NO_GPU} on a host without an NVIDIA GPU"
    )
    return p


def run(json: bool = False, no_gpu_ok: bool = False, probe: Probe | None = None) -> int:
    """Check the host, print the findings, return the exit status."""
    machine = probe or Probe()
    findings = doctor.diagnose(machine)
    gpu = doctor.gpu_present(machine)
    status = exit_status(findings, gpu, no_gpu_ok)
    if json:
        print(doctor.as_json(findings))
        if not gpu:
            print(NOTHING_TO_CHECK, file=sys.stderr)
        return status
    if not gpu:
        # The verdict first: on a CPU-only node the FAIL lines below are expected, not news.
        print(f"{NOTHING_TO_CHECK} (exit {status}); the checks, for reference:")
    print(doctor.as_table(findings))
    return status


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return run(json=args.json, no_gpu_ok=args.no_gpu_ok)
