"""The image lock: the digest of each Kubernetes image build-image made, which the manifests pin.

A tag is a name its registry's owner can point at other content, and a
reference without a registry host (`gdrcopy/gdrdrv:...`) is resolved by
container runtimes on docker.io, where whoever owns that name decides what a
privileged loader runs.  So every image the manifests name is fully
qualified and pinned by digest: `<registry>/<path>:<tag>@sha256:<hex>`.

The digest comes from `./toolkit build-image`: it saves each image it built
as an OCI archive (oci_archive(): from `docker save`'s output, legacy or OCI)
and takes the manifest digest from the archive's index.json (checked against
the blob).  Pushing that archive unchanged
(`skopeo copy --preserve-digests oci-archive:FILE docker://REF`) makes the
registry serve the same digest.  build-image writes the digests into
deploy/kubernetes/images.lock (LOCK_PATH); `./toolkit k8s-manifests`
renders from it, and `--check` refuses any image reference that names no
registry or no digest (reference_problem()).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import tarfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gdrkit.system import die
from gdrkit.version import REPO_ROOT

LOCK_PATH = REPO_ROOT / "deploy" / "kubernetes" / "images.lock"
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
LOCK_HEADER = """\
# The Kubernetes images' digests: written by ./toolkit build-image (each image
# it built, as its OCI archive has it), read by ./toolkit k8s-manifests, which
# renders deploy/kubernetes/ with every image pinned by these digests.  Push
# each archive unchanged so that the registry serves the same digest:
#   skopeo copy --preserve-digests oci-archive:FILE docker://<the image's name>
# Edit with build-image (--repository names your registry), not by hand.
"""
PUSH_HINT = "push the OCI archive it writes with skopeo copy --preserve-digests"


@dataclass(frozen=True)
class LockedImage:
    """One image of the lock: its tagged name, fully qualified, and what build-image knew of it."""

    reference: str  # <registry>/<path>:<tag>
    digest: str  # sha256:<hex>, the manifest digest
    kind: str  # driver, precompiled, kmm
    os: str  # the node OS tag (debian12); for kmm the OS it was built for
    kernel: str  # "" for the driver kind
    commit: str  # the commit whose packages are in it

    @property
    def pinned(self) -> str:
        """The reference the manifests use: tag for the reader, digest for the runtime."""
        return f"{self.reference}@{self.digest}"

    def entry(self) -> dict[str, str]:
        return {"digest": self.digest, "kind": self.kind, "os": self.os, "kernel": self.kernel, "commit": self.commit}


def split_reference(reference: str) -> tuple[str, str, str]:
    """(name, tag, digest) of an image reference; tag and digest "" when absent (pure)."""
    name, _, digest = reference.partition("@")
    last = name.rpartition("/")[2]
    tag = ""
    if ":" in last:
        name, _, tag = name.rpartition(":")
    return name, tag, digest


def registry_host(name: str) -> str:
    """The registry host a reference's name starts with, "" when it has none.

    As container runtimes read a name: the first component is a host only
    when the name has more than one and it has a dot, a port, or is
    localhost; otherwise the runtime takes docker.io.
    """
    first, slash, _ = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return first
    return ""


def reference_problem(reference: str) -> str:
    """Why `reference` may not appear in a manifest ("" when it may): no registry, or no digest (pure)."""
    name, _, digest = split_reference(reference)
    if not registry_host(name):
        return (
            f"image {reference} names no registry: container runtimes pull it from docker.io, whose owner of that"
            " name is not you; build the images with ./toolkit build-image --repository <your registry>/<path>,"
            " push them, and render with ./toolkit k8s-manifests"
        )
    if not DIGEST.fullmatch(digest):
        return (
            f"image {reference} is not pinned by digest (...@sha256:<64 hex digits>): whoever can push to its tag"
            f" decides what runs; render the manifests from {LOCK_PATH.relative_to(REPO_ROOT)} (./toolkit"
            " k8s-manifests), where ./toolkit build-image records each image's digest"
        )
    return ""


def load(path: Path = LOCK_PATH) -> dict[str, LockedImage]:
    """The lock's images by tagged reference; empty when the file does not exist."""
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise die(f"{path} is not YAML: {error}", "rewrite it with ./toolkit build-image") from None
    raw = data.get("images") or {}
    if not isinstance(raw, dict):
        raise die(f"{path}: images is not a mapping of reference to entry", "rewrite it with ./toolkit build-image")
    found = {}
    for reference, entry in raw.items():
        locked = _entry(path, str(reference), entry)
        found[locked.reference] = locked
    return found


def _entry(path: Path, reference: str, entry: Any) -> LockedImage:
    fix = "rewrite the entry with ./toolkit build-image"
    if not isinstance(entry, dict):
        raise die(f"{path}: the entry of {reference} is not a mapping", fix)
    name, tag, digest = split_reference(reference)
    if digest or not tag or not registry_host(name):
        raise die(f"{path}: {reference} is not a fully qualified <registry>/<path>:<tag> without a digest", fix)
    locked = LockedImage(
        reference,
        str(entry.get("digest", "")),
        str(entry.get("kind", "")),
        str(entry.get("os", "")),
        str(entry.get("kernel", "")),
        str(entry.get("commit", "")),
    )
    if not DIGEST.fullmatch(locked.digest):
        raise die(f"{path}: the digest of {reference} is {locked.digest!r}, not sha256:<64 hex digits>", fix)
    if locked.kind not in ("driver", "precompiled", "kmm"):
        raise die(f"{path}: {reference} has kind {locked.kind!r}, not driver, precompiled or kmm", fix)
    return locked


def dump(locked: Mapping[str, LockedImage]) -> str:
    """The lock file's text, sorted so that rewrites diff only where digests changed (pure)."""
    body = {"images": {ref: locked[ref].entry() for ref in sorted(locked)}}
    return LOCK_HEADER + yaml.safe_dump(body, sort_keys=False, width=200)


def record(new: Iterable[LockedImage], path: Path = LOCK_PATH) -> list[LockedImage]:
    """Add or replace `new` in the lock at `path`; returns the entries written."""
    locked = load(path)
    written = []
    for image in new:
        problem = reference_problem(image.pinned)
        if problem:
            raise die(f"not recording {image.reference} in {path}: {problem}")
        locked[image.reference] = image
        written.append(image)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump(locked))
    return written


OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"


def oci_archive(saved: Path, archive: Path) -> str:
    """`saved` (what `docker save` wrote) as an OCI archive at `archive`; returns its manifest digest.

    Docker writes the OCI layout only when asked through API 1.44 or newer;
    older clients get the legacy layout (manifest.json, <id>.json,
    <dir>/layer.tar).  Either way the image is its config and its
    uncompressed layers, so the OCI manifest made from them here is the
    same for the same image, whatever Docker saved it, and a registry serves
    that digest when the archive is pushed with --preserve-digests.
    """
    with tarfile.open(saved) as tar:
        names = set(tar.getnames())
        oci = "index.json" in names
        if not oci:
            try:
                (entry,) = json.load(_member(tar, "manifest.json"))
            except (KeyError, ValueError) as error:
                raise die(f"{saved} is neither an OCI nor a docker save archive of one image ({error})") from None
    if oci:
        shutil.copyfile(saved, archive)
        return oci_digest(archive)
    with tarfile.open(saved) as tar:
        blobs: dict[str, bytes] = {}

        def blob(data: bytes, media_type: str) -> dict[str, Any]:
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            blobs[digest] = data
            return {"mediaType": media_type, "digest": digest, "size": len(data)}

        config = blob(_member(tar, entry["Config"]).read(), OCI_CONFIG)
        layers = [blob(_member(tar, layer).read(), OCI_LAYER) for layer in entry["Layers"]]
    manifest = json.dumps(
        {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": config, "layers": layers},
        separators=(",", ":"),
        sort_keys=True,
    ).encode()
    described = blob(manifest, OCI_MANIFEST)
    index = {"schemaVersion": 2, "manifests": [described]}
    with tarfile.open(archive, "w") as out:
        files = {
            "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
            "index.json": json.dumps(index, sort_keys=True).encode(),
            **{f"blobs/sha256/{digest.removeprefix('sha256:')}": data for digest, data in sorted(blobs.items())},
        }
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            out.addfile(info, io.BytesIO(data))
    return oci_digest(archive)


def oci_digest(archive: Path) -> str:
    """The manifest digest of the one image in OCI archive `archive` (a `docker save` tar), checked against its blob."""
    with tarfile.open(archive) as tar:
        try:
            index = json.load(_member(tar, "index.json"))
        except (KeyError, json.JSONDecodeError) as error:
            raise die(
                f"{archive} is not an OCI archive ({error}): no readable index.json",
                "build-image needs Docker 25 or newer, whose docker save writes the OCI layout",
            ) from None
        manifests = index.get("manifests") or []
        if len(manifests) != 1:
            raise die(f"{archive} holds {len(manifests)} images, not one", "save one image per archive")
        digest = str(manifests[0].get("digest", ""))
        if not DIGEST.fullmatch(digest):
            raise die(f"{archive}: the image's digest {digest!r} is not sha256:<64 hex digits>")
        hexdigest = digest.removeprefix("sha256:")
        try:
            blob = _member(tar, f"blobs/sha256/{hexdigest}").read()
        except KeyError:
            raise die(f"{archive} lacks the blob of its manifest {digest}", "save the image again") from None
    if hashlib.sha256(blob).hexdigest() != hexdigest:
        raise die(f"{archive}: the manifest blob does not hash to {digest}", "the archive is damaged: save it again")
    return digest


def _member(tar: tarfile.TarFile, name: str) -> Any:
    extracted = tar.extractfile(name)
    if extracted is None:
        raise KeyError(name)
    return extracted
