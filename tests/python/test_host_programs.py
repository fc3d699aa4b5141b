"""`./toolkit sanity`, `copybw`, ...: the programs built here run against the library built here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gdrkit.host import programs
from gdrkit.system import BAD_INPUT, InputError, UserError
from gdrkit.version import REPO_ROOT


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake tree: a built gdrcopy_copybw and, unless removed, libgdrapi/build/libgdrapi.so.2."""
    program = tmp_path / "tests" / "bench" / "gdrcopy_copybw"
    program.parent.mkdir(parents=True)
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    library = tmp_path / "libgdrapi" / "build"
    library.mkdir(parents=True)
    (library / programs.SONAME).write_text("")
    softgpu = tmp_path / "tests" / "softgpu" / "libcuda"
    softgpu.mkdir(parents=True)
    (softgpu / "libcuda.so.1").write_text("")
    monkeypatch.setattr(programs, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(programs, "LIBRARY_DIR", library)
    monkeypatch.setattr(programs, "SOFTGPU_LIBCUDA_DIR", softgpu)
    monkeypatch.setattr(programs, "BUILT", {"copybw": program})
    monkeypatch.setattr(programs, "INSTALLED_DIR", tmp_path / "usr-bin")
    return tmp_path


def test_a_built_program_gets_the_built_library_first(tree: Path) -> None:
    command = programs.command("copybw", environ={"LD_LIBRARY_PATH": "/opt/x"}, has_libcuda=True)
    assert command.built_here and command.program == tree / "tests" / "bench" / "gdrcopy_copybw"
    assert command.env["LD_LIBRARY_PATH"] == f"{tree / 'libgdrapi' / 'build'}:/opt/x"


def test_without_a_driver_libcuda_a_built_program_gets_softgpus_last(tree: Path) -> None:
    command = programs.command("copybw", environ={}, has_libcuda=False)
    assert command.env["LD_LIBRARY_PATH"].split(":") == [
        str(tree / "libgdrapi" / "build"),
        str(tree / "tests" / "softgpu" / "libcuda"),
    ]


def test_a_built_program_without_its_library_says_to_rebuild(tree: Path) -> None:
    (tree / "libgdrapi" / "build" / programs.SONAME).unlink()
    with pytest.raises(UserError, match="missing") as raised:
        programs.command("copybw", environ={})
    assert "./toolkit build" in str(raised.value.hint)


def test_an_installed_program_keeps_the_environment(tree: Path, tmp_path: Path) -> None:
    installed = tmp_path.parent / f"{tmp_path.name}-elsewhere" / "gdrcopy_copybw"
    installed.parent.mkdir()
    installed.write_text("#!/bin/sh\n")
    installed.chmod(0o755)
    command = programs.command("copybw", str(installed), environ={"A": "1"})
    assert not command.built_here and dict(command.env) == {"A": "1"}


def test_a_bad_path_is_an_input_error(tree: Path) -> None:
    with pytest.raises(InputError, match="--path") as raised:
        programs.command("copybw", str(tree / "nothing"))
    assert raised.value.code == BAD_INPUT


def test_toolkit_sanity_runs_the_built_program_with_no_environment_set(tree_programs: None) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gdrkit.tasks.program", "sanity", "--args=-h"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    # 127 was the loader's "libgdrapi.so.2: cannot open shared object file".
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout
