"""The lifecycle paths with a real boot after every step, under systemd and under sysvinit-core.

test_pkg_lifecycle.py reads from a container's root what a boot would do;
this test boots it (pkgkit.booted), for issue 41's four paths: NVIDIA's ->
ours -> NVIDIA's -> purge, ours -> NVIDIA's -> purge, NVIDIA's -> ours ->
purge and ours -> purge.  Per init system: a cached bookworm root
with dkms, udev and systemd-sysv, or sysvinit-core and no systemd; an
overlay of it gets softgpu built as the module nvidia (loaded at boot from
/etc/modules-load.d, as a node's driver is).  The fresh root is booted,
then each step of lifecycle.sh runs chrooted in the overlay (DKMS builds
gdrdrv natively) and the VM boots the root with its own init as PID 1.
After every boot: the driver was loaded; gdrdrv was loaded exactly where a
package is installed, and by exactly one mechanism (NVIDIA's init script;
ours: gdrdrv.service under systemd, the udev rule under sysvinit), with
NVIDIA's script gone once ours is in; /dev/gdrdrv has the mode and group
the step gives; no dangling unit or rc link; no gdrdrv error in the boot
log or the kernel log; lifecycle.sh's own checks of the root hold, and the
last purge leaves nothing.  It prints one `BOOTED:` line per boot.

NVIDIA's steps show no /dev/gdrdrv: the stand-in's module is ours, a misc
device, and NVIDIA's script deletes the node the kernel made and finds no
major for its mknod (NVIDIA's own module registers one and gets 0666).

Soak tier: 3-11 min a path and init on a busy 2-core host with the roots
cached (measured, systemd / sysvinit: the round trip 620 / 640 s, the
reverse path 430 / 490 s, NVIDIA's -> ours -> purge 284 / 389 s, ours ->
purge 192 / 268 s; all eight about 55 min): three to five boots under TCG
(15-190 s each) and one to three DKMS builds; the package sets add 2 min
once, each root built the first time about 2 min.  Each path's rows are
also written to table.txt in its log directory.
The quick tier runs the pure judge below and shellcheck of the guest
scripts (about 2 s).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gdrkit.system import ensure_debian_packages
from gdrkit.version import REPO_ROOT
from pkgkit import booted, scenarios
from pkgkit.booted import BootSeen, Expected
from pkgkit.faults import DebSets

PATH = "nvidia-ours-nvidia-purge"
# The round trip (NVIDIA's, ours, back: the upgrade keeps 0666), the reverse order
# (ours new, 0660, then NVIDIA's over it), the upgrade kept and purged, and ours alone.
BOOTED_PATHS = [PATH, "ours-nvidia-purge", "nvidia-ours-purge", "ours-purge"]


def _seen(init: str, **facts: str) -> BootSeen:
    base = {"init": "systemd" if init == "systemd" else "init", "nvidia": "loaded", "gdrdrv": "absent",
            "node": "none", "init_script": "absent", "rc_links": "", "dangling": "", "udev_rule": ""}  # fmt: skip
    return BootSeen({**base, **facts}, [], [], 1.0)


def test_what_each_step_should_show_at_boot() -> None:
    assert booted.expected_after(PATH, 0) == Expected(None, "none")
    assert booted.expected_after(PATH, 1) == Expected("nvidia", "none")
    assert booted.expected_after(PATH, 2) == Expected("ours", "666 video")
    assert booted.expected_after(PATH, 3) == Expected("nvidia", "none")
    assert booted.expected_after(PATH, 4) == Expected(None, "none")
    assert booted.expected_after("ours-purge", 1) == Expected("ours", "660 video")
    assert booted.expected_after("nvidia-group-ours-purge", 3) == Expected("ours", "660 video")


def test_the_judge_names_who_loaded_gdrdrv_and_fails_two_loaders() -> None:
    ours = Expected("ours", "666 video")
    systemd = _seen(
        "systemd", gdrdrv="loaded 2.6.1", node="666 video", udev_rule="60-gdrdrv.rules ",
        unit_gdrdrv="LoadState=loaded ActiveState=active Result=success "
        "FragmentPath=/lib/systemd/system/gdrdrv.service SourcePath=",
    )  # fmt: skip
    assert booted.judge_boot(systemd, "systemd", ours) == []
    sysv = _seen("sysvinit", gdrdrv="loaded 2.6.1", node="666 video", udev_rule="60-gdrdrv.rules ")
    assert booted.loaders(sysv, "sysvinit") == ["ours"]
    assert booted.judge_boot(sysv, "sysvinit", ours) == []
    # Before issue 41's fix: NVIDIA's script left beside our rule, found gdrdrv loaded and deleted the node.
    sysv.facts.update(node="none", init_script="present", rc_links="S01gdrdrv ")
    sysv.script_lines += ["[ ok ] nvidia is loaded.", "gdrdrv is loaded already", "[FAIL] /dev/gdrdrv not created"]
    assert booted.loaders(sysv, "sysvinit") == ["nvidia", "ours"]
    problems = booted.judge_boot(sysv, "sysvinit", ours)
    assert any("loaded by ['nvidia', 'ours']" in p for p in problems), problems
    assert any("/dev/gdrdrv: 'none'" in p for p in problems), problems
    assert any("init script left" in p for p in problems), problems
    # Nothing loaded it: a sysvinit boot without a loader.
    bare = _seen("sysvinit", udev_rule="60-gdrdrv.rules ")
    assert any("not loaded at boot" in p for p in booted.judge_boot(bare, "sysvinit", ours))


def test_the_boot_report_parses() -> None:
    text = "BOOT: init=init\nBOOT: node=666 video\njournal: nvidia is loaded\nkernel: gdrdrv: loaded\nBOOT: end\n"
    facts, journal, kernel, ended = booted.parse_boot_log(text)
    assert facts == {"init": "init", "node": "666 video"} and journal == ["nvidia is loaded"]
    assert kernel == ["gdrdrv: loaded"] and ended
    assert not booted.parse_boot_log("BOOT: init=init\n")[3]


def test_the_guest_scripts_pass_shellcheck() -> None:
    ensure_debian_packages(["shellcheck"])
    scripts = [scenarios.SCRIPTS / name for name in booted.GUEST_FILES if not name.endswith(".service")]
    result = subprocess.run(
        [shutil.which("shellcheck") or "shellcheck", "-x", *map(str, scripts)], cwd=REPO_ROOT,
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.parametrize("init", sorted(booted.INITS))
@pytest.mark.parametrize("path", BOOTED_PATHS)
def test_each_step_booted(deb_sets: DebSets, reference_debs: Path, path: str, init: str) -> None:
    # In this tree's build/, not tmp_path: pytest keeps only its last few tmp_paths.
    logs = REPO_ROOT / "build" / "booted-lifecycle-logs" / f"{init}-{path}"
    shutil.rmtree(logs, ignore_errors=True)
    run = booted.walk(init, path, deb_sets.version, deb_sets.new, reference_debs, logs)
    rows = run.rows(path, init)
    (logs / "table.txt").write_text("\n".join(rows) + "\n")
    print(f"\n{init}:\n  " + "\n  ".join(rows))
    assert len(run.boots) == len(path.split("-")) + 1, "\n".join(run.failures())
    assert not run.failures(), f"logs in {logs}:\n" + "\n".join(run.failures())
