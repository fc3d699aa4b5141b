"""Root filesystems of Debian suites, built once with mmdebstrap and cached.

A root holds that suite's userland (minbase + build-essential + kmod), its
kernel image and the exact matching headers.  Modules for that kernel are
built inside it (chroot in a private mount and pid namespace, so nothing is
left mounted even if we are killed), with that suite's compiler, and
installed there; the VM then boots the same directory as its root.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from gdrkit.distro.arch import HOST_ARCH, Arch, flavour_of_abi
from gdrkit.distro.debian import mmdebstrap_command as mmdebstrap
from gdrkit.system import apt_install_hint, cache_dir, die, ensure_debian_packages, log, run, run_step
from gdrkit.version import REPO_ROOT
from gdrkit.vm.foreign import ensure_foreign_exec
from gdrkit.vm.suites import KernelChoice, resolve_kernel

# python3 and python3-numpy: the gdrcopy Python package is tested in the VM
# with the suite's own interpreter and NumPy (tests/python/vm/).  e2fsprogs:
# gdrdrv_ktest makes an ext4 filesystem (mke2fs) for a device node on a disk
# filesystem, which trixie's minbase no longer has.
BASE_PACKAGES = ("build-essential", "e2fsprogs", "kmod", "procps", "python3", "python3-numpy")
# A root of another architecture only runs what was cross-built for it
# (gdrkit.vm.cross): no compiler; its own static busybox for the initramfs.
FOREIGN_BASE_PACKAGES = ("busybox-static", "kmod", "procps")
# What this host needs to build roots and boot them (installed on first use).
HOST_PACKAGES = (HOST_ARCH.qemu_system_package, "mmdebstrap", "busybox-static", "zstd")
# And for roots of another architecture: its programs run under qemu-user
# (binfmt_misc) while mmdebstrap configures the root.
FOREIGN_HOST_PACKAGES = ("qemu-user-static", "binfmt-support", "arch-test")


def host_packages(arch: Arch = HOST_ARCH) -> tuple[str, ...]:
    """The host packages that building and booting roots of `arch` needs (pure)."""
    if arch == HOST_ARCH:
        return HOST_PACKAGES
    booting = tuple(p for p in HOST_PACKAGES if p != HOST_ARCH.qemu_system_package)
    return (arch.qemu_system_package, *booting, *FOREIGN_HOST_PACKAGES)


def base_packages(arch: Arch = HOST_ARCH) -> tuple[str, ...]:
    """The packages every root of `arch` has besides its kernel (pure)."""
    return BASE_PACKAGES if arch == HOST_ARCH else FOREIGN_BASE_PACKAGES


# Left out of every root: documentation, and the hook that would build an
# initramfs for the kernel (the VM boots with gdrkit's own).
DPKG_EXCLUDES = (
    "/usr/share/doc/*",
    "/usr/share/man/*",
    "/usr/share/info/*",
    "/usr/share/locale/*",
    "/etc/kernel/postinst.d/initramfs-tools",
)
# A lagging mirror can serve a Release file past its Valid-Until (seen with
# sid); signatures are still checked.
# The root is built under the invoking user's cache, which apt's _apt user
# cannot enter; download as root instead of warning about it.
APT_OPTIONS = (
    'Acquire::Check-Valid-Until "false"',
    'APT::Install-Recommends "false"',
    'APT::Sandbox::User "root"',
)
# Generous limits: they only exist so that a stuck download or build cannot hang a run.
ROOT_BUILD_TIMEOUT_S = 3600
STEP_TIMEOUT_S = 1800
GUEST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SOURCE_DIR = "src"


@dataclass(frozen=True)
class SuiteRoot:
    """A prepared root: where it is, which kernel it boots."""

    suite: str
    abi: str
    root_dir: Path
    arch: Arch = HOST_ARCH

    @property
    def busybox(self) -> Path:
        """The root's own static busybox (roots of another architecture have one; the host's serves amd64)."""
        return self.root_dir / "bin" / "busybox"

    @property
    def kernel_image(self) -> Path:
        return self.root_dir / "boot" / f"vmlinuz-{self.abi}"

    @property
    def modules_dir(self) -> Path:
        return self.root_dir / "lib" / "modules" / self.abi

    @property
    def source_dir(self) -> Path:
        return self.root_dir / SOURCE_DIR


def roots_dir() -> Path:
    path = cache_dir() / "vm" / "roots"
    path.mkdir(parents=True, exist_ok=True)
    return path


def root_name(choice: KernelChoice, extra_packages: Sequence[str] = ()) -> str:
    """`trixie-6.12.57+deb13-amd64`, plus a digest of any extra packages (another root)."""
    name = f"{choice.suite.name}-{choice.abi}"
    if extra_packages:
        digest = hashlib.sha256(",".join(sorted(extra_packages)).encode()).hexdigest()[:8]
        name += f"-x{digest}"
    return name


def mounts_below(path: Path, mounts_text: str) -> list[str]:
    """Mount points at or under `path` in /proc/mounts text, deepest first (pure)."""
    prefix = str(path).rstrip("/")
    found = []
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        target = fields[1].replace("\\040", " ")
        if target == prefix or target.startswith(prefix + "/"):
            found.append(target)
    return sorted(found, key=len, reverse=True)


def remove_tree(path: Path) -> None:
    """Delete a root, first detaching anything still mounted in it.

    A killed mmdebstrap can leave /dev or /proc bind-mounted inside its
    target, and deleting through such a mount would delete the host's files.
    """
    if not path.exists():
        return
    for target in mounts_below(path.resolve(), Path("/proc/mounts").read_text()):
        log(f"unmounting {target} left behind in {path}")
        run(["umount", "--lazy", target])
    shutil.rmtree(path)


def mmdebstrap_command(choice: KernelChoice, target: Path, extra_packages: Sequence[str] = ()) -> list[str]:
    """The mmdebstrap command line that builds the root for `choice` (pure)."""
    if choice.arch == HOST_ARCH:
        packages = [*BASE_PACKAGES, choice.image_package, choice.headers_package, *extra_packages]
        architecture = ""
    else:
        # No headers: the modules are built elsewhere (gdrkit.vm.cross), with a cross compiler.
        packages = [*FOREIGN_BASE_PACKAGES, choice.image_package, *extra_packages]
        architecture = choice.arch.debian
    return mmdebstrap(
        choice.suite, str(target), packages, architecture=architecture, apt_options=APT_OPTIONS,
        dpkg_excludes=DPKG_EXCLUDES,
    )  # fmt: skip


def lock_file(root_dir: Path) -> Path:
    """The lock that serializes building in and (re)creating `root_dir`."""
    return root_dir.with_name(f"{root_dir.name}.lock")


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (other gdrkit runs wait for it)."""
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another gdrkit run that holds {path}")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def cached_suite_root(kernel: str, arch: Arch = HOST_ARCH, flavour: str | None = None) -> SuiteRoot | None:
    """The newest root already built for `kernel` (suite name or ABI string), without asking apt (read-only).

    What a dry run reports; a real run may build a newer root where the
    suite's lists have moved on to a newer kernel.
    """
    from gdrkit.distro.debian import SUITES
    from gdrkit.vm.suites import normalize_abi

    spec = kernel.strip().lower()
    wanted_flavour = flavour or arch.kernel_flavours[0]
    found = []
    for stamp in sorted(roots_dir().glob("*.json")):
        try:
            facts = json.loads(stamp.read_text())
        except (OSError, ValueError):
            continue
        abi = str(facts.get("abi", ""))
        if facts.get("arch", HOST_ARCH.debian) != arch.debian:
            continue
        if spec in SUITES and (facts.get("suite") != spec or not abi.endswith(f"-{wanted_flavour}")):
            continue
        if spec not in SUITES and abi != normalize_abi(kernel, arch):
            continue
        if "-x" in stamp.stem.removeprefix(f"{facts.get('suite')}-{facts.get('abi')}"):
            continue  # a root with extra packages is another root
        root = SuiteRoot(str(facts["suite"]), abi, stamp.with_suffix(""), arch)
        if root.kernel_image.exists():
            found.append((stamp.stat().st_mtime, root))
    return max(found, key=lambda pair: pair[0])[1] if found else None


def prepare_suite_root(
    kernel: str,
    *,
    refresh: bool = False,
    extra_packages: Sequence[str] = (),
    rebuild: bool = False,
    arch: Arch = HOST_ARCH,
    flavour: str | None = None,
) -> SuiteRoot:
    """The cached root for `kernel` (suite name or ABI string) of `arch`, built if missing.

    `extra_packages` go into the root too; a different set is a different root.
    """
    ensure_debian_packages(host_packages(arch))
    ensure_foreign_exec(arch)
    choice = resolve_kernel(kernel, refresh=refresh, arch=arch, flavour=flavour)
    name = root_name(choice, extra_packages)
    root = SuiteRoot(choice.suite.name, choice.abi, roots_dir() / name, arch)
    stamp = roots_dir() / f"{name}.json"
    wanted = root_packages(extra_packages, arch)
    if stamp.exists() and root.kernel_image.exists() and not rebuild:
        if not missing_packages(_stamp_facts(stamp), wanted):
            return root  # built before; no need to wait for a build running in it
        with locked(lock_file(root.root_dir)):
            _top_up(root, stamp, wanted)
        return root
    with locked(lock_file(root.root_dir)):
        if rebuild and root.root_dir.exists():
            log(f"removing {root.root_dir} to rebuild it")
            remove_tree(root.root_dir)
            stamp.unlink(missing_ok=True)
        if stamp.exists() and root.kernel_image.exists():
            return root
        seconds = _build_root(choice, root.root_dir, extra_packages)
        facts: dict[str, object] = {"suite": root.suite, "abi": root.abi, "build_seconds": round(seconds, 1)}
        facts["packages"] = wanted
        if arch != HOST_ARCH:
            facts["arch"] = arch.debian
        stamp.write_text(json.dumps(facts))
        flavour = flavour_of_abi(root.abi)
        older = sorted(
            p.name
            for p in roots_dir().glob(f"{root.suite}-*")
            if p.is_dir() and p != root.root_dir and flavour_of_abi(p.name) == flavour
        )
        if older:
            log(
                f"older {root.suite} roots are still cached: {', '.join(older)} (in {roots_dir()}; delete to save disk)"
            )
    if not root.kernel_image.exists():
        raise die(f"the root {root.root_dir} has no {root.kernel_image.name}", "rebuild it with --rebuild")
    return root


def root_packages(extra_packages: Sequence[str] = (), arch: Arch = HOST_ARCH) -> list[str]:
    """The packages a root is built with besides its kernel, as its stamp records them (pure)."""
    return sorted({*base_packages(arch), *extra_packages})


def missing_packages(facts: dict[str, object], wanted: Sequence[str]) -> list[str]:
    """What of `wanted` a root whose stamp says `facts` was not built with (pure).

    Stamps from before roots recorded their packages had BASE_PACKAGES' first
    three only.
    """
    recorded = facts.get("packages")
    have = set(recorded) if isinstance(recorded, list) else {"build-essential", "kmod", "procps"}
    return [package for package in wanted if package not in have]


def _stamp_facts(stamp: Path) -> dict[str, object]:
    try:
        facts = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return {}
    return facts if isinstance(facts, dict) else {}


def _top_up(root: SuiteRoot, stamp: Path, wanted: Sequence[str]) -> None:
    """Install the packages BASE_PACKAGES gained since `root` was built, in place.

    In place, not a rebuild: other runs may be booting the cached root, and
    what was built in it (its /src, the installed modules) stays usable.
    """
    facts = _stamp_facts(stamp)
    missing = missing_packages(facts, wanted)
    if not missing:
        return  # another run added them while this one waited for the lock
    log(f"adding {', '.join(missing)} to the cached root {root.root_dir.name} (the root's package list grew)")
    status, output = in_root(
        root.root_dir,
        "apt-get -q update && DEBIAN_FRONTEND=noninteractive apt-get -q -y install --no-install-recommends "
        + " ".join(missing)
        + " && apt-get clean",
    )
    if status != 0:
        raise die(
            f"installing {', '.join(missing)} into {root.root_dir} failed:\n{output[-2000:]}",
            "check network access to deb.debian.org, or rebuild the root (./toolkit vm-test --rebuild)",
        )
    facts["packages"] = list(wanted)
    stamp.write_text(json.dumps(facts))


def build_root_with_mmdebstrap(what: str, target: Path, command: Callable[[Path], list[str]]) -> float:
    """Build a root (`what`, for the log) into `target` with mmdebstrap as `command(partial)` gives it.

    It is built beside the target and moved in place only when complete, so an
    interrupted build leaves nothing a later run could take for a root.
    Returns the seconds it took.
    """
    if not shutil.which("mmdebstrap"):
        raise die("mmdebstrap not found", apt_install_hint(["mmdebstrap"]))
    if os.geteuid() != 0:
        raise die(f"building {what} needs root (mmdebstrap, chroot)", "run the task as root")
    partial = target.with_name(f".{target.name}.partial")
    remove_tree(partial)
    remove_tree(target)
    start = time.monotonic()
    try:
        run_step(
            f"building {what} (mmdebstrap; once, cached in {target})",
            command(partial),
            timeout=ROOT_BUILD_TIMEOUT_S,
            hint="see the log; a mirror that is out of reach or a package missing from the suite are the usual causes",
        )
        partial.rename(target)
    finally:
        remove_tree(partial)
    return time.monotonic() - start


def _build_root(choice: KernelChoice, target: Path, extra_packages: Sequence[str]) -> float:
    return build_root_with_mmdebstrap(
        f"the {choice.suite.name} root with kernel {choice.abi}",
        target,
        lambda partial: mmdebstrap_command(choice, partial, extra_packages),
    )


# --- running things inside a root ---------------------------------------------


def chroot_command(root_dir: Path, script: str) -> list[str]:
    """argv that runs `script` with sh inside `root_dir` (pure).

    The chroot lives in its own mount and pid namespace: /proc is mounted
    there only, and when the namespace ends (normally, on error or if we
    are killed) the mount and every process in it go with it.
    """
    return [
        "unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child",
        f"--mount-proc={root_dir / 'proc'}",
        "chroot", str(root_dir),
        "/usr/bin/env", "-i", f"PATH={GUEST_PATH}", "HOME=/root", "LANG=C.UTF-8",
        "/bin/sh", "-c", script,
    ]  # fmt: skip


def in_root(root_dir: Path, script: str, *, timeout: float = STEP_TIMEOUT_S) -> tuple[int, str]:
    """Run `script` in the root; (exit status, its output with stderr merged)."""
    result = run(chroot_command(root_dir, f"exec 2>&1\n{script}"), capture=True, check=False, timeout=timeout)
    return result.returncode, result.stdout


# --- the repository's source in the root ---------------------------------------


def source_files(repo: Path = REPO_ROOT) -> list[str]:
    """The repository's files: tracked, plus untracked ones git does not ignore."""
    out = run(["git", "-C", str(repo), "ls-files", "-co", "--exclude-standard", "-z"], capture=True).stdout
    return sorted({name for name in out.split("\0") if name})


def sync_source(root: SuiteRoot, repo: Path = REPO_ROOT) -> int:
    """Copy the source into the root's /src; returns how many files changed.

    Unchanged files (same size and mtime) are left alone so builds stay
    incremental; files gone from the repository since the last sync are
    removed, build products are kept.
    """
    manifest = root.root_dir / SOURCE_DIR / ".gdrkit-source-files"
    previous = set(manifest.read_text().splitlines()) if manifest.exists() else set()
    files = [name for name in source_files(repo) if (repo / name).is_file()]
    changed = 0
    for name in files:
        src, dst = repo / name, root.source_dir / name
        stat = src.stat()
        if dst.exists() and not dst.is_symlink():
            current = dst.stat()
            if current.st_size == stat.st_size and current.st_mtime_ns == stat.st_mtime_ns:
                continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        changed += 1
    for gone in previous - set(files):
        (root.source_dir / gone).unlink(missing_ok=True)
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text("\n".join(files) + "\n")
    return changed


# --- building and installing in the root -----------------------------------------


@dataclass(frozen=True)
class BuildStep:
    """One make (or shell) step of the in-root build, and the steps it needs."""

    name: str
    script: str
    needs: tuple[str, ...] = ()


@dataclass
class StepResult:
    name: str
    status: str  # "ok", "failed" or "skipped"
    seconds: float = 0.0
    output: str = ""
    reason: str = ""


@dataclass
class BuildReport:
    steps: list[StepResult] = field(default_factory=list)

    @property
    def failed(self) -> list[StepResult]:
        return [step for step in self.steps if step.status != "ok"]

    def summary(self) -> str:
        lines = []
        for step in self.steps:
            note = f" ({step.reason})" if step.reason else ""
            lines.append(f"  {step.name:<18} {step.status:<8} {step.seconds:6.1f}s{note}")
        return "\n".join(lines)


def default_steps(
    abi: str, prefix: str = "/usr/local", jobs: int = 2, *, cross: Arch | None = None, destdir: str = ""
) -> list[BuildStep]:
    """What vm-test builds and installs in the root, in order (pure).

    One make per target so that one part that does not build yet does not
    hide the others; softgpu first because gdrdrv links against its
    Module.symvers.  With `cross`, every part is built with that
    architecture's cross compiler against `/usr/src/linux-headers-<abi>`
    and installed under `destdir` (gdrkit.vm.cross copies it into the
    target root, which runs ldconfig and depmod itself).
    """
    src = f"/{SOURCE_DIR}"
    common = f"KVER={abi} P2P_SYMVERS={src}/tests/softgpu/kmod/Module.symvers prefix={prefix}"
    env = ""
    if cross is not None:
        common += f" KDIR=/usr/src/linux-headers-{abi} DESTDIR={destdir}"
        # In the environment, so that the probe scripts' own makes see them too.
        env = f"ARCH={cross.kernel} CROSS_COMPILE={cross.cross_prefix} CC={cross.cross_prefix}gcc "

    def make(target: str) -> str:
        return f"{env}make -j{jobs} -C {src} {target} {common}"

    steps = [
        BuildStep("softgpu_kmod", make("softgpu_kmod"), ("modules_abi",) if cross else ()),
        BuildStep("softgpu_lib", make("softgpu_lib")),
        BuildStep("driver", make("driver"), ("softgpu_kmod",)),
        BuildStep("lib", make("lib")),
        BuildStep("exes", make("exes"), ("lib", "softgpu_lib")),
        BuildStep("ktests", make("ktests"), ("softgpu_lib",)),
        BuildStep("softgpu_install", make("softgpu_install"), ("softgpu_kmod", "softgpu_lib")),
        BuildStep("driver_install", make("driver_install"), ("driver",)),
        BuildStep("lib_install", make("lib_install"), ("lib",)),
        BuildStep("exes_install", make("exes_install"), ("exes",)),
        BuildStep("ktests_install", make("ktests_install"), ("ktests",)),
    ]
    # One root builds for several kernels in turn (a cross root for each flavour,
    # a native root for Debian's kernel and gdrkit's debug kernels), and kbuild's
    # records (relative to the kernel tree) cannot tell those apart: the
    # modules' objects are cleaned when the kernel changes.
    marker = f"{src}/.gdrkit-modules-abi"
    kdir = f" KDIR=/usr/src/linux-headers-{abi}" if cross is not None else ""
    kclean = " && ".join(f"{env}make -C {src}/{part} clean KVER={abi}{kdir}"
                         for part in ("tests/softgpu/kmod", "gdrdrv"))  # fmt: skip
    switch = f'[ "$(cat {marker} 2>/dev/null)" = {abi} ] || {{ {kclean} && echo {abi} > {marker}; }}'
    if cross is not None:
        return [BuildStep("clean_stage", f"rm -rf {destdir}"), BuildStep("modules_abi", switch), *steps]
    return [
        BuildStep("modules_abi", switch),
        *steps,
        BuildStep("ldconfig", "ldconfig"),
        BuildStep("depmod", f"depmod -a {abi}"),
    ]


StepRunner = Callable[[str], tuple[int, str]]


def run_steps(steps: Sequence[BuildStep], execute: StepRunner) -> BuildReport:
    """Run `steps` in order; a step whose needs failed is skipped, not run."""
    report = BuildReport()
    state: dict[str, str] = {}
    for step in steps:
        missing = [need for need in step.needs if state.get(need) != "ok"]
        if missing:
            result = StepResult(step.name, "skipped", reason=f"needs {', '.join(missing)}")
        else:
            log(f"build step {step.name}: {step.script}")
            start = time.monotonic()
            status, output = execute(step.script)
            result = StepResult(step.name, "ok" if status == 0 else "failed", time.monotonic() - start, output)
            if status != 0:
                result.reason = f"exit {status}"
        state[step.name] = result.status
        report.steps.append(result)
    return report


SourceState = tuple[tuple[str, int, int], ...]

# What this process built: (root, steps) -> (the source it built, the report).
_built: dict[tuple[str, tuple[str, ...]], tuple[SourceState, BuildReport]] = {}


def source_state(repo: Path = REPO_ROOT) -> SourceState:
    """The source files with their sizes and mtimes: what sync_source compares."""
    state = []
    for name in source_files(repo):
        path = repo / name
        if path.is_file():
            stat = path.stat()
            state.append((name, stat.st_size, stat.st_mtime_ns))
    return tuple(state)


def build_in_root(root: SuiteRoot, steps: Sequence[BuildStep] | None = None, repo: Path = REPO_ROOT) -> BuildReport:
    """Copy the source into the root, then build and install it there (see default_steps).

    A build that this process already did, of the same source into the same
    root, succeeded and is not run again (every pytest module that boots a
    suite asks for one; each make of a kernel module costs half a minute
    even with nothing to do).
    """
    steps = list(steps or default_steps(root.abi))
    key = (str(root.root_dir), tuple(step.script for step in steps))
    with locked(lock_file(root.root_dir)):
        state = source_state(repo)
        done = _built.get(key)
        if done is not None and done[0] == state and not done[1].failed:
            log(f"{root.source_dir}: this source was built and installed there already")
            return done[1]
        changed = sync_source(root, repo)
        log(f"source synced into {root.source_dir} ({changed} file(s) changed)")
        report = run_steps(steps, lambda script: in_root(root.root_dir, script))
        _built[key] = (state, report)
        return report
