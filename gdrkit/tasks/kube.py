"""`build-image`: the Kubernetes images (gdrkit.kube.images); `k8s-manifests`: the manifests (gdrkit.kube.manifests)."""

from __future__ import annotations

from pathlib import Path

from invoke.context import Context
from gdrkit.tasks.convention import task


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


@task(
    extras=("containers",),
    help={
        "os": "node OSes by the GPU Operator's name <ID><VERSION_ID>, comma-separated (debian12, ubuntu22.04,"
        " rhel9.4, rocky8.10, rhcos4.16, sles15.6, ...; default: the Debian and Ubuntu releases and a few RHEL and"
        " SLES ones; those that cannot be built here are listed as skipped with why)",
        "kernel": "kernel releases for the precompiled and KMM images, comma-separated (default: this host's"
        " kernels with headers; an RPM family's kernels need its node OS named in --os; none: --kernel none)",
        "kind": "image kinds, comma-separated: driver, precompiled, kmm (default: all three)",
        "repository": "image repository prefix, fully qualified: <registry host>/<path> (default:"
        " registry.example.org/gdrcopy, a reserved example domain: name your registry); the operator's"
        " gdrcopy.repository",
        "packages": "directory of already built packages to use, .deb or .rpm by the node OS (default: build them"
        " from --ref)",
        "ref": "git commit whose packages go into the images (default: HEAD)",
        "nvidia_src_dir": "NVIDIA driver kernel sources (nv-p2p.h, Module.symvers) the precompiled module is built"
        " against (default: gdrdrv's own declarations, whose symbol versions are NVIDIA's)",
        "build_base": "image the RPM families' precompiled and KMM modules are compiled in, with their kernel-devel"
        " in reach (default: the release's rebuild, rockylinux:<major> or opensuse/leap:<version>; for RHEL's own"
        " or OpenShift's kernels: a subscribed RHEL image or the cluster's Driver Toolkit image)",
        "dry_run": "print the images and why any cannot be built, build nothing",
        "archives": "directory for each built image's OCI archive, the file to push with skopeo copy"
        " --preserve-digests (default: dist/kube-images); its digest goes into deploy/kubernetes/images.lock",
    },
)
def build_image(
    c: Context,
    os: str = "",
    kernel: str = "",
    kind: str = "",
    repository: str = "",
    packages: str = "",
    ref: str = "HEAD",
    nvidia_src_dir: str = "",
    build_base: str = "",
    dry_run: bool = False,
    archives: str = "",
) -> None:
    """Build the GPU Operator driver-container images (<version>-<os>), precompiled ones and KMM images.

    Each built image is saved as an OCI archive and its digest recorded in
    deploy/kubernetes/images.lock, which ./toolkit k8s-manifests renders from.
    """
    from gdrkit.kube import images, lock
    from gdrkit.packaging.build import check_kernel_releases, default_kernels, source_at
    from gdrkit.packaging.pipeline import deb_target_release
    from gdrkit.system import die

    repository = repository or images.DEFAULT_REPOSITORY
    if not lock.registry_host(f"{repository}/{images.DRIVER_IMAGE}"):
        raise die(
            f"--repository {repository} names no registry host: runtimes would pull the images from docker.io",
            "give <registry host>/<path>, e.g. registry.corp.example/gdrcopy",
        )

    kernels = [] if kernel == "none" else check_kernel_releases(_split(kernel)) or default_kernels()
    host = deb_target_release().codename
    specs = images.plan(
        _split(os),
        kernels,
        host,
        kinds=_split(kind) or images.KINDS,
        repository=repository,
        build_base=build_base,
    )
    if dry_run:
        rows = [images.Row(s, *images.dry_run_status(s, host)) for s in specs]
        print("\n".join(images.summary_lines(rows)))
        return
    commit = source_at(ref).commit
    rows = images.build_images(
        specs,
        packages_dir=Path(packages).resolve() if packages else None,
        ref=commit,
        nvidia_src_dir=Path(nvidia_src_dir).resolve() if nvidia_src_dir else None,
        archives=Path(archives).resolve() if archives else images.DEFAULT_ARCHIVES,
    )
    print("\n".join(images.summary_lines(rows)), flush=True)
    images.check_rows(rows)
    # Packages given from a directory: which commit they came from is not known here.
    source = "" if packages else commit
    written = lock.record(row.locked(source) for row in rows if row.digest)
    print(f"recorded {len(written)} digest(s) in {lock.LOCK_PATH}: run ./toolkit k8s-manifests to pin them")


@task(
    extras=("kube",),
    name="k8s-manifests",
    help={
        "kernel": "kernel releases to map in the KMM Module, comma-separated (default: every KMM image of"
        " deploy/kubernetes/images.lock; each named kernel needs its image there)",
        "repository": "image repository prefix the manifests name (default: registry.example.org/gdrcopy);"
        " the images of the lock under it are pinned",
        "output": "directory to write (default: deploy/kubernetes/, the committed copy)",
        "check": "write nothing: fail if deploy/kubernetes/ differs from a fresh render or names an image without"
        " registry or digest, then validate it",
        "kubernetes": "Kubernetes release whose schemas validate the objects, MAJOR.MINOR[.PATCH]"
        " (default: 1.32.0, gdrkit.kube.manifests.KUBERNETES_VERSION)",
        "node_gid": "group id whose pods may open /dev/gdrdrv (supplementalGroups; default 44; docs/kubernetes.md)",
        "dry_run": "render and validate, print what would be written, write nothing",
    },
)
def k8s_manifests(
    c: Context,
    kernel: str = "",
    repository: str = "",
    output: str = "",
    check: bool = False,
    kubernetes: str = "",
    node_gid: int = 44,  # gdrkit.kube.manifests.NODE_GID (test_kube_manifests checks)
    dry_run: bool = False,
) -> None:
    """Render the Kubernetes manifests (loader, overlays, KMM Module, examples) pinned by images.lock's digests.

    Each image is pinned by the digest build-image recorded in deploy/kubernetes/images.lock; a file whose
    image has none is left out, with the build-image command that makes it.  Then validate them offline."""
    from gdrkit.kube import images, lock, manifests
    from gdrkit.packaging.build import check_kernel_releases
    from gdrkit.system import die

    # Every input is checked before the first file is written.
    schemas = manifests.check_kubernetes_version(kubernetes) if kubernetes else manifests.KUBERNETES_VERSION
    kernels = check_kernel_releases(_split(kernel), "--kernel")
    rendering = manifests.render_all(kernels, repository or images.DEFAULT_REPOSITORY, node_gid=node_gid)
    files = rendering.files
    for path, why in rendering.left_out.items():
        print(f"not rendered  {path}: {why}")
    if dry_run:
        target = Path(output).resolve() if output else manifests.OUTPUT_DIR
        for name in sorted(files):
            print(f"[dry-run] would write {target / name}")
    elif check:
        committed = manifests.committed()
        problems = manifests.unpinned(committed)
        if problems:
            raise die(
                "deploy/kubernetes/ names images that are not fully qualified and pinned by digest:\n  "
                + "\n  ".join(problems),
                f"render deploy/kubernetes/ from {lock.LOCK_PATH.name} with ./toolkit"
                " k8s-manifests (./toolkit build-image records the digests) and commit it",
            )
        stale = manifests.stale(wanted=files)
        if stale:
            raise die(
                f"deploy/kubernetes/ is out of date: {', '.join(stale)}", "run ./toolkit k8s-manifests and commit"
            )
    else:
        written, removed = manifests.write(Path(output).resolve() if output else manifests.OUTPUT_DIR, files)
        for written_path in written:
            print(f"wrote {written_path}")
        for removed_path in removed:
            print(f"removed {removed_path} (its image has no digest in the lock)")
    problems = manifests.unpinned(files)
    if problems:
        raise die("rendered an image without registry or digest:\n  " + "\n  ".join(problems))
    verdicts = manifests.validate_all(files, schemas)
    print("\n".join(verdict.line() for verdict in verdicts))
    invalid = [v for v in verdicts if v.status == "invalid"]
    if invalid:
        raise die(f"{len(invalid)} object(s) do not match the Kubernetes schemas", "the lines above say where")


TASKS = [build_image, k8s_manifests]
