"""Tasks of the distro matrix and its CI workflow."""

from __future__ import annotations

import json
from pathlib import Path

from invoke.context import Context
from gdrkit.tasks.convention import task
from invoke.exceptions import Exit

from gdrkit.matrix import model, workflow


@task(help={"json": "print the entries as a JSON list (what the GitHub workflow's job matrix reads)"})
def matrix_list(c: Context, json_: bool = False) -> None:
    """List the entries of ci/matrix.yaml."""
    entries = model.load()
    if json_:
        print(json.dumps([e.as_job() for e in entries], separators=(",", ":")))
        return
    name_width = max(len(e.name) for e in entries)
    image_width = max(len(e.image_description) for e in entries)
    for entry in entries:
        where = "here" if not entry.needs_registry else "where a registry is reachable"
        print(
            f"{entry.name:<{name_width}} {entry.family:<7} {entry.image_description:<{image_width}} "
            f"boot={entry.boot!s:<5} runs {where}"
        )


@task(help={"dry_run": "say what would be copied, change nothing"})
def ci_install_workflow(c: Context, dry_run: bool = False) -> None:
    """Install ci/github-workflow.yml as .github/workflows/gdrcopy.yml (where GitHub looks)."""
    path = workflow.install_workflow(dry_run=dry_run)
    if not dry_run:  # the dry run printed what it would copy
        print(f"installed {path}")


def print_plan(lines: list[str]) -> None:
    for line in lines:
        print(f"[dry-run] {line}", flush=True)


@task(help={"dry_run": "print what would be installed and run, change nothing"})
def lint_workflow(c: Context, dry_run: bool = False) -> None:
    """Check the GitHub workflow with actionlint."""
    if dry_run:
        print_plan(workflow.lint_plan([workflow.WORKFLOW]))
        return
    status, output = workflow.lint([workflow.WORKFLOW])
    print(output)
    if status != 0:
        raise Exit("actionlint found problems in the workflow", code=1)


@task(
    extras=("containers",),
    iterable=["only"],
    help={
        "only": "run only this entry (repeatable); default: every entry",
        "offline": "do not try image registries: their entries are skipped, with that reason",
        "ci_local": "only the entries marked ci_local (what .ci/run runs)",
        "junit": "also write JUnit XML to this file",
        "refresh": "rebuild cached images",
        "dry_run": "print what would be installed, started, built and booted; change nothing",
    },
)
def matrix(
    c: Context,
    only: list[str] | None = None,
    offline: bool = False,
    ci_local: bool = False,
    junit: str = "",
    refresh: bool = False,
    dry_run: bool = False,
) -> None:
    """Build, install, DKMS-build, boot and sanity-test the packages on every distro of ci/matrix.yaml."""
    from gdrkit.matrix import report, runner

    plan = runner.plan_matrix(
        model.select(model.load(), only or [], ci_local=ci_local), offline=offline, refresh=refresh
    )
    if dry_run:
        print_plan(plan.lines())
        return
    results = runner.execute_matrix(plan)
    print(report.format_table(results), flush=True)
    if junit:
        report.write_junit(results, Path(junit))
    if any(r.failed for r in results):
        raise Exit("matrix: some entries failed (see the table)", code=1)


@task(
    extras=("containers",),
    iterable=["only"],
    help={
        "only": "sweep only this entry (repeatable)",
        "offline": "skip registry entries",
        "dry_run": "print what would be installed, started and compiled; change nothing",
    },
)
def compile_sweep(c: Context, only: list[str] | None = None, offline: bool = False, dry_run: bool = False) -> None:
    """Compile gdrdrv against every kernel-headers package each distro of the matrix offers."""
    from gdrkit.matrix import runner

    plan = runner.SweepPlan(tuple(model.select(model.load(), only or [])), offline)
    if dry_run:
        print_plan(plan.lines())
        return
    failed = []
    for entry_name, kernels in runner.execute_sweep(plan).items():
        for kernel, status in kernels.items():
            verdict = {0: "built", 1: "FAILED", 2: "headers not installable"}.get(status, "?")
            print(f"{entry_name:<22} {kernel:<40} {verdict}", flush=True)
            if status == 1:
                failed.append(f"{entry_name}/{kernel}")
    if failed:
        raise Exit(f"gdrdrv failed to build for: {', '.join(failed)}", code=1)


TASKS = [matrix_list, matrix, compile_sweep, ci_install_workflow, lint_workflow]
