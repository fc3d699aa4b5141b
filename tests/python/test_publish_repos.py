"""`./toolkit publish` for real: reprepro, rpmsign and createrepo_c with a throwaway key (slow: installs them).

Small packages made here (dpkg-deb, rpmbuild) stand in for dist/; the
signatures are checked with gpgv and rpmkeys against the published key
only.  The apt repository's install in a container is test_publish_apt.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gdrkit.publish import manifest, repo
from gdrkit.publish.repo import Signer
from gdrkit.system import ensure_debian_packages

pytestmark = pytest.mark.slow


def make_key(home: Path, email: str = "publish-test@invalid") -> Signer:
    """A throwaway passphrase-less signing key in its own GnuPG home."""
    return repo.throwaway_signer(home, email)


def make_deb(directory: Path, name: str, version: str, note: str = "") -> Path:
    root = directory / f"{name}-{version}-root"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nSection: misc\nPriority: optional\nMaintainer: t <t@invalid>\n"
        f"Description: publish test package {note}\n"
    )
    path = directory / f"{name}_{version}_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", root, path], check=True, capture_output=True)
    shutil.rmtree(root)
    return path


def make_rpm(directory: Path, name: str, version: str) -> Path:
    top = directory / "rpmbuild"
    spec = directory / f"{name}.spec"
    spec.write_text(
        f"Name: {name}\nVersion: {version}\nRelease: 1\nSummary: t\nLicense: MIT\nBuildArch: noarch\n"
        "%description\npublish test package\n%files\n"
    )
    subprocess.run(["rpmbuild", "-bb", "--define", f"_topdir {top}", spec], check=True, capture_output=True)
    built = next((top / "RPMS" / "noarch").glob(f"{name}-{version}-1.noarch.rpm"))
    path = directory / built.name
    shutil.move(built, path)
    return path


@pytest.fixture(scope="module")
def tools() -> None:
    missing = [t for t in ("dpkg-deb", "gpgv", "gpg") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {' '.join(missing)} (apt-get install dpkg gpgv gnupg)")
    if os.geteuid() != 0 and shutil.which("reprepro") is None:
        pytest.skip(
            "needs reprepro, createrepo-c and rpm, and is not root to install them: "
            "apt-get install reprepro createrepo-c rpm"
        )
    ensure_debian_packages(["reprepro", "createrepo-c", "rpm"])


def publish(out: Path, dist: Path, signer: Signer, results: Path | None = None) -> None:
    repo.publish(out, repo.collect(dist, "bookworm", "el9"), signer, "http://127.0.0.1:1", results)


def snapshot(directory: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(p.relative_to(directory)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def test_apt_repository_is_signed_idempotent_and_refuses_downgrades(tools: None, tmp_path: Path) -> None:
    signer = make_key(tmp_path / "gnupg")
    dist, out = tmp_path / "dist", tmp_path / "repo"
    dist.mkdir()
    first = make_deb(dist, "gdrcopy", "2.6.1-1")
    publish(out, dist, signer)
    keyring = tmp_path / "key.gpg"
    subprocess.run(["gpg", "--dearmor", "--output", keyring, out / repo.KEY_FILE], check=True)
    release = out / "apt" / "bookworm" / "dists" / "bookworm"
    verified = subprocess.run(["gpgv", "--keyring", keyring, release / "InRelease"], capture_output=True, text=True)
    assert verified.returncode == 0, verified.stderr
    assert "Version: 2.6.1-1" in (release / "main" / "binary-amd64" / "Packages").read_text()
    assert "Signed-By:" in (out / "apt" / "gdrcopy-bookworm.sources").read_text()
    assert manifest.load(out / manifest.MANIFEST) is not None

    before = snapshot(out)
    publish(out, dist, signer)
    assert snapshot(out) == before, "re-publishing the same version changed the repository"

    first.unlink()
    make_deb(dist, "gdrcopy", "2.6.0-1")
    with pytest.raises(Exception, match="refused") as refused:
        publish(out, dist, signer)
    assert "publish a higher version" in str(refused.value)
    assert snapshot(out) == before, "a refused publish changed the repository"

    for path in dist.iterdir():
        path.unlink()
    make_deb(dist, "gdrcopy", "2.6.1-1", note="rebuilt differently")
    with pytest.raises(Exception, match="refused"):
        publish(out, dist, signer)

    for path in dist.iterdir():
        path.unlink()
    make_deb(dist, "gdrcopy", "2.6.2-1")
    publish(out, dist, signer)
    packages = (release / "main" / "binary-amd64" / "Packages").read_text()
    assert "Version: 2.6.2-1" in packages and "Version: 2.6.1-1" not in packages
    versions = [v["version"] for v in (manifest.load(out / manifest.MANIFEST) or {})["versions"]]
    assert versions == ["2.6.1-1", "2.6.2-1"]


def test_each_release_has_its_own_pool_for_the_same_version_built_per_release(tools: None, tmp_path: Path) -> None:
    # One version built for bookworm and for trixie: same file name, other content (each release's layout).
    signer = make_key(tmp_path / "gnupg")
    dist, out = tmp_path / "dist", tmp_path / "repo"
    for suite in ("bookworm", "trixie"):
        (dist / suite).mkdir(parents=True)
        make_deb(dist / suite, "gdrdrv-dkms", "2.6.1-1", note=f"built for {suite}")
    repo.publish(out, repo.collect(dist, "", ""), signer, "http://127.0.0.1:1")
    for suite in ("bookworm", "trixie"):
        base = out / "apt" / suite
        pooled = next(base.glob("pool/main/*/*/gdrdrv-dkms_2.6.1-1_all.deb"))
        assert pooled.read_bytes() == (dist / suite / "gdrdrv-dkms_2.6.1-1_all.deb").read_bytes()
        assert "Version: 2.6.1-1" in (base / "dists" / suite / "main" / "binary-amd64" / "Packages").read_text()
        assert f"URIs: http://127.0.0.1:1/apt/{suite}\n" in (out / "apt" / f"gdrcopy-{suite}.sources").read_text()


def test_rpm_repository_and_packages_are_signed(tools: None, tmp_path: Path) -> None:
    signer = make_key(tmp_path / "gnupg")
    dist, out = tmp_path / "dist", tmp_path / "repo"
    dist.mkdir()
    make_rpm(dist, "gdrcopy", "2.6.1")
    publish(out, dist, signer)
    directory = out / "rpm" / "el9"
    rpmdb = tmp_path / "rpmdb"
    rpmdb.mkdir()
    subprocess.run(["rpmkeys", "--dbpath", rpmdb, "--import", out / repo.KEY_FILE], check=True)
    checked = subprocess.run(
        ["rpmkeys", "--dbpath", rpmdb, "--checksig", directory / "gdrcopy-2.6.1-1.noarch.rpm"],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0 and "signatures OK" in checked.stdout, checked.stdout + checked.stderr
    keyring = tmp_path / "key.gpg"
    subprocess.run(["gpg", "--dearmor", "--output", keyring, out / repo.KEY_FILE], check=True)
    repomd = directory / "repodata" / "repomd.xml"
    verified = subprocess.run(["gpgv", "--keyring", keyring, f"{repomd}.asc", repomd], capture_output=True, text=True)
    assert verified.returncode == 0, verified.stderr
    assert "gdrcopy" in "".join(p.name for p in (directory / "repodata").iterdir()) or repomd.exists()
    assert "repo_gpgcheck=1" in (out / "rpm" / "gdrcopy-el9.repo").read_text()
    before = snapshot(out)
    publish(out, dist, signer)
    assert snapshot(out) == before, "re-publishing the same RPM changed the repository"


def test_manifest_and_index_come_from_the_matrix_results(tools: None, tmp_path: Path) -> None:
    from gdrkit.matrix.report import EntryResult, Outcome, write_junit

    signer = make_key(tmp_path / "gnupg")
    dist, out = tmp_path / "dist", tmp_path / "repo"
    dist.mkdir()
    make_deb(dist, "gdrcopy", "2.6.1-1")
    publish(out, dist, signer)
    page = (out / "index.html").read_text()
    assert "<td>untested</td>" in page and "apt/gdrcopy-bookworm.sources" in page

    entry = EntryResult(
        "debian-bookworm-nvidia",
        facts={
            "kernel": "6.1.0-57-amd64",
            "package.version": "2.6.1-1",
            "nvidia.driver": "nvidia-kernel-dkms 535.309.01-0",
        },
    )
    for step in ("image", "build", "install", "dkms", "nvidia"):
        entry.record(step, Outcome.PASSED)
    results = tmp_path / "matrix.xml"
    write_junit([entry], results)
    publish(out, dist, signer, results)
    data = manifest.load(out / manifest.MANIFEST)
    assert data is not None
    assert data["versions"][0]["tested"] == [
        {
            "entry": "debian-bookworm-nvidia",
            "kernel": "6.1.0-57-amd64",
            "nvidia": "nvidia-kernel-dkms 535.309.01-0 (branch 535)",
            "result": "passed",
        }
    ]
    assert "<td>nvidia-kernel-dkms 535.309.01-0 (branch 535)</td>" in (out / "index.html").read_text()
