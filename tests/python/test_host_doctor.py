"""Each doctor check against fake machines (gdrkit.gdrcopy_doctor.probe.FakeProbe): seconds, no host access."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pytest

from gdrkit.system import ensure_debian_packages
from gdrkit.gdrcopy_doctor import cli, consumers, doctor
from gdrkit.gdrcopy_doctor.consumers import Gate
from gdrkit.gdrcopy_doctor.probe import Account, FakeProbe, Loaded, Node, Output, Probe
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
    assert finding.status == doctor.FAIL and finding.fix.startswith(f"apt-get install linux-headers-{KVER} (or ")
    assert f"apt-get install gdrdrv-modules-{KVER}" in finding.fix
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


def _node(mode: int, gid: int, module_mode: str | None = None, members: tuple[str, ...] = ("alice",)) -> FakeProbe:
    files = {} if module_mode is None else {"/sys/module/gdrdrv/parameters/node_mode": module_mode}
    return FakeProbe(
        files=files,
        nodes={"/dev/gdrdrv": Node(True, 10, 121, mode, gid)},
        groups={0: "root", 44: "video"},
        members={44: members},
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
    assert finding.detail == (
        "/dev/gdrdrv mode 0660, group video: only root and members of video can pin GPU memory; members of video: alice"
    )
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


GPU_FILES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm", "/dev/null")
ACCOUNTS = (Account("root", 0, 0), Account("nvidia-persistenced", 112, 118), Account("alice", 1000, 1000),
            Account("bob", 1001, 1001), Account("carol", 1002, 1002))  # fmt: skip


def _status(uid: int, groups: str = "", gid: int | None = None) -> str:
    """A /proc/PID/status as the kernel writes it: real, effective, saved and filesystem ids."""
    gid = uid if gid is None else gid
    ids = "\t".join([str(uid)] * 4), "\t".join([str(gid)] * 4)
    return f"Name:\tpython3\nUmask:\t0022\nUid:\t{ids[0]}\nGid:\t{ids[1]}\nGroups:\t{groups}\n"


def _busy_node(
    processes: Mapping[int, tuple[str, list[str] | None]],
    members: tuple[str, ...] = ("alice",),
    files: dict[str, str] | None = None,
    euid: int = 0,
) -> FakeProbe:
    """A 0660 group-video node and processes: pid -> (its /proc/PID/status, its open files or None unreadable)."""
    return FakeProbe(
        files={**(files or {}), **{f"/proc/{pid}/status": status for pid, (status, _) in processes.items()}},
        nodes={"/dev/gdrdrv": Node(True, 10, 121, 0o660, 44)},
        groups={0: "root", 44: "video"},
        members={44: members},
        users=ACCOUNTS,
        fds={pid: open_files for pid, (_, open_files) in processes.items()},
        effective_uid=euid,
    )


def test_an_empty_group_is_a_warning_that_only_root_can_pin() -> None:
    finding = doctor.check_node_access(_node(0o660, 44, "0660\n", members=()))
    assert finding.status == doctor.WARN
    assert "group video has no members" in finding.detail and "only root can pin GPU memory" in finding.detail
    assert "usermod -aG video USER" in finding.fix and "supplementalGroups [44]" in finding.fix
    # Without the packaged rule that reads /etc/default/gdrdrv, the mode is wherever 0660 was set.
    assert "mode 0666 where 0660 was set" in finding.fix and "GDRDRV_ACCESS" not in finding.fix


def test_the_open_access_fix_is_the_packages_setting_where_their_rule_reads_it() -> None:
    rule = 'KERNEL=="gdrdrv", ENV{GDRDRV_ACCESS}=="open", MODE="0666"\n'
    for directory in ("/usr/lib/udev/rules.d", "/lib/udev/rules.d"):
        probe = _busy_node({}, members=(), files={f"{directory}/60-gdrdrv.rules": rule})
        fix = doctor.check_node_access(probe).fix
        assert "GDRDRV_ACCESS=open in /etc/default/gdrdrv, then udevadm trigger --sysname-match=gdrdrv" in fix
    # A copy in /etc/udev/rules.d replaces the packaged rule (udev's precedence): its own mode is the way.
    mine = {
        "/etc/udev/rules.d/60-gdrdrv.rules": 'KERNEL=="gdrdrv", MODE="0660"\n',
        "/usr/lib/udev/rules.d/60-gdrdrv.rules": rule,
    }
    assert "GDRDRV_ACCESS" not in doctor.check_node_access(_busy_node({}, members=(), files=mine)).fix


def test_open_access_asked_for_but_not_applied_is_a_warning() -> None:
    rule = {"/usr/lib/udev/rules.d/60-gdrdrv.rules": 'KERNEL=="gdrdrv", ENV{GDRDRV_ACCESS}=="open", MODE="0666"\n'}
    written = "# Written by gdrdrv-dkms on upgrade from NVIDIA's GDRCopy packages.\nGDRDRV_ACCESS=open\n"
    finding = doctor.check_node_access(_busy_node({}, files={**rule, "/etc/default/gdrdrv": written}))
    assert finding.status == doctor.WARN and "GDRDRV_ACCESS=open in /etc/default/gdrdrv asks for 0666" in finding.detail
    assert finding.fix.startswith("udevadm trigger --sysname-match=gdrdrv")
    for chosen in ('GDRDRV_ACCESS=open\nGDRDRV_ACCESS="group"\n', "# GDRDRV_ACCESS=open\n"):
        probe = _busy_node({}, files={**rule, "/etc/default/gdrdrv": chosen})
        assert doctor.check_node_access(probe).status == doctor.OK, chosen
    # A rule that does not read the file (an admin's copy in /etc) makes the setting moot.
    mine = {"/etc/udev/rules.d/60-gdrdrv.rules": 'KERNEL=="gdrdrv", MODE="0660"\n'}
    moot = _busy_node({}, files={**rule, **mine, "/etc/default/gdrdrv": written})
    assert doctor.check_node_access(moot).status == doctor.OK


def test_a_node_opened_by_the_setting_is_hardened_by_it() -> None:
    rule = {"/usr/lib/udev/rules.d/60-gdrdrv.rules": 'KERNEL=="gdrdrv", ENV{GDRDRV_ACCESS}=="open", MODE="0666"\n'}
    files = {**rule, "/etc/default/gdrdrv": "GDRDRV_ACCESS=open\n"}
    upgraded = dataclasses.replace(_node(0o666, 44), files=files)
    finding = doctor.check_node_access(upgraded)
    assert finding.status == doctor.WARN and "any local user" in finding.detail
    assert "GDRDRV_ACCESS=open in /etc/default/gdrdrv asks for it" in finding.detail
    assert "usermod -aG video USER), then GDRDRV_ACCESS=group in /etc/default/gdrdrv" in finding.fix
    # Without the setting, the general ways to restrict it.
    assert "restrict it to a group" in doctor.check_node_access(dataclasses.replace(upgraded, files=rule)).fix


def test_a_primary_group_or_a_running_member_is_a_member() -> None:
    primary = _busy_node({}, members=())
    primary = dataclasses.replace(primary, users=(*ACCOUNTS, Account("dave", 1003, 44)))
    finding = doctor.check_node_access(primary)
    assert finding.status == doctor.OK and "members of video: dave" in finding.detail
    # A directory (LDAP, SSSD) may not list a group's members; a process with the group proves one.
    running = _busy_node({7: (_status(1005, "44 1005"), [])}, members=())
    assert doctor.check_node_access(running).status == doctor.OK


def test_outsiders_on_the_gpu_are_a_warning_naming_them() -> None:
    probe = _busy_node(
        {
            10: (_status(1001), list(GPU_FILES)),  # bob: not in video
            11: (_status(1001), ["/dev/nvidiactl"]),
            12: (_status(1002), ["/dev/nvidia3"]),  # carol
            13: (_status(1002), ["/dev/null", "/dev/dri/renderD128"]),  # not an NVIDIA GPU
            14: (_status(1000, "44 1000"), list(GPU_FILES)),  # alice, a member
            15: (_status(0), list(GPU_FILES)),  # root
            16: (_status(112, "", 118), list(GPU_FILES)),  # nvidia-persistenced, a system account
        }
    )
    finding = doctor.check_node_access(probe)
    assert finding.status == doctor.WARN
    assert "3 processes of 2 users outside video hold an NVIDIA GPU open: bob (2 processes), carol (1)" in (
        finding.detail
    )
    assert "run without GDRCopy (NCCL, UCX and NVSHMEM say so only in debug logs)" in finding.detail
    assert "alice" not in finding.detail.split("members of video")[0], "a member is not an outsider"
    assert "root" not in finding.detail.split(": ", 1)[1] and "nvidia-persistenced" not in finding.detail
    assert "usermod -aG video USER for each of bob, carol, then restart their jobs" in finding.fix
    assert "supplementalGroups [44]" in finding.fix and "mode 0666" in finding.fix
    assert "has no members" not in finding.detail


def test_members_root_and_system_accounts_on_the_gpu_are_fine() -> None:
    probe = _busy_node(
        {
            14: (_status(1000, "44 1000"), list(GPU_FILES)),
            15: (_status(1001, "", 44), list(GPU_FILES)),  # bob, video as his primary group
            16: (_status(0), list(GPU_FILES)),
            17: (_status(112, "", 118), list(GPU_FILES)),
            18: (_status(1002), ["/dev/null"]),  # carol, outside but not on the GPU
        }
    )
    finding = doctor.check_node_access(probe)
    assert finding.status == doctor.OK, finding
    # login.defs may put regular users lower: then 112 is one.
    lower = dataclasses.replace(probe, files={**probe.files, "/etc/login.defs": "UID_MIN\t\t 100\n"})
    assert "nvidia-persistenced (1 process)" in doctor.check_node_access(lower).detail


def test_one_outsider_is_named_in_the_fix_and_a_late_joiner_is_told_to_restart() -> None:
    alone = doctor.check_node_access(_busy_node({10: (_status(1001), ["/dev/nvidia0"])}))
    assert "1 process of 1 user outside video holds" in alone.detail and "usermod -aG video bob, then" in alone.fix
    # bob is listed in video now, but his process started before: it still lacks the group.
    late = doctor.check_node_access(_busy_node({10: (_status(1001), ["/dev/nvidia0"])}, members=("alice", "bob")))
    assert late.status == doctor.WARN and "bob joined video after those processes started" in late.detail
    assert late.fix.startswith("restart their jobs")
    # A pod's user the host does not know by name.
    pod = doctor.check_node_access(_busy_node({10: (_status(1000680000), ["/dev/nvidia0"])}))
    assert "uid 1000680000 (1 process)" in pod.detail and "usermod -aG video USER, then" in pod.fix


def test_many_outsiders_are_counted_not_listed() -> None:
    processes = {pid: (_status(2000 + pid), ["/dev/nvidiactl"]) for pid in range(1, 6)}
    detail = doctor.check_node_access(_busy_node(processes)).detail
    assert "5 processes of 5 users outside video" in detail and "and 2 more users" in detail


def test_unreadable_processes_make_the_check_partial_not_a_warning() -> None:
    # The doctor as alice: bob's /proc/PID/fd is not hers to read.
    probe = _busy_node(
        {10: (_status(1001), None), 11: (_status(1002), None), 14: (_status(1000, "44 1000"), list(GPU_FILES))},
        euid=1000,
    )
    finding = doctor.check_node_access(probe)
    assert finding.status == doctor.OK
    assert "partial: the open files of 2 processes of 2 users outside video are not readable by this user" in (
        finding.detail
    )
    assert "run gdrcopy_doctor as root" in finding.detail
    # A member's unreadable files do not matter: it may open the node anyway.
    member = _busy_node({14: (_status(1003, "44"), None)}, euid=1000)
    assert "partial" not in doctor.check_node_access(member).detail
    # hidepid hides the others altogether: say so.
    mountinfo = "22 28 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:13 - proc proc rw,hidepid=invisible\n"
    hidden = doctor.check_node_access(_busy_node({}, files={"/proc/self/mountinfo": mountinfo}, euid=1000))
    assert hidden.status == doctor.OK and "partial: /proc is mounted hidepid=invisible" in hidden.detail
    as_root = doctor.check_node_access(_busy_node({}, files={"/proc/self/mountinfo": mountinfo}))
    assert "partial" not in as_root.detail


def test_in_a_container_the_group_is_the_hosts_but_its_processes_are_checked() -> None:
    probe = _busy_node({10: (_status(1001), ["/dev/nvidia0"])}, members=(), files={"/.dockerenv": ""})
    finding = doctor.check_node_access(probe)
    assert "has no members" not in finding.detail and "the members of video are the host's" in finding.detail
    assert finding.status == doctor.WARN and "bob (1 process)" in finding.detail


def test_left_out_users_never_fail_the_node() -> None:
    probe = _busy_node({10: (_status(1001), ["/dev/nvidia0"])}, members=())
    assert doctor.check_node_access(probe).status == doctor.WARN
    findings = [doctor.check_node_access(probe)]
    assert cli.exit_status(findings, gpu=True) == cli.HEALTHY


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (_status(1001, "44 27"), doctor.Credentials(1001, frozenset({1001, 44, 27}))),
        # setuid/setgid: open() goes by the filesystem ids (the 4th).
        ("Uid:\t1001\t0\t0\t0\nGid:\t1001\t5\t5\t5\nGroups:\t\n", doctor.Credentials(0, frozenset({5}))),
        ("Uid:\t1001\n", None),
        ("", None),
    ],
)
def test_process_credentials(status: str, expected: doctor.Credentials | None) -> None:
    assert doctor.process_credentials(status) == expected


def test_the_real_probe_reads_open_files_only_where_it_may() -> None:
    if os.geteuid() != 0:
        pytest.skip("starting processes as other users needs root")
    # The doctor as the packages install it (a package of its own), where the other
    # user can read it: a checkout may sit in a directory only root may enter.
    lib = Path(tempfile.mkdtemp(prefix="gdrkit-doctor-"))
    lib.chmod(0o755)
    shutil.copytree(Path(doctor.__file__).parent, lib / "gdrcopy_doctor", ignore=shutil.ignore_patterns("__pycache__"))
    # Debian's python3, as the packaged doctor runs: the test's own may sit where other users may not go.
    ensure_debian_packages(["python3"])
    python = "/usr/bin/python3"
    holder = subprocess.Popen(
        [python, "-c", "import sys, time; f = open('/dev/null'); print(flush=True); time.sleep(60)"],
        user=64321, group=64321, extra_groups=[44], stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"\n"
        assert "/dev/null" in (Probe().open_files(holder.pid) or [])
        assert doctor.process_credentials(Probe().read(f"/proc/{holder.pid}/status") or "") == doctor.Credentials(
            64321, frozenset({64321, 44})
        )
        look = (
            "import sys; sys.path.insert(0, sys.argv[1]); from gdrcopy_doctor.probe import Probe;"
            " print(Probe().open_files(int(sys.argv[2])), Probe().open_files(99999999))"
        )
        other = subprocess.run(
            [python, "-I", "-c", look, str(lib), str(holder.pid)],
            user=64322, group=64322, extra_groups=[], capture_output=True, text=True,
        )  # fmt: skip
        assert other.returncode == 0, other.stderr
        assert other.stdout.split() == ["None", "[]"], "another user's: unreadable; a process gone: nothing open"
    finally:
        holder.kill()
        holder.wait()
        shutil.rmtree(lib, ignore_errors=True)


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


# ---- the consumers' view: library names, module age, backend and gates ----

LIB = "/usr/lib/x86_64-linux-gnu/libgdrapi.so.2.6.1"
ROCKY = {"/etc/os-release": 'ID="rocky"\nID_LIKE="rhel centos fedora"\n'}
SLES = {"/etc/os-release": 'ID="sles"\nVERSION_ID="15.6"\n'}
NODE = Node(True, 10, 121, 0o660, 44)


def _libs(
    unversioned: bool = True, soname: bool = True, version: tuple[int, int] = (2, 6), path: str = LIB
) -> dict[str, Loaded]:
    libs = {}
    if unversioned:
        libs["libgdrapi.so"] = Loaded("libgdrapi.so", path, "", version)
    if soname:
        libs["libgdrapi.so.2"] = Loaded("libgdrapi.so.2", LIB, "", version)
    return libs


def _host(
    module: str | None = "2.6.1",
    node: bool = True,
    libs: dict[str, Loaded] | None = None,
    files: dict[str, str] | None = None,
    cuda: int | None = 13000,
    vulkan: bool = False,
    env: dict[str, str] | None = None,
) -> FakeProbe:
    extra = dict(files or DEBIAN)
    if module is not None:
        extra |= {"/sys/module/gdrdrv/version": module + "\n", "/sys/module/gdrdrv/refcnt": "0"}
    if vulkan:
        extra["/usr/share/vulkan/icd.d/nvidia_icd.json"] = "{}"
    libraries = _libs() if libs is None else dict(libs)
    if vulkan:
        libraries["libvulkan.so.1"] = Loaded("libvulkan.so.1", "/usr/lib/x86_64-linux-gnu/libvulkan.so.1.3.239")
    return FakeProbe(
        files=extra,
        nodes={"/dev/gdrdrv": NODE} if node else {},
        libraries=libraries,
        cuda_version=cuda,
        env=env or {},
    )


def _gates(probe: FakeProbe) -> dict[str, Gate]:
    finding = doctor.check_consumer_gates(probe)
    return {gate.consumer: gate for gate in finding.gates}


def test_both_names_open_the_library_by_the_real_loader_rules() -> None:
    finding = doctor.check_library_names(_host())
    assert finding.status == doctor.OK
    assert f"libgdrapi.so -> {LIB} (runtime 2.6)" in finding.detail and "libgdrapi.so.2 -> " in finding.detail


@pytest.mark.parametrize(
    "files, command",
    [(DEBIAN, "apt-get install libgdrapi"), (ROCKY, "dnf install gdrcopy"), (SLES, "zypper install gdrcopy")],
)
def test_a_library_without_its_unversioned_name_fails_with_the_familys_install_command(
    files: dict[str, str], command: str
) -> None:
    """The RPM layout before issue 22: libgdrapi.so only in gdrcopy-devel, so NCCL runs without GDRCopy."""
    finding = doctor.check_library_names(_host(libs=_libs(unversioned=False), files=files))
    assert finding.status == doctor.FAIL
    assert 'dlopen("libgdrapi.so") fails' in finding.detail
    for consumer in ("NCCL", "aws-ofi-nccl", "DPDK", "libfabric < 2.4"):
        assert consumer in finding.detail
    assert command in finding.fix
    if files is not DEBIAN:
        assert "apt" not in finding.fix, "an RPM node's fix is dnf or zypper"


def test_a_library_without_its_soname_fails_and_names_its_consumers() -> None:
    finding = doctor.check_library_names(_host(libs=_libs(soname=False), files=ROCKY))
    assert finding.status == doctor.FAIL and 'dlopen("libgdrapi.so.2") fails' in finding.detail
    assert "NVSHMEM" in finding.detail and "dnf install gdrcopy" in finding.fix


def test_no_library_at_all_fails() -> None:
    finding = doctor.check_library_names(_host(libs={}))
    assert finding.status == doctor.FAIL and "neither" in finding.detail and "apt-get install libgdrapi" in finding.fix


def test_two_names_that_open_different_files_are_a_warning() -> None:
    stray = _libs(path="/usr/local/lib/libgdrapi.so.2.4.1", version=(2, 4))
    finding = doctor.check_library_names(_host(libs=stray))
    assert finding.status == doctor.WARN and "/usr/local/lib/libgdrapi.so.2.4.1 (runtime 2.4)" in finding.detail


def test_a_module_as_new_as_the_library_is_ok() -> None:
    assert doctor.check_module_age(_host(module="2.6.1")).status == doctor.OK
    assert doctor.check_module_age(_host(module=None)).status == doctor.SKIP


@pytest.mark.parametrize(
    "files, dkms, prebuilt",
    [
        (DEBIAN, "apt-get install gdrdrv-dkms", f"apt-get install gdrdrv-modules-{KVER}"),
        (ROCKY, "dnf install gdrcopy-kmod", f"dnf install gdrcopy-kmod-{KVER}"),
        (SLES, "zypper install gdrcopy-kmod", f"zypper install gdrcopy-kmod-{KVER}"),
    ],
)
def test_a_module_older_than_the_library_says_how_to_upgrade_it(
    files: dict[str, str], dkms: str, prebuilt: str
) -> None:
    finding = doctor.check_module_age(_host(module="2.4", files=files))
    assert finding.status == doctor.WARN and "gdrdrv 2.4, libgdrapi 2.6" in finding.detail
    assert "older than the library" in finding.detail
    assert dkms in finding.fix and prebuilt in finding.fix and "upgrade gdrdrv to 2.6" in finding.fix


def test_in_a_container_the_module_is_the_hosts() -> None:
    """aws-ofi-nccl#1350: a node with gdrdrv 2.4 and a container libgdrapi 2.5."""
    probe = _host(module="2.4", libs=_libs(version=(2, 5)), files={**DEBIAN, "/.dockerenv": ""})
    finding = doctor.check_module_age(probe)
    assert finding.status == doctor.WARN and "the host's: this is a container" in finding.detail
    assert "on the host" in finding.fix and "the container image's" in finding.fix
    gates = _gates(probe)
    assert not gates["aws-ofi-nccl GPU-initiated networking"].passed
    assert "min(2.5, 2.4) = 2.4 < 2.5" in gates["aws-ofi-nccl GPU-initiated networking"].reason


def test_every_gate_passes_with_gdrdrv_and_library_of_this_release() -> None:
    finding = doctor.check_consumer_gates(_host())
    assert finding.status == doctor.OK and finding.fix == ""
    assert "backend gdrdrv" in finding.detail and "library 2.6, driver 2.6, aws-ofi-nccl min 2.6" in finding.detail
    gates = {g.consumer: g for g in finding.gates}
    assert all(g.passed for g in gates.values()), gates
    assert set(gates) == {"UCX", "NCCL", "aws-ofi-nccl GPU-initiated networking", "MSCCL++", "NVSHMEM"}
    nvshmem = gates["NVSHMEM"].reason
    assert "runtime minor 6" in nvshmem and "newer header (2.7 or later) disables it" in nvshmem


@pytest.mark.parametrize(
    "library, module, failing",
    [
        # UCX built against >= 2.4 drops gdr_copy on a runtime <= 2.3.
        ((2, 3), "2.6.1", {"UCX", "aws-ofi-nccl GPU-initiated networking"}),
        # NCCL: library and driver >= 2.1.
        ((2, 0), "2.6", {"UCX", "NCCL", "aws-ofi-nccl GPU-initiated networking"}),
        ((2, 6), "2.0", {"NCCL", "aws-ofi-nccl GPU-initiated networking", "MSCCL++"}),
        # aws-ofi-nccl takes min(runtime, driver); MSCCL++ the driver alone.
        ((2, 4), "2.6", {"aws-ofi-nccl GPU-initiated networking"}),
        ((2, 6), "2.4", {"aws-ofi-nccl GPU-initiated networking", "MSCCL++"}),
        ((2, 5), "2.5.0", set()),
        # NVSHMEM: the major must be its headers' (2).
        ((3, 0), "3.0", {"NVSHMEM"}),
    ],
)
def test_each_gate_at_its_edge(library: tuple[int, int], module: str, failing: set[str]) -> None:
    gates = _gates(_host(module=module, libs=_libs(version=library)))
    assert {name for name, gate in gates.items() if not gate.passed} == failing, gates


def test_msccl_needs_the_device_node_even_where_another_backend_opens() -> None:
    gates = _gates(_host(module=None, node=False, cuda=13030))
    assert not gates["MSCCL++"].passed and "/dev/gdrdrv is missing" in gates["MSCCL++"].reason
    assert gates["NCCL"].passed


def test_dmabuf_backend_reports_the_librarys_interface_version() -> None:
    finding = doctor.check_consumer_gates(_host(module=None, node=False, cuda=13030))
    assert "backend dmabuf" in finding.detail and "driver 2.6" in finding.detail
    assert finding.status == doctor.WARN and "MSCCL++" in finding.detail.split("fail:")[1]
    assert "apt-get install gdrdrv-dkms" in finding.fix


OPTED_IN = DEBIAN | {"/etc/gdrcopy.conf": "# the packages' file\nallow_vulkan = yes\n"}


def test_without_opting_in_a_module_free_node_gives_no_backend_as_nvidias_library() -> None:
    """Issue 35: the H200's 580 driver, no gdrdrv, Vulkan there: gdr_open() fails unless the node asks."""
    for files in (DEBIAN, DEBIAN | {"/etc/gdrcopy.conf": "allow_vulkan = no\n"}):
        finding = doctor.check_consumer_gates(_host(module=None, node=False, cuda=13000, vulkan=True, files=files))
        assert finding.detail.startswith("no backend: gdr_open() fails:"), finding.detail
        assert "vulkan: not tried unless asked (GDRCOPY_BACKEND=vulkan, or allow_vulkan = yes in" in finding.detail
        assert "a process gets no backend without opting in to vulkan and vulkan with it" in finding.detail
        assert all("runs without GDRCopy" in g.reason for g in finding.gates)
    assert (
        "(/etc/gdrcopy.conf: allow_vulkan not set)"
        in doctor.check_consumer_gates(_host(module=None, node=False, cuda=13000, vulkan=True)).detail
    )
    # The process's own opt-in, and the file GDRCOPY_CONFIG_FILE names instead of the node's.
    forced = doctor.check_consumer_gates(
        _host(module=None, node=False, cuda=13000, vulkan=True, env={"GDRCOPY_BACKEND": "vulkan"})
    )
    assert forced.detail.startswith("backend vulkan"), forced.detail
    other = _host(module=None, node=False, cuda=13000, vulkan=True, env={"GDRCOPY_CONFIG_FILE": "/opt/g.conf"},
                  files=DEBIAN | {"/opt/g.conf": "allow_vulkan = on"})  # fmt: skip
    assert doctor.check_consumer_gates(other).detail.startswith("backend vulkan")


def test_with_gdrdrv_the_opt_in_changes_nothing() -> None:
    finding = doctor.check_consumer_gates(_host(vulkan=True, files=OPTED_IN))
    assert finding.detail.startswith("backend gdrdrv")
    assert "a process gets gdrdrv without opting in to vulkan and gdrdrv with it" in finding.detail
    assert "this node opts in" not in finding.detail


def test_backend_names_as_the_library_takes_them() -> None:
    dmabuf = doctor.check_consumer_gates(_host(module=None, node=False, cuda=13030, env={"GDRCOPY_BACKEND": "dma-buf"}))
    assert dmabuf.detail.startswith("backend dmabuf"), dmabuf.detail
    wrong = doctor.check_consumer_gates(_host(cuda=13030, env={"GDRCOPY_BACKEND": "vulcan"}))
    assert "GDRCOPY_BACKEND=vulcan names no backend (it accepts gdrdrv, dmabuf, vulkan)" in wrong.detail


def test_vulkan_backend_with_nvidias_vulkan_driver_reports_2_6_and_says_what_it_pins() -> None:
    """The H200's 580 driver (CUDA 13.0), the node opted in: vulkan pins cuMemCreate POSIX-FD memory."""
    finding = doctor.check_consumer_gates(_host(module=None, node=False, cuda=13000, vulkan=True, files=OPTED_IN))
    assert "backend vulkan" in finding.detail and "driver 2.6," in finding.detail
    assert "this node opts in: consumers that pin cudaMalloc memory fail there" in finding.detail
    assert "POSIX-FD shareable handles" in finding.detail and "not cudaMalloc" in finding.detail
    gates = {g.consumer: g for g in finding.gates}
    assert gates["NCCL"].passed and gates["NVSHMEM"].passed and not gates["MSCCL++"].passed


def test_vulkan_without_nvidias_vulkan_driver_reports_0_0_enodev() -> None:
    probe = _host(module=None, node=False, cuda=13000, vulkan=True)
    probe = FakeProbe(
        files={k: v for k, v in probe.files.items() if "icd.d" not in k} | {"/etc/gdrcopy.conf": "allow_vulkan=yes"},
        libraries=probe.libraries,
        cuda_version=13000,
    )
    finding = doctor.check_consumer_gates(probe)
    assert "backend vulkan" in finding.detail and "driver 0.0 (ENODEV)" in finding.detail
    gates = {g.consumer: g for g in finding.gates}
    assert not gates["NCCL"].passed and "driver 0.0 < 2.1" in gates["NCCL"].reason
    assert not gates["MSCCL++"].passed and "ENODEV" in gates["MSCCL++"].reason


def test_no_backend_means_every_consumer_runs_without_gdrcopy() -> None:
    finding = doctor.check_consumer_gates(_host(module=None, node=False, cuda=None))
    assert "no backend: gdr_open() fails" in finding.detail and "pass: none" in finding.detail
    assert "no libcuda.so.1" in finding.detail
    assert all(not g.passed and "runs without GDRCopy" in g.reason for g in finding.gates)


def test_a_forced_backend_is_the_only_one_considered() -> None:
    finding = doctor.check_consumer_gates(_host(env={"GDRCOPY_BACKEND": "vulkan"}, cuda=13000))
    assert "no backend" in finding.detail and "only vulkan is allowed" in finding.detail
    dmabuf = doctor.check_consumer_gates(_host(env={"GDRCOPY_USE_DMABUF_MMAP": "1"}, cuda=13030))
    assert "backend dmabuf" in dmabuf.detail


def test_gates_of_a_missing_name_fail_with_the_runtime_fix() -> None:
    finding = doctor.check_consumer_gates(_host(libs=_libs(unversioned=False), files=ROCKY))
    gates = {g.consumer: g for g in finding.gates}
    assert not gates["NCCL"].passed and 'dlopen("libgdrapi.so") fails' in gates["NCCL"].reason
    assert gates["UCX"].passed and gates["NVSHMEM"].passed
    assert "dnf install gdrcopy" in finding.fix


def test_gates_in_the_json_and_the_table() -> None:
    findings = doctor.diagnose(_host(module="2.4"))
    entries = {e["check"]: e for e in json.loads(doctor.as_json(findings))}
    assert "gates" not in entries["kernel headers"]
    gates = {g["consumer"]: g for g in entries["consumer gates"]["gates"]}
    assert gates["NCCL"]["passed"] is True and gates["MSCCL++"]["passed"] is False
    assert (
        gates["MSCCL++"]["rule"].startswith("access(/dev/gdrdrv)") and "driver 2.4 < 2.5" in gates["MSCCL++"]["reason"]
    )
    assert entries["module age"]["status"] == "warn"
    table = doctor.as_table(findings)
    assert "pass NCCL: library 2.6 >= 2.1; driver 2.4 >= 2.1" in table and "FAIL MSCCL++: driver 2.4 < 2.5" in table


def test_the_real_loader_finds_a_library_by_each_name(tmp_path: Path) -> None:
    """Probe.dlopen against a real shared object: the dynamic loader's search, not a file test."""
    source = tmp_path / "lib.c"
    source.write_text("void gdr_runtime_get_version(int *major, int *minor) { *major = 2; *minor = 6; }\n")
    built = tmp_path / "libgdrapi.so.2.6.1"
    ensure_debian_packages(["gcc", "libc6-dev"])
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libgdrapi.so.2", "-o", str(built), str(source)], check=True)
    (tmp_path / "libgdrapi.so.2").symlink_to(built.name)
    probe = Probe()
    env = {"LD_LIBRARY_PATH": str(tmp_path)}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        soname = probe.dlopen("libgdrapi.so.2")
        unversioned = probe.dlopen("libgdrapi.so")
        (tmp_path / "libgdrapi.so").symlink_to("libgdrapi.so.2")
        # A new Probe: one Probe asks the loader once per name.
        linked = Probe().dlopen("libgdrapi.so")
    assert soname == Loaded("libgdrapi.so.2", str(built), "", (2, 6))
    assert unversioned.error and "libgdrapi.so" in unversioned.error and unversioned.path == ""
    assert linked == Loaded("libgdrapi.so", str(built), "", (2, 6))


def test_the_gates_fix_names_what_is_too_old() -> None:
    old_library = doctor.check_consumer_gates(_host(libs=_libs(version=(2, 3))))
    assert "apt-get install libgdrapi" in old_library.fix and "upgrade gdrdrv" not in old_library.fix
    old_module = doctor.check_consumer_gates(_host(module="2.4", files=ROCKY))
    assert "upgrade gdrdrv to 2.6 or newer here: dnf install gdrcopy-kmod" in old_module.fix
    assert "install gdrcopy," not in old_module.fix


@pytest.mark.parametrize(
    "text, version",
    [("2.6.1", (2, 6)), ("2.4", (2, 4)), ("v2.5-1", (2, 5)), ("2.6.1-1dkms", (2, 6)), ("", None), ("x.y", None)],
)
def test_module_and_package_versions_parse_to_major_minor(text: str, version: tuple[int, int] | None) -> None:
    assert consumers.parse(text) == version


def test_without_a_library_there_is_no_backend_even_with_gdrdrv() -> None:
    chosen = consumers.backend(None, (2, 6), True, 13030, True, True)
    assert chosen.name == "" and chosen.driver_version is None and "no libgdrapi" in chosen.why


# --- Headers, DKMS and containers: no FAIL where nothing stops GDRCopy (issue 36) ---------

PREBUILT_KO = f"/lib/modules/{KVER}/updates/gdrdrv.ko"
PREBUILT = {"modinfo -F filename gdrdrv": Output(0, f"{PREBUILT_KO}\n")}


def test_headers_are_not_needed_beside_a_prebuilt_module() -> None:
    finding = doctor.check_kernel_headers(FakeProbe(files={**DEBIAN, PREBUILT_KO: ""}, commands=PREBUILT))
    assert finding.status == doctor.SKIP and "none needed" in finding.detail and "updates/gdrdrv.ko" in finding.detail
    # depmod's index names a file that is gone: nothing gives this kernel a gdrdrv.
    assert doctor.check_kernel_headers(FakeProbe(files=DEBIAN, commands=PREBUILT)).status == doctor.FAIL
    loaded = FakeProbe(files={**DEBIAN, "/sys/module/gdrdrv/version": "2.6.1\n"})
    assert doctor.check_kernel_headers(loaded).status == doctor.SKIP


def test_headers_missing_under_dkms_with_a_built_module_is_a_warning() -> None:
    dkms = {"dkms status -m gdrdrv": Output(0, f"gdrdrv/2.6.1, {KVER}, x86_64: installed\n")}
    finding = doctor.check_kernel_headers(FakeProbe(files={**DEBIAN, PREBUILT_KO: ""}, commands={**PREBUILT, **dkms}))
    assert finding.status == doctor.WARN and finding.fix == f"apt-get install linux-headers-{KVER}"


def test_dkms_that_lost_the_running_kernel_while_gdrdrv_is_loaded_is_a_warning() -> None:
    other = {"dkms status -m gdrdrv": Output(0, "gdrdrv/2.6.1, 6.1.0-50-amd64, x86_64: installed\n")}
    probe = FakeProbe(files={"/sys/module/gdrdrv/version": "2.6.1\n"}, commands=other)
    assert doctor.check_dkms(probe).status == doctor.WARN


@pytest.mark.parametrize(
    ("files", "env", "kind"),
    [
        ({"/.dockerenv": ""}, {}, "Docker"),
        ({"/run/.containerenv": ""}, {}, "podman"),
        ({"/run/secrets/kubernetes.io/serviceaccount/token": "x"}, {}, "Kubernetes pod"),
        ({}, {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, "Kubernetes pod"),
        ({}, {"container": "oci"}, "oci"),
        ({"/proc/1/environ": "PATH=/bin\0container=lxc\0"}, {}, "lxc"),
        ({"/proc/1/cgroup": "12:pids:/kubepods/besteffort/pod1/abc\n"}, {}, "Kubernetes pod"),
        # A containerd pod with automountServiceAccountToken: false, cgroup v2 namespaced.
        (
            {
                "/proc/1/cgroup": "0::/\n",
                "/proc/self/mountinfo": "600 500 0:90 / / rw,relatime - overlay overlay rw,lowerdir=/var/lib/containerd/"
                "io.containerd.snapshotter.v1.overlayfs/snapshots/9/fs,upperdir=/var/lib/containerd/x/fs\n"
                "610 600 259:1 /var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/ab/hostname /etc/hostname"
                " rw - ext4 /dev/nvme0n1p1 rw\n",
            },
            {},
            "containerd",
        ),
        (
            {
                "/proc/self/mountinfo": "700 1 0:91 / / rw - overlay overlay rw,lowerdir=/var/lib/containers/storage/o/l\n"
            },
            {},
            "CRI-O",
        ),
    ],
)
def test_containers_are_recognised_by_every_runtimes_marks(
    files: dict[str, str], env: dict[str, str], kind: str
) -> None:
    found = doctor.container_kind(FakeProbe(files=files, env=env))
    assert kind in found, found
    headers = doctor.check_kernel_headers(FakeProbe(files={**DEBIAN, **files}, env=env))
    assert headers.status == doctor.SKIP and "in a container" in headers.detail
    assert doctor.check_dkms(FakeProbe(files=files, env=env)).status == doctor.SKIP


def test_a_host_that_runs_containers_is_not_one() -> None:
    # A Kubernetes node's own mount table lists its pods' mounts; its root and /etc are its own.
    mountinfo = (
        "22 1 259:1 / / rw,relatime - ext4 /dev/nvme0n1p1 rw\n"
        "900 22 0:90 / /run/containerd/io.containerd.runtime.v2.task/k8s.io/ab/rootfs rw - overlay overlay"
        " rw,lowerdir=/var/lib/containerd/snap/1/fs\n"
        "901 22 0:91 / /var/lib/kubelet/pods/1/volumes/kubernetes.io~projected/x rw - tmpfs tmpfs rw\n"
        "902 22 0:92 / /var/lib/docker/overlay2/ab/merged rw - overlay overlay rw,lowerdir=/var/lib/docker/l\n"
    )
    probe = FakeProbe(files={"/proc/self/mountinfo": mountinfo, "/proc/1/cgroup": "0::/init.scope\n"})
    assert doctor.container_kind(probe) == ""


def test_secure_boot_with_gdrdrv_loaded_is_ok() -> None:
    probe = FakeProbe(
        files={"/sys/module/gdrdrv/version": "2.6.1\n"},
        commands={"mokutil --sb-state": Output(0, "SecureBoot enabled\n"), "modinfo -F signer gdrdrv": Output(0, "\n")},
    )
    assert doctor.check_secure_boot(probe).status == doctor.OK


# --- gdrdrv built for the NVIDIA driver beside it (issue 36) ------------------------------


def _params(flavour: str, table: str | None) -> str:
    text = f"Version: 2.6\nBuilt for NVIDIA driver flavor: {flavour}\nUse persistent mapping: yes\n"
    return text + (f"Built for nv-p2p page table: {table}\n" if table else "")


PROPRIETARY_535 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.261.03  Release Build\n"
OPEN_580 = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build\n"


@pytest.mark.parametrize(
    ("flavour", "table", "driver", "status", "words"),
    [
        ("proprietary", "1.2", PROPRIETARY_535, doctor.OK, "proprietary flavour, page table 1.x"),
        ("opensource", "2.0", OPEN_580, doctor.OK, "open flavour, page table 2.x"),
        # What gdrdrv/Makefile once assumed without sources, next to a 535 proprietary driver.
        ("opensource", "2.0", PROPRIETARY_535, doctor.FAIL, "every pin fails"),
        ("proprietary", "2.0", PROPRIETARY_535, doctor.FAIL, "EFAULT"),
        ("proprietary", "1.2", OPEN_580, doctor.FAIL, "every pin fails"),
        ("opensource", "1.2", PROPRIETARY_535, doctor.WARN, "it loaded on this kernel"),
        ("proprietary", "2.0", OPEN_580, doctor.WARN, "it works"),
        ("proprietary", None, PROPRIETARY_535, doctor.WARN, "does not record its page-table version"),
    ],
)
def test_loaded_gdrdrv_against_the_running_driver(
    flavour: str, table: str | None, driver: str, status: str, words: str
) -> None:
    probe = FakeProbe(
        files={
            **DEBIAN,
            "/sys/module/gdrdrv/version": "2.6.1\n",
            "/proc/driver/gdrdrv/params": _params(flavour, table),
            "/proc/driver/nvidia/version": driver,
        }
    )
    finding = doctor.check_driver_match(probe)
    assert finding.status == status and words in finding.detail, finding
    if status != doctor.OK:
        assert "dkms install --force gdrdrv/VERSION" in finding.fix and "apt-get install gdrdrv-dkms" in finding.fix


def test_installed_gdrdrv_against_the_installed_driver_before_either_loads() -> None:
    commands = {
        "modinfo -F nvidia_flavor gdrdrv": Output(0, "opensource\n"),
        "modinfo -F nvidia_p2p_page_table gdrdrv": Output(0, "2.x\n"),
        "modinfo -F version nvidia": Output(0, "535.261.03\n"),
        "modinfo -F license nvidia": Output(0, "NVIDIA\n"),
    }
    finding = doctor.check_driver_match(FakeProbe(files=DEBIAN, commands=commands))
    assert finding.status == doctor.FAIL and "modinfo nvidia (installed, not loaded)" in finding.detail
    assert "the kernel refuses" not in finding.detail and "every pin fails" in finding.detail
    same = {**commands, "modinfo -F nvidia_p2p_page_table gdrdrv": Output(0, "1.x\n")}
    finding = doctor.check_driver_match(FakeProbe(files=DEBIAN, commands=same))
    assert finding.status == doctor.FAIL and "the kernel refuses gdrdrv next to it" in finding.detail


def test_nothing_to_compare_is_a_skip() -> None:
    assert doctor.check_driver_match(FakeProbe()).status == doctor.SKIP
    only_gdrdrv = FakeProbe(files={"/proc/driver/gdrdrv/params": _params("opensource", "2.0")})
    assert doctor.check_driver_match(only_gdrdrv).status == doctor.SKIP


@pytest.mark.parametrize(
    ("version", "table"),
    [("515.43.04", 1), ("535.261.03", 1), ("575.51.03", 1), ("580.95.05", 2), ("595.1", 2), ("x", None)],
)
def test_page_table_of_each_driver_branch(version: str, table: int | None) -> None:
    assert doctor.page_table_of_driver(version) == table
