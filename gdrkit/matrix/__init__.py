"""The distro matrix (ci/matrix.yaml): load it, run it, report it.

`model` reads and checks the file; `report` turns results into the table
and JUnit XML; `workflow` installs and lints the GitHub workflow that runs
the same matrix one job per entry; `runner` runs an entry here.
"""
