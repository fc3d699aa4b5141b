"""`invoke lint`: every static check of the tree (gdrkit.lint); fails on any finding."""

from __future__ import annotations

from invoke.context import Context
from gdrkit.tasks.convention import task

from gdrkit import lint as checks
from gdrkit.system import bad_input, die, log
from gdrkit.version import REPO_ROOT


@task(
    extras=("test", "containers", "kube", "fleet"),
    help={
        "only": "comma-separated checks to run (default all): " + ", ".join(c.name for c in checks.CHECKS),
        "update_abi": "rewrite the ABI baseline from the library as built now (after an intended, versioned change)",
        "dry_run": "print what would be installed and which checks would run; run none",
    },
)
def lint(c: Context, only: str = "", update_abi: bool = False, dry_run: bool = False) -> None:
    """Static checks: mypy, ruff, import floors, shellcheck, checkpatch, kernel-doc, sparse, -Werror builds, ABI, include/call circles, doc links."""
    try:
        selected = checks.select(only)
    except ValueError as error:
        raise bad_input(f"--only: {error}", "name checks from that list, comma-separated (or leave --only out)")
    if update_abi:
        selected = [checks.select("abi")[0]]
    checks.prepare(selected, dry_run=dry_run)
    if dry_run:
        for check in selected:
            print(f"[dry-run] lint {check.name}: {check.what}")
        return
    if update_abi:
        path = checks.update_abi_baseline(REPO_ROOT)
        log(f"wrote {path.relative_to(REPO_ROOT)}; commit it with the change that made it differ")
        return
    results = checks.lint(REPO_ROOT, selected)
    failed = [name for name, findings in results.items() if findings]
    if failed:
        raise die(
            f"lint found problems in: {', '.join(failed)}",
            "fix each finding printed above (or, for a deliberate departure, record it where the check "
            "documents exceptions: pyproject.toml, a shellcheck directive, CHECKPATCH_IGNORE in gdrkit/lint.py)",
        )
    log(f"lint: all {len(results)} checks pass")


TASKS = [lint]
