"""The `vm-test` task: flags reach the runner, the status becomes the exit code."""

from __future__ import annotations

from typing import Any

import pytest
from invoke.context import MockContext
from invoke.exceptions import Exit

from gdrkit.tasks import ns
from gdrkit.tasks import vm as vm_tasks
from gdrkit.vm.runner import VmTestOptions


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {"status": 0}

    def fake(options: VmTestOptions) -> int:
        seen["options"] = options
        return int(seen["status"])

    monkeypatch.setattr(vm_tasks, "run_vm_test", fake)
    return seen


def test_task_is_registered_as_vm_test() -> None:
    assert "vm-test" in ns.task_names


def test_flags_reach_the_runner(captured: dict[str, Any]) -> None:
    vm_tasks.vm_test(MockContext(), kernel="trixie", cmd="exit 0", softgpu_args="force_ram=1", modules=False,
                     build=False, timeout=60, ivshmem=0, log_dir="/tmp/x")  # fmt: skip
    options: VmTestOptions = captured["options"]
    assert (options.kernel, options.command, options.softgpu_args) == ("trixie", "exit 0", "force_ram=1")
    assert not options.load_modules and not options.build
    assert options.timeout == 60 and options.ivshmem_mb == 0 and str(options.log_dir) == "/tmp/x"


def test_status_becomes_the_exit_code(captured: dict[str, Any]) -> None:
    captured["status"] = 3
    with pytest.raises(Exit) as info:
        vm_tasks.vm_test(MockContext(), kernel="bookworm")
    assert info.value.code == 3


def test_dry_run_plans_and_changes_nothing(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """--dry-run prints what would be installed, built and booted, and neither builds a root nor boots."""
    from gdrkit.vm import runner

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a dry run must not build or boot")

    for name in ("prepare_suite_root", "build_in_root", "boot"):
        monkeypatch.setattr(runner, name, refuse)
    monkeypatch.setattr(runner, "cached_suite_root", lambda kernel, *_: None)
    monkeypatch.setattr(runner, "missing_debian_packages", lambda packages: ["qemu-system-x86"])
    vm_tasks.vm_test(MockContext(), kernel="trixie", cmd="exit 0", gdrdrv_args="use_persistent_mapping=0", dry_run=True)
    lines = capsys.readouterr().out.splitlines()
    assert all(line.startswith("[dry-run] ") for line in lines) and len(lines) == 4
    assert lines[0] == "[dry-run] install host packages: qemu-system-x86"
    assert "build the root of trixie with mmdebstrap" in lines[1]
    assert "softgpu_kmod" in lines[2] and "depmod" in lines[2]
    assert "modprobe gdrdrv dbg_enabled=1 use_persistent_mapping=0" in lines[3] and lines[3].endswith("run: exit 0")


def test_dry_run_refuses_what_the_run_would_refuse() -> None:
    from gdrkit.system import UserError

    with pytest.raises(UserError, match="neither a Debian suite nor a kernel version"):
        vm_tasks.vm_test(MockContext(), kernel="potato", dry_run=True)


def test_dry_run_refuses_module_parameters_the_sources_do_not_declare() -> None:
    from gdrkit.system import UserError

    with pytest.raises(UserError, match="--softgpu-args: softgpu has no parameter 'mode'") as info:
        vm_tasks.vm_test(MockContext(), kernel="trixie", softgpu_args="mode=ram", dry_run=True)
    assert "force_ram (bool)" in str(info.value.hint)
    with pytest.raises(UserError, match="softgpu's ram_size is a ulong, not 'big'"):
        vm_tasks.vm_test(MockContext(), kernel="trixie", softgpu_args="force_ram=1 ram_size=big", dry_run=True)
    with pytest.raises(UserError, match="--gdrdrv-args: gdrdrv has no parameter 'dbg'"):
        vm_tasks.vm_test(MockContext(), kernel="trixie", gdrdrv_args="dbg=1", dry_run=True)
