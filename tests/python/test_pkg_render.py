"""Every rendered packaging file, for every family, equals its golden copy.

Update the golden files after an intended change with
    GDRKIT_UPDATE_GOLDEN=1 ./toolkit test -k test_pkg_render
and review the diff in git.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gdrkit.distro import families
from gdrkit.packaging import model, render

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("GDRKIT_UPDATE_GOLDEN") == "1"
KERNEL = "6.1.0-56-amd64"
EPOCH = 1767225600  # 2026-01-01T00:00:00Z: golden files must not follow the clock


# One golden tree per family, and per layout where a family has several:
# Debian up to bookworm keeps /lib paths, from trixie on /usr/lib.
TARGETS: dict[str, families.Family] = {
    "debian-bookworm": families.DebianFamily(release=families.debian_release("bookworm")),
    "debian-trixie": families.DebianFamily(release=families.debian_release("trixie")),
    "rhel": families.family("rhel"),
    "suse": families.family("suse"),
}


def _rendered(target: str) -> dict[str, render.RenderedFile]:
    plan = model.plan(TARGETS[target], kernels=(KERNEL,), source_date_epoch=EPOCH)
    return render.render(plan)


def test_every_family_has_a_golden_tree() -> None:
    assert {fam.name for fam in TARGETS.values()} == set(families.Family.registry)


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_rendered_files_match_golden(target: str) -> None:
    files = _rendered(target)
    root = GOLDEN / target
    if UPDATE:
        for old in root.rglob("*"):
            if old.is_file():
                old.unlink()
        render.write(files, root)
    expected = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    assert expected == set(files), "rendered file set changed: GDRKIT_UPDATE_GOLDEN=1 to accept"
    for rel, rendered in files.items():
        golden = (root / rel).read_text()
        assert rendered.text == golden, f"{target}/{rel} differs from its golden file"


def test_maintainer_scripts_and_rules_are_executable() -> None:
    files = _rendered("debian-trixie")
    for rel, rendered in files.items():
        if rel == "debian/rules" or rel.endswith((".postinst", ".prerm", ".postrm")):
            assert rendered.mode == 0o755, rel


def test_rendering_fails_on_an_undefined_variable(tmp_path: Path) -> None:
    env = render.environment()
    with pytest.raises(Exception, match="undefined"):
        env.from_string("{{ nothing_by_this_name }}").render()


def test_device_mode_and_group_reach_the_udev_rule() -> None:
    plan = model.plan(families.family("rhel"), device_mode="0666", device_group="gpu", source_date_epoch=EPOCH)
    rule = render.system_files(plan)["pkgroot/usr/lib/udev/rules.d/60-gdrdrv.rules"].text
    assert 'KERNEL=="gdrdrv", MODE="0666", GROUP="gpu"' in rule


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_the_packages_keep_the_node_0660_for_a_group(target: str) -> None:
    # A world-accessible node lets every local user pin GPU memory and reach
    # the driver's ioctls: the packages must never ship that by default.
    node = model.load().device_node
    assert (node.mode, node.group) == ("0660", "video"), "packages/gdrcopy.yaml device_node"
    fam = TARGETS[target]
    files = _rendered(target)
    rule_path = f"pkgroot{fam.udevrulesdir}/60-gdrdrv.rules"
    conf_path = f"pkgroot{fam.modprobedir}/gdrdrv.conf"
    for text in (files[rule_path].text, (GOLDEN / target / rule_path).read_text()):
        node_rules = [line for line in text.splitlines() if line.startswith('KERNEL=="gdrdrv"')]
        assert node_rules[0] == 'KERNEL=="gdrdrv", MODE="0660", GROUP="video"'
        # 0666 only where the admin wrote GDRDRV_ACCESS=open (an upgrade from NVIDIA's packages does).
        assert node_rules[1:] == [
            'KERNEL=="gdrdrv", TEST=="/etc/default/gdrdrv", IMPORT{file}="/etc/default/gdrdrv"',
            'KERNEL=="gdrdrv", ENV{GDRDRV_ACCESS}=="open", MODE="0666"',
        ]
    # The module creates the node 0660 already: never 0666, not even before udev runs.
    for text in (files[conf_path].text, (GOLDEN / target / conf_path).read_text()):
        [options] = [line for line in text.splitlines() if line.startswith("options gdrdrv ")]
        assert options.split()[-1] == "node_mode=0660"


def test_the_device_mode_reaches_the_module_option_with_its_leading_zero() -> None:
    plan = model.plan(families.family("debian"), device_mode="666", source_date_epoch=EPOCH)
    conf = render.system_files(plan)["pkgroot/lib/modprobe.d/gdrdrv.conf"].text
    assert "node_mode=0666" in conf, "node_mode=666 would be read as decimal"


def test_the_build_tree_udev_rule_follows_the_module_parameters() -> None:
    # gdrdrv/udev/60-gdrdrv.rules (make install_udev) sets what node_mode and
    # node_gid say, so it never widens a node the module options narrowed.
    rule = (Path(__file__).resolve().parents[2] / "gdrdrv/udev/60-gdrdrv.rules").read_text()
    [line] = [line for line in rule.splitlines() if not line.startswith("#") and line.strip()]
    assert 'GROUP="$attr{node_gid}"' in line and 'MODE="$attr{node_mode}"' in line


def test_no_dkms_package_means_no_dkms_conf() -> None:
    plan = model.plan(families.family("debian"), with_dkms=False, kernels=(KERNEL,), source_date_epoch=EPOCH)
    files = render.render(plan)
    assert not any(path.endswith("dkms.conf") for path in files)
    assert "Package: gdrdrv-dkms\n" not in files["debian/control"].text
    assert f"gdrdrv-modules-{KERNEL}" in files["debian/control"].text


@pytest.mark.parametrize(
    ("suite", "below"),
    [
        ("bullseye", "/lib"),
        ("bookworm", "/lib"),
        ("jammy", "/lib"),
        ("trixie", "/usr/lib"),
        ("forky", "/usr/lib"),
        ("sid", "/usr/lib"),
        ("noble", "/usr/lib"),
    ],
)
def test_each_release_gets_its_layout_in_every_file_that_names_one(suite: str, below: str) -> None:
    # trixie's lintian flags /lib paths (aliased-location), bookworm's dpkg and
    # lintian want them: the unit, rule, modprobe.d file and prebuilt module follow the release.
    fam = families.DebianFamily(release=families.debian_release(suite))
    plan = model.plan(fam, kernels=(KERNEL,), source_date_epoch=EPOCH)
    files = render.render(plan)
    # Layout-free: /etc, the DKMS sources, and gdrcopy_doctor (/usr/bin, /usr/share).
    fixed = ("/etc/", "/usr/src/", "/usr/bin/", "/usr/share/")
    system = [path for path in files if path.startswith("pkgroot/") and not any(d in path for d in fixed)]
    assert system and all(path.startswith(f"pkgroot{below}/") for path in system), system
    kmod = plan.package(f"gdrdrv-modules-{KERNEL}")
    assert f"{below}/modules/{KERNEL}/*/gdrdrv.ko" in kmod.contents
    assert f"modulesdir={below}/modules " in files["debian/rules"].text
    install = files[f"debian/gdrdrv-modules-{KERNEL}.install"].text.splitlines()
    assert all(line.startswith(below.lstrip("/") + "/") or line.startswith("etc/") for line in install), install
