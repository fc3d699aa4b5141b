"""The packages of a commit, checked: built through the package pipeline (plan, execute, verify, lint)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gdrkit.distro.families import family
from gdrkit.packaging import build, pipeline


def checked_packages(plan: pipeline.BuildPlan) -> list[Path]:
    """The package files `plan` (pipeline.plan_request's) builds; dies when one differs from its description or fails lint."""
    rows = pipeline.execute(plan)
    if plan.request.dry_run:
        return []
    print(pipeline.summary_table(rows))
    pipeline.check_rows(rows)
    return [row.path for row in rows if row.path is not None]


def built_files(dist: Path, family_name: str, wanted: Sequence[str]) -> list[Path]:
    """The built packages in `dist` named in `wanted` (by their headers: build.package_name), in file name order."""
    package_type = family(family_name).package_type
    return [path for path in sorted(dist.glob(f"*.{package_type}")) if build.package_name(path) in wanted]
