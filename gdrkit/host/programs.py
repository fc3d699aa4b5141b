"""The test programs (`./toolkit sanity`, `copybw`, ...): the ones just built, with the library just built.

The tree's programs link libgdrapi.so.2 without an rpath (the packaged ones
must not carry one), so run as they are they find no library, or worse, an
installed one of another version.  `command()` runs a built program with the
tree's libgdrapi/build first on LD_LIBRARY_PATH; an installed program (no
build in this tree, or --path) runs with the environment as it is.  Where no
libcuda.so.1 of a driver is installed, a tree-built program gets softgpu's
(tests/softgpu/libcuda, the test GPU), which says itself when softgpu is not
loaded.
"""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gdrkit.system import bad_input, die
from gdrkit.version import MAJOR, REPO_ROOT

LIBRARY_DIR = REPO_ROOT / "libgdrapi" / "build"
SONAME = f"libgdrapi.so.{MAJOR}"
INSTALLED_DIR = Path("/usr/bin")
SOFTGPU_LIBCUDA_DIR = REPO_ROOT / "tests" / "softgpu" / "libcuda"

# Task name -> where `make exes` writes the program, under the tree.
BUILT: Mapping[str, Path] = {
    "sanity": REPO_ROOT / "tests" / "sanity" / "gdrcopy_sanity",
    "copybw": REPO_ROOT / "tests" / "bench" / "gdrcopy_copybw",
    "copylat": REPO_ROOT / "tests" / "bench" / "gdrcopy_copylat",
    "apiperf": REPO_ROOT / "tests" / "bench" / "gdrcopy_apiperf",
    "pplat": REPO_ROOT / "tests" / "bench" / "gdrcopy_pplat",
}


@dataclass(frozen=True)
class Command:
    """One program to run: its path and the environment it needs."""

    program: Path
    env: Mapping[str, str]
    built_here: bool

    def describe(self) -> str:
        return f"{self.program} (library: {LIBRARY_DIR / SONAME})" if self.built_here else str(self.program)


def _in_tree(program: Path) -> bool:
    return program.resolve().is_relative_to(REPO_ROOT)


def driver_libcuda() -> bool:
    """Whether the dynamic loader finds a libcuda.so.1 of its own (an NVIDIA driver's)."""
    return ctypes.util.find_library("cuda") is not None


def command(
    name: str, explicit: str = "", environ: Mapping[str, str] | None = None, has_libcuda: bool | None = None
) -> Command:
    """The program of task `name`: --path, else this tree's build, else the installed one."""
    base = dict(os.environ if environ is None else environ)
    if explicit:
        program = Path(explicit)
        if not program.is_file() or not os.access(program, os.X_OK):
            raise bad_input(
                f"--path {explicit!r} is not an executable file",
                f"name a built or installed {BUILT[name].name}, or leave --path out for the one this tree built",
            )
    else:
        candidates = [BUILT[name], INSTALLED_DIR / BUILT[name].name]
        found = [p for p in candidates if p.is_file()]
        if not found:
            raise die(
                f"{BUILT[name].name} not found (looked in {', '.join(map(str, candidates))})",
                "build it: ./toolkit build (or install the gdrcopy-tests .deb / gdrcopy .rpm)",
            )
        program = found[0]
    if not _in_tree(program):
        return Command(program, base, built_here=False)
    if not (LIBRARY_DIR / SONAME).exists():
        raise die(
            f"{program} was built here but {LIBRARY_DIR / SONAME} is missing",
            "rebuild the library with the programs: ./toolkit build --no-driver",
        )
    paths = [str(LIBRARY_DIR), *(p for p in base.get("LD_LIBRARY_PATH", "").split(":") if p)]
    if (
        not (driver_libcuda() if has_libcuda is None else has_libcuda)
        and (SOFTGPU_LIBCUDA_DIR / "libcuda.so.1").exists()
    ):
        paths.append(str(SOFTGPU_LIBCUDA_DIR))
    return Command(program, {**base, "LD_LIBRARY_PATH": ":".join(paths)}, built_here=True)


def help_texts() -> dict[str, str]:
    """Each shipped program's -h text, as the man pages are made from: this tree's builds, gdrcopy_doctor's parser."""
    missing = [str(path) for path in BUILT.values() if not path.is_file()]
    if missing or not (LIBRARY_DIR / SONAME).exists():
        raise die(
            f"the programs are not built here ({', '.join(missing) or LIBRARY_DIR / SONAME})",
            "build them first: ./toolkit build --no-driver",
        )
    texts = {}
    for name, path in BUILT.items():
        env = dict(command(name, has_libcuda=True).env)
        env["LD_LIBRARY_PATH"] += f":{SOFTGPU_LIBCUDA_DIR}"  # -h needs no GPU, only a libcuda.so.1 to link
        # argv[0] is the installed name, which the usage line repeats.
        result = subprocess.run(
            [path.name, "-h"], executable=path, env=env, capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise die(f"{path} -h exited {result.returncode}: {result.stderr.strip()[-300:]}", "fix its usage()")
        texts[path.name] = result.stdout or result.stderr
    texts["gdrcopy_doctor"] = doctor_help_text()
    return texts


def doctor_help_text() -> str:
    """gdrcopy_doctor's --help at a fixed width (argparse wraps to the terminal's); it needs no build."""
    return subprocess.run(
        [sys.executable, "-c", "from gdrkit.gdrcopy_doctor import cli; cli.parser().print_help()"],
        cwd=REPO_ROOT,
        env={**os.environ, "COLUMNS": "100"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
