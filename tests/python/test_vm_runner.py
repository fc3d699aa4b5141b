"""The vm-test flow and its verdict (root, build and VM faked)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gdrkit.system import UserError
from gdrkit.vm import klog, runner
from gdrkit.vm.qemu import VmResult
from gdrkit.vm.rootfs import BuildReport, StepResult, SuiteRoot

LOADS = runner.default_loads("force_ram=1", "use_persistent_mapping=0")
CLEAN = {"ours_started": "1", "load_softgpu": "0", "load_gdrdrv": "0", "command_status": "0", "refcount": "0",
         "unload_gdrdrv": "0", "unload_softgpu": "0", "done": "1"}  # fmt: skip


def vm(status: int | None, results: dict[str, str], findings: list[klog.Finding] | None = None, **kw: Any) -> VmResult:
    return VmResult(status, Path("/logs/console.log"), findings or [], 12.0, results=results, **kw)


def test_default_loads() -> None:
    assert [(m.name, m.args) for m in LOADS] == [
        ("softgpu", ("force_ram=1",)),
        ("gdrdrv", ("dbg_enabled=1", "use_persistent_mapping=0")),
    ]


@pytest.mark.parametrize(
    ("status", "change", "findings", "expected"),
    [
        (0, {}, [], 0),
        (3, {"command_status": "3"}, [], 3),
        (0, {"refcount": "1"}, [], 1),
        (0, {"unload_gdrdrv": "1"}, [], 1),
        (0, {}, [klog.Finding("warning", "WARNING: x")], 1),
        (None, {"command_status": "skipped", "load_gdrdrv": "1"}, [], 1),
        (None, {"done": ""}, [], 1),
    ],
)
def test_exit_status(status: int | None, change: dict[str, str], findings: list[klog.Finding], expected: int) -> None:
    assert runner.exit_status(vm(status, {**CLEAN, **change}, findings), LOADS) == expected


def test_timeout_exit_status() -> None:
    assert runner.exit_status(vm(None, {}, timed_out=True), LOADS) == runner.TIMEOUT_STATUS


def test_summary_names_everything_asked_for() -> None:
    root = SuiteRoot("trixie", "6.12.57+deb13-amd64", Path("/r"))
    text = "\n".join(runner.summary_lines(root, vm(0, {**CLEAN, "refcount": "2"}), LOADS, 30.0))
    for expected in ("6.12.57+deb13-amd64 (trixie)", "30.0s total", "command status:  0",
                     "gdrdrv=0", "softgpu=0", "refcount:        2", "kernel log:      clean", "FAIL",
                     "nv_get_pages_refcount is 2"):  # fmt: skip
        assert expected in text, expected


class Fakes:
    def __init__(self, report: BuildReport, result: VmResult) -> None:
        self.report, self.result = report, result
        self.boot_kwargs: dict[str, Any] = {}
        self.built = False

    def install(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        root = SuiteRoot("bookworm", "6.1.0-41-amd64", tmp_path)
        monkeypatch.setattr(runner, "prepare_suite_root", lambda kernel, **kw: root)
        monkeypatch.setattr(runner, "build_in_root", self.build)
        monkeypatch.setattr(runner, "boot", self.boot)

    def build(self, root: SuiteRoot) -> BuildReport:
        self.built = True
        return self.report

    def boot(self, *args: Any, **kwargs: Any) -> VmResult:
        self.boot_kwargs = {"args": args, **kwargs}
        return self.result


def test_vm_test_returns_the_command_status(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fakes = Fakes(BuildReport([StepResult("driver", "ok")]), vm(5, {**CLEAN, "command_status": "5"}))
    fakes.install(monkeypatch, tmp_path)
    status = runner.vm_test(runner.VmTestOptions(command="exit 5", log_dir=tmp_path / "logs"))
    assert status == 5 and fakes.built
    assert fakes.boot_kwargs["check_refcount"] is True
    assert [m.name for m in fakes.boot_kwargs["loads"]] == ["softgpu", "gdrdrv"]
    assert "command status:  5" in capsys.readouterr().out


def test_vm_test_stops_on_build_failures_unless_keep_going(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = BuildReport([StepResult("driver", "failed", 1.0, "gdrdrv.c:10: error: unknown type", "exit 2")])
    fakes = Fakes(report, vm(0, CLEAN))
    fakes.install(monkeypatch, tmp_path)
    with pytest.raises(UserError, match="driver") as info:
        runner.vm_test(runner.VmTestOptions(log_dir=tmp_path))
    assert info.value.hint and "--keep-going" in info.value.hint
    assert "gdrdrv.c:10: error: unknown type" in capsys.readouterr().out, "the compiler error is shown"
    assert fakes.boot_kwargs == {}
    assert runner.vm_test(runner.VmTestOptions(keep_going=True, log_dir=tmp_path)) == 0


def test_vm_test_plain_boot(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fakes = Fakes(BuildReport(), vm(0, {"command_status": "0", "done": "1"}))
    fakes.install(monkeypatch, tmp_path)
    options = runner.VmTestOptions(load_modules=False, build=False, log_dir=tmp_path)
    assert runner.vm_test(options) == 0
    assert not fakes.built
    assert fakes.boot_kwargs["loads"] == () and fakes.boot_kwargs["check_refcount"] is False


def test_vm_test_prints_the_kernel_log_tail_on_findings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kernel_log = tmp_path / "kernel.log"
    kernel_log.write_text("[ 1.0] boot\n[ 2.0] BUG: Bad page state in process x\n")
    result = vm(0, CLEAN, [klog.Finding("bug", "BUG: Bad page state in process x")], kernel_log=kernel_log)
    Fakes(BuildReport(), result).install(monkeypatch, tmp_path)
    assert runner.vm_test(runner.VmTestOptions(build=False, log_dir=tmp_path)) == 1
    captured = capsys.readouterr()
    assert "kernel log tail" in captured.out and "[ 2.0] BUG: Bad page state" in captured.out
    assert "[bug] BUG: Bad page state" in captured.err


def test_a_dry_run_prints_the_plan_a_real_run_executes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One path: vm_test plans, then prints the plan (dry run) or executes that very plan object."""
    options = runner.VmTestOptions(softgpu_args="force_ram=1", log_dir=tmp_path)
    executed: list[runner.VmTestPlan] = []

    def execute(the_plan: runner.VmTestPlan) -> int:
        executed.append(the_plan)
        return 7

    monkeypatch.setattr(runner, "execute", execute)
    assert runner.vm_test(options) == 7
    (the_plan,) = executed
    assert the_plan == runner.plan_vm_test(options)
    assert the_plan.build == "in-root" and [m.name for m in the_plan.loads] == ["softgpu", "gdrdrv"]
    assert runner.vm_test(dataclasses.replace(options, dry_run=True)) == 0
    assert capsys.readouterr().out.splitlines() == [f"[dry-run] {line}" for line in the_plan.lines()]
    assert len(executed) == 1, "a dry run executes nothing"


OOPS = klog.Finding("oops", "Oops: int3: 0000 [#1] PREEMPT SMP NOPTI")


def early_death(where: str) -> VmResult:
    return VmResult(None, Path(where) / "console.log", [OOPS], 2.8, results={"booted": "1"})


def test_summary_lists_every_boot_when_one_was_retried() -> None:
    root = SuiteRoot("trixie", "6.12.57+deb13-amd64", Path("/r"))
    result = vm(0, CLEAN, earlier_attempts=[early_death("/logs/attempt-1")])
    text = "\n".join(runner.summary_lines(root, result, LOADS, 40.0))
    assert "14.8s in the VM" in text, "both boots count"
    assert "boots:           2" in text
    assert "attempt 1: died 2.8s in, before our modules loaded: [oops] Oops: int3" in text
    assert "logs in /logs/attempt-1" in text and "attempt 2: finished in 12.0s; logs in /logs" in text
    assert "verdict:         PASS" in text
    assert runner.exit_status(result, LOADS) == 0


def test_two_early_deaths_fail_the_run_with_both_shown() -> None:
    root = SuiteRoot("trixie", "6.12.57+deb13-amd64", Path("/r"))
    result = early_death("/logs")
    result.earlier_attempts = [early_death("/logs/attempt-1")]
    assert runner.exit_status(result, LOADS) == 1
    text = "\n".join(runner.summary_lines(root, result, LOADS, 40.0))
    assert "verdict:         FAIL" in text
    assert "died before our modules loaded, on all 2 attempts" in text
    assert text.count("before our modules loaded: [oops]") == 2


def test_summary_has_no_boots_line_without_a_retry() -> None:
    root = SuiteRoot("trixie", "6.12.57+deb13-amd64", Path("/r"))
    assert "boots:" not in "\n".join(runner.summary_lines(root, vm(0, CLEAN), LOADS, 30.0))


def test_vm_test_shows_what_killed_a_retried_boot(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = vm(0, CLEAN, earlier_attempts=[early_death(str(tmp_path / "attempt-1"))])
    Fakes(BuildReport(), result).install(monkeypatch, tmp_path)
    assert runner.vm_test(runner.VmTestOptions(build=False, log_dir=tmp_path)) == 0
    captured = capsys.readouterr()
    assert "kernel log, attempt 1 (booted again): [oops] Oops: int3" in captured.err
    assert "boots:           2" in captured.out and "verdict:         PASS" in captured.out


def test_the_vm_packages_docstring_names_each_functions_parameters() -> None:
    """gdrkit/vm/__init__.py documents its API by signature: each one names exactly the function's parameters."""
    import inspect
    import re

    import gdrkit.vm

    documented = re.findall(r"^`(\w+)\(([^`]*?)\) -> [\w\[\]]+`", gdrkit.vm.__doc__ or "", re.MULTILINE)
    assert {name for name, _ in documented} >= {"prepare_suite_root", "build_in_root", "boot", "scan_kernel_log"}
    for name, params in documented:
        named = [p.split("=")[0].strip() for p in params.replace("()", "").split(",") if p.strip() not in ("", "*")]
        assert named == list(inspect.signature(getattr(gdrkit.vm, name)).parameters), name
