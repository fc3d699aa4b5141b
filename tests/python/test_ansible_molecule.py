"""The Ansible role on real hosts (soak: minutes each, beyond .ci/run's budget).

- Molecule, docker driver: bookworm and trixie hosts (the matrix's images)
  converge in one run from HEAD's packages published into a signed
  repository on loopback HTTP; idempotence, verify (signatures checked, the
  packages at the published version, doctor's "no GPU" exit, DKMS, the node
  settings), and removal back to the file system the hosts started with.
  `./toolkit molecule` runs the same.
- Check mode: `molecule check` on fresh bookworm and trixie containers from
  the full repository (`./toolkit molecule --command check`), and on this
  machine itself from a key-only repository (`--scenario check`, about 30 s,
  no container: nothing of GDRCopy is on the build host, and check mode
  changes nothing).
- The real load: the role with a local connection inside a booted bookworm
  kernel, softgpu as the GPU: gdrdrv loaded, /dev/gdrdrv with the configured
  mode and group, gdrcopy_doctor exit 0, sanity, idempotence, removal.
  `./toolkit molecule --vm` runs the same.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gdrkit.fleet import molecule, vmload

pytestmark = pytest.mark.soak

ACTIONS = ("converge", "idempotence", "verify", "side_effect")
HOSTS = tuple(f"gdrcopy-{suite}" for suite in molecule.SUITES)


def test_molecule_bookworm_and_trixie_converge_idempotent_verified_and_removed() -> None:
    run = molecule.molecule("test")
    assert run is not None
    summary = run.summary()
    print("\n".join(summary) + f"\nmolecule test: {run.seconds:.0f} s")
    for action in ACTIONS:
        assert f"{action}: successful" in summary, summary
    recaps = [line.split() for line in summary if line.startswith("  gdrcopy-")]
    for host in HOSTS:
        assert any(r[0] == host and "failed=0" in r for r in recaps), (host, summary)
    # Idempotence: the second converge's recap, per host, changed nothing.
    start = summary.index("idempotence: successful")
    second = [line.split() for line in summary[start + 1 : start + 1 + len(HOSTS)]]
    assert sorted(r[0] for r in second) == sorted(HOSTS) and all("changed=0" in r for r in second), second


def test_role_in_the_vm_loads_gdrdrv_sets_the_node_and_doctor_passes() -> None:
    run = vmload.vm_converge()
    assert run is not None
    print("\n".join(run.checks()) + f"\nVM: {run.seconds:.0f} s")
    assert run.passed, f"status {run.status}, problems {run.problems}\n{run.console[-8000:]}"
    checks = "\n".join(run.checks())
    assert f"/dev/gdrdrv: 660 {vmload.NODE_GROUP} character special file" in checks
    assert "gdrcopy_doctor exit 0" in checks and "changed=0" in checks


def test_molecule_check_mode_on_fresh_hosts_reports_changes_and_fails_nothing() -> None:
    """`molecule check`: the role with --check on fresh bookworm and trixie hosts (nothing of ours on them).

    Every host reports changes (the key, the repository, the packages it would
    install, the node settings, the load) and none fails: the dry run an
    operator makes before the first real run.
    """
    run = molecule.molecule("check")
    assert run is not None
    summary = run.summary()
    print("\n".join(summary) + f"\nmolecule check: {run.seconds:.0f} s")
    assert "check: successful" in summary, summary
    start = summary.index("check: successful")
    recaps = [line.split() for line in summary[start + 1 : start + 1 + len(HOSTS)]]
    assert sorted(r[0] for r in recaps) == sorted(HOSTS), summary
    for recap in recaps:
        assert "failed=0" in recap and "changed=0" not in recap, recap


def test_molecule_check_scenario_reports_on_this_host_and_changes_nothing() -> None:
    """molecule/check: the role with --check on this machine (no GDRCopy here), key-only repository on loopback."""
    watched = [
        Path(p) for p in ("/etc/apt/sources.list.d", "/etc/apt/keyrings", "/etc/modprobe.d", "/etc/udev/rules.d")
    ]
    before = {p: sorted(os.listdir(p)) if p.is_dir() else None for p in watched}
    run = molecule.molecule("check", scenario=molecule.CHECK_SCENARIO)
    assert run is not None
    summary = run.summary()
    print("\n".join(summary) + f"\nmolecule check -s check: {run.seconds:.0f} s")
    start = summary.index("check: successful")
    (recap,) = [line.split() for line in summary[start + 1 : start + 2]]
    assert recap[0] == "this-host" and "failed=0" in recap and "changed=0" not in recap, recap
    for what in ("would add the repository", "would write /etc/modprobe.d/gdrdrv.conf", "would ask gdrcopy_doctor"):
        assert what in run.output, what
    assert {p: sorted(os.listdir(p)) if p.is_dir() else None for p in watched} == before, "check mode changed files"
