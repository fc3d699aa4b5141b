"""Install, upgrade and purge scenarios of the .deb packages in a container.

Each scenario is a bash script of tests/packaging/ (fresh_install.sh,
upgrade.sh) run in a fresh container of a locally built bookworm image
(dkms + kernel headers), with the package directories mounted read-only.  The scripts stop at the first failing command (bash -e), print
what they check, and end with `SCENARIO PASSED`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from gdrkit import containers
from gdrkit.containers import ImageRecipe
from gdrkit.distro.families import DebianFamily, debian_release
from gdrkit.packaging import model
from gdrkit.version import REPO_ROOT

# The scenario scripts, shared with the fault scenarios (pkgkit.faults).
SCRIPTS = REPO_ROOT / "tests" / "packaging"
# Every scenario image is a bookworm root; the packages it installs are built for it.
SUITE = "bookworm"
FAMILY = DebianFamily(release=debian_release(SUITE))


def other_kernel(kernel: str) -> str:
    """The cloud flavour of `kernel`: the "another kernel" of the scenarios."""
    return kernel.replace("-amd64", "-cloud-amd64")


def bookworm_kernels() -> tuple[str, str]:
    """bookworm's current kernel ABI and its cloud flavour (the "another kernel" of the scenarios)."""
    from gdrkit.vm.suites import resolve_kernel

    abi = resolve_kernel("bookworm").abi
    return abi, other_kernel(abi)


def bookworm_dkms_recipe(kernel: str, other_kernel: str) -> ImageRecipe:
    """bookworm with dkms, build tools and `kernel` installed (image and headers); the headers
    of `other_kernel` and of `kernel` kept aside in /opt/extra-debs.

    One image for every package scenario, the fault scenarios (pkgkit.faults)
    included: the kernel image makes "headers missing" mean what it means on a host.
    """
    return ImageRecipe(
        suite=SUITE,
        include=(
            "dkms",
            f"linux-image-{kernel}",
            f"linux-headers-{kernel}",
            "kmod",
            "procps",
            "build-essential",
            "ca-certificates",
            # python3-gdrcopy's dependency: the scenarios install it with the rest of the set.
            "python3",
        ),
        extra_debs=(f"linux-headers-{other_kernel}", f"linux-headers-{kernel}"),
        # Nothing boots the image's initramfs (the VM brings its own): do not build one.
        dpkg_excludes=("/etc/kernel/postinst.d/initramfs-tools",),
    )


# The packages a DKMS install uses (the prebuilt-module package conflicts with it),
# as packages/gdrcopy.yaml lists them.
DKMS_SET = model.load().install_set("deb")


@dataclass(frozen=True)
class Outcome:
    passed: bool
    output: str


def _command(name: str, *args: str) -> str:
    return shlex.join(["bash", f"/faults/{name}", *args])


def fresh_install_command(version: str, kernel: str, other: str) -> str:
    """The command line of tests/packaging/fresh_install.sh for this family and install set (pure)."""
    dirs = (FAMILY.udevrulesdir, FAMILY.modprobedir, FAMILY.unitdir)
    return _command("fresh_install.sh", version, kernel, other, *dirs, model.load().runtime_package("deb"), *DKMS_SET)


def upgrade_command(old: str, new: str, kernel: str) -> str:
    """The command line of tests/packaging/upgrade.sh for the install set (pure)."""
    return _command("upgrade.sh", old, new, kernel, *DKMS_SET)


def run_scenario(command: str, kernels: tuple[str, str], new_debs: Path, old_debs: Path | None = None) -> Outcome:
    """Run a scenario's command line in a fresh container of the scenario image, tests/packaging at /faults."""
    image = containers.ensure_image(bookworm_dkms_recipe(*kernels))
    mounts = {SCRIPTS: "/faults", new_debs.resolve(): "/pkgs/new"}
    if old_debs is not None:
        mounts[old_debs.resolve()] = "/pkgs/old"
    result = containers.run_script(image, command, mounts=mounts)
    passed = result.status == 0 and "SCENARIO PASSED" in result.output
    return Outcome(passed, result.output)
