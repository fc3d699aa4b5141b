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

Cost: 70-110 s a path on a busy 2-core host (DKMS builds gdrdrv once per
install step): about 4.5 minutes of .ci/run for the three there, 7 more in
the soak tier.  What it cannot see from a container, the boot itself under
systemd and sysvinit-core, test_pkg_lifecycle_booted.py boots.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gdrkit.packaging import build
from pkgkit import faults, reference, scenarios
from pkgkit.faults import DebSets

# "group": the admin writes GDRDRV_ACCESS=group to /etc/default/gdrdrv before
# upgrading (the hardened mode); "edit": the admin changed NVIDIA's init script;
# "nvidia@2.6.1": a later NVIDIA release (the stand-in built as that version)
# upgrading ours in place, as a plain upgrade.
# In .ci/run (about 90 s each): the round trip, the hardened upgrade, and
# NVIDIA's next release over ours (the DKMS version ours shares with it).  In
# the soak tier: the paths that test_pkg_faults.py's (e) and
# test_pkg_container.py's fresh install also walk, the reverse order to
# NVIDIA's 2.6, NVIDIA's 2.7 over ours, and the edited script.
PATHS = [
    "nvidia-ours-nvidia-purge",
    "nvidia-group-ours-purge",
    "ours-nvidia@2.6.1-purge",
    pytest.param("ours-nvidia-purge", marks=pytest.mark.soak),
    pytest.param("ours-nvidia@2.7-purge", marks=pytest.mark.soak),
    pytest.param("nvidia-ours-purge", marks=pytest.mark.soak),
    pytest.param("ours-purge", marks=pytest.mark.soak),
    pytest.param("nvidia-edit-ours-purge", marks=pytest.mark.soak),
]


def nvidia_release(path: str) -> str:
    """The NVIDIA release a path installs: 2.6, or the later one it names (pure)."""
    named = [step.split("@", 1)[1] for step in path.split("-") if step.startswith("nvidia@")]
    return named[0] if named else reference.VERSION


def test_a_path_names_the_nvidia_release_it_installs() -> None:
    assert nvidia_release("nvidia-ours-nvidia-purge") == "2.6"
    assert nvidia_release("ours-nvidia@2.6.1-purge") == "2.6.1"


@pytest.fixture(scope="module")
def nvidia_sets() -> dict[str, Path]:
    """NVIDIA's set by release, built on first use (pkgkit.reference)."""
    return {}


def _nvidia_debs(sets: dict[str, Path], release: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if release not in sets:
        out = tmp_path_factory.mktemp(f"debs-nvidia-{release}")
        reference.build_debs(build.source_at("HEAD"), out, upstream=release)
        sets[release] = out
    return sets[release]


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS)
def test_every_step_has_one_boot_mechanism_and_the_last_purge_leaves_nothing(
    deb_sets: DebSets, nvidia_sets: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, path: str
) -> None:
    kernel = scenarios.bookworm_kernels()[0]
    nvidia = _nvidia_debs(nvidia_sets, nvidia_release(path), tmp_path_factory)
    outcome = faults.run_in_container(
        kernel, "lifecycle.sh", deb_sets.version, kernel, path, new_debs=deb_sets.new, old_debs=nvidia
    )
    table = [line for line in outcome.output.splitlines() if line.startswith(("TABLE:", "FAILED:"))]
    print(f"\n{path}:\n  " + "\n  ".join(table))
    assert len([line for line in table if line.startswith("TABLE:")]) == len(path.split("-")), outcome.output[-6000:]
    assert outcome.passed, outcome.output[-8000:]
