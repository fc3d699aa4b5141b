"""`invoke vm-test`: boot a Debian kernel under qemu and run the kernel-level tests."""

from __future__ import annotations

from pathlib import Path

from invoke.context import Context
from gdrkit.tasks.convention import task
from invoke.exceptions import Exit

from gdrkit.vm import debugkernel
from gdrkit.vm.qemu import DEFAULT_IVSHMEM_MB, DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S
from gdrkit.vm.runner import DEFAULT_COMMAND, VmTestOptions, vm_test as run_vm_test


@task(
    name="vm-test",
    help={
        "kernel": "a Debian suite (bullseye, bookworm, trixie, sid) or a kernel ABI such as 6.12.57+deb13-amd64",
        "cmd": f"command to run in the VM as root (default: {DEFAULT_COMMAND})",
        "softgpu_args": "module parameters for softgpu, NAME=VALUE ..., e.g. 'force_ram=1' (the parameters of"
        " tests/softgpu/kmod's sources; others are refused before anything runs)",
        "gdrdrv_args": "module parameters for gdrdrv besides dbg_enabled=1, e.g. 'use_persistent_mapping=0'",
        "modules": "load softgpu and gdrdrv around the command (--no-modules: plain boot)",
        "build": "build and install the project in the suite's root first (--no-build: use what is there)",
        "keep_going": "boot even when some build steps failed",
        "refresh": "refresh the suite's package lists now instead of once a day",
        "rebuild": "throw the cached root away and build it again",
        "timeout": f"seconds before the VM is killed (default {DEFAULT_TIMEOUT_S})",
        "memory": f"guest memory in MiB (default {DEFAULT_MEMORY_MB})",
        "ivshmem": f"size of the ivshmem PCI BAR in MiB, 0 for none (default {DEFAULT_IVSHMEM_MB})",
        "log_dir": "where to keep console.log, kernel.log and results.txt (default: under the cache)",
        "dry_run": "print what would be installed, built and booted; change nothing",
        "arch": "the guest's architecture: amd64 (default) or arm64 (cross-built, booted on qemu's virt machine)",
        "flavour": "the kernel flavour, linux-image-<flavour> (default: the architecture's own, e.g. arm64;"
        " arm64-16k for 16 KiB pages)",
        "debug_kernel": "boot gdrkit's debug kernel instead of Debian's: kasan (KASAN, lockdep, UBSAN, kmemleak,"
        " DEBUG_OBJECTS, DEBUG_ATOMIC_SLEEP) or kcsan; built from bookworm's linux-source once (about an hour"
        " on 2 cores), then cached",
    },
)
def vm_test(
    c: Context,
    kernel: str = "bookworm",
    cmd: str = DEFAULT_COMMAND,
    softgpu_args: str = "",
    gdrdrv_args: str = "",
    modules: bool = True,
    build: bool = True,
    keep_going: bool = False,
    refresh: bool = False,
    rebuild: bool = False,
    timeout: int = DEFAULT_TIMEOUT_S,
    memory: int = DEFAULT_MEMORY_MB,
    ivshmem: int = DEFAULT_IVSHMEM_MB,
    log_dir: str = "",
    dry_run: bool = False,
    arch: str = "amd64",
    flavour: str = "",
    debug_kernel: str = "",
) -> None:
    """Boot a Debian kernel (TCG) with the project built for it; run a command with gdrdrv loaded.

    Exit status: the command's, 124 on timeout, 1 if the command passed but
    a module failed to load/unload, the pin refcount was not 0, or the
    kernel log shows a WARNING, BUG, oops, lockdep or PAT report (or, with
    --debug-kernel, any report of KASAN, UBSAN, kmemleak, DEBUG_OBJECTS or KCSAN).
    """
    options = VmTestOptions(
        kernel=kernel,
        command=cmd,
        softgpu_args=softgpu_args,
        gdrdrv_args=gdrdrv_args,
        load_modules=modules,
        build=build,
        keep_going=keep_going,
        refresh=refresh,
        rebuild=rebuild,
        timeout=timeout,
        memory_mb=memory,
        ivshmem_mb=ivshmem,
        log_dir=Path(log_dir) if log_dir else None,
        dry_run=dry_run,
        arch=arch,
        flavour=flavour,
        debug_kernel=debug_kernel,
    )
    status = run_vm_test(options)
    if status != 0:
        raise Exit(code=status)


@task(
    name="build-debug-kernel",
    help={
        "debug_kernel": "kasan (KASAN, lockdep, UBSAN, kmemleak, DEBUG_OBJECTS, DEBUG_ATOMIC_SLEEP) or kcsan",
        "dry_run": "say whether the kernel is cached or what would be built; change nothing",
    },
)
def build_debug_kernel(c: Context, debug_kernel: str = "kasan", dry_run: bool = False) -> None:
    """Build gdrkit's debug kernel from bookworm's linux-source once (about an hour on 2 cores; then cached).

    vm-test --debug-kernel builds it too when it is missing; this builds it
    ahead (a build that was interrupted resumes where it stopped).
    """
    debugkernel.check_flavour(debug_kernel)
    if dry_run:
        print(f"[dry-run] {debugkernel.describe(debug_kernel)}", flush=True)
        return
    kernel = debugkernel.build(debug_kernel)
    print(f"{debug_kernel} kernel {kernel.release}: {kernel.directory}", flush=True)
    print(f"build: {kernel.build_seconds:.0f} s (the attempt that finished it)", flush=True)


TASKS = [vm_test, build_debug_kernel]
