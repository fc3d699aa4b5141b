"""The one module that talks to Docker (through the Docker SDK).

Images are built locally, never pulled: `mmdebstrap` writes a Debian root
file system as a tarball, which is imported as an image and cached under a
tag derived from its recipe.  Every container this module starts is
registered and removed by `cleanup()` (tests call it in teardown).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors

from gdrkit.system import cache_dir, die, ensure_debian_packages, have_command, log, run

DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_SECURITY_MIRROR = "http://deb.debian.org/debian-security"


@dataclass(frozen=True)
class ImageRecipe:
    """A Debian root file system for package tests, built with mmdebstrap."""

    suite: str
    include: tuple[str, ...]
    # Packages downloaded (not installed) into /opt/extra-debs of the image.
    extra_debs: tuple[str, ...] = ()
    name: str = "gdrkit-test"

    @property
    def tag(self) -> str:
        digest = hashlib.sha256(repr(self).encode()).hexdigest()[:12]
        return f"{self.name}:{self.suite}-{digest}"


def bookworm_dkms_recipe(kernel: str, other_kernel: str) -> ImageRecipe:
    """bookworm with dkms and the headers of `kernel`; those of `other_kernel` kept aside."""
    return ImageRecipe(
        suite="bookworm",
        include=("dkms", f"linux-headers-{kernel}", "kmod", "ca-certificates"),
        extra_debs=(f"linux-headers-{other_kernel}",),
    )


def bookworm_vm_recipe(kernel: str) -> ImageRecipe:
    """bookworm with the kernel image too, to boot the exported tree in a VM."""
    return ImageRecipe(
        suite="bookworm",
        include=("dkms", f"linux-headers-{kernel}", f"linux-image-{kernel}", "kmod", "build-essential", "procps"),
        name="gdrkit-vmroot",
    )


_client: docker.DockerClient | None = None
_containers: list[Any] = []


def client(*, start: bool = True) -> docker.DockerClient:
    """A Docker client; starts dockerd in the background if it is not running."""
    global _client
    if _client is not None:
        return _client
    try:
        candidate = docker.from_env()
        candidate.ping()
        _client = candidate
        return candidate
    except docker.errors.DockerException:
        if not start:
            raise die("the Docker engine is not running", "start it: dockerd &, or systemctl start docker")
    if not have_command("dockerd"):
        ensure_debian_packages(["docker.io"])
    log("starting dockerd in the background (log: /var/log/gdrkit-dockerd.log)")
    run(["sh", "-c", "nohup dockerd >/var/log/gdrkit-dockerd.log 2>&1 &"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            candidate = docker.from_env()
            candidate.ping()
            _client = candidate
            return candidate
        except docker.errors.DockerException:
            time.sleep(1)
    raise die("dockerd did not answer within 60 s", "see /var/log/gdrkit-dockerd.log")


def ensure_image(recipe: ImageRecipe, *, rebuild: bool = False) -> str:
    """The image of `recipe`, built and imported on first use; returns its tag."""
    api = client()
    if not rebuild:
        try:
            api.images.get(recipe.tag)
            return recipe.tag
        except docker.errors.ImageNotFound:
            pass
    ensure_debian_packages(["mmdebstrap"])
    tarball = cache_dir() / f"{recipe.tag.replace(':', '_')}.tar"
    hooks = []
    if recipe.extra_debs:
        names = " ".join(recipe.extra_debs)
        hooks = [
            "--customize-hook",
            f'mkdir -p "$1/opt/extra-debs" && cd "$1/opt/extra-debs" && apt-get download {names}',
        ]
    log(f"building image {recipe.tag} with mmdebstrap (about a minute)")
    run(
        [
            "mmdebstrap",
            "--variant=apt",
            f"--include={','.join(recipe.include)}",
            *hooks,
            recipe.suite,
            tarball,
            f"deb {DEBIAN_MIRROR} {recipe.suite} main",
            f"deb {DEBIAN_SECURITY_MIRROR} {recipe.suite}-security main",
        ],
        capture=True,
    )
    repository, tag = recipe.tag.split(":")
    api.api.import_image_from_file(str(tarball), repository=repository, tag=tag)
    tarball.unlink()
    return recipe.tag


@dataclass(frozen=True)
class Result:
    exit_code: int
    output: str


def run_script(
    image: str,
    script: str,
    *,
    mounts: Mapping[Path, str] | None = None,
    timeout: float = 900,
) -> Result:
    """Run `script` with bash in a new container of `image`; volumes read-only."""
    api = client()
    volumes = {str(host): {"bind": inside, "mode": "ro"} for host, inside in (mounts or {}).items()}
    container = api.containers.run(
        image,
        ["bash", "-euxo", "pipefail", "-c", script],
        detach=True,
        volumes=volumes,
        environment={"DEBIAN_FRONTEND": "noninteractive"},
        network_mode="none",
    )
    _containers.append(container)
    try:
        status = container.wait(timeout=timeout)
    except Exception as error:  # requests' timeout types vary by version
        container.kill()
        raise die(f"container script timed out after {timeout} s ({error})")
    output = container.logs().decode(errors="replace")
    return Result(int(status.get("StatusCode", 1)), output)


def cleanup() -> None:
    """Remove every container this process started."""
    while _containers:
        container = _containers.pop()
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            pass


def export_filesystem(image: str, script: str, dest: Path, *, mounts: Mapping[Path, str] | None = None) -> Path:
    """Run `script` in a container of `image`, then export its file system to `dest`.

    For booting the result in a VM (gdrkit.vm): e.g. install the packages
    with DKMS and copy the tree out.
    """
    api = client()
    volumes = {str(host): {"bind": inside, "mode": "ro"} for host, inside in (mounts or {}).items()}
    container = api.containers.run(
        image,
        ["bash", "-euxo", "pipefail", "-c", script],
        detach=True,
        volumes=volumes,
        environment={"DEBIAN_FRONTEND": "noninteractive"},
        network_mode="none",
    )
    _containers.append(container)
    status = container.wait(timeout=1800)
    if status.get("StatusCode", 1) != 0:
        raise die("preparing the file system failed:\n" + container.logs().decode(errors="replace")[-3000:])
    dest.mkdir(parents=True, exist_ok=True)
    archive = dest.parent / f".{dest.name}.tar"
    with archive.open("wb") as handle:
        for chunk in container.export():
            handle.write(chunk)
    run(["tar", "-xf", archive, "-C", dest, "--numeric-owner"])
    archive.unlink()
    return dest


def images_built(names: Sequence[str] = ("gdrkit-test",)) -> list[str]:
    return [tag for image in client().images.list() for tag in image.tags if tag.split(":")[0] in names]
