"""`invoke publish`: signed apt and RPM repositories from dist/ (gdrkit.publish)."""

from __future__ import annotations

from pathlib import Path

from invoke.context import Context
from gdrkit.tasks.convention import task

from gdrkit.packaging.build import DIST
from gdrkit.version import REPO_ROOT


@task(
    help={
        "key": "GnuPG key id (or fingerprint, or e-mail) that signs the repositories and RPMs (required, except by"
        " --dry-run, which previews without one)",
        "gnupg_home": "GnuPG home that holds the secret key (default: $GNUPGHOME or ~/.gnupg)",
        "dist": "directory of the packages: *.deb/*.rpm at its top, or <release>/ subdirectories (default: dist/)",
        "output": "the repository directory, served as it is over HTTP (default: build/repo/)",
        "url": "URL the output directory is served at, written into the .sources/.repo files"
        " (default: file:// of the output directory)",
        "suite": "Debian/Ubuntu codename of the top-level .deb files (default: this host's release)",
        "rpm_release": "release name of the top-level .rpm files, e.g. el9 or sle15 (needed when there are some)",
        "results": "JUnit file of `./toolkit matrix --junit FILE`: the manifest says what the packages were tested"
        " with (without it: untested)",
        "dry_run": "print the plan (what is added, already there, refused), change nothing",
    }
)
def publish(
    c: Context,
    key: str = "",
    gnupg_home: str = "",
    dist: str = "",
    output: str = "",
    url: str = "",
    suite: str = "",
    rpm_release: str = "",
    results: str = "",
    dry_run: bool = False,
) -> None:
    """Publish dist/'s packages into signed apt and RPM repositories, with key, source files and manifest."""
    from gdrkit.packaging.pipeline import deb_target_release
    from gdrkit.publish import repo
    from gdrkit.system import bad_input

    if not key and not dry_run:
        raise bad_input(
            "--key: no signing key given", "name your GnuPG key: --key <id> (gpg --list-secret-keys lists them)"
        )
    # A preview needs no key; a key given is checked on a dry run too (one we cannot sign with is refused).
    signer = repo.Signer(key, Path(gnupg_home).resolve() if gnupg_home else None) if key else None
    if signer is not None:
        signer.fingerprint()
    source = Path(dist).resolve() if dist else DIST
    out = Path(output).resolve() if output else REPO_ROOT / "build" / "repo"
    if not suite and any(source.glob("*.deb")):
        suite = deb_target_release().codename
    inputs = repo.collect(source, suite, rpm_release)
    repo.publish(out, inputs, signer, url or out.as_uri(), Path(results) if results else None, dry_run=dry_run)
    if not dry_run:
        print(f"published into {out} (index: {out / 'index.html'})")


TASKS = [publish]
