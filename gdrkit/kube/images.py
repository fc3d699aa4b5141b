"""The Kubernetes images: the GPU Operator's gdrcopy driver container, precompiled variants, KMM images.

Three kinds, each built from our packages (never from the tree):

`driver`       `<repository>/gdrdrv:<version>-<os>`, the tag the GPU Operator
               forms from `gdrcopy.repository`, `gdrcopy.image` and
               `gdrcopy.version`.  Holds the gdrdrv-dkms sources, a compiler and
               the entrypoint `nvidia-gdrcopy-driver`, which builds gdrdrv on
               the node against the driver root's NVIDIA sources.
`precompiled`  `<repository>/gdrdrv:<version>-<kver>-<os>`: the prebuilt
               module package for one kernel, no compiler; the same entrypoint
               loads that module (set `gdrcopy.version` to `<version>-<kver>`).
`kmm`          `<repository>/gdrdrv-kmm:<version>-<kver>`: gdrdrv.ko under
               `/opt/lib/modules/<kver>/` with depmod's files, for a KMM `Module`.

Bases: a Debian suite's root made with mmdebstrap (gdrkit.containers) where
this host can build one; otherwise the family's registry image, pulled, and
the row is skipped with the pull's error where no registry answers.  `plan()`
says what would be built and why a row cannot be, without touching Docker;
`build_images()` builds; both are what `./toolkit build-image` prints.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gdrkit import version
from gdrkit.containers import Engine, ImageRecipe
from gdrkit.distro import debian
from gdrkit.distro.families import DebianFamily, Family, family, families_of_type
from gdrkit.packaging import model
from gdrkit.packaging import render as pkg_render
from gdrkit.system import die, log

KUBE_DIR = Path(__file__).resolve().parent
ENTRYPOINT_SCRIPT = KUBE_DIR / "nvidia-gdrcopy-driver.sh"
SETUP_SCRIPT = KUBE_DIR / "image_setup.sh"
ENTRYPOINT = "nvidia-gdrcopy-driver"
# The GPU Operator's default gdrcopy.image; ours keeps the name so that only
# gdrcopy.repository and gdrcopy.version change.
DRIVER_IMAGE = "gdrdrv"
KMM_IMAGE = "gdrdrv-kmm"
DEFAULT_REPOSITORY = "gdrcopy"
KINDS = ("driver", "precompiled", "kmm")
BASE_IMAGE_NAME = "gdrkit-kube-base"


@dataclass(frozen=True)
class NodeOs:
    """A node OS that images are made for, named as the GPU Operator names it: `<ID><VERSION_ID>`."""

    os_id: str
    version_id: str
    family_name: str
    # The Debian suite whose mmdebstrap root is the base, where this host can make one.
    suite: str = ""
    # Otherwise the base comes from a registry.
    registry_base: str = ""
    # The Debian or Ubuntu release the .deb packages are built for (codename).
    codename: str = ""

    @property
    def tag(self) -> str:
        return f"{self.os_id}{self.version_id}"

    @property
    def family(self) -> Family:
        if self.codename:
            return DebianFamily(release=debian.debian_release(self.codename))
        return family(self.family_name)


def node_oses() -> list[NodeOs]:
    """Every node OS an image can be asked for: the Debian and Ubuntu releases, one per RPM family."""
    found = []
    for release in debian.DEBIAN_RELEASES.values():
        if not release.version:
            continue  # sid: no VERSION_ID, so no operator tag
        suite = release.codename if release.os_id == "debian" and release.codename in debian.SUITES else ""
        registry = (
            "" if suite else f"{release.os_id}:{release.version if release.os_id == 'ubuntu' else release.codename}"
        )
        found.append(NodeOs(release.os_id, release.version, "debian", suite, registry, release.codename))
    for fam in families_of_type("rpm"):
        found.append(
            NodeOs(fam.name, fam.container_image.rpartition(":")[2], fam.name, registry_base=fam.container_image)
        )
    return found


def node_os(tag: str) -> NodeOs:
    """The node OS whose operator tag is `tag` (debian12, ubuntu22.04, rhel9); dies with the known ones."""
    for candidate in node_oses():
        if candidate.tag == tag:
            return candidate
    raise die(f"no image is made for node OS {tag!r}", f"use one of: {', '.join(o.tag for o in node_oses())}")


def tag_safe(kver: str) -> str:
    """A kernel release as an image tag may spell it (`+` is not allowed: `_`)."""
    return kver.replace("+", "_")


@dataclass(frozen=True)
class ImageSpec:
    """One image to build."""

    kind: str
    node: NodeOs
    kernel: str  # "" for the driver kind
    repository: str = DEFAULT_REPOSITORY

    @property
    def tag(self) -> str:
        if self.kind == "driver":
            return f"{self.repository}/{DRIVER_IMAGE}:{version.VERSION}-{self.node.tag}"
        if self.kind == "precompiled":
            return f"{self.repository}/{DRIVER_IMAGE}:{version.VERSION}-{tag_safe(self.kernel)}-{self.node.tag}"
        return f"{self.repository}/{KMM_IMAGE}:{version.VERSION}-{tag_safe(self.kernel)}"

    def package_names(self, plan: model.Plan) -> list[str]:
        """Which of `plan`'s packages the image installs: the DKMS sources, or the kernel's prebuilt module."""
        wanted = "dkms" if self.kind == "driver" else "kmod"
        names = [p.name for p in plan.packages if p.kind == wanted and (wanted == "dkms" or p.kver == self.kernel)]
        if not names:
            raise die(f"the package description has no {wanted} package for {self.tag}")
        return names

    def base_packages(self) -> tuple[str, ...]:
        fam = self.node.family
        return fam.kube_build_packages if self.kind == "driver" else fam.kube_loader_packages

    def changes(self) -> list[str]:
        """Dockerfile instructions applied when the container is committed."""
        labels = {
            "org.opencontainers.image.title": f"gdrcopy {self.kind} image",
            "org.opencontainers.image.version": version.VERSION,
            "org.gdrcopy.kind": self.kind,
            "org.gdrcopy.os": self.node.tag,
            "org.gdrcopy.kernel": self.kernel or "any (built on the node)",
        }
        lines = [f"LABEL {key}={shlex.quote(value)}" for key, value in labels.items()]
        if self.kind == "kmm":
            # KMM runs its own modprobe in the image; nothing to start.
            return [*lines, 'CMD ["sleep", "infinity"]']
        return [*lines, f'ENTRYPOINT ["{ENTRYPOINT}"]', 'CMD ["install"]']


@dataclass(frozen=True)
class Row:
    """What became of one image: built (with its size) or skipped (with why)."""

    spec: ImageSpec
    status: str  # "built", "skipped", "planned"
    detail: str = ""
    size_bytes: int = 0


def plan(
    oses: Sequence[str],
    kernels: Sequence[str],
    host_codename: str,
    *,
    kinds: Iterable[str] = KINDS,
    repository: str = DEFAULT_REPOSITORY,
) -> list[ImageSpec]:
    """The images for node OSes `oses` (operator tags; empty: every one) and `kernels` (pure).

    Precompiled and KMM images hold a module built with this host's
    compiler: they are planned for the node OS of this host's release
    (`host_codename`), and for others only when `oses` names them (to be
    skipped with the reason).  A KMM image is per kernel, not per OS.
    """
    chosen = [node_os(tag) for tag in oses] if oses else node_oses()
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise die(f"unknown image kind(s) {', '.join(sorted(unknown))}", f"use {', '.join(KINDS)}")
    specs: list[ImageSpec] = []
    for node in chosen:
        if "driver" in kinds:
            specs.append(ImageSpec("driver", node, "", repository))
        if not oses and node.codename != host_codename:
            continue
        for kver in kernels:
            specs += [ImageSpec(kind, node, kver, repository) for kind in ("precompiled", "kmm") if kind in kinds]
    unique: dict[str, ImageSpec] = {}
    for spec in specs:
        unique.setdefault(spec.tag, spec)
    return list(unique.values())


def skip_reason(spec: ImageSpec, host_codename: str) -> str:
    """Why `spec` cannot be built on this host ("" when it can), before any Docker call (pure).

    Missing kernel headers are not a reason: the package build installs them.
    """
    if spec.node.family.package_type != "deb":
        return f"{spec.node.tag} images need the {spec.node.family_name} packages' base {spec.node.registry_base}; only the deb path is built here so far"
    if spec.kind != "driver":
        if spec.node.codename != host_codename:
            return f"the prebuilt module is built with this host's compiler ({host_codename}): build {spec.node.tag}'s on a {spec.node.codename} host"
    return ""


def base_recipe(spec: ImageSpec) -> ImageRecipe:
    """The mmdebstrap recipe of a Debian-suite base (the compiler only in the driver kind's)."""
    return ImageRecipe(spec.node.suite, tuple(spec.base_packages()), name=BASE_IMAGE_NAME)


def kube_cdi_spec(description: model.Description | None = None) -> str:
    """Our CDI spec under the Kubernetes name (nvidia.com/gdrcopy=all), from the packages' template."""
    desc = description or model.load()
    template = pkg_render.environment().get_template("system/cdi.yaml.j2")
    return template.render(node=desc.device_node, cdi=desc.device_node.kubernetes_cdi)


def setup_command(spec: ImageSpec, files: Sequence[str]) -> list[str]:
    """The argv that image_setup.sh runs with in the base container (pure)."""
    return ["bash", "/kube/image_setup.sh", spec.kind, spec.kernel or "-", *files]


def _base_image(engine: Engine, spec: ImageSpec) -> tuple[str, str]:
    """(image, "") for the base of `spec`, or ("", why) when it cannot be had here."""
    if spec.node.suite:
        return engine.ensure_image(base_recipe(spec)), ""
    pulled, why = engine.pull(spec.node.registry_base)
    # The daemon's error is long (the whole registry URL and resolver reply): its start says enough.
    short = why if len(why) <= 160 else why[:157] + "..."
    return (spec.node.registry_base, "") if pulled else ("", f"{short} (is a registry reachable from here?)")


def image_size(engine: Engine, tag: str) -> int:
    return int(engine.client.images.get(tag).attrs.get("Size", 0))


def build_image(engine: Engine, spec: ImageSpec, base: str, package_files: Sequence[Path]) -> Row:
    """Build one image on `base` from `package_files` (the built packages of its release)."""
    from gdrkit.matrix.runner import built_files

    fam = spec.node.family
    plan_ = model.plan(fam, kernels=[spec.kernel] if spec.kernel else [])
    dist = package_files[0].parent if package_files else Path()
    files = built_files(dist, fam.name, spec.package_names(plan_))
    if not files:
        return Row(spec, "skipped", f"no built package {', '.join(spec.package_names(plan_))} in {dist}")
    with tempfile.TemporaryDirectory(prefix="gdrkit-kube-") as tmp:
        kube = Path(tmp)
        shutil.copy2(ENTRYPOINT_SCRIPT, kube / ENTRYPOINT_SCRIPT.name)
        shutil.copy2(SETUP_SCRIPT, kube / SETUP_SCRIPT.name)
        (kube / "cdi.yaml").write_text(kube_cdi_spec())
        mounts = {kube: "/kube", dist: "/pkgs"}
        argv = setup_command(spec, [f"/pkgs/{f.name}" for f in files])
        env = {"INSTALL_FILES": " ".join(fam.install_files_command), "CLEAN": " ".join(fam.clean_command)}
        from_registry = not spec.node.suite
        if from_registry:
            # A registry base is the bare distribution: the loader's tools first (from its mirrors).
            env.update(
                REFRESH=" ".join(fam.refresh_command),
                INSTALL=" ".join(fam.install_command),
                BASE_PACKAGES=" ".join(spec.base_packages()),
            )
        log(f"building {spec.tag} from {base} with {', '.join(f.name for f in files)}")
        result, container = engine.run(
            base,
            shlex.join(argv),
            mounts=mounts,
            env=env,
            read_only=True,
            network=from_registry,
            keep=True,
            stream=False,
        )
        try:
            if result.status != 0:
                tail = "\n".join(result.output.splitlines()[-30:])
                raise die(f"setting up {spec.tag} failed (exit {result.status}):\n{tail}", "the lines above say why")
            engine.flatten(container, spec.tag, changes=spec.changes(), drop=list(mounts.values()))
        finally:
            engine.remove(container)
    steps = [line for line in result.output.splitlines() if line.startswith("image-setup:")]
    return Row(spec, "built", steps[-2] if len(steps) >= 2 else "", image_size(engine, spec.tag))


def build_packages(
    node: NodeOs, kernels: Sequence[str], output: Path, ref: str = "HEAD", nvidia_src_dir: Path | None = None
) -> list[Path]:
    """The .deb packages of `ref` for `node`'s release (and prebuilt modules for `kernels`) into `output`.

    `nvidia_src_dir` (nv-p2p.h and the driver's Module.symvers): the prebuilt
    module takes the P2P symbol versions of that driver; without it, those of
    gdrdrv's own declarations, which are NVIDIA's (tests/python/test_p2p_crcs.py).
    """
    from gdrkit.packaging import build

    source = build.source_at(ref)
    fam = node.family
    build.ensure_build_deps(kernels, kinds=("deb",), lint=False)
    if nvidia_src_dir is not None and not (nvidia_src_dir / "nv-p2p.h").exists():
        raise die(f"{nvidia_src_dir} has no nv-p2p.h", "pass the NVIDIA driver's kernel source directory that holds it")
    saved = os.environ.get("NVIDIA_SRC_DIR")
    if nvidia_src_dir is not None:
        os.environ["NVIDIA_SRC_DIR"] = str(nvidia_src_dir)  # debian/rules hands it to gdrdrv's make
    try:
        return build.build_debs(model.plan(fam, kernels=kernels, source_date_epoch=source.epoch), source, output)
    finally:
        if saved is None:
            os.environ.pop("NVIDIA_SRC_DIR", None)
        else:
            os.environ["NVIDIA_SRC_DIR"] = saved


def summary_lines(rows: Sequence[Row]) -> list[str]:
    """The image table: tag, size, status and why (what build-image prints)."""
    width = max((len(row.spec.tag) for row in rows), default=10)
    lines = [f"{'image':<{width}}  {'size':>8}  status"]
    for row in rows:
        size = f"{row.size_bytes / 1e6:.0f} MB" if row.size_bytes else "-"
        detail = f": {row.detail}" if row.detail else ""
        lines.append(f"{row.spec.tag:<{width}}  {size:>8}  {row.status}{detail}")
    return lines


def build_images(
    specs: Sequence[ImageSpec],
    *,
    packages_dir: Path | None = None,
    ref: str = "HEAD",
    nvidia_src_dir: Path | None = None,
    engine: Engine | None = None,
) -> list[Row]:
    """Build every buildable image of `specs`, rows for all.

    Per node OS: its bases first (a base that cannot be had skips the OS
    before any package is built), then the packages of `ref` for its release
    (or those in `packages_dir`), then each image.
    """
    from gdrkit.packaging.pipeline import deb_target_release

    host = deb_target_release().codename
    rows: list[Row] = []
    buildable: dict[NodeOs, list[ImageSpec]] = {}
    for spec in specs:
        why = skip_reason(spec, host)
        if why:
            rows.append(Row(spec, "skipped", why))
        else:
            buildable.setdefault(spec.node, []).append(spec)
    own = engine is None
    if buildable and engine is None:
        engine = Engine.connect()
    try:
        for node, node_specs in buildable.items():
            assert engine is not None
            bases = {spec: _base_image(engine, spec) for spec in node_specs}
            ready = [spec for spec in node_specs if bases[spec][0]]
            rows += [Row(spec, "skipped", bases[spec][1]) for spec in node_specs if not bases[spec][0]]
            if not ready:
                continue
            kernels = sorted({s.kernel for s in ready if s.kernel})
            if packages_dir is not None:
                files = sorted(packages_dir.glob("*.deb"))
            else:
                out = Path(tempfile.mkdtemp(prefix=f"gdrkit-kube-{node.tag}-"))
                files = build_packages(node, kernels, out, ref, nvidia_src_dir)
            rows += [build_image(engine, spec, bases[spec][0], files) for spec in ready]
    finally:
        if own and engine is not None:
            engine.cleanup()
    order = {spec: index for index, spec in enumerate(specs)}
    return sorted(rows, key=lambda row: order[row.spec])


def check_rows(rows: Sequence[Row]) -> None:
    """Fail when nothing was built although something was asked for."""
    if rows and not any(row.status == "built" for row in rows):
        raise die("no image was built", "every row above says why it was skipped")


def dry_run_status(spec: ImageSpec, host_codename: str) -> tuple[str, str]:
    """(status, detail) of `spec` in a dry run: skipped with why, or planned with its base."""
    why = skip_reason(spec, host_codename)
    if why:
        return "skipped", why
    base = (
        f"mmdebstrap {spec.node.suite} + {' '.join(spec.base_packages())}"
        if spec.node.suite
        else spec.node.registry_base
    )
    return "planned", f"base {base}"
