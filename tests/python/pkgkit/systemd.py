"""gdrdrv.service under Debian's own systemd as PID 1, in the VM.

The root is a cached suite root (gdrkit.vm.rootfs) with systemd-sysv added,
never changed itself: each run boots an overlay of it whose upper layer is
this run's own directory, so runs of other trees and clones share nothing
they write.  Into the overlay go softgpu built as the module `nvidia` (loaded
at boot by systemd-modules-load, as a node's NVIDIA driver is), the
prebuilt-module package sets of this release and of the previous one (built
here for the root's kernel), a stand-in for nvidia-persistenced that holds
the driver open, tests/packaging/systemd_scenario.sh and the unit that runs
it.  The VM then boots twice on the same overlay: the first
boot installs and drives the unit, the second finds gdrdrv loaded at boot,
upgrades, removes and purges.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gdrkit.packaging import build, model
from gdrkit.system import die, log, run
from gdrkit.version import REPO_ROOT
from gdrkit.vm.rootfs import SuiteRoot, in_root, prepare_suite_root, remove_tree
from pkgkit import scenarios
from pkgkit.faults import PREVIOUS_RELEASE, PASSED_MARK, Outcome

SUITE = scenarios.SUITE  # bookworm: what this host builds packages for
ROOT_PACKAGES = ("systemd-sysv",)
GUEST_DIR = "/opt/gdrkit-systemd"
SCRIPT = "systemd_scenario.sh"
UNIT = "gdrkit-scenario.service"
# NVIDIA's persistence daemon, stood in for: it holds the driver open, as on a GPU node.
PERSISTENCED_UNIT = "nvidia-persistenced.service"
PERSISTENCED_SCRIPT = "persistenced_standin.sh"
SYSTEMD = "/lib/systemd/systemd"
# Under TCG: systemd's boot takes 1-2 min, each dpkg run with its depmod 1-3 min.
BOOT_TIMEOUT_S = 1500
# Units that would run apt or ask questions in a root that is offline and unattended.
MASKED_UNITS = ("apt-daily.timer", "apt-daily-upgrade.timer", "systemd-firstboot.service")


@dataclass(frozen=True)
class KmodSets:
    """The prebuilt-module .deb sets for one kernel: this release and the previous one."""

    new: Path
    old: Path
    version: str
    previous: str
    kernel: str


def softgpu_as_nvidia(kernel: str, work: Path) -> tuple[Path, Path]:
    """softgpu built for `kernel` under the module name nvidia, in a copy of its source.

    Returns (nvidia.ko, the directory of its "NVIDIA driver sources" that
    gdrdrv's build reads the P2P declarations and symbol versions from).
    """
    copy = work / "softgpu"
    shutil.rmtree(copy, ignore_errors=True)
    # kmod/ includes ../include/softgpu_uapi.h.
    for part in ("kmod", "include"):
        shutil.copytree(
            REPO_ROOT / "tests" / "softgpu" / part, copy / part, ignore=shutil.ignore_patterns("*.o", "*.ko", ".*.cmd")
        )
    source = copy / "kmod"
    staged = work / "nvidia-src"
    run(
        ["make", "-s", "-C", str(source), "install-nvidia-src", f"KVER={kernel}", "SOFTGPU_MODULE=nvidia",
         f"DESTDIR={staged}", "NVIDIA_SRC_INSTALL_DIR=/nvidia-softgpu"],
        capture=True,
    )  # fmt: skip
    return source / "nvidia.ko", staged / "nvidia-softgpu"


def build_kmod_sets(kernel: str, nvidia_src: Path, ref: str = "HEAD") -> KmodSets:
    """The packages of `ref` with gdrdrv prebuilt for `kernel`: as this version and as PREVIOUS_RELEASE.

    Kept in this tree's build/ by commit and kernel: a second run of the
    scenario on the same commit boots at once.
    """
    build.ensure_build_deps([kernel], kinds=("deb",), lint=False)
    source = build.source_at(ref)
    work = REPO_ROOT / "build" / "systemd-debs" / f"{source.commit[:12]}-{kernel}"
    sets = {}
    for name, version in (("new", ""), ("old", PREVIOUS_RELEASE)):
        out = work / name
        plan = model.plan(
            scenarios.FAMILY, kernels=[kernel], with_dkms=False, source_date_epoch=source.epoch,
            package_version=version,
        )  # fmt: skip
        done = out / ".complete"
        if not done.exists():
            shutil.rmtree(out, ignore_errors=True)
            build.build_debs(plan, source, out, nvidia_src_dir=str(nvidia_src))
            done.write_text(source.commit + "\n")
        else:
            log(f"the {name} set of {source.commit[:12]} for {kernel} is built already: {out}")
        sets[name] = (out, plan.version)
    return KmodSets(sets["new"][0], sets["old"][0], sets["new"][1], sets["old"][1], kernel)


def prepare_root() -> SuiteRoot:
    """The cached bookworm root with systemd as its init (built once, then only read)."""
    return prepare_suite_root(SUITE, extra_packages=ROOT_PACKAGES)


@contextmanager
def overlay(lower: Path, work: Path) -> Iterator[Path]:
    """`lower` mounted as an overlay whose changes go to `work` only; the merged directory."""
    upper, scratch, merged = work / "upper", work / "overlay-work", work / "root"
    for path in (upper, scratch, merged):
        remove_tree(path)
        path.mkdir(parents=True)
    run(["mount", "-t", "overlay", "overlay", "-o", f"lowerdir={lower},upperdir={upper},workdir={scratch}",
         str(merged)])  # fmt: skip
    try:
        yield merged
    finally:
        run(["umount", str(merged)], check=False)


def populate(merged: Path, root: SuiteRoot, sets: KmodSets, nvidia_ko: Path) -> None:
    """softgpu as nvidia (loaded at boot), the package sets, the scenario and its unit."""
    extra = merged / "lib" / "modules" / root.abi / "extra"
    extra.mkdir(parents=True, exist_ok=True)
    shutil.copy2(nvidia_ko, extra / "nvidia.ko")
    (merged / "etc" / "modules-load.d" / "nvidia.conf").write_text("nvidia\n")
    guest = merged / GUEST_DIR.lstrip("/")
    for name in ("old", "new"):
        (guest / name).mkdir(parents=True, exist_ok=True)
        for deb in (sets.old if name == "old" else sets.new).glob("*.deb"):
            shutil.copy2(deb, guest / name / deb.name)
    for name in (SCRIPT, "lib.sh", PERSISTENCED_SCRIPT):
        shutil.copy2(scenarios.SCRIPTS / name, guest / name)
    for unit in (UNIT, PERSISTENCED_UNIT):
        shutil.copy2(scenarios.SCRIPTS / unit, merged / "etc" / "systemd" / "system" / unit)
    status, output = in_root(
        merged,
        f"depmod -a {root.abi} && systemd-machine-id-setup && systemctl enable {UNIT} {PERSISTENCED_UNIT}"
        f" && systemctl mask {' '.join(MASKED_UNITS)}",
    )
    if status != 0:
        raise die(f"preparing the systemd root failed:\n{output[-3000:]}")


@dataclass(frozen=True)
class BootOutcome:
    outcome: Outcome
    problems: list[str]
    seconds: float


def boot_phase(root: SuiteRoot, merged: Path, args: list[str], log_dir: Path) -> BootOutcome:
    """Boot the overlay with systemd as PID 1; the scenario runs `args` and powers off."""
    from gdrkit.vm import boot

    guest = merged / GUEST_DIR.lstrip("/")
    (guest / "phase.env").write_text(f"SCENARIO_ARGS={' '.join(args)}\n")
    phase_log = merged / "var" / "log" / f"gdrkit-systemd-{args[0]}.log"
    phase_log.unlink(missing_ok=True)
    result = boot(
        root.kernel_image, root.modules_dir, merged, "", init=SYSTEMD, timeout=BOOT_TIMEOUT_S, log_dir=log_dir,
        ivshmem_mb=64,
    )  # fmt: skip
    if phase_log.exists():
        output = phase_log.read_text(errors="replace")
        (log_dir / phase_log.name).write_text(output)
    else:
        output = result.console_log.read_text(errors="replace") if result.console_log.exists() else ""
    passed = result.status == 0 and PASSED_MARK in output
    return BootOutcome(Outcome(passed, output), result.problems(), result.seconds)


def run_scenario(sets: KmodSets, root: SuiteRoot, nvidia_ko: Path, log_dir: Path) -> list[BootOutcome]:
    """Both boots on one overlay of `root` (the second only after the first passed)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    (REPO_ROOT / "build").mkdir(exist_ok=True)
    # In this tree's build/: its own upper layer, whoever else boots the same cached root.
    scratch = Path(tempfile.mkdtemp(prefix="gdrkit-systemd-", dir=REPO_ROOT / "build"))
    try:
        with overlay(root.root_dir, scratch) as merged:
            populate(merged, root, sets, nvidia_ko)
            first = boot_phase(root, merged, ["install", sets.previous, sets.kernel], log_dir / "install")
            outcomes = [first]
            if first.outcome.passed and not first.problems:
                log("first boot passed: booting again")
                second = ["reboot", sets.previous, sets.version, sets.kernel]
                outcomes.append(boot_phase(root, merged, second, log_dir / "reboot"))
    finally:
        remove_tree(scratch)
    return outcomes
