"""Boot Debian kernels under qemu (TCG) and run a command with our modules loaded.

Kernel modules are only ever loaded inside these VMs, never on the host.
The guest's root is a host directory exported with virtio-9p, so there is
no disk image: a suite's cached root, or any directory (for example a
container's exported filesystem with a DKMS-built module in it).

API (all raise `gdrkit.system.UserError`, with a hint, on expected failures):

`prepare_suite_root(kernel, *, refresh=False, extra_packages=(), rebuild=False, arch=HOST_ARCH,
                   flavour=None) -> SuiteRoot`
    `kernel` is a suite (bullseye, bookworm, trixie, sid) or a kernel ABI
    string (`6.12.57+deb13-amd64`; the suite that has it is found).  Builds
    once with mmdebstrap, under `cache_dir()/vm/roots/<suite>-<abi>`: minbase
    + build-essential + kmod + procps + `linux-image-<abi>` +
    `linux-headers-<abi>`.  `SuiteRoot` has `suite`, `abi`, `root_dir`,
    `kernel_image`, `modules_dir`, `source_dir`.

`build_in_root(root, steps=None, repo=REPO_ROOT) -> BuildReport`
    Copies the repository (`git ls-files -co --exclude-standard`) into
    `<root>/src` and runs `steps` (default: `default_steps(abi)`: make softgpu,
    driver, lib, exes, ktests and their installs with `KVER=<abi>
    prefix=/usr/local`, then ldconfig and `depmod -a <abi>`) chrooted in the
    root, so the suite's own compiler builds for the suite's kernel.  A step
    whose prerequisites failed is skipped.  `BuildReport.failed` lists what
    did not succeed, each with its output.  `in_root(root_dir, script)` runs
    any shell script there and returns (status, output).

`boot(kernel_image, modules_dir, root_dir, command, *, loads=(), check_refcount=False,
      ivshmem_mb=256, memory_mb=2048, timeout=900, log_dir=None, extra_kernel_args=(),
      vram_copy=None, early_death_retries=1, arch=HOST_ARCH, busybox=BUSYBOX, init="") -> VmResult`
    Boots `kernel_image` (2 vCPUs, TCG) with a generated initramfs holding
    busybox and the virtio-pci/9p modules from `modules_dir` (that kernel's
    `/lib/modules/<abi>`), mounts `root_dir` as root, `modprobe`s each
    `ModuleLoad(name, args)` with the root's own kmod (so the root must hold
    `/lib/modules/<abi>` with modules.dep, as a root with the kernel package
    and a depmod after installing modules does), runs `command` with
    `/bin/sh -c` as root (PATH set, LD_LIBRARY_PATH unset, cwd /),
    reads the gdrdrv refcount if asked, `rmmod`s the modules in reverse and
    powers off.  The console is streamed live and kept in
    `<log_dir>/console.log`; the full kernel log in `<log_dir>/kernel.log`.
    `ivshmem_mb > 0` adds the ivshmem-plain PCI device (1af4:1110, BAR2)
    backed by a /dev/shm file that is removed afterwards (copied first to
    `vram_copy` if given, to check from the host what the guest wrote).
    Without `log_dir` the logs stay in a fresh /tmp/gdrkit-vm-* directory.
    `VmResult` has `status` (the command's exit status, None if it did not
    run or finish), `console_log`, `kernel_log_findings`, `seconds`,
    `timed_out`, `results` (raw key=value report), `refcount`, and
    `problems(loads)`: every reason besides the status that fails the run.
    A guest that died before /init reported `ours_started` (printed just
    before the first module load) died before anything of ours ran, as TCG
    sometimes makes a kernel do: it is booted again, once by default.  The
    result is the last boot's; `earlier_attempts` holds the others (their
    logs moved to `<log_dir>/attempt-N/`) and `attempt_lines()` describes
    every boot.  A failure after the marker, or a timeout, is never retried.
    With `init` (a program in the root, e.g. `/lib/systemd/systemd`) /init
    hands the root to it as PID 1 instead of running `command`.

Other architectures (`arch=ARCHES["arm64"]`, gdrkit.distro.arch):
    `prepare_suite_root(kernel, arch=, flavour=)` builds an arm64 root
    (mmdebstrap under qemu-user, no compiler, its own static busybox);
    `gdrkit.vm.cross.cross_build(root, choice)` builds the project for it
    with Debian's cross toolchain in a cross root and installs it there;
    `boot(..., arch=, busybox=root.busybox)` boots it on qemu's virt machine.

Debug kernels (`gdrkit.vm.debugkernel`):
    `debugkernel.build(flavour)` builds `kasan` (KASAN, lockdep, UBSAN,
    kmemleak, DEBUG_OBJECTS, DEBUG_ATOMIC_SLEEP) or `kcsan` from bookworm's
    `linux-source-6.1`, once, cached by source version, compiler and
    options; `debugkernel.install_into_root(kernel, root)` returns a copy of
    `root` (made once) booting it, with its modules and build tree; the
    suite's root itself is left alone.

`scan_kernel_log(text, *, kernel_lines_only=False) -> list[Finding]`
    The kernel-log oracle: the debug kernels' judges each by name (KASAN,
    KCSAN, UBSAN, lockdep, sleep in atomic context, kmemleak, DEBUG_OBJECTS),
    then oops, BUG, WARNING, bad page, GPF, Call Trace, panic, PAT conflicts.

`vm_test(options) -> int`
    The whole `./toolkit vm-test` flow, from a `VmTestOptions`.
"""

from gdrkit.vm.initramfs import ModuleLoad
from gdrkit.vm.klog import Finding, scan_kernel_log
from gdrkit.vm.qemu import VmResult, boot
from gdrkit.vm.rootfs import (
    BuildReport,
    BuildStep,
    SuiteRoot,
    build_in_root,
    default_steps,
    in_root,
    prepare_suite_root,
)
from gdrkit.vm.runner import VmTestOptions, default_loads, vm_test
from gdrkit.vm.suites import SUITES, KernelChoice, resolve_kernel

__all__ = [
    "SUITES",
    "BuildReport",
    "BuildStep",
    "Finding",
    "KernelChoice",
    "ModuleLoad",
    "SuiteRoot",
    "VmResult",
    "VmTestOptions",
    "boot",
    "build_in_root",
    "default_loads",
    "default_steps",
    "in_root",
    "prepare_suite_root",
    "resolve_kernel",
    "scan_kernel_log",
    "vm_test",
]
