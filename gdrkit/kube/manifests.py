"""The Kubernetes manifests: rendered from templates/kube/, committed under deploy/kubernetes/, validated offline.

`render()` returns every file (path below deploy/kubernetes/ -> text) from the
one set of facts: the version (gdrkit.version), the image names and tags
(gdrkit.kube.images), their digests (the image lock, gdrkit.kube.lock), the
CDI name and the module options (packages/gdrcopy.yaml).  Every image is
named fully qualified and pinned by the digest build-image recorded; a file
whose image has no digest in the lock is left out, with what to do
(`render_all()`).  `./toolkit k8s-manifests` writes them; the test suite
fails when the committed files differ from a fresh render, and
`unpinned()` finds any image reference without registry or digest.

`validate()` checks each Kubernetes object against the schemas of the
Kubernetes release given, offline, with kubernetes-validate (PyPI), in
strict mode (unknown fields are errors).  Objects of kinds the built-in
schemas do not have (the KMM `Module`, a custom resource) and kustomize files
are reported as not validated, with why; the KMM Module is then checked
against what we know of it (its images are the ones build-image makes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gdrkit import version
from gdrkit.distro import debian
from gdrkit.kube import images, lock
from gdrkit.packaging import model
from gdrkit.packaging import render as pkg_render
from gdrkit.system import die
from gdrkit.version import REPO_ROOT

OUTPUT_DIR = REPO_ROOT / "deploy" / "kubernetes"
NAMESPACE = "gdrcopy"
LOADER_NAME = "gdrcopy-loader"
# The GPU Operator validator's check for gdrdrv (also the loader's readiness).
VALIDATOR_CHECK = "lsmod | grep -E '^gdrdrv\\s'"
# Labels of GPU nodes: GPU feature discovery's, else node feature discovery's (NVIDIA's PCI vendor id).
GPU_NODE_LABELS = (("nvidia.com/gpu.present", "true"), ("feature.node.kubernetes.io/pci-10de.present", "true"))
# The Kubernetes release the manifests are validated against: the oldest
# still supported upstream when written; kubernetes-validate ships its schemas.
KUBERNETES_VERSION = "1.32.0"
# What the example pod runs in the driver image: the device CDI gave it.
EXAMPLE_COMMAND = ("sh", "-c", "ls -l /dev/gdrdrv && test -c /dev/gdrdrv")
# Who may open /dev/gdrdrv on the Kubernetes paths: root, and pods whose user
# is in this group (securityContext.supplementalGroups); other non-root pods
# are refused.  44 is the GID Debian and Ubuntu give the video group, the
# group the packages give the node; a GID is the same on every node, a
# group name is not.  Render with another: ./toolkit k8s-manifests --node-gid N.
NODE_GID = 44
NODE_MODE = "0660"
# The example pod's non-root user.
EXAMPLE_UID = 1000


def default_node() -> images.NodeOs:
    """The node OS of the base manifests: the Debian release this project's build host runs."""
    codename = debian.DEFAULT_DEBIAN_RELEASE.codename
    return next(node for node in images.node_oses() if node.codename == codename)


def driver_image(node: images.NodeOs, repository: str = images.DEFAULT_REPOSITORY) -> str:
    return images.ImageSpec("driver", node, "", repository).tag


@dataclass(frozen=True)
class Rendering:
    """The rendered files, and those left out because an image they need has no digest in the lock (path -> why)."""

    files: dict[str, str]
    left_out: dict[str, str]


def _no_digest(tag: str, build: str) -> str:
    return (
        f"no digest of {tag} in {lock.LOCK_PATH.relative_to(REPO_ROOT)}: run ./toolkit build-image {build},"
        f" {lock.PUSH_HINT}, then ./toolkit k8s-manifests"
    )


def _environment() -> Any:
    return pkg_render.environment()


def module_options(description: model.Description, node_gid: int = NODE_GID) -> list[str]:
    """gdrdrv's parameters as the packages' modprobe.d file gives them, with the pods' group (the KMM Module's)."""
    options = [f"{key}={value}" for key, value in description.kernel_module.options.items()]
    return [*options, f"node_mode={NODE_MODE}", f"node_gid={node_gid}"]


def check_node_gid(node_gid: int) -> int:
    """`node_gid` if a group id a pod may be given (1..2**31-1: not root's group 0)."""
    if not 0 < node_gid < 2**31:
        raise die(
            f"--node-gid {node_gid} is not a group id for pods' supplementalGroups",
            "give a number from 1 to 2147483647 (0 is root's group: every pod running as root's group would open it)",
        )
    return node_gid


def render(
    kmm_kernels: Sequence[str] = (),
    repository: str = images.DEFAULT_REPOSITORY,
    locked: Mapping[str, lock.LockedImage] | None = None,
    node_gid: int = NODE_GID,
) -> dict[str, str]:
    """Every manifest whose images the lock pins, by path below deploy/kubernetes/."""
    return render_all(kmm_kernels, repository, locked, node_gid).files


def render_all(
    kmm_kernels: Sequence[str] = (),
    repository: str = images.DEFAULT_REPOSITORY,
    locked: Mapping[str, lock.LockedImage] | None = None,
    node_gid: int = NODE_GID,
) -> Rendering:
    """The manifests of `repository`'s images with the digests of `locked` (default: the lock file).

    The loader, its example pod and the operator's values need the default
    node OS's driver image; an overlay also its own OS's; the KMM Module one
    literal mapping per locked KMM image (`kmm_kernels`: only those, each
    required).  KMM's generic `${KERNEL_FULL_VERSION}` mapping cannot name a
    digest, so there is none: each kernel of the fleet gets its image.
    """
    check_node_gid(node_gid)
    locked = lock.load() if locked is None else locked
    desc = model.load()
    env = _environment()
    node = default_node()
    image = driver_image(node, repository)
    image_name = lock.split_reference(image)[0]
    labels = "\n".join(
        f"{key}: {value}"
        for key, value in (
            ("app.kubernetes.io/name", LOADER_NAME),
            ("app.kubernetes.io/part-of", "gdrcopy"),
            ("app.kubernetes.io/version", f'"{version.VERSION}"'),
        )
    )
    common = {
        "namespace": NAMESPACE,
        "version": version.VERSION,
        "cdi": desc.device_node.kubernetes_cdi,
        "node_name": desc.device_node.name,
        "node_gid": node_gid,
        "node_mode": NODE_MODE,
        "example_uid": EXAMPLE_UID,
    }
    files: dict[str, str] = {}
    left_out: dict[str, str] = {}
    base = locked.get(image)
    if base is None:
        why = _no_digest(image, f"--os {node.tag} --kind driver --repository {repository}")
        for path in ("loader/", "examples/pod-cdi.yaml", "gpu-operator/values.yaml", "overlays/"):
            left_out[path] = why
    else:
        files["loader/namespace.yaml"] = env.get_template("kube/namespace.yaml.j2").render(common)
        files["loader/daemonset.yaml"] = env.get_template("kube/daemonset.yaml.j2").render(
            common,
            name=LOADER_NAME,
            labels=labels,
            image=base.pinned,
            validator=VALIDATOR_CHECK,
            gpu_node_labels=GPU_NODE_LABELS,
        )
        files["loader/kustomization.yaml"] = env.get_template("kube/kustomization-base.yaml.j2").render(common)
        files["examples/pod-cdi.yaml"] = env.get_template("kube/pod-cdi.yaml.j2").render(
            common, example_image=base.pinned, example_command=EXAMPLE_COMMAND
        )
        files["gpu-operator/values.yaml"] = env.get_template("kube/gpu-operator-values.yaml.j2").render(
            common,
            repository=repository,
            image_name_short=images.DRIVER_IMAGE,
            digest=base.digest,
            os_tag=node.tag,
            tag=image,
        )
        for other in images.node_oses():
            if other == node:
                continue
            other_image = driver_image(other, repository)
            entry = locked.get(other_image)
            path = f"overlays/{other.tag}/kustomization.yaml"
            if entry is None:
                left_out[path] = _no_digest(other_image, f"--os {other.tag} --kind driver --repository {repository}")
                continue
            files[path] = env.get_template("kube/kustomization-overlay.yaml.j2").render(
                common, os_tag=other.tag, image_name=image_name, digest=entry.digest, tag=other_image
            )
    mappings = kmm_images(kmm_kernels, repository, locked)
    missing = [kver for kver in kmm_kernels if kver not in mappings]
    for kver in missing:
        kmm_tag = images.ImageSpec("kmm", node, kver, repository).tag
        left_out[f"kmm/module.yaml ({kver})"] = _no_digest(
            kmm_tag, f"--kind kmm --kernel {kver} --repository {repository}"
        )
    if mappings:
        files["kmm/module.yaml"] = env.get_template("kube/kmm-module.yaml.j2").render(
            common, module_options=module_options(desc, node_gid), kmm_images=sorted(mappings.items())
        )
    elif not missing:
        left_out["kmm/module.yaml"] = (
            f"no KMM image of {repository} in {lock.LOCK_PATH.relative_to(REPO_ROOT)}: run ./toolkit build-image"
            f" --kind kmm --kernel <each kernel of your nodes> --repository {repository}, push the archives, then"
            " ./toolkit k8s-manifests"
        )
    return Rendering(files, left_out)


GENERATED_MARK = "# Generated by gdrkit"


def write(output: Path = OUTPUT_DIR, files: Mapping[str, str] | None = None) -> tuple[list[Path], list[Path]]:
    """Write the rendered manifests below `output`, remove generated ones no longer rendered; (written, removed)."""
    wanted = render() if files is None else files
    written = []
    for relative, text in wanted.items():
        path = output / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    removed = []
    for path in sorted(output.rglob("*.yaml")) if output.exists() else []:
        relative = str(path.relative_to(output))
        if relative not in wanted and path.read_text().startswith(GENERATED_MARK):
            path.unlink()
            removed.append(path)
            parent = path.parent
            while parent != output and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent
    return written, removed


def stale(output: Path = OUTPUT_DIR, wanted: Mapping[str, str] | None = None) -> list[str]:
    """The committed manifests that differ from a fresh render (or are missing, or left over)."""
    wanted = render() if wanted is None else wanted
    found = []
    for relative, text in wanted.items():
        path = output / relative
        if not path.exists() or path.read_text() != text:
            found.append(relative)
    present = {str(p.relative_to(output)) for p in output.rglob("*.yaml")} if output.exists() else set()
    found += sorted(present - set(wanted))
    return found


@dataclass(frozen=True)
class Verdict:
    """One object's validation: valid, invalid (with the error) or not validated (with why)."""

    path: str
    kind: str
    name: str
    status: str  # "valid", "invalid", "not validated"
    detail: str = ""

    def line(self) -> str:
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.status:<13} {self.path} {self.kind}/{self.name}{detail}"


def documents(files: Mapping[str, str]) -> Iterable[tuple[str, dict[str, Any]]]:
    for path, text in files.items():
        for doc in yaml.safe_load_all(text):
            if doc is not None:
                yield path, doc


def validate(files: Mapping[str, str], kubernetes_version: str = KUBERNETES_VERSION) -> list[Verdict]:
    """Each object of `files` against the Kubernetes schemas of `kubernetes_version`, strictly."""
    try:
        import kubernetes_validate
    except ImportError as error:
        raise die(
            f"kubernetes-validate is not installed ({error})",
            "run ./toolkit k8s-manifests once: it installs the kube extra (requirements/kube.txt)",
        ) from None
    verdicts = []
    for path, doc in documents(files):
        kind = str(doc.get("kind", "?"))
        name = str((doc.get("metadata") or {}).get("name", "-"))
        api = str(doc.get("apiVersion", ""))
        if path.startswith("gpu-operator/"):
            verdicts.append(
                Verdict(
                    path,
                    "HelmValues",
                    "gpu-operator",
                    "not validated",
                    "Helm values of the GPU Operator chart, not a Kubernetes object",
                )
            )
            continue
        if api.startswith("kustomize.config.k8s.io/"):
            verdicts.append(
                Verdict(
                    path,
                    kind,
                    name,
                    "not validated",
                    "a kustomize file, read by kubectl apply -k, not sent to the cluster",
                )
            )
            continue
        try:
            kubernetes_validate.validate(doc, kubernetes_version, strict=True)
            verdicts.append(Verdict(path, kind, name, "valid", f"Kubernetes {kubernetes_version} schema, strict"))
        except kubernetes_validate.SchemaNotFoundError:
            verdicts.append(
                Verdict(
                    path,
                    kind,
                    name,
                    "not validated",
                    f"{api} {kind} is a custom resource: the built-in schemas do not have it",
                )
            )
        except kubernetes_validate.ValidationError as error:
            where = "/".join(str(part) for part in error.path)
            verdicts.append(Verdict(path, kind, name, "invalid", f"{where}: {error.message}"))
    return verdicts


def kmm_images(
    kmm_kernels: Sequence[str] = (),
    repository: str = images.DEFAULT_REPOSITORY,
    locked: Mapping[str, lock.LockedImage] | None = None,
) -> dict[str, str]:
    """kernel -> pinned image of the KMM images of `repository` and this version that the lock has.

    `kmm_kernels`: only these kernels (those not locked are absent).
    """
    locked = lock.load() if locked is None else locked
    node = default_node()
    found = {}
    for entry in locked.values():
        if entry.kind != "kmm" or (kmm_kernels and entry.kernel not in kmm_kernels):
            continue
        if entry.reference == images.ImageSpec("kmm", node, entry.kernel, repository).tag:
            found[entry.kernel] = entry.pinned
    return found


def check_kmm_module(doc: Mapping[str, Any], expected_images: Mapping[str, str]) -> list[str]:
    """What is wrong with the KMM Module `doc` (empty: nothing): the fields KMM reads, and our images."""
    problems = []
    if doc.get("apiVersion") != "kmm.sigs.x-k8s.io/v1beta1" or doc.get("kind") != "Module":
        problems.append(f"not a KMM v1beta1 Module: {doc.get('apiVersion')} {doc.get('kind')}")
    container = (((doc.get("spec") or {}).get("moduleLoader") or {}).get("container")) or {}
    if (container.get("modprobe") or {}).get("moduleName") != "gdrdrv":
        problems.append("spec.moduleLoader.container.modprobe.moduleName is not gdrdrv")
    mappings = {
        str(m.get("literal") or m.get("regexp")): str(m.get("containerImage"))
        for m in container.get("kernelMappings") or []
    }
    if not mappings:
        problems.append("no kernelMappings: KMM would load gdrdrv nowhere")
    if mappings != dict(expected_images):
        problems.append(f"kernelMappings {mappings} are not the KMM images build-image makes {dict(expected_images)}")
    if not (doc.get("spec") or {}).get("selector"):
        problems.append("no spec.selector: KMM would pick no nodes")
    return problems


# The kustomize fields our overlays use; build_kustomization() refuses others.
KUSTOMIZE_FIELDS = frozenset({"apiVersion", "kind", "resources", "images"})


def build_kustomization(files: Mapping[str, str], directory: str) -> dict[str, str]:
    """What `kubectl apply -k <directory>` would send, for the kustomize subset our files use (pure).

    `resources` (files, or directories with their own kustomization.yaml)
    and `images` (name -> newName/newTag in every container and init
    container) are applied as kustomize applies them; any other field is
    refused rather than ignored.  Returns the objects by their source path.
    """
    path = f"{directory.rstrip('/')}/kustomization.yaml"
    if path not in files:
        raise die(f"no {path} among the manifests")
    spec = yaml.safe_load(files[path])
    unknown = set(spec) - KUSTOMIZE_FIELDS
    if unknown:
        raise die(
            f"{path} uses kustomize fields {sorted(unknown)} that this check does not apply",
            "render with kubectl kustomize",
        )
    out: dict[str, str] = {}
    for resource in spec.get("resources") or []:
        target = _normalize(f"{directory}/{resource}")
        if f"{target}/kustomization.yaml" in files:
            out.update(build_kustomization(files, target))
        elif target in files:
            out[target] = files[target]
        else:
            raise die(f"{path} names {resource}, which is not among the manifests")
    for image in spec.get("images") or []:
        out = {name: _retag(text, image) for name, text in out.items()}
    return out


def _normalize(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if not parts:
                raise die(f"{path} leaves deploy/kubernetes/")
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def _retag(text: str, image: Mapping[str, str]) -> str:
    """`text`'s objects with kustomize's `images` entry applied to their pod templates.

    As kustomize: a `digest` replaces tag and digest (`newName@digest`),
    else `newTag` replaces the tag.
    """
    docs = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    for doc in docs:
        pod = ((doc.get("spec") or {}).get("template") or {}).get("spec") or doc.get("spec") or {}
        for container in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
            name, tag, digest = lock.split_reference(str(container.get("image", "")))
            if name != image["name"]:
                continue
            new_name = image.get("newName", name)
            if image.get("digest"):
                container["image"] = f"{new_name}@{image['digest']}"
            elif image.get("newTag"):
                container["image"] = f"{new_name}:{image['newTag']}"
            else:
                container["image"] = f"{new_name}{':' + tag if tag else ''}{'@' + digest if digest else ''}"
    return yaml.safe_dump_all(docs, sort_keys=False)


def kustomize_dirs(files: Mapping[str, str]) -> list[str]:
    return sorted(path.rpartition("/")[0] for path in files if path.endswith("kustomization.yaml"))


def validate_all(files: Mapping[str, str], kubernetes_version: str = KUBERNETES_VERSION) -> list[Verdict]:
    """validate() of the files, then of what each kustomize directory renders to (`dir => path`)."""
    verdicts = validate(files, kubernetes_version)
    for directory in kustomize_dirs(files):
        rendered = build_kustomization(files, directory)
        for verdict in validate(rendered, kubernetes_version):
            images_used = _images(rendered[verdict.path])
            detail = f"{verdict.detail}; images {', '.join(images_used)}" if images_used else verdict.detail
            verdicts.append(
                Verdict(f"{directory} => {verdict.path}", verdict.kind, verdict.name, verdict.status, detail)
            )
    return verdicts


def _images(text: str) -> list[str]:
    found = []
    for doc in yaml.safe_load_all(text):
        pod = (((doc or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
        found += [str(c.get("image")) for c in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]]
    return sorted(set(found))


def image_references(files: Mapping[str, str]) -> list[tuple[str, str]]:
    """(path, reference) of every image `files` name: containers' `image`, KMM's `containerImage`,
    kustomize `images` entries as they render, and the GPU Operator's repository/image/version."""
    found: list[tuple[str, str]] = []
    for path, doc in documents(files):
        found += [(path, reference) for reference in _references_in(doc)]
    return found


def _references_in(node: Any) -> Iterable[str]:
    if isinstance(node, list):
        for item in node:
            yield from _references_in(item)
        return
    if not isinstance(node, dict):
        return
    if {"repository", "image", "version"} <= node.keys():
        # The GPU Operator's form: a digest as version joins with @, a tag with :.
        version_ = str(node["version"])
        joiner = "@" if version_.startswith("sha256:") else ":"
        yield f"{node['repository']}/{node['image']}{joiner}{version_}"
        return
    for key, value in node.items():
        if key in ("image", "containerImage") and isinstance(value, str):
            yield value
        elif key == "images" and isinstance(value, list) and all(isinstance(v, dict) and "name" in v for v in value):
            for entry in value:
                name = str(entry.get("newName") or entry["name"])
                if entry.get("digest"):
                    yield f"{name}@{entry['digest']}"
                else:
                    yield f"{name}:{entry['newTag']}" if entry.get("newTag") else name
        else:
            yield from _references_in(value)


def unpinned(files: Mapping[str, str]) -> list[str]:
    """Every image reference of `files` that names no registry or no digest, with what to do (pure)."""
    problems: list[str] = []
    for path, reference in image_references(files):
        problem = lock.reference_problem(reference)
        if problem and f"{path}: {problem}" not in problems:
            problems.append(f"{path}: {problem}")
    return problems


def committed(output: Path = OUTPUT_DIR) -> dict[str, str]:
    """The manifests as they are below `output` (path -> text)."""
    if not output.exists():
        return {}
    return {str(p.relative_to(output)): p.read_text() for p in sorted(output.rglob("*.yaml"))}


def schema_versions() -> list[str]:
    """The Kubernetes releases (MAJOR.MINOR) whose schemas kubernetes-validate bundles, oldest first."""
    from kubernetes_validate import utils

    found = {".".join(v.split(".")[:2]) for v in utils.all_versions()}
    return sorted(found, key=lambda v: tuple(int(p) for p in v.split(".")))


def check_kubernetes_version(value: str) -> str:
    """`value` as the MAJOR.MINOR.PATCH kubernetes-validate takes, or an input error naming --kubernetes."""
    from gdrkit.system import bad_input

    known = schema_versions()
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?", value.strip())
    if match is None or f"{match[1]}.{match[2]}" not in known:
        raise bad_input(
            f"--kubernetes {value!r}: no bundled schemas for that Kubernetes release",
            f"give one of {known[0]} ... {known[-1]} (e.g. --kubernetes {known[-1]}), or leave it out for"
            f" {KUBERNETES_VERSION}",
        )
    return f"{match[1]}.{match[2]}.{match[3] or 0}"
