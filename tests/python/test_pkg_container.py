"""The .deb packages in a bookworm container: DKMS install, second kernel, upgrade, purge (slow).

The image is built locally with mmdebstrap and imported into Docker (no
registry is reachable); it is cached under a tag derived from its recipe.
The packages are built from HEAD; the "previous release" is the same tree
packaged as 2.6.0 from the same templates.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gdrkit import containers
from gdrkit.packaging import build, families, model, scenarios

pytestmark = pytest.mark.slow

PREVIOUS = "2.6.0"


@pytest.fixture(scope="module")
def debs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    build.ensure_build_deps(())
    source = build.source_at("HEAD")
    debian = families.family("debian")
    new = tmp_path_factory.mktemp("debs-new")
    old = tmp_path_factory.mktemp("debs-old")
    plan = model.plan(debian, source_date_epoch=source.epoch)
    build.build_debs(plan, source, new)
    build.build_debs(model.plan(debian, source_date_epoch=source.epoch, package_version=PREVIOUS), source, old)
    yield new, old, plan.version
    containers.cleanup()


def _report(name: str, outcome: scenarios.Outcome) -> None:
    checked = [line for line in outcome.output.splitlines() if line.startswith(("CHECK:", "leftover", "checked", "gdrdrv/"))]
    print(f"\n{name}:\n  " + "\n  ".join(checked))
    assert outcome.passed, outcome.output[-6000:]


def test_install_builds_with_dkms_for_both_kernels_and_purge_leaves_nothing(debs: tuple[Path, Path, str]) -> None:
    new, _, version = debs
    kernels = scenarios.bookworm_kernels()
    _report("fresh install", scenarios.run_scenario(scenarios.fresh_install_script(version, *kernels), kernels, new))


def test_upgrade_from_the_previous_release_then_remove_and_purge(debs: tuple[Path, Path, str]) -> None:
    new, old, version = debs
    kernels = scenarios.bookworm_kernels()
    _report("upgrade", scenarios.run_scenario(scenarios.upgrade_script(PREVIOUS, version, kernels[0]), kernels, new, old))
