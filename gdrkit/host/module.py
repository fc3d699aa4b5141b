"""`invoke insmod` / `rmmod`: load gdrdrv and give /dev/gdrdrv its mode.

`plan_*()` return the commands to run (a list of argv) from what a Probe
sees; `apply()` runs them, or prints them with --dry-run.  gdrdrv registers
its device with the driver core, so udev normally creates the node; the
plan only creates it by hand (mknod) when no udev did so, as on a minimal
host or in a VM without udevd.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gdrkit.gdrcopy_doctor.doctor import MODULE, NODE, _proc_devices_major, _sysfs_dev
from gdrkit.gdrcopy_doctor.probe import Probe
from gdrkit.packaging import model
from gdrkit.system import bad_input, die, run
from gdrkit.version import REPO_ROOT

BUILT_MODULE = REPO_ROOT / "gdrdrv" / "gdrdrv.ko"

Command = list[str]


@dataclass(frozen=True)
class LoadOptions:
    from_build: bool = False  # insmod gdrdrv/gdrdrv.ko instead of modprobe gdrdrv
    module_path: str = ""
    params: Mapping[str, str] | None = None
    mode: str = ""
    group: str = ""


def default_params() -> dict[str, str]:
    return {k: str(v) for k, v in model.load().kernel_module.options.items()}


def parse_params(text: str) -> dict[str, str]:
    params = {}
    for item in text.split():
        if "=" not in item:
            raise die(f"module parameter {item!r} is not name=value", "e.g. --params 'dbg_enabled=1 info_enabled=1'")
        name, value = item.split("=", 1)
        params[name] = value
    return params


def plan_load(options: LoadOptions, probe: Probe) -> list[Command]:
    """Commands that (re)load gdrdrv with the parameters; node handling is separate."""
    params = dict(default_params())
    params.update(options.params or {})
    args = [f"{k}={v}" for k, v in params.items()]
    commands: list[Command] = []
    if probe.exists(f"/sys/module/{MODULE}"):
        commands.append(["rmmod", MODULE])
    if options.from_build or options.module_path:
        path = options.module_path or str(BUILT_MODULE)
        if not probe.exists(path):
            raise die(f"no module at {path}", "build it first: ./toolkit build (or pass --module-path)")
        commands.append(["insmod", path, *args])
    else:
        commands.append(["modprobe", MODULE, *args])
    return commands


def plan_node(probe: Probe, mode: str, group: str) -> list[Command]:
    """After loading: make /dev/gdrdrv match the device and the wanted mode and group."""
    expected = _sysfs_dev(probe)
    if expected is None:
        major = _proc_devices_major(probe)
        if major is None:
            raise die("gdrdrv is loaded but registered no device", "see dmesg for gdrdrv's messages")
        expected = (major, 0)
    commands: list[Command] = []
    node = probe.node(NODE)
    if node is None or not node.is_char or (node.major, node.minor) != expected:
        if node is not None:
            commands.append(["rm", "-f", NODE])
        commands.append(["mknod", NODE, "c", str(expected[0]), str(expected[1])])
    commands.append(["chmod", mode, NODE])
    commands.append(["chgrp", group, NODE])
    return commands


def plan_unload(probe: Probe) -> list[Command]:
    if not probe.exists(f"/sys/module/{MODULE}"):
        return []
    return [["rmmod", MODULE]]


def apply(commands: Sequence[Command], *, dry_run: bool) -> None:
    for argv in commands:
        run(argv, dry_run=dry_run)


def check_node_options(probe: Probe, mode: str, group: str, *, explicit_group: bool = True) -> None:
    """--mode and --group, refused before anything is loaded (dry run too): an octal mode, a group this host has."""
    if not re.fullmatch(r"0?[0-7]{3}", mode):
        raise bad_input(f"--mode {mode!r} is not an octal file mode", "give three octal digits, e.g. --mode 0660")
    if explicit_group and probe.group_id(group) is None:
        raise bad_input(
            f"--group {group!r}: no such group on this host",
            f"create it first (groupadd {group}) or name one that getent group lists",
        )


def load(options: LoadOptions, *, dry_run: bool = False, probe: Probe | None = None) -> None:
    machine = probe or Probe()
    node_defaults = model.load().device_node
    mode = options.mode or node_defaults.mode
    group = options.group or node_defaults.group
    check_node_options(machine, mode, group, explicit_group=bool(options.group))
    # The kernel creates the node with node_mode: pass the wanted mode at load
    # time, so there is no moment in which the node is more open than asked.
    params = {"node_mode": "0" + mode.lstrip("0") if mode.isdigit() else mode, **(options.params or {})}
    apply(plan_load(replace(options, params=params), machine), dry_run=dry_run)
    if dry_run:
        print(f"[dry-run] then: wait for udev to create {NODE}, set mode {mode} and group {group}")
        return
    # Give udev a moment to create the node from the device_create() uevent.
    deadline = time.monotonic() + 5
    while machine.node(NODE) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    apply(plan_node(machine, mode, group), dry_run=False)
    final = machine.node(NODE)
    if final is None:
        raise die(f"{NODE} did not appear", "see dmesg; is udevd running?")
    print(f"{NODE}: {final.major}:{final.minor} mode {final.mode:04o} group {machine.group_name(final.gid)}")


def unload(*, dry_run: bool = False, probe: Probe | None = None) -> None:
    machine = probe or Probe()
    commands = plan_unload(machine)
    if not commands:
        print("gdrdrv is not loaded")
        return
    apply(commands, dry_run=dry_run)
