"""The prepared image of a family: its base (a Debian suite's root, or a registry image) set up by setup_image.sh.

Keyed by a small spec; the tag changes with the kernel and with the setup
command, so a cached image is reused only while both stay the same.  The
matrix tests packages in these images and the Molecule hosts start from them.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gdrkit.containers import Engine
from gdrkit.distro.arch import HOST_ARCH, arch
from gdrkit.distro.families import family
from gdrkit.version import REPO_ROOT

SETUP_IMAGE_SCRIPT = REPO_ROOT / "gdrkit" / "stage" / "setup_image.sh"
# What an image of another architecture needs (its packages are cross-built on
# the host): DKMS builds gdrdrv there, and softgpu is built there, under qemu-user.
FOREIGN_IMAGE_PACKAGES = ("make", "gcc", "libc6-dev")


@dataclass(frozen=True)
class StageSpec:
    """Which image: a family on a Debian suite's root (local_suite) or on a registry image, for one architecture."""

    name: str  # the image's name: images of one suite and architecture are one
    family: str
    local_suite: str | None = None
    registry_image: str | None = None
    kernel_suite: str | None = None  # the suite whose kernel the image's headers are of
    kernel_package: str | None = None  # or the kernel headers package installed in it
    arch: str = HOST_ARCH.debian

    @property
    def foreign(self) -> bool:
        return self.arch != HOST_ARCH.debian


def debian_suite_spec(suite: str) -> StageSpec:
    """The image of Debian `suite` with its own kernel's headers, for this host's architecture."""
    return StageSpec(f"debian-{suite}", "debian", local_suite=suite, kernel_suite=suite)


def script_command(script: Path, args: Sequence[str]) -> str:
    """A container command that runs `script` with `args` (pure but for reading the script).

    The script travels as the command, not as a bind mount: a committed image
    would keep the mount point as a volume its containers must fill.
    """
    return f"set -- {shlex.join(args)}\n" + script.read_text()


def image_packages(spec: StageSpec, abi: str = "") -> tuple[str, ...]:
    """The packages setup_image.sh installs into the image (pure)."""
    fam = family(spec.family)
    if spec.foreign:
        return (*FOREIGN_IMAGE_PACKAGES, fam.kernel_headers_package.format(kver=abi or "<kernel>"))
    kernel = (spec.kernel_package,) if spec.kernel_package else ()
    return tuple(dict.fromkeys((*fam.all_image_packages(), *kernel)))


def setup_command(spec: StageSpec, abi: str = "") -> str:
    """What turns the base image into the prepared one (pure but for reading the script)."""
    fam = family(spec.family)
    args = ["--scrub-built"] if spec.local_suite is not None else []
    args += ["--refresh", " ".join(fam.refresh_command), "--install", " ".join(fam.install_command)]
    args += ["--repos", " ".join(fam.repository_packages), "--clean", " ".join(fam.clean_command)]
    args += ["--", *image_packages(spec, abi)]
    return script_command(SETUP_IMAGE_SCRIPT, args)


def image_tag(spec: StageSpec, abi: str) -> str:
    """The prepared image's tag: changes with the kernel and with the setup script."""
    setup = hashlib.sha256(setup_command(spec).encode()).hexdigest()[:8]
    return f"gdrkit-matrix/{spec.name}:{abi.replace('+', '_')}-{setup}"


def pull_or_why(engine: Engine, reference: str) -> str:
    """Nothing once `reference` is pulled, else why not, in one line: registries may be out of reach."""
    pulled, why = engine.pull(reference)
    if pulled:
        return ""
    # The daemon's error can be long (the registry URL, the resolver): what
    # was pulled is at its start, why it failed at its end.
    short = why if len(why) <= 160 else f"{why[:80]} ... {why[-75:]}"
    return f"{' '.join(short.split())} (is a registry reachable from here?)"


# Why a registry image is not prepared under --offline (the matrix's dry run prints it too).
OFFLINE_SKIP = "needs an image registry (--offline given)"


@dataclass(frozen=True)
class Prepared:
    """The outcome: `image` (and the kernel `abi` of a suite's root), or why not (`skipped`), or `failed` output."""

    image: str = ""
    abi: str = ""
    skipped: str = ""
    failed: str = ""


def prepare(engine: Engine, spec: StageSpec, *, offline: bool, refresh: bool = False) -> Prepared:
    """The prepared image of `spec`, built (or found cached) here."""
    if spec.registry_image is not None:
        if offline:
            return Prepared(skipped=OFFLINE_SKIP)
        why = pull_or_why(engine, spec.registry_image)
        if why:
            return Prepared(skipped=f"no registry reachable here: {why}")
        base = spec.registry_image
        abi = ""  # the image's own kernel headers decide
    else:
        from gdrkit.vm import prepare_suite_root

        assert spec.kernel_suite is not None
        root = prepare_suite_root(spec.kernel_suite, arch=arch(spec.arch))
        abi = root.abi
        base = f"gdrkit-matrix/{spec.name}-base:{root.abi.replace('+', '_')}"
        if refresh or not engine.has_image(base):
            engine.import_directory(root.root_dir, base)
    image = image_tag(spec, abi or "registry")
    if refresh or not engine.has_image(image):
        result, container = engine.run(
            base, setup_command(spec, abi), keep=True, title=f"{spec.name}: preparing image {image}"
        )
        if result.status != 0:
            engine.remove(container)
            return Prepared(abi=abi, failed=result.output)
        engine.commit(container, image)
        engine.remove(container)
    return Prepared(image=image, abi=abi)
