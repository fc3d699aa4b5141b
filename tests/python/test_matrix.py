"""The distro matrix file, its checks, the result table/JUnit, and the workflow lint."""

from __future__ import annotations

import re

import shlex
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gdrkit.matrix import model, report, workflow
from gdrkit.stage.packages import built_files
from pkgkit.empty import empty_package
from gdrkit.system import UserError


def test_the_matrix_file_loads_and_covers_the_distros_users_run() -> None:
    entries = model.load()
    names = {e.name for e in entries}
    assert {"debian-bullseye", "debian-bookworm", "debian-trixie", "debian-sid"} <= names
    assert {
        "rockylinux-8",
        "rockylinux-9",
        "almalinux-10",
        "ubuntu-22.04",
        "ubuntu-24.04",
        "opensuse-leap-15.6",
    } <= names
    # What .ci/run runs must not need a registry, and must include bookworm and trixie.
    local = {e.name for e in model.select(entries, ci_local=True)}
    assert {"debian-bookworm", "debian-trixie"} <= local
    assert all(not e.needs_registry for e in model.select(entries, ci_local=True))


def test_real_nvidia_rows_cover_both_suites_and_flavours_and_one_runs_in_ci() -> None:
    entries = model.load()
    rows = {(e.kernel_suite, e.nvidia): e for e in entries if e.nvidia is not None}
    assert set(rows) == {(suite, flavour) for suite in ("bookworm", "trixie") for flavour in ("proprietary", "open")}
    assert all(not e.boot and e.local_suite == e.kernel_suite for e in rows.values())
    # Building the real driver is slow: exactly one real-driver row in .ci/run, the others in the full matrix.
    assert [e.name for e in model.select(entries, ci_local=True) if e.nvidia] == ["debian-bookworm-nvidia"]
    # Rows of one suite share its prepared image (and the packages built in it).
    assert rows[("bookworm", "open")].image_name == "debian-bookworm"


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(body)
    return path


GOOD = """entries:
  - name: debian-bookworm
    image: {mmdebstrap: bookworm}
    family: debian
    kernel: {debian_suite: bookworm}
    boot: true
    ci_local: true
"""


def test_a_good_entry_is_read_field_by_field(tmp_path: Path) -> None:
    (entry,) = model.load(write(tmp_path, GOOD))
    assert entry.local_suite == "bookworm" and entry.registry_image is None
    assert entry.kernel_suite == "bookworm" and entry.boot and entry.ci_local
    assert entry.as_job() == {"name": "debian-bookworm", "family": "debian", "boot": True, "registry": False}


@pytest.mark.parametrize(
    "change, message",
    [
        (("family: debian", "family: arch"), "family 'arch'"),
        (("{mmdebstrap: bookworm}", "{mmdebstrap: hamm}"), "not a Debian suite"),
        (
            ("boot: true", "boot: yes please"),
            "entries[debian-bookworm].boot: 'yes please' is a string, not true or false",
        ),
        (("{mmdebstrap: bookworm}", "{registry: 'debian:12'}"), "ci_local entries must not need a registry"),
        (("{debian_suite: bookworm}", "{package: linux-headers-amd64}"), "only Debian suite kernels can be booted"),
        (("    ci_local: true\n", ""), "entries[debian-bookworm]: 'ci_local' is missing (a required key)"),
        (("    boot: true\n", "    boot: true\n    bot: true\n"), "entries[debian-bookworm]: unknown key 'bot'"),
        (("entries:\n", "entires: []\nentries:\n"), "the top level: unknown key 'entires'"),
    ],
)
def test_bad_entries_are_refused_with_the_reason(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    path = write(tmp_path, GOOD.replace(*change))
    with pytest.raises(UserError) as error:
        model.load(path)
    # file:line, then the field and what is wrong with it.
    assert message in str(error.value) and re.search(rf"{re.escape(str(path))}:\d+: ", str(error.value))


NVIDIA_ROW = GOOD.replace("debian-bookworm", "debian-bookworm-nvidia", 1).replace(
    "    boot: true\n", "    nvidia: proprietary\n    boot: false\n"
)


def test_a_real_nvidia_row_is_read_and_its_impossible_settings_refused(tmp_path: Path) -> None:
    (entry,) = model.load(write(tmp_path, NVIDIA_ROW))
    assert entry.nvidia == "proprietary" and not entry.boot
    assert entry.image_description == "mmdebstrap bookworm + NVIDIA proprietary"
    for change, message in [
        (("nvidia: proprietary", "nvidia: nouveau"), "nvidia: 'nouveau' is not one of ['proprietary', 'open']"),
        (("boot: false", "boot: true"), "needs an NVIDIA GPU to load"),
        (("{debian_suite: bookworm}", "{package: linux-headers-amd64}"), "need a Debian suite image and kernel"),
    ]:
        with pytest.raises(UserError) as error:
            model.load(write(tmp_path, NVIDIA_ROW.replace(*change)))
        assert message in str(error.value)


def test_duplicate_names_and_unknown_selections_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="duplicate"):
        model.load(write(tmp_path, GOOD + GOOD[len("entries:\n") :]))
    entries = model.load(write(tmp_path, GOOD))
    with pytest.raises(UserError, match="no matrix entry named debian-potato"):
        model.select(entries, only=["debian-potato"])


def test_table_and_junit_name_the_failing_step_and_the_skip_reason(tmp_path: Path) -> None:
    good = report.EntryResult("debian-bookworm", seconds=300)
    for step in report.STEPS:
        good.record(step, report.Outcome.PASSED, seconds=10)
    broken = report.EntryResult("debian-trixie", seconds=120)
    broken.record("image", report.Outcome.PASSED)
    broken.record("build", report.Outcome.FAILED, "gdrdrv.c:42: error: implicit declaration of 'vm_flags_set'")
    broken.skip_rest("build failed")
    skipped = report.EntryResult("rockylinux-9")
    skipped.skip_rest("needs an image registry (--offline)")

    table = report.format_table([good, broken, skipped])
    assert "debian-trixie: build failed: gdrdrv.c:42: error" in table
    assert "rockylinux-9: skipped: needs an image registry (--offline)" in table
    assert table.splitlines()[-1] == "matrix: 1 passed, 1 failed, 1 skipped"

    path = tmp_path / "matrix.xml"
    report.write_junit([good, broken, skipped], path)
    suite = ET.parse(path).getroot()
    assert suite.get("failures") == "1"
    failure = suite.find("testcase[@classname='matrix.debian-trixie'][@name='build']/failure")
    assert failure is not None and "vm_flags_set" in (failure.text or "")
    assert len(suite.findall("testcase[@classname='matrix.rockylinux-9']/skipped")) == len(report.STEPS)


def test_stand_in_rows_leave_the_nvidia_column_empty_and_still_count_as_skipped() -> None:
    row = report.EntryResult("ubuntu-24.04")
    row.record("nvidia", report.Outcome.NOT_RUN)
    row.skip_rest("needs an image registry (--offline given)")
    assert row.outcome("nvidia") is report.Outcome.NOT_RUN and row.skipped
    table = report.format_table([row])
    assert "nvidia" in table.splitlines()[0]
    assert table.splitlines()[-1] == "matrix: 0 passed, 0 failed, 1 skipped"


@pytest.mark.slow
def test_the_workflow_passes_actionlint_and_a_broken_one_does_not(tmp_path: Path) -> None:
    status, output = workflow.lint([workflow.WORKFLOW])
    assert status == 0, output
    broken = tmp_path / "broken.yml"
    broken.write_text(workflow.WORKFLOW.read_text().replace("${{ matrix.entry.name }}", "${{ matrix.nope.name }}", 1))
    status, output = workflow.lint([broken])
    assert status != 0 and "nope" in output


def test_container_step_marks_and_package_selection(tmp_path: Path) -> None:
    from gdrkit.matrix import runner

    output = "noise\nGDRKIT-STEP install 0\nmore\nGDRKIT-STEP dkms 1\n"
    assert runner.step_statuses(output) == {"install": 0, "dkms": 1}
    for name in (
        "libgdrapi_2.6.1-1_amd64.deb",
        "gdrcopy-tests_2.6.1-1_amd64.deb",
        "gdrdrv-dkms_2.6.1-1_all.deb",
        "gdrcopy_2.6.1-1_all.deb",
        "gdrdrv-modules-6.1.0-56-amd64_2.6.1-1_amd64.deb",
    ):
        empty_package(tmp_path / name)
    (tmp_path / "gdrcopy-2.6.1-1.x86_64.rpm").write_text("")  # not a .deb: never read
    # The package a file holds is read from it, not from its name.
    empty_package(tmp_path / "python3-gdrcopy_2.6.1-1_all.deb").rename(tmp_path / "renamed.deb")
    entries = {e.name: e for e in model.load()}
    # The installed set is packages/gdrcopy.yaml's: every package but the prebuilt-module ones.
    assert set(runner.install_set(entries["debian-trixie"])) == {
        "libgdrapi",
        "gdrcopy-tests",
        "gdrdrv-dkms",
        "gdrcopy",
        "python3-gdrcopy",
    }
    assert set(runner.install_set(entries["rockylinux-9"])) == {
        "gdrcopy",
        "gdrcopy-devel",
        "gdrcopy-kmod",
        "python3-gdrcopy",
    }
    debs = [p.name for p in built_files(tmp_path, "debian", runner.install_set(entries["debian-trixie"]))]
    assert debs == [
        "gdrcopy-tests_2.6.1-1_amd64.deb",
        "gdrcopy_2.6.1-1_all.deb",
        "gdrdrv-dkms_2.6.1-1_all.deb",
        "libgdrapi_2.6.1-1_amd64.deb",
        "renamed.deb",
    ]
    script = runner.install_script("debian", ["/src/dist/a.deb"], "6.12.57+deb13-amd64")
    first = script.splitlines()[0]
    assert first.startswith("set -- 6.12.57+deb13-amd64 --refresh 'apt-get update -q' --install 'apt-get install ")
    assert first.endswith(" -- /src/dist/a.deb") and 'dkms autoinstall -k "$abi"' in script
    assert "--install 'zypper --non-interactive --no-gpg-checks install'" in runner.install_script(
        "suse", ["a.rpm"], ""
    )


def test_debian_rows_build_for_their_suite_and_lint_there_rpm_rows_do_not_lint() -> None:
    from gdrkit.matrix import runner

    entries = {e.name: e for e in model.load()}
    trixie = runner.build_command(entries["debian-trixie"], "6.12.57+deb13-amd64")
    assert trixie == "cd /src && ./toolkit build-deb --kernel 6.12.57+deb13-amd64 --suite trixie"
    # A registry image's own /etc/os-release names its release.
    assert runner.build_command(entries["ubuntu-24.04"], "") == "cd /src && ./toolkit build-deb"
    assert runner.build_command(entries["rockylinux-9"], "").endswith("build-rpm --no-lint")
    setup = runner.setup_command(entries["debian-trixie"]).splitlines()[0]
    assert " lintian " in setup and setup.startswith("set -- --scrub-built ")
    # A registry row's image gets the kernel headers package its row names.
    assert runner.setup_command(entries["ubuntu-24.04"]).splitlines()[0].endswith(" linux-headers-generic")
    assert "--repos epel-release" in runner.setup_command(entries["rockylinux-9"])


def test_the_image_setup_script_retries_after_enabling_repositories(tmp_path: Path) -> None:
    """setup_image.sh installs, and where that fails installs the repository packages and tries again."""
    import subprocess

    from gdrkit.matrix import runner

    manager = tmp_path / "pm"
    manager.write_text(
        '#!/bin/sh\necho "$*" >> "$(dirname "$0")/calls"\n'
        '[ "$1" = epel ] && touch "$(dirname "$0")/enabled"\n'
        '[ -e "$(dirname "$0")/enabled" ]\n'
    )
    manager.chmod(0o755)
    argv = ["bash", str(runner.SETUP_IMAGE_SCRIPT), "--install", str(manager), "--repos", "epel", "--", "dkms", "git"]
    assert subprocess.run(argv, capture_output=True).returncode == 0
    assert (tmp_path / "calls").read_text().splitlines() == ["dkms git", "epel", "dkms git"]
    (tmp_path / "enabled").unlink()
    (tmp_path / "calls").unlink()
    without_repos = [a for a in argv if a not in ("--repos", "epel")]
    assert subprocess.run(without_repos, capture_output=True).returncode != 0
    assert (tmp_path / "calls").read_text().splitlines() == ["dkms git"]


@pytest.mark.parametrize(
    "family, listing, packages",
    [
        (
            "debian",
            "linux-headers-6.1.0-41-amd64 - Header files for Linux 6.1.0-41-amd64\n"
            "linux-headers-6.1.0-42-amd64 - Header files for Linux 6.1.0-42-amd64\n",
            ["linux-headers-6.1.0-41-amd64", "linux-headers-6.1.0-42-amd64"],
        ),
        (
            "rhel",
            "Available Packages\nkernel-devel.x86_64    5.14.0-427.13.1.el9_4    baseos\n"
            "kernel-devel.x86_64    5.14.0-503.14.1.el9_5    baseos\n",
            ["kernel-devel-5.14.0-427.13.1.el9_4", "kernel-devel-5.14.0-503.14.1.el9_5"],
        ),
        (
            "suse",
            "S | Name                 | Type    | Version              | Arch   | Repository\n"
            "--+----------------------+---------+----------------------+--------+-----------\n"
            "  | kernel-default-devel | package | 6.4.0-150600.23.25.1 | x86_64 | Update\n"
            "  | kernel-default-devel | package | 6.4.0-150600.21.2    | x86_64 | Main\n",
            ["kernel-default-devel-6.4.0-150600.23.25.1", "kernel-default-devel-6.4.0-150600.21.2"],
        ),
    ],
)
def test_each_family_reads_its_headers_listing(family: str, listing: str, packages: list[str]) -> None:
    from gdrkit.distro.families import family as named
    from gdrkit.matrix import runner

    assert named(family).headers_packages(listing + listing) == packages
    sweep = runner.sweep_command(family, packages).splitlines()[0]
    assert (
        sweep.endswith(" -- " + " ".join(packages)) and f"--trees {shlex.quote(named(family).headers_trees)}" in sweep
    )


class FakeEngine:
    def __init__(self) -> None:
        self.pulled: list[str] = []

    def pull(self, reference: str) -> tuple[bool, str]:
        self.pulled.append(reference)
        return False, "Get https://registry-1.docker.io/v2/: dial tcp: lookup failed"


def test_registry_entries_are_skipped_with_the_reason_never_dropped(tmp_path: Path) -> None:
    from gdrkit.matrix import runner

    rocky = next(e for e in model.load() if e.name == "rockylinux-9")
    engine = FakeEngine()
    plan = runner.plan_entry(rocky, offline=True)
    offline = runner.EntryRun(plan, engine, runner.Workspace(tmp_path), refresh=False).run()  # type: ignore[arg-type]
    assert engine.pulled == [] and offline.skipped
    assert offline.skip_reason() == "needs an image registry (--offline given)"
    plan = runner.plan_entry(rocky, offline=False)
    online = runner.EntryRun(plan, engine, runner.Workspace(tmp_path), refresh=False).run()  # type: ignore[arg-type]
    assert engine.pulled == ["rockylinux:9"] and online.skipped
    assert "no registry reachable here" in online.skip_reason()
    # An Ubuntu row names the target whose packages go untested, and why.
    noble = next(e for e in model.load() if e.name == "ubuntu-24.04")
    plan = runner.plan_entry(noble, offline=False)
    reason = runner.EntryRun(plan, engine, runner.Workspace(tmp_path), refresh=False).run().skip_reason()  # type: ignore[arg-type]
    assert reason.startswith("target noble's packages are not installed nor booted here: no registry reachable here: ")


def test_each_debian_row_picks_its_target_from_the_registry() -> None:
    # The row's suite (and arch) is the one home: what it builds, checks against and installs.
    from gdrkit.matrix import runner

    targets = {e.name: e.target.name if e.target else None for e in model.load()}
    assert targets["debian-bullseye"] == "bullseye" and targets["debian-trixie-arm64"] == "trixie-arm64"
    assert targets["ubuntu-22.04"] == "jammy" and targets["ubuntu-24.04"] == "noble"
    assert targets["rockylinux-9"] is None
    bullseye = next(e for e in model.load() if e.name == "debian-bullseye")
    says = runner.entry_plan(bullseye, offline=True)
    assert "debian-bullseye: check them against target bullseye: glibc 2.31, python3 (>= 3.8)" in says
    # The packages are the per-target build's (in bullseye's own root here), not the host's bookworm build.
    request = runner.target_request(bullseye, Path("/clone"), Path("/clone/dist"))
    assert request.targets == ("bullseye",) and not request.with_kmod
    unclaimed = [e for e in model.load() if e.name in ("debian-sid", "rockylinux-9")]
    assert unclaimed and not any(runner.builds_per_target(e) for e in unclaimed)


LOCAL_ENTRIES = [e for e in model.select(model.load(), ci_local=True) if e.nvidia is None]


# Each row costs about three minutes; .ci/run keeps the first (the host's own
# suite) and the soak tier runs the rest.  trixie's packages, DKMS build and
# kernel are judged in .ci/run by the per-suite lintian and VM tests.
@pytest.mark.slow
@pytest.mark.parametrize(
    "entry",
    [pytest.param(e, id=e.name, marks=() if i == 0 else pytest.mark.soak) for i, e in enumerate(LOCAL_ENTRIES)],
)
def test_local_matrix_entries_pass_end_to_end(entry: model.Entry) -> None:
    """Build, install, DKMS, boot and sanity on a ci_local stand-in entry."""
    from gdrkit.matrix import runner

    results = runner.run_entries([entry], offline=True)
    table = report.format_table(results)
    print(table)
    assert not any(r.failed or r.skipped for r in results), table


def assert_real_nvidia_row_passes(entry: model.Entry) -> None:
    from gdrkit.matrix import runner

    (result,) = runner.run_entries([entry], offline=True)
    table = report.format_table([result])
    print(table)
    reason = result.skip_reason()
    if result.skipped and " does not build for " in reason:
        # The distro's own driver fails for the distro's kernel (runner.DRIVER_DOES_NOT_BUILD).
        pytest.skip(f"{entry.name}: {reason}")
    for step in ("image", "build", "install", "dkms", "nvidia"):
        assert result.outcome(step) is report.Outcome.PASSED, table
    # What cannot run here is named, never faked.
    for step in ("load", "sanity"):
        assert result.outcome(step) is report.Outcome.SKIPPED, table
        assert "needs an NVIDIA GPU" in result.steps[step].detail, table


REAL_NVIDIA_ROWS = [e for e in model.load() if e.nvidia]


# In the soak tier: from a cold machine this row costs about 16 minutes (the
# driver's DKMS build in the image layer, then the row's own rebuilds), 14 with
# warm caches, which .ci/run's 45 minutes no longer hold.  Real NVIDIA sources
# still judge every .ci/run through test_p2p_crcs.py (our declarations against
# the CRCs the real driver exports, bookworm and trixie).
@pytest.mark.soak
def test_the_ci_real_nvidia_row_passes() -> None:
    """bookworm with Debian's nvidia-kernel-dkms: gdrdrv-dkms builds against it and matches its CRCs."""
    (entry,) = [e for e in REAL_NVIDIA_ROWS if e.ci_local]
    assert_real_nvidia_row_passes(entry)


@pytest.mark.soak
@pytest.mark.parametrize("name", [e.name for e in REAL_NVIDIA_ROWS if not e.ci_local])
def test_each_other_real_nvidia_row_passes(name: str) -> None:
    """bookworm-open, trixie and trixie-open (the open driver's first build takes long)."""
    assert_real_nvidia_row_passes(next(e for e in REAL_NVIDIA_ROWS if e.name == name))


class LayerEngine:
    """An engine whose one container run exits with `status` and `output` (nvidia_layer.sh's)."""

    def __init__(self, status: int, output: str) -> None:
        self.status, self.output = status, output
        self.removed = 0

    def has_image(self, tag: str) -> bool:
        return False

    def run(self, image: str, script: str, **_: object) -> tuple[object, object]:
        from gdrkit.containers import RunResult

        return RunResult(self.status, self.output), object()

    def remove(self, container: object) -> None:
        self.removed += 1


def test_a_driver_package_that_does_not_build_for_the_kernel_is_a_named_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gdrkit import nvidia
    from gdrkit.matrix import runner

    entry = next(e for e in REAL_NVIDIA_ROWS if e.name == "debian-bookworm-nvidia-open")
    monkeypatch.setattr(
        nvidia,
        "driver_package",
        lambda suite, flavour: nvidia.DriverPackage(
            "bookworm", "open", "nvidia-open-kernel-dkms", "535.261.03-1", "nvidia-current-open"
        ),
    )
    error = "nv-pci.c:223:9: error: too few arguments to function 'pci_resize_resource'"
    engine = LayerEngine(
        runner.DRIVER_DOES_NOT_BUILD,
        f"noise\nnvidia_layer: nvidia-open-kernel-dkms 535.261.03-1 does not build for 6.1.0-57-amd64: {error}\n",
    )
    run = runner.EntryRun(runner.plan_entry(entry, offline=True), engine, runner.Workspace(tmp_path), refresh=False)  # type: ignore[arg-type]
    run.abi, run.image = "6.1.0-57-amd64", "gdrkit-matrix/debian-bookworm:x"
    assert run.nvidia_layer(0.0) is False and engine.removed == 1
    assert run.result.skipped and not run.result.failed
    assert error in run.result.skip_reason() and "nothing of ours ran" in run.result.skip_reason()
    # A layer script that exits 3 without its reason line still skips, naming the package and the output.
    terse = LayerEngine(runner.DRIVER_DOES_NOT_BUILD, f"{error}\n")
    quiet = runner.EntryRun(runner.plan_entry(entry, offline=True), terse, runner.Workspace(tmp_path), refresh=False)  # type: ignore[arg-type]
    quiet.abi, quiet.image = "6.1.0-57-amd64", "gdrkit-matrix/debian-bookworm:x"
    assert quiet.nvidia_layer(0.0) is False and quiet.result.skipped and not quiet.result.failed
    reason = quiet.result.skip_reason()
    assert "nvidia-open-kernel-dkms 535.261.03-1 does not build for 6.1.0-57-amd64" in reason and error in reason
    # Any other failure of the layer stays a failure.
    failing = LayerEngine(1, "E: Unable to locate package\n")
    other = runner.EntryRun(runner.plan_entry(entry, offline=True), failing, runner.Workspace(tmp_path), refresh=False)  # type: ignore[arg-type]
    other.abi, other.image = "6.1.0-57-amd64", "gdrkit-matrix/debian-bookworm:x"
    assert other.nvidia_layer(0.0) is False and other.result.failed


def test_a_failing_step_shows_the_compiler_error_first() -> None:
    from gdrkit.matrix import runner

    output = "\n".join(
        ["error: command failed (exit 2): dpkg-buildpackage -b -us -uc --no-sign -j2"]
        + ["make -C /lib/modules/6.12.57+deb13-amd64/build M=/src/gdrdrv modules"]
        + [f"  CC [M]  noise {i}" for i in range(50)]
        + [
            "/src/gdrdrv/gdrdrv.c:812:9: error: implicit declaration of function 'vm_flags_set'",
            "make: *** [Makefile:90: all] Error 2",
        ]
        + [f"packaging noise {i}" for i in range(40)]
    )
    detail = runner.tail(output)
    assert (
        detail.splitlines()[0] == "/src/gdrdrv/gdrdrv.c:812:9: error: implicit declaration of function 'vm_flags_set'"
    )
    assert detail.splitlines()[-1] == "packaging noise 39"


class ScriptEngine:
    """Answers every container run with one canned output (what real_nvidia.sh printed)."""

    def __init__(self, output: str) -> None:
        self.output = output
        self.scripts: list[tuple[str, str]] = []

    def run(self, image: str, script: str, **_: object) -> tuple[object, None]:
        from gdrkit.containers import RunResult

        self.scripts.append((image, script))
        return RunResult(0, self.output), None


def real_nvidia_step(tmp_path: Path, output: str) -> tuple[report.EntryResult, ScriptEngine]:
    from gdrkit.matrix import runner
    from gdrkit.nvidia import DriverPackage

    entry = next(e for e in model.load() if e.name == "debian-bookworm-nvidia")
    engine = ScriptEngine(output)
    workspace = runner.Workspace(tmp_path)
    entry_run = runner.EntryRun(runner.plan_entry(entry, offline=True), engine, workspace, refresh=False)  # type: ignore[arg-type]
    # Where the per-target build (build-packages --targets bookworm) puts them.
    assert entry_run.package_dir == workspace.dist / "bookworm"
    entry_run.package_dir.mkdir(parents=True)
    for name in (
        "libgdrapi_2.6.1-1_amd64.deb",
        "gdrcopy-tests_2.6.1-1_amd64.deb",
        "gdrdrv-dkms_2.6.1-1_all.deb",
        "gdrcopy_2.6.1-1_all.deb",
    ):
        empty_package(entry_run.package_dir / name)
    entry_run.abi = "6.1.0-57-amd64"
    entry_run.test_image = "gdrkit-matrix/debian-bookworm-nvidia-kernel-dkms:x"
    entry_run.driver = DriverPackage(
        "bookworm", "proprietary", "nvidia-kernel-dkms", "535.309.01-0+deb12u1", "nvidia-current"
    )
    entry_run.step_real_nvidia()
    return entry_run.result, engine


def test_a_real_nvidia_row_reads_the_scripts_marks_and_names_what_cannot_run(tmp_path: Path) -> None:
    result, engine = real_nvidia_step(
        tmp_path, "GDRKIT-STEP install 0\nok: built\nGDRKIT-STEP dkms 0\nok: crcs\nok: gpl\nGDRKIT-STEP nvidia 0\n"
    )
    ((image, script),) = engine.scripts
    assert image.startswith("gdrkit-matrix/debian-bookworm-nvidia-kernel-dkms")
    assert script.startswith("bash /src/gdrkit/matrix/real_nvidia.sh 6.1.0-57-amd64 proprietary nvidia-kernel-dkms ")
    assert "nvidia-current /src/dist/bookworm/gdrcopy-tests_2.6.1-1_amd64.deb" in script
    assert [result.outcome(s) for s in ("install", "dkms", "nvidia")] == [report.Outcome.PASSED] * 3
    assert result.steps["nvidia"].detail.startswith("3 of 3 checks passed")
    for step in ("load", "sanity"):
        assert result.outcome(step) is report.Outcome.SKIPPED
        assert "nvidia-kernel-dkms 535.309.01-0+deb12u1) needs an NVIDIA GPU" in result.steps[step].detail
    assert not result.failed and not result.skipped
    assert "debian-bookworm-nvidia: skipped: loading the real nvidia.ko" in report.format_table([result])


def test_a_failing_real_nvidia_check_is_shown_first_and_a_cut_short_run_fails(tmp_path: Path) -> None:
    result, _ = real_nvidia_step(
        tmp_path,
        "GDRKIT-STEP install 0\nGDRKIT-STEP dkms 0\nFAIL: after autoinstall: 5 of 5 nvidia_p2p_* CRCs differ\n"
        "noise\nGDRKIT-STEP nvidia 1\n",
    )
    assert result.outcome("nvidia") is report.Outcome.FAILED and "load" not in result.steps
    assert result.steps["nvidia"].detail.splitlines()[0] == "FAIL: after autoinstall: 5 of 5 nvidia_p2p_* CRCs differ"
    result, _ = real_nvidia_step(tmp_path / "again", "GDRKIT-STEP install 0\n[killed after 10800 s]\n")
    assert result.outcome("install") is report.Outcome.PASSED
    assert result.outcome("dkms") is report.Outcome.FAILED and "stopped before this step" in result.steps["dkms"].detail


def test_matrix_sweep_and_lint_dry_runs_plan_and_change_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--dry-run names the engine, each entry's steps and actionlint's install, and runs none of them."""
    from invoke.context import MockContext

    from gdrkit.matrix import runner
    from gdrkit.tasks import matrix as tasks

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a dry run must not run anything")

    for name in ("run_entries", "execute_matrix", "execute_sweep", "compile_sweep"):
        monkeypatch.setattr(runner, name, refuse)
    monkeypatch.setattr(workflow, "lint", refuse)
    monkeypatch.setattr(workflow, "actionlint_modules", refuse)
    monkeypatch.setattr(runner, "engine_plan", lambda: ["install docker.io", "start dockerd"])
    tasks.matrix(MockContext(), only=["debian-trixie", "rockylinux-9"], offline=True, dry_run=True)
    out = capsys.readouterr().out
    assert out.startswith("[dry-run] install docker.io\n[dry-run] start dockerd\n")
    assert (
        "debian-trixie: build from a clean clone of HEAD: build here for target trixie (build-packages --targets trixie)"
        in out
    )
    assert "debian-trixie: boot its kernel under qemu" in out
    assert "rockylinux-9: skipped: needs an image registry (--offline given)" in out
    tasks.compile_sweep(MockContext(), only=["rockylinux-9"], dry_run=True)
    out = capsys.readouterr().out
    assert "rockylinux-9: install each with dnf install -y and compile gdrdrv against /usr/src/kernels/*" in out
    tasks.lint_workflow(MockContext(), dry_run=True)
    assert capsys.readouterr().out.splitlines()[-1].startswith("[dry-run] run actionlint")


@pytest.mark.parametrize("offline", [True, False])
def test_an_entry_run_walks_the_steps_its_dry_run_prints(offline: bool, tmp_path: Path) -> None:
    """EntryRun carries out its EntryPlan's steps in order, each once, and stops where a step says so."""
    from gdrkit.matrix import runner

    for entry in model.load():
        plan = runner.plan_entry(entry, offline=offline)
        assert plan.lines() == runner.entry_plan(entry, offline=offline)
        walked: list[str] = []
        entry_run = runner.EntryRun(plan, FakeEngine(), runner.Workspace(tmp_path), refresh=False)  # type: ignore[arg-type]
        for step in plan.steps:
            assert callable(getattr(entry_run, f"step_{step.action}")), step
            setattr(entry_run, f"step_{step.action}", lambda action=step.action, log=walked: log.append(action) or True)
        entry_run.run()
        assert walked == [step.action for step in plan.steps], entry.name
        # A step that says stop ends the walk there.
        stopped: list[str] = []
        first = runner.EntryRun(plan, FakeEngine(), runner.Workspace(tmp_path), refresh=False)  # type: ignore[arg-type]
        for step in plan.steps:
            setattr(first, f"step_{step.action}", lambda action=step.action, log=stopped: bool(log.append(action)))
        first.run()
        assert stopped == [plan.steps[0].action]
    rocky = runner.plan_entry(next(e for e in model.load() if e.name == "rockylinux-9"), offline=True)
    assert [s.action for s in rocky.steps] == ["image"]
    nvidia = runner.plan_entry(next(e for e in model.load() if e.name == "debian-bookworm-nvidia"), offline=True)
    assert [s.action for s in nvidia.steps] == ["image", "build", "real_nvidia"]


class InstallEngine:
    """The install container's run: its script's step marks; counts the containers removed and exported."""

    def __init__(self, output: str) -> None:
        self.output = output
        self.removed = 0
        self.exported: list[Path] = []

    def run(self, image: str, script: str, **_: object) -> tuple[object, object]:
        from gdrkit.containers import RunResult

        return RunResult(0, self.output), "container"

    def remove(self, container: object) -> None:
        self.removed += 1

    def export_to(self, container: object, directory: Path) -> None:
        self.exported.append(directory)
        raise UserError("export stopped here (the boot is not part of this test)")


@pytest.mark.parametrize(
    ("name", "marks", "outcomes"),
    [
        # No boot here: the install container goes, the rest is skipped with why.
        ("ubuntu-24.04", "install 0\ndkms 0\n", {"dkms": "pass", "load": "skip", "sanity": "skip"}),
        # softgpu did not build: the boot step says so before exporting anything.
        ("debian-trixie", "install 0\ndkms 0\nsoftgpu 1\n", {"dkms": "pass", "load": "FAIL"}),
        # The boot step exports the install container's filesystem (the export raising stands for the boot).
        ("debian-trixie", "install 0\ndkms 0\nsoftgpu 0\n", {"dkms": "pass", "load": "FAIL"}),
        ("debian-trixie", "install 0\ndkms 1\n", {"dkms": "FAIL", "load": "skip"}),
    ],
)
def test_the_install_step_hands_its_container_to_the_next_step_and_it_is_removed_once(
    tmp_path: Path, name: str, marks: str, outcomes: dict[str, str]
) -> None:
    from gdrkit.matrix import runner

    entry = next(e for e in model.load() if e.name == name)
    plan = runner.plan_entry(entry, offline=False)
    rest = runner.EntryPlan(entry, False, tuple(s for s in plan.steps if s.action not in ("image", "build")))
    workspace = runner.Workspace(tmp_path)
    engine = InstallEngine("".join(f"GDRKIT-STEP {line}\n" for line in marks.splitlines()))
    entry_run = runner.EntryRun(rest, engine, workspace, refresh=False)  # type: ignore[arg-type]
    empty_package(entry_run.package_dir / "gdrdrv-dkms_2.6.1-1_all.deb")
    for step in ("image", "build"):  # as their steps would have
        entry_run.result.record(step, report.Outcome.PASSED)
    result = entry_run.run()
    assert {step: result.outcome(step).value for step in outcomes} == outcomes, result.steps
    assert engine.removed == 1
    assert engine.exported == ([workspace.rootfs] if marks.endswith("softgpu 0\n") else [])


def test_matrix_and_sweep_execute_the_plan_their_dry_run_prints(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One path: the task makes one plan object, prints it on --dry-run, else hands that object to execute."""
    from invoke.context import MockContext

    from gdrkit.matrix import runner
    from gdrkit.tasks import matrix as tasks

    executed: list[object] = []

    def execute_matrix(plan: runner.MatrixPlan) -> list[report.EntryResult]:
        executed.append(plan)
        return []

    def execute_sweep(plan: runner.SweepPlan) -> dict[str, dict[str, int]]:
        executed.append(plan)
        return {}

    monkeypatch.setattr(runner, "execute_matrix", execute_matrix)
    monkeypatch.setattr(runner, "execute_sweep", execute_sweep)
    monkeypatch.setattr(runner, "engine_plan", lambda: ["use the running Docker engine"])
    for task in (tasks.matrix, tasks.compile_sweep):
        task(MockContext(), only=["debian-trixie", "rockylinux-9"], offline=True, dry_run=True)
        printed = capsys.readouterr().out.splitlines()
        assert executed == []
        task(MockContext(), only=["debian-trixie", "rockylinux-9"], offline=True)
        (plan,) = executed
        assert isinstance(plan, (runner.MatrixPlan, runner.SweepPlan))
        assert printed == [f"[dry-run] {line}" for line in plan.lines()]
        assert [e.name for e in plan.entries] == ["debian-trixie", "rockylinux-9"] and plan.offline
        executed.clear()
        capsys.readouterr()


@pytest.mark.parametrize("suite", ["bookworm", "trixie"])
def test_molecule_hosts_start_from_the_matrix_rows_image(suite: str) -> None:
    """gdrkit.stage keys the prepared image by its spec: Molecule's debian-<suite> is the matrix row's, one cache."""
    from gdrkit.stage import image

    entry = next(e for e in model.load() if e.name == f"debian-{suite}")
    assert entry.stage == image.debian_suite_spec(suite)
