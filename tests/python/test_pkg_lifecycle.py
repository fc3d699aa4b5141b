"""Moving between NVIDIA's GDRCopy packages and ours, either way, leaves nothing behind (slow).

Each path runs tests/packaging/lifecycle.sh in a fresh container of the
package-scenario image (bookworm, dkms, a kernel with its headers), from a
clean root back to it: NVIDIA's 2.6-1 set is the stand-in that
pkgkit.reference builds (its metadata held to NVIDIA's by
test_pkg_reference.py), ours is HEAD's DKMS set (conftest.py's deb_sets).
After every step the script checks, for a systemd host and for a sysvinit
one read from the root: exactly one boot mechanism would load gdrdrv (no
init script left beside our unit, no dangling unit or rc link), the node
mode and group the configuration gives (0666 kept on upgrade from NVIDIA's,
0660 group video on a new install), no conffile prompt, no skipped
rm_conffile; after the last purge no path that was not there at the start.
It prints one `TABLE:` line per step.

Cost: 30-60 s a path (DKMS builds gdrdrv once per install step), about
4 minutes for the five.  What it cannot see from a container (the boot
itself, under systemd and sysvinit-core) is not booted here yet.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gdrkit.packaging import build
from pkgkit import faults, reference, scenarios
from pkgkit.faults import DebSets

pytestmark = pytest.mark.slow

# "group": the admin writes GDRDRV_ACCESS=group to /etc/default/gdrdrv before upgrading (the hardened mode).
PATHS = ["nvidia-ours-nvidia-purge", "nvidia-ours-purge", "nvidia-group-ours-purge", "ours-nvidia-purge", "ours-purge"]


@pytest.fixture(scope="module")
def nvidia_debs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("debs-nvidia-standin")
    reference.build_debs(build.source_at("HEAD"), out)
    return out


@pytest.mark.parametrize("path", PATHS)
def test_every_step_has_one_boot_mechanism_and_the_last_purge_leaves_nothing(
    deb_sets: DebSets, nvidia_debs: Path, path: str
) -> None:
    kernel = scenarios.bookworm_kernels()[0]
    outcome = faults.run_in_container(
        kernel, "lifecycle.sh", deb_sets.version, kernel, path, new_debs=deb_sets.new, old_debs=nvidia_debs
    )
    table = [line for line in outcome.output.splitlines() if line.startswith(("TABLE:", "FAILED:"))]
    print(f"\n{path}:\n  " + "\n  ".join(table))
    assert len([line for line in table if line.startswith("TABLE:")]) == len(path.split("-")), outcome.output[-6000:]
    assert outcome.passed, outcome.output[-8000:]
