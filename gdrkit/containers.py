"""The one place gdrkit talks to Docker (through the Docker SDK).

Everything container-related goes through `Engine`: starting the engine
when it is not running (dockerd in the background, as root), turning a
directory into an image (`docker import`, since no registry may be
reachable), running a command in a container with bind mounts, committing
and exporting containers.  Unit tests replace `Engine.client` with a fake.
Every container an `Engine` creates is removed by `Engine.cleanup()`.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gdrkit.system import die, ensure_debian_packages, have_command, log

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


def _connect() -> Any:
    import docker  # imported here so that the rest of gdrkit loads without the SDK

    return docker.from_env(timeout=600)


def start_engine() -> None:
    """Start dockerd if nothing answers on its socket (installs docker.io first if needed)."""
    try:
        _connect().ping()
        return
    except Exception:  # noqa: BLE001 - any failure means: not running yet
        pass
    if not have_command("dockerd"):
        ensure_debian_packages(["docker.io"])
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
            return False, f"cannot pull {reference}: {error}"

    def import_directory(self, directory: Path, tag: str) -> None:
        """Make image `tag` from a root filesystem directory (like `tar -C dir -c . | docker import`)."""
        log(f"importing {directory} as image {tag}")
        proc = subprocess.Popen(
            ["tar", "-C", str(directory), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE
        )
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
    ) -> tuple[RunResult, Any]:
        """Run `bash -c script` in a new container; (result, container). Output streams to stderr."""
        volumes = {str(host): {"bind": inside, "mode": "rw"} for host, inside in mounts.items()}
        environment = dict(env)
        if HOST_CA_BUNDLE.exists():
            volumes[str(HOST_CA_BUNDLE)] = {"bind": CONTAINER_CA_BUNDLE, "mode": "ro"}
            environment.setdefault("PIP_CERT", CONTAINER_CA_BUNDLE)
        container = self.client.containers.create(
            image,
            ["bash", "-c", script],
            volumes=volumes,
            environment=environment,
            privileged=privileged,
            network_mode="host",
        )
        self.created.append(container)
        container.start()
        chunks: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        for chunk in container.logs(stream=True, follow=True):
            chunks.append(chunk)
            print(chunk.decode(errors="replace"), end="", flush=True)
            if time.monotonic() > deadline:
                container.kill()
                break
        status = int(container.wait().get("StatusCode", 1))
        if not keep:
            self.remove(container)
        return RunResult(status, b"".join(chunks).decode(errors="replace")), container

    def commit(self, container: Any, tag: str) -> None:
        repository, _, version = tag.partition(":")
        container.commit(repository=repository, tag=version or "latest")

    def export_to(self, container: Any, directory: Path) -> None:
        """Unpack the container's filesystem into `directory` (owners and modes kept)."""
        directory.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(
            ["tar", "-C", str(directory), "--numeric-owner", "-xf", "-"], stdin=subprocess.PIPE
        )
        assert proc.stdin is not None
        try:
            for chunk in container.export():
                proc.stdin.write(chunk)
        finally:
            proc.stdin.close()
            status = proc.wait()
        if status != 0:
            raise die(f"unpacking the exported container into {directory} failed (exit {status})")

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
