"""The packaged gdrdrv.service under Debian's own systemd as PID 1 (issue 24).

Two boots of bookworm's kernel under TCG, on one overlay of a cached root with
systemd-sysv (pkgkit.systemd): the first installs the previous release's
prebuilt-module set and drives the unit (start, stop, restart, the GDRCopy
name gdrcopy.service, the journal); the second finds gdrdrv loaded at boot
after the NVIDIA driver (softgpu as `nvidia`), upgrades to this release,
removes (gdrdrv stays loaded: no maintainer script unloads it; rmmod then
leaves nvidia loaded) and purges.

Soak tier: 16-17 min on 2 busy cores (measured twice): the two package sets
build in 40 s each (kept per commit in build/), the first boot takes 6-8 min
and the second 7-9 min under TCG, most of it systemd's start and the dpkg
runs with their depmods; .ci/run has no room for it.  The shell checks of
the scenario, the unit's alias and every target's stop command run in the
quick tier.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gdrkit.distro.families import DebianFamily, debian_release, families_of_type
from gdrkit.distro.targets import CLAIMED
from gdrkit.packaging import model, render
from gdrkit.version import REPO_ROOT
from pkgkit import scenarios
from pkgkit import systemd as scenario


def test_the_scenario_scripts_pass_shellcheck() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (apt-get install shellcheck)")
    subprocess.run(
        [shellcheck, "-x", str(scenarios.SCRIPTS / scenario.SCRIPT)], check=True, cwd=scenarios.SCRIPTS.parent.parent
    )


@pytest.mark.parametrize("kind", ["deb", "rpm"])
def test_the_gdrcopy_unit_name(kind: str) -> None:
    # deb: an alias of gdrdrv.service, made when the package enables it; rpm: a unit of its own.
    family = DebianFamily(release=debian_release("bookworm")) if kind == "deb" else families_of_type("rpm")[0]
    files = render.system_files(model.plan(family))
    unit = files[f"pkgroot{family.unitdir}/gdrdrv.service"].text
    assert ("Alias=gdrcopy.service" in unit) == (kind == "deb")
    assert (f"pkgroot{family.unitdir}/gdrcopy.service" in files) == (kind == "rpm")


@pytest.mark.parametrize("target", sorted({t.release for t in CLAIMED}))
def test_stopping_unloads_gdrdrv_alone(target: str) -> None:
    # `modprobe -r gdrdrv` would also unload an nvidia module that nothing else
    # holds; kmod has no option to keep it, so every stop path is rmmod.
    family = next(t.family for t in CLAIMED if t.release == target)
    assert family.rmmod.rsplit("/", 1)[0] == family.modprobe.split()[0].rsplit("/", 1)[0], "one kmod, one directory"
    files = render.render(model.plan(family))
    assert f"\nExecStop={family.rmmod} gdrdrv\n" in files[f"pkgroot{family.unitdir}/gdrdrv.service"].text
    for path, file in files.items():
        code = "\n".join(line for line in file.text.splitlines() if not line.lstrip().startswith("#"))
        assert " -r gdrdrv" not in code and '-r "$module"' not in code, f"{path} unloads with modprobe -r"


@pytest.mark.soak
def test_gdrdrv_service_under_systemd(tmp_path: Path) -> None:
    kernel = scenarios.bookworm_kernels()[0]
    root = scenario.prepare_root()
    nvidia_ko, nvidia_src = scenario.softgpu_as_nvidia(kernel, tmp_path)
    sets = scenario.build_kmod_sets(kernel, nvidia_src)
    # In this tree's build/, not tmp_path: pytest keeps only its last few tmp_paths.
    logs = REPO_ROOT / "build" / "systemd-vm-logs"
    shutil.rmtree(logs, ignore_errors=True)
    outcomes = scenario.run_scenario(sets, root, nvidia_ko, logs)
    for number, boot in enumerate(outcomes, start=1):
        print(f"\nboot {number} ({boot.seconds:.0f} s):\n  " + "\n  ".join(boot.outcome.checks()))
    shown = "\n".join(boot.outcome.output[-6000:] for boot in outcomes)
    assert len(outcomes) == 2, f"the first boot failed; logs in {logs}:\n{shown}"
    for boot in outcomes:
        assert not boot.problems, f"{boot.problems}; logs in {logs}"
        assert boot.outcome.passed, shown
