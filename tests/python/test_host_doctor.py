"""Each doctor check against fake machines (gdrkit.host.probe.FakeProbe): seconds, no host access."""

from __future__ import annotations

from gdrkit.host import doctor
from gdrkit.host.probe import FakeProbe, Node, Output

KVER = "6.1.0-56-amd64"
DEBIAN = {"/etc/os-release": 'ID=debian\nVERSION_ID="12"\n'}
NV_VERSION = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build\n"


def test_nvidia_driver_missing_says_how_to_load_it() -> None:
    finding = doctor.check_nvidia_driver(FakeProbe())
    assert finding.status == doctor.FAIL and "modprobe nvidia" in finding.fix


def test_nvidia_driver_flavour_from_modinfo_license() -> None:
    probe = FakeProbe(files={"/proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.1\n"},
                      commands={"modinfo -F license nvidia": Output(0, "NVIDIA\n")})
    finding = doctor.check_nvidia_driver(probe)
    assert finding.status == doctor.OK and "proprietary" in finding.detail and "535.1" in finding.detail
    probe = FakeProbe(files={"/proc/driver/nvidia/version": NV_VERSION},
                      commands={"modinfo -F license nvidia": Output(0, "Dual MIT/GPL\n")})
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
    assert "dnf install kernel-devel-uname-r" in doctor.check_kernel_headers(FakeProbe(files=rocky, kernel=KVER)).fix
    ok = FakeProbe(files={**DEBIAN, f"/lib/modules/{KVER}/build/Makefile": ""})
    assert doctor.check_kernel_headers(ok).status == doctor.OK


def test_dkms_built_but_not_installed_for_running_kernel() -> None:
    probe = FakeProbe(commands={"dkms status -m gdrdrv": Output(0, "gdrdrv/2.6.1, 6.1.0-50-amd64, x86_64: installed\n")})
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
    return FakeProbe(files={"/sys/module/gdrdrv/refcnt": "0", "/sys/class/misc/gdrdrv/dev": dev},
                     nodes=nodes, groups={44: "video"})


def test_device_node_checks() -> None:
    assert doctor.check_device_node(FakeProbe()).status == doctor.FAIL
    assert "udevadm trigger" in doctor.check_device_node(_loaded(None)).fix
    stale = doctor.check_device_node(_loaded(Node(True, 240, 0, 0o660, 44)))
    assert stale.status == doctor.FAIL and "stale" in stale.detail
    world = doctor.check_device_node(_loaded(Node(True, 10, 121, 0o666, 0)))
    assert world.status == doctor.WARN and "0660" in world.fix
    good = doctor.check_device_node(_loaded(Node(True, 10, 121, 0o660, 44)))
    assert good.status == doctor.OK and "group video" in good.detail


def test_major_from_proc_devices_when_not_a_misc_device() -> None:
    probe = FakeProbe(files={"/sys/module/gdrdrv/refcnt": "0", "/proc/devices": "Character devices:\n240 gdrdrv\n"},
                      nodes={"/dev/gdrdrv": Node(True, 240, 0, 0o660, 44)})
    assert doctor.check_device_node(probe).status == doctor.OK


def test_gpudirect_and_bar1_from_nvidia_smi() -> None:
    smi = {"nvidia-smi --query-gpu=name --format=csv,noheader": Output(0, "NVIDIA GeForce RTX 3090\n"),
           "nvidia-smi -q -d MEMORY": Output(0, "BAR1 Memory Usage\n    Total : 256 MiB\n    Used : 2 MiB\n")}
    probe = FakeProbe(commands=smi)
    assert doctor.check_gpudirect(probe).status == doctor.FAIL
    assert doctor.check_bar1(probe).status == doctor.WARN
    smi = {"nvidia-smi --query-gpu=name --format=csv,noheader": Output(0, "NVIDIA H200\n"),
           "nvidia-smi -q -d MEMORY": Output(0, "BAR1 Memory Usage\n    Total : 262144 MiB\n")}
    assert doctor.check_gpudirect(FakeProbe(commands=smi)).status == doctor.OK
    assert doctor.check_bar1(FakeProbe(commands=smi)).status == doctor.OK
    assert doctor.check_bar1(FakeProbe()).status == doctor.SKIP


def test_secure_boot_with_unenrolled_dkms_key() -> None:
    probe = FakeProbe(commands={"mokutil --sb-state": Output(0, "SecureBoot enabled\n"),
                                "mokutil --test-key /var/lib/dkms/mok.pub": Output(1, "/var/lib/dkms/mok.pub is not enrolled\n"),
                                "modinfo -F signer gdrdrv": Output(0, "DKMS module signing key\n")})
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
