"""The stand-in for NVIDIA's GDRCopy 2.6-1 packages tells the truth about them.

Upgrade and rollback tests (test_pkg_faults.py, test_pkg_lifecycle.py) start
from the stand-in that pkgkit.reference builds, so it must have what
NVIDIA's own packages have: each package's Architecture and Multi-Arch
(gdrdrv-dkms is `Architecture: any`, `Multi-Arch: same`, which makes dpkg
call it gdrdrv-dkms:amd64 and once hid a broken rm_conffile behind a
stand-in that said `all`), the meta package's dependencies, the init
script as its only conffile, registered and started by the postinst,
stopped by the prerm before `dkms remove`, unregistered on purge.  The
facts are those of the interface facts file (section 6.5) and NVIDIA's
public packaging, written down in pkgkit.reference.NVIDIA_DEB_FIELDS.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gdrkit.packaging import build
from gdrkit.system import run
from pkgkit import reference

CONTROL = reference.FIXTURE_DIR / "debian" / "control"


def test_the_stand_in_control_file_has_nvidias_fields() -> None:
    problems = reference.field_problems(reference.control_paragraphs(CONTROL.read_text()))
    assert problems == [], "\n".join(problems)


def test_a_stand_in_gdrdrv_dkms_set_back_to_architecture_all_fails_the_check() -> None:
    text = CONTROL.read_text()
    paragraph = text[text.index("Package: gdrdrv-dkms") :].split("\n\n")[0]
    assert "Architecture: any" in paragraph
    broken = text.replace(paragraph, paragraph.replace("Architecture: any", "Architecture: all"))
    problems = reference.field_problems(reference.control_paragraphs(broken))
    print(problems)
    assert problems == ["gdrdrv-dkms: Architecture is 'all', NVIDIA's is 'any'"]
    # And a meta package that no longer pulls in the tests package.
    meta = text[text.index("Package: gdrcopy\n") :]
    broken = text.replace(meta, meta.replace(",\n gdrcopy-tests (= ${binary:Version})", ""))
    assert reference.field_problems(reference.control_paragraphs(broken)) == [
        "gdrcopy: Depends lacks gdrcopy-tests (= ${binary:Version}) "
        "(has: gdrdrv-dkms (= ${binary:Version}), libgdrapi (= ${binary:Version}))"
    ]


def test_the_stand_in_scripts_do_what_nvidias_do() -> None:
    fixture = reference.FIXTURE_DIR
    rules = (fixture / "debian" / "rules").read_text()
    # debhelper 9's dh_installinit: rc links and a start in the postinst, a stop in every prerm.
    assert (fixture / "debian" / "compat").read_text().strip() == "9"
    assert "dh_installinit -pgdrdrv-dkms --name gdrdrv" in rules
    postinst = (fixture / "gdrdrv-dkms.postinst.sh").read_text()
    assert re.search(r'common\.postinst "\$NAME" "\$VERSION" "/usr/share/\$PACKAGE" "\$ARCH" "\$2"', postinst)
    prerm = (fixture / "gdrdrv-dkms.prerm.sh").read_text()
    assert 'dkms remove -m "$NAME" -v "$VERSION" --all\n' in prerm, "a failed dkms remove fails NVIDIA's prerm"
    init = (fixture / "gdrdrv.init.sh").read_text()
    assert "# Provides:       gdrcopy" in init
    assert 'mknod -m 666 "$NODE" c "$major" 0' in init
    assert "/proc/devices" in init and 'rm -f "$NODE"*' in init


@pytest.mark.slow
def test_the_built_stand_in_debs_have_nvidias_fields_conffile_and_init_script_handling(tmp_path: Path) -> None:
    debs = reference.build_debs(build.source_at("HEAD"), tmp_path / "debs")
    arch = run(["dpkg", "--print-architecture"], capture=True).stdout.strip()
    fields = {}
    for deb in debs:
        name = build.package_name(deb)
        fields[name] = reference.control_paragraphs(run(["dpkg-deb", "-f", deb], capture=True).stdout)[name]
    print(fields)
    assert reference.field_problems(fields, built=arch) == []
    assert {f["Version"] for f in fields.values()} == {reference.PACKAGE_VERSION}
    [dkms] = [deb for deb in debs if build.package_name(deb) == "gdrdrv-dkms"]
    assert dkms.name == f"gdrdrv-dkms_{reference.PACKAGE_VERSION}_{arch}.deb"
    control = tmp_path / "control"
    run(["dpkg-deb", "-e", dkms, control])
    assert (control / "conffiles").read_text().split() == [reference.INIT_SCRIPT]
    postinst = (control / "postinst").read_text()
    # Registered, then started on install (restarted on upgrade).
    assert "update-rc.d gdrdrv defaults" in postinst
    assert re.search(r"_dh_action=start\n.*\n\t\tinvoke-rc\.d gdrdrv \$_dh_action", postinst)
    prerm = (control / "prerm").read_text()
    assert "invoke-rc.d gdrdrv stop" in prerm
    assert prerm.index("dkms remove") < prerm.index("invoke-rc.d gdrdrv stop")
    postrm = (control / "postrm").read_text()
    assert re.search(r'"\$1" = "purge".*\n.*update-rc\.d gdrdrv remove', postrm)


@pytest.mark.slow
@pytest.mark.parametrize("el", [9, 8])
def test_the_stand_in_kmod_rpm_has_nvidias_files_and_scriptlets_per_el_release(el: int, tmp_path: Path) -> None:
    rpm = reference.build_kmod_rpm(tmp_path, el=el)
    assert rpm.name == "gdrcopy-kmod-2.6-1dkms.noarch.rpm"
    query = run(["rpm", "-qp", "--provides", "--list", "--scripts", rpm], capture=True).stdout
    print(query)
    assert "gdrcopy-kmod = 2.6-1" in query
    if el >= 9:
        assert "/usr/lib/systemd/system/gdrcopy.service" in query and "/usr/libexec/gdrcopy/gdrcopy" in query
        assert "/etc/init.d/gdrcopy" not in query
        service = ["systemctl enable gdrcopy", "systemctl start gdrcopy", "systemctl stop gdrcopy"]
    else:
        assert "/etc/init.d/gdrcopy" in query and "gdrcopy.service" not in query
        service = ["chkconfig --add gdrcopy", "service gdrcopy start", "service gdrcopy stop", "chkconfig --del"]
    for line in service + ["dkms add -m gdrdrv -v 2.6", "dkms remove -m gdrdrv -v 2.6 -q --all --rpm_safe_upgrade"]:
        assert line in query, line
    preun = query[query.index("preuninstall scriptlet") :]
    stop = re.search(r"systemctl stop gdrcopy|service gdrcopy stop", preun)
    assert stop is not None and stop.start() < preun.index("dkms remove")
