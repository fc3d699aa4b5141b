"""`invoke molecule`: the Ansible role's tests on several hosts, and inside a VM (gdrkit.fleet)."""

from __future__ import annotations

from invoke.context import Context
from invoke.exceptions import Exit
from gdrkit.system import bad_input
from gdrkit.tasks.convention import task

# Molecule's own subcommands (molecule --help) that act on a scenario.
MOLECULE_COMMANDS = (
    "check",
    "cleanup",
    "converge",
    "create",
    "dependency",
    "destroy",
    "idempotence",
    "login",
    "prepare",
    "reset",
    "side-effect",
    "syntax",
    "test",
    "verify",
)


@task(
    extras=("containers", "fleet"),
    help={
        "command": "the Molecule command: test (default: the whole sequence), converge, verify, destroy, ...",
        "vm": "instead: the role with a local connection inside a booted bookworm kernel, softgpu as the GPU",
        "ref": "the commit whose packages are built and published (default HEAD)",
        "dry_run": "print the plan, change nothing",
        "scenario": "default (bookworm and trixie containers) or check: the role with --check on this machine,"
        " from a repository holding only a signing key (nothing changes here)",
    },
)
def molecule(
    c: Context,
    command: str = "test",
    vm: bool = False,
    ref: str = "HEAD",
    dry_run: bool = False,
    scenario: str = "default",
) -> None:
    """Bookworm and trixie hosts converge with the Ansible role from a signed repository on loopback HTTP."""
    if command not in MOLECULE_COMMANDS:
        raise bad_input(
            f"--command {command!r} is not a Molecule command", f"use one of {', '.join(MOLECULE_COMMANDS)}"
        )
    if vm:
        from gdrkit.fleet import vmload

        result = vmload.vm_converge(ref=ref, dry_run=dry_run)
        if result is None:
            return
        print("\n".join(result.checks()))
        if not result.passed:
            why = "; ".join(result.problems) or f"vm_converge.sh exit {result.status}"
            raise Exit(f"the role in the VM failed: {why} (logs: {vmload.WORK / 'vm-logs'})", code=1)
        print(f"the role in the VM passed in {result.seconds:.0f} s")
        return
    from gdrkit.fleet import molecule as flow

    run = flow.molecule(command, ref=ref, dry_run=dry_run, scenario=scenario)
    if run is not None:
        print("\n".join(run.summary()))
        print(f"molecule {command} passed in {run.seconds:.0f} s (log: {run.log_file})")


TASKS = [molecule]
