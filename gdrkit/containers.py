"""The one place gdrkit talks to Docker (through the Docker SDK).

Everything container-related goes through `Engine`: starting the engine
when it is not running (dockerd in the background, as root), building
images locally (mmdebstrap recipes, or any root directory, through
`docker import`: no registry may be reachable), running a script in a
container with bind mounts, committing and exporting containers.  Every
container an `Engine` creates is removed by `Engine.cleanup()`; the
module-level helpers share one default engine, cleaned by `cleanup()`.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gdrkit.distro import debian
from gdrkit.system import (
    cache_dir,
    die,
    ensure_debian_packages,
    error_tail,
    have_command,
    log,
    missing_debian_packages,
    step,
    verbose,
)

DOCKERD_LOG = Path("/var/log/gdrkit-dockerd.log")
# Hosts behind a TLS-intercepting proxy trust its CA through their bundle; containers
# get the same bundle for pip (apt uses plain http mirrors and needs nothing).
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
CONTAINER_CA_BUNDLE = "/etc/gdrkit-host-ca.crt"
START_TIMEOUT_S = 60


@dataclass(frozen=True)
class RunResult:
    status: int
    output: str


@dataclass(frozen=True)
class ImageRecipe:
    """A Debian root file system built with mmdebstrap, cached as an image tagged by its recipe."""

    suite: str
    include: tuple[str, ...]
    # Packages downloaded (not installed) into /opt/extra-debs of the image.
    extra_debs: tuple[str, ...] = ()
    name: str = "gdrkit-test"
    # Paths dpkg never installs (mmdebstrap --dpkgopt=path-exclude=...), e.g. the
    # kernel hook that would build an initramfs nobody boots.  Outside repr() so
    # that recipes without any keep their tags.
    dpkg_excludes: tuple[str, ...] = field(default=(), repr=False)

    @property
    def tag(self) -> str:
        key = repr(self) + (f" dpkg_excludes={self.dpkg_excludes!r}" if self.dpkg_excludes else "")
        digest = hashlib.sha256(key.encode()).hexdigest()[:12]
        return f"{self.name}:{self.suite}-{digest}"


def _connect() -> Any:
    import docker  # imported here so that the rest of gdrkit loads without the SDK

    return docker.from_env(timeout=600)


class _ChunkReader(io.RawIOBase):
    """A readable file over an iterator of byte chunks (a container export, for tarfile)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                return 0
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


def engine_running() -> bool:
    """Whether a Docker engine answers on its socket."""
    try:
        _connect().ping()
        return True
    except Exception:  # noqa: BLE001 - any failure means: not running yet
        return False


def start_engine() -> None:
    """Start dockerd if nothing answers on its socket (installs docker.io first if needed)."""
    # Asked for even when present, so every caller states the need (the test
    # suite's host-needs check counts asks); a dockerd from elsewhere (docker-ce) is used as it is.
    if not have_command("dockerd") or not missing_debian_packages(["docker.io"]):
        ensure_debian_packages(["docker.io"])
    if engine_running():
        return
    if os.geteuid() != 0:
        raise die("the Docker engine is not running", "start it (systemctl start docker) or run as root")
    log("starting dockerd")
    DOCKERD_LOG.parent.mkdir(parents=True, exist_ok=True)
    with DOCKERD_LOG.open("ab") as out:
        subprocess.Popen(["dockerd"], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            _connect().ping()
            return
        except Exception:  # noqa: BLE001
            time.sleep(1)
    raise die(f"dockerd did not come up within {START_TIMEOUT_S}s", f"see {DOCKERD_LOG}")


@dataclass
class Engine:
    """A Docker client plus the containers it created (removed by cleanup())."""

    client: Any = None
    created: list[Any] = field(default_factory=list)

    @classmethod
    def connect(cls) -> Engine:
        start_engine()
        return cls(client=_connect())

    def has_image(self, tag: str) -> bool:
        try:
            self.client.images.get(tag)
            return True
        except Exception:  # noqa: BLE001 - docker.errors.ImageNotFound and friends
            return False

    def pull(self, reference: str) -> tuple[bool, str]:
        """(True, "") when pulled, else (False, why): registries may be unreachable."""
        try:
            self.client.images.pull(reference)
            return True, ""
        except Exception as error:  # noqa: BLE001
            # An APIError's text starts with the request's URL; the daemon's own words say why.
            return False, f"cannot pull {reference}: {getattr(error, 'explanation', None) or error}"

    def import_directory(self, directory: Path, tag: str) -> None:
        """Make image `tag` from a root filesystem directory (like `tar -C dir -c . | docker import`)."""
        log(f"importing {directory} as image {tag}")
        proc = subprocess.Popen(["tar", "-C", str(directory), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        try:
            self.client.api.import_image_from_stream(proc.stdout, repository=tag.split(":")[0], tag=tag.split(":")[-1])
        finally:
            proc.stdout.close()
            status = proc.wait()
        if status != 0:
            raise die(f"tar of {directory} failed (exit {status})")

    def run(
        self,
        image: str,
        script: str,
        *,
        mounts: Mapping[Path, str] = {},
        env: Mapping[str, str] = {},
        privileged: bool = False,
        keep: bool = False,
        timeout_s: float = 3600,
        read_only: bool = False,
        network: bool = True,
        shell_flags: str = "",
        stream: bool | None = None,
        title: str = "",
    ) -> tuple[RunResult, Any]:
        """Run `bash [flags] -c script` in a new container; (result, container).

        With a `title` the run is one step line (gdrkit.system.step): its output
        goes to the step's log, and only when it fails is the tail printed.
        `stream` prints the raw output as it comes (default: GDRKIT_VERBOSE=1).
        """
        if title:
            with step(title) as current:
                result, container = self.run(
                    image, script, mounts=mounts, env=env, privileged=privileged, keep=keep, timeout_s=timeout_s,
                    read_only=read_only, network=network, shell_flags=shell_flags, stream=stream,
                )  # fmt: skip
                current.log_file.write_text(result.output)
                current.failed = result.status != 0
            if result.status != 0 and not verbose():
                print(error_tail(result.output), file=sys.stderr, flush=True)
            return result, container
        stream = verbose() if stream is None else stream
        mode = "ro" if read_only else "rw"
        volumes = {str(host): {"bind": inside, "mode": mode} for host, inside in mounts.items()}
        environment = {"DEBIAN_FRONTEND": "noninteractive", **env}
        if HOST_CA_BUNDLE.exists():
            volumes[str(HOST_CA_BUNDLE)] = {"bind": CONTAINER_CA_BUNDLE, "mode": "ro"}
            environment.setdefault("PIP_CERT", CONTAINER_CA_BUNDLE)
        container = self.client.containers.create(
            image,
            ["bash", *shell_flags.split(), "-c", script],
            volumes=volumes,
            environment=environment,
            privileged=privileged,
            network_mode="host" if network else "none",
        )
        self.created.append(container)
        container.start()
        chunks: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        for chunk in container.logs(stream=True, follow=True):
            chunks.append(chunk)
            if stream:
                print(chunk.decode(errors="replace"), end="", flush=True)
            if time.monotonic() > deadline:
                container.kill()
                chunks.append(f"\n[killed after {timeout_s:.0f} s]\n".encode())
                break
        status = int(container.wait().get("StatusCode", 1))
        if not keep:
            self.remove(container)
        return RunResult(status, b"".join(chunks).decode(errors="replace")), container

    def ensure_image(self, recipe: ImageRecipe, *, rebuild: bool = False) -> str:
        """The image of `recipe`, built with mmdebstrap and imported on first use; returns its tag."""
        if not rebuild and self.has_image(recipe.tag):
            return recipe.tag
        ensure_debian_packages(["mmdebstrap"])
        tarball = cache_dir() / f"{recipe.tag.replace(':', '_')}.tar"
        hooks = []
        if recipe.extra_debs:
            names = " ".join(recipe.extra_debs)
            hooks = [
                "--customize-hook",
                f'mkdir -p "$1/opt/extra-debs" && cd "$1/opt/extra-debs" && apt-get download {names}',
            ]
        argv = debian.mmdebstrap_command(
            debian.suite(recipe.suite), str(tarball), recipe.include, variant="apt",
            dpkg_excludes=recipe.dpkg_excludes, hooks=hooks,
        )  # fmt: skip
        with step(f"building image {recipe.tag} with mmdebstrap (about a minute)") as current:
            current.run(
                argv, hint="see the log; a mirror out of reach or a package missing from the suite are the usual causes"
            )
            repository, tag = recipe.tag.split(":")
            self.client.api.import_image_from_file(str(tarball), repository=repository, tag=tag)
            tarball.unlink()
        return recipe.tag

    def commit(self, container: Any, tag: str, *, changes: Sequence[str] = ()) -> None:
        """Image `tag` from `container`; `changes` are Dockerfile instructions (ENTRYPOINT, CMD, LABEL)."""
        repository, _, version = tag.rpartition(":") if ":" in tag.rpartition("/")[2] else (tag, "", "latest")
        container.commit(repository=repository, tag=version, changes=list(changes) or None)

    def export_to(self, container: Any, directory: Path) -> None:
        """Unpack the container's filesystem into `directory` (owners and modes kept)."""
        directory.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(["tar", "-C", str(directory), "--numeric-owner", "-xf", "-"], stdin=subprocess.PIPE)
        assert proc.stdin is not None
        try:
            for chunk in container.export():
                proc.stdin.write(chunk)
        finally:
            proc.stdin.close()
            status = proc.wait()
        if status != 0:
            raise die(f"unpacking the exported container into {directory} failed (exit {status})")

    def flatten(self, container: Any, tag: str, *, changes: Sequence[str] = (), drop: Sequence[str] = ()) -> None:
        """Image `tag` of `container`'s filesystem alone, with `changes` (Dockerfile instructions).

        Unlike commit, nothing of the container's run comes along: not the
        bind mounts, which commit would keep as VOLUMEs, nor their mount
        points, which `drop` names (paths without the leading /).
        """
        dropped = tuple(path.strip("/") for path in (*drop, CONTAINER_CA_BUNDLE))
        repository, _, version = tag.rpartition(":")
        with tempfile.TemporaryDirectory(prefix="gdrkit-flatten-", dir=cache_dir()) as tmp:
            flat = Path(tmp) / "rootfs.tar"
            reader = _ChunkReader(container.export())
            with tarfile.open(fileobj=reader, mode="r|") as source, tarfile.open(flat, "w") as out:
                for member in source:
                    name = member.name.strip("/").removeprefix("./")
                    if any(name == path or name.startswith(path + "/") for path in dropped):
                        continue
                    out.addfile(member, source.extractfile(member) if member.isfile() else None)
            self.client.api.import_image_from_file(str(flat), repository=repository, tag=version, changes=list(changes))

    def save_image(self, tag: str, archive: Path) -> None:
        """Write image `tag` to `archive` as `docker save` does (an OCI layout from Docker 25 on)."""
        archive.parent.mkdir(parents=True, exist_ok=True)
        with archive.open("wb") as out:
            for chunk in self.client.images.get(tag).save(named=True):
                out.write(chunk)

    def export_image(self, tag: str, directory: Path) -> None:
        """Unpack image `tag`'s filesystem into `directory` (through a container that never starts)."""
        container = self.client.containers.create(tag, ["true"], entrypoint=[])
        self.created.append(container)
        try:
            self.export_to(container, directory)
        finally:
            self.remove(container)

    def remove(self, container: Any) -> None:
        try:
            container.remove(force=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        if container in self.created:
            self.created.remove(container)

    def cleanup(self) -> None:
        for container in list(self.created):
            self.remove(container)


@contextmanager
def engine() -> Iterator[Engine]:
    """An Engine whose containers are all removed when the block ends, however it ends."""
    instance = Engine.connect()
    try:
        yield instance
    finally:
        instance.cleanup()


_default: Engine | None = None


def default_engine() -> Engine:
    """The engine the module-level helpers share (connected on first use)."""
    global _default
    if _default is None:
        _default = Engine.connect()
    return _default


def ensure_image(recipe: ImageRecipe, *, rebuild: bool = False) -> str:
    return default_engine().ensure_image(recipe, rebuild=rebuild)


def run_script(image: str, script: str, *, mounts: Mapping[Path, str] | None = None, timeout: float = 900) -> RunResult:
    """Run `script` (bash -euxo pipefail) offline in a new container of `image`, mounts read-only."""
    result, _ = default_engine().run(
        image,
        script,
        mounts=mounts or {},
        read_only=True,
        network=False,
        shell_flags="-euxo pipefail",
        stream=False,
        timeout_s=timeout,
    )
    return result


def cleanup() -> None:
    """Remove every container the default engine started."""
    if _default is not None:
        _default.cleanup()
