"""Each doctor check against fake machines (gdrkit.host.probe.FakeProbe): seconds, no host access."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gdrkit.host import doctor
from gdrkit.host.probe import FakeProbe, Node, Output
from gdrkit.packaging import model

KVER = "6.1.0-56-amd64"
DEBIAN = {"/etc/os-release": 'ID=debian\nVERSION_ID="12"\n'}
NV_VERSION = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build\n"


def test_nvidia_driver_missing_says_how_to_load_it() -> None:
    finding = doctor.check_nvidia_driver(FakeProbe())
    assert finding.status == doctor.FAIL and "modprobe nvidia" in finding.fix


def test_nvidia_driver_flavour_from_modinfo_license() -> None:
    probe = FakeProbe(
        files={"/proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.1\n"},
        commands={"modinfo -F license nvidia": Output(0, "NVIDIA\n")},
    )
    finding = doctor.check_nvidia_driver(probe)
    assert finding.status == doctor.OK and "proprietary" in finding.detail and "535.1" in finding.detail
    probe = FakeProbe(
        files={"/proc/driver/nvidia/version": NV_VERSION},
        commands={"modinfo -F license nvidia": Output(0, "Dual MIT/GPL\n")},
    )
    assert "open" in doctor.check_nvidia_driver(probe).detail


def test_p2p_symbols() -> None:
    assert doctor.check_p2p_symbols(FakeProbe(files={"/proc/kallsyms": "0 T printk\n"})).status == doctor.FAIL
    syms = "0 T nvidia_p2p_get_pages\t[nvidia]\n0 T nvidia_p2p_get_pages_persistent\t[nvidia]\n"
    finding = doctor.check_p2p_symbols(FakeProbe(files={"/proc/kallsyms": syms}))
    assert finding.status == doctor.OK and "persistent" in finding.detail


def test_missing_headers_names_the_distribution_package() -> None:
    finding = doctor.check_kernel_headers(FakeProbe(files=DEBIAN))
    assert finding.status == doctor.FAIL and finding.fix == f"apt-get install linux-headers-{KVER}"
    rocky = {"/etc/os-release": 'ID="rocky"\nID_LIKE="rhel centos fedora"\n'}
    # Quoted: the spaces of the capability belong to one argument.
    assert (
        f"dnf install 'kernel-devel-uname-r = {KVER}'"
        in doctor.check_kernel_headers(FakeProbe(files=rocky, kernel=KVER)).fix
    )
    ok = FakeProbe(files={**DEBIAN, f"/lib/modules/{KVER}/build/Makefile": ""})
    assert doctor.check_kernel_headers(ok).status == doctor.OK


def test_dkms_built_but_not_installed_for_running_kernel() -> None:
    probe = FakeProbe(
        commands={"dkms status -m gdrdrv": Output(0, "gdrdrv/2.6.1, 6.1.0-50-amd64, x86_64: installed\n")}
    )
    finding = doctor.check_dkms(probe)
    assert finding.status == doctor.FAIL and f"dkms autoinstall -k {KVER}" in finding.fix
    probe = FakeProbe(commands={"dkms status -m gdrdrv": Output(0, f"gdrdrv/2.6.1, {KVER}, x86_64: installed\n")})
    assert doctor.check_dkms(probe).status == doctor.OK
    assert doctor.check_dkms(FakeProbe()).status == doctor.SKIP


def test_versions_agree_and_disagree() -> None:
    ldconfig = Output(0, "\tlibgdrapi.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libgdrapi.so.2\n")
    good = FakeProbe(files={"/sys/module/gdrdrv/version": "2.6.1\n"}, commands={"ldconfig -p": ldconfig})
    assert doctor.check_versions(good).status == doctor.OK
    old = FakeProbe(files={"/sys/module/gdrdrv/version": "2.4\n"}, commands={"ldconfig -p": ldconfig})
    assert doctor.check_versions(old).status == doctor.WARN
    no_lib = FakeProbe(files={"/sys/module/gdrdrv/version": "2.6.1\n"}, commands={"ldconfig -p": Output(0, "")})
    assert "ldconfig" in doctor.check_versions(no_lib).fix


def _loaded(node: Node | None, dev: str = "10:121\n") -> FakeProbe:
    nodes = {"/dev/gdrdrv": node} if node else {}
    return FakeProbe(
        files={"/sys/module/gdrdrv/refcnt": "0", "/sys/class/misc/gdrdrv/dev": dev}, nodes=nodes, groups={44: "video"}
    )


def test_device_node_checks() -> None:
    assert doctor.check_device_node(FakeProbe()).status == doctor.FAIL
    assert "udevadm trigger" in doctor.check_device_node(_loaded(None)).fix
    stale = doctor.check_device_node(_loaded(Node(True, 240, 0, 0o660, 44)))
    assert stale.status == doctor.FAIL and "stale" in stale.detail
    good = doctor.check_device_node(_loaded(Node(True, 10, 121, 0o660, 44)))
    assert good.status == doctor.OK and "group video" in good.detail
    world = doctor.check_device_node(_loaded(Node(True, 10, 121, 0o666, 0)))
    assert world.status == doctor.OK and "mode 0666" in world.detail, "who may open it is node access's finding"


def _node(mode: int, gid: int, module_mode: str | None = None) -> FakeProbe:
    files = {} if module_mode is None else {"/sys/module/gdrdrv/parameters/node_mode": module_mode}
    return FakeProbe(
        files=files, nodes={"/dev/gdrdrv": Node(True, 10, 121, mode, gid)}, groups={0: "root", 44: "video"}
    )


def test_a_world_accessible_node_is_a_warning_that_says_what_it_means_and_how_to_harden() -> None:
    finding = doctor.check_node_access(_node(0o666, 0, "0666\n"))
    assert finding.status == doctor.WARN
    assert finding.detail.startswith("/dev/gdrdrv mode 0666, group root: any local user can")
    assert "pin and map" in finding.detail and "its own CUDA contexts" in finding.detail
    assert "reference GDRCopy's default" in finding.detail
    for fix in (
        "options gdrdrv node_mode=0660 node_gid=44",
        "/etc/modprobe.d/gdrdrv.conf",
        "60-gdrdrv.rules",
        "usermod -aG video",
        "docker run --device /dev/gdrdrv",
    ):
        assert fix in finding.fix, fix
    # World-readable alone is enough: ioctls need no write access to the file.
    assert doctor.check_node_access(_node(0o664, 44)).status == doctor.WARN


def test_the_hardening_fix_names_the_gid_even_where_group_video_is_unknown() -> None:
    probe = FakeProbe(nodes={"/dev/gdrdrv": Node(True, 10, 121, 0o666, 0)})
    assert "node_gid=$(getent group video | cut -d: -f3)" in doctor.check_node_access(probe).fix


def test_a_group_node_is_ok_and_names_the_group() -> None:
    finding = doctor.check_node_access(_node(0o660, 44, "0660\n"))
    assert finding.status == doctor.OK
    assert finding.detail == "/dev/gdrdrv mode 0660, group video: only root and members of video can pin GPU memory"
    # The reference driver (or an older gdrdrv) has no node_mode parameter: the node alone decides.
    assert doctor.check_node_access(_node(0o660, 44)).status == doctor.OK


def test_a_node_udev_narrowed_after_the_module_made_it_0666_is_a_warning() -> None:
    finding = doctor.check_node_access(_node(0o660, 44, "0666\n"))
    assert finding.status == doctor.WARN and "creates it 0666" in finding.detail
    assert "node_mode=0660" in finding.fix


def test_a_root_only_node_is_a_warning() -> None:
    for mode, gid in ((0o600, 44), (0o660, 0)):
        finding = doctor.check_node_access(_node(mode, gid))
        assert finding.status == doctor.WARN and "only root can use it" in finding.detail, (mode, gid)
        assert "node_gid=" in finding.fix


def test_no_node_no_access_finding() -> None:
    assert doctor.check_node_access(FakeProbe()).status == doctor.SKIP


def test_the_hardened_group_is_the_packages_group() -> None:
    assert doctor.HARDENED_GROUP == model.load().device_node.group


def test_major_from_proc_devices_when_not_a_misc_device() -> None:
    probe = FakeProbe(
        files={"/sys/module/gdrdrv/refcnt": "0", "/proc/devices": "Character devices:\n240 gdrdrv\n"},
        nodes={"/dev/gdrdrv": Node(True, 240, 0, 0o660, 44)},
    )
    assert doctor.check_device_node(probe).status == doctor.OK


def test_gpudirect_and_bar1_from_nvidia_smi() -> None:
    smi = {
        "nvidia-smi --query-gpu=name --format=csv,noheader": Output(0, "NVIDIA GeForce RTX 3090\n"),
        "nvidia-smi -q -d MEMORY": Output(0, "BAR1 Memory Usage\n    Total : 256 MiB\n    Used : 2 MiB\n"),
    }
    probe = FakeProbe(commands=smi)
    assert doctor.check_gpudirect(probe).status == doctor.FAIL
    assert doctor.check_bar1(probe).status == doctor.WARN
    smi = {
        "nvidia-smi --query-gpu=name --format=csv,noheader": Output(0, "NVIDIA H200\n"),
        "nvidia-smi -q -d MEMORY": Output(0, "BAR1 Memory Usage\n    Total : 262144 MiB\n"),
    }
    assert doctor.check_gpudirect(FakeProbe(commands=smi)).status == doctor.OK
    assert doctor.check_bar1(FakeProbe(commands=smi)).status == doctor.OK
    assert doctor.check_bar1(FakeProbe()).status == doctor.SKIP


def test_secure_boot_with_unenrolled_dkms_key() -> None:
    probe = FakeProbe(
        commands={
            "mokutil --sb-state": Output(0, "SecureBoot enabled\n"),
            "mokutil --test-key /var/lib/dkms/mok.pub": Output(1, "/var/lib/dkms/mok.pub is not enrolled\n"),
            "modinfo -F signer gdrdrv": Output(0, "DKMS module signing key\n"),
        }
    )
    finding = doctor.check_secure_boot(probe)
    assert finding.status == doctor.FAIL and "mokutil --import /var/lib/dkms/mok.pub" in finding.fix
    off = FakeProbe(commands={"mokutil --sb-state": Output(0, "SecureBoot disabled\n")})
    assert doctor.check_secure_boot(off).status == doctor.OK


def test_container_without_device() -> None:
    inside = FakeProbe(files={"/.dockerenv": ""})
    finding = doctor.check_container_access(inside)
    assert finding.status == doctor.FAIL and "--device=/dev/gdrdrv" in finding.fix


def test_report_formats() -> None:
    findings = doctor.diagnose(FakeProbe(files=DEBIAN))
    assert len(findings) == len(doctor.CHECKS)
    table = doctor.as_table(findings)
    assert "fix: apt-get install linux-headers-" in table and table.splitlines()[-1].endswith("skip")
    assert '"check": "kernel headers"' in doctor.as_json(findings)


def test_node_access_in_the_table_and_json() -> None:
    probe = _node(0o666, 0, "0666\n")
    findings = doctor.diagnose(probe)
    [access] = [f for f in findings if f.check == "node access"]
    assert access.status == doctor.WARN
    table = doctor.as_table(findings)
    assert "WARN  node access" in table and "fix: restrict it to a group" in table
    [entry] = [e for e in json.loads(doctor.as_json(findings)) if e["check"] == "node access"]
    assert entry["status"] == "warn" and "any local user" in entry["detail"] and "node_mode=0660" in entry["fix"]


# What the real nvidia-smi (Debian's 535 and 550 packages) prints on a host whose
# NVIDIA driver is not loaded: captured by tests/python/test_real_libcuda.py.
SMI_GOLDEN = Path(__file__).resolve().parent / "golden" / "nvidia-smi"


def _smi_probe(driver: str, case: str = "no-driver", files: dict[str, str] | None = None) -> FakeProbe:
    commands = {}
    for path in sorted(SMI_GOLDEN.glob(f"{driver}-{case}-*.json")):
        captured = json.loads(path.read_text())
        commands[" ".join(["nvidia-smi", *captured["args"]])] = Output(
            captured["returncode"], captured["stdout"] + captured["stderr"]
        )
    assert commands, f"no captured nvidia-smi output {driver}-{case}-*.json in {SMI_GOLDEN}"
    return FakeProbe(files=files or {}, commands=commands)


@pytest.mark.parametrize("driver", ["535", "550"])
def test_real_nvidia_smi_without_a_loaded_driver(driver: str) -> None:
    probe = _smi_probe(driver)
    finding = doctor.check_nvidia_smi(probe)
    assert finding.status == doctor.FAIL
    assert "exit status 9 (the NVIDIA driver is not loaded)" in finding.detail
    assert "couldn't communicate with the NVIDIA driver" in finding.detail  # its own words
    assert "the NVIDIA kernel module is not loaded" in finding.detail
    assert finding.fix.startswith("load it: modprobe nvidia") and "dkms status" in finding.fix
    # The checks that need nvidia-smi point at that finding instead of claiming it is missing.
    for check in (doctor.check_gpudirect, doctor.check_bar1):
        other = check(probe)
        assert other.status == doctor.SKIP and "exit status 9" in other.detail and "not installed" not in other.detail


def test_real_nvidia_smi_with_the_driver_loaded_but_unreachable() -> None:
    # The module is loaded (the version file exists) but nvidia-smi still cannot talk to it:
    # the device nodes are missing or closed, as in a container given none.
    probe = _smi_probe("550", files={"/proc/driver/nvidia/version": NV_VERSION})
    finding = doctor.check_nvidia_smi(probe)
    assert finding.status == doctor.FAIL and "/dev/nvidiactl" in finding.detail
    assert "container" in finding.fix and "modprobe" not in finding.fix


@pytest.mark.parametrize("driver", ["535", "550"])
def test_real_nvidia_smi_without_its_management_library(driver: str) -> None:
    finding = doctor.check_nvidia_smi(_smi_probe(driver, "no-nvml"))
    assert finding.status == doctor.FAIL and "exit status 12" in finding.detail
    assert "couldn't find libnvidia-ml.so" in finding.detail and "libnvidia-ml1" in finding.fix


def test_nvidia_smi_on_a_working_host_and_absent() -> None:
    probe = FakeProbe(
        commands={
            "nvidia-smi --query-gpu=driver_version,name --format=csv,noheader": Output(
                0, "580.159.04, NVIDIA H200\n580.159.04, NVIDIA H200\n"
            )
        }
    )
    finding = doctor.check_nvidia_smi(probe)
    assert finding.status == doctor.OK and finding.detail == "driver 580.159.04, 2 GPUs"
    absent = doctor.check_nvidia_smi(FakeProbe())
    assert absent.status == doctor.SKIP and "not installed" in absent.detail
    assert "not installed" in doctor.check_gpudirect(FakeProbe()).detail
