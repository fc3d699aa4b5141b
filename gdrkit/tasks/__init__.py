"""The Invoke namespace: every task, at the top level (`invoke --list`).

Each module of this package holds the tasks of one area; this file only
gathers them.
"""

from invoke.collection import Collection

from gdrkit.tasks import fleet, host, imports, kube, lint, matrix, pkg, publish, suite, vm

ns = Collection()
for module in (suite, lint, imports, vm, pkg, publish, fleet, matrix, host, kube):
    for task in module.TASKS:
        ns.add_task(task)
