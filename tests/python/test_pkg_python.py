"""The gdrcopy Python package installed as users install it (slow).

.deb: libgdrapi and python3-gdrcopy, built from HEAD for each suite's
family, installed offline with apt in a container of that suite (an image
with python3, python3-numpy and python3-venv, built locally with mmdebstrap
as every container test's is), `import gdrcopy` reporting the package and
library versions; the wheel pip-installed into a venv there, over the
system's libgdrapi.so.2 (tests/packaging/python_install.sh).

.rpm: there is no RPM-based container image here unless a registry can be
reached, so the rpm test installs gdrcopy and python3-gdrcopy into a scratch
rpm root (as test_pkg_build.py does) and imports the package from there
with the host's python3; the container install runs only where an image can
be pulled, and says so when it cannot.

Suites: GDRKIT_PKG_PY_SUITES (comma separated), default bookworm,trixie.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gdrkit import containers, version
from gdrkit.containers import ImageRecipe
from gdrkit.distro.families import family
from gdrkit.packaging import build, pipeline, wheel
from gdrkit.stage.image import pull_or_why
from gdrkit.stage.packages import checked_packages

pytestmark = pytest.mark.slow

SUITES = [s for s in os.environ.get("GDRKIT_PKG_PY_SUITES", "bookworm,trixie").split(",") if s]
SCRIPTS = Path(__file__).resolve().parents[1] / "packaging"
PASSED_MARK = "SCENARIO PASSED"
# Where an rpm container could come from; pulled only to run the rpm test in it.
RPM_IMAGE = "rockylinux:9"


def python_recipe(suite: str) -> ImageRecipe:
    return ImageRecipe(suite=suite, include=("python3", "python3-numpy", "python3-venv"), name="gdrkit-python")


@pytest.fixture(scope="module")
def source() -> build.Source:
    build.ensure_build_deps((), kinds=("deb",), lint=False)
    return build.source_at("HEAD")


@pytest.fixture(scope="module")
def wheel_dir(source: build.Source, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    wheel.build_wheels(source, out, ("pure",))
    return out


@pytest.fixture(scope="module", params=SUITES)
def suite_debs(
    request: pytest.FixtureRequest, source: build.Source, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path]:
    suite = str(request.param)
    out = tmp_path_factory.mktemp(f"debs-{suite}")
    # Not linted: the host's lintian judges only its own release (test_pkg_build.py lints each in its suite).
    wanted = pipeline.Request(kinds=("deb",), with_kmod=False, suite=suite, output=out, lint=False)
    checked_packages(pipeline.plan_request(wanted, source))
    return suite, out


def test_deb_and_wheel_install_and_import_in_the_suites_container(
    suite_debs: tuple[str, Path], wheel_dir: Path
) -> None:
    suite, debs = suite_debs
    try:
        image = containers.ensure_image(python_recipe(suite))
        result = containers.run_script(
            image,
            f"bash /scripts/python_install.sh {version.VERSION} {version.api_version()}",
            mounts={SCRIPTS: "/scripts", debs.resolve(): "/pkgs/debs", wheel_dir.resolve(): "/pkgs/wheel"},
        )
    finally:
        containers.cleanup()
    checked = [
        line for line in result.output.splitlines() if line.startswith(("CHECK:", "FAILED:", "python3 ", "venv:"))
    ]
    print(f"\n{suite}:\n  " + "\n  ".join(checked))
    assert result.status == 0 and PASSED_MARK in result.output, result.output[-6000:]


@pytest.fixture(scope="module")
def rpms(source: build.Source, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("rpms")
    request = pipeline.Request(kinds=("rpm",), with_kmod=False, rpm_family="rhel", output=out, lint=False)
    return checked_packages(pipeline.plan_request(request, source))


def _rpm(rpms: list[Path], name: str) -> Path:
    found = [path for path in rpms if build.package_name(path) == name]
    assert len(found) == 1, f"expected one {name} rpm in {[p.name for p in rpms]}"
    return found[0]


def test_rpm_installs_into_an_rpm_root_and_imports(rpms: list[Path], tmp_path: Path) -> None:
    python_rpm, library_rpm = _rpm(rpms, "python3-gdrcopy"), _rpm(rpms, "gdrcopy")
    requires = subprocess.run(["rpm", "-qpR", str(python_rpm)], capture_output=True, text=True, check=True).stdout
    assert f"gdrcopy = {version.package_version()}-" in requires, (
        f"python3-gdrcopy does not require its library:\n{requires}"
    )
    root = tmp_path / "root"
    rpmargs = ["rpm", "--root", str(root), "--dbpath", "/var/lib/rpm", "--nodeps", "--noplugins", "--noscripts"]
    subprocess.run([*rpmargs, "-i", str(library_rpm), str(python_rpm)], check=True)
    rhel = family("rhel")
    package_dir = root / rhel.pythondir.lstrip("/") / "gdrcopy"
    library = root / rhel.paths()["libdir"].lstrip("/") / "libgdrapi.so.2"
    assert (package_dir / "__init__.py").is_file() and (package_dir / "py.typed").is_file(), sorted(
        root.rglob("gdrcopy")
    )
    assert library.exists(), f"the gdrcopy rpm has no {library.relative_to(root)}"
    # Installed by rpm with no gdrcopy-devel: the names NCCL (libgdrapi.so) and NVSHMEM (.so.2) dlopen.
    loaded = subprocess.run(
        [sys.executable, str(SCRIPTS / "dlopen_by_name.py"), "libgdrapi.so", "libgdrapi.so.2"],
        capture_output=True, text=True, env={**os.environ, "LD_LIBRARY_PATH": str(library.parent)},
    )  # fmt: skip
    print(f"\nrpm root, gdrcopy without gdrcopy-devel:\n{loaded.stdout}")
    assert loaded.returncode == 0 and loaded.stdout.count(str(root)) == 2, loaded.stdout + loaded.stderr
    # The rpm's module over the rpm's library, with this host's python3 (an RPM system's
    # python3 would find both in these same places by itself); -B: no __pycache__, which
    # the rpm does not own, so that erasing it must leave nothing.
    report = subprocess.run(
        [sys.executable, "-s", "-B", "-c", "import gdrcopy; print(gdrcopy.__version__, gdrcopy.library_version(), gdrcopy.__file__)"],
        capture_output=True, text=True, cwd="/",
        env={"PYTHONPATH": str(package_dir.parent), "GDRCOPY_LIBRARY": str(library), "PATH": os.environ["PATH"]},
    )  # fmt: skip
    print(f"\nrpm root: {report.stdout.strip()}")
    got = report.stdout.split()
    assert report.returncode == 0 and got[:2] == [version.VERSION, version.api_version()], report.stdout + report.stderr
    assert got[2].startswith(str(package_dir)), f"imported {got[2]}, not the rpm's file"
    subprocess.run([*rpmargs, "-e", "python3-gdrcopy"], check=True)
    assert not package_dir.exists(), f"erasing python3-gdrcopy left {package_dir}"


def test_rpm_installs_with_dnf_in_an_rpm_container(rpms: list[Path]) -> None:
    engine = containers.default_engine()
    if not engine.has_image(RPM_IMAGE):
        why = pull_or_why(engine, RPM_IMAGE)
        if why:
            pytest.skip(
                f"no RPM-based container image here ({why}); no registry is reachable and Debian hosts "
                "cannot build one locally, so test_rpm_installs_into_an_rpm_root_and_imports covers the .rpm"
            )
    try:
        result, _ = engine.run(
            RPM_IMAGE, f"bash /scripts/python_install_rpm.sh {version.VERSION} {version.api_version()}",
            mounts={SCRIPTS: "/scripts", rpms[0].parent.resolve(): "/pkgs"}, read_only=True, stream=False,
        )  # fmt: skip
    finally:
        engine.cleanup()
    assert result.status == 0 and PASSED_MARK in result.output, result.output[-4000:]
