"""NVIDIA's GDRCopy 2.6-1 .deb packages, rebuilt to their layout, for upgrade tests.

Hosts run NVIDIA's own packages before ours, so an upgrade must start from
them, and the stand-in must tell the truth about them (NVIDIA_DEB_FIELDS
below, held to the facts by test_pkg_reference.py): the same four names
(gdrdrv-dkms, libgdrapi, gdrcopy-tests, gdrcopy), version 2.6-1, each with
NVIDIA's Architecture and Multi-Arch (gdrdrv-dkms is `Architecture: any`,
`Multi-Arch: same`, so dpkg knows it as gdrdrv-dkms:amd64), gdrdrv 2.6
under /usr/src/gdrdrv-2.6 with the reference's dkms.conf, its postinst
(DKMS's common.postinst) and prerm (dkms remove), and the SysV script
/etc/init.d/gdrdrv (its only conffile) installed by dh_installinit --name
gdrdrv in debhelper compat 9: rc links and a start on install (a restart
on upgrade), a stop on removal, the links removed on purge (update-rc.d remove).

`build_kmod_rpm()` makes NVIDIA's gdrcopy-kmod 2.6-1dkms RPM: its service
files and scriptlets per EL release (DKMS build and the service enabled
and started in %post; its %preun, which stops the service, rmmod gdrdrv and
the node deleted, runs after our %post on upgrade).

Every file of the set is written from the interface facts
(/work/shared/reference/gdrcopy-2.6-facts.md section 6) and lives in
tests/packaging/reference/; the module sources are ours (gdrdrv/ of the
commit, versioned 2.6.0), which the reference-layout dkms.conf builds.  The
library and programs are stand-ins: only their paths matter to an upgrade.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from gdrkit.packaging import build, model
from gdrkit.packaging.build import Source
from gdrkit.system import die, log, run
from gdrkit.version import REPO_ROOT

FIXTURE_DIR = REPO_ROOT / "tests" / "packaging" / "reference"
VERSION = "2.6"  # the reference's upstream version: packages 2.6-1, DKMS tree 2.6
PACKAGE_VERSION = "2.6-1"
# What the module of the set reports (modinfo): our sources, stamped.
MODULE_VERSION = "2.6.0"
PACKAGES = ("gdrdrv-dkms", "libgdrapi", "gdrcopy-tests", "gdrcopy")
# Shell files of the fixture and where debhelper wants them.
# What NVIDIA's 2.6-1 .debs say of themselves (dpkg-deb --field), from the
# interface facts (section 6.5) and NVIDIA's public packaging
# (packages/*/control at v2.6): the stand-in's debian/control must give the
# same.  A value of None: the field is absent.  "Depends" lists what each
# must name (with ${binary:Version} for the exact version).
NVIDIA_DEB_FIELDS: dict[str, dict[str, str | None]] = {
    "gdrdrv-dkms": {"Architecture": "any", "Multi-Arch": "same", "Depends": "dkms (>= 1.95)"},
    "libgdrapi": {"Architecture": "any", "Multi-Arch": "same", "Replaces": "gdrcopy (<= 2.2-1)",
                  "Conflicts": "gdrcopy (<= 2.2-1)"},
    "gdrcopy-tests": {"Architecture": "any", "Multi-Arch": "same", "Depends": "libgdrapi (>= ${binary:Version})",
                      "Replaces": "gdrcopy (<= 2.2-1)", "Conflicts": "gdrcopy (<= 2.2-1)"},
    "gdrcopy": {"Architecture": "any", "Multi-Arch": "same",
                "Depends": "gdrdrv-dkms (= ${binary:Version}), libgdrapi (= ${binary:Version}), "
                           "gdrcopy-tests (= ${binary:Version})"},
}  # fmt: skip
# Its gdrdrv-dkms's one conffile, and what the maintainer scripts that
# debhelper 9 writes for it do with it.
INIT_SCRIPT = "/etc/init.d/gdrdrv"
DEBIAN_SCRIPTS = {
    "gdrdrv.init.sh": "debian/gdrdrv-dkms.gdrdrv.init",
    "gdrdrv-dkms.postinst.sh": "debian/gdrdrv-dkms.postinst",
    "gdrdrv-dkms.prerm.sh": "debian/gdrdrv-dkms.prerm",
}


def control_paragraphs(text: str) -> dict[str, dict[str, str]]:
    """The binary paragraphs of a debian/control text by package, continuation lines joined (pure)."""
    found: dict[str, dict[str, str]] = {}
    for block in text.strip().split("\n\n"):
        fields: dict[str, str] = {}
        key = ""
        for line in block.splitlines():
            if line.startswith("#"):
                continue
            if line[:1] in (" ", "\t") and key:
                fields[key] += " " + line.strip()
            else:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if "Package" in fields:
            found[fields["Package"]] = fields
    return found


def depends_items(value: str) -> list[str]:
    """The comma-separated relations of a Depends-like field, substitution variables but ${binary:Version} left out (pure)."""
    items = [item.strip() for item in value.split(",")]
    return [item for item in items if item and not (item.startswith("${") and item.endswith("}"))]


def field_problems(fields_by_package: dict[str, dict[str, str]], built: str = "") -> list[str]:
    """How package fields differ from NVIDIA's (pure): a control file's, or with
    `built` = the architecture they were built for, the built .debs' (Architecture
    that one instead of `any`, ${binary:Version} filled in)."""
    problems = []
    if sorted(fields_by_package) != sorted(NVIDIA_DEB_FIELDS):
        problems.append(f"packages {sorted(fields_by_package)}, NVIDIA's are {sorted(NVIDIA_DEB_FIELDS)}")
    for name, expected in NVIDIA_DEB_FIELDS.items():
        fields = fields_by_package.get(name, {})
        for key, want in expected.items():
            have = fields.get(key)
            if built and want is not None:
                want = (
                    built
                    if (key, want) == ("Architecture", "any")
                    else want.replace("${binary:Version}", PACKAGE_VERSION)
                )
            if key in ("Depends", "Replaces", "Conflicts") and want is not None:
                missing = [item for item in depends_items(want) if item not in depends_items(have or "")]
                if missing:
                    problems.append(f"{name}: {key} lacks {', '.join(missing)} (has: {have})")
            elif have != want:
                problems.append(f"{name}: {key} is {have!r}, NVIDIA's is {want!r}")
    return problems


# The reference's gdrcopy-kmod RPM, reduced to its %preun (facts section 6.4).
KMOD_SPEC = FIXTURE_DIR / "gdrcopy-kmod.spec"


def build_kmod_rpm(output: Path, el: int = 9) -> Path:
    """NVIDIA's gdrcopy-kmod 2.6-1dkms .rpm (noarch) for EL release `el` in `output`:
    a systemd service from EL 9 on, a SysV script (chkconfig) before."""
    build.ensure_build_deps((), kinds=("rpm",), lint=False)
    with tempfile.TemporaryDirectory(prefix="gdrkit-reference-rpm-") as top:
        defines = ["--define", f"_topdir {top}", "--define", "_build_id_links none", "--define", f"rhel {el}"]
        result = run(["rpmbuild", "-bb", *defines, KMOD_SPEC], capture=True, check=False)
        if result.returncode != 0:
            raise die("building the reference-layout gdrcopy-kmod failed:\n" + (result.stdout + result.stderr)[-4000:],
                      f"see {KMOD_SPEC}")  # fmt: skip
        [rpm] = Path(top).glob("RPMS/noarch/gdrcopy-kmod-*.rpm")
        output.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy2(rpm, output / rpm.name))


# Where the set's files name its upstream version (2.6): a hypothetical
# later NVIDIA release (2.6.1, 2.7) is the same set with these changed.
VERSIONED = {
    "debian/changelog": ("gdrcopy (2.6-1)", "gdrcopy ({v}-1)"),
    "debian/rules": ("DKMS_SRC = usr/src/gdrdrv-2.6\n", "DKMS_SRC = usr/src/gdrdrv-{v}\n"),
    "debian/gdrdrv-dkms.prerm": ("VERSION=2.6\n", "VERSION={v}\n"),
}
DKMS_CONF_VERSIONED = (
    ('PACKAGE_VERSION="2.6-1"', 'PACKAGE_VERSION="{v}-1"'),
    ("/gdrdrv/2.6/build", "/gdrdrv/{v}/build"),
)


def module_version(upstream: str) -> str:
    """What the set's gdrdrv reports (modinfo) for NVIDIA release `upstream` (pure): 2.6 -> 2.6.0."""
    return upstream if upstream.count(".") == 2 else f"{upstream}.0"


def stage(source: Source, tree: Path, upstream: str = VERSION) -> Path:
    """The source tree of the set: tests/packaging/reference/ and the commit's gdrdrv sources.

    `upstream`: the NVIDIA release to stand in for (2.6, or a hypothetical later one)."""
    from pkgkit.faults import extract_source

    if tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(FIXTURE_DIR, tree, ignore=shutil.ignore_patterns(*DEBIAN_SCRIPTS, KMOD_SPEC.name))
    for name, dest in DEBIAN_SCRIPTS.items():
        shutil.copy2(FIXTURE_DIR / name, tree / dest)
        (tree / dest).chmod(0o755)
    commit = extract_source(source, tree.parent / "commit")
    module = model.load().kernel_module
    driver = commit / module.name
    if not driver.is_dir():
        raise die(f"no {module.name}/ directory at commit {source.commit[:12]}")
    src = tree / "gdrdrv-src"
    shutil.copytree(driver, src, ignore=shutil.ignore_patterns(".*"))
    for path, dest in module.extra_sources.items():
        (src / dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(commit / path, src / dest)
    build.stamp_version(src, module_version(upstream))
    if upstream != VERSION:
        for rel, (before, after) in VERSIONED.items():
            versioned = tree / rel
            text = versioned.read_text()
            if before not in text:
                raise die(f"{rel} of the stand-in no longer has {before!r}: update pkgkit.reference.VERSIONED")
            versioned.write_text(text.replace(before, after.format(v=upstream)))
        conf = tree / "dkms.conf"
        text = conf.read_text()
        for before, after in DKMS_CONF_VERSIONED:
            text = text.replace(before, after.format(v=upstream))
        conf.write_text(text)
    shutil.rmtree(commit)
    return tree


def build_debs(source: Source, output: Path, upstream: str = VERSION) -> list[Path]:
    """Build the reference-layout set from `source` (its gdrdrv sources) into `output`.

    `upstream`: NVIDIA's release, 2.6 (what is out there) or a hypothetical later
    one (2.6.1, 2.7) that must upgrade ours in place."""
    build.ensure_build_deps((), kinds=("deb",), lint=False)
    with tempfile.TemporaryDirectory(prefix="gdrkit-reference-") as work:
        tree = stage(source, Path(work) / f"gdrcopy-{upstream}", upstream)
        log(f"reference-layout set {upstream}-1: dpkg-buildpackage")
        result = run(["dpkg-buildpackage", "-b", "-us", "-uc", "--no-sign", "-d"], cwd=tree, capture=True, check=False,
                     env={"SOURCE_DATE_EPOCH": str(source.epoch), "LC_ALL": "C.UTF-8", "DEB_BUILD_OPTIONS": "nocheck"})  # fmt: skip
        if result.returncode != 0:
            raise die("building the reference-layout packages failed:\n" + (result.stdout + result.stderr)[-4000:],
                      f"its files are in {FIXTURE_DIR}")  # fmt: skip
        output.mkdir(parents=True, exist_ok=True)
        built = []
        for deb in sorted(Path(work).glob("*.deb")):
            built.append(Path(shutil.copy2(deb, output / deb.name)))
    names = sorted(build.package_name(path) for path in built)
    if names != sorted(PACKAGES):
        raise die(f"the reference-layout build made {names}, not {sorted(PACKAGES)}")
    return built
