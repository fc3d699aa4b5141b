"""`vm-test`: prepare a suite's root, build the project in it, boot, judge.

The verdict of a run: the command's exit status, then every module must
have loaded and unloaded, the driver's pin refcount must be back to 0, and
the kernel log must be clean.  The task's exit status is the command's own
when it failed, 124 on a timeout, 1 when only the other checks failed.
A guest that died before our modules loaded is booted once more (see
gdrkit.vm.qemu); the summary then lists every boot.
"""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gdrkit.distro.arch import HOST_ARCH, Arch, arch
from gdrkit.distro.debian import SUITES
from gdrkit.system import cache_dir, die, log, missing_debian_packages
from gdrkit.vm import debugkernel, klog
from gdrkit.vm.initramfs import BUSYBOX, ModuleLoad
from gdrkit.vm.kimage import image_page_size
from gdrkit.vm.modparams import check_args
from gdrkit.vm.qemu import DEFAULT_IVSHMEM_MB, DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, VmResult, boot
from gdrkit.vm.rootfs import (
    BuildReport,
    SuiteRoot,
    build_in_root,
    cached_suite_root,
    default_steps,
    host_packages,
    prepare_suite_root,
)
from gdrkit.vm.suites import KernelChoice, check_flavour, check_kernel_spec

DEFAULT_COMMAND = "gdrdrv_ktest"
TIMEOUT_STATUS = 124
OUTPUT_TAIL_LINES = 40


@dataclass(frozen=True)
class VmTestOptions:
    kernel: str = "bookworm"
    command: str = DEFAULT_COMMAND
    softgpu_args: str = ""
    gdrdrv_args: str = ""
    load_modules: bool = True
    build: bool = True
    keep_going: bool = False
    refresh: bool = False
    rebuild: bool = False
    timeout: float = DEFAULT_TIMEOUT_S
    memory_mb: int = DEFAULT_MEMORY_MB
    ivshmem_mb: int = DEFAULT_IVSHMEM_MB
    log_dir: Path | None = None
    dry_run: bool = False
    arch: str = HOST_ARCH.debian
    flavour: str = ""  # the kernel flavour (linux-image-<flavour>); "" = the architecture's default
    debug_kernel: str = ""  # "kasan" or "kcsan": boot gdrkit's debug kernel of that name (gdrkit.vm.debugkernel)

    @property
    def target(self) -> Arch:
        return arch(self.arch)


def default_loads(softgpu_args: str = "", gdrdrv_args: str = "") -> tuple[ModuleLoad, ...]:
    """softgpu, then gdrdrv with its debug switch (which also creates the refcount file).

    Each argument must be a parameter the module's sources declare, with a value of its type:
    refused here, before anything is built or booted, rather than by insmod in the guest."""
    return (
        ModuleLoad("softgpu", check_args("softgpu", softgpu_args, "--softgpu-args")),
        ModuleLoad("gdrdrv", ("dbg_enabled=1", *check_args("gdrdrv", gdrdrv_args, "--gdrdrv-args"))),
    )


def exit_status(result: VmResult, loads: tuple[ModuleLoad, ...]) -> int:
    """The task's exit status for `result` (see the module docstring)."""
    if result.timed_out:
        return TIMEOUT_STATUS
    if result.status is not None and result.status != 0:
        return result.status
    if result.status is None or result.problems(loads):
        return 1
    return 0


def page_size_problem(result: VmResult, declared: int | None) -> str | None:
    """Why the guest's page size contradicts the kernel image's header, if it does (pure)."""
    seen = result.results.get("page_size", "")
    if declared is None or not seen:
        return None
    if seen != str(declared):
        return f"the guest's page size is {seen}, the kernel image declares {declared}"
    return None


def summary_lines(
    root: SuiteRoot,
    result: VmResult,
    loads: tuple[ModuleLoad, ...],
    total_s: float,
    declared_page: int | None = None,
    debug_kernel: str = "",
) -> list[str]:
    unloads = ", ".join(
        f"{load.name}={result.results.get('unload_' + load.name.replace('-', '_'), 'not run')}" for load in loads
    )
    command = "timed out" if result.timed_out else str(result.results.get("command_status", "did not run"))
    findings = result.kernel_log_findings
    vm_seconds = result.seconds + sum(attempt.seconds for attempt in result.earlier_attempts)
    lines = [
        "---- vm-test summary ----",
        f"kernel:          {root.abi} ({root.suite})",
        f"page size:       {result.results.get('page_size', 'not reported')}"
        + (f" (the image declares {declared_page})" if declared_page else ""),
        f"time:            {total_s:.1f}s total, {vm_seconds:.1f}s in the VM",
        f"command status:  {command}",
        f"module unload:   {unloads or 'no modules loaded'}",
        f"refcount:        {result.refcount if result.refcount is not None else 'not checked'}",
        f"kernel log:      {'clean' if not findings else f'{len(findings)} finding(s)'}",
        *(
            [f"judges:          {judge_line(debug_kernel, [finding.rule for finding in findings])}"]
            if debug_kernel
            else []
        ),
        *(
            [
                f"core kernel:     {len(result.core_kernel_races)} KCSAN race(s) of the core kernel's own, not counted"
                f" (no module in any stack, or inside printk's ring buffer; first: {result.core_kernel_races[0]})"
            ]
            if result.core_kernel_races
            else []
        ),
        f"logs:            {result.console_log.parent}",
    ]
    if result.earlier_attempts:
        lines.append(
            f"boots:           {len(result.earlier_attempts) + 1}"
            " (a guest that died before our modules loaded was booted again)"
        )
        lines += [f"  {line}" for line in result.attempt_lines()]
    problems = result.problems(loads)
    page_problem = page_size_problem(result, declared_page)
    if page_problem:
        problems.append(page_problem)
    passed = exit_status(result, loads) == 0 and not page_problem
    lines.append(f"verdict:         {'PASS' if passed else 'FAIL'}")
    lines += [f"  - {problem}" for problem in problems]
    return lines


def judge_line(flavour: str, rules: list[str]) -> str:
    """`kasan 0, lockdep 1, ...`: the reports of each of the debug kernel's judges (pure)."""
    return ", ".join(f"{judge} {count}" for judge, count in debugkernel.judge_counts(flavour, rules).items())


def print_build_report(report: BuildReport) -> None:
    print("---- in-root build ----", flush=True)
    print(report.summary(), flush=True)
    for step in report.failed:
        if step.status == "failed":
            tail = "\n".join(step.output.splitlines()[-OUTPUT_TAIL_LINES:])
            print(f"---- {step.name} failed; last lines of its output ----\n{tail}", flush=True)


def default_log_dir(root: SuiteRoot) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return cache_dir() / "vm" / "logs" / f"{root.suite}-{root.abi}-{stamp}"


def kernel_choice(root: SuiteRoot) -> KernelChoice:
    return KernelChoice(SUITES[root.suite], root.abi, root.arch)


@dataclass(frozen=True)
class VmTestPlan:
    """What vm-test will do, decided before anything changes: a dry run prints it, a real run executes it."""

    options: VmTestOptions
    target: Arch
    host_packages: tuple[str, ...]
    missing_host_packages: tuple[str, ...]
    cached_root: SuiteRoot | None  # the root a dry run expects to reuse (a real run may find a newer kernel)
    build: str  # "": no build; "in-root"; "cross"
    loads: tuple[ModuleLoad, ...]
    debug_kernel: str = ""  # what a dry run says of the debug kernel ("" when none is asked for)

    def lines(self) -> list[str]:
        """The plan, one line a step (what --dry-run prints)."""
        options, target, root = self.options, self.target, self.cached_root
        lines = [
            f"install host packages: {' '.join(self.missing_host_packages)}"
            if self.missing_host_packages
            else f"host packages present: {' '.join(self.host_packages)}"
        ]
        if target != HOST_ARCH:
            lines.append(f"run {target.debian} programs through qemu-user (binfmt_misc qemu-{target.uname})")
        if root is None:
            how = "rebuild" if options.rebuild else "build"
            lines.append(
                f"{how} the root of {options.kernel} with mmdebstrap (its kernel from the suite's package lists)"
            )
            where, abi = f"the {options.kernel} root", "<the suite's kernel>"
        else:
            moved = (
                "; a newer kernel in the suite's lists builds a new root"
                if options.kernel.strip().lower() == root.suite
                else ""
            )
            lines.append(f"use the cached root {root.root_dir} (kernel {root.abi}{moved})")
            where, abi = str(root.root_dir), root.abi
        if self.debug_kernel:
            where = f"a copy of {where} (made once; the suite's root, which other runs share, is left alone)"
            lines.append(f"{self.debug_kernel}; install it into {where}")
            abi = f"the {options.debug_kernel} debug kernel"
        if self.build == "cross":
            steps = ", ".join(step.name for step in default_steps(abi, cross=target, destdir="/stage"))
            lines.append(
                f"cross-build in the {options.kernel} cross root (gcc-{target.triplet}, the {target.debian} headers):"
                f" {steps}; copy into {where}; its ldconfig under qemu-user, depmod -b from here"
            )
        elif self.build == "in-root":
            steps = ", ".join(step.name for step in default_steps(abi))
            lines.append(f"copy the source into {where}/src and build there: {steps}")
        modules = "; ".join(shlex.join(["modprobe", load.name, *load.args]) for load in self.loads) or "no modules"
        lines.append(
            f"boot {abi} under {target.qemu_system}/TCG ({options.memory_mb} MiB, ivshmem {options.ivshmem_mb} MiB,"
            f" timeout {options.timeout:.0f} s): {modules}; run: {options.command}"
        )
        return lines


def plan_vm_test(options: VmTestOptions) -> VmTestPlan:
    """Decide what vm-test does for `options`; changes nothing."""
    check_kernel_spec(options.kernel)
    target = options.target
    check_flavour(target, options.flavour)
    wanted = tuple(host_packages(target))
    build = "" if not options.build else "cross" if target != HOST_ARCH else "in-root"
    if options.debug_kernel:
        debugkernel.check_debug_target(options.debug_kernel, options.kernel, options.arch)
    return VmTestPlan(
        options=options,
        target=target,
        host_packages=wanted,
        missing_host_packages=tuple(missing_debian_packages(list(wanted))),
        cached_root=None if options.rebuild else cached_suite_root(options.kernel, target, options.flavour or None),
        build=build,
        loads=default_loads(options.softgpu_args, options.gdrdrv_args) if options.load_modules else (),
        debug_kernel=debugkernel.describe(options.debug_kernel) if options.debug_kernel else "",
    )


def plan(options: VmTestOptions) -> list[str]:
    """What vm-test would install, build and boot, one line each; changes nothing."""
    return plan_vm_test(options).lines()


def vm_test(options: VmTestOptions) -> int:
    """Run the whole vm-test flow (the plan, printed on a dry run); returns the exit status for the task."""
    the_plan = plan_vm_test(options)
    if options.dry_run:
        for line in the_plan.lines():
            print(f"[dry-run] {line}", flush=True)
        return 0
    return execute(the_plan)


def execute(the_plan: VmTestPlan) -> int:
    """Carry out a plan of plan_vm_test; returns the exit status for the task."""
    options, target, loads = the_plan.options, the_plan.target, the_plan.loads
    start = time.monotonic()
    root = prepare_suite_root(
        options.kernel, refresh=options.refresh, rebuild=options.rebuild, arch=target, flavour=options.flavour or None
    )
    if options.debug_kernel:
        root = debugkernel.install_into_root(debugkernel.build(options.debug_kernel), root)
    if the_plan.build:
        if the_plan.build == "cross":
            from gdrkit.vm.cross import cross_build

            report = cross_build(root, kernel_choice(root), refresh=options.refresh)
        else:
            report = build_in_root(root)
        print_build_report(report)
        failed = [step.name for step in report.failed]
        if failed and not options.keep_going:
            raise die(
                f"the in-root build did not complete: {', '.join(failed)}",
                "fix the errors above, or boot anyway with --keep-going (or --no-build)",
            )
    log(f"booting {root.abi} ({root.suite}) under {target.qemu_system}/TCG: {options.command}")
    result = boot(
        root.kernel_image,
        root.modules_dir,
        root.root_dir,
        options.command,
        loads=loads,
        check_refcount=any(load.name == "gdrdrv" for load in loads),
        ivshmem_mb=options.ivshmem_mb,
        memory_mb=options.memory_mb,
        timeout=options.timeout,
        log_dir=options.log_dir or default_log_dir(root),
        arch=target,
        busybox=BUSYBOX if target == HOST_ARCH else root.busybox,
    )
    declared_page = image_page_size(root.kernel_image, target)
    status = exit_status(result, loads)
    if status == 0 and page_size_problem(result, declared_page):
        status = 1
    _print_earlier_findings(result)
    if result.kernel_log_findings or result.results.get("done") != "1":
        _print_kernel_log(result)
    elapsed = time.monotonic() - start
    print("\n".join(summary_lines(root, result, loads, elapsed, declared_page, options.debug_kernel)), flush=True)
    return status


def _print_earlier_findings(result: VmResult) -> None:
    """What killed each boot that was retried, so an artefact stays visible."""
    for number, attempt in enumerate(result.earlier_attempts, start=1):
        for finding in attempt.kernel_log_findings:
            print(f"kernel log, attempt {number} (booted again): {finding}", file=sys.stderr, flush=True)


def _print_kernel_log(result: VmResult) -> None:
    for finding in result.kernel_log_findings:
        print(f"kernel log: {finding}", file=sys.stderr, flush=True)
    source = result.kernel_log or result.console_log
    if source.exists():
        print(f"---- kernel log tail ({source}) ----", flush=True)
        print(klog.log_tail(source.read_text(errors="replace")), flush=True)
