"""`python -m gdrcopy`: where the bundled library and header are, and which library loads.

    python -m gdrcopy --includes     -I flag for gdrapi.h (cc $(python -m gdrcopy --includes) ...)
    python -m gdrcopy --libs         -L and -l flags for libgdrapi.so.2 (with an rpath)
    python -m gdrcopy --libdir       the directory holding libgdrapi.so.2
    python -m gdrcopy --cmake-dir    for CMake: -Dgdrapi_DIR=$(python -m gdrcopy --cmake-dir)
    python -m gdrcopy --pkgconfig-dir  for PKG_CONFIG_PATH
    python -m gdrcopy --info         the library the bindings load, and why (the default)

The paths exist only in a wheel that carries the library (a bundled wheel);
elsewhere the flags say so and exit 1: the system package's files are where
the system keeps them (pkg-config gdrapi).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Optional

from gdrcopy import _lib

PACKAGE = _lib.PACKAGE_DIR


def _bundled(path_parts: tuple[str, ...]) -> str:
    path = PACKAGE.joinpath(*path_parts)
    if not path.exists():
        raise SystemExit(
            f"this gdrcopy ({PACKAGE}) carries no library of its own ({path} is missing): it is the bindings-only "
            "wheel; use the system package's files (pkg-config --cflags --libs gdrapi), or install the "
            "manylinux wheel that bundles libgdrapi"
        )
    return str(path)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gdrcopy", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    group = parser.add_mutually_exclusive_group()
    for flag in ("--includes", "--libs", "--libdir", "--includedir", "--cmake-dir", "--pkgconfig-dir", "--info"):
        group.add_argument(flag, action="store_true")
    args = parser.parse_args(argv)
    if args.includes:
        print(f"-I{_bundled(('include', 'gdrapi.h'))[: -len('/gdrapi.h')]}")
    elif args.includedir:
        print(_bundled(("include",)))
    elif args.libdir:
        print(_bundled(("lib", _lib.SONAME))[: -len("/" + _lib.SONAME)])
    elif args.libs:
        libdir = _bundled(("lib", _lib.SONAME))[: -len("/" + _lib.SONAME)]
        print(f"-L{libdir} -Wl,-rpath,{libdir} -l:{_lib.SONAME}")
    elif args.cmake_dir:
        print(_bundled(("lib", "cmake", "gdrapi")))
    elif args.pkgconfig_dir:
        print(_bundled(("lib", "pkgconfig")))
    else:
        import gdrcopy

        info: dict[str, object] = {"gdrcopy": gdrcopy.__version__, "package": str(PACKAGE)}
        try:
            info.update(gdrcopy.library_info())
        except gdrcopy.LibraryNotFound as error:
            info["library"] = f"not loadable: {error}"
        info["bundled_library"] = str(_lib.BUNDLED_LIBRARY) if _lib.BUNDLED_LIBRARY.is_file() else None
        info["fast_path"] = gdrcopy.fast_path()
        print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
