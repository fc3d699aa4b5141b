"""The toolkit's base install holds only what building packages uses; the rest are extras (quick).

Issue 38: `./toolkit build-packages` must not install Ansible, Molecule, mypy
or the Kubernetes validators.  requirements.txt is the base `./toolkit`
installs; requirements/*.txt the extras a task installs on first use
(gdrkit.pyextras).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gdrkit import pyextras
from gdrkit.packaging import toolchain
from gdrkit.tasks import ns
from gdrkit.version import REPO_ROOT

# The distributions only other tasks use, and the modules they import as.
NOT_BASE = {
    "ansible-core": "ansible",
    "ansible-lint": "ansiblelint",
    "molecule": "molecule",
    "mypy": "mypy",
    "kubernetes-validate": "kubernetes_validate",
    "pytest": "pytest",
    "ruff": "ruff",
    "import-linter": "importlinter",
    "numpy": "numpy",
    "docker": "docker",
}


def test_base_requirements_hold_none_of_the_extras_tools() -> None:
    base = {name.lower() for name, _ in pyextras.pins((REPO_ROOT / "requirements.txt").read_text())}
    print("base:", sorted(base))
    assert base and not base & set(NOT_BASE), base & set(NOT_BASE)
    extras = {
        name.lower()
        for group in pyextras.EXTRAS
        for name, _ in pyextras.pins(pyextras.requirements_file(group).read_text())
    }
    # Every tool that left the base is in some extra, pinned.
    assert {n.split("[")[0] for n in NOT_BASE} <= extras, set(NOT_BASE) - extras
    assert sorted(p.stem for p in pyextras.REQUIREMENTS_DIR.glob("*.txt")) == sorted(pyextras.EXTRAS)


def test_package_tasks_need_no_extra_and_the_others_name_theirs() -> None:
    tasks = {name: ns.tasks[name] for name in ns.task_names}
    for name in ("build-packages", "build-deb", "build-rpm", "publish"):
        assert getattr(tasks[name], "extras", ()) == (), name
    assert set(tasks["test"].extras) == set(pyextras.EXTRAS)
    assert "fleet" in tasks["molecule"].extras and "kube" in tasks["k8s-manifests"].extras


BLOCKER = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is an extra, not in the base environment")
        return None
sys.meta_path.insert(0, Block())
sys.argv = ["./toolkit", *sys.argv[2:]]
from gdrkit.tasks.program import program
program.run()
"""


@pytest.mark.parametrize(
    "argv", [["--list"], ["build-packages", "--dry-run", "--no-deps"], ["build-rpm", "--dry-run", "--no-deps"]]
)
def test_package_builds_run_without_any_extra_importable(argv: list[str]) -> None:
    """The toolkit's program with every extra's modules unimportable, as in a base-only .venv."""
    result = subprocess.run(
        [sys.executable, "-c", BLOCKER, ",".join(NOT_BASE.values()), *argv],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(result.stdout[-1500:], result.stderr[-1500:])
    assert result.returncode == 0, result.stderr
    assert "extra" not in result.stdout + result.stderr


def test_a_missing_pin_is_installed_and_a_dry_run_only_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "test.txt").write_text("# a comment\npytest==0.0.1\n")
    monkeypatch.setattr(pyextras, "REQUIREMENTS_DIR", tmp_path)
    assert pyextras.missing(["test"]) == {"test": ["pytest==0.0.1"]}
    pyextras.ensure(["test"], dry_run=True)
    out = capsys.readouterr().out
    assert "[dry-run] would install the test extra (pytest==0.0.1)" in out
    # This environment holds the real pins: nothing to install.
    monkeypatch.undo()
    assert pyextras.missing(pyextras.EXTRAS) == {}


def test_loose_requirement_lines_are_refused() -> None:
    with pytest.raises(Exception, match="not NAME==VERSION"):
        pyextras.pins("numpy>=2\n")


def test_offline_recipe_downloads_the_zig_the_toolkit_pins() -> None:
    text = (REPO_ROOT / "docs" / "developers.md").read_text()
    assert f"-r requirements.txt {toolchain.ZIG_PIN}" in text
    assert "PIP_NO_INDEX=1 PIP_FIND_LINKS=" in text
