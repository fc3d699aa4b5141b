"""How the gdrcopy wheels are built (setuptools; pyproject.toml holds the metadata).

GDRCOPY_WHEEL picks the wheel:
  native   (default) the bindings and their compiled copy calls (gdrcopy._fastcopy,
           stable ABI of Python >= 3.11); a host without a C compiler or with an
           older Python gets the bindings alone (ctypes), with a warning.  They
           use the system's libgdrapi.so.2.
  pure     the bindings alone: py3-none-any, for hosts with the libgdrapi package.
  bundled  native plus libgdrapi.so.2 built from ../libgdrapi, gdrapi.h and the
           pkg-config and CMake files, inside the package (gdrcopy/lib,
           gdrcopy/include).  GDRCOPY_LIBRARY_CC is the compiler for the library
           (default: cc), GDRCOPY_LIBRARY_CFLAGS its flags (default: -O2);
           GDRCOPY_WHEEL_PLATFORM the platform tag to claim (e.g.
           manylinux_2_28_x86_64, which only a library built at that glibc
           baseline may claim: ./toolkit build-wheel does it with zig cc and
           checks it with auditwheel).

The version is include/gdrcopy_version.h's; an sdist, which has no
../include, carries it in gdrcopy/_version.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VERSION_HEADER = REPO / "include" / "gdrcopy_version.h"
KINDS = ("native", "pure", "bundled")
KIND = os.environ.get("GDRCOPY_WHEEL", "native") or "native"
if KIND not in KINDS:
    sys.exit(f"GDRCOPY_WHEEL={KIND!r}: use one of {', '.join(KINDS)}")
# The buffer protocol entered the limited API in 3.11: the extension's floor.
LIMITED_API = (3, 11)
HAS_EXTENSION = KIND != "pure" and sys.version_info >= LIMITED_API


def project_version() -> str:
    if VERSION_HEADER.is_file():
        text = VERSION_HEADER.read_text()
        parts = [re.search(rf"^#define GDRCOPY_VERSION_{p} (\d+)$", text, re.M) for p in ("MAJOR", "MINOR", "PATCH")]
        if all(parts):
            return ".".join(m.group(1) for m in parts if m)
        sys.exit(f"{VERSION_HEADER} has lost its GDRCOPY_VERSION_MAJOR/MINOR/PATCH lines")
    found = re.search(r'__version__ = "([^"]+)"', (HERE / "gdrcopy" / "_version.py").read_text())
    if not found:
        sys.exit("no version: neither ../include/gdrcopy_version.h nor gdrcopy/_version.py has one")
    return found.group(1)


VERSION = project_version()


def _substitute(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    return text


def bundle_library(package_dir: Path, work: Path) -> None:
    """Build libgdrapi into work and lay it out under package_dir (lib/, include/)."""
    source = REPO / "libgdrapi"
    if not (source / "Makefile").is_file():
        sys.exit("GDRCOPY_WHEEL=bundled needs the repository's libgdrapi/ next to python/ (build from a clone)")
    cc = os.environ.get("GDRCOPY_LIBRARY_CC", "cc")
    build = work / "libgdrapi"
    # CFLAGS on the command line: the environment's are the extension's (and would replace the Makefile's).
    cflags = os.environ.get("GDRCOPY_LIBRARY_CFLAGS", "-O2")
    subprocess.run(["make", "-s", "-C", str(source), f"BUILD={build}", f"CC={cc}", f"CFLAGS={cflags}"], check=True)
    major = VERSION.split(".")[0]
    lib = package_dir / "lib"
    (lib / "pkgconfig").mkdir(parents=True, exist_ok=True)
    (lib / "cmake" / "gdrapi").mkdir(parents=True, exist_ok=True)
    (package_dir / "include").mkdir(exist_ok=True)
    # One file under its soname: a wheel cannot hold the symlinks of an install.
    shutil.copyfile(build / f"libgdrapi.so.{VERSION}", lib / f"libgdrapi.so.{major}")
    for header in ("gdrapi.h", "gdrconfig.h", "gdrcopy_version.h"):
        shutil.copyfile(REPO / "include" / header, package_dir / "include" / header)
    # Relocatable: the paths are relative to where pkg-config and CMake find the files.
    pc = _substitute(
        (source / "gdrapi.pc.in").read_text(),
        {"prefix": "${pcfiledir}/../..", "libdir": "${prefix}/lib", "includedir": "${prefix}/include",
         "VERSION": VERSION, "MAJOR": major},
    )  # fmt: skip
    # No libgdrapi.so link in a wheel: link the soname itself.
    (lib / "pkgconfig" / "gdrapi.pc").write_text(pc.replace("-lgdrapi", f"-l:libgdrapi.so.{major}"))
    cmake_values = {
        "prefix": "${CMAKE_CURRENT_LIST_DIR}/../../..",
        "libdir": "${CMAKE_CURRENT_LIST_DIR}/../..",
        "includedir": "${CMAKE_CURRENT_LIST_DIR}/../../../include",
        "VERSION": VERSION,
        "MAJOR": major,
    }
    config = (source / "gdrapiConfig.cmake.in").read_text().replace("libgdrapi.so.@VERSION@", "libgdrapi.so.@MAJOR@")
    (lib / "cmake" / "gdrapi" / "gdrapiConfig.cmake").write_text(_substitute(config, cmake_values))
    (lib / "cmake" / "gdrapi" / "gdrapiConfigVersion.cmake").write_text(
        _substitute((source / "gdrapiConfigVersion.cmake.in").read_text(), cmake_values)
    )


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        package_dir = Path(self.build_lib) / "gdrcopy"
        # The wheel's version is the header's, whatever the committed file says.
        (package_dir / "_version.py").write_text(
            "# The package version: the project's (include/gdrcopy_version.h; a test keeps them equal).\n"
            f'__version__ = "{VERSION}"\n'
        )
        if KIND == "bundled":
            bundle_library(package_dir, Path(self.build_lib).resolve().parent / "gdrcopy-bundle")


class OptionalBuildExt(build_ext):
    """The compiled copy calls: required in a bundled wheel, optional otherwise."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # noqa: BLE001 - any compiler failure means the ctypes path
            if KIND == "bundled":
                raise
            print(
                f"WARNING: gdrcopy._fastcopy not built ({error}); the bindings use ctypes for copies "
                "(install a C compiler and the Python headers, e.g. python3-dev, for the faster calls)",
                file=sys.stderr,
            )


class BdistWheel(bdist_wheel):
    def finalize_options(self) -> None:
        if HAS_EXTENSION:
            self.py_limited_api = "cp%d%d" % LIMITED_API
        platform = os.environ.get("GDRCOPY_WHEEL_PLATFORM")
        if platform and KIND == "bundled":
            self.plat_name = platform
        super().finalize_options()
        if KIND == "pure":
            self.root_is_pure = True

    def get_tag(self) -> tuple[str, str, str]:
        python, abi, platform = super().get_tag()
        if KIND == "bundled" and not HAS_EXTENSION:
            # The library makes it a platform wheel even without the extension.
            python, abi = "py3", "none"
        return python, abi, platform


class GdrcopyDistribution(Distribution):
    def has_ext_modules(self) -> bool:
        return KIND == "bundled" or super().has_ext_modules()


extensions = []
if HAS_EXTENSION:
    extensions.append(
        Extension(
            "gdrcopy._fastcopy",
            sources=["src/gdrcopy_fastcopy.c"],
            py_limited_api=True,
            define_macros=[("Py_LIMITED_API", "0x030B0000")],
            extra_compile_args=["-O2", "-std=gnu11"],
        )
    )
elif KIND != "pure":
    print(
        f"NOTE: Python {sysconfig.get_python_version()} < 3.11: gdrcopy._fastcopy needs the 3.11 stable ABI; "
        "the bindings use ctypes for copies",
        file=sys.stderr,
    )

setup(
    version=VERSION,
    ext_modules=extensions,
    cmdclass={"build_py": BuildPy, "build_ext": OptionalBuildExt, "bdist_wheel": BdistWheel},
    distclass=GdrcopyDistribution,
)
