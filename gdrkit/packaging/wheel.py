"""The gdrcopy wheels, built by python/'s own build backend (setuptools) from one commit.

Two wheels (python/setup.py says what each holds):

- pure: py3-none-any, the bindings alone, for hosts with the libgdrapi package;
- bundled: the bindings, their compiled copy calls (stable ABI, cp311-abi3)
  and libgdrapi.so.2 with gdrapi.h, pkg-config and CMake files, built with
  the packages' pinned `zig cc` (gdrkit.packaging.toolchain) against the
  glibc of the oldest target we claim (gdrkit.distro.targets: RHEL 8's
  2.28), tagged manylinux_2_28 and checked with `auditwheel show`.

auditwheel lives in a venv of its own under the toolkit's cache, installed
from PyPI on first use (setuptools comes through pip's build isolation).
The source is `git archive` of the commit, as for the deb and rpm packages.
"""

from __future__ import annotations

import platform
import re
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

from gdrkit.distro.arch import Arch, arch
from gdrkit.distro.targets import oldest_glibc
from gdrkit.packaging import toolchain
from gdrkit.packaging.build import Source, extract_commit
from gdrkit.system import UserError, cache_dir, log, run

KINDS = ("pure", "bundled")
TOOLS = ("auditwheel",)


def wheel_arch(machine: str | None = None) -> Arch:
    """The architecture a bundled wheel is built for: `machine`, or this host's (dies on one we do not build)."""
    return arch(machine or platform.machine())


def manylinux_tag(machine: str | None = None) -> str:
    """The bundled wheel's platform tag: the oldest claimed glibc on that architecture (manylinux_2_28_x86_64)."""
    target_arch = wheel_arch(machine)
    return toolchain.manylinux_tag(target_arch, oldest_glibc(target_arch.debian))


def tools_python() -> Path:
    """The Python of the wheel-tools venv (created, and auditwheel installed, on first use)."""
    venv = cache_dir() / "wheel-tools"
    python = venv / "bin" / "python"
    if not python.exists():
        log(f"creating {venv} for the wheel build tools ({', '.join(TOOLS)}, from PyPI)")
        run([sys.executable, "-m", "venv", venv])
    missing = run([python, "-c", "import auditwheel"], check=False, capture=True).returncode
    if missing:
        run([python, "-m", "pip", "install", "-q", *TOOLS])
    return python


def python_header_shim(directory: Path) -> list[str]:
    """Compiler flags that let zig cc find Debian's multiarch pyconfig.h.

    Debian's Python.h includes <MULTIARCH/pythonX.Y/pyconfig.h> from
    /usr/include, which zig does not search; adding /usr/include itself would
    put the host's glibc headers before zig's baseline ones.  So only that
    directory is copied under `directory`.
    """
    multiarch = sysconfig.get_config_var("MULTIARCH")
    name = f"python{sysconfig.get_python_version()}"
    found = Path("/usr/include") / str(multiarch) / name
    if not multiarch or not found.is_dir():
        return []
    shutil.copytree(found, directory / str(multiarch) / name, dirs_exist_ok=True)
    return ["-isystem", str(directory)]


def pip_wheel(project: Path, output: Path, env: dict[str, str]) -> Path:
    """`pip wheel` of the project into output: the one wheel it wrote."""
    with tempfile.TemporaryDirectory(prefix="gdrkit-wheel-") as tmp:
        run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp, project], env=env)
        built = list(Path(tmp).glob("gdrcopy-*.whl"))
        if len(built) != 1:
            raise UserError(f"pip wheel wrote {[p.name for p in built]}, not one gdrcopy wheel", "see its output above")
        output.mkdir(parents=True, exist_ok=True)
        target = output / built[0].name
        shutil.copyfile(built[0], target)
    return target


def check_with_auditwheel(python: Path, wheel: Path, tag: str) -> str:
    """`auditwheel show`'s report; fails unless the glibc it finds the wheel needs is at most the baseline.

    auditwheel names the oldest tag the wheel is consistent with (manylinux_2_17
    when the library happens to need nothing newer); a wheel consistent with an
    older glibc may claim the baseline's tag.
    """
    claimed = re.match(r"manylinux_(\d+)_(\d+)_", tag)
    if claimed is None:
        raise UserError(f"{tag!r} is not a manylinux_X_Y_ARCH tag", "see manylinux_tag()")
    baseline = (int(claimed.group(1)), int(claimed.group(2)))
    report = run([python, "-m", "auditwheel", "show", wheel], capture=True).stdout
    text = " ".join(report.split())
    found = re.search(r'consistent with the following platform tag: "manylinux_(\d+)_(\d+)_', text)
    if found is None or (int(found.group(1)), int(found.group(2))) > baseline:
        raise UserError(f"auditwheel does not find {wheel.name} consistent with {tag}:\n{report}",
                        "see which symbol versions the library needs (objdump -T)")  # fmt: skip
    return report


def build_wheels(source: Source, output: Path, kinds: tuple[str, ...] = KINDS) -> list[Path]:
    """Build the wheels of `kinds` from the commit into output."""
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise UserError(f"unknown wheel kind(s) {unknown}", f"use {', '.join(KINDS)}")
    wheels = []
    with tempfile.TemporaryDirectory(prefix="gdrkit-wheel-src-") as tmp:
        tree = extract_commit(source, Path(tmp) / "src")
        project = tree / "python"
        if not (project / "pyproject.toml").is_file():
            raise UserError(f"{source.commit[:12]} has no python/pyproject.toml", "build from a later commit")
        base = {"SOURCE_DATE_EPOCH": str(source.epoch)}
        if "pure" in kinds:
            wheels.append(pip_wheel(project, output, {**base, "GDRCOPY_WHEEL": "pure"}))
        if "bundled" in kinds:
            target_arch = wheel_arch()
            glibc = oldest_glibc(target_arch.debian)
            tools = toolchain.zig_toolchain(Path(tmp) / "zig", target_arch, glibc)
            cc = str(tools.cc)
            tag = toolchain.manylinux_tag(target_arch, glibc)
            env = {
                **base,
                "GDRCOPY_WHEEL": "bundled",
                "GDRCOPY_LIBRARY_CC": cc,
                "GDRCOPY_WHEEL_PLATFORM": tag,
                # The extension too: setuptools compiles with CC and links with LDSHARED.
                "CC": cc,
                "LDSHARED": f"{cc} -shared",
                "CFLAGS": " ".join(python_header_shim(Path(tmp) / "pyinc")),
            }
            wheel = pip_wheel(project, output, env)
            report = check_with_auditwheel(tools_python(), wheel, tag)
            log(" ".join(report.split()))
            wheels.append(wheel)
    return wheels
