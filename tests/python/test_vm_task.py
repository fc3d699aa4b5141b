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
    vm_tasks.vm_test(MockContext(), kernel="trixie", cmd="exit 0", softgpu_args="mode=ram", modules=False,
                     build=False, timeout=60, ivshmem=0, log_dir="/tmp/x")  # fmt: skip
    options: VmTestOptions = captured["options"]
    assert (options.kernel, options.command, options.softgpu_args) == ("trixie", "exit 0", "mode=ram")
    assert not options.load_modules and not options.build
    assert options.timeout == 60 and options.ivshmem_mb == 0 and str(options.log_dir) == "/tmp/x"


def test_status_becomes_the_exit_code(captured: dict[str, Any]) -> None:
    captured["status"] = 3
    with pytest.raises(Exit) as info:
        vm_tasks.vm_test(MockContext(), kernel="bookworm")
    assert info.value.code == 3
