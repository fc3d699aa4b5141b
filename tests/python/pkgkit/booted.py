"""The lifecycle paths with a real boot between steps, under systemd and under sysvinit-core.

lifecycle.sh reads, from a container's root, what a boot would do; here each
step of a path runs the same script (one step at a time, LIFECYCLE_STATE)
chrooted in an overlay of a cached bookworm root that has dkms, udev and one
init system (systemd-sysv, or sysvinit-core without systemd), and the VM
then boots that root with its own init as PID 1 to see what the boot does:
softgpu, built as the module nvidia, is loaded at boot as a node's driver
is; lifecycle_boot.sh reports at the end of the boot whether gdrdrv was
loaded and by what, /dev/gdrdrv's mode and group, dangling links and the
kernel's gdrdrv lines; `judge_boot` holds that to what the step should give.

The DKMS builds run chrooted on the host (under TCG each takes 5-15 min);
only the boots run under qemu.  One boot of the fresh root comes first: the
files a boot itself makes are then part of the start snapshot that the last
purge is compared with.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gdrkit.system import die, log
from gdrkit.version import REPO_ROOT
from gdrkit.vm.rootfs import SuiteRoot, in_root, prepare_suite_root, remove_tree
from pkgkit import scenarios
from pkgkit.faults import PASSED_MARK, Outcome
from pkgkit.systemd import overlay

SUITE = scenarios.SUITE
GUEST_DIR = "/opt/gdrkit-lifecycle"
# Where lifecycle.sh keeps its state between steps: under /var/log, which its snapshot skips.
STATE_DIR = "/var/log/gdrkit-lifecycle/state"
BOOT_LOG = "var/log/gdrkit-lifecycle/boot.log"
ROOT_PACKAGES = ("dkms", "udev")
GUEST_FILES = (
    "lifecycle.sh",
    "lib.sh",
    "lifecycle_root.sh",
    "lifecycle_boot.sh",
    "lifecycle_unfix.sh",
    "gdrkit-lifecycle-boot.service",
    "gdrkit-lifecycle-boot.init",
)
# Under TCG a boot with systemd takes 1-3 min, with sysvinit about 1; generous.
BOOT_TIMEOUT_S = 900


@dataclass(frozen=True)
class Init:
    """An init system: the package that makes it the root's init, and PID 1's program."""

    name: str
    package: str
    program: str


INITS = {
    "systemd": Init("systemd", "systemd-sysv", "/lib/systemd/systemd"),
    "sysvinit": Init("sysvinit", "sysvinit-core", "/sbin/init"),
}

# What NVIDIA's /etc/init.d/gdrdrv (the stand-in, tests/packaging/reference/gdrdrv.init.sh) prints
# when it starts, and when it finds gdrdrv loaded by something else first.
SCRIPT_RAN = re.compile(r"nvidia is (not )?loaded")
SCRIPT_FOUND_LOADED = re.compile(r"gdrdrv is loaded already")
SCRIPT_NODE_FAILED = re.compile(r"/dev/gdrdrv not created")
ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
# What our unit is, and what systemd's generator makes of NVIDIA's script.
OUR_UNIT = "FragmentPath=/lib/systemd/system/gdrdrv.service"
GENERATED_UNIT = "SourcePath=/etc/init.d/gdrdrv"


@dataclass(frozen=True)
class Expected:
    """What a boot after a step should show: who loads gdrdrv (None: nothing), and /dev/gdrdrv ("666 video", "none")."""

    loader: str | None
    node: str


@dataclass
class BootSeen:
    """What one boot showed: lifecycle_boot.sh's facts, NVIDIA's script's lines, the VM's own problems."""

    facts: dict[str, str]
    script_lines: list[str]
    vm_problems: list[str]
    seconds: float
    kernel_lines: list[str] = field(default_factory=list)


def expected_after(path: str, index: int) -> Expected:
    """What the boot after step `index` (1-based; 0: the fresh root) of `path` should show (pure).

    NVIDIA's steps: its script loads gdrdrv (a generated unit under systemd)
    and then deletes /dev/gdrdrv and finds no major for its mknod, because
    the stand-in's module is ours, a misc device (NVIDIA's own registers a
    major and gets 0666): "none" is what the stand-in truly does.  Ours: our
    unit under systemd, the udev rule under sysvinit, "loader" "ours"; the
    node 0666 group video after NVIDIA's (the upgrade keeps open access),
    0660 video on a new install or after the admin chose group access, as
    lifecycle.sh's judge says.
    """
    steps = path.split("-")[:index]
    if not steps or steps[-1] == "purge":
        return Expected(None, "none")
    step = steps[-1]
    if step.startswith("nvidia") or step in ("edit", "group"):
        return Expected("nvidia", "none")
    prev = steps[-2] if len(steps) > 1 else ""
    kept_open = prev.split("@")[0] in ("nvidia", "edit") and "group" not in steps
    return Expected("ours", "666 video" if kept_open else "660 video")


def loaders(seen: BootSeen, init: str) -> list[str]:
    """Every boot mechanism that loaded gdrdrv in this boot, as seen (pure)."""
    facts = seen.facts
    found = []
    script_ran = any(SCRIPT_RAN.search(line) for line in seen.script_lines)
    if init == "systemd":
        unit = facts.get("unit_gdrdrv", "")
        if "ActiveState=active" in unit and GENERATED_UNIT in unit:
            found.append("nvidia")
        elif "ActiveState=active" in unit and OUR_UNIT in unit:
            found.append("ours")
    else:
        if script_ran:
            found.append("nvidia")
        loaded = facts.get("gdrdrv", "").startswith("loaded")
        # Our udev rule is the only other loader on such a root: it loaded gdrdrv when
        # gdrdrv is loaded and NVIDIA's script did not run, or found it loaded first.
        by_rule = "60-gdrdrv.rules" in facts.get("udev_rule", "") and loaded
        if by_rule and (not script_ran or any(SCRIPT_FOUND_LOADED.search(line) for line in seen.script_lines)):
            found.append("ours")
    return found


def judge_boot(seen: BootSeen, init: str, expected: Expected) -> list[str]:
    """Why this boot is not what `expected` says, one reason each (pure)."""
    facts = seen.facts
    problems = list(seen.vm_problems)
    if facts.get("init") != ("systemd" if init == "systemd" else "init"):
        problems.append(f"PID 1 was {facts.get('init', 'unknown')!r}, not {init}'s")
    if facts.get("nvidia") != "loaded":
        problems.append("the NVIDIA driver (softgpu as nvidia) was not loaded at boot")
    loaded = facts.get("gdrdrv", "").startswith("loaded")
    want_loaded = expected.loader is not None
    if loaded != want_loaded:
        problems.append(
            f"gdrdrv {'loaded' if loaded else 'not loaded'} at boot, expected {'loaded' if want_loaded else 'not'}"
        )
    found = loaders(seen, init)
    want = [expected.loader] if expected.loader else []
    if found != want:
        problems.append(f"loaded by {found or 'nothing'}, expected {want or 'nothing'}")
    if facts.get("node") != expected.node:
        problems.append(f"/dev/gdrdrv: {facts.get('node')!r}, expected {expected.node!r}")
    if facts.get("dangling"):
        problems.append(f"dangling links: {facts['dangling']}")
    if expected.loader == "ours":
        if facts.get("init_script") != "absent" or facts.get("rc_links"):
            problems.append(f"NVIDIA's init script left: {facts.get('init_script')}, links {facts.get('rc_links')!r}")
        errors = [line for line in seen.kernel_lines + seen.script_lines if re.search(r"fail|error", line, re.I)]
        if errors:
            problems.append(f"gdrdrv errors in the boot log: {errors}")
    if init == "systemd" and facts.get("failed_units"):
        problems.append(f"failed units: {facts['failed_units']}")
    return problems


def parse_boot_log(text: str) -> tuple[dict[str, str], list[str], list[str], bool]:
    """lifecycle_boot.sh's log: its facts, the journal and kernel lines, whether it reached its end (pure)."""
    facts: dict[str, str] = {}
    journal, kernel = [], []
    ended = False
    for line in text.splitlines():
        if line == "BOOT: end":
            ended = True
        elif line.startswith("BOOT: ") and "=" in line:
            key, _, value = line[len("BOOT: ") :].partition("=")
            facts[key] = value.strip()
        elif line.startswith("journal: "):
            journal.append(line[len("journal: ") :])
        elif line.startswith("kernel: "):
            kernel.append(line[len("kernel: ") :])
    return facts, journal, kernel, ended


def table_row(path: str, step: str, init: str, seen: BootSeen, problems: list[str]) -> str:
    """One line of the report: path | step | init | who loaded gdrdrv | node | problems (pure)."""
    mechanism = {"nvidia": "init.d/gdrdrv", "ours": "gdrdrv.service" if init == "systemd" else "udev rule"}
    who = "+".join(mechanism[name] for name in loaders(seen, init)) or "nothing"
    return f"BOOTED: {path} | {step} | {init} | {who} | {seen.facts.get('node', '?')} | {'; '.join(problems) or 'ok'}"


def prepare_root(init: str) -> SuiteRoot:
    """The cached bookworm root with dkms, udev and `init` as its init (built once, then only read)."""
    return prepare_suite_root(SUITE, extra_packages=(*ROOT_PACKAGES, INITS[init].package))


def populate(merged: Path, root: SuiteRoot, init: str, new_debs: Path, nvidia_debs: Path) -> None:
    """softgpu's sources, both package sets and the scripts into the overlay, then lifecycle_root.sh there."""
    guest = merged / GUEST_DIR.lstrip("/")
    for part in ("kmod", "include"):
        shutil.copytree(
            REPO_ROOT / "tests" / "softgpu" / part, guest / "softgpu" / part,
            ignore=shutil.ignore_patterns("*.o", "*.ko", ".*.cmd", "*.mod*", "Module.symvers", "modules.order"),
        )  # fmt: skip
    for name in GUEST_FILES:
        shutil.copy2(scenarios.SCRIPTS / name, guest / name)
    for name, debs in (("new", new_debs), ("old", nvidia_debs)):
        target = merged / "pkgs" / name
        target.mkdir(parents=True, exist_ok=True)
        for deb in debs.glob("*.deb"):
            shutil.copy2(deb, target / deb.name)
    status, output = in_root(merged, f"bash {GUEST_DIR}/lifecycle_root.sh {init} {root.abi}")
    if status != 0 or PASSED_MARK not in output:
        raise die(f"preparing the {init} root failed:\n{output[-3000:]}")


def boot_and_look(root: SuiteRoot, merged: Path, init: str, log_dir: Path) -> BootSeen:
    """Boot the overlay with `init` as PID 1; what lifecycle_boot.sh and the console saw."""
    from gdrkit.vm import boot

    report = merged / BOOT_LOG
    report.unlink(missing_ok=True)
    result = boot(
        root.kernel_image, root.modules_dir, merged, "", init=INITS[init].program, timeout=BOOT_TIMEOUT_S,
        log_dir=log_dir, ivshmem_mb=64,
    )  # fmt: skip
    text = report.read_text(errors="replace") if report.exists() else ""
    (log_dir / "boot.log").write_text(text)
    facts, journal, kernel, ended = parse_boot_log(text)
    console = result.console_log.read_text(errors="replace") if result.console_log.exists() else ""
    console = ANSI_COLOUR.sub("", console)  # init scripts colour "failed!" on the serial console
    # Under sysvinit NVIDIA's script writes to the console; under systemd to the unit's journal.
    script_lines = journal + [
        line for line in console.splitlines() if SCRIPT_RAN.search(line) or SCRIPT_FOUND_LOADED.search(line)
        or SCRIPT_NODE_FAILED.search(line)
    ]  # fmt: skip
    problems = result.problems()
    if not ended:
        problems.append(f"lifecycle_boot.sh did not report (console: {result.console_log})")
    return BootSeen(facts, script_lines, problems, result.seconds, kernel)


def run_step(merged: Path, path: str, index: int, version: str, kernel: str) -> Outcome:
    """Step `index` of `path` (lifecycle.sh, chrooted in the overlay): its checks of the root and TABLE line."""
    status, output = in_root(
        merged,
        f"LIFECYCLE_STATE={STATE_DIR} LIFECYCLE_STEP={index} bash {GUEST_DIR}/lifecycle.sh {version} {kernel} {path}",
    )
    return Outcome(status == 0 and PASSED_MARK in output, output)


@dataclass
class PathRun:
    """A path walked with boots: lifecycle.sh's outcome per step, and one boot per state (the fresh root first)."""

    steps: list[Outcome] = field(default_factory=list)
    boots: list[tuple[str, BootSeen, list[str]]] = field(default_factory=list)

    def rows(self, path: str, init: str) -> list[str]:
        return [table_row(path, step, init, seen, problems) for step, seen, problems in self.boots]

    def failures(self) -> list[str]:
        failed = [f"step {n}: {o.output[-3000:]}" for n, o in enumerate(self.steps, start=1) if not o.passed]
        return failed + [f"boot after {step}: {problems}" for step, _seen, problems in self.boots if problems]


def walk(
    init: str, path: str, version: str, new_debs: Path, nvidia_debs: Path, log_dir: Path,
    before_fix: bool = False, stop_after: int = 0, report: Callable[[str], None] = log,
) -> PathRun:  # fmt: skip
    """Boot the fresh root, then run each step of `path` and boot after it, on one overlay.

    `before_fix`: after our packages' step, put the root back as it was
    before issue 41's fix (lifecycle_unfix.sh) and boot that, to show what
    a boot did then, judged against what the fix gives.  `stop_after`:
    only that many steps.
    """
    root = prepare_root(init)
    log_dir.mkdir(parents=True, exist_ok=True)
    (REPO_ROOT / "build").mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"gdrkit-booted-{init}-", dir=REPO_ROOT / "build"))
    run = PathRun()
    steps = path.split("-")
    try:
        with overlay(root.root_dir, scratch) as merged:
            populate(merged, root, init, new_debs, nvidia_debs)
            for index in range(len(steps) + 1):
                if index:
                    outcome = run_step(merged, path, index, version, root.abi)
                    run.steps.append(outcome)
                    for line in outcome.output.splitlines():
                        if line.startswith(("TABLE:", "FAILED:")):
                            report(line)
                    if not outcome.passed and "TABLE:" not in outcome.output:
                        break  # the step itself did not run: nothing to boot
                    if before_fix and steps[index - 1] == "ours":
                        status, output = in_root(merged, f"bash {GUEST_DIR}/lifecycle_unfix.sh /pkgs/old")
                        if status != 0:
                            raise die(f"lifecycle_unfix.sh failed:\n{output[-2000:]}")
                label = steps[index - 1] if index else "fresh root"
                seen = boot_and_look(root, merged, init, log_dir / f"{index}-{label}")
                problems = judge_boot(seen, init, expected_after(path, index))
                run.boots.append((label, seen, problems))
                report(table_row(path, label, init, seen, problems) + f" ({seen.seconds:.0f} s)")
                if stop_after and index >= stop_after:
                    break
    finally:
        remove_tree(scratch)
    return run
