"""gdrkit.kube.images without Docker: which images, their tags, why one is skipped, how one is built.

Building for real is tests/python/test_kube_vm.py's (slow); here the Docker
edge is a fake engine that records what would be asked of the daemon.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from gdrkit import version
from gdrkit.containers import RunResult
from gdrkit.kube import images, lock
from gdrkit.system import UserError
from pkgkit.empty import empty_package

V = version.VERSION


def test_node_oses_are_named_as_the_gpu_operator_names_them() -> None:
    tags = [node.tag for node in images.node_oses()]
    assert {"debian12", "debian13", "ubuntu22.04", "ubuntu24.04", "rhel8.10", "rhel9.4", "sles15.6"} <= set(tags)
    bookworm = images.node_os("debian12")
    assert (bookworm.suite, bookworm.codename, bookworm.registry_base) == ("bookworm", "bookworm", "")
    assert images.node_os("ubuntu22.04").registry_base == "ubuntu:22.04"
    with pytest.raises(UserError, match="no image is made for node OS 'centos7'.*rhel .*7 is not a release"):
        images.node_os("centos7")
    with pytest.raises(UserError, match="no image is made for node OS 'arch2024'"):
        images.node_os("arch2024")


@pytest.mark.parametrize(
    "tag, family, major, base, build_base",
    [
        # The operator's tag is <ID><VERSION_ID>: any minor release of a known major.
        ("rhel9.4", "rhel", "9", "registry.access.redhat.com/ubi9/ubi:latest", "rockylinux:9"),
        ("rocky8.10", "rhel", "8", "registry.access.redhat.com/ubi8/ubi:latest", "rockylinux:8"),
        ("almalinux9.6", "rhel", "9", "registry.access.redhat.com/ubi9/ubi:latest", "rockylinux:9"),
        # OpenShift 4.13 moved CoreOS to RHEL 9.
        ("rhcos4.12", "rhel", "8", "registry.access.redhat.com/ubi8/ubi:latest", "rockylinux:8"),
        ("rhcos4.16", "rhel", "9", "registry.access.redhat.com/ubi9/ubi:latest", "rockylinux:9"),
        ("sles15.6", "suse", "15", "registry.suse.com/bci/bci-base:15.6", "opensuse/leap:15.6"),
        ("opensuse-leap15.7", "suse", "15", "registry.suse.com/bci/bci-base:15.7", "opensuse/leap:15.7"),
    ],
)
def test_rpm_node_oses_take_the_operators_tag(tag: str, family: str, major: str, base: str, build_base: str) -> None:
    node = images.node_os(tag)
    assert (node.tag, node.family_name, node.major, node.registry_base, node.build_base) == (
        tag,
        family,
        major,
        base,
        build_base,
    )
    assert images.ImageSpec("driver", node, "").tag == f"registry.example.org/gdrcopy/gdrdrv:{V}-{tag}"


def test_tags_fit_the_operators_repository_image_version_os() -> None:
    node = images.node_os("debian12")
    assert images.ImageSpec("driver", node, "").tag == f"registry.example.org/gdrcopy/gdrdrv:{V}-debian12"
    assert (
        images.ImageSpec("precompiled", node, "6.1.0-57-amd64").tag
        == f"registry.example.org/gdrcopy/gdrdrv:{V}-6.1.0-57-amd64-debian12"
    )
    # Image tags cannot carry `+`.
    assert (
        images.ImageSpec("kmm", node, "6.12.57+deb13-amd64", "r.example/x").tag
        == f"r.example/x/gdrdrv-kmm:{V}-6.12.57_deb13-amd64"
    )


def test_plan_makes_kernel_images_for_this_hosts_release_only() -> None:
    specs = images.plan([], ["6.1.0-57-amd64"], "bookworm")
    kernel_specs = [s for s in specs if s.kernel]
    assert {(s.kind, s.node.tag) for s in kernel_specs} == {("precompiled", "debian12"), ("kmm", "debian12")}
    assert len({s.tag for s in specs}) == len(specs)
    assert {s.node.tag for s in specs if s.kind == "driver"} == {n.tag for n in images.node_oses()}
    # Named explicitly, another release's kernel images are planned, to be skipped with why.
    named = images.plan(["debian13"], ["6.1.0-57-amd64"], "bookworm", kinds=("precompiled",))
    assert [s.tag for s in named] == [f"registry.example.org/gdrcopy/gdrdrv:{V}-6.1.0-57-amd64-debian13"]
    assert "build debian13's on a trixie host" in images.skip_reason(named[0], "bookworm")
    with pytest.raises(UserError, match="unknown image kind"):
        images.plan([], [], "bookworm", kinds=("helm",))


def test_skip_reasons() -> None:
    driver = images.ImageSpec("driver", images.node_os("debian13"), "")
    assert images.skip_reason(driver, "bookworm") == ""
    rhel = images.node_os("rhel9.4")
    assert images.skip_reason(images.ImageSpec("driver", rhel, ""), "bookworm") == ""
    el9 = "5.14.0-427.13.1.el9_4.x86_64"
    assert images.skip_reason(images.ImageSpec("precompiled", rhel, el9), "bookworm") == ""
    assert images.skip_reason(images.ImageSpec("kmm", rhel, "4.18.0-553.el8_10.x86_64"), "bookworm") == (
        "4.18.0-553.el8_10.x86_64 is not a kernel of rhel 9 (rhel9.4 nodes run those)"
    )
    sles = images.node_os("sles15.6")
    assert images.skip_reason(images.ImageSpec("precompiled", sles, "6.4.0-150600.23.25-default"), "bookworm") == ""
    assert "is not a kernel of suse 15" in images.skip_reason(images.ImageSpec("kmm", sles, el9), "bookworm")
    bookworm = images.node_os("debian12")
    assert images.skip_reason(images.ImageSpec("precompiled", bookworm, el9), "bookworm") == (
        f"{el9} is a kernel of rhel 9, not of debian12"
    )


def test_a_kmm_image_is_planned_for_a_node_os_that_runs_its_kernel() -> None:
    suse_kernel = "6.4.0-150600.23.25-default"
    specs = images.plan(["debian12", "rhel9.4", "sles15.6"], [EL9, suse_kernel], "bookworm", kinds=("kmm",))
    assert {spec.kernel: spec.node.tag for spec in specs} == {EL9: "rhel9.4", suse_kernel: "sles15.6"}
    assert all(images.skip_reason(spec, "bookworm") == "" for spec in specs)


def test_build_base_replaces_the_rpm_families_rebuild() -> None:
    dtk = "quay.example/openshift/driver-toolkit@sha256:0123"
    specs = images.plan(["rhcos4.16", "debian12"], [], "bookworm", kinds=("driver",), build_base=dtk)
    assert [(s.node.tag, s.node.build_base) for s in specs] == [("rhcos4.16", dtk), ("debian12", "")]


def test_rpm_kernels_name_their_headers_package() -> None:
    from gdrkit.distro.families import family

    rhel, suse = family("rhel"), family("suse")
    dnf = "kernel-devel.x86_64   5.14.0-427.13.1.el9_4   baseos\nkernel-devel.x86_64   5.14.0-427.16.1.el9_4   baseos\n"
    assert rhel.headers_package_for("5.14.0-427.16.1.el9_4.x86_64", dnf) == "kernel-devel-5.14.0-427.16.1.el9_4"
    assert rhel.headers_package_for("5.14.0-427.2.1.el9_4.x86_64", dnf) == ""
    # SUSE's package version adds a rebuild count to the kernel release.
    zypper = (
        "v | kernel-default-devel | package | 6.4.0-150600.23.22.1 | noarch | Update\n"
        "v | kernel-default-devel | package | 6.4.0-150600.23.25.1 | noarch | Update\n"
    )
    assert suse.headers_package_for("6.4.0-150600.23.25-default", zypper) == "kernel-default-devel-6.4.0-150600.23.25.1"
    assert suse.headers_package_for("6.4.0-150600.23.2-default", zypper) == ""


def test_image_config_is_the_sidecars_entrypoint_and_command() -> None:
    node = images.node_os("debian12")
    changes = images.ImageSpec("driver", node, "").changes()
    assert 'ENTRYPOINT ["nvidia-gdrcopy-driver"]' in changes and 'CMD ["install"]' in changes
    assert f"LABEL org.opencontainers.image.version={V}" in changes
    kmm = images.ImageSpec("kmm", node, "6.1.0-57-amd64").changes()
    assert not any(line.startswith("ENTRYPOINT") for line in kmm)


def test_kube_cdi_spec_is_the_packages_template_under_the_kubernetes_name() -> None:
    spec = yaml.safe_load(images.kube_cdi_spec())
    assert spec["kind"] == "nvidia.com/gdrcopy"
    assert [d["name"] for d in spec["devices"]] == ["all"]
    assert spec["devices"][0]["containerEdits"]["deviceNodes"] == [{"path": "/dev/gdrdrv", "permissions": "rw"}]


@dataclass
class FakeContainer:
    removed: bool = False


@dataclass
class FakeEngine:
    """What build_image asks of gdrkit.containers.Engine, recorded."""

    status: int = 0
    runs: list[dict[str, Any]] = field(default_factory=list)
    flattened: list[dict[str, Any]] = field(default_factory=list)
    removed: int = 0

    @property
    def client(self) -> Any:
        engine = self

        class Images:
            def get(self, tag: str) -> Any:
                assert any(f["tag"] == tag for f in engine.flattened)
                return type("Image", (), {"attrs": {"Size": 123_000_000}})()

        return type("Client", (), {"images": Images()})()

    def run(self, image: str, script: str, **kwargs: Any) -> tuple[RunResult, FakeContainer]:
        kube = next(host for host, inside in kwargs["mounts"].items() if inside == "/kube")
        self.runs.append({"image": image, "script": script, "files": sorted(p.name for p in kube.iterdir()), **kwargs})
        output = "image-setup: installing\nimage-setup: prebuilt module X\nimage-setup: done\n"
        return RunResult(self.status, output), FakeContainer()

    def flatten(self, container: FakeContainer, tag: str, *, changes: Any = (), drop: Any = ()) -> None:
        self.flattened.append({"tag": tag, "changes": list(changes), "drop": list(drop)})

    def save_image(self, tag: str, archive: Path) -> None:
        """What docker save writes through an API older than 1.44: the legacy layout."""
        assert any(f["tag"] == tag for f in self.flattened)
        archive.parent.mkdir(parents=True, exist_ok=True)
        config = json.dumps({"config": tag}).encode()
        write_tar(
            archive,
            {
                "manifest.json": json.dumps(
                    [{"Config": "c.json", "RepoTags": [tag], "Layers": ["l/layer.tar"]}]
                ).encode(),
                "c.json": config,
                "l/layer.tar": LAYER,
            },
        )

    def remove(self, container: FakeContainer) -> None:
        self.removed += 1


def test_build_image_runs_the_setup_offline_and_flattens_without_the_mounts(tmp_path: Path) -> None:
    debs = [
        tmp_path / f"{name}_{V}-1_all.deb" for name in ("gdrdrv-dkms", "gdrdrv-modules-6.1.0-57-amd64", "libgdrapi")
    ]
    for deb in debs:
        empty_package(deb)
    engine = FakeEngine()
    spec = images.ImageSpec("precompiled", images.node_os("debian12"), "6.1.0-57-amd64")
    row = images.build_image(engine, spec, "base:1", debs)  # type: ignore[arg-type]
    assert (row.status, row.size_bytes, row.detail) == ("built", 123_000_000, "image-setup: prebuilt module X")
    run = engine.runs[0]
    assert run["image"] == "base:1" and run["network"] is False and run["read_only"] is True
    assert (
        run["script"]
        == f"bash /kube/image_setup.sh precompiled 6.1.0-57-amd64 /pkgs/gdrdrv-modules-6.1.0-57-amd64_{V}-1_all.deb"
    )
    assert run["files"] == ["cdi.yaml", "image_setup.sh", "nvidia-gdrcopy-driver.sh"]
    assert run["env"]["INSTALL_FILES"].startswith("apt-get install")
    assert engine.flattened == [{"tag": spec.tag, "changes": spec.changes(), "drop": ["/kube", "/pkgs"]}]
    assert engine.removed == 1


LAYER = b"a layer's tar bytes"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def write_tar(archive: Path, files: dict[str, bytes]) -> None:
    with tarfile.open(archive, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def write_oci_archive(archive: Path, manifest: bytes, index_digest: str = "") -> str:
    """An OCI archive: index.json naming one manifest blob; returns the manifest's digest."""
    digest = sha256(manifest)
    index = {"schemaVersion": 2, "manifests": [{"digest": index_digest or digest, "size": len(manifest)}]}
    write_tar(archive, {"index.json": json.dumps(index).encode(), f"blobs/sha256/{digest[7:]}": manifest})
    return digest


def test_a_built_image_is_saved_and_its_digest_is_the_archives_manifest(tmp_path: Path) -> None:
    deb = empty_package(tmp_path / f"gdrdrv-dkms_{V}-1_all.deb")
    engine = FakeEngine()
    spec = images.ImageSpec("driver", images.node_os("debian12"), "")
    row = images.build_image(engine, spec, "base:1", [deb], archives=tmp_path / "oci")  # type: ignore[arg-type]
    archive = tmp_path / "oci" / f"gdrdrv_{V}-debian12.oci.tar"
    assert row.archive == str(archive) and sorted(p.name for p in archive.parent.iterdir()) == [archive.name]
    assert lock.oci_digest(archive) == row.digest
    # The OCI manifest names docker save's config and layer, uncompressed, by their digests.
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile(f"blobs/sha256/{row.digest[7:]}"))  # type: ignore[arg-type]
        assert "oci-layout" in tar.getnames()
    config = json.dumps({"config": spec.tag}).encode()
    assert manifest["config"] == {"mediaType": lock.OCI_CONFIG, "digest": sha256(config), "size": len(config)}
    assert manifest["layers"] == [{"mediaType": lock.OCI_LAYER, "digest": sha256(LAYER), "size": len(LAYER)}]
    # The same image saved again gives the same digest.
    again = images.build_image(engine, spec, "base:1", [deb], archives=tmp_path / "again")  # type: ignore[arg-type]
    assert again.digest == row.digest
    locked = row.locked("c" * 40)
    assert locked.pinned == f"registry.example.org/gdrcopy/gdrdrv:{V}-debian12@{row.digest}"
    assert (locked.kind, locked.os, locked.kernel) == ("driver", "debian12", "")
    assert images.summary_lines([row])[-1] == f"{locked.pinned}  {archive}"


def test_an_oci_save_is_kept_and_a_damaged_archive_refused(tmp_path: Path) -> None:
    saved = tmp_path / "saved.tar"
    digest = write_oci_archive(saved, b"{}")
    assert lock.oci_archive(saved, tmp_path / "a.oci.tar") == digest
    write_oci_archive(saved, b"{}", index_digest="sha256:" + "0" * 64)
    with pytest.raises(UserError, match="lacks the blob"):
        lock.oci_digest(saved)
    write_tar(
        saved,
        {"index.json": json.dumps({"manifests": [{"digest": digest}]}).encode(), f"blobs/sha256/{digest[7:]}": b"{ }"},
    )
    with pytest.raises(UserError, match="does not hash"):
        lock.oci_digest(saved)
    write_tar(saved, {"other": b""})
    with pytest.raises(UserError, match="neither an OCI nor a docker save"):
        lock.oci_archive(saved, tmp_path / "b.oci.tar")


def test_a_failed_setup_says_why_and_leaves_no_container(tmp_path: Path) -> None:
    deb = empty_package(tmp_path / f"gdrdrv-dkms_{V}-1_all.deb")
    engine = FakeEngine(status=1)
    with pytest.raises(UserError, match="setting up registry.example.org/gdrcopy/gdrdrv:.* failed"):
        images.build_image(engine, images.ImageSpec("driver", images.node_os("debian12"), ""), "base:1", [deb])  # type: ignore[arg-type]
    assert engine.removed == 1 and not engine.flattened


def test_missing_packages_skip_the_image_with_why(tmp_path: Path) -> None:
    deb = empty_package(tmp_path / f"libgdrapi_{V}-1_amd64.deb")
    row = images.build_image(FakeEngine(), images.ImageSpec("driver", images.node_os("debian12"), ""), "b", [deb])  # type: ignore[arg-type]
    assert row.status == "skipped" and "no built package gdrdrv-dkms" in row.detail


def test_summary_has_tags_sizes_and_reasons() -> None:
    node = images.node_os("debian12")
    rows = [
        images.Row(images.ImageSpec("driver", node, ""), "built", "ok", 358_000_000),
        images.Row(images.ImageSpec("driver", images.node_os("rhel9.4"), ""), "skipped", "why"),
    ]
    lines = images.summary_lines(rows)
    assert lines[1].split() == [f"registry.example.org/gdrcopy/gdrdrv:{V}-debian12", "358", "MB", "built:", "ok"]
    assert lines[2].endswith("-  skipped: why")
    images.check_rows(rows)
    with pytest.raises(UserError, match="no image was built"):
        images.check_rows(rows[1:])


EL9 = "5.14.0-427.13.1.el9_4.x86_64"
DNF_LISTING = f"kernel-devel.x86_64   {EL9.removesuffix('.x86_64')}   baseos\n"


@dataclass
class RpmEngine(FakeEngine):
    """A fake engine for the RPM families' path: pulls, the headers listing, the module build."""

    unreachable: tuple[str, ...] = ()
    listing: str = DNF_LISTING
    listing_status: int = 0
    module_status: int = 0
    pulled: list[str] = field(default_factory=list)

    def pull(self, reference: str) -> tuple[bool, str]:
        self.pulled.append(reference)
        if reference in self.unreachable:
            return False, f"cannot pull {reference}: dial tcp: lookup registry: no such host"
        return True, ""

    def run(self, image: str, script: str, **kwargs: Any) -> tuple[RunResult, FakeContainer]:
        mounts = kwargs.get("mounts", {})
        if "/out" in mounts.values():  # module_build.sh
            self.runs.append({"image": image, "script": script, **kwargs})
            out = next(host for host, inside in mounts.items() if inside == "/out")
            if self.module_status == 0:
                (out / "gdrdrv.ko").write_bytes(b"\x7fELF")
            return RunResult(self.module_status, "module-build: make failed\n"), FakeContainer()
        if "/kube" not in mounts.values():  # the headers listing
            self.runs.append({"image": image, "script": script, **kwargs})
            return RunResult(self.listing_status, self.listing), FakeContainer()
        return super().run(image, script, **kwargs)


@pytest.fixture
def rpms(tmp_path: Path) -> list[Path]:
    files = [tmp_path / f"{name}-{V}-1.noarch.rpm" for name in ("gdrcopy-kmod", "gdrcopy-devel")]
    for rpm in files:
        empty_package(rpm)
    return files


def test_rpm_driver_image_installs_the_dkms_package_without_its_scriptlets(rpms: list[Path]) -> None:
    engine = RpmEngine()
    spec = images.ImageSpec("driver", images.node_os("rhel9.4"), "")
    row = images.build_image(engine, spec, spec.node.registry_base, rpms)  # type: ignore[arg-type]
    assert row.status == "built"
    run = engine.runs[0]
    assert run["script"] == f"bash /kube/image_setup.sh driver - /pkgs/gdrcopy-kmod-{V}-1.noarch.rpm"
    # Registry base: the mirrors for the loader's tools and the compiler, our package without DKMS's scriptlets.
    assert run["network"] is True
    assert run["env"]["INSTALL_FILES"] == "rpm --install --nodeps --noscripts"
    assert run["env"]["INSTALL"] == "dnf install -y"
    assert {"kmod", "gcc", "make", "findutils"} <= set(run["env"]["BASE_PACKAGES"].split())


def test_rpm_precompiled_images_take_the_module_compiled_in_the_build_base(
    tmp_path: Path, rpms: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    node = images.node_os("rhel9.4")
    specs = [images.ImageSpec(kind, node, EL9) for kind in ("precompiled", "kmm")]
    monkeypatch.setattr(images, "build_packages", lambda *args, **kwargs: rpms)
    engine = RpmEngine()
    rows = images._build_node(engine, node, specs, None, "HEAD", None)  # type: ignore[arg-type]
    assert [row.status for row in rows] == ["built", "built"]
    listing, build, *setups = engine.runs
    assert (listing["image"], listing["script"]) == ("rockylinux:9", "dnf -q --showduplicates list kernel-devel")
    assert build["image"] == "rockylinux:9"
    assert build["script"] == (
        f"bash /kube/module_build.sh {EL9} kernel-devel-5.14.0-427.13.1.el9_4 /pkgs/gdrcopy-kmod-{V}-1.noarch.rpm"
    )
    assert build["env"]["BUILD_PACKAGES"].split()[-3:] == ["make", "gcc", "elfutils-libelf"]
    # One compile for both images of the kernel; each image gets the module, no package of ours.
    assert len(setups) == 2
    for setup, kind in zip(setups, ("precompiled", "kmm")):
        assert setup["image"] == "registry.access.redhat.com/ubi9/ubi:latest"
        assert setup["script"] == f"bash /kube/image_setup.sh {kind} {EL9} /pkgs/gdrdrv.ko"
        assert setup["env"]["MODULE_SUBDIR"] == "/extra"
    assert engine.pulled == ["registry.access.redhat.com/ubi9/ubi:latest"] * 2 + ["rockylinux:9"]


def test_rpm_images_skip_with_why_before_building_anything(rpms: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    node = images.node_os("sles15.6")
    kver = "6.4.0-150600.23.25-default"
    specs = [images.ImageSpec("driver", node, ""), images.ImageSpec("precompiled", node, kver)]

    def no_build(*args: Any, **kwargs: Any) -> list[Path]:
        raise AssertionError("packages are built only for a base that could be had")

    monkeypatch.setattr(images, "build_packages", no_build)
    engine = RpmEngine(unreachable=(node.registry_base,))
    rows = images._build_node(engine, node, specs, None, "HEAD", None)  # type: ignore[arg-type]
    assert [row.status for row in rows] == ["skipped", "skipped"]
    assert rows[0].detail.startswith("cannot pull registry.suse.com/bci/bci-base:15.6: ")
    assert rows[0].detail.endswith("(is a registry reachable from here?)")


def test_rpm_kernel_without_headers_in_the_build_base_is_skipped_with_what_it_offers(
    tmp_path: Path, rpms: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    node = images.node_os("rhel9.4")
    monkeypatch.setattr(images, "build_packages", lambda *args, **kwargs: rpms)
    engine = RpmEngine(listing="kernel-devel.x86_64   5.14.0-503.11.1.el9_5   baseos\n")
    rows = images._build_node(engine, node, [images.ImageSpec("kmm", node, EL9)], None, "HEAD", None)  # type: ignore[arg-type]
    assert rows[0].status == "skipped"
    assert rows[0].detail == (
        f"rockylinux:9's repositories have no kernel headers package of {EL9}; it offers kernel-devel-5.14.0-503.11.1.el9_5"
    )
    # The build base cannot be had: skipped with the pull's error.
    engine = RpmEngine(unreachable=("rockylinux:9",))
    rows = images._build_node(engine, node, [images.ImageSpec("kmm", node, EL9)], None, "HEAD", None)  # type: ignore[arg-type]
    assert rows[0].status == "skipped" and rows[0].detail.startswith("cannot pull rockylinux:9")


def test_a_failed_module_build_says_why(tmp_path: Path, rpms: list[Path]) -> None:
    node = images.node_os("rhel9.4")
    with pytest.raises(UserError, match=f"compiling gdrdrv for {EL9} in rockylinux:9 failed .*make failed"):
        images.compile_module(RpmEngine(module_status=1), node, EL9, rpms, tmp_path / "out")  # type: ignore[arg-type]


def test_dry_run_names_the_bases() -> None:
    rhel = images.node_os("rhel9.4")
    assert images.dry_run_status(images.ImageSpec("precompiled", rhel, EL9), "bookworm") == (
        "planned",
        "base registry.access.redhat.com/ubi9/ubi:latest; gdrdrv.ko compiled in rockylinux:9",
    )
    assert images.dry_run_status(images.ImageSpec("driver", images.node_os("debian12"), ""), "bookworm")[1].startswith(
        "base mmdebstrap bookworm + kmod"
    )


def test_a_base_whose_repositories_do_not_answer_is_tried_for_a_tree_it_holds(tmp_path: Path, rpms: list[Path]) -> None:
    # OpenShift's Driver Toolkit: kernel-devel installed, no repository in reach.
    node = images.node_os("rhcos4.16")
    engine = RpmEngine(listing="Error: Failed to download metadata for repo 'ubi-9-baseos'\n", listing_status=1)
    module, why = images.compile_module(engine, node, EL9, rpms, tmp_path / "out")  # type: ignore[arg-type]
    assert (module, why) == (tmp_path / "out" / "gdrdrv.ko", "")
    assert " kernel-devel-5.14.0-427.13.1.el9_4 " in engine.runs[-1]["script"]


def test_rpm_releases_share_their_familys_packages_and_each_kernels_module(
    rpms: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    builds: list[str] = []

    def build(node: images.NodeOs, *args: Any, **kwargs: Any) -> list[Path]:
        builds.append(node.tag)
        return rpms

    monkeypatch.setattr(images, "build_packages", build)
    engine = RpmEngine()
    shared = images._Shared()
    for tag in ("rhel9.4", "rhel9.6"):
        node = images.node_os(tag)
        specs = [images.ImageSpec("driver", node, ""), images.ImageSpec("precompiled", node, EL9)]
        rows = images._build_node(engine, node, specs, None, "HEAD", None, shared)  # type: ignore[arg-type]
        assert [row.status for row in rows] == ["built", "built"]
    assert builds == ["rhel9.4"]
    assert sum("module_build.sh" in run["script"] for run in engine.runs) == 1
