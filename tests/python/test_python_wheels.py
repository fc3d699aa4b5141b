"""The gdrcopy wheels, built through pip and python/'s build backend, installed in fresh venvs.

- `pip install ./python` from a fresh copy of the commit (what a user of a clone
  does) imports, with the compiled copy calls; slow tier (about 20 s: pip fetches
  setuptools from PyPI for the isolated build).
- the pure wheel (./toolkit build-wheel --kind pure): py3-none-any, no binaries;
  slow tier (about 15 s).
- the bundled wheel (--kind bundled): zig cc at glibc 2.28, auditwheel show,
  installed; it loads its own library, and a C program builds from its header,
  `--libs`, pkg-config and CMake files.  Soak tier (3-5 minutes, mostly zig
  compiling the library; the tools venv is made once under the toolkit's cache).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gdrkit import version
from gdrkit.packaging import build, wheel
from gdrkit.system import UserError

REPO = Path(__file__).resolve().parents[2]
CONSUMER = REPO / "tools" / "h200" / "wheel_consumer.c"


def fresh_venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    return where / "bin" / "python"


def clean_env() -> dict[str, str]:
    """No override of which library loads, no tree on the path."""
    drop = ("GDRCOPY_LIBRARY", "GDRCOPY_PREFER_SYSTEM_LIBRARY", "GDRCOPY_NO_FAST_PATH", "PYTHONPATH", "VIRTUAL_ENV")
    return {k: v for k, v in os.environ.items() if k not in drop}


def run_in(python: Path, *args: str, cwd: str = "/") -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), *args], capture_output=True, text=True, cwd=cwd, env=clean_env())


@pytest.mark.slow
def test_pip_install_from_a_fresh_clone(tmp_path: Path) -> None:
    tree = build.extract_commit(build.source_at("HEAD"), tmp_path / "clone")
    python = fresh_venv(tmp_path / "v")
    installed = run_in(python, "-m", "pip", "install", "-q", str(tree / "python"))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    report = run_in(python, "-c", "import gdrcopy; print(gdrcopy.__version__, gdrcopy.fast_path(), gdrcopy.__file__)")
    assert report.returncode == 0, report.stderr
    got = report.stdout.split()
    print(f"\npip install ./python: {report.stdout.strip()}")
    assert got[0] == version.VERSION and "site-packages" in got[2]
    if shutil.which("cc") and sys.version_info >= (3, 11):
        assert got[1] == "compiled", report.stdout


@pytest.mark.slow
def test_pure_wheel_is_py3_none_any_and_installs(tmp_path: Path) -> None:
    (path,) = wheel.build_wheels(build.source_at("HEAD"), tmp_path / "dist", ("pure",))
    assert path.name == f"gdrcopy-{version.VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        meta = archive.read(f"gdrcopy-{version.VERSION}.dist-info/METADATA").decode()
        version_file = archive.read("gdrcopy/_version.py").decode()
    assert "gdrcopy/__init__.py" in names and "gdrcopy/py.typed" in names and "gdrcopy/__main__.py" in names
    assert not [n for n in names if n.endswith((".so", ".pyc", ".c"))], names
    assert f"Version: {version.VERSION}" in meta and "Requires-Python: >=3.8" in meta
    assert f'__version__ = "{version.VERSION}"' in version_file
    python = fresh_venv(tmp_path / "v")
    assert run_in(python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(path)).returncode == 0
    report = run_in(python, "-c", "import gdrcopy; print(gdrcopy.fast_path())")
    assert report.returncode == 0 and report.stdout.startswith("ctypes (gdrcopy._fastcopy is not built"), report


@pytest.mark.soak
def test_bundled_wheel_is_manylinux_and_carries_a_usable_library(tmp_path: Path) -> None:
    (path,) = wheel.build_wheels(build.source_at("HEAD"), tmp_path / "dist", ("bundled",))
    tag = wheel.manylinux_tag()
    assert path.name == f"gdrcopy-{version.VERSION}-cp311-abi3-{tag}.whl"
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
    for member in ("gdrcopy/lib/libgdrapi.so.2", "gdrcopy/_fastcopy.abi3.so", "gdrcopy/include/gdrapi.h",
                   "gdrcopy/lib/pkgconfig/gdrapi.pc", "gdrcopy/lib/cmake/gdrapi/gdrapiConfig.cmake"):  # fmt: skip
        assert member in names, sorted(names)
    if sys.version_info < (3, 11):
        pytest.skip(f"the cp311-abi3 wheel does not install on Python {sys.version.split()[0]}")
    python = fresh_venv(tmp_path / "v")
    assert run_in(python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(path)).returncode == 0
    info = run_in(python, "-m", "gdrcopy")
    assert info.returncode == 0, info.stderr
    report = json.loads(info.stdout)
    print(f"\nbundled wheel: {report}")
    # A host with a newer system libgdrapi would rightly pick that one.
    assert report["source"] == "bundled" and report["path"].endswith("gdrcopy/lib/libgdrapi.so.2"), report
    assert report["fast_path"] == "compiled" and report["version"] == version.api_version()

    def flags(option: str) -> list[str]:
        out = run_in(python, "-m", "gdrcopy", option)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    program = tmp_path / "consumer"
    subprocess.run(["cc", *flags("--includes"), "-o", str(program), str(CONSUMER), *flags("--libs")], check=True)
    ran = subprocess.run([str(program)], capture_output=True, text=True, env=clean_env())
    # No GPU here: gdr_open fails, but the library loaded from the wheel (rpath) and says why.
    assert f"libgdrapi {version.api_version()} (header {version.api_version()})" in ran.stdout, ran.stdout
    assert "backends: gdrdrv\ndmabuf\nvulkan\n" in ran.stdout and "gdrdrv: " in ran.stdout, ran.stdout
    pc = subprocess.run(["pkg-config", "--cflags", "--libs", "gdrapi"], capture_output=True, text=True,
                        env={**clean_env(), "PKG_CONFIG_PATH": flags("--pkgconfig-dir")[0]}, check=True)  # fmt: skip
    # Relocatable: ${pcfiledir}-relative paths that resolve into the installed package.
    include_flag = next(f for f in pc.stdout.split() if f.startswith("-I"))
    libdir_flag = next(f for f in pc.stdout.split() if f.startswith("-L"))
    assert os.path.realpath(include_flag[2:]) == os.path.realpath(flags("--includedir")[0]), pc.stdout
    assert os.path.realpath(libdir_flag[2:]) == os.path.realpath(flags("--libdir")[0]), pc.stdout
    assert "-l:libgdrapi.so.2" in pc.stdout, pc.stdout
    if shutil.which("cmake") is None:
        print("no cmake here: the CMake package file is not exercised")
        return
    project = tmp_path / "cmake-project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(consumer C)\nfind_package(gdrapi 2.6 REQUIRED)\n"
        f"add_executable(consumer {CONSUMER})\ntarget_link_libraries(consumer PRIVATE gdrapi::gdrapi)\n"
    )
    configure = subprocess.run(["cmake", "-S", str(project), "-B", str(project / "b"),
                                f"-Dgdrapi_DIR={flags('--cmake-dir')[0]}"], capture_output=True, text=True)  # fmt: skip
    assert configure.returncode == 0, configure.stdout + configure.stderr
    built = subprocess.run(["cmake", "--build", str(project / "b")], capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    linked = subprocess.run(["readelf", "-d", str(project / "b" / "consumer")], capture_output=True, text=True)
    assert "libgdrapi.so.2" in linked.stdout


def test_auditwheel_verdict_is_read_against_the_glibc_baseline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The claimed tag is the baseline's; auditwheel's older or equal verdict passes, a newer one fails."""
    verdicts = {
        "manylinux_2_17_x86_64": True,
        "manylinux_2_28_x86_64": True,
        "manylinux_2_34_x86_64": False,
    }
    for verdict, ok in verdicts.items():
        report = (
            f'w.whl is consistent with\nthe following platform tag: "{verdict}".\n'
            "The wheel references external versioned symbols ..."
        )
        monkeypatch.setattr(wheel, "run", lambda *a, report=report, **k: subprocess.CompletedProcess(a, 0, report, ""))
        if ok:
            assert wheel.check_with_auditwheel(Path("python"), Path("w.whl"), "manylinux_2_28_x86_64") == report
        else:
            with pytest.raises(UserError, match="not find w.whl consistent with manylinux_2_28"):
                wheel.check_with_auditwheel(Path("python"), Path("w.whl"), "manylinux_2_28_x86_64")
    assert wheel.manylinux_tag("x86_64") == "manylinux_2_28_x86_64"
    assert wheel.manylinux_tag("aarch64") == "manylinux_2_28_aarch64"
    with pytest.raises(UserError, match="unknown architecture 'riscv64'"):
        wheel.manylinux_tag("riscv64")
