"""The role's real load: applied with a local connection inside a booted kernel, softgpu as the GPU.

1. root: a container of the Molecule bookworm host image (the matrix's image:
   bookworm's kernel with its exact headers, dkms, build tools; python3-apt)
   runs vm_prepare.sh: softgpu built for that kernel, the published repository
   (a file:// one), the role and ansible-core for the guest's Python copied in,
   Debian's sources removed (the guest is offline), and the role's first
   converge there (no GPU: packages installed, DKMS builds gdrdrv, nothing
   loaded).  Its file system is exported as the VM's root.
2. boot: that kernel under qemu with softgpu loaded, not gdrdrv, and
   vm_converge.sh node: the role loads gdrdrv, /dev/gdrdrv gets the configured
   mode and group, gdrcopy_doctor exits 0, gdrcopy_sanity passes, a second
   converge changes nothing, and state absent unloads gdrdrv and purges.
The kernel log must stay clean (gdrkit.vm's oracle).
"""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from gdrkit.fleet import ansible, molecule
from gdrkit.system import cache_dir, die, log, step
from gdrkit.version import REPO_ROOT

SUITE = "bookworm"
SCRIPTS = Path(__file__).resolve().parent
WORK = REPO_ROOT / "build" / "molecule-vm"
# A group of our own: the packaged rule says video, so the node's group shows the role set it.
NODE_GROUP = "gdrcopy"
PREPARE_MARK = "PREPARE PASSED"
PASSED_MARK = "CONVERGE PASSED"
VM_TIMEOUT_S = 2400


def ansible_core_pin(requirements: Path = REPO_ROOT / "requirements" / "fleet.txt") -> str:
    """requirements/fleet.txt's ansible-core line (its one home), e.g. ansible-core==2.19.14."""
    found = re.search(r"^ansible-core==\S+$", requirements.read_text(), re.MULTILINE)
    if found is None:
        raise die(f"{requirements} pins no ansible-core", "add ansible-core==VERSION there")
    return found.group(0)


def guest_ansible() -> Path:
    """ansible-core with its dependencies in a directory for PYTHONPATH, for a Python like this one.

    The guest is bookworm, whose Python is this host's (3.11), so the binary
    wheels pip picks here run there.
    """
    pin = ansible_core_pin()
    target = cache_dir() / "ansible" / f"guest-{pin.replace('==', '-')}-py{sys.version_info[0]}{sys.version_info[1]}"
    if (target / "ansible" / "cli" / "playbook.py").is_file():
        return target
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with step(f"installing {pin} for the guest (pip --target, once)") as current:
        current.run(
            [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target", partial, pin]
        )
    partial.rename(target)
    return target


@dataclass(frozen=True)
class VmRun:
    status: int | None
    console: str
    problems: list[str]
    seconds: float

    @property
    def passed(self) -> bool:
        return self.status == 0 and PASSED_MARK in self.console and not self.problems

    def checks(self) -> list[str]:
        keep = ("CHECK:", "FAILED:", PASSED_MARK, "converge:", "idempotence:", "absent:", "/dev/gdrdrv:",
                "gdrdrv node_mode", "gdrcopy_doctor exit", "Total:")  # fmt: skip
        return [line.strip() for line in self.console.splitlines() if line.strip().startswith(keep)]


def prepare_root(work: Path, repo_dir: Path, source: Path) -> tuple[Path, str]:
    """The exported root for the VM and its kernel ABI."""
    from gdrkit import containers

    root = work / "root"
    with containers.engine() as engine:
        image = molecule.host_image(engine, SUITE)
        abi = image_kernel(engine, image)
        mounts = {
            source: "/src",
            repo_dir: "/repo",
            ansible.ANSIBLE_DIR: "/ansible",
            guest_ansible(): "/ansible-python",
            SCRIPTS: "/fleet",
        }
        command = f"bash /fleet/vm_prepare.sh {abi} {NODE_GROUP}"
        with step(f"preparing the VM root: softgpu for {abi}, the role's first converge (no GPU)", log_dir=work) as cur:
            result, container = engine.run(image, command, mounts=mounts, read_only=True, keep=True, stream=False)
            cur.log_file.write_text(result.output)
            try:
                if result.status != 0 or PREPARE_MARK not in result.output:
                    raise die(f"preparing the VM root failed:\n{result.output[-5000:]}")
                shutil.rmtree(root, ignore_errors=True)
                engine.export_to(container, root)
            finally:
                engine.remove(container)
    return root, abi


def image_kernel(engine: object, image: str) -> str:
    """The one kernel installed in `image` (the matrix's images hold their suite's kernel only)."""
    from gdrkit.containers import Engine

    assert isinstance(engine, Engine)
    result, _ = engine.run(image, "ls /lib/modules", stream=False, network=False)
    kernels = result.output.split()
    if result.status != 0 or len(kernels) != 1:
        raise die(f"{image} should hold exactly one kernel under /lib/modules, found: {result.output.strip()}")
    return kernels[0]


def vm_converge(work: Path = WORK, ref: str = "HEAD", dry_run: bool = False) -> VmRun | None:
    """The whole flow (the module's docstring); the run (None with dry_run)."""
    from gdrkit.packaging import build
    from gdrkit.vm import ModuleLoad, boot

    if dry_run:
        print(f"[dry-run] publish {ref}'s {SUITE} packages (throwaway key) into {work}/repo")
        print(f"[dry-run] {molecule.SUITES[0]} host image; vm_prepare.sh in a container; export as {work}/root")
        print("[dry-run] boot its kernel with softgpu; vm_converge.sh node (the role, local connection)")
        return None
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    repo_dir = work / "repo"
    repo_dir.mkdir()
    # Where vm_prepare.sh puts the repository in the root (the role's gdrcopy_repo_url there).
    molecule.build_and_publish(repo_dir, "file:///opt/gdrkit-fleet/repo", work, (SUITE,), ref)
    source = build.extract_commit(build.source_at(ref), work / "src")
    root, abi = prepare_root(work, repo_dir, source)
    log(f"booting {abi} with softgpu: the role with a local connection in the guest")
    loads = (ModuleLoad("softgpu", ()),)
    result = boot(
        root / "boot" / f"vmlinuz-{abi}",
        root / "lib" / "modules" / abi,
        root,
        "bash /opt/gdrkit-fleet/vm_converge.sh node " + NODE_GROUP,
        loads=loads,
        timeout=VM_TIMEOUT_S,
        log_dir=work / "vm-logs",
    )
    console = result.console_log.read_text(errors="replace") if result.console_log.exists() else ""
    return VmRun(result.status, console, result.problems(loads), result.seconds)
