"""The Kubernetes images: the GPU Operator's gdrcopy driver container, precompiled variants, KMM images.

Three kinds, each built from our packages (never from the tree):

`<repository>` is fully qualified (a registry host, then a path): by default
registry.example.org/gdrcopy, a domain reserved for examples, so that an image
never pushed anywhere cannot be pulled from someone else's namespace.  Each
built image is also saved as an OCI archive whose manifest digest goes into
the image lock (gdrkit.kube.lock) that the manifests pin.

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
this host can build one; otherwise the registry image of the node's release
(Ubuntu's; UBI for the RHEL family, SLE BCI for SUSE: the families'
`kube_bases`), pulled, and the row is skipped with the pull's error where no
registry answers.  The RPM families' precompiled modules are compiled in a
container of the release's public rebuild (Rocky Linux, openSUSE Leap), whose
repositories carry each kernel's devel package (module_build.sh); only the
module goes into the image.  `plan()` says what would be built and why a row
cannot be, without touching Docker; `build_images()` builds; both are what
`./toolkit build-image` prints.
"""

from __future__ import annotations

import re
import shlex
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from gdrkit import version
from gdrkit.containers import Engine, ImageRecipe
from gdrkit.distro import debian
from gdrkit.distro.families import DebianFamily, Family, family, families_of_type
from gdrkit.distro.rpm import release_of_major
from gdrkit.kube import lock
from gdrkit.packaging import model
from gdrkit.packaging import pipeline
from gdrkit.packaging import render as pkg_render
from gdrkit.stage.image import pull_or_why
from gdrkit.stage.packages import built_files, checked_packages
from gdrkit.system import bad_input, die, log

KUBE_DIR = Path(__file__).resolve().parent
ENTRYPOINT_SCRIPT = KUBE_DIR / "nvidia-gdrcopy-driver.sh"
SETUP_SCRIPT = KUBE_DIR / "image_setup.sh"
MODULE_BUILD_SCRIPT = KUBE_DIR / "module_build.sh"
ENTRYPOINT = "nvidia-gdrcopy-driver"
# The GPU Operator's default gdrcopy.image; ours keeps the name so that only
# gdrcopy.repository and gdrcopy.version change.
DRIVER_IMAGE = "gdrdrv"
KMM_IMAGE = "gdrdrv-kmm"
# Fully qualified, and under a domain reserved for examples (RFC 2606): an
# image nobody pushed resolves to nothing rather than to a stranger's.
DEFAULT_REPOSITORY = "registry.example.org/gdrcopy"
# Where build-image writes each image's OCI archive (the file to push).
DEFAULT_ARCHIVES = version.REPO_ROOT / "dist" / "kube-images"
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
    # RPM families: the major release, and where precompiled modules are compiled.
    major: str = ""
    build_base: str = ""

    @property
    def tag(self) -> str:
        return f"{self.os_id}{self.version_id}"

    @property
    def family(self) -> Family:
        if self.codename:
            return DebianFamily(release=debian.debian_release(self.codename))
        return family(self.family_name)


def debian_node_oses() -> list[NodeOs]:
    """The Debian and Ubuntu releases, one node OS each."""
    found = []
    for release in debian.DEBIAN_RELEASES.values():
        if not release.version:
            continue  # sid: no VERSION_ID, so no operator tag
        suite = release.codename if release.os_id == "debian" and release.codename in debian.SUITES else ""
        registry = (
            "" if suite else f"{release.os_id}:{release.version if release.os_id == 'ubuntu' else release.codename}"
        )
        found.append(NodeOs(release.os_id, release.version, "debian", suite, registry, release.codename))
    return found


_OPERATOR_TAG = re.compile(r"(?P<os_id>[a-z][a-z-]*?)(?P<version_id>\d+(?:\.\d+)*)")


def rpm_node_os(tag: str) -> NodeOs | None:
    """The node OS of an RPM family whose operator tag is `tag` (rhel9.4, rocky8.10, rhcos4.16, sles15.6).

    Any VERSION_ID of a release the family has bases for is accepted: the
    operator's tag carries the node's minor release.  None when no RPM
    family knows the ID; dies when the release has no bases.
    """
    match = _OPERATOR_TAG.fullmatch(tag)
    if match is None:
        return None
    os_id, version_id = match["os_id"], match["version_id"]
    for fam in families_of_type("rpm"):
        if os_id not in fam.kube_os_ids:
            continue
        major = fam.kube_major(os_id, version_id)
        bases = fam.kube_bases.get(major)
        if bases is None:
            raise bad_input(
                f"no image is made for node OS {tag!r}: {fam.name} {major} is not a release images are made for",
                f"use a node OS of {fam.name} {', '.join(fam.kube_bases)}",
            )
        fill = {"major": major, "version": version_id}
        return NodeOs(
            os_id,
            version_id,
            fam.name,
            registry_base=bases.node.format(**fill),
            major=major,
            build_base=bases.build.format(**fill),
        )
    return None


def node_oses() -> list[NodeOs]:
    """The node OSes images are made for when none is named: the Debian and Ubuntu releases, the RPM families' defaults."""
    rpm = [rpm_node_os(tag) for fam in families_of_type("rpm") for tag in fam.kube_default_nodes]
    return [*debian_node_oses(), *(node for node in rpm if node is not None)]


def node_os(tag: str) -> NodeOs:
    """The node OS whose operator tag is `tag` (debian12, ubuntu22.04, rhel9.4); dies with the known ones."""
    for candidate in debian_node_oses():
        if candidate.tag == tag:
            return candidate
    found = rpm_node_os(tag)
    if found is not None:
        return found
    ids = sorted({os_id for fam in families_of_type("rpm") for os_id in fam.kube_os_ids})
    raise bad_input(
        f"no image is made for node OS {tag!r}",
        f"use one of: {', '.join(o.tag for o in debian_node_oses())}, or <ID><VERSION_ID> of {', '.join(ids)}"
        " (as the GPU Operator tags: rhel9.4, rocky8.10, rhcos4.16, sles15.6)",
    )


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
    digest: str = ""  # built and saved: the manifest digest of its OCI archive
    archive: str = ""

    def locked(self, commit: str) -> lock.LockedImage:
        return lock.LockedImage(
            self.spec.tag, self.digest, self.spec.kind, self.spec.node.tag, self.spec.kernel, commit
        )


def plan(
    oses: Sequence[str],
    kernels: Sequence[str],
    host_codename: str,
    *,
    kinds: Iterable[str] = KINDS,
    repository: str = DEFAULT_REPOSITORY,
    build_base: str = "",
) -> list[ImageSpec]:
    """The images for node OSes `oses` (operator tags; empty: every one) and `kernels` (pure).

    A Debian or Ubuntu precompiled or KMM image holds a module built with
    this host's compiler: without `oses` it is planned for the node OS of
    this host's release (`host_codename`) only.  An RPM family's is compiled
    in its release's build base, for kernels of that release: planned when
    `oses` names the node OS.  Named OSes get every kernel's images (those
    that cannot be built are skipped with the reason).  A KMM image is per
    kernel, not per OS.  `build_base` replaces the RPM families' build base
    (a subscribed RHEL image, OpenShift's Driver Toolkit: kernels that the
    rebuilds' repositories do not carry).
    """
    chosen = [node_os(tag) for tag in oses] if oses else node_oses()
    if build_base:
        chosen = [replace(node, build_base=build_base) if node.build_base else node for node in chosen]
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
    # A KMM tag names no OS: of its specs keep one whose node runs that kernel.
    unique: dict[str, ImageSpec] = {}
    for spec in specs:
        kept = unique.get(spec.tag)
        if kept is None or (_kernel_mismatch(kept) and not _kernel_mismatch(spec)):
            unique[spec.tag] = spec
    return list(unique.values())


def _kernel_mismatch(spec: ImageSpec) -> str:
    """Why `spec`'s kernel is not one its node OS runs ("" when it can be; pure)."""
    if not spec.kernel:
        return ""
    fam = spec.node.family
    if fam.package_type == "rpm":
        if not fam.kernel_of_release(spec.kernel, spec.node.major):
            return f"{spec.kernel} is not a kernel of {fam.name} {spec.node.major} ({spec.node.tag} nodes run those)"
        return ""
    for other in families_of_type("rpm"):
        for major in other.kube_bases:
            if other.kernel_of_release(spec.kernel, major):
                return f"{spec.kernel} is a kernel of {other.name} {major}, not of {spec.node.tag}"
    return ""


def skip_reason(spec: ImageSpec, host_codename: str) -> str:
    """Why `spec` cannot be built on this host ("" when it can), before any Docker call (pure).

    Missing kernel headers are not a reason: the package build (Debian) or
    the module build (RPM families) installs them.
    """
    if spec.kind == "driver":
        return ""
    mismatch = _kernel_mismatch(spec)
    if mismatch or spec.node.family.package_type == "rpm":
        return mismatch
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


def _pull(engine: Engine, reference: str) -> tuple[str, str]:
    """(reference, "") once pulled, or ("", why) when no registry gives it."""
    why = pull_or_why(engine, reference)
    return ("", why) if why else (reference, "")


def _base_image(engine: Engine, spec: ImageSpec) -> tuple[str, str]:
    """(image, "") for the base of `spec`, or ("", why) when it cannot be had here."""
    if spec.node.suite:
        return engine.ensure_image(base_recipe(spec)), ""
    return _pull(engine, spec.node.registry_base)


def image_size(engine: Engine, tag: str) -> int:
    return int(engine.client.images.get(tag).attrs.get("Size", 0))


def image_files(spec: ImageSpec, package_files: Sequence[Path], module: Path | None = None) -> tuple[list[Path], str]:
    """(files, "") that image_setup.sh installs for `spec`, or ([], why) when they are not there (pure).

    A Debian image installs packages: the DKMS sources, or the kernel's
    prebuilt module package.  An RPM family's driver image installs the DKMS
    package; its precompiled and KMM images take the compiled `module` (as
    any precompiled or KMM image does when given one).
    """
    fam = spec.node.family
    if spec.kind != "driver" and (module is not None or fam.package_type == "rpm"):
        if module is None or not module.is_file():
            return [], f"no gdrdrv.ko compiled for {spec.kernel}"
        return [module], ""
    plan_ = model.plan(fam, kernels=[spec.kernel] if spec.kernel else [])
    dist = package_files[0].parent if package_files else Path()
    files = built_files(dist, fam.name, spec.package_names(plan_))
    if not files:
        return [], f"no built package {', '.join(spec.package_names(plan_))} in {dist}"
    return files, ""


def archive_path(spec: ImageSpec, archives: Path) -> Path:
    """Where `spec`'s OCI archive goes below `archives` (pure)."""
    name, tag, _ = lock.split_reference(spec.tag)
    return archives / f"{name.rpartition('/')[2]}_{tag}.oci.tar"


def build_image(
    engine: Engine,
    spec: ImageSpec,
    base: str,
    package_files: Sequence[Path],
    module: Path | None = None,
    archives: Path | None = None,
) -> Row:
    """Build one image on `base` from `package_files` (the built packages of its release) or `module`.

    With `archives`, the image is saved there as an OCI archive and the row
    carries its manifest digest (what the image lock records).
    """
    fam = spec.node.family
    files, why = image_files(spec, package_files, module)
    if not files:
        return Row(spec, "skipped", why)
    dist = files[0].parent
    with tempfile.TemporaryDirectory(prefix="gdrkit-kube-") as tmp:
        kube = Path(tmp)
        shutil.copy2(ENTRYPOINT_SCRIPT, kube / ENTRYPOINT_SCRIPT.name)
        shutil.copy2(SETUP_SCRIPT, kube / SETUP_SCRIPT.name)
        (kube / "cdi.yaml").write_text(kube_cdi_spec())
        mounts = {kube: "/kube", dist: "/pkgs"}
        argv = setup_command(spec, [f"/pkgs/{f.name}" for f in files])
        env = {
            "INSTALL_FILES": " ".join(fam.kube_install_files_command),
            "CLEAN": " ".join(fam.clean_command),
            "MODULE_SUBDIR": fam.kmod_module_location,
        }
        from_registry = not spec.node.suite
        if from_registry:
            # A registry base is the bare distribution: the loader's tools first (from its mirrors).
            env.update(
                REFRESH=" ".join(fam.refresh_command),
                INSTALL=" ".join(fam.install_command),
                BASE_PACKAGES=" ".join(spec.base_packages()),
            )
        result, container = engine.run(
            base,
            shlex.join(argv),
            mounts=mounts,
            env=env,
            read_only=True,
            network=from_registry,
            keep=True,
            title=f"building {spec.tag} from {base} with {', '.join(f.name for f in files)}",
        )
        try:
            if result.status != 0:
                tail = "\n".join(result.output.splitlines()[-30:])
                raise die(f"setting up {spec.tag} failed (exit {result.status}):\n{tail}", "the lines above say why")
            engine.flatten(container, spec.tag, changes=spec.changes(), drop=list(mounts.values()))
        finally:
            engine.remove(container)
    steps = [line for line in result.output.splitlines() if line.startswith("image-setup:")]
    row = Row(spec, "built", steps[-2] if len(steps) >= 2 else "", image_size(engine, spec.tag))
    if archives is None:
        return row
    archive = archive_path(spec, archives)
    saved = archive.with_name(archive.name + ".docker-save")
    engine.save_image(spec.tag, saved)
    try:
        digest = lock.oci_archive(saved, archive)
    finally:
        saved.unlink(missing_ok=True)
    return replace(row, digest=digest, archive=str(archive))


def module_build_command(kver: str, headers_package: str, source_package: str) -> list[str]:
    """The argv of module_build.sh in a build base (pure)."""
    return ["bash", "/kube/module_build.sh", kver, headers_package, f"/pkgs/{source_package}"]


def module_build_env(node: NodeOs) -> dict[str, str]:
    """The family's commands and packages that module_build.sh uses (pure)."""
    fam = node.family
    return {
        "REFRESH": " ".join(fam.refresh_command),
        "INSTALL": " ".join(fam.install_command),
        "HEADERS_FLAGS": " ".join(fam.headers_install_flags),
        "BUILD_PACKAGES": " ".join(fam.kube_build_packages),
        "INSTALL_FILES": " ".join(fam.kube_install_files_command),
    }


def compile_module(
    engine: Engine, node: NodeOs, kver: str, package_files: Sequence[Path], output: Path
) -> tuple[Path | None, str]:
    """gdrdrv.ko for kernel `kver` of an RPM family's `node`, compiled in its build base from the DKMS package.

    (module, "") or (None, why): the build base cannot be pulled, or its
    repositories have no devel package of that kernel.
    """
    fam = node.family
    base, why = _pull(engine, node.build_base)
    if not base:
        return None, why
    dkms = [p.name for p in model.plan(fam, kernels=[]).packages if p.kind == "dkms"]
    sources = built_files(package_files[0].parent if package_files else Path(), fam.name, dkms)
    if not sources:
        return None, f"no built DKMS package {', '.join(dkms)} to compile gdrdrv from"
    listing, _ = engine.run(base, shlex.join(fam.headers_query), stream=False)
    headers = fam.headers_package_for(kver, listing.output)
    if not headers and listing.status != 0:
        # No repository answered (the Driver Toolkit has none): the base may
        # hold the tree already, which module_build.sh looks for first.
        headers = fam.headers_spec.format(match=fam.kernel_package_version(kver))
        log(f"{base} lists no kernel headers packages (exit {listing.status}); trying with {headers}")
    if not headers:
        offered = fam.headers_packages(listing.output)
        newest = f"; it offers {', '.join(offered[-3:])}" if offered else ""
        return None, f"{base}'s repositories have no kernel headers package of {kver}{newest}"
    output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gdrkit-kube-build-") as tmp:
        kube = Path(tmp)
        shutil.copy2(MODULE_BUILD_SCRIPT, kube / MODULE_BUILD_SCRIPT.name)
        result, _ = engine.run(
            base,
            shlex.join(module_build_command(kver, headers, sources[0].name)),
            mounts={kube: "/kube", sources[0].parent: "/pkgs", output: "/out"},
            env=module_build_env(node),
            title=f"compiling gdrdrv for {kver} in {base} with {headers}",
        )
    if result.status != 0:
        tail = "\n".join(result.output.splitlines()[-30:])
        raise die(
            f"compiling gdrdrv for {kver} in {base} failed (exit {result.status}):\n{tail}", "the lines above say why"
        )
    return output / "gdrdrv.ko", ""


def build_packages(
    node: NodeOs, kernels: Sequence[str], output: Path, ref: str = "HEAD", nvidia_src_dir: Path | None = None
) -> list[Path]:
    """The packages of `ref` for `node`'s release into `output`.

    Debian and Ubuntu: the .deb packages, with prebuilt modules for
    `kernels` (this host's).  RPM families: the .rpm packages without
    prebuilt modules (their kernels' modules are compiled in the release's
    build base, compile_module).
    `nvidia_src_dir` (nv-p2p.h and the driver's Module.symvers): the prebuilt
    module takes the P2P symbol versions of that driver; without it, those of
    gdrdrv's own declarations, which are NVIDIA's (tests/python/test_p2p_crcs.py).
    """
    fam = node.family
    deb = fam.package_type == "deb"
    request = pipeline.Request(
        kinds=(fam.package_type,),
        with_kmod=deb and bool(kernels),
        kernels=tuple(kernels) if deb else (),
        rpm_family="rhel" if deb else fam.name,
        # The node's own release (el8 for a RHEL 8 node): its glibc, Python and dist tag.
        rpm_release="" if deb else release_of_major(fam.name, node.major),
        suite=node.codename,
        output=output,
        ref=ref,
        nvidia_src_dir=str(nvidia_src_dir or ""),
    )
    return checked_packages(pipeline.plan_request(request))


def summary_lines(rows: Sequence[Row]) -> list[str]:
    """The image table: tag, size, status and why (what build-image prints)."""
    width = max((len(row.spec.tag) for row in rows), default=10)
    lines = [f"{'image':<{width}}  {'size':>8}  status"]
    for row in rows:
        size = f"{row.size_bytes / 1e6:.0f} MB" if row.size_bytes else "-"
        detail = f": {row.detail}" if row.detail else ""
        lines.append(f"{row.spec.tag:<{width}}  {size:>8}  {row.status}{detail}")
    for row in rows:
        if row.digest:
            lines.append(f"{row.spec.tag}@{row.digest}  {row.archive}")
    return lines


@dataclass
class _Shared:
    """What one build_images run makes once for all its node OSes: an RPM
    family's packages (the same for each of its releases), and modules by
    build base and kernel (rhel9.4 and rhel9.6 images take the same one)."""

    packages: dict[str, list[Path]] = field(default_factory=dict)
    modules: dict[tuple[str, str], tuple[Path | None, str]] = field(default_factory=dict)


def _build_node(
    engine: Engine,
    node: NodeOs,
    specs: Sequence[ImageSpec],
    packages_dir: Path | None,
    ref: str,
    nvidia_src_dir: Path | None,
    shared: _Shared | None = None,
    archives: Path | None = None,
) -> list[Row]:
    """The rows of one node OS: its bases first (a base that cannot be had skips
    its images before any package is built), then the packages, then each image."""
    shared = shared if shared is not None else _Shared()
    bases = {spec: _base_image(engine, spec) for spec in specs}
    rows = [Row(spec, "skipped", bases[spec][1]) for spec in specs if not bases[spec][0]]
    ready = [spec for spec in specs if bases[spec][0]]
    if not ready:
        return rows
    fam = node.family
    kernels = sorted({s.kernel for s in ready if s.kernel})
    if packages_dir is not None:
        files = sorted(packages_dir.glob(f"*.{fam.package_type}"))
    elif fam.package_type == "rpm" and fam.name in shared.packages:
        files = shared.packages[fam.name]
    else:
        out = Path(tempfile.mkdtemp(prefix=f"gdrkit-kube-{node.tag}-"))
        files = build_packages(node, kernels, out, ref, nvidia_src_dir)
        if fam.package_type == "rpm":
            shared.packages[fam.name] = files
    for spec in ready:
        module = None
        if spec.kernel and fam.package_type == "rpm":
            key = (node.build_base, spec.kernel)
            if key not in shared.modules:
                where = Path(tempfile.mkdtemp(prefix=f"gdrkit-kube-module-{tag_safe(spec.kernel)}-"))
                shared.modules[key] = compile_module(engine, node, spec.kernel, files, where)
            module, why = shared.modules[key]
            if module is None:
                rows.append(Row(spec, "skipped", why))
                continue
        rows.append(build_image(engine, spec, bases[spec][0], files, module, archives))
    return rows


def build_images(
    specs: Sequence[ImageSpec],
    *,
    packages_dir: Path | None = None,
    ref: str = "HEAD",
    nvidia_src_dir: Path | None = None,
    engine: Engine | None = None,
    archives: Path | None = None,
) -> list[Row]:
    """Build every buildable image of `specs`, rows for all, in the order of `specs`.

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
    shared = _Shared()
    try:
        for node, node_specs in buildable.items():
            assert engine is not None
            rows += _build_node(engine, node, node_specs, packages_dir, ref, nvidia_src_dir, shared, archives)
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
    if spec.node.suite:
        return "planned", f"base mmdebstrap {spec.node.suite} + {' '.join(spec.base_packages())}"
    detail = f"base {spec.node.registry_base}"
    if spec.kernel and spec.node.build_base:
        detail += f"; gdrdrv.ko compiled in {spec.node.build_base}"
    return "planned", detail
