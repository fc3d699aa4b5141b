"""`invoke imports`: the toolkit's import map (gdrkit.importmap): floors, circles and arrows back up."""

from __future__ import annotations

from invoke.context import Context
from gdrkit.tasks.convention import task

from gdrkit import importmap


@task(extras=("test",), help={"package": "the package to map (default gdrkit)"})
def imports(c: Context, package: str = "gdrkit") -> None:
    """Print the import map: each subpackage's floors, circles and the imports that point back up."""
    print(importmap.render(importmap.import_map(package)), end="")


TASKS = [imports]
