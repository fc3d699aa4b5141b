"""Tasks of the distro matrix and its CI workflow."""

from __future__ import annotations

import json

from invoke.context import Context
from invoke.tasks import task
from invoke.exceptions import Exit

from gdrkit.matrix import model, workflow


@task(help={"json": "print the entries as a JSON list (what the GitHub workflow's job matrix reads)"})
def matrix_list(c: Context, json_: bool = False) -> None:
    """List the entries of ci/matrix.yaml."""
    entries = model.load()
    if json_:
        print(json.dumps([e.as_job() for e in entries], separators=(",", ":")))
        return
    for entry in entries:
        where = "here" if not entry.needs_registry else "where a registry is reachable"
        print(f"{entry.name:<22} {entry.family:<7} {entry.image_description:<30} boot={entry.boot!s:<5} runs {where}")


@task(help={"dry_run": "say what would be copied, change nothing"})
def ci_install_workflow(c: Context, dry_run: bool = False) -> None:
    """Install ci/github-workflow.yml as .github/workflows/gdrcopy.yml (where GitHub looks)."""
    path = workflow.install_workflow(dry_run=dry_run)
    print(f"installed {path}")


@task
def lint_workflow(c: Context) -> None:
    """Check the GitHub workflow with actionlint."""
    status, output = workflow.lint([workflow.WORKFLOW])
    print(output)
    if status != 0:
        raise Exit("actionlint found problems in the workflow", code=1)


TASKS = [matrix_list, ci_install_workflow, lint_workflow]
