"""gdrkit.kube.images without Docker: which images, their tags, why one is skipped, how one is built.

Building for real is tests/python/test_kube_vm.py's (slow); here the Docker
edge is a fake engine that records what would be asked of the daemon.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from gdrkit import version
from gdrkit.containers import RunResult
from gdrkit.kube import images
from gdrkit.system import UserError

V = version.VERSION


def test_node_oses_are_named_as_the_gpu_operator_names_them() -> None:
    tags = [node.tag for node in images.node_oses()]
    assert {"debian12", "debian13", "ubuntu22.04", "ubuntu24.04", "rhel9"} <= set(tags)
    bookworm = images.node_os("debian12")
    assert (bookworm.suite, bookworm.codename, bookworm.registry_base) == ("bookworm", "bookworm", "")
    assert images.node_os("ubuntu22.04").registry_base == "ubuntu:22.04"
    with pytest.raises(UserError, match="no image is made for node OS 'centos7'"):
        images.node_os("centos7")


def test_tags_fit_the_operators_repository_image_version_os() -> None:
    node = images.node_os("debian12")
    assert images.ImageSpec("driver", node, "").tag == f"gdrcopy/gdrdrv:{V}-debian12"
    assert images.ImageSpec("precompiled", node, "6.1.0-57-amd64").tag == f"gdrcopy/gdrdrv:{V}-6.1.0-57-amd64-debian12"
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
    assert [s.tag for s in named] == [f"gdrcopy/gdrdrv:{V}-6.1.0-57-amd64-debian13"]
    assert "build debian13's on a trixie host" in images.skip_reason(named[0], "bookworm")
    with pytest.raises(UserError, match="unknown image kind"):
        images.plan([], [], "bookworm", kinds=("helm",))


def test_skip_reasons() -> None:
    driver = images.ImageSpec("driver", images.node_os("debian13"), "")
    assert images.skip_reason(driver, "bookworm") == ""
    rhel = images.ImageSpec("driver", images.node_os("rhel9"), "")
    assert "only the deb path is built here" in images.skip_reason(rhel, "bookworm")


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

    def remove(self, container: FakeContainer) -> None:
        self.removed += 1


def test_build_image_runs_the_setup_offline_and_flattens_without_the_mounts(tmp_path: Path) -> None:
    debs = [
        tmp_path / f"{name}_{V}-1_all.deb" for name in ("gdrdrv-dkms", "gdrdrv-modules-6.1.0-57-amd64", "libgdrapi")
    ]
    for deb in debs:
        deb.touch()
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


def test_a_failed_setup_says_why_and_leaves_no_container(tmp_path: Path) -> None:
    deb = tmp_path / f"gdrdrv-dkms_{V}-1_all.deb"
    deb.touch()
    engine = FakeEngine(status=1)
    with pytest.raises(UserError, match="setting up gdrcopy/gdrdrv:.* failed"):
        images.build_image(engine, images.ImageSpec("driver", images.node_os("debian12"), ""), "base:1", [deb])  # type: ignore[arg-type]
    assert engine.removed == 1 and not engine.flattened


def test_missing_packages_skip_the_image_with_why(tmp_path: Path) -> None:
    deb = tmp_path / f"libgdrapi_{V}-1_amd64.deb"
    deb.touch()
    row = images.build_image(FakeEngine(), images.ImageSpec("driver", images.node_os("debian12"), ""), "b", [deb])  # type: ignore[arg-type]
    assert row.status == "skipped" and "no built package gdrdrv-dkms" in row.detail


def test_summary_has_tags_sizes_and_reasons() -> None:
    node = images.node_os("debian12")
    rows = [
        images.Row(images.ImageSpec("driver", node, ""), "built", "ok", 358_000_000),
        images.Row(images.ImageSpec("driver", images.node_os("rhel9"), ""), "skipped", "why"),
    ]
    lines = images.summary_lines(rows)
    assert lines[1].split() == [f"gdrcopy/gdrdrv:{V}-debian12", "358", "MB", "built:", "ok"]
    assert lines[2].endswith("-  skipped: why")
    images.check_rows(rows)
    with pytest.raises(UserError, match="no image was built"):
        images.check_rows(rows[1:])
