"""Package faults: interrupted DKMS builds, missing headers, a busy module, downgrades.

The scenarios themselves are the shell scripts in tests/packaging/ (run as
root in a container, or in the test VM); this module builds what they run
in and runs them.  Each prints `CHECK:` lines and ends with `SCENARIO PASSED`.

Containers (no module loading there) use one image: bookworm with dkms, the
kernel image AND headers of bookworm's current kernel (a kernel that is
installed, so that "headers missing" means what it means on a host), build
tools, and the headers' .deb kept in /opt/extra-debs.  The VM scenario boots
that kernel with a root exported from a container of the same image, in which
softgpu stands in for the NVIDIA driver and the previous release is installed.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from gdrkit import containers
from gdrkit.containers import ImageRecipe
from gdrkit.packaging import build, pipeline
from gdrkit.packaging.build import Source
from gdrkit.stage.packages import checked_packages
from gdrkit.system import die
from gdrkit.vm.rootfs import SuiteRoot
from pkgkit import scenarios

SCRIPTS = scenarios.SCRIPTS
# The "previous release" of the upgrade and downgrade tests: the same commit
# packaged, from the same templates, as this version.
PREVIOUS_RELEASE = "2.6.0"
PASSED_MARK = "SCENARIO PASSED"
# Under TCG a DKMS build of gdrdrv takes 5-15 min and each depmod 1-3 min (host load);
# the VM scenario has one build and three depmods.
VM_TIMEOUT_S = 3600


@dataclass(frozen=True)
class DebSets:
    """The DKMS set of .deb packages built from one commit, as this release and as the previous one."""

    new: Path
    old: Path
    version: str
    previous: str


def deb_request(output: Path, ref: str = "HEAD", package_version: str = "") -> pipeline.Request:
    """The scenarios' .deb packages: the DKMS set for their suite, built through the package pipeline (pure).

    Not linted: the host's lintian judges only its own release's layout
    (test_pkg_build.py lints each suite's packages in that suite).
    """
    return pipeline.Request(
        kinds=("deb",),
        with_kmod=False,
        suite=scenarios.SUITE,
        output=output,
        ref=ref,
        lint=False,
        package_version=package_version,
    )


def build_deb_sets(new: Path, old: Path, ref: str = "HEAD") -> DebSets:
    """Build the .deb packages of `ref` twice: as this version into `new`, as PREVIOUS_RELEASE into `old`.

    Both through the pipeline's plan and execute, so checked against packages/gdrcopy.yaml.
    """
    source = build.source_at(ref)
    plan = pipeline.plan_request(deb_request(new, ref), source)
    checked_packages(plan)
    checked_packages(pipeline.plan_request(deb_request(old, ref, PREVIOUS_RELEASE), source))
    return DebSets(new, old, plan.jobs[0].plan.version, PREVIOUS_RELEASE)


# The fault image is a bookworm root (scenarios.bookworm_dkms_recipe).
FAULT_SUITE = scenarios.SUITE


def fault_recipe(kernel: str) -> ImageRecipe:
    """The image of every package scenario (scenarios.bookworm_dkms_recipe): `kernel`
    installed with its headers, dkms, build tools, the headers' .deb kept aside."""
    return scenarios.bookworm_dkms_recipe(kernel, scenarios.other_kernel(kernel))


@dataclass(frozen=True)
class Outcome:
    passed: bool
    output: str

    def checks(self) -> list[str]:
        """The lines that say what was checked, and the verdict lines."""
        keep = ("CHECK:", "FAILED:", PASSED_MARK, "gdrdrv:", "killed ", "holder:", "reloaded:", "dkms status after")
        return [line for line in self.output.splitlines() if line.startswith(keep)]


def _outcome(status: int | None, output: str) -> Outcome:
    return Outcome(status == 0 and PASSED_MARK in output, output)


def script_command(name: str, *args: str, directory: str = "/faults") -> str:
    """The command line that runs scenario script `name` with `args` (pure)."""
    path = SCRIPTS / name
    if not path.is_file():
        raise die(f"no scenario script {path}")
    return " ".join(["bash", f"{directory}/{name}", *args])


def run_in_container(kernel: str, name: str, *args: str, new_debs: Path, old_debs: Path | None = None) -> Outcome:
    """Run scenario `name` in a fresh container of the fault image (offline, mounts read-only)."""
    image = containers.ensure_image(fault_recipe(kernel))
    mounts = {SCRIPTS: "/faults", new_debs.resolve(): "/pkgs/new"}
    if old_debs is not None:
        mounts[old_debs.resolve()] = "/pkgs/old"
    result = containers.run_script(image, script_command(name, *args), mounts=mounts)
    return _outcome(result.status, result.output)


def extract_source(source: Source, dest: Path) -> Path:
    """The files of `source`'s commit under `dest` (what the packages were built from)."""
    return build.extract_commit(source, dest)


def prepare_vm_root(
    kernel: str, source: Source, old: str, new_debs: Path, old_debs: Path, work: Path, old_module_version: str = ""
) -> SuiteRoot:
    """A root for the VM scenario: softgpu, the previous release installed, this one waiting.

    `old_module_version`: what the old set's gdrdrv reports when that is not
    `old` (the reference-layout set: packages 2.6-1, module 2.6.0).
    """
    image = containers.ensure_image(fault_recipe(kernel))
    tree = extract_source(source, work / "src")
    root = work / "root"
    mounts = {tree: "/src", SCRIPTS: "/faults", new_debs.resolve(): "/pkgs/new", old_debs.resolve(): "/pkgs/old"}
    result, container = containers.default_engine().run(
        image, script_command("vm_prepare.sh", old, kernel, *([old_module_version] if old_module_version else [])), mounts=mounts, read_only=True, network=False,
        shell_flags="-euo pipefail", stream=False, keep=True, timeout_s=1800,
    )  # fmt: skip
    engine = containers.default_engine()
    try:
        if result.status != 0 or PASSED_MARK not in result.output:
            raise die("preparing the VM root failed:\n" + result.output[-4000:])
        engine.export_to(container, root)
    finally:
        engine.remove(container)
    shutil.rmtree(tree)
    return SuiteRoot(FAULT_SUITE, kernel, root)


def run_in_vm(
    vm_root: SuiteRoot, name: str, *args: str, log_dir: Path, timeout_s: int = VM_TIMEOUT_S
) -> tuple[Outcome, list[str]]:
    """Boot the root's kernel with the root and run scenario `name` there.

    Returns the outcome and the VM's own problems (kernel log findings, a
    guest that did not finish).  The scenario loads and unloads the modules
    itself, so the boot is asked to load none.
    """
    from gdrkit.vm import boot

    result = boot(
        vm_root.kernel_image,
        vm_root.modules_dir,
        vm_root.root_dir,
        script_command(name, *args, directory="/opt/gdrkit-faults"),
        timeout=timeout_s,
        log_dir=log_dir,
    )
    console = result.console_log.read_text(errors="replace") if result.console_log.exists() else ""
    return _outcome(result.status, console), result.problems()
