"""gdrkit.publish's pure parts: version order, the plan, the manifest from matrix JUnit, the source files."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from gdrkit.matrix.report import EntryResult, Outcome, write_junit
from gdrkit.publish import manifest, model, repo
from gdrkit.publish.model import PackageFile, Record, Target
from gdrkit.publish.versions import compare_deb, compare_rpm

DEB_PAIRS = [
    ("2.6.1-1", "2.6.0-1", 1),
    ("2.6.0-1", "2.6.0-1", 0),
    ("2.6.0-2", "2.6.0-10", -1),
    ("1:2.0-1", "3.0-1", 1),
    ("2.6.0~rc1-1", "2.6.0-1", -1),
    ("2.6.0", "2.6.0-0", 0),
    ("2.6.0a-1", "2.6.0-1", 1),
    ("2.6.0+deb12u1", "2.6.0", 1),
    ("2.6.0~", "2.6.0", -1),
    ("2.10-1", "2.9-1", 1),
]
RPM_PAIRS = [
    ("2.6.1-1", "2.6.0-1", 1),
    ("2.6.0-1", "2.6.0-1", 0),
    ("2.6.0-2", "2.6.0-10", -1),
    ("1:2.0-1", "3.0-1", 1),
    ("2.6.0~rc1-1", "2.6.0-1", -1),
    ("2.6.0^git1-1", "2.6.0-1", 1),
    ("2.6.0^git1-1", "2.6.1-1", -1),
    ("2.6a-1", "2.6.1-1", -1),
    ("2.10-1", "2.9-1", 1),
    ("2.6.01-1", "2.6.1-1", 0),
]


@pytest.mark.parametrize(("a", "b", "order"), DEB_PAIRS)
def test_deb_order(a: str, b: str, order: int) -> None:
    assert compare_deb(a, b) == order
    assert compare_deb(b, a) == -order


@pytest.mark.parametrize(("a", "b", "order"), RPM_PAIRS)
def test_rpm_order(a: str, b: str, order: int) -> None:
    assert compare_rpm(a, b) == order
    assert compare_rpm(b, a) == -order


def test_deb_order_agrees_with_dpkg() -> None:
    if shutil.which("dpkg") is None:
        pytest.skip("dpkg is not installed: cannot cross-check with dpkg --compare-versions")
    for a, b, order in DEB_PAIRS:
        for op, want in (("lt", order < 0), ("eq", order == 0), ("gt", order > 0)):
            got = subprocess.run(["dpkg", "--compare-versions", a, op, b], check=False).returncode == 0
            assert got == want, f"dpkg says {a} {op} {b} is {got}"


def test_rpm_order_agrees_with_rpm() -> None:
    if shutil.which("rpm") is None:
        pytest.skip("rpm is not installed: cannot cross-check with rpm.vercmp")
    for a, b, order in RPM_PAIRS:
        # rpm.vercmp compares version strings; with E:V-R both sides compare as rpm's own parser does.
        lua = (
            f'%{{lua: print(rpm.ver("{a}") < rpm.ver("{b}") and -1 or (rpm.ver("{a}") == rpm.ver("{b}") and 0 or 1))}}'
        )
        out = subprocess.run(["rpm", "--eval", lua], capture_output=True, text=True, check=True).stdout.strip()
        assert int(out) == order, f"rpm orders {a} vs {b} as {out}"


def deb(name: str, version: str, sha: str = "a" * 64, arch: str = "amd64") -> PackageFile:
    return PackageFile("deb", name, version, arch, sha)


BOOKWORM = Target("deb", "bookworm")


def test_plan_adds_new_packages_and_a_higher_version() -> None:
    record = Record({BOOKWORM: (deb("gdrcopy", "2.6.0-1", "b" * 64),)})
    the_plan = model.plan({BOOKWORM: [deb("gdrcopy", "2.6.1-1"), deb("libgdrapi", "2.6.1-1")]}, record)
    assert not the_plan.refused
    assert [p.name for p in the_plan.targets[0].add] == ["gdrcopy", "libgdrapi"]
    assert the_plan.changes


def test_plan_same_version_same_content_is_unchanged() -> None:
    record = Record({BOOKWORM: (deb("gdrcopy", "2.6.1-1"),)})
    the_plan = model.plan({BOOKWORM: [deb("gdrcopy", "2.6.1-1")]}, record)
    assert not the_plan.changes and not the_plan.refused
    assert "unchanged" in the_plan.lines()[0]


def test_plan_refuses_a_lower_version_naming_the_held_one() -> None:
    record = Record({BOOKWORM: (deb("gdrcopy", "2.6.1-1"),)})
    the_plan = model.plan({BOOKWORM: [deb("gdrcopy", "2.6.0-1"), deb("libgdrapi", "2.6.0-1")]}, record)
    assert [r.package.name for r in the_plan.refused] == ["gdrcopy"]
    assert "lower than 2.6.1-1" in the_plan.refused[0].reason
    assert "REFUSED gdrcopy 2.6.0-1" in the_plan.lines()[-1]


def test_plan_refuses_the_same_version_with_other_content() -> None:
    record = Record({BOOKWORM: (deb("gdrcopy", "2.6.1-1", "b" * 64),)})
    the_plan = model.plan({BOOKWORM: [deb("gdrcopy", "2.6.1-1", "c" * 64)]}, record)
    assert len(the_plan.refused) == 1 and "other content" in the_plan.refused[0].reason


def test_plan_versions_are_per_release_and_architecture() -> None:
    trixie = Target("deb", "trixie")
    record = Record({trixie: (deb("gdrcopy", "3.0-1"),), BOOKWORM: (deb("gdrcopy", "3.0-1", arch="arm64"),)})
    the_plan = model.plan({BOOKWORM: [deb("gdrcopy", "2.6.1-1")]}, record)
    assert not the_plan.refused and the_plan.changes


def test_record_round_trips_and_rejects_other_json() -> None:
    record = Record(
        {
            BOOKWORM: (deb("gdrcopy", "2.6.1-1"),),
            Target("rpm", "el9"): (PackageFile("rpm", "gdrcopy", "2.6.1-1", "x86_64", "d" * 64),),
        }
    )
    again = Record.from_json(record.to_json())
    assert again.to_json() == record.to_json()
    assert again.newest(BOOKWORM, "gdrcopy", "amd64") is not None
    with pytest.raises(ValueError, match="not a publish record"):
        Record.from_json('{"format": 7}')


def _results(tmp_path: Path) -> Path:
    rows = []
    passed = EntryResult("debian-bookworm", facts={"kernel": "6.1.0-57-amd64", "package.version": "2.6.1-1"})
    for step in ("image", "build", "install", "dkms", "load", "sanity"):
        passed.record(step, Outcome.PASSED)
    rows.append(passed)
    nvidia = EntryResult(
        "debian-bookworm-nvidia",
        facts={
            "kernel": "6.1.0-57-amd64",
            "package.version": "2.6.1-1",
            "nvidia.driver": "nvidia-kernel-dkms 535.309.01-0+deb12u1",
        },
    )
    for step in ("image", "build", "install", "dkms", "nvidia"):
        nvidia.record(step, Outcome.PASSED)
    nvidia.record("load", Outcome.SKIPPED, "needs an NVIDIA GPU")
    nvidia.record("sanity", Outcome.SKIPPED, "needs an NVIDIA GPU")
    rows.append(nvidia)
    broken = EntryResult("debian-trixie", facts={"kernel": "6.12.118+deb13-amd64", "package.version": "2.6.1-1"})
    broken.record("image", Outcome.PASSED)
    broken.record("build", Outcome.FAILED, "compiler error")
    broken.skip_rest("build failed")
    rows.append(broken)
    old = EntryResult("debian-bullseye", facts={"kernel": "5.10.0-46-amd64", "package.version": "2.6.0-1"})
    old.record("image", Outcome.PASSED)
    rows.append(old)
    path = tmp_path / "matrix.xml"
    write_junit(rows, path)
    return path


def test_manifest_reads_what_the_matrix_writes(tmp_path: Path) -> None:
    tested, notes = manifest.read_junit(_results(tmp_path), "2.6.1-1")
    by_entry = {t.entry: t for t in tested}
    assert set(by_entry) == {"debian-bookworm", "debian-bookworm-nvidia", "debian-trixie"}
    assert by_entry["debian-bookworm"].result == "passed"
    assert by_entry["debian-bookworm"].kernel == "6.1.0-57-amd64"
    assert by_entry["debian-bookworm"].nvidia == "none (softgpu stand-in)"
    assert by_entry["debian-bookworm-nvidia"].nvidia == "nvidia-kernel-dkms 535.309.01-0+deb12u1 (branch 535)"
    assert (
        by_entry["debian-bookworm-nvidia"].result.startswith("passed (")
        and "skipped: load, sanity" in by_entry["debian-bookworm-nvidia"].result
    )
    assert by_entry["debian-trixie"].result == "failed at build"
    assert notes == ["debian-bullseye: results are for package version 2.6.0-1, not 2.6.1-1: left out"]


def test_manifest_rejects_a_file_without_matrix_cases(tmp_path: Path) -> None:
    path = tmp_path / "other.xml"
    path.write_text('<testsuite name="x"><testcase classname="foo" name="bar"/></testsuite>')
    with pytest.raises(ValueError, match="no matrix testcases"):
        manifest.read_junit(path, "2.6.1-1")


def test_manifest_says_untested_without_results_and_keeps_results_on_republish(tmp_path: Path) -> None:
    data = manifest.update(None, "gdrcopy", "2.6.0-1", {"apt": ["bookworm"]}, None)
    assert data["versions"][0]["tested"] == manifest.UNTESTED
    tested, _ = manifest.read_junit(_results(tmp_path), "2.6.1-1")
    data = manifest.update(data, "gdrcopy", "2.6.1-1", {"apt": ["bookworm"]}, tested)
    data = manifest.update(data, "gdrcopy", "2.6.1-1", {"apt": ["trixie"]}, None)
    newest = data["versions"][-1]
    assert newest["published"] == {"apt": ["bookworm", "trixie"]}
    assert len(newest["tested"]) == 3
    rows = manifest.table_rows(json.loads(manifest.dumps(data)))
    assert rows[0] == ("2.6.0-1", "-", "-", "-", "untested")
    assert ("2.6.1-1", "debian-trixie", "6.12.118+deb13-amd64", "none (softgpu stand-in)", "failed at build") in rows
    page = manifest.render_index(data, [("apt/gdrcopy-bookworm.sources", "copy it")])
    assert "<td>failed at build</td>" in page and "apt/gdrcopy-bookworm.sources" in page


def test_sources_file_carries_the_key_inline() -> None:
    key = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmDMEabc\n-----END PGP PUBLIC KEY BLOCK-----\n"
    text = repo.sources_file("http://127.0.0.1:8000/", "bookworm", key)
    assert text.splitlines() == [
        "Types: deb",
        "URIs: http://127.0.0.1:8000/apt/bookworm",
        "Suites: bookworm",
        "Components: main",
        "Signed-By:",
        " -----BEGIN PGP PUBLIC KEY BLOCK-----",
        " .",
        " mDMEabc",
        " -----END PGP PUBLIC KEY BLOCK-----",
    ]
    assert "trusted" not in text


def test_sources_file_for_an_apt_without_inline_keys_names_the_key_file() -> None:
    text = repo.sources_file("http://127.0.0.1:8000", "bullseye", "-----BEGIN PGP PUBLIC KEY BLOCK-----\n")
    assert f"Signed-By: {repo.KEYRING_PATH}" in text.splitlines()
    assert text.startswith(f"# bullseye's apt reads no key inline: first fetch http://127.0.0.1:8000/{repo.KEY_FILE}")
    assert repo.inline_key("trixie") and repo.inline_key("jammy") and repo.inline_key("sid")


def test_repo_file_checks_packages_and_metadata() -> None:
    text = repo.repo_file("https://example.org/gdrcopy", "el9")
    assert "baseurl=https://example.org/gdrcopy/rpm/el9" in text
    assert "gpgcheck=1" in text and "repo_gpgcheck=1" in text
    assert f"gpgkey=https://example.org/gdrcopy/{repo.KEY_FILE}" in text


def test_collect_needs_a_release_for_top_level_rpms(tmp_path: Path) -> None:
    (tmp_path / "gdrcopy-2.6.1-1.x86_64.rpm").write_bytes(b"")
    with pytest.raises(Exception, match="--rpm-release"):
        repo.collect(tmp_path, "bookworm", "")


def test_collect_rejects_an_unknown_debian_release(tmp_path: Path) -> None:
    (tmp_path / "buster-ish").mkdir()
    (tmp_path / "buster-ish" / "x_1_all.deb").write_bytes(b"")
    with pytest.raises(Exception, match="unknown Debian or Ubuntu release 'buster-ish'"):
        repo.collect(tmp_path, "", "")


def test_collect_leaves_the_debug_packages_out(tmp_path: Path) -> None:
    """dist/debug/ holds the build's -dbgsym and -debuginfo packages: not a release, not published."""
    (tmp_path / "debug").mkdir()
    (tmp_path / "debug" / "libgdrapi-dbgsym_2.6.1-1_amd64.deb").write_bytes(b"")
    with pytest.raises(Exception, match="holds no .deb or .rpm files"):
        repo.collect(tmp_path, "bookworm", "el9")


def test_the_matrix_names_the_version_of_the_packages_it_built(tmp_path: Path) -> None:
    """From the packages' headers (build.package_fields), as publish reads them: the manifest matches by it."""
    from gdrkit.matrix import model as matrix_model, runner
    from gdrkit.packaging import build
    from pkgkit.empty import empty_package

    deb = empty_package(tmp_path / "gdrdrv-modules-6.1.0-57-amd64_2.6.1-1_amd64.deb")
    rpm = empty_package(tmp_path / "gdrcopy-kmod-6.12.0-55.el10.x86_64-2.6.1-1.el9.noarch.rpm")
    assert build.package_fields(deb) == build.PackageFields("gdrdrv-modules-6.1.0-57-amd64", "2.6.1-1", "amd64")
    assert build.package_fields(rpm) == build.PackageFields(
        "gdrcopy-kmod-6.12.0-55.el10.x86_64", "2.6.1-1.el9", "noarch"
    )
    # A file name that says otherwise is not read.
    renamed = deb.rename(tmp_path / "notapackage_9_all.deb")
    assert build.package_fields(renamed).version == repo.read_package(renamed).version == "2.6.1-1"
    entry = next(e for e in matrix_model.load() if e.name == "debian-trixie")
    plan = runner.plan_entry(entry, offline=True)
    entry_run = runner.EntryRun(plan, object(), runner.Workspace(tmp_path), refresh=False)  # type: ignore[arg-type]
    entry_run.note_version([renamed])
    assert entry_run.result.facts["package.version"] == "2.6.1-1"
    entry_run.note_version([renamed, rpm])  # two versions: none recorded over the first
    assert entry_run.result.facts["package.version"] == "2.6.1-1"


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("dpkg-deb") is None:
        pytest.skip("needs dpkg-deb to make a package (apt-get install dpkg)")
    from invoke.context import Context

    from gdrkit.tasks.publish import publish

    root = tmp_path / "root"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        "Package: gdrcopy\nVersion: 2.6.1-1\nArchitecture: all\nMaintainer: t <t@invalid>\nDescription: t\n"
    )
    dist = tmp_path / "dist"
    dist.mkdir()
    subprocess.run(["dpkg-deb", "-b", root, dist / "gdrcopy_2.6.1-1_all.deb"], check=True, capture_output=True)
    out = tmp_path / "repo"
    # A key that exists: a dry run refuses one it could not sign with (tests/python/test_bad_inputs.py).
    signer = repo.throwaway_signer(tmp_path / "gnupg")
    publish.body(
        Context(),
        key=signer.key,
        gnupg_home=str(signer.home),
        dist=str(dist),
        output=str(out),
        suite="bookworm",
        dry_run=True,
    )
    printed = capsys.readouterr().out
    assert "[dry-run] apt bookworm: add gdrcopy 2.6.1-1 (all)" in printed
    assert "reprepro includedeb" in printed
    assert not out.exists()


def test_publish_without_a_key_says_how_to_name_one() -> None:
    from invoke.context import Context

    from gdrkit.tasks.publish import publish

    with pytest.raises(Exception, match="--key"):
        publish.body(Context())


def test_dry_run_previews_without_a_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("dpkg-deb") is None:
        pytest.skip("needs dpkg-deb to make a package (apt-get install dpkg)")
    from invoke.context import Context

    from gdrkit.tasks.publish import publish

    root = tmp_path / "root"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        "Package: gdrcopy\nVersion: 2.6.1-1\nArchitecture: all\nMaintainer: t <t@invalid>\nDescription: t\n"
    )
    dist = tmp_path / "dist"
    dist.mkdir()
    subprocess.run(["dpkg-deb", "-b", root, dist / "gdrcopy_2.6.1-1_all.deb"], check=True, capture_output=True)
    out = tmp_path / "repo"
    publish.body(Context(), dist=str(dist), output=str(out), suite="bookworm", dry_run=True)
    printed = capsys.readouterr().out
    assert "[dry-run] apt bookworm: add gdrcopy 2.6.1-1 (all)" in printed
    assert "signed by the --key a real run needs" in printed
    assert printed.rstrip().endswith("no --key given: a real run needs one (gpg --list-secret-keys lists them)")
    assert not out.exists()
