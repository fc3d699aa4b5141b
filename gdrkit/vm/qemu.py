"""Booting a kernel under qemu (TCG) with a host directory as its root.

The console (ttyS0) is streamed to the terminal and copied to a log file;
/init reports results on ttyS1 and dumps the kernel log on ttyS2, each into a
file of its own.  A PCI ivshmem device backed by a file in /dev/shm gives the
guest a real PCI BAR for softgpu.  Whatever happens (success, timeout,
Ctrl-C), qemu is gone and the /dev/shm file removed when `boot` returns.

TCG now and then kills a kernel during its own boot (an `Oops: int3` in
sched_clock_cpu, 2.8 s in, before any module had loaded).  A guest that
died before /init reported `ours_started` (see initramfs.OURS_STARTED) died
before any module or command of ours ran, so `boot` boots it once more and
keeps both attempts: the earlier one's logs move to `attempt-1/` next to the
final ones, and `VmResult.earlier_attempts` describes it.  Anything that goes
wrong after that marker is ours and is never retried; neither is a timeout
(a hang costs the whole timeout again) nor a guest that finished with a
setup error (those repeat).
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from gdrkit.distro.arch import HOST_ARCH, Arch
from gdrkit.system import UserError, die, ensure_debian_packages, log, run_step
from gdrkit.vm import debugkernel, initramfs, klog
from gdrkit.vm.initramfs import GuestPlan, ModuleLoad
from gdrkit.vm.kimage import bootable_image

QEMU = HOST_ARCH.qemu_system
DEFAULT_TIMEOUT_S = 15 * 60
DEFAULT_MEMORY_MB = 2048
DEFAULT_IVSHMEM_MB = 256
# How many times a guest that died before our modules loaded is booted again.
EARLY_DEATH_RETRIES = 1
KERNEL_ARGS = (
    "rdinit=/init",
    "panic=-1",
    "printk.time=1",
    # TCG on a shared host is slow; a stall report there is not the driver's fault.
    "rcupdate.rcu_cpu_stall_suppress=1",
)


@dataclass(frozen=True)
class VmPaths:
    """Where one boot keeps its files."""

    work: Path
    initrd: Path
    console_log: Path
    results: Path
    kernel_log: Path
    vram: Path

    @classmethod
    def create(cls, log_dir: Path | None) -> VmPaths:
        work = Path(tempfile.mkdtemp(prefix="gdrkit-vm-"))
        logs = log_dir or work
        logs.mkdir(parents=True, exist_ok=True)
        tag = secrets.token_hex(4)
        return cls(
            work=work,
            initrd=work / "initrd.cpio.gz",
            console_log=logs / "console.log",
            results=logs / "results.txt",
            kernel_log=logs / "kernel.log",
            vram=Path("/dev/shm") / f"gdrkit-vram-{os.getpid()}-{tag}",
        )


def qemu_command(
    kernel_image: Path,
    paths: VmPaths,
    root_dir: Path,
    *,
    memory_mb: int = DEFAULT_MEMORY_MB,
    cpus: int = 2,
    ivshmem_mb: int = DEFAULT_IVSHMEM_MB,
    extra_kernel_args: Sequence[str] = (),
    arch: Arch = HOST_ARCH,
) -> list[str]:
    """The qemu command line for one boot (pure)."""
    argv = [
        arch.qemu_system,
        *arch.qemu_machine,
        "-smp", str(cpus),
        "-m", str(memory_mb),
        "-nodefaults",
        "-no-reboot",
        "-display", "none",
        "-kernel", str(kernel_image),
        "-initrd", str(paths.initrd),
        "-append", " ".join((f"console={arch.console}", *KERNEL_ARGS, *extra_kernel_args)),
        "-chardev", f"stdio,id=console,logfile={paths.console_log}",
        "-serial", "chardev:console",
        "-chardev", f"file,id=results,path={paths.results}",
        "-chardev", f"file,id=kernellog,path={paths.kernel_log}",
    ]  # fmt: skip
    if arch.results_port.startswith(initramfs.VIRTIO_PORTS_DIR):
        argv += [
            "-device", "virtio-serial-pci",
            "-device", "virtserialport,chardev=results,name=results",
            "-device", "virtserialport,chardev=kernellog,name=kernellog",
        ]  # fmt: skip
    else:
        argv += ["-serial", "chardev:results", "-serial", "chardev:kernellog"]
    argv += [
        "-virtfs",
        f"local,path={root_dir},mount_tag={initramfs.ROOT_MOUNT_TAG},security_model=none,multidevs=remap",
    ]  # fmt: skip
    if ivshmem_mb > 0:
        argv += [
            "-object", f"memory-backend-file,id=vram,size={ivshmem_mb}M,mem-path={paths.vram},share=on",
            "-device", "ivshmem-plain,memdev=vram",
        ]  # fmt: skip
    return argv


def parse_results(text: str) -> dict[str, str]:
    """The `key=value` lines /init wrote to the results port (last value wins)."""
    results: dict[str, str] = {}
    for line in text.replace("\r", "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            results[key.strip()] = value.strip()
    return results


@dataclass
class VmResult:
    """What one boot produced."""

    status: int | None  # the command's exit status; None if it did not run or finish
    console_log: Path
    kernel_log_findings: list[klog.Finding]
    seconds: float
    timed_out: bool = False
    results: dict[str, str] = field(default_factory=dict)
    kernel_log: Path | None = None
    # Boots before this one that died before our modules loaded, first first.
    earlier_attempts: list[VmResult] = field(default_factory=list)
    # KCSAN's reports of the core kernel's own races (klog.core_kernel_races): shown, not failures.
    core_kernel_races: list[str] = field(default_factory=list)

    def died_before_ours(self) -> bool:
        """The guest died before /init started on our modules or command.

        Decided from the marker /init reports just before that, never from
        the console: no marker, no `done`, and qemu exited on its own.
        """
        return (
            not self.timed_out and self.results.get("done") != "1" and self.results.get(initramfs.OURS_STARTED) != "1"
        )

    def attempt_lines(self) -> list[str]:
        """One line per boot when there was more than one (empty otherwise)."""
        if not self.earlier_attempts:
            return []
        return [
            f"attempt {number}: {attempt.outcome()}; logs in {attempt.console_log.parent}"
            for number, attempt in enumerate((*self.earlier_attempts, self), start=1)
        ]

    def outcome(self) -> str:
        """This boot in a few words, with the first kernel log finding when it died."""
        if self.timed_out:
            return f"timed out after {self.seconds:.1f}s"
        if self.died_before_ours():
            first = f": {self.kernel_log_findings[0]}" if self.kernel_log_findings else ""
            return f"died {self.seconds:.1f}s in, before our modules loaded{first}"
        if self.results.get("done") != "1":
            return f"died {self.seconds:.1f}s in, after our modules started loading"
        return f"finished in {self.seconds:.1f}s"

    @property
    def refcount(self) -> str | None:
        return self.results.get("refcount")

    def unload_failures(self) -> dict[str, str]:
        """Modules whose rmmod failed, with rmmod's status."""
        return {
            key.removeprefix("unload_"): value
            for key, value in self.results.items()
            if key.startswith("unload_") and value != "0"
        }

    def load_failures(self) -> dict[str, str]:
        return {
            key.removeprefix("load_"): value
            for key, value in self.results.items()
            if key.startswith("load_") and value != "0"
        }

    def problems(self, loads: Sequence[ModuleLoad] = ()) -> list[str]:
        """Why this run fails, besides the command's own status (empty: it passed)."""
        found = []
        if self.timed_out:
            found.append("timed out")
        elif self.died_before_ours():
            times = f", on all {len(self.earlier_attempts) + 1} attempts" if self.earlier_attempts else ""
            found.append(f"the guest did not finish: it died before our modules loaded{times}")
        elif self.results.get("done") != "1":
            found.append("the guest did not finish (crash or panic?)")
        if "error" in self.results:
            found.append(f"guest setup failed: {self.results['error']}")
        found += [f"modprobe {name} failed (status {rc})" for name, rc in self.load_failures().items()]
        found += [f"rmmod {name} failed (status {rc})" for name, rc in self.unload_failures().items()]
        for load in loads:
            key = load.name.replace("-", "_")
            if self.results.get(f"load_{key}") == "0" and f"unload_{key}" not in self.results:
                found.append(f"{load.name} was gone before rmmod")
        if self.refcount == "missing":
            found.append(
                "/proc/driver/gdrdrv/nv_get_pages_refcount is missing after the command"
                " (gdrdrv unloaded, or reloaded without dbg_enabled=1)"
            )
        elif self.refcount is not None and self.refcount != "0":
            found.append(f"nv_get_pages_refcount is {self.refcount}, not 0")
        if self.kernel_log_findings:
            found.append(f"{len(self.kernel_log_findings)} kernel log finding(s)")
        return found


def boot(
    kernel_image: Path,
    modules_dir: Path,
    root_dir: Path,
    command: str,
    *,
    loads: Sequence[ModuleLoad] = (),
    check_refcount: bool = False,
    ivshmem_mb: int = DEFAULT_IVSHMEM_MB,
    memory_mb: int = DEFAULT_MEMORY_MB,
    timeout: float = DEFAULT_TIMEOUT_S,
    log_dir: Path | None = None,
    extra_kernel_args: Sequence[str] = (),
    vram_copy: Path | None = None,
    early_death_retries: int = EARLY_DEATH_RETRIES,
    arch: Arch = HOST_ARCH,
    busybox: Path = initramfs.BUSYBOX,
    init: str = "",
) -> VmResult:
    """Boot `kernel_image` with `root_dir` as root, run `command` there, power off.

    With `init` (a path in the root, e.g. `/lib/systemd/systemd`), /init
    hands the root to that program as PID 1 instead; `command` is then empty,
    and what the root runs reports `command_status` and `done` to the results
    port itself and powers off.

    With `vram_copy`, the ivshmem BAR's final contents are copied there so a
    test can check from the host what the guest wrote through a mapping.
    A guest that died before our modules loaded is booted again, up to
    `early_death_retries` times (see the module docstring); the result is
    the last boot's, with the others in `earlier_attempts`.  A debug kernel's
    boot gets `timeout` stretched by its slowdown (debugkernel.SLOWDOWN), and
    the command sees the factor as GDRKIT_SLOWDOWN (the kernel tests stretch
    their per-test limit by it).
    """
    for path, what in (
        (kernel_image, "kernel image"),
        (root_dir, "root directory"),
        (modules_dir, "modules directory"),
    ):
        if not path.exists():
            raise die(f"{what} {path} does not exist")
    # Installed if missing (idempotent), whoever built the root: a cached root outlives the host's packages.
    ensure_debian_packages([arch.qemu_system_package])
    factor = debugkernel.slowdown(kernel_image)
    timeout *= factor
    if factor > 1 and command:
        command = f"export GDRKIT_SLOWDOWN={factor}; {command}"
    paths = VmPaths.create(log_dir)
    plan = GuestPlan(command, tuple(loads), check_refcount, arch=arch, init=init)
    earlier: list[VmResult] = []
    try:
        initramfs.build_initramfs(paths.initrd, modules_dir, plan, busybox)
        image = bootable_image(kernel_image, paths.work, arch)
        argv = qemu_command(
            image, paths, root_dir, memory_mb=memory_mb, ivshmem_mb=ivshmem_mb,
            extra_kernel_args=extra_kernel_args, arch=arch,
        )  # fmt: skip
        while True:
            result = _boot_once(argv, paths, timeout, vram_copy, f"booting {kernel_image.name} with {root_dir.name}")
            if not result.died_before_ours() or len(earlier) >= early_death_retries:
                break
            earlier.append(_set_aside(result, paths, len(earlier) + 1))
            log(
                f"the guest died {result.seconds:.1f}s in, before our modules loaded (an emulator artefact):"
                f" booting it once more; that attempt's logs are in {earlier[-1].console_log.parent}"
            )
    finally:
        paths.vram.unlink(missing_ok=True)
        paths.initrd.unlink(missing_ok=True)
        if log_dir is not None:
            shutil.rmtree(paths.work, ignore_errors=True)
    result.earlier_attempts = earlier
    if earlier:
        log(f"booted {len(earlier) + 1} times: " + "; ".join(result.attempt_lines()))
    return result


def _boot_once(argv: Sequence[str], paths: VmPaths, timeout: float, vram_copy: Path | None, title: str) -> VmResult:
    """One run of qemu; the BAR file is copied (if asked) and removed whatever happens."""
    start = time.monotonic()
    try:
        timed_out = _run_qemu(argv, timeout, paths.console_log.parent, title)
    finally:
        if vram_copy is not None and paths.vram.exists():
            shutil.copyfile(paths.vram, vram_copy)
        paths.vram.unlink(missing_ok=True)
    return _collect(paths, time.monotonic() - start, timed_out)


def _set_aside(result: VmResult, paths: VmPaths, number: int) -> VmResult:
    """Move an attempt's log files to `attempt-<number>/` beside them; the result, pointing there."""
    folder = paths.console_log.parent / f"attempt-{number}"
    shutil.rmtree(folder, ignore_errors=True)  # a reused log_dir's, from an earlier run
    folder.mkdir()
    for path in (paths.console_log, paths.results, paths.kernel_log):
        if path.exists():
            path.replace(folder / path.name)
    kernel_log = folder / result.kernel_log.name if result.kernel_log is not None else None
    return replace(result, console_log=folder / paths.console_log.name, kernel_log=kernel_log)


def _run_qemu(argv: Sequence[str], timeout: float, log_dir: Path, title: str) -> bool:
    """Run qemu to the end as one step (its console in the step's log); True if it ran past `timeout` and was killed."""
    start = time.monotonic()
    try:
        # stdin is not a terminal: qemu then leaves the terminal's modes alone.
        run_step(title, argv, log_dir=log_dir, timeout=timeout)
    except UserError:
        if time.monotonic() - start >= timeout:
            log(f"qemu ran past {timeout:.0f}s and was killed")
            return True
        raise
    return False


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _collect(paths: VmPaths, seconds: float, timed_out: bool) -> VmResult:
    results = parse_results(_read(paths.results))
    kernel_text, console_text = _read(paths.kernel_log), _read(paths.console_log)
    findings = klog.merge_findings(
        klog.scan_kernel_log(kernel_text),
        klog.scan_kernel_log(console_text, kernel_lines_only=True),
    )
    races = klog.core_kernel_races(kernel_text) or klog.core_kernel_races(console_text, kernel_lines_only=True)
    status_text = results.get("command_status", "")
    status = int(status_text) if status_text.isdigit() else None
    return VmResult(
        status=status,
        console_log=paths.console_log,
        kernel_log_findings=findings,
        seconds=seconds,
        timed_out=timed_out,
        results=results,
        kernel_log=paths.kernel_log if kernel_text.strip() else None,
        core_kernel_races=races,
    )
