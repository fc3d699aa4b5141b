"""The reference GDRCopy 2.6-1's .deb packages, rebuilt to its layout, for upgrade tests.

Hosts run NVIDIA's own packages before ours, so an upgrade must start from
them: the same four names (gdrdrv-dkms, libgdrapi, gdrcopy-tests, gdrcopy),
version 2.6-1, gdrdrv 2.6 under /usr/src/gdrdrv-2.6 with the reference's
dkms.conf, its postinst (DKMS's common.postinst) and prerm (dkms remove), and
the SysV script /etc/init.d/gdrdrv installed by dh_installinit --name gdrdrv
in debhelper compat 9: rc links on install; debhelper's snippets start it
on install, restart it from the postinst on upgrade, stop it on removal.

`build_kmod_rpm()` makes the reference's gdrcopy-kmod 2.6-1dkms RPM, reduced
to what an upgrade meets: its %preun stops gdrcopy.service (rmmod gdrdrv,
the node deleted) after our %post.

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
DEBIAN_SCRIPTS = {
    "gdrdrv.init.sh": "debian/gdrdrv-dkms.gdrdrv.init",
    "gdrdrv-dkms.postinst.sh": "debian/gdrdrv-dkms.postinst",
    "gdrdrv-dkms.prerm.sh": "debian/gdrdrv-dkms.prerm",
}


# The reference's gdrcopy-kmod RPM, reduced to its %preun (facts section 6.4).
KMOD_SPEC = FIXTURE_DIR / "gdrcopy-kmod.spec"


def build_kmod_rpm(output: Path) -> Path:
    """The reference-layout gdrcopy-kmod 2.6-1dkms .rpm (noarch) in `output`."""
    build.ensure_build_deps((), kinds=("rpm",), lint=False)
    with tempfile.TemporaryDirectory(prefix="gdrkit-reference-rpm-") as top:
        result = run(["rpmbuild", "-bb", "--define", f"_topdir {top}", "--define", "_build_id_links none", KMOD_SPEC],
                     capture=True, check=False)  # fmt: skip
        if result.returncode != 0:
            raise die("building the reference-layout gdrcopy-kmod failed:\n" + (result.stdout + result.stderr)[-4000:],
                      f"see {KMOD_SPEC}")  # fmt: skip
        [rpm] = Path(top).glob("RPMS/noarch/gdrcopy-kmod-*.rpm")
        output.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy2(rpm, output / rpm.name))


def stage(source: Source, tree: Path) -> Path:
    """The source tree of the set: tests/packaging/reference/ and the commit's gdrdrv sources."""
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
    header = src / build.VERSION_HEADER
    header.write_text(build.stamp_version_text(header.read_text(), MODULE_VERSION))
    shutil.rmtree(commit)
    return tree


def build_debs(source: Source, output: Path) -> list[Path]:
    """Build the reference-layout set from `source` (its gdrdrv sources) into `output`."""
    build.ensure_build_deps((), kinds=("deb",), lint=False)
    with tempfile.TemporaryDirectory(prefix="gdrkit-reference-") as work:
        tree = stage(source, Path(work) / f"gdrcopy-{VERSION}")
        log(f"reference-layout set {PACKAGE_VERSION}: dpkg-buildpackage")
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
