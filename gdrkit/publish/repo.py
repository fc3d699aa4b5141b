"""Carry a publish plan out: signed apt and RPM repositories under one directory.

Layout of the output directory (serve it as it is, over HTTP):

  gdrcopy-archive-keyring.asc     the public key (ASCII armour)
  apt/<codename>/                 reprepro's repository of that release: dists/<codename>/, pool/
  apt/gdrcopy-<codename>.sources  deb822 source, the key inline in Signed-By
  rpm/<release>/                  signed RPMs and repodata/ (repomd.xml.asc)
  rpm/gdrcopy-<release>.repo      RPM repository file (gpgcheck, repo_gpgcheck)
  manifest.json, index.html       the compatibility manifest and its table
  published.json                  what the repositories hold (gdrkit.publish.model)

Nothing is rewritten when nothing changed: re-publishing a version leaves
every file as it was.  Each release has a pool of its own: the packages of
one version are built per release (their paths follow the release's layout,
gdrkit/distro), so bookworm's and trixie's gdrdrv-dkms_2.6.1-1_all.deb are
different files under one name, which one pool cannot hold.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gdrkit.distro.families import debian_release
from gdrkit.packaging import build
from gdrkit.publish import manifest, model
from gdrkit.publish.model import PackageFile, Plan, Record, Target
from gdrkit.system import bad_input, die, ensure_debian_packages, file_sha256, log, run

PACKAGE = "gdrcopy"
KEY_FILE = "gdrcopy-archive-keyring.asc"
COMPONENT = "main"
# Debian packages that hold the tools each kind of repository needs.
TOOLS = {"deb": ("reprepro", "gnupg"), "rpm": ("createrepo-c", "rpm", "gnupg")}


def read_package(path: Path) -> PackageFile:
    """A package file's name, version and architecture, as its package manager reads them."""
    fields = build.package_fields(path)
    kind = "deb" if path.suffix == ".deb" else "rpm"
    return PackageFile(kind, fields.name, fields.version, fields.arch, file_sha256(path), path)


def collect(dist: Path, suite: str, rpm_release: str) -> dict[Target, list[PackageFile]]:
    """The package files of `dist`: top-level ones for `suite` / `rpm_release`, dist/<release>/ for that release."""
    groups: dict[Target, list[Path]] = {}
    if not dist.is_dir():
        raise die(f"no directory {dist}", "build the packages first: ./toolkit build-packages (or build-deb)")
    for kind in model.KINDS:
        top = sorted(dist.glob(f"*.{kind}"))
        if top:
            release = suite if kind == "deb" else rpm_release
            if not release:
                flag = "--suite" if kind == "deb" else "--rpm-release"
                raise die(
                    f"{dist} holds .{kind} files but no release was named for them",
                    f"name it: {flag} <release>, or put them in {dist}/<release>/",
                )
            groups.setdefault(Target(kind, release), []).extend(top)
        # debug/: the build's -dbgsym and -debuginfo packages, kept beside, not published.
        for sub in sorted(p for p in dist.iterdir() if p.is_dir() and p.name != build.DEBUG_SUBDIR):
            files = sorted(sub.glob(f"*.{kind}"))
            if files:
                groups.setdefault(Target(kind, sub.name), []).extend(files)
    if not groups:
        raise die(f"{dist} holds no .deb or .rpm files", "build them first: ./toolkit build-packages")
    for target in groups:
        if target.kind == "deb":
            debian_release(target.release)  # dies naming the known releases
    return {target: [read_package(p) for p in paths] for target, paths in groups.items()}


@dataclass(frozen=True)
class Signer:
    """The user's GnuPG key: its id (anything gpg accepts) and the GnuPG home that holds it."""

    key: str
    home: Path | None = None

    @property
    def env(self) -> dict[str, str]:
        return {"GNUPGHOME": str(self.home)} if self.home else {}

    def gpg(self, *args: str | os.PathLike[str], capture: bool = True) -> str:
        return run(["gpg", "--batch", "--yes", *args], env=self.env, capture=capture).stdout

    def fingerprint(self) -> str:
        """The signing key's fingerprint; dies when there is no secret key of that id."""
        # Reading the key needs gpg, a dry run's check too; a new machine may have only gpgv.
        ensure_debian_packages(["gpg"])
        out = run(
            ["gpg", "--batch", "--with-colons", "--list-secret-keys", self.key], env=self.env, capture=True, check=False
        )
        fingerprints = [line.split(":")[9] for line in out.stdout.splitlines() if line.startswith("fpr:")]
        if out.returncode != 0 or not fingerprints:
            where = self.home or os.environ.get("GNUPGHOME") or "~/.gnupg"
            raise bad_input(
                f"--key {self.key!r}: no secret GnuPG key by that name in {where}",
                "name a key you hold with --key (gpg --list-secret-keys lists them), and its home with --gnupg-home",
            )
        return fingerprints[0]

    def public_key(self) -> str:
        return self.gpg("--armor", "--export", self.fingerprint())


def throwaway_signer(home: Path, email: str = "publish-test@invalid") -> Signer:
    """A new passphrase-less signing key in its own GnuPG home `home`: for tests and local runs only."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    ensure_debian_packages(["gpg"])
    argv = [
        "gpg",
        "--batch",
        "--passphrase",
        "",
        "--quick-gen-key",
        f"gdrkit test <{email}>",
        "ed25519",
        "sign",
        "never",
    ]
    run(argv, env={"GNUPGHOME": str(home)}, capture=True)
    return Signer(email, home)


def write_if_changed(path: Path, text: str) -> bool:
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return True


def distributions(releases: Sequence[str], arches: Sequence[str], fingerprint: str) -> str:
    """reprepro's conf/distributions: one stanza per codename, signed by `fingerprint`."""
    stanzas = []
    for codename in sorted(releases):
        stanzas.append(
            "\n".join(
                [
                    "Origin: GDRCopy",
                    "Label: GDRCopy",
                    f"Codename: {codename}",
                    f"Architectures: {' '.join(sorted(arches))}",
                    f"Components: {COMPONENT}",
                    f"Description: GDRCopy packages for {codename}",
                    f"SignWith: {fingerprint}",
                ]
            )
        )
    return "\n\n".join(stanzas) + "\n"


# apt reads a key inline in Signed-By from 2.3.10 on: Debian 12, Ubuntu 22.04.
INLINE_KEY_SINCE = {"debian": (12,), "ubuntu": (22, 4)}
KEYRING_PATH = f"/etc/apt/keyrings/{KEY_FILE}"


def inline_key(codename: str) -> bool:
    """Whether `codename`'s apt takes the key inline in the .sources file (sid and testing: yes)."""
    release = debian_release(codename)
    if not release.version:
        return True
    return tuple(int(part) for part in release.version.split(".")) >= INLINE_KEY_SINCE[release.os_id]


def sources_file(url: str, codename: str, public_key: str) -> str:
    """A deb822 .sources file: the key inline, so that it is all a host needs; older apt gets a key path."""
    base = url.rstrip("/")
    head = []
    if inline_key(codename):
        signed_by = ["Signed-By:", *(" " + (line if line.strip() else ".") for line in public_key.strip().splitlines())]
    else:
        head = [f"# {codename}'s apt reads no key inline: first fetch {base}/{KEY_FILE} to {KEYRING_PATH}"]
        signed_by = [f"Signed-By: {KEYRING_PATH}"]
    return (
        "\n".join(
            [
                *head,
                "Types: deb",
                f"URIs: {base}/apt/{codename}",
                f"Suites: {codename}",
                f"Components: {COMPONENT}",
                *signed_by,
            ]
        )
        + "\n"
    )


def repo_file(url: str, release: str) -> str:
    """A .repo file for RPM hosts: packages and repository metadata both signature-checked."""
    base = url.rstrip("/")
    return (
        "\n".join(
            [
                f"[{PACKAGE}]",
                f"name=GDRCopy packages for {release}",
                f"baseurl={base}/rpm/{release}",
                "type=rpm-md",
                "enabled=1",
                "gpgcheck=1",
                "repo_gpgcheck=1",
                f"gpgkey={base}/{KEY_FILE}",
            ]
        )
        + "\n"
    )


def _arches(packages: Sequence[PackageFile]) -> list[str]:
    return sorted({p.arch for p in packages if p.arch != "all"} or {"amd64"})


def apt_base(out: Path, codename: str) -> Path:
    """The reprepro repository of one release (its own pool: see the module's docstring)."""
    return out / "apt" / codename


def publish_apt(out: Path, record: Record, adds: Mapping[Target, Sequence[PackageFile]], signer: Signer) -> None:
    fingerprint = signer.fingerprint()
    for target, held in record.held.items():
        if target.kind == "deb":
            conf = distributions([target.release], _arches(held), fingerprint)
            write_if_changed(apt_base(out, target.release) / "conf" / "distributions", conf)
    for target, packages in adds.items():
        log(f"{target}: reprepro includedeb {len(packages)} packages")
        files = [p.path for p in packages if p.path is not None]
        run(
            ["reprepro", "--basedir", apt_base(out, target.release), "--silent", "includedeb", target.release, *files],
            env=signer.env,
            capture=True,
        )


def publish_rpm(out: Path, target: Target, packages: Sequence[PackageFile], signer: Signer) -> None:
    directory = out / "rpm" / target.release
    directory.mkdir(parents=True, exist_ok=True)
    fingerprint = signer.fingerprint()
    for package in packages:
        assert package.path is not None
        copy = directory / package.path.name
        shutil.copy2(package.path, copy)
        log(f"{target}: rpmsign {copy.name}")
        # Debian's rpm looks for gpg2 by default: name the gpg this host has.
        run(
            [
                "rpmsign",
                "--addsign",
                "--define",
                f"_gpg_name {fingerprint}",
                "--define",
                f"__gpg {shutil.which('gpg') or 'gpg'}",
                *(["--define", f"_gpg_path {signer.home}"] if signer.home else []),
                copy,
            ],
            env=signer.env,
            capture=True,
        )
    run(["createrepo_c", "--quiet", "--update", directory], capture=True)
    repomd = directory / "repodata" / "repomd.xml"
    signer.gpg("--local-user", fingerprint, "--armor", "--detach-sign", "--output", f"{repomd}.asc", repomd)


def tools_for(plan: Plan) -> list[str]:
    wanted: dict[str, None] = {}
    for tp in plan.targets:
        if tp.add:
            wanted.update(dict.fromkeys(TOOLS[tp.target.kind]))
    return list(wanted)


def publish(
    out: Path,
    inputs: Mapping[Target, Sequence[PackageFile]],
    signer: Signer | None,
    url: str,
    results: Path | None = None,
    *,
    dry_run: bool = False,
) -> Plan:
    """Plan, then (unless `dry_run`) sign and write the repositories, key, source files and manifest.

    `signer` may be None on a dry run only: the preview then says that a real run needs a key."""
    record_path = out / model.RECORD
    try:
        record = Record.from_json(record_path.read_text(), str(record_path)) if record_path.exists() else Record()
    except ValueError as error:
        raise die(str(error), f"publish into an empty --output, or restore {record_path}")
    the_plan = model.plan(inputs, record)
    versions = sorted({p.version for packages in inputs.values() for p in packages})
    tested: list[manifest.Tested] | None = None
    notes: list[str] = []
    if results is not None:
        if len(versions) != 1:
            raise die(
                f"the packages given have several versions ({', '.join(versions)}); results name one",
                "publish one version at a time",
            )
        try:
            tested, notes = manifest.read_junit(results, versions[0])
        except ValueError as error:
            raise die(str(error), "pass the file `./toolkit matrix --junit FILE` wrote")
    for line in the_plan.lines() + notes:
        print(("[dry-run] " if dry_run else "") + line, flush=True)
    if the_plan.refused:
        raise die(
            f"{len(the_plan.refused)} package(s) refused (see above); nothing was published",
            the_plan.refused[0].reason.split(": ", 1)[-1],
        )
    ensure_debian_packages(tools_for(the_plan) or ["gnupg"], dry_run=dry_run)
    if dry_run:
        for tp in the_plan.targets:
            if tp.add:
                how = "reprepro includedeb" if tp.target.kind == "deb" else "rpmsign, createrepo_c, sign repomd.xml"
                by = signer.key if signer else "the --key a real run needs"
                print(f"[dry-run] {tp.target}: {how} into {out}; signed by {by}", flush=True)
        print(f"[dry-run] write {KEY_FILE}, the .sources/.repo files, {manifest.MANIFEST}, index.html", flush=True)
        if signer is None:
            print("[dry-run] no --key given: a real run needs one (gpg --list-secret-keys lists them)", flush=True)
        return the_plan
    if signer is None:
        raise die("no signing key: publishing signs everything it writes", "name your GnuPG key with --key")
    public_key = signer.public_key()
    new_record = record
    for tp in the_plan.targets:
        new_record = new_record.with_added(tp.target, tp.add) if tp.add else new_record.with_added(tp.target, ())
    deb_adds = {tp.target: tp.add for tp in the_plan.targets if tp.target.kind == "deb" and tp.add}
    out.mkdir(parents=True, exist_ok=True)
    if deb_adds:
        publish_apt(out, new_record, deb_adds, signer)
    for tp in the_plan.targets:
        if tp.target.kind == "rpm" and tp.add:
            publish_rpm(out, tp.target, tp.add, signer)
    write_if_changed(record_path, new_record.to_json())
    write_if_changed(out / KEY_FILE, public_key)
    files = [(KEY_FILE, "the signing key"), (manifest.MANIFEST, "compatibility manifest")]
    for target in sorted(new_record.held, key=lambda t: (t.kind, t.release)):
        if target.kind == "deb":
            name = f"apt/{PACKAGE}-{target.release}.sources"
            write_if_changed(out / name, sources_file(url, target.release, public_key))
            files.append((name, f"copy to /etc/apt/sources.list.d/ ({target.release})"))
        else:
            name = f"rpm/{PACKAGE}-{target.release}.repo"
            write_if_changed(out / name, repo_file(url, target.release))
            files.append((name, f"copy to /etc/yum.repos.d/ or /etc/zypp/repos.d/ ({target.release})"))
    manifest_path = out / manifest.MANIFEST
    try:
        previous = manifest.load(manifest_path)
    except ValueError as error:
        raise die(str(error), f"restore {manifest_path} or remove it to start a new one")
    published: dict[str, list[str]] = {}
    for target in inputs:
        published.setdefault("apt" if target.kind == "deb" else "rpm", []).append(target.release)
    data = previous
    for version in versions:
        data = manifest.update(data, PACKAGE, version, published, tested)
    assert data is not None
    write_if_changed(manifest_path, manifest.dumps(data))
    write_if_changed(out / "index.html", manifest.render_index(data, files))
    if not the_plan.changes:
        log(f"{out}: already holds every package given; unchanged")
    return the_plan
