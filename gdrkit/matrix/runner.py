"""Run matrix entries: image, build, install, DKMS, load, sanity.

For an entry whose image we build here (a Debian suite):
  image    the suite's root (gdrkit.vm: minbase + that suite's kernel image and
           exact headers) imported into Docker, plus the package build tools
  build    the row's target (gdrkit.distro.targets: its suite on its arch)
           picks its packages: those of the per-target build
           (`build-packages --targets <target>`, here, in the suite's own
           root or cross-built; into dist/<release>/), from a clean clone of
           the committed tree (packages are built from a commit) and linted
           by the suite's lintian.  A suite no target claims (sid) builds with
           `./toolkit build-deb --kernel <abi> --suite <suite>` in a container
           of its image.  Every package is then read against the target: the
           glibc and Python it needs, the newest glibc kept in the row's facts
  install  the family's package manager installs the built packages in a fresh container
  dkms     DKMS has built and installed gdrdrv for the entry's kernel
  load     that kernel booted under qemu with the container's filesystem as
           root: softgpu (the test GPU, built for that kernel) and the
           DKMS-built gdrdrv load, and unload at the end
  sanity   the installed gdrcopy_sanity passes there; clean kernel log
Real-NVIDIA rows (entries with `nvidia:`) differ: their image adds a cached
layer holding Debian's NVIDIA kernel driver DKMS package and DKMS's build of
the real nvidia.ko for the suite kernel (nvidia_layer.sh, keyed by driver
version and kernel ABI); install and dkms put gdrdrv-dkms next to it (no
softgpu), the nvidia step checks gdrdrv against the real driver and removes
and reinstalls both packages in both orders (real_nvidia.sh); load and sanity
are skipped, saying why: the real nvidia.ko needs an NVIDIA GPU to load.
Packages are built once per commit and build image, and reused by the other
rows of that suite.
Entries that need a registry image are skipped, with the reason, when
--offline is given or the pull fails; where a registry is reachable they
run image, build, install and dkms the same way with their own package
manager (their kernels are not booted here).
"""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gdrkit.containers import Engine, RunResult
from gdrkit.distro import targets
from gdrkit.distro.arch import arch
from gdrkit.matrix.model import Entry
from gdrkit.matrix.report import STEPS, EntryResult, Outcome
from gdrkit.packaging import baseline, build, pipeline, toolchain
from gdrkit.distro.families import family
from gdrkit.stage import image as stage_image
from gdrkit.stage.image import script_command
from gdrkit.stage.packages import built_files
from gdrkit.system import TAIL_LINES, UserError, cache_dir, die, error_tail, log, run
from gdrkit.version import REPO_ROOT

if TYPE_CHECKING:
    from gdrkit.nvidia import DriverPackage

STEP_MARK = re.compile(r"^GDRKIT-STEP (\w+) (\d+)$", re.MULTILINE)
DETAIL_TAIL_LINES = TAIL_LINES
SCRIPTS = REPO_ROOT / "gdrkit" / "matrix"
SETUP_IMAGE_SCRIPT = stage_image.SETUP_IMAGE_SCRIPT
INSTALL_SCRIPT = SCRIPTS / "install_packages.sh"
SANITY_SCRIPT = SCRIPTS / "sanity.sh"
SWEEP_SCRIPT = SCRIPTS / "compile_sweep.sh"
NVIDIA_LAYER_SCRIPT = SCRIPTS / "nvidia_layer.sh"
DRIVER_DOES_NOT_BUILD = 3  # nvidia_layer.sh's status when the driver package fails for the suite kernel
REAL_NVIDIA_SCRIPT = "gdrkit/matrix/real_nvidia.sh"  # run from the clone mounted at /src
# The first DKMS build of the real driver: minutes for the proprietary flavour,
# much longer for the open one (it compiles the whole GPU driver) on 2 cores.
NVIDIA_LAYER_TIMEOUT_S = 4 * 3600
REAL_NVIDIA_TIMEOUT_S = 3 * 3600


def install_set(entry: Entry) -> tuple[str, ...]:
    """The built packages the matrix installs: the DKMS set of packages/gdrcopy.yaml."""
    from gdrkit.packaging import model as packages

    return packages.load().install_set(family(entry.family).package_type)


def image_packages(entry: Entry, abi: str = "") -> tuple[str, ...]:
    """The packages setup_image.sh installs into the entry's image (pure)."""
    return stage_image.image_packages(entry.stage, abi)


def setup_command(entry: Entry, abi: str = "") -> str:
    """What turns the entry's base image into its build and test image (pure but for reading the script)."""
    return stage_image.setup_command(entry.stage, abi)


def image_tag(entry: Entry, abi: str) -> str:
    """The prepared image's tag (gdrkit.stage.image)."""
    return stage_image.image_tag(entry.stage, abi)


@dataclass(frozen=True)
class Workspace:
    """Where one entry's clone, packages and exported root live."""

    root: Path

    @property
    def source(self) -> Path:
        return self.root / "src"

    @property
    def dist(self) -> Path:
        return self.root / "src" / "dist"

    @property
    def rootfs(self) -> Path:
        return self.root / "rootfs"

    @property
    def logs(self) -> Path:
        return self.root / "logs"


def tail(text: str, lines: int = DETAIL_TAIL_LINES) -> str:
    """The compiler's error lines first (what a failing row must show), then the output's tail."""
    return error_tail(text, lines)


def step_statuses(output: str) -> dict[str, int]:
    """The `GDRKIT-STEP name status` marks a container script printed."""
    return {name: int(status) for name, status in STEP_MARK.findall(output)}


def nvidia_image_tag(entry: Entry, abi: str, driver: DriverPackage) -> str:
    """The real-NVIDIA layer's tag: changes with the kernel, the driver package and version, and the scripts."""
    recipe = setup_command(entry) + NVIDIA_LAYER_SCRIPT.read_text()
    setup = hashlib.sha256(recipe.encode()).hexdigest()[:8]
    version = re.sub(r"[^A-Za-z0-9_.-]", "_", driver.version)
    return f"gdrkit-matrix/{entry.image_name}-{driver.package}:{abi.replace('+', '_')}-{version}-{setup}"


def nvidia_skip_reason(driver: DriverPackage) -> str:
    return (
        f"loading the real nvidia.ko ({driver.package} {driver.version}) needs an NVIDIA GPU; "
        "the qemu guest has none, so gdrdrv is checked against it without loading (nvidia column)"
    )


def clone_committed_tree(dest: Path, repo: Path = REPO_ROOT) -> None:
    """A clean clone of HEAD: what is committed is what gets packaged and tested."""
    if dest.exists():
        shutil.rmtree(dest)
    run(["git", "clone", "-q", "--no-hardlinks", str(repo), str(dest)])


def build_command(entry: Entry, abi: str) -> str:
    """The command that builds the entry's packages in its image, from the clone at /src (pure)."""
    fam = family(entry.family)
    argv = ["./toolkit", fam.build_task]
    if abi:
        argv += ["--kernel", abi]
    if fam.package_type == "deb":
        # Where units, rules and modules go depends on the release (/lib up to
        # bookworm, /usr/lib from trixie on), and only that release's lintian
        # judges it: build for the suite named here (a registry image: the
        # release its /etc/os-release names) and lint there, failing on errors.
        if entry.local_suite is not None and entry.target is not None:
            argv += ["--suite", entry.target.release]
    else:
        # rpmlint belongs to the package tests on the build host; here the question is
        # whether the distribution's own toolchain builds packages that install and work.
        argv.append("--no-lint")
    return "cd /src && " + shlex.join(argv)


def builds_per_target(entry: Entry) -> bool:
    """Whether the row installs its claimed target's packages from the per-target build
    (build-packages --targets, here: in the target's suite root or cross-built), in dist/<release>/."""
    return entry.target is not None and entry.target.name in targets.BY_NAME


def target_request(entry: Entry, source: Path, dist: Path) -> pipeline.Request:
    """The per-target build of the row's target from the clone at `source`, into dist/<release>/ (pure)."""
    assert entry.target is not None
    return pipeline.Request(targets=(entry.target.name,), with_kmod=False, output=dist, repo=source)


def cross_request(entry: Entry, source: Path, dist: Path) -> pipeline.Request:
    """How the packages of an entry of another architecture are built: cross, on this host (pure)."""
    target = entry.target
    return pipeline.Request(
        kinds=("deb",),
        with_kmod=False,
        suite=target.release if target else "",
        output=dist,
        repo=source,
        host_arch=entry.arch,
    )


def build_in_image(engine: Engine, image: str, entry: Entry, abi: str, source: Path) -> RunResult:
    """`build-deb`/`build-rpm` of the clone at `source` inside a container of `image`: that release's own tools."""
    title = f"{entry.name}: building the packages in {image}"
    return engine.run(image, build_command(entry, abi), mounts={source: "/src"}, title=title)[0]


def build_packages(engine: Engine, image: str, entry: Entry, abi: str, source: Path) -> RunResult:
    """Build (and for .deb, lint) the packages of the clone at `source` in a container of `image`.

    An entry of another architecture cross-builds them here instead: its
    image runs under qemu-user, where the same build would take many times longer.
    """
    if builds_per_target(entry):
        request = target_request(entry, source, source / "dist")
    elif not entry.foreign:
        return build_in_image(engine, image, entry, abi, source)
    else:
        request = cross_request(entry, source, source / "dist")
    try:
        log(f"{entry.name}: building the packages here ({', '.join(request.targets) or entry.arch})")
        rows = pipeline.execute(pipeline.plan_request(request))
        pipeline.check_rows(rows)
    except UserError as error:
        return RunResult(1, f"{error}\n{error.hint or ''}")
    return RunResult(0, pipeline.summary_table(rows))


def install_script(family_name: str, files: Sequence[str], abi: str) -> str:
    """Provide the stand-in GPU, install the packages, make sure DKMS built gdrdrv for `abi` ("": the newest)."""
    fam = family(family_name)
    args = [abi, "--refresh", " ".join(fam.refresh_command), "--install", " ".join(fam.install_files_command)]
    return script_command(INSTALL_SCRIPT, [*args, "--", *files])


@dataclass(frozen=True)
class PlannedStep:
    """One step of an entry's plan: what a dry run prints for it, and the EntryRun method that carries it out."""

    action: str  # EntryRun.step_<action>
    says: tuple[str, ...]


@dataclass(frozen=True)
class EntryPlan:
    """What `matrix` does for one entry: a dry run prints its lines, EntryRun walks its steps."""

    entry: Entry
    offline: bool
    steps: tuple[PlannedStep, ...]

    @property
    def name(self) -> str:
        return self.entry.name

    def lines(self) -> list[str]:
        return [f"{self.entry.name}: {line}" for step in self.steps for line in step.says]


def plan_entry(entry: Entry, *, offline: bool) -> EntryPlan:
    """The steps of one entry (pure but for reading files)."""
    fam = family(entry.family)
    if entry.registry_image is not None:
        if offline:
            # The image step records this skip (stage_image.prepare) and stops the row.
            return EntryPlan(entry, offline, (PlannedStep("image", (f"skipped: {stage_image.OFFLINE_SKIP}",)),))
        base = f"pull {entry.registry_image}"
    else:
        base = f"import the {entry.local_suite} {entry.arch} VM root (built with mmdebstrap if not cached)"
    packages = " ".join(install_set(entry))
    target = entry.target
    if builds_per_target(entry):
        assert target is not None
        how = (
            f"build here for target {target.name} (build-packages --targets {target.name}) into dist/{target.release}/"
        )
    elif entry.foreign:
        how = f"cross-build here (build-deb --arch {entry.arch} --no-kmod --suite {entry.local_suite})"
    else:
        how = build_command(entry, "<kernel>" if entry.kernel_suite else "")
    image = [f"image: {base}, then set it up (setup_image.sh: {' '.join(image_packages(entry))})"]
    install = f"install {packages} with {' '.join(fam.install_files_command)}, check DKMS built gdrdrv"
    if entry.nvidia is not None:
        image.append(f"image: add Debian's NVIDIA {entry.nvidia} driver DKMS-built (nvidia_layer.sh)")
    build_says = [f"build from a clean clone of HEAD: {how}"]
    if target is not None:
        build_says.append(
            f"check them against target {target.name}: glibc {target.glibc or '(not known)'}, {target.python.requires}"
        )
    steps = [PlannedStep("image", tuple(image)), PlannedStep("build", tuple(build_says))]
    if entry.nvidia is not None:
        real = "check gdrdrv against the real driver (real_nvidia.sh); load and sanity: skipped"
        steps.append(PlannedStep("real_nvidia", (install, real)))
    else:
        steps.append(PlannedStep("install", (install,)))
        if entry.boot:
            steps.append(
                PlannedStep("boot", ("boot its kernel under qemu, load softgpu and gdrdrv, run gdrcopy_sanity",))
            )
        else:
            steps.append(PlannedStep("no_boot", ("load and sanity: skipped (boot: false)",)))
    return EntryPlan(entry, offline, tuple(steps))


def entry_plan(entry: Entry, *, offline: bool) -> list[str]:
    """What `matrix` does for one entry, one line per step (pure but for reading files)."""
    return plan_entry(entry, offline=offline).lines()


class EntryRun:
    """One entry's run: walks its plan's steps; each records its outcome and returns False to stop."""

    def __init__(self, plan: EntryPlan, engine: Engine, workspace: Workspace, *, refresh: bool) -> None:
        self.plan = plan
        self.entry = entry = plan.entry
        self.engine = engine
        self.ws = workspace
        self.offline = plan.offline
        self.refresh = refresh
        # The container the install step leaves for the boot step, with what its script said.
        self.installed: Any = None
        self.install_detail = ""
        self.softgpu_status: int | None = None
        self.result = EntryResult(entry.name)
        if entry.nvidia is None:
            self.result.record("nvidia", Outcome.NOT_RUN)  # a stand-in (softgpu) row
        self.image = ""  # where the packages are built (and, without NVIDIA, tested)
        self.test_image = ""  # where they are installed and tested
        self.abi = ""
        self.driver: DriverPackage | None = None
        self.packages = install_set(entry)

    @property
    def package_dir(self) -> Path:
        """Where the row's packages are in its clone: dist/<release>/ for a per-target build, else dist/."""
        target = self.entry.target
        if builds_per_target(self.entry) and target is not None:
            return self.ws.dist / target.release
        return self.ws.dist

    @property
    def package_paths(self) -> list[str]:
        """The row's packages as the containers see the clone (at /src)."""
        return [f"/src/{path.relative_to(self.ws.source)}" for path in self.built(self.package_dir)]

    def built(self, dist: Path) -> list[Path]:
        return built_files(dist, self.entry.family, self.packages)

    def timed(self, step: str, outcome: Outcome, detail: str, started: float) -> bool:
        self.result.record(step, outcome, detail, time.monotonic() - started)
        return outcome is Outcome.PASSED

    def step_image(self) -> bool:
        started = time.monotonic()
        entry = self.entry
        prepared = stage_image.prepare(self.engine, entry.stage, offline=self.offline, refresh=self.refresh)
        if prepared.skipped:
            # Name the target whose packages go untested here, not only the row.
            target = entry.target
            untested = f"target {target.name}'s packages are not installed nor booted here: " if target else ""
            self.result.skip_rest(untested + prepared.skipped)
            return False
        self.abi = prepared.abi
        if self.abi:
            self.result.facts["kernel"] = self.abi
        if prepared.failed:
            return self.timed("image", Outcome.FAILED, tail(prepared.failed), started)
        self.image = prepared.image
        self.test_image = self.image
        if entry.nvidia is not None:
            return self.nvidia_layer(started)
        return self.timed("image", Outcome.PASSED, self.image, started)

    def nvidia_layer(self, started: float) -> bool:
        """Add (or find cached) the layer with the real NVIDIA driver DKMS-built for the suite kernel."""
        from gdrkit.nvidia import driver_package

        entry = self.entry
        assert entry.nvidia is not None and entry.kernel_suite is not None
        self.driver = driver = driver_package(entry.kernel_suite, entry.nvidia)
        self.result.facts["nvidia.driver"] = f"{driver.package} {driver.version}"
        tag = nvidia_image_tag(entry, self.abi, driver)
        cached = not self.refresh and self.engine.has_image(tag)
        if not cached:
            fam = family(entry.family)
            verbs = [" ".join(fam.refresh_command), " ".join(fam.install_command)]
            args = [self.abi, driver.package, driver.version, driver.dkms_module, *verbs]
            script = script_command(NVIDIA_LAYER_SCRIPT, args)
            title = f"{entry.name}: NVIDIA layer {tag}: {driver.package} {driver.version} built by DKMS for {self.abi}"
            result, container = self.engine.run(
                self.image, script, keep=True, timeout_s=NVIDIA_LAYER_TIMEOUT_S, title=title
            )
            if result.status == DRIVER_DOES_NOT_BUILD:
                # The distro's own driver fails for the distro's kernel: a defect of theirs, named, never hidden.
                self.engine.remove(container)
                said = [line for line in result.output.splitlines() if " does not build for " in line]
                # The script names the compiler error; should a future one not, the skip still names the package.
                why = (
                    said[0].removeprefix("nvidia_layer: ")
                    if said
                    else f"{driver.package} {driver.version} does not build for {self.abi}: {tail(result.output)}"
                )
                self.result.skip_rest(f"{why} (the driver package's own build; nothing of ours ran)")
                return False
            if result.status != 0:
                self.engine.remove(container)
                return self.timed("image", Outcome.FAILED, tail(result.output), started)
            self.engine.commit(container, tag)
            self.engine.remove(container)
        self.test_image = tag
        how = "cached" if cached else "built now"
        return self.timed("image", Outcome.PASSED, f"{tag} ({how}: {driver.package} {driver.version})", started)

    def packages_cache(self, commit: str) -> Path:
        """Where the packages built from `commit` in this entry's build image are kept."""
        return cache_dir() / "matrix" / "packages" / f"{re.sub(r'[/:]', '_', self.image)}-{commit}"

    def note_version(self, files: Sequence[Path]) -> None:
        """Record the version of the built packages (the publish manifest matches results by it)."""
        versions = {build.package_fields(f).version for f in files}
        if len(versions) == 1:
            self.result.facts["package.version"] = versions.pop()

    def step_build(self) -> bool:
        started = time.monotonic()
        clone_committed_tree(self.ws.source)
        commit = run(["git", "-C", str(self.ws.source), "rev-parse", "HEAD"], capture=True).stdout.strip()
        cached = self.packages_cache(commit)
        # Rows of one suite share a build image: the same commit builds the same packages there.
        if not self.refresh and len(self.built(cached)) >= len(self.packages):
            self.package_dir.mkdir(parents=True, exist_ok=True)
            for path in cached.iterdir():
                shutil.copy2(path, self.package_dir / path.name)
            reused = sorted(f.name for f in self.built(self.package_dir))
            self.note_version(self.built(self.package_dir))
            problems = self.check_baseline(self.built(self.package_dir))
            if problems:
                return self.timed("build", Outcome.FAILED, "\n".join(problems), started)
            return self.timed(
                "build", Outcome.PASSED, f"reused (built from {commit[:12]} before): {', '.join(reused)}", started
            )
        result = build_packages(self.engine, self.image, self.entry, self.abi, self.ws.source)
        self.ws.logs.mkdir(parents=True, exist_ok=True)
        (self.ws.logs / "build.log").write_text(result.output)
        if result.status != 0:
            return self.timed("build", Outcome.FAILED, tail(result.output), started)
        files = self.built(self.package_dir)
        names = {f.name for f in files}
        if len(files) < len(self.packages):
            return self.timed(
                "build", Outcome.FAILED, f"expected packages {self.packages}, built {sorted(names)}", started
            )
        self.note_version(files)
        problems = self.check_baseline(files)
        if problems:
            return self.timed("build", Outcome.FAILED, "\n".join(problems), started)
        partial = cached.with_name(cached.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        for path in self.package_dir.iterdir():
            if path.is_file():
                shutil.copy2(path, partial / path.name)
        shutil.rmtree(cached, ignore_errors=True)
        partial.rename(cached)
        return self.timed("build", Outcome.PASSED, ", ".join(sorted(names)), started)

    def check_baseline(self, files: Sequence[Path]) -> list[str]:
        """The packages the row installs against its target's glibc and Python (gdrkit.packaging.baseline).

        Prints their table and records the target and the newest glibc
        needed as facts of the row; returns the problems.
        """
        target = self.entry.target
        if target is None:
            return []
        reports = baseline.check_packages(target, files)
        log(f"{self.entry.name}: packages for target {target.name}:\n{baseline.table(reports)}")
        needed = [r.newest_glibc for r in reports if r.newest_glibc]
        self.result.facts["target"] = target.name
        self.result.facts["glibc.target"] = target.glibc or "unknown"
        self.result.facts["glibc.needed"] = max(needed, key=toolchain.version_key) if needed else "none"
        return [p for r in reports for p in r.problems]

    def check_real_nvidia(self) -> None:
        """Install next to the real driver, check gdrdrv against it, remove and reinstall both (real_nvidia.sh)."""
        driver = self.driver
        assert driver is not None
        started = time.monotonic()
        files = self.package_paths
        args = [self.abi, driver.flavour, driver.package, driver.version, driver.dkms_module, *files]
        result, _ = self.engine.run(
            self.test_image,
            f"bash /src/{REAL_NVIDIA_SCRIPT} {shlex.join(args)}",
            mounts={self.ws.source: "/src"},
            timeout_s=REAL_NVIDIA_TIMEOUT_S,
            title=f"{self.entry.name}: installing next to {driver.package} {driver.version}, DKMS, checks",
        )
        self.ws.logs.mkdir(parents=True, exist_ok=True)
        log_file = self.ws.logs / "real-nvidia.log"
        log_file.write_text(result.output)
        marks = step_statuses(result.output)
        failures = [line for line in result.output.splitlines() if line.startswith("FAIL: ")]
        checks = [line for line in result.output.splitlines() if line.startswith(("ok: ", "FAIL: "))]
        detail = (
            "\n".join(failures + ["..."] + result.output.rstrip().splitlines()[-DETAIL_TAIL_LINES:])
            if failures
            else tail(result.output)
        )
        # One container ran all three steps: its time goes to the last one it reached.
        recorded = []
        for step in ("install", "dkms", "nvidia"):
            if step not in marks:
                recorded.append(
                    self.result.record(
                        step, Outcome.FAILED, f"the script stopped before this step (see {log_file}):\n{detail}"
                    )
                )
                break
            passed = marks[step] == 0
            summary = (
                f"{len(checks) - len(failures)} of {len(checks)} checks passed (log: {log_file})"
                if step == "nvidia"
                else ""
            )
            recorded.append(
                self.result.record(step, Outcome.PASSED if passed else Outcome.FAILED, summary if passed else detail)
            )
            if not passed:
                break
        recorded[-1].seconds = time.monotonic() - started
        if recorded[-1].outcome is not Outcome.PASSED:
            return
        reason = nvidia_skip_reason(driver)
        self.result.record("load", Outcome.SKIPPED, reason)
        self.result.record("sanity", Outcome.SKIPPED, reason)

    def step_install(self) -> bool:
        """Install the packages and check DKMS's build; the container stays for the boot step (self.installed)."""
        started = time.monotonic()
        files = self.package_paths
        result, container = self.engine.run(
            self.image,
            install_script(self.entry.family, files, self.abi),
            mounts={self.ws.source: "/src"},
            keep=True,
            title=f"{self.entry.name}: installing the packages, DKMS build, softgpu",
        )
        marks = step_statuses(result.output)
        detail = tail(result.output)
        seconds = time.monotonic() - started
        self.result.record("install", Outcome.PASSED if marks.get("install") == 0 else Outcome.FAILED, detail, seconds)
        if marks.get("install") != 0:
            self.engine.remove(container)
            return False
        self.result.record("dkms", Outcome.PASSED if marks.get("dkms") == 0 else Outcome.FAILED, detail)
        if marks.get("dkms") != 0:
            self.engine.remove(container)
            return False
        self.installed, self.install_detail, self.softgpu_status = container, detail, marks.get("softgpu")
        return True

    def drop_installed(self) -> None:
        if self.installed is not None:
            container, self.installed = self.installed, None
            self.engine.remove(container)

    def step_no_boot(self) -> bool:
        self.drop_installed()
        self.result.skip_rest("this entry's kernel is not booted here (boot: false)")
        return False

    def step_real_nvidia(self) -> bool:
        self.check_real_nvidia()
        return False

    def step_boot(self) -> bool:
        """Boot the installed container's filesystem: softgpu and gdrdrv load, gdrcopy_sanity passes."""
        from gdrkit.vm import boot, default_loads
        from gdrkit.vm.initramfs import BUSYBOX

        container = self.installed
        if self.softgpu_status != 0:
            self.drop_installed()
            self.result.record(
                "load", Outcome.FAILED, "building softgpu for this kernel failed:\n" + self.install_detail
            )
            return False
        if self.ws.rootfs.exists():
            shutil.rmtree(self.ws.rootfs)
        self.engine.export_to(container, self.ws.rootfs)
        self.drop_installed()
        started = time.monotonic()
        loads = default_loads()
        kernel_image = self.ws.rootfs / "boot" / f"vmlinuz-{self.abi}"
        result = boot(
            kernel_image,
            self.ws.rootfs / "lib" / "modules" / self.abi,
            self.ws.rootfs,
            SANITY_SCRIPT.read_text(),
            loads=loads,
            check_refcount=True,
            log_dir=self.ws.logs,
            arch=arch(self.entry.arch),
            # An image of another architecture brings its own static busybox (its suite root's).
            busybox=self.ws.rootfs / "bin" / "busybox" if self.entry.foreign else BUSYBOX,
        )
        console = result.console_log.read_text(errors="replace") if result.console_log.exists() else ""
        seconds = time.monotonic() - started
        if result.load_failures() or "load_softgpu" not in result.results:
            detail = "; ".join(result.problems(loads)) or "the guest did not get to load the modules"
            self.result.record("load", Outcome.FAILED, detail + "\n" + tail(console), seconds)
            self.result.skip_rest("modules did not load")
            return False
        self.result.record("load", Outcome.PASSED, "softgpu and the DKMS-built gdrdrv loaded")
        problems = result.problems(loads)
        if result.status == 0 and not problems:
            summary = [line for line in console.splitlines() if line.startswith("Total:")]
            self.result.record("sanity", Outcome.PASSED, summary[-1] if summary else "", seconds)
            return True
        why = f"gdrcopy_sanity exit status {result.status}" + (f"; {'; '.join(problems)}" if problems else "")
        self.result.record("sanity", Outcome.FAILED, why + "\n" + tail(console), seconds)
        return False

    def run(self) -> EntryResult:
        """Walk the plan's steps (those its dry run printed) until one says stop."""
        started = time.monotonic()
        try:
            for step in self.plan.steps:
                if not getattr(self, f"step_{step.action}")():
                    break
        except (UserError, subprocess.SubprocessError) as error:
            # The step that was running is the first one without a result.
            step_name = next((s for s in STEPS if s not in self.result.steps), STEPS[-1])
            self.result.record(step_name, Outcome.FAILED, str(error))
        finally:
            self.drop_installed()
        failed_at = self.result.first_failure()
        if failed_at:
            self.result.skip_rest(f"{failed_at[0]} failed")
        self.result.seconds = time.monotonic() - started
        return self.result


@dataclass(frozen=True)
class MatrixPlan:
    """What `matrix` runs: a dry run prints it (lines), a real run executes it (execute_matrix)."""

    entries: tuple[EntryPlan, ...]
    offline: bool
    refresh: bool = False

    def lines(self) -> list[str]:
        return engine_plan() + [line for e in self.entries for line in e.lines()]


def plan_matrix(entries: Sequence[Entry], *, offline: bool, refresh: bool = False) -> MatrixPlan:
    """Each entry's plan, made once: the dry run prints these, the real run walks them."""
    return MatrixPlan(tuple(plan_entry(e, offline=offline) for e in entries), offline, refresh)


@dataclass(frozen=True)
class SweepPlan:
    """What `compile-sweep` runs: a dry run prints it (lines), a real run executes it (execute_sweep)."""

    entries: tuple[Entry, ...]
    offline: bool

    def lines(self) -> list[str]:
        return engine_plan() + [line for e in self.entries for line in sweep_plan(e, offline=self.offline)]


def run_entries(entries: Sequence[Entry], *, offline: bool, refresh: bool = False) -> list[EntryResult]:
    """Run every entry in turn (each in its own workspace under the cache); never stops early."""
    return execute_matrix(plan_matrix(entries, offline=offline, refresh=refresh))


def execute_matrix(plan: MatrixPlan) -> list[EntryResult]:
    """Carry out a MatrixPlan: every entry in turn, each in its own workspace under the cache; never stops early."""
    from gdrkit.containers import engine as docker_engine

    entries = plan.entries
    results = []
    with docker_engine() as engine:
        for index, entry in enumerate(entries, 1):
            log(f"matrix [{index}/{len(entries)}] {entry.name}")
            workspace = Workspace(cache_dir() / "matrix" / entry.name)
            workspace.root.mkdir(parents=True, exist_ok=True)
            result = EntryRun(entry, engine, workspace, refresh=plan.refresh).run()
            results.append(result)
            log(f"matrix {entry.name}: " + ", ".join(f"{s}={result.outcome(s).value}" for s in STEPS))
    return results


def sweep_list_command(family_name: str) -> str:
    """The container command that lists the kernel-headers packages the image's repositories offer."""
    fam = family(family_name)
    return script_command(
        SWEEP_SCRIPT, ["--refresh", " ".join(fam.refresh_command), "--list", " ".join(fam.headers_query)]
    )


def sweep_command(family_name: str, packages: Sequence[str]) -> str:
    """The container command that installs each of `packages` and compiles gdrdrv against what appears."""
    fam = family(family_name)
    install = " ".join((*fam.install_command, *fam.headers_install_flags))
    args = ["--refresh", " ".join(fam.refresh_command), "--install", install, "--trees", fam.headers_trees]
    return script_command(SWEEP_SCRIPT, [*args, "--", *packages])


SWEEP_MARK = re.compile(r"^GDRKIT-SWEEP (\S+) (\d+)$", re.MULTILINE)


def compile_sweep(entry: Entry, *, offline: bool) -> dict[str, int]:
    """{kernel: 0 built, 1 failed to build, 2 headers would not install}; empty when skipped."""
    from gdrkit.containers import engine as docker_engine

    if entry.foreign:
        # Its headers packages would each install and compile under qemu-user: hours.
        log(
            f"{entry.name}: compile sweep skipped: {entry.arch} images are not swept (the matrix row builds for its kernel)"
        )
        return {}
    with docker_engine() as engine:
        workspace = Workspace(cache_dir() / "matrix" / entry.name)
        workspace.root.mkdir(parents=True, exist_ok=True)
        # The image step of the entry's matrix plan: the same prepared image.
        entry_run = EntryRun(plan_entry(entry, offline=offline), engine, workspace, refresh=False)
        if not entry_run.step_image():
            log(f"{entry.name}: skipped: {entry_run.result.skip_reason()}")
            return {}
        clone_committed_tree(workspace.source)
        listing, _ = engine.run(entry_run.image, sweep_list_command(entry.family), stream=False)
        packages = family(entry.family).headers_packages(listing.output)
        if listing.status != 0 or not packages:
            raise die(
                f"{entry.name}: the image's package manager lists no kernel headers (exit {listing.status}):\n{tail(listing.output)}",
                "check that its repositories are reachable; --offline skips registry entries",
            )
        result, _ = engine.run(
            entry_run.image,
            sweep_command(entry.family, packages),
            mounts={workspace.source: "/src"},
            title=f"{entry.name}: compiling gdrdrv against {len(packages)} kernel-headers packages",
        )
        return {kernel: int(status) for kernel, status in SWEEP_MARK.findall(result.output)}


def engine_plan() -> list[str]:
    """What getting a Docker engine takes here (read-only: asks the socket, looks for dockerd)."""
    from gdrkit.containers import engine_running
    from gdrkit.system import have_command

    if engine_running():
        return ["use the running Docker engine"]
    steps = [] if have_command("dockerd") else ["install docker.io"]
    return [*steps, "start dockerd (log: /var/log/gdrkit-dockerd.log)"]


def execute_sweep(plan: SweepPlan) -> dict[str, dict[str, int]]:
    """Carry out a SweepPlan: entry name -> {kernel: 0 built, 1 failed to build, 2 headers would not install}."""
    return {entry.name: compile_sweep(entry, offline=plan.offline) for entry in plan.entries}


def sweep_plan(entry: Entry, *, offline: bool) -> list[str]:
    """What `compile-sweep` does for one entry (pure)."""
    if entry.registry_image is not None and offline:
        return [f"{entry.name}: skipped: {stage_image.OFFLINE_SKIP}"]
    if entry.foreign:
        return [f"{entry.name}: skipped: {entry.arch} images are not swept (the matrix row builds for its kernel)"]
    fam = family(entry.family)
    return [
        f"{entry.name}: prepare its image as the matrix does",
        f"{entry.name}: list kernel headers with {' '.join(fam.headers_query)}",
        f"{entry.name}: install each with {' '.join(fam.install_command)} and compile gdrdrv against {fam.headers_trees}",
    ]
