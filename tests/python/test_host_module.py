"""insmod/rmmod planning against fake machines; the commands are checked, never run."""

from __future__ import annotations

import pytest

from gdrkit.host import module
from gdrkit.gdrcopy_doctor.probe import FakeProbe, Node
from gdrkit.system import UserError


def test_modprobe_with_default_params_when_not_loaded() -> None:
    commands = module.plan_load(module.LoadOptions(), FakeProbe())
    assert commands == [
        ["modprobe", "gdrdrv", "dbg_enabled=0", "info_enabled=0", "use_persistent_mapping=1", "allow_p2p_tokens=0"]
    ]


def test_reload_from_build_tree_with_overridden_params() -> None:
    probe = FakeProbe(files={"/sys/module/gdrdrv/refcnt": "0", str(module.BUILT_MODULE): ""})
    options = module.LoadOptions(from_build=True, params=module.parse_params("dbg_enabled=1"))
    commands = module.plan_load(options, probe)
    assert commands[0] == ["rmmod", "gdrdrv"]
    assert commands[1][:2] == ["insmod", str(module.BUILT_MODULE)] and "dbg_enabled=1" in commands[1]


def test_missing_build_module_says_to_build() -> None:
    with pytest.raises(UserError, match="build it first"):
        module.plan_load(module.LoadOptions(from_build=True), FakeProbe())


def test_bad_param_is_a_user_error() -> None:
    with pytest.raises(UserError, match="name=value"):
        module.parse_params("dbg_enabled")


def test_node_created_when_udev_did_not() -> None:
    probe = FakeProbe(files={"/sys/class/misc/gdrdrv/dev": "10:121\n"})
    assert module.plan_node(probe, "0660", "video") == [
        ["mknod", "/dev/gdrdrv", "c", "10", "121"],
        ["chmod", "0660", "/dev/gdrdrv"],
        ["chgrp", "video", "/dev/gdrdrv"],
    ]


def test_stale_node_replaced_and_good_node_only_chmodded() -> None:
    stale = FakeProbe(files={"/proc/devices": "240 gdrdrv\n"}, nodes={"/dev/gdrdrv": Node(True, 239, 0, 0o666, 0)})
    assert module.plan_node(stale, "0660", "video")[:2] == [
        ["rm", "-f", "/dev/gdrdrv"],
        ["mknod", "/dev/gdrdrv", "c", "240", "0"],
    ]
    good = FakeProbe(files={"/proc/devices": "240 gdrdrv\n"}, nodes={"/dev/gdrdrv": Node(True, 240, 0, 0o666, 0)})
    assert module.plan_node(good, "0666", "root") == [
        ["chmod", "0666", "/dev/gdrdrv"],
        ["chgrp", "root", "/dev/gdrdrv"],
    ]


def test_rmmod_only_when_loaded() -> None:
    assert module.plan_unload(FakeProbe()) == []
    assert module.plan_unload(FakeProbe(files={"/sys/module/gdrdrv/refcnt": "0"})) == [["rmmod", "gdrdrv"]]


def test_dry_run_prints_and_runs_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    module.load(module.LoadOptions(), dry_run=True, probe=FakeProbe())
    out = capsys.readouterr().out
    assert "[dry-run] modprobe gdrdrv" in out and "mode 0660 and group video" in out
    # The node is created with the wanted mode, never 0666 first.
    assert "node_mode=0660" in out
