"""Host tasks: `invoke insmod`, `rmmod`, `sanity` and the benchmarks, `doctor`.

Thin: the logic is in gdrkit.host and gdrkit.gdrcopy_doctor.  Never run insmod/rmmod on a build
machine whose kernel you do not mean to change; --dry-run shows the plan.
"""

from __future__ import annotations

import shlex
import subprocess

from invoke.context import Context
from invoke.exceptions import Exit
from gdrkit.tasks.convention import ConventionTask, task

from gdrkit.gdrcopy_doctor import cli as doctor_cli
from gdrkit.host import module, programs
from gdrkit.packaging import doctor_facts  # noqa: F401  (hands the doctor the registry's facts)
from gdrkit.system import bad_input, log


@task(
    help={
        "from_build": "insmod gdrdrv/gdrdrv.ko of this tree (default: modprobe the installed module)",
        "module_path": "insmod this gdrdrv.ko",
        "params": "module parameters, e.g. 'dbg_enabled=1 use_persistent_mapping=0' (defaults: packages/gdrcopy.yaml)",
        "mode": "mode of /dev/gdrdrv (default 0660)",
        "group": "group of /dev/gdrdrv (default video)",
        "dry_run": "print the commands, run none",
    }
)
def insmod(
    c: Context,
    from_build: bool = False,
    module_path: str = "",
    params: str = "",
    mode: str = "",
    group: str = "",
    dry_run: bool = False,
) -> None:
    """(Re)load gdrdrv with its parameters and give /dev/gdrdrv the configured mode and group."""
    options = module.LoadOptions(
        from_build=from_build, module_path=module_path, params=module.parse_params(params), mode=mode, group=group
    )
    module.load(options, dry_run=dry_run)


@task(help={"dry_run": "print the commands, run none"})
def rmmod(c: Context, dry_run: bool = False) -> None:
    """Unload gdrdrv (the node goes with it)."""
    module.unload(dry_run=dry_run)


def program_task(name: str, what: str) -> ConventionTask:
    """A task running gdrcopy_<name>: the one this tree built, against the library it built, else the installed one."""
    binary = programs.BUILT[name].name

    def body(c: Context, path: str = "", args: str = "") -> None:
        command = programs.command(name, path)
        log(f"running {command.describe()} {args}".rstrip())
        try:
            argv = [str(command.program), *shlex.split(args)]
        except ValueError as error:
            raise bad_input(f"--args {args!r}: {error}", "quote the arguments as a shell would") from None
        status = subprocess.call(argv, env=dict(command.env))
        if status != 0:
            raise Exit(f"{binary} failed (exit {status})", code=status)

    body.__name__ = body.__qualname__ = name
    body.__doc__ = f"Run {binary} ({what}): the one built here, with the library built here; else the installed one."
    return task(
        name=name,
        help={
            "path": f"{binary} to run (default: this tree's build, else {programs.INSTALLED_DIR / binary})",
            "args": "its arguments, as one string (e.g. --args='-h' for its own options)",
        },
    )(body)


sanity = program_task("sanity", "the library's functional tests")
copybw = program_task("copybw", "copy bandwidth, host to GPU and back")
copylat = program_task("copylat", "copy latency by size")
apiperf = program_task("apiperf", "the cost of each library call")
pplat = program_task("pplat", "ping-pong latency between CPU and GPU")


@task(
    help={
        "json": "print the findings as JSON",
        "no_gpu_ok": "exit 0 instead of 3 on a host without an NVIDIA GPU or driver",
    }
)
def doctor(c: Context, json: bool = False, no_gpu_ok: bool = False) -> None:
    """Check this host for gdrcopy (what nodes run as gdrcopy_doctor): exit 0 healthy, 1 failed, 3 no GPU."""
    status = doctor_cli.run(json=json, no_gpu_ok=no_gpu_ok)
    if status != doctor_cli.HEALTHY:
        raise Exit(code=status)


TASKS = [insmod, rmmod, sanity, copybw, copylat, apiperf, pplat, doctor]
