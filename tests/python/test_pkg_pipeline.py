"""Planning of package builds and the task layer, without building anything."""

from __future__ import annotations

import dataclasses
import os
import platform
import re
from pathlib import Path

import pytest
from invoke.context import MockContext

from gdrkit import version
from gdrkit.packaging import build, pipeline
from gdrkit.system import UserError
from gdrkit.tasks import pkg

SOURCE = build.Source(repo=Path("/nonexistent"), commit="0" * 40, epoch=1767225600)


def test_plan_has_one_job_per_kind_and_each_kernel_goes_to_its_own_release_only(tmp_path: Path) -> None:
    bookworm_host = tmp_path / "os-release"
    bookworm_host.write_text("ID=debian\nVERSION_ID=12\nVERSION_CODENAME=bookworm\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "OS_RELEASE", bookworm_host)
        plan = pipeline.plan_request(pipeline.Request(kernels=("6.1.0-56-amd64",)), SOURCE)
    assert [job.plan.package_type for job in plan.jobs] == ["deb", "rpm"]
    deb, rpm = (job.plan for job in plan.jobs)
    assert "gdrdrv-modules-6.1.0-56-amd64" in [p.name for p in deb.packages]
    # A Debian kernel's module is never packaged as an el9 kmod (issue 36).
    assert not any(p.kind == "kmod" for p in rpm.packages), [p.name for p in rpm.packages]
    assert all(job.plan.source_date_epoch == SOURCE.epoch for job in plan.jobs)


def test_without_kernels_named_no_module_package_whatever_headers_the_host_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a build makes does not depend on the host's kernel headers: planned with and without them."""
    bookworm_host = tmp_path / "os-release"
    bookworm_host.write_text("ID=debian\nVERSION_ID=12\nVERSION_CODENAME=bookworm\n")
    monkeypatch.setattr(pipeline, "OS_RELEASE", bookworm_host)

    def packages(request: pipeline.Request) -> list[list[str]]:
        return [[p.name for p in job.plan.packages] for job in pipeline.plan_request(request, SOURCE).jobs]

    requests = [
        pipeline.Request(),
        pipeline.Request(kinds=("deb",), suite="bullseye"),
        pipeline.Request(kinds=("rpm",), rpm_release="el8"),
    ]
    without = [packages(r) for r in requests]
    monkeypatch.setattr(build, "default_kernels", lambda: ["6.1.0-57-amd64"])
    monkeypatch.setattr(platform, "release", lambda: "6.1.0-57-amd64")
    with_headers = [packages(r) for r in requests]
    assert without == with_headers
    assert not [n for job in without for names in job for n in names if "6.1.0" in n or "modules" in n]


@pytest.mark.parametrize(
    ("request_", "refusal"),
    [
        (pipeline.Request(kinds=("deb",), suite="bullseye", kernels=("6.1.0-57-amd64",)), "(it is bookworm's)"),
        (pipeline.Request(kinds=("rpm",), rpm_release="el8", kernels=("6.1.0-57-amd64",)), "not a kernel of el8"),
        (
            pipeline.Request(kinds=("rpm",), rpm_release="el9", kernels=("5.14.0-427.13.1.el9_4.x86_64",)),
            "no devel tree of that kernel",
        ),
        (pipeline.Request(kinds=("deb",), suite="jammy", kernels=("5.15.0-100-generic",)), "Ubuntu's archive"),
        (pipeline.Request(kernels=("5.14.0-427.13.1.el9_4.x86_64",)), "no devel tree of that kernel"),
    ],
)
def test_a_kernel_the_target_cannot_have_is_refused_with_what_to_do(
    request_: pipeline.Request, refusal: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bookworm_host = tmp_path / "os-release"
    bookworm_host.write_text("ID=debian\nVERSION_ID=12\nVERSION_CODENAME=bookworm\n")
    monkeypatch.setattr(pipeline, "OS_RELEASE", bookworm_host)
    if Path("/lib/modules/5.14.0-427.13.1.el9_4.x86_64/build").exists():
        pytest.fail("this host has an el9 kernel's devel tree: the refusal cannot be judged here")
    with pytest.raises(UserError, match=re.escape(refusal)) as raised:
        pipeline.plan_request(dataclasses.replace(request_, dry_run=True), SOURCE)
    print(raised.value, "\n  hint:", raised.value.hint)
    assert raised.value.hint and ("--suite" in raised.value.hint or "node" in raised.value.hint)


def test_no_kmod_means_no_kernel_and_no_module_package() -> None:
    plan = pipeline.plan_request(pipeline.Request(with_kmod=False, kernels=("6.1.0-56-amd64",)), SOURCE)
    assert plan.kernels == ()
    assert not any(p.kind == "kmod" for job in plan.jobs for p in job.plan.packages)


def test_suse_rpms_go_to_their_own_directory(tmp_path: Path) -> None:
    request = pipeline.Request(kinds=("rpm",), rpm_family="suse", output=tmp_path, with_kmod=False)
    plan = pipeline.plan_request(request, SOURCE)
    assert plan.jobs[0].output == tmp_path / "suse"
    assert plan.jobs[0].plan.family.modprobe.endswith("--allow-unsupported-modules")


def test_nothing_to_build_is_a_user_error() -> None:
    with pytest.raises(UserError, match="nothing to build"):
        pipeline.plan_request(pipeline.Request(with_dkms=False, with_kmod=False), SOURCE)


def test_summary_table_and_failed_rows() -> None:
    rows = [
        pipeline.Row("dist/a.deb", 2048, "ok", 0),
        pipeline.Row("dist/b.rpm", 1024, "b: x is not in its description", 1),
    ]
    table = pipeline.summary_table(rows)
    assert table.splitlines()[0].startswith("package file") and "dist/b.rpm" in table
    with pytest.raises(UserError, match="1 package"):
        pipeline.check_rows(rows)


def test_build_deb_task_passes_its_options_down(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[pipeline.Request] = []

    def fake_plan(request: pipeline.Request, source: build.Source | None = None) -> pipeline.BuildPlan:
        seen.append(request)
        return pipeline.BuildPlan(request=request, source=SOURCE, kernels=())

    monkeypatch.setattr(pipeline, "plan_request", fake_plan)
    monkeypatch.setattr(pipeline, "execute", lambda plan: [])
    pkg.build_deb(MockContext(), kmod=False, kernel="a,b", output=str(tmp_path), device_mode="0666", dry_run=True)
    request = seen[0]
    assert request.kinds == ("deb",) and request.kernels == ("a", "b") and not request.with_kmod
    assert request.output == tmp_path and request.device_mode == "0666" and request.dry_run


def test_build_dependencies_follow_the_kinds_and_lint(monkeypatch: pytest.MonkeyPatch) -> None:
    # bullseye has no rpmlint: a deb-only build without lint must not ask for it.
    from gdrkit.packaging import build

    asked: list[list[str]] = []
    monkeypatch.setattr(build, "ensure_debian_packages", lambda packages, dry_run=False: asked.append(list(packages)))
    build.ensure_build_deps((), kinds=("deb",), lint=False)
    build.ensure_build_deps(("6.1.0-56-amd64",), kinds=("deb", "rpm"), lint=True)
    deb_only, everything = asked
    assert not {"rpm", "rpmlint", "lintian"} & set(deb_only) and "debhelper" in deb_only
    assert {"rpm", "rpmlint", "lintian", "linux-headers-6.1.0-56-amd64"} <= set(everything)


@pytest.mark.parametrize(
    ("suite", "kver", "unitdir"),
    [
        ("bookworm", "6.1.0-56-amd64", "/lib/systemd/system"),
        ("trixie", "6.12.57+deb13-amd64", "/usr/lib/systemd/system"),
    ],
)
def test_the_deb_layout_follows_the_suite_asked_for(suite: str, kver: str, unitdir: str) -> None:
    plan = pipeline.plan_request(pipeline.Request(kinds=("deb",), suite=suite, kernels=(kver,)), SOURCE)
    deb = plan.jobs[0].plan
    assert deb.family.unitdir == unitdir
    kmod = deb.package(f"gdrdrv-modules-{kver}")
    assert kmod.contents[0] == f"{unitdir.removesuffix('/systemd/system')}/modules/{kver}/*/gdrdrv.ko"


def test_without_a_suite_the_build_hosts_os_release_decides(tmp_path: Path) -> None:
    # build-deb runs in the suite's own container (the matrix), with its debhelper.
    trixie = tmp_path / "os-release"
    trixie.write_text(
        'PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nID=debian\nVERSION_ID="13"\nVERSION_CODENAME=trixie\n'
    )
    assert pipeline.deb_target_release("", trixie).codename == "trixie"
    assert pipeline.deb_target_release("bookworm", trixie).codename == "bookworm"  # the option wins
    alpine = tmp_path / "alpine"
    alpine.write_text("ID=alpine\nVERSION_ID=3.20.0\n")
    with pytest.raises(UserError, match="cannot tell which Debian or Ubuntu release") as error:
        pipeline.deb_target_release("", alpine)
    assert "--suite" in str(error.value.hint)
    with pytest.raises(UserError, match="cannot tell"):
        pipeline.deb_target_release("", tmp_path / "missing")


def test_build_deb_and_build_packages_pass_the_suite_down(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[pipeline.Request] = []

    def plan_request(request: pipeline.Request, source: build.Source | None = None) -> pipeline.BuildPlan:
        seen.append(request)
        return pipeline.BuildPlan(request=request, source=SOURCE, kernels=())

    monkeypatch.setattr(pipeline, "plan_request", plan_request)
    monkeypatch.setattr(pipeline, "execute", lambda plan: [])
    pkg.build_deb(MockContext(), kmod=False, suite="trixie", dry_run=True)
    pkg.build_packages(MockContext(), kmod=False, suite="noble", dry_run=True)
    assert [r.suite for r in seen] == ["trixie", "noble"]


def test_the_nvidia_source_directory_goes_to_the_build_never_to_the_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "nv-p2p.h").touch()
    monkeypatch.delenv("NVIDIA_SRC_DIR", raising=False)
    seen: list[str] = []

    def build_debs(*args: object, nvidia_src_dir: str = "", **kwargs: object) -> list[Path]:
        seen.append(nvidia_src_dir)
        return []

    monkeypatch.setattr(build, "build_debs", build_debs)
    request = pipeline.Request(kinds=("deb",), suite="bookworm", with_kmod=False, nvidia_src_dir=str(tmp_path),
                               install_deps=False, dry_run=True)  # fmt: skip
    pipeline.execute(pipeline.plan_request(request, SOURCE))
    assert seen == [str(tmp_path)]
    assert "NVIDIA_SRC_DIR" not in os.environ
    assert build._build_env(1, 2, str(tmp_path))["NVIDIA_SRC_DIR"] == str(tmp_path)
    assert "NVIDIA_SRC_DIR" not in build._build_env(1, 2)


def test_kube_builds_its_packages_through_the_pipeline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Its package builds go through plan_request and the stage's execute, so through verify_contents and lint."""
    from gdrkit.kube import images

    requests: list[pipeline.Request] = []

    def checked(plan: pipeline.BuildPlan) -> list[Path]:
        requests.append(plan.request)
        return []

    monkeypatch.setattr(images, "checked_packages", checked)
    images.build_packages(images.node_os("rhel9.4"), ["5.14.0-1"], tmp_path, nvidia_src_dir=None)
    images.build_packages(images.node_os("debian12"), ["6.1.0-56-amd64"], tmp_path, nvidia_src_dir=tmp_path)
    rpm, deb = requests
    assert (rpm.kinds, rpm.rpm_family, rpm.kernels, rpm.with_kmod) == (("rpm",), "rhel", (), False)
    assert rpm.rpm_release == "el9"  # the node's own release: its glibc, Python and dist tag
    assert (deb.kinds, deb.suite, deb.kernels, deb.nvidia_src_dir) == (
        ("deb",),
        "bookworm",
        ("6.1.0-56-amd64",),
        str(tmp_path),
    )
    assert deb.lint and rpm.lint


def test_a_request_can_build_the_packages_as_another_version() -> None:
    """The upgrade tests' "previous release": one commit packaged as another version, through the same plan."""
    request = pipeline.Request(kinds=("deb", "rpm"), suite="bookworm", with_kmod=False, package_version="2.6.0")
    plan = pipeline.plan_request(request, SOURCE)
    assert [job.plan.version for job in plan.jobs] == ["2.6.0", "2.6.0"]
    plain = pipeline.plan_request(dataclasses.replace(request, package_version=""), SOURCE)
    assert [job.plan.version for job in plain.jobs] == [version.VERSION, version.VERSION]


def test_the_package_test_kit_builds_through_the_pipeline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The fault and upgrade scenarios' two sets go through plan_request and execute, so through verify_contents."""
    from pkgkit import faults, scenarios

    planned: list[pipeline.BuildPlan] = []

    def checked(plan: pipeline.BuildPlan) -> list[Path]:
        planned.append(plan)
        return []

    monkeypatch.setattr(faults, "checked_packages", checked)
    sets = faults.build_deb_sets(tmp_path / "new", tmp_path / "old")
    new, old = planned
    assert new.source == old.source and new.source.commit == build.source_at("HEAD").commit
    for plan, output in ((new, tmp_path / "new"), (old, tmp_path / "old")):
        (job,) = plan.jobs
        assert (plan.request.kinds, plan.request.suite, plan.kernels, job.output) == (
            ("deb",),
            scenarios.SUITE,
            (),
            output,
        )
        assert job.plan.family == scenarios.FAMILY
    assert (new.jobs[0].plan.version, old.jobs[0].plan.version) == (sets.version, sets.previous)
    assert (sets.version, sets.previous) == (version.VERSION, faults.PREVIOUS_RELEASE)


@pytest.mark.parametrize(("task", "package_type"), [(pkg.build_deb, "deb"), (pkg.build_rpm, "rpm")])
def test_the_build_tasks_name_every_package_of_the_description(task: object, package_type: str) -> None:
    from gdrkit.packaging import model

    doc = str(getattr(task, "__doc__", ""))
    names = model.load().package_names(package_type)
    assert "python3-gdrcopy" in names
    assert all(name in doc for name in names), doc
