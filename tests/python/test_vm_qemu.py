"""The qemu edge: command line, result parsing, cleanup (qemu itself faked)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from gdrkit.system import UserError, die
from gdrkit.vm import qemu
from gdrkit.vm.initramfs import ModuleLoad
from gdrkit.vm.qemu import VmPaths, VmResult

LOADS = (ModuleLoad("softgpu"), ModuleLoad("gdrdrv", ("dbg_enabled=1",)))


def paths(tmp_path: Path) -> VmPaths:
    return VmPaths(
        work=tmp_path,
        initrd=tmp_path / "initrd.cpio.gz",
        console_log=tmp_path / "console.log",
        results=tmp_path / "results.txt",
        kernel_log=tmp_path / "kernel.log",
        vram=tmp_path / "vram",
    )


def test_command_line_is_tcg_with_9p_root_and_three_serial_ports(tmp_path: Path) -> None:
    argv = qemu.qemu_command(Path("/boot/vmlinuz-x"), paths(tmp_path), Path("/roots/r"))
    line = " ".join(argv)
    assert argv[0] == "qemu-system-x86_64"
    assert "q35,accel=tcg" in argv and "kvm" not in line
    assert argv[argv.index("-smp") + 1] == "2"
    assert argv[argv.index("-m") + 1] == "2048"
    assert "-no-reboot" in argv
    serials = [argv[i + 1] for i, a in enumerate(argv) if a == "-serial"]
    assert serials == ["chardev:console", "chardev:results", "chardev:kernellog"]
    assert f"stdio,id=console,logfile={tmp_path / 'console.log'}" in argv
    assert "local,path=/roots/r,mount_tag=gdrkit-root,security_model=none,multidevs=remap" in argv
    append = argv[argv.index("-append") + 1]
    assert "console=ttyS0" in append and "rdinit=/init" in append and "panic=-1" in append
    assert "ivshmem-plain,memdev=vram" in argv
    assert f"memory-backend-file,id=vram,size=256M,mem-path={tmp_path / 'vram'},share=on" in argv


def test_command_line_without_ivshmem_and_with_options(tmp_path: Path) -> None:
    argv = qemu.qemu_command(
        Path("/k"), paths(tmp_path), Path("/r"), memory_mb=1024, ivshmem_mb=0, extra_kernel_args=["softgpu.x=1"]
    )
    assert "ivshmem-plain,memdev=vram" not in argv
    assert argv[argv.index("-m") + 1] == "1024"
    assert argv[argv.index("-append") + 1].endswith(" softgpu.x=1")


def test_vram_files_are_unique() -> None:
    a, b = VmPaths.create(None), VmPaths.create(None)
    try:
        assert a.vram != b.vram and a.vram.parent == Path("/dev/shm")
    finally:
        for p in (a, b):
            p.work.rmdir()


def test_parse_results() -> None:
    text = "booted=1\r\nload_softgpu=0\r\ncommand_status=3\r\nnoise\r\nrefcount=0\r\ndone=1\r\n"
    assert qemu.parse_results(text) == {
        "booted": "1", "load_softgpu": "0", "command_status": "3", "refcount": "0", "done": "1",
    }  # fmt: skip


def result(results: dict[str, str], **kwargs: Any) -> VmResult:
    return VmResult(status=None, console_log=Path("c"), kernel_log_findings=[], seconds=1.0, results=results, **kwargs)


GOOD = {"ours_started": "1", "load_softgpu": "0", "load_gdrdrv": "0", "command_status": "0", "refcount": "0",
        "unload_gdrdrv": "0", "unload_softgpu": "0", "done": "1"}  # fmt: skip


def test_a_clean_run_has_no_problems() -> None:
    assert result(GOOD).problems(LOADS) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"refcount": "2"}, "refcount is 2"),
        ({"refcount": "missing"}, "without dbg_enabled=1"),
        ({"unload_gdrdrv": "1"}, "rmmod gdrdrv failed"),
        ({"load_gdrdrv": "1"}, "modprobe gdrdrv failed"),
        ({"done": ""}, "did not finish"),
        ({"error": "mount 9p root"}, "mount 9p root"),
    ],
)
def test_each_check_can_fail(change: dict[str, str], problem: str) -> None:
    problems = result({**GOOD, **change}).problems(LOADS)
    assert any(problem in p for p in problems), problems


def test_a_module_gone_before_rmmod_is_a_problem() -> None:
    results = {k: v for k, v in GOOD.items() if k != "unload_softgpu"}
    assert any("softgpu was gone" in p for p in result(results).problems(LOADS))


def test_timeout_is_a_problem() -> None:
    assert "timed out" in result({}, timed_out=True).problems()


class FakeQemu:
    """Stands in for run_step(title, qemu...): plays a guest by writing the serial files."""

    def __init__(self, results: str, console: str = "", kernel_log: str = "", exc: BaseException | None = None):
        self.results, self.console, self.kernel_log, self.exc = results, console, kernel_log, exc
        self.argv: list[str] = []

    def __call__(self, title: str, argv: Sequence[str], **kwargs: Any) -> None:
        self.argv = list(argv)
        assert title.startswith("booting vmlinuz"), "one progress line per boot, naming the kernel"
        vram = Path(argv[argv.index("-object") + 1].split("mem-path=")[1].split(",")[0])
        vram.write_bytes(b"BAR bytes")  # qemu creates the backing file, the guest writes it

        def chardev_path(key: str) -> Path:
            spec = next(a for a in argv if a.startswith(key))
            return Path(spec.split("path=" if "file," in key else "logfile=")[1])

        chardev_path("file,id=results").write_text(self.results)
        chardev_path("stdio,id=console").write_text(self.console)
        chardev_path("file,id=kernellog").write_text(self.kernel_log)
        if self.exc is not None:
            raise self.exc


@pytest.fixture
def fake_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "root"
    (root / "lib/modules/1.0").mkdir(parents=True)
    (root / "boot").mkdir()
    (root / "boot/vmlinuz").write_bytes(b"kernel")
    # The very modules qemu.py imported: patching them by name keeps mypy's explicit-export rule.
    monkeypatch.setattr(
        "gdrkit.vm.initramfs.build_initramfs", lambda dest, mods, plan, busybox=None: dest.write_bytes(b"x") or plan
    )
    # qemu is faked below: nothing is installed for it.
    monkeypatch.setattr("gdrkit.vm.qemu.ensure_debian_packages", lambda packages: None)
    return root


def boot(root: Path, log_dir: Path, **kwargs: Any) -> VmResult:
    return qemu.boot(root / "boot/vmlinuz", root / "lib/modules/1.0", root, "true", log_dir=log_dir, **kwargs)


def test_boot_collects_status_findings_and_removes_vram(
    fake_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeQemu(
        "booted=1\r\ncommand_status=3\r\ndone=1\r\n",
        console="[ 1.0] Run /init\nWARNING: from a program\n",
        kernel_log="[ 2.0] WARNING: CPU: 0 PID: 1 at x.c:1 f\n",
    )
    monkeypatch.setattr(qemu, "run_step", fake)
    res = boot(fake_root, tmp_path / "logs")
    assert res.status == 3 and not res.timed_out
    assert [f.rule for f in res.kernel_log_findings] == ["warning"]
    vram = Path(fake.argv[fake.argv.index("-object") + 1].split("mem-path=")[1].split(",")[0])
    assert not vram.exists()
    assert res.console_log == tmp_path / "logs/console.log" and res.console_log.exists()


def test_boot_timeout_is_reported_not_raised(fake_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeQemu("booted=1\r\n", exc=UserError("timed out after 0s: qemu"))
    monkeypatch.setattr(qemu, "run_step", fake)
    res = boot(fake_root, tmp_path / "logs", timeout=0)
    assert res.timed_out and res.status is None


def test_boot_cleans_up_on_ctrl_c(fake_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeQemu("", exc=KeyboardInterrupt())
    monkeypatch.setattr(qemu, "run_step", fake)
    with pytest.raises(KeyboardInterrupt):
        boot(fake_root, tmp_path / "logs")
    vram = Path(fake.argv[fake.argv.index("-object") + 1].split("mem-path=")[1].split(",")[0])
    assert not vram.exists()


def test_boot_other_qemu_failures_propagate(fake_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(title: str, argv: Sequence[str], **kwargs: Any) -> None:
        raise die("command failed (exit 1): qemu")

    monkeypatch.setattr(qemu, "run_step", failing)
    with pytest.raises(UserError, match="exit 1"):
        boot(fake_root, tmp_path / "logs", timeout=600)


def test_boot_checks_its_inputs(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="kernel image"):
        qemu.boot(tmp_path / "nope", tmp_path, tmp_path, "true")


def test_boot_can_keep_a_copy_of_the_bar(fake_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(qemu, "run_step", FakeQemu("command_status=0\ndone=1\n"))
    res = boot(fake_root, tmp_path / "logs", vram_copy=tmp_path / "bar.bin")
    assert res.status == 0
    assert (tmp_path / "bar.bin").read_bytes() == b"BAR bytes"


# --- a guest that died before our modules loaded is booted once more --------

EARLY_DEATH = FakeQemu(
    "booted=1\r\n",
    console="[    2.812345] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\n[    2.812400] RIP: 0010:sched_clock_cpu+0x9/0x1a0\n",
)
CLEAN_RESULTS = "booted=1\r\n" + "".join(f"{key}={value}\r\n" for key, value in GOOD.items())
CLEAN = FakeQemu(CLEAN_RESULTS, console="gdrkit-vm: command exited with status 0\n")
# Died while gdrdrv was loading: ours, never retried.
DIED_IN_OURS = FakeQemu(
    "booted=1\r\nours_started=1\r\nload_softgpu=0\r\n",
    console="[   20.1] BUG: kernel NULL pointer dereference, address: 0000000000000000\n",
)


class Guests:
    """Stands in for run_step(title, qemu...) over several boots: the i-th call plays the i-th guest."""

    def __init__(self, *guests: FakeQemu) -> None:
        self.guests = guests
        self.vram_files: list[Path] = []

    @property
    def boots(self) -> int:
        return len(self.vram_files)

    def __call__(self, title: str, argv: Sequence[str], **kwargs: Any) -> None:
        assert self.boots < len(self.guests), "booted more often than expected"
        guest = self.guests[self.boots]
        self.vram_files.append(Path(argv[argv.index("-object") + 1].split("mem-path=")[1].split(",")[0]))
        guest(title, argv, **kwargs)


def test_a_guest_that_died_before_our_modules_is_booted_again_and_both_boots_are_kept(
    fake_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    guests = Guests(EARLY_DEATH, CLEAN)
    monkeypatch.setattr(qemu, "run_step", guests)
    res = boot(fake_root, tmp_path / "logs", loads=LOADS, check_refcount=True)
    assert guests.boots == 2
    assert res.status == 0 and res.problems(LOADS) == [], "the second boot passed, so the run does"
    assert res.console_log == tmp_path / "logs/console.log"
    assert "exited with status 0" in res.console_log.read_text()
    [first] = res.earlier_attempts
    assert first.died_before_ours() and not res.died_before_ours()
    assert first.console_log == tmp_path / "logs/attempt-1/console.log"
    assert "Oops: int3" in first.console_log.read_text(), "the first boot's console log is kept"
    assert (tmp_path / "logs/attempt-1/results.txt").read_text().split() == ["booted=1"]
    assert [f.rule for f in first.kernel_log_findings] == ["oops"]
    lines = res.attempt_lines()
    assert len(lines) == 2
    assert lines[0].startswith("attempt 1: died") and "before our modules loaded" in lines[0]
    assert "Oops: int3" in lines[0] and str(tmp_path / "logs/attempt-1") in lines[0]
    assert lines[1].startswith("attempt 2: finished") and lines[1].endswith(str(tmp_path / "logs"))
    assert all(not vram.exists() for vram in guests.vram_files)


def test_a_guest_that_died_early_twice_fails_with_both_boots_shown(
    fake_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    guests = Guests(EARLY_DEATH, EARLY_DEATH)
    monkeypatch.setattr(qemu, "run_step", guests)
    res = boot(fake_root, tmp_path / "logs", loads=LOADS)
    assert guests.boots == 2, "retried once, not more"
    assert res.status is None
    problems = res.problems(LOADS)
    assert any("died before our modules loaded, on all 2 attempts" in p for p in problems), problems
    assert any("kernel log finding" in p for p in problems), problems
    lines = res.attempt_lines()
    assert [line.split(":")[0] for line in lines] == ["attempt 1", "attempt 2"]
    assert all("before our modules loaded" in line and "Oops: int3" in line for line in lines)
    assert (tmp_path / "logs/attempt-1/console.log").exists() and (tmp_path / "logs/console.log").exists()


@pytest.mark.parametrize(
    ("guest", "problem"),
    [
        (DIED_IN_OURS, "did not finish (crash or panic?)"),
        (CLEAN, None),
        (FakeQemu("booted=1\r\n", exc=UserError("timed out after 0s: qemu")), "timed out"),
        (FakeQemu("booted=1\r\nerror=mount 9p root\r\ndone=1\r\n"), "mount 9p root"),
    ],
    ids=["died-after-our-modules-started", "clean", "timeout", "setup-error"],
)
def test_other_boots_are_never_retried(
    guest: FakeQemu, problem: str | None, fake_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    guests = Guests(guest, CLEAN)
    monkeypatch.setattr(qemu, "run_step", guests)
    # timeout=0: the faked qemu that raises has then run past it.
    res = boot(fake_root, tmp_path / "logs", loads=LOADS, check_refcount=True, timeout=0)
    assert guests.boots == 1
    assert res.earlier_attempts == [] and res.attempt_lines() == []
    assert not (tmp_path / "logs/attempt-1").exists()
    problems = res.problems(LOADS)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems
        assert not any("before our modules loaded" in p for p in problems), problems


def test_retries_can_be_turned_off(fake_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    guests = Guests(EARLY_DEATH, CLEAN)
    monkeypatch.setattr(qemu, "run_step", guests)
    res = boot(fake_root, tmp_path / "logs", early_death_retries=0)
    assert guests.boots == 1 and res.died_before_ours()
    assert "the guest did not finish: it died before our modules loaded" in res.problems()


def test_retry_without_a_log_dir_keeps_both_boots_in_the_scratch_dir(
    fake_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(qemu, "run_step", Guests(EARLY_DEATH, CLEAN))
    res = qemu.boot(fake_root / "boot/vmlinuz", fake_root / "lib/modules/1.0", fake_root, "true")
    try:
        [first] = res.earlier_attempts
        assert first.console_log == res.console_log.parent / "attempt-1/console.log"
        assert first.console_log.exists() and res.console_log.exists()
    finally:
        shutil.rmtree(res.console_log.parent)
