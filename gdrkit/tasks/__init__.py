"""The Invoke namespace: every task, at the top level (`invoke --list`).

Each module of this package holds the tasks of one area; this file only
gathers them.
"""

from invoke import Collection

from gdrkit.tasks import suite

ns = Collection()
for module in (suite,):
    for task in module.TASKS:
        ns.add_task(task)
