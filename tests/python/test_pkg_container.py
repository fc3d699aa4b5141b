"""The .deb packages in a bookworm container: DKMS install, second kernel, upgrade, purge (slow).

The image is built locally with mmdebstrap and imported into Docker (no
registry is reachable); it is cached under a tag derived from its recipe, and
shared with the fault scenarios (test_pkg_faults.py).  The packages are built
from HEAD once per session (conftest.py's deb_sets); the "previous release" is
the same tree packaged as 2.6.0 from the same templates.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pkgkit import scenarios
from pkgkit.faults import PREVIOUS_RELEASE, DebSets

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def debs(deb_sets: DebSets) -> tuple[Path, Path, str]:
    return deb_sets.new, deb_sets.old, deb_sets.version


def _report(name: str, outcome: scenarios.Outcome) -> None:
    checked = [
        line
        for line in outcome.output.splitlines()
        if line.startswith(("CHECK:", "leftover", "checked", "gdrdrv/", "dlopen("))
    ]
    print(f"\n{name}:\n  " + "\n  ".join(checked))
    assert outcome.passed, outcome.output[-6000:]


def test_install_builds_with_dkms_for_both_kernels_and_purge_leaves_nothing(debs: tuple[Path, Path, str]) -> None:
    new, _, version = debs
    kernels = scenarios.bookworm_kernels()
    _report("fresh install", scenarios.run_scenario(scenarios.fresh_install_command(version, *kernels), kernels, new))


def test_upgrade_from_the_previous_release_then_remove_and_purge(debs: tuple[Path, Path, str]) -> None:
    new, old, version = debs
    kernels = scenarios.bookworm_kernels()
    _report(
        "upgrade",
        scenarios.run_scenario(scenarios.upgrade_command(PREVIOUS_RELEASE, version, kernels[0]), kernels, new, old),
    )
