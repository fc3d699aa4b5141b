"""Build targets and their baselines: the registry, the checks' parsers, the toolchain choice, the plans (quick)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gdrkit.distro import debian, families, rpm, targets
from gdrkit.distro.arch import arch
from gdrkit.packaging import baseline, build, model, pipeline, render, toolchain
from gdrkit.system import UserError

SOURCE = build.Source(repo=Path("/nonexistent"), commit="0" * 40, epoch=1767225600)

# `readelf -V --wide` of a program linked on Debian 12 (abridged).
READELF_V = """\
Version symbols section '.gnu.version' contains 12 entries:
 Addr: 0x0000000000000618  Offset: 0x000618  Link: 6 (.dynsym)
  000:   0 (*local*)       2 (GLIBC_2.34)    3 (GLIBC_2.2.5)   1 (*global*)

Version definition section '.gnu.version_d' contains 2 entries:
  000000: Rev: 1  Flags: BASE  Index: 1  Cnt: 1  Name: libgdrapi.so.2
  0x001c: Rev: 1  Flags: none  Index: 2  Cnt: 1  Name: GLIBC_2.99

Version needs section '.gnu.version_r' contains 2 entries:
 Addr: 0x0000000000000680  Offset: 0x000680  Link: 7 (.dynstr)
  000000: Version: 1  File: libgcc_s.so.1  Cnt: 1
  0x0010:   Name: GCC_3.0  Flags: none  Version: 5
  0x0020: Version: 1  File: libc.so.6  Cnt: 3
  0x0030:   Name: GLIBC_2.34  Flags: none  Version: 4
  0x0040:   Name: GLIBC_2.2.5  Flags: none  Version: 3
  0x0050:   Name: GLIBC_2.14  Flags: none  Version: 2
"""


def test_every_claimed_target_has_a_full_baseline() -> None:
    assert {t.name for t in targets.CLAIMED} >= {"el8", "el8-arm64", "el9", "el10", "sle15", "sle15-arm64", "bullseye"}
    for target in targets.CLAIMED:
        fam = target.family
        assert target.glibc and target.default_python and target.dkms_from, target
        assert fam.unitdir.endswith("/systemd/system") and fam.udevrulesdir and fam.modprobedir, target
        assert toolchain.version_key(target.python.version) >= (3,), target
        if target.package_type == "rpm":
            assert target.dist_tag == f".{target.release}" and fam.release_name == target.release


def test_release_baselines_are_the_distributions_own() -> None:
    glibc = {name: rpm.RPM_RELEASES[name].glibc for name in ("el8", "el9", "el10", "sle15")}
    assert glibc == {"el8": "2.28", "el9": "2.34", "el10": "2.39", "sle15": "2.31"}
    assert debian.DEBIAN_RELEASES["bullseye"].glibc == "2.31"
    assert debian.DEBIAN_RELEASES["jammy"].build_suite == "bullseye"  # bullseye's 2.31 <= jammy's 2.35
    # The default python3 of EL8 and SLE 15 is 3.6: the packages name the newer one each ships.
    el8, sle15 = families.rpm_family("el8"), families.rpm_family("sle15")
    assert el8.python_requires == "python(abi) = 3.11" and el8.pythondir == "/usr/lib/python3.11/site-packages"
    assert el8.python_interpreter == "/usr/bin/python3.11"
    assert sle15.python_requires == "python311" and sle15.python_interpreter == "/usr/bin/python3.11"
    assert families.rpm_family("el10").python_requires == "python(abi) = 3.12"
    assert families.family("rhel").python_requires == "python(abi) = 3.9"  # el9 when none is named


def test_a_release_of_another_family_is_refused() -> None:
    with pytest.raises(UserError, match="family suse"):
        families.RhelFamily(rpm_release=rpm.RPM_RELEASES["sle15"])
    with pytest.raises(UserError, match="unknown RPM release"):
        families.rpm_family("el7")


def test_targets_are_named_one_by_one_or_all() -> None:
    assert [t.name for t in targets.targets("el8, el9-arm64,el8")] == ["el8", "el9-arm64"]
    assert targets.targets("all") == list(targets.CLAIMED)
    with pytest.raises(UserError, match="unknown target") as error:
        targets.targets("el7,bookworm")
    assert "el8" in str(error.value.hint)


def test_only_the_version_needs_count_and_the_newest_wins() -> None:
    assert baseline.needed_versions(READELF_V) == {"GLIBC": "2.34", "GCC": "3.0"}
    el8, el9 = targets.BY_NAME["el8"], targets.BY_NAME["el9"]
    problems = baseline.version_problems(el8, "gdrcopy_sanity", {"GLIBC": "2.34", "GCC": "3.0"})
    assert problems == ["gdrcopy_sanity needs GLIBC_2.34, newer than el8's glibc 2.28"]
    assert baseline.version_problems(el9, "gdrcopy_sanity", {"GLIBC": "2.34"}) == []
    assert baseline.version_problems(el8, "x", {"GCC": "12.0.0"}) == [
        "x needs GCC_12.0.0, newer than el8's libgcc_s (gcc) 8"
    ]


def test_requirements_are_read_against_what_the_target_ships() -> None:
    el8, el9, sle15 = targets.BY_NAME["el8"], targets.BY_NAME["el9"], targets.BY_NAME["sle15"]
    el8_rpm = ["libc.so.6(GLIBC_2.34)(64bit)", "python(abi) = 3.9", "/usr/bin/python3.11", "dkms >= 2.8"]
    problems = baseline.requirement_problems(el8, "p.rpm", el8_rpm)
    assert len(problems) == 2 and "GLIBC_2.34" in problems[0] and "python(abi) = 3.9" in problems[1]
    assert baseline.requirement_problems(el9, "p.rpm", ["python(abi) = 3.9", "libc.so.6(GLIBC_2.34)(64bit)"]) == []
    assert baseline.requirement_problems(el8, "p.rpm", ["python(abi) = 3.11"]) == []
    # EL8's own python3 is 3.6: neither its python(abi) nor /usr/bin/python3 runs the module or the doctor.
    assert len(baseline.requirement_problems(el8, "p.rpm", ["python(abi) = 3.6", "/usr/bin/python3"])) == 2
    assert baseline.requirement_problems(el9, "p.rpm", ["/usr/bin/python3"]) == []
    assert baseline.requirement_problems(sle15, "p.rpm", ["python311"]) == []
    assert baseline.requirement_problems(sle15, "p.rpm", ["python3.11"]) != []
    bullseye, bookworm = targets.BY_NAME["bullseye"], targets.BY_NAME["bookworm"]
    depends = baseline.split_depends("libc6 (>= 2.34), python3 (>= 3.8), python3:any, dkms | x")
    assert depends == ["libc6 (>= 2.34)", "python3 (>= 3.8)", "python3:any", "dkms"]
    assert baseline.requirement_problems(bullseye, "p.deb", depends) == [
        "p.deb requires libc6 (>= 2.34); bullseye has libc6 2.31"
    ]
    assert baseline.requirement_problems(bookworm, "p.deb", depends) == []
    assert baseline.requirement_problems(bullseye, "p.deb", ["python3 (>= 3.10~)"]) != []


def test_the_toolchain_links_against_the_target_glibc_only_where_this_host_is_newer() -> None:
    assert toolchain.needs_baseline_toolchain("2.28", "2.36")
    assert not toolchain.needs_baseline_toolchain("2.39", "2.36")
    assert not toolchain.needs_baseline_toolchain("2.36", "2.36")
    assert toolchain.zig_target(arch("arm64"), "2.28") == "aarch64-linux-gnu.2.28"
    assert toolchain.manylinux_tag(arch("amd64"), "2.28") == "manylinux_2_28_x86_64"
    assert toolchain.manylinux_tag(arch("arm64"), "2.31") == "manylinux_2_31_aarch64"
    with pytest.raises(UserError, match="not MAJOR.MINOR"):
        toolchain.manylinux_tag(arch("amd64"), "2")
    script = toolchain.wrapper_script(Path("/z/zig"), "cc", "x86_64-linux-gnu.2.28")
    assert script.splitlines()[0] == "#!/bin/sh"
    assert script.splitlines()[-1] == (
        'exec /z/zig cc -target x86_64-linux-gnu.2.28 -Wl,--no-gc-sections -Wl,--hash-style=gnu $pie "$@"'
    )
    # Programs are PIE; a shared object and its -fPIC objects get no PIE flag (Zig refuses them with -shared).
    cases = (
        (["-o", "p", "p.o"], "-fPIE -pie"),
        (["-c", "x.c"], "-fPIE"),
        (["-fPIC", "-c", "x.c"], ""),
        (["-shared", "-o", "l.so"], ""),
    )
    for args, pie in cases:
        shown = subprocess.run(
            ["sh", "-c", script.replace("exec /z/zig", "echo /z/zig"), "cc", *args], capture_output=True, text=True
        ).stdout.split()
        flags = [a for a in shown if a in ("-fPIE", "-pie")]
        assert flags == pie.split(), (args, shown)
    assert toolchain.wrapper_script(Path("/z/zig"), "ar", "t").splitlines()[1] == 'exec /z/zig ar "$@"'


def test_the_spec_carries_the_dist_tag_the_python_and_the_toolchain() -> None:
    fam = families.rpm_family("el8")
    assert build.rpm_dist_tag(fam) == ".el8" and build.rpm_dist_tag(families.DebianFamily()) == ""
    spec = render.render(model.plan(fam, with_dkms=True, source_date_epoch=1))["gdrcopy.spec"].text
    assert "Release: 1%{?dist}" in spec
    assert "Requires: python(abi) = 3.11" in spec and "pythondir=/usr/lib/python3.11/site-packages" in spec
    assert "CC=%{__cc} AR=%{__ar}" in spec
    tools = toolchain.Toolchain(Path("/t/zig-cc"), Path("/t/zig-ar"), "x86_64-linux-gnu.2.28")
    assert build.toolchain_rpm_args(tools) == ["--define", "__cc /t/zig-cc", "--define", "__ar /t/zig-ar"]


def test_targets_plan_one_job_each_into_their_release_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bookworm_host = tmp_path / "os-release"
    bookworm_host.write_text("ID=debian\nVERSION_ID=12\nVERSION_CODENAME=bookworm\n")
    monkeypatch.setattr(pipeline, "OS_RELEASE", bookworm_host)
    # The plan, not this host's kernel headers, is judged: no prebuilt kernels are found.
    monkeypatch.setattr("gdrkit.packaging.build.default_kernels", lambda: [])
    request = pipeline.Request(targets=("el8", "el8-arm64", "bullseye", "bookworm", "trixie-arm64"), output=tmp_path)
    plan = pipeline.plan_request(request, SOURCE)
    got = [(j.target.name, j.output.name, j.host_arch, j.build_suite) for j in plan.jobs]
    assert got == [
        ("el8", "el8", "", ""),
        ("el8-arm64", "el8", "arm64", ""),
        ("bullseye", "bullseye", "", "bullseye"),  # older than this host: in its own root
        ("bookworm", "bookworm", "", ""),
        ("trixie-arm64", "trixie", "arm64", ""),  # cross-built here
    ]
    assert not any(p.kind == "kmod" for j in plan.jobs for p in j.plan.packages)


def test_a_cross_build_for_a_release_older_than_this_host_is_refused(tmp_path: Path) -> None:
    bookworm_host = tmp_path / "os-release"
    bookworm_host.write_text("ID=debian\nVERSION_ID=12\nVERSION_CODENAME=bookworm\n")
    if toolchain.version_key(toolchain.host_glibc()) <= (2, 31):
        pytest.skip(f"this host's glibc {toolchain.host_glibc()} is not newer than bullseye's")
    with pytest.raises(UserError, match="cannot be cross-built here"):
        pipeline.deb_build_suite(debian.DEBIAN_RELEASES["bullseye"], "arm64", bookworm_host)
    assert pipeline.deb_build_suite(debian.DEBIAN_RELEASES["jammy"], "", bookworm_host) == "bullseye"
    assert pipeline.deb_build_suite(debian.DEBIAN_RELEASES["noble"], "", bookworm_host) == ""
    jammy_host = tmp_path / "jammy"
    jammy_host.write_text("ID=ubuntu\nVERSION_ID=22.04\nVERSION_CODENAME=jammy\nUBUNTU_CODENAME=jammy\n")
    assert pipeline.deb_build_suite(debian.DEBIAN_RELEASES["jammy"], "", jammy_host) == ""  # its own host


def test_the_baseline_table_has_a_row_per_package() -> None:
    report = baseline.PackageReport("el8", "gdrcopy-2.6.1-1.el8.x86_64.rpm", "2.17", "2.28", "-", ())
    bad = baseline.PackageReport("el8", "x.rpm", "2.34", "2.28", "python(abi) = 3.9", ("x.rpm needs ...",))
    lines = baseline.table([report, bad]).splitlines()
    assert lines[0].split() == [
        "target",
        "package",
        "file",
        "needs",
        "glibc",
        "target",
        "glibc",
        "python",
        "requirement",
        "ok",
    ]
    assert lines[2].split()[-1] == "yes" and lines[3].split()[-1] == "NO"


def _newc(name: str, mode: int, data: bytes) -> bytes:
    fields = [0, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0]
    header = b"070701" + b"".join(f"{f:08x}".encode() for f in fields) + name.encode() + b"\0"
    header += b"\0" * (-len(header) % 4)
    return header + data + b"\0" * (-len(data) % 4)


def test_rpm_payloads_are_read_without_a_cpio_program() -> None:
    archive = _newc("./usr/bin/x", 0o100755, b"\x7fELF...") + _newc("./usr/lib", 0o40755, b"")
    archive += _newc("TRAILER!!!", 0, b"")
    assert list(baseline.newc_files(archive)) == [("./usr/bin/x", 0o100755, b"\x7fELF..."), ("./usr/lib", 0o40755, b"")]
    with pytest.raises(ValueError, match="not a newc"):
        list(baseline.newc_files(b"x" * 120))


def test_an_rpm_build_is_for_the_named_release_else_this_hosts_else_the_default(tmp_path: Path) -> None:
    rocky8, leap, debian12 = tmp_path / "rocky8", tmp_path / "leap", tmp_path / "debian12"
    rocky8.write_text('ID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="8.10"\n')
    leap.write_text('ID="opensuse-leap"\nID_LIKE="suse opensuse"\nVERSION_ID="15.6"\n')
    debian12.write_text("ID=debian\nVERSION_ID=12\nVERSION_CODENAME=bookworm\n")
    assert pipeline.rpm_target_family("rhel", "", rocky8).release_name == "el8"
    assert pipeline.rpm_target_family("rhel", "el10", rocky8).release_name == "el10"
    assert pipeline.rpm_target_family("suse", "", leap).release_name == "sle15"
    assert pipeline.rpm_target_family("rhel", "", debian12).release_name == "el9"
    assert pipeline.rpm_target_family("rhel", "", leap).release_name == "el9"  # not a host of that family


def test_a_release_known_only_from_a_hosts_os_release_has_no_limits_to_check() -> None:
    fam = families.DebianFamily(release=debian.DebianRelease("debian", "duke", "15"))
    target = targets.target_for(fam)
    assert (target.name, target.glibc, target.default_python) == ("duke", "", "")
    assert baseline.version_problems(target, "x", {"GLIBC": "2.99"}) == []
    assert baseline.requirement_problems(target, "p.deb", ["libc6 (>= 2.99)", "python3 (>= 3.8)"]) == []


def test_the_oldest_claimed_glibc_is_the_wheels_baseline() -> None:
    """RHEL 8's 2.28 on both architectures: older than SLE 15's 2.31 and Debian 11's 2.31."""
    assert targets.oldest_glibc("amd64") == "2.28"
    assert targets.oldest_glibc("aarch64") == "2.28"
    claimed = [t.glibc for t in targets.CLAIMED if t.arch == "amd64"]
    assert all(toolchain.version_key(g) >= (2, 28) for g in claimed) and "2.28" in claimed
