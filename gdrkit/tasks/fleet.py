"""`invoke molecule`: the Ansible role's multi-host test (gdrkit.fleet)."""

from __future__ import annotations

from invoke.context import Context
from invoke.tasks import task


@task(
    help={
        "command": "the Molecule command: test (default: the whole sequence), converge, verify, destroy, ...",
        "ref": "the commit whose packages are built and published (default HEAD)",
        "dry_run": "print the plan, change nothing",
    }
)
def molecule(c: Context, command: str = "test", ref: str = "HEAD", dry_run: bool = False) -> None:
    """Bookworm and trixie hosts converge with the Ansible role from a signed repository on loopback HTTP."""
    from gdrkit.fleet import molecule as flow

    run = flow.molecule(command, ref=ref, dry_run=dry_run)
    if run is not None:
        print("\n".join(run.summary()))
        print(f"molecule {command} passed in {run.seconds:.0f} s (log: {run.log_file})")


TASKS = [molecule]
