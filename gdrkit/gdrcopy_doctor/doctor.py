"""Doctor: check a host for everything gdrcopy needs, each finding with its fix.

Every check is a function of a Probe (gdrkit.gdrcopy_doctor.probe) returning one
Finding; `diagnose()` runs them all.  Nothing here changes the system.
The same module runs as `./toolkit doctor` and, installed by the packages,
as `gdrcopy_doctor` on nodes (gdrkit.gdrcopy_doctor.cli): so it imports only the
standard library and its siblings (relative imports), and takes what it
knows about distributions and this release from a Facts (gdrkit.gdrcopy_doctor.facts).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass

from . import consumers
from .consumers import Gate
from .facts import parse_os_release
from .probe import Loaded, Output, Probe

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
MODULE = "gdrdrv"
NODE = "/dev/gdrdrv"
HARDENED_GROUP = "video"  # the packaged udev rule's group (packages/gdrcopy.yaml device_node)


@dataclass(frozen=True)
class Finding:
    check: str
    status: str
    detail: str
    fix: str = ""
    # The consumers' gates, on the finding that judges them (--json carries them).
    gates: tuple[Gate, ...] = ()


def _os_release(probe: Probe) -> dict[str, str]:
    return parse_os_release(probe.read("/etc/os-release") or "")


def _headers_package(probe: Probe, release: str) -> str:
    fam = probe.facts.family(_os_release(probe))
    if fam is None:
        return f"the kernel headers of {release}"
    return fam.kernel_headers_package.format(kver=release)


def _install_hint(probe: Probe, package: str) -> str:
    return probe.facts.install_hint(probe.read("/etc/os-release") or "", [package])


# PCI vendor of NVIDIA, and the display-controller class (0x03xxxx: VGA, 3D controller).
NVIDIA_PCI_VENDOR = "0x10de"
PCI_DISPLAY_CLASS = "0x03"


def nvidia_pci_devices(probe: Probe) -> list[str]:
    """The PCI addresses of NVIDIA GPUs (display controllers), bound to a driver or not."""
    found = []
    for device in probe.listdir("/sys/bus/pci/devices"):
        base = f"/sys/bus/pci/devices/{device}"
        vendor = (probe.read(f"{base}/vendor") or "").strip().lower()
        klass = (probe.read(f"{base}/class") or "").strip().lower()
        if vendor == NVIDIA_PCI_VENDOR and klass.startswith(PCI_DISPLAY_CLASS):
            found.append(device)
    return found


def p2p_providers(probe: Probe) -> list[str]:
    """The modules that export nvidia_p2p_get_pages (nvidia, or a stand-in such as the test GPU)."""
    syms = probe.read("/proc/kallsyms") or ""
    return sorted(set(re.findall(r"\bnvidia_p2p_get_pages\s+\[(\w+)\]", syms)))


def gpu_present(probe: Probe) -> bool:
    """Whether this host has anything for gdrcopy to work with: an NVIDIA GPU, its driver, or a P2P provider.

    False is "nothing to check here" (gdrcopy_doctor's exit status 3), as on
    CPU-only nodes that get the packages with the rest of a fleet.
    """
    return probe.exists("/proc/driver/nvidia/version") or bool(p2p_providers(probe)) or bool(nvidia_pci_devices(probe))


def check_nvidia_driver(probe: Probe) -> Finding:
    text = probe.read("/proc/driver/nvidia/version")
    stand_ins = [m for m in p2p_providers(probe) if m not in ("nvidia", "nvidia_p2p")]
    if text is None and stand_ins:
        return Finding(
            "nvidia driver",
            WARN,
            f"no NVIDIA kernel driver, but {', '.join(stand_ins)} exports the NVIDIA P2P API in its place"
            " (a stand-in, such as the test GPU softgpu)",
            "on a GPU node, install and load the NVIDIA data-center driver instead: modprobe nvidia",
        )
    if text is None:
        return Finding(
            "nvidia driver",
            FAIL,
            "the NVIDIA kernel driver is not loaded (no /proc/driver/nvidia/version)",
            "install the NVIDIA data-center driver and load it: modprobe nvidia",
        )
    first = text.splitlines()[0] if text else ""
    flavour = "open" if "Open Kernel Module" in text else "proprietary"
    license_out = probe.command(["modinfo", "-F", "license", "nvidia"])
    if license_out is not None and license_out.returncode == 0:
        flavour = "open" if "GPL" in license_out.stdout else "proprietary"
    match = re.search(r"\b(\d{3}\.\d+(?:\.\d+)?)\b", first)
    driver = match.group(1) if match else "unknown version"
    return Finding("nvidia driver", OK, f"loaded, {driver}, {flavour} kernel modules")


def check_p2p_symbols(probe: Probe) -> Finding:
    syms = probe.read("/proc/kallsyms")
    if syms is None:
        return Finding("nvidia p2p api", SKIP, "/proc/kallsyms is not readable", "run doctor as root")
    names = set(re.findall(r"\b(nvidia_p2p_\w+)", syms))
    if "nvidia_p2p_get_pages" not in names:
        return Finding(
            "nvidia p2p api",
            FAIL,
            "nvidia_p2p_get_pages is not exported by any loaded module",
            "load the NVIDIA driver (nvidia.ko exports the P2P API); GPUs without it cannot be pinned",
        )
    persistent = "nvidia_p2p_get_pages_persistent" in names
    return Finding(
        "nvidia p2p api",
        OK,
        "nvidia_p2p_get_pages" + (" and the persistent API" if persistent else " (no persistent API)"),
    )


def _module_for_kernel(probe: Probe) -> str:
    """Where this kernel's gdrdrv comes from without a build: "loaded", "installed" (its file), or ""."""
    if probe.exists(f"/sys/module/{MODULE}"):
        return "loaded"
    out = probe.command(["modinfo", "-F", "filename", MODULE])
    if out is not None and out.returncode == 0 and out.stdout.strip():
        # modinfo answers from depmod's index, which can outlive the file.
        path = out.stdout.strip().splitlines()[0]
        if probe.exists(path):
            return f"installed ({path})"
    return ""


def check_kernel_headers(probe: Probe) -> Finding:
    """The running kernel's headers: a failure only where gdrdrv must still be built for it."""
    release = probe.release()
    if probe.exists(f"/lib/modules/{release}/build"):
        return Finding("kernel headers", OK, f"/lib/modules/{release}/build")
    inside = container_kind(probe)
    if inside:
        return Finding(
            "kernel headers",
            SKIP,
            f"in a container ({inside}): the host's kernel and its gdrdrv are the host's (check the host)",
        )
    package = _headers_package(probe, release)
    have = _module_for_kernel(probe)
    if have:
        dkms = probe.command(["dkms", "status", "-m", MODULE])
        if dkms is not None and MODULE in dkms.stdout:
            return Finding(
                "kernel headers",
                WARN,
                f"no headers for the running kernel {release}; gdrdrv is {have}, but DKMS cannot rebuild it"
                " for this kernel (after an NVIDIA driver change)",
                _install_hint(probe, package),
            )
        return Finding(
            "kernel headers", SKIP, f"none for {release}, and none needed: gdrdrv is {have} (a prebuilt module)"
        )
    return Finding(
        "kernel headers",
        FAIL,
        f"no headers for the running kernel {release} and no gdrdrv for it: DKMS cannot build gdrdrv",
        _install_hint(probe, package)
        + f" (or {_family_hint(probe, 'prebuilt_module_package', 'the prebuilt module package of this kernel')})",
    )


def check_dkms(probe: Probe) -> Finding:
    release = probe.release()
    inside = container_kind(probe)
    if inside:
        return Finding("dkms", SKIP, f"in a container ({inside}): the host builds and loads gdrdrv")
    out = probe.command(["dkms", "status", "-m", MODULE])
    if out is None:
        return Finding("dkms", SKIP, "dkms is not installed (fine with a prebuilt gdrdrv-modules/gdrcopy-kmod package)")
    lines = [line for line in out.stdout.splitlines() if MODULE in line]
    if not lines:
        return Finding(
            "dkms",
            WARN,
            "DKMS does not know gdrdrv",
            _family_hint(probe, "module_package", "gdrdrv-dkms (deb) or gdrcopy-kmod (rpm)"),
        )
    mine = [line for line in lines if release in line]
    if any("installed" in line for line in mine):
        return Finding("dkms", OK, mine[0].strip())
    if probe.exists(f"/sys/module/{MODULE}"):
        return Finding(
            "dkms",
            WARN,
            f"gdrdrv is loaded, but DKMS has not installed it for the running kernel {release}: {'; '.join(lines)}",
            f"dkms autoinstall -k {release}  (log: /var/lib/dkms/gdrdrv/*/build/make.log)",
        )
    return Finding(
        "dkms",
        FAIL,
        f"gdrdrv is not installed for the running kernel {release}: {'; '.join(lines)}",
        f"dkms autoinstall -k {release}  (log: /var/lib/dkms/gdrdrv/*/build/make.log)",
    )


@dataclass(frozen=True)
class DriverBuild:
    """The NVIDIA driver flavour and nv-p2p page-table major version of a module, and where they were read."""

    flavour: str  # "open" or "proprietary"
    page_table: int | None  # nv-p2p page-table major version: 1 (drivers 515-575) or 2 (580 and newer)
    source: str


# NVIDIA's nv-p2p.h: NVIDIA_P2P_PAGE_TABLE_VERSION is 0x00010002 up to 575, 0x00020000 from 580.
PAGE_TABLE_2_FROM = 580


def page_table_of_driver(version: str) -> int | None:
    """The nv-p2p page-table major version of NVIDIA driver `version` (pure): 2 from 580, 1 before."""
    match = re.match(r"(\d+)\.", version.strip())
    if not match:
        return None
    return 2 if int(match.group(1)) >= PAGE_TABLE_2_FROM else 1


def gdrdrv_build(probe: Probe) -> DriverBuild | None:
    """What the loaded gdrdrv (else the one installed for this kernel) was built for."""
    params = probe.read(f"/proc/driver/{MODULE}/params")
    if params is not None:
        flavour = re.search(r"^Built for NVIDIA driver flavor: (\w+)", params, re.MULTILINE)
        table = re.search(r"^Built for nv-p2p page table: (\d+)\.", params, re.MULTILINE)
        if flavour:
            return DriverBuild(
                "open" if flavour.group(1) == "opensource" else "proprietary",
                int(table.group(1)) if table else None,
                f"/proc/driver/{MODULE}/params (the loaded gdrdrv)",
            )
    flavour_out = probe.command(["modinfo", "-F", "nvidia_flavor", MODULE])
    if flavour_out is None or flavour_out.returncode != 0 or not flavour_out.stdout.strip():
        return None
    table_out = probe.command(["modinfo", "-F", "nvidia_p2p_page_table", MODULE])
    # "1.x" or "2.x" (gdrdrv.c's MODULE_INFO); absent from gdrdrv builds older than it.
    said = (
        re.match(r"(\d+)\.", table_out.stdout.strip()) if table_out is not None and table_out.returncode == 0 else None
    )
    major = int(said.group(1)) if said else None
    built_for = "open" if flavour_out.stdout.strip() == "opensource" else "proprietary"
    return DriverBuild(built_for, major, f"modinfo {MODULE} (installed for {probe.release()}, not loaded)")


def nvidia_build(probe: Probe) -> tuple[str, DriverBuild] | None:
    """(version, flavour and page table) of the running NVIDIA driver, else of the nvidia module installed."""
    text = probe.read("/proc/driver/nvidia/version")
    if text is not None:
        match = re.search(r"\b(\d{3}\.\d+(?:\.\d+)?)\b", text.splitlines()[0] if text else "")
        if not match:
            return None
        flavour = "open" if "Open Kernel Module" in text else "proprietary"
        return match.group(1), DriverBuild(flavour, page_table_of_driver(match.group(1)), "the running driver")
    version = probe.command(["modinfo", "-F", "version", "nvidia"])
    license_out = probe.command(["modinfo", "-F", "license", "nvidia"])
    if version is None or version.returncode != 0 or license_out is None or license_out.returncode != 0:
        return None
    number = version.stdout.strip()
    if page_table_of_driver(number) is None:
        return None
    flavour = "open" if "GPL" in license_out.stdout else "proprietary"
    return number, DriverBuild(flavour, page_table_of_driver(number), "modinfo nvidia (installed, not loaded)")


def _describe_build(build: DriverBuild) -> str:
    table = f"page table {build.page_table}.x" if build.page_table else "page table not recorded"
    return f"{build.flavour} flavour, {table}"


def check_driver_match(probe: Probe) -> Finding:
    """gdrdrv built for the NVIDIA driver beside it: the same flavour and nv-p2p page-table version."""
    check = "gdrdrv for driver"
    if container_kind(probe) and probe.read(f"/proc/driver/{MODULE}/params") is None:
        return Finding(check, SKIP, "in a container, and the host's gdrdrv is not loaded (see the device node)")
    mine = gdrdrv_build(probe)
    theirs = nvidia_build(probe)
    if mine is None:
        return Finding(check, SKIP, "no gdrdrv loaded or installed for this kernel (see versions)")
    if theirs is None:
        return Finding(check, SKIP, f"gdrdrv: {_describe_build(mine)}; no NVIDIA driver to compare with")
    version, driver = theirs
    detail = (
        f"gdrdrv ({mine.source}): {_describe_build(mine)}; NVIDIA {version} ({driver.source}):"
        f" {_describe_build(driver)}"
    )
    loaded = probe.exists(f"/sys/module/{MODULE}")
    rebuild = (
        f"rebuild gdrdrv for this driver: dkms install --force {MODULE}/VERSION -k {probe.release()} (its build"
        " reads the installed NVIDIA module or sources), or install the DKMS package instead of a prebuilt"
        f" module built for another driver ({_family_hint(probe, 'module_package', 'gdrdrv-dkms')}); then"
        f" rmmod {MODULE}; modprobe {MODULE}"
    )
    if mine.page_table is not None and driver.page_table is not None and mine.page_table != driver.page_table:
        return Finding(
            check,
            FAIL,
            f"{detail}: every pin fails (gdrdrv refuses the driver's page tables; EFAULT)",
            rebuild,
        )
    if mine.flavour == "open" and driver.flavour == "proprietary":
        why = "the kernel refuses gdrdrv next to it (GPL-only symbols with a proprietary module's)"
        if loaded:
            return Finding(check, WARN, f"{detail}: it loaded on this kernel, but on others {why}", rebuild)
        return Finding(check, FAIL, f"{detail}: {why}", rebuild)
    if mine.flavour != driver.flavour:
        return Finding(
            check,
            WARN,
            f"{detail}: it works, but without the kernel helpers only an open-flavour build may use"
            " (page_is_ram for coherent GPU memory, on arm64)",
            rebuild,
        )
    if mine.page_table is None:
        return Finding(
            check,
            WARN,
            f"{detail}: this gdrdrv does not record its page-table version, so it cannot be compared",
            rebuild,
        )
    return Finding(check, OK, detail)


def _module_version(probe: Probe) -> str:
    text = probe.read(f"/sys/module/{MODULE}/version")
    if text:
        return text.strip()
    out = probe.command(["modinfo", "-F", "version", MODULE])
    return out.stdout.strip() if out is not None and out.returncode == 0 else ""


def _library_version(probe: Probe) -> str:
    out = probe.command(["ldconfig", "-p"])
    if out is None:
        return ""
    for line in out.stdout.splitlines():
        if "libgdrapi.so.2 " in line and "=>" in line:
            return line.split("=>")[1].strip()
    return ""


def check_versions(probe: Probe) -> Finding:
    module = _module_version(probe)
    library = _library_version(probe)
    if not module and not library:
        return Finding(
            "versions",
            FAIL,
            "neither gdrdrv nor libgdrapi.so.2 is installed",
            _packages_fix(probe),
        )
    if not library:
        return Finding(
            "versions",
            FAIL,
            f"gdrdrv {module or '?'} but no libgdrapi.so.2 in the linker cache",
            _runtime_fix(probe),
        )
    if not module:
        return Finding(
            "versions",
            FAIL,
            f"libgdrapi ({library}) but no gdrdrv module for this kernel",
            _family_hint(probe, "module_package", "gdrdrv-dkms (deb) or gdrcopy-kmod (rpm)")
            + f" (or {_family_hint(probe, 'prebuilt_module_package', 'the prebuilt module package of this kernel')})",
        )
    api = probe.facts.api_version
    if not module.startswith(api):
        return Finding(
            "versions",
            WARN,
            f"gdrdrv {module} and libgdrapi ({library}) differ from interface {api}",
            "install matching gdrdrv and libgdrapi packages of one release",
        )
    return Finding("versions", OK, f"gdrdrv {module}, libgdrapi {library}")


def _proc_devices_major(probe: Probe) -> int | None:
    for line in (probe.read("/proc/devices") or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] == MODULE:
            return int(parts[0])
    return None


def _sysfs_dev(probe: Probe) -> tuple[int, int] | None:
    for path in (f"/sys/class/misc/{MODULE}/dev", f"/sys/class/{MODULE}/{MODULE}/dev"):
        text = probe.read(path)
        if text and ":" in text:
            major, minor = text.strip().split(":")
            return int(major), int(minor)
    return None


def check_device_node(probe: Probe) -> Finding:
    if not probe.exists(f"/sys/module/{MODULE}"):
        return Finding(
            "device node",
            FAIL,
            "gdrdrv is not loaded",
            "modprobe gdrdrv (or: systemctl start gdrdrv; ./toolkit insmod for a build tree)",
        )
    expected = _sysfs_dev(probe)
    if expected is None:
        major = _proc_devices_major(probe)
        expected = (major, 0) if major is not None else None
    node = probe.node(NODE)
    if node is None:
        return Finding(
            "device node",
            FAIL,
            f"gdrdrv is loaded but {NODE} does not exist",
            "udevadm trigger --subsystem-match=misc --action=add (the packaged udev rule creates it)",
        )
    if not node.is_char:
        return Finding("device node", FAIL, f"{NODE} is not a character device", f"rm {NODE} && udevadm trigger")
    if expected is not None and (node.major, node.minor) != expected:
        return Finding(
            "device node",
            FAIL,
            f"{NODE} is {node.major}:{node.minor} but gdrdrv is {expected[0]}:{expected[1]} (stale node)",
            f"rm {NODE} && udevadm trigger, or ./toolkit insmod",
        )
    group = probe.group_name(node.gid)
    # Who may open it is check_node_access's finding.
    return Finding("device node", OK, f"{NODE} {node.major}:{node.minor} mode {node.mode:04o} group {group}")


# What a world-accessible node means; docs/nodes.md, "The device node", says the same.
WORLD_ACCESS_MEANS = (
    "any local user can open it, reach gdrdrv's ioctls and pin and map any GPU memory it can name,"
    " that is the GPU memory of its own CUDA contexts (the reference GDRCopy's default)"
)


def _hardening(probe: Probe, group: str = HARDENED_GROUP) -> str:
    gid = probe.group_id(group)
    gid_text = str(gid) if gid is not None else f"$(getent group {group} | cut -d: -f3)"
    return (
        f"restrict it to a group: 'options {MODULE} node_mode=0660 node_gid={gid_text}' in"
        f" /etc/modprobe.d/{MODULE}.conf (group {group}), or the packaged udev rule 60-gdrdrv.rules"
        f" (0660, group {group}); then add the users and container runtimes that may pin GPU memory"
        f" to the group (usermod -aG {group} USER) and give containers the node with"
        f" docker run --device {NODE} --group-add {group}"
    )


def _module_mode(probe: Probe) -> int | None:
    """gdrdrv's node_mode parameter: the mode the kernel creates the node with (ours only)."""
    text = (probe.read(f"/sys/module/{MODULE}/parameters/node_mode") or "").strip()
    try:
        return int(text, 8) if text else None
    except ValueError:
        return None


def check_node_access(probe: Probe) -> Finding:
    """Who may open /dev/gdrdrv: its mode and group, and what they mean."""
    node = probe.node(NODE)
    if node is None:
        return Finding("node access", SKIP, f"no {NODE} (see the device node finding)")
    group = probe.group_name(node.gid)
    detail = f"{NODE} mode {node.mode:04o}, group {group}"
    if node.mode & 0o006:
        if _access_setting(probe) == "open" and _rule_reads_access(probe):
            # Chosen by a setting (an upgrade from NVIDIA's packages writes it): that setting is the way back.
            return Finding(
                "node access",
                WARN,
                f"{detail}: {WORLD_ACCESS_MEANS}; GDRDRV_ACCESS=open in {ACCESS_FILE} asks for it",
                f"add the users and container runtimes that may pin GPU memory to {HARDENED_GROUP}"
                f" (usermod -aG {HARDENED_GROUP} USER), then GDRDRV_ACCESS=group in {ACCESS_FILE} and"
                f" udevadm trigger --sysname-match={MODULE}",
            )
        return Finding("node access", WARN, f"{detail}: {WORLD_ACCESS_MEANS}", _hardening(probe))
    if not node.mode & 0o060 or node.gid == 0:
        return Finding(
            "node access",
            WARN,
            f"{detail}: only root can use it",
            f"give a group access: 'options {MODULE} node_mode=0660 node_gid=GID' in"
            f" /etc/modprobe.d/{MODULE}.conf, or the packaged udev rule (0660, group {HARDENED_GROUP})",
        )
    problems: list[tuple[str, str]] = []
    created = _module_mode(probe)
    if created is not None and created & 0o006:
        problems.append(
            (
                f"gdrdrv creates it {created:04o} and udev narrows it only afterwards:"
                " a process that opens it in between keeps its access",
                f"also set 'options {MODULE} node_mode=0660' in /etc/modprobe.d/{MODULE}.conf"
                " (the packaged modprobe.d file does)",
            )
        )
    if _access_setting(probe) == "open" and _rule_reads_access(probe):
        problems.append(
            (
                f"GDRDRV_ACCESS=open in {ACCESS_FILE} asks for 0666, which udev has not applied yet",
                f"udevadm trigger --sysname-match={MODULE} (or, to keep it {group}-only, GDRDRV_ACCESS=group there)",
            )
        )
    left_out, notes = _left_out(probe, node.gid, group)
    problems += left_out
    said = "".join(f"; {note}" for note in notes)
    if problems:
        return Finding(
            "node access",
            WARN,
            f"{detail}: " + "; ".join(what for what, _ in problems) + said,
            "; ".join(fix for _, fix in problems),
        )
    return Finding("node access", OK, f"{detail}: only root and members of {group} can pin GPU memory{said}")


# The device nodes a process holds while it uses an NVIDIA GPU: nvidiactl (every
# CUDA context) and the GPUs'.  Not /dev/dri/renderD*: CUDA does not open them,
# and other vendors' GPUs (an integrated one, a desktop's) have them too.
GPU_DEVICE = re.compile(r"^/dev/(nvidiactl|nvidia\d+)$")
# Below UID_MIN of /etc/login.defs: system accounts, such as nvidia-persistenced's
# (it holds every GPU open) or a display manager's, which never pin GPU memory.
DEFAULT_UID_MIN = 1000
NAMED = 3  # users named in a finding; the rest are counted


@dataclass(frozen=True)
class Credentials:
    """What open() checks a process by: its filesystem uid and every group it has."""

    uid: int
    gids: frozenset[int]


def process_credentials(status: str) -> Credentials | None:
    """The credentials in a /proc/PID/status text (pure): the 4th (filesystem) Uid and Gid, and Groups."""
    fields = {}
    for line in status.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key] = value.split()
    try:
        uid = int(fields["Uid"][3])
        gid = int(fields["Gid"][3])
        groups = {int(g) for g in fields.get("Groups", [])}
    except (KeyError, IndexError, ValueError):
        return None
    return Credentials(uid, frozenset({gid, *groups}))


def _uid_min(probe: Probe) -> int:
    match = re.search(r"^\s*UID_MIN\s+(\d+)", probe.read("/etc/login.defs") or "", re.MULTILINE)
    return int(match.group(1)) if match else DEFAULT_UID_MIN


def _hidden_processes(probe: Probe) -> str:
    """Why /proc hides other users' processes from this doctor ("" when it does not)."""
    if probe.euid() == 0:
        return ""
    for line in (probe.read("/proc/self/mountinfo") or "").splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] == "/proc" and "-" in fields:
            after = fields[fields.index("-") + 1 :]
            options = after[2].split(",") if len(after) > 2 else []
            hide = [o for o in options if o.startswith("hidepid=") and o not in ("hidepid=0", "hidepid=off")]
            if hide:
                return f"/proc is mounted {hide[0]}: other users' processes are hidden from this user"
    return ""


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}" + ("" if n == 1 else "es" if thing.endswith("s") else "s")


def _users(probe: Probe, processes: dict[int, int]) -> str:
    """'alice (2 processes), bob (1)' for up to NAMED users by most processes, then how many more."""
    ranked = sorted(processes.items(), key=lambda item: (-item[1], item[0]))
    named = [
        f"{probe.user_name(uid)} ({count if i else _count(count, 'process')})"
        for i, (uid, count) in enumerate(ranked[:NAMED])
    ]
    more = len(ranked) - NAMED
    return ", ".join(named) + (f" and {_count(more, 'more user')}" if more > 0 else "")


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:NAMED])
    return shown + (f" and {len(names) - NAMED} more" if len(names) > NAMED else "")


ACCESS_FILE = f"/etc/default/{MODULE}"  # the admin's GDRDRV_ACCESS, which the packaged udev rule imports


def _rule_reads_access(probe: Probe) -> bool:
    """Whether the udev rule in effect for the node (a copy in /etc replaces the packaged one) reads GDRDRV_ACCESS."""
    for directory in ("/etc/udev/rules.d", "/run/udev/rules.d", "/usr/lib/udev/rules.d", "/lib/udev/rules.d"):
        rule = probe.read(f"{directory}/60-{MODULE}.rules")
        if rule is not None:
            return "GDRDRV_ACCESS" in rule
    return False


def _access_setting(probe: Probe) -> str:
    """GDRDRV_ACCESS in ACCESS_FILE: its last assignment, unquoted ("" without one)."""
    values = re.findall(r"^\s*GDRDRV_ACCESS=(.*)$", probe.read(ACCESS_FILE) or "", re.MULTILINE)
    return values[-1].strip().strip("\"'") if values else ""


def _open_access_fix(probe: Probe) -> str:
    """How to give every user the node as NVIDIA's GDRCopy does, by what set its mode here."""
    if _rule_reads_access(probe):
        return (
            f"or give every user access as NVIDIA's packages do: GDRDRV_ACCESS=open in {ACCESS_FILE},"
            f" then udevadm trigger --sysname-match={MODULE}"
        )
    return (
        f"or give every user access as NVIDIA's GDRCopy does: mode 0666 where 0660 was set (the udev rule,"
        f" node_mode in /etc/modprobe.d/{MODULE}.conf), then udevadm trigger --sysname-match={MODULE}"
    )


def _left_out(probe: Probe, gid: int, group: str) -> tuple[list[tuple[str, str]], list[str]]:
    """Who a group-only node leaves without GDRCopy: (problems as (what, fix), notes on what was not seen).

    The group's members by the group database and the passwd entries, and the
    processes of users outside it that hold an NVIDIA GPU open.  A process has
    the groups it started with: a user added since is still outside in it.
    """
    floor = _uid_min(probe)
    outsiders: dict[int, int] = {}  # uid -> its processes with a GPU open
    unreadable: dict[int, int] = {}  # uid -> its processes whose open files this user may not read
    members_running = False
    for pid in probe.pids():
        creds = process_credentials(probe.read(f"/proc/{pid}/status") or "")
        if creds is None or creds.uid < floor:
            continue  # gone, root, or a system account
        if gid in creds.gids:
            members_running = True
            continue
        files = probe.open_files(pid)
        if files is None:
            unreadable[creds.uid] = unreadable.get(creds.uid, 0) + 1
        elif any(GPU_DEVICE.match(path) for path in files):
            outsiders[creds.uid] = outsiders.get(creds.uid, 0) + 1
    listed = set(probe.group_members(gid)) | {a.name for a in probe.accounts() if a.gid == gid}
    problems, notes = [], []
    if listed:
        notes.append(f"members of {group}: {_names(sorted(listed))}")
    inside = container_kind(probe)
    if inside:
        notes.append(f"in a container ({inside}): the members of {group} are the host's, not checked here")
    elif not listed and not members_running:
        problems.append(
            (
                f"group {group} has no members (none in the group database, no user with it as primary group):"
                " only root can pin GPU memory",
                f"usermod -aG {group} USER for each user who may pin GPU memory (from their next login;"
                f" pods: securityContext.supplementalGroups [{gid}]); {_open_access_fix(probe)}",
            )
        )
    if outsiders:
        held = sum(outsiders.values())
        names = sorted(probe.user_name(uid) for uid in outsiders)
        since = [name for name in names if name in listed]
        what = (
            f"{_count(held, 'process')} of {_count(len(outsiders), 'user')} outside {group}"
            f" {'holds' if held == 1 else 'hold'} an NVIDIA GPU open: {_users(probe, outsiders)};"
            " they run without GDRCopy (NCCL, UCX and NVSHMEM say so only in debug logs)"
        )
        if since:
            what += f"; {_names(since)} joined {group} after those processes started"
        # Users the host does not know by name are a pod's or another user namespace's.
        joining = [name for name in names if name not in listed and not name.startswith("uid ")]
        add = f"usermod -aG {group} {joining[0] if len(joining) == 1 else 'USER'}" + (
            f" for each of {_names(joining)}" if len(joining) > 1 else ""
        )
        fix = (
            (f"{add}, then " if joining or len(since) < len(names) else "")
            + "restart their jobs (a process keeps the groups it started with;"
            f" pods: securityContext.supplementalGroups [{gid}]); {_open_access_fix(probe)}"
        )
        problems.append((what, fix))
    if unreadable:
        notes.append(
            f"partial: the open files of {_count(sum(unreadable.values()), 'process')} of"
            f" {_count(len(unreadable), 'user')} outside {group} are not readable by this user"
            " (run gdrcopy_doctor as root to check them)"
        )
    hidden = _hidden_processes(probe)
    if hidden:
        notes.append(f"partial: {hidden} (run gdrcopy_doctor as root to check them)")
    return problems, notes


# nvidia-smi's exit statuses (its manual page, RETURN VALUE): what each means.
NVIDIA_SMI_EXIT = {
    2: "an argument or flag is invalid (an nvidia-smi older than this doctor expects?)",
    3: "the operation is not available on the GPU",
    4: "this user may not query the GPU",
    6: "a query found no such object",
    8: "a GPU's external power cables are not attached properly",
    9: "the NVIDIA driver is not loaded",
    10: "the NVIDIA kernel driver detected an interrupt problem with a GPU",
    12: "the NVIDIA management library (libnvidia-ml.so.1) cannot be found or loaded",
    13: "the installed NVIDIA management library lacks a function nvidia-smi needs",
    14: "a GPU's infoROM is corrupted",
    15: "a GPU has fallen off the bus or is otherwise inaccessible",
    255: "another error, or an internal driver error",
}


def _nvidia_smi(probe: Probe, *args: str) -> Output | None:
    return probe.command(["nvidia-smi", *args])


def _smi_said(out: Output) -> str:
    """nvidia-smi's own message: its first non-empty line."""
    return next((line.strip() for line in out.stdout.splitlines() if line.strip()), "no output")


def _smi_failure(probe: Probe, out: Output) -> tuple[str, str]:
    """(what is wrong, what to do) for a failed nvidia-smi."""
    meaning = NVIDIA_SMI_EXIT.get(out.returncode, "an error its manual does not list")
    detail = f"nvidia-smi failed with exit status {out.returncode} ({meaning}): {_smi_said(out)}"
    loaded = probe.read("/proc/driver/nvidia/version") is not None
    if out.returncode == 9 and not loaded:
        return (
            detail + "; no /proc/driver/nvidia/version: the NVIDIA kernel module is not loaded",
            "load it: modprobe nvidia; if that fails, 'dkms status' shows whether it is built for this kernel"
            " and the kernel log (NVRM lines) says why it does not load; after a driver upgrade, reboot",
        )
    if out.returncode == 9:
        return (
            detail + "; the kernel module is loaded (/proc/driver/nvidia/version) but nvidia-smi cannot"
            " reach it through /dev/nvidiactl",
            "check that /dev/nvidiactl and /dev/nvidia[0-9]* exist and this user may open them; in a container,"
            " pass them in (nvidia-container-toolkit or --device)",
        )
    if out.returncode == 12:
        return detail, "install the driver's management library: Debian libnvidia-ml1, RHEL nvidia-driver-NVML"
    if out.returncode == 4:
        return detail, "run doctor as root, or give this user access to /dev/nvidia*"
    if out.returncode in (10, 14, 15):
        return detail, "look for Xid errors in the kernel log (NVRM: Xid); reset or reseat the GPU"
    return detail, "run nvidia-smi yourself and follow its message; the kernel log (NVRM lines) says more"


def check_nvidia_smi(probe: Probe) -> Finding:
    out = _nvidia_smi(probe, "--query-gpu=driver_version,name", "--format=csv,noheader")
    if out is None:
        return Finding(
            "nvidia-smi",
            SKIP,
            "nvidia-smi is not installed",
            "install the NVIDIA driver utilities (Debian: nvidia-smi, RHEL: nvidia-driver-cuda)",
        )
    if out.returncode != 0:
        detail, fix = _smi_failure(probe, out)
        return Finding("nvidia-smi", FAIL, detail, fix)
    rows = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    versions = sorted({row.split(",")[0].strip() for row in rows})
    gpus = f"{len(rows)} GPU" + ("s" if len(rows) != 1 else "")
    return Finding("nvidia-smi", OK, f"driver {', '.join(versions) or '?'}, {gpus}")


def _smi_unusable(check: str, out: Output | None) -> Finding:
    """The finding of a check that needs nvidia-smi when it is missing or fails."""
    if out is None:
        return Finding(check, SKIP, "nvidia-smi is not installed (see the nvidia-smi finding)")
    return Finding(check, SKIP, f"nvidia-smi failed with exit status {out.returncode} (see the nvidia-smi finding)")


def check_gpudirect(probe: Probe) -> Finding:
    out = _nvidia_smi(probe, "--query-gpu=name", "--format=csv,noheader")
    if out is None or out.returncode != 0:
        return _smi_unusable("gpudirect rdma", out)
    gpus = [n.strip() for n in out.stdout.splitlines() if n.strip()]
    consumer = [g for g in gpus if re.search(r"GeForce|TITAN", g, re.I)]
    if consumer:
        return Finding(
            "gpudirect rdma",
            FAIL,
            f"{', '.join(consumer)}: GeForce-class GPUs do not support GPUDirect RDMA",
            "use a data-center or RTX Pro GPU",
        )
    return Finding("gpudirect rdma", OK, ", ".join(gpus) or "no GPU listed")


def check_bar1(probe: Probe) -> Finding:
    out = _nvidia_smi(probe, "-q", "-d", "MEMORY")
    if out is None or out.returncode != 0:
        return _smi_unusable("bar1", out)
    sizes = []
    for block in out.stdout.split("BAR1 Memory Usage")[1:]:
        match = re.search(r"Total\s*:\s*(\d+)\s*MiB", block)
        if match:
            sizes.append(int(match.group(1)))
    if not sizes:
        return Finding("bar1", SKIP, "nvidia-smi shows no BAR1 size")
    small = [s for s in sizes if s < 1024]
    detail = "BAR1 " + ", ".join(f"{s} MiB" for s in sizes)
    if small:
        return Finding(
            "bar1",
            WARN,
            detail + ": pins larger than BAR1 fail with ENOMEM",
            "enable Resizable BAR / a large BAR1 in the firmware, or pin less at once",
        )
    return Finding("bar1", OK, detail)


def check_secure_boot(probe: Probe) -> Finding:
    out = probe.command(["mokutil", "--sb-state"])
    if out is None:
        state = probe.read("/sys/kernel/security/lockdown") or ""
        if "[none]" in state or not state:
            return Finding("secure boot", SKIP, "mokutil is not installed; kernel lockdown is off")
        return Finding("secure boot", WARN, f"kernel lockdown: {state.strip()}", "install mokutil to check the keys")
    if "enabled" not in out.stdout.lower():
        return Finding("secure boot", OK, "Secure Boot is off: unsigned modules load")
    if probe.exists(f"/sys/module/{MODULE}"):
        return Finding("secure boot", OK, "Secure Boot is on and gdrdrv is loaded: the kernel accepted its signature")
    signer = probe.command(["modinfo", "-F", "signer", MODULE])
    key = probe.command(["mokutil", "--test-key", "/var/lib/dkms/mok.pub"])
    enrolled = key is not None and "already enrolled" in key.stdout
    if signer is not None and signer.returncode == 0 and not signer.stdout.strip():
        return Finding(
            "secure boot",
            FAIL,
            "Secure Boot is on and gdrdrv is not signed",
            "rebuild with DKMS (it signs with /var/lib/dkms/mok.key), or sign with your MOK key",
        )
    if not enrolled:
        return Finding(
            "secure boot",
            FAIL,
            "Secure Boot is on and the DKMS signing key is not enrolled",
            "mokutil --import /var/lib/dkms/mok.pub, then reboot and confirm in the MOK manager",
        )
    return Finding("secure boot", OK, "Secure Boot is on; the DKMS key is enrolled")


def check_container_access(probe: Probe) -> Finding:
    inside = container_kind(probe)
    present = probe.node(NODE) is not None
    if inside:
        if present:
            return Finding("containers", OK, f"in a container ({inside}), {NODE} is visible")
        return Finding(
            "containers",
            FAIL,
            f"in a container ({inside}) without {NODE}",
            f"start it with --device={NODE} (docker/podman) or the CDI spec; no --privileged needed",
        )
    if not present:
        return Finding("containers", SKIP, f"no {NODE} to pass to containers yet")
    return Finding("containers", OK, f"pass it with: docker run --device={NODE} ...")


# What a container's files say about the runtime that made it: where its root
# file system and the files a runtime bind-mounts into every container come
# from (/proc/self/mountinfo), and the cgroup of its first process (cgroup v1;
# v2 with a cgroup namespace says "0::/").  Only those mounts: a host that
# runs containers has theirs in its own mount table too.
CONTAINER_MARKS = (
    ("kubelet/pods", "a Kubernetes pod"),
    ("kubepods", "a Kubernetes pod"),
    ("containerd", "containerd"),
    ("crio", "CRI-O"),
    ("/containers/storage/", "CRI-O or podman"),
    ("libpod", "podman"),
    ("/docker/", "Docker"),
    ("/var/lib/docker", "Docker"),
    ("lxc", "LXC"),
)


def container_kind(probe: Probe) -> str:
    """Which container runtime this runs under, with the evidence; "" on a host (not in a container)."""
    if probe.exists("/.dockerenv"):
        return "Docker: /.dockerenv"
    if probe.exists("/run/.containerenv"):
        return "podman: /run/.containerenv"
    for path in ("/run/secrets/kubernetes.io", "/var/run/secrets/kubernetes.io"):
        if probe.exists(path):
            return f"a Kubernetes pod: {path}"
    if probe.environ("KUBERNETES_SERVICE_HOST"):
        return "a Kubernetes pod: KUBERNETES_SERVICE_HOST is set"
    # systemd's convention: container managers set $container for the first process.
    said = probe.environ("container") or _pid1_container(probe)
    if said:
        return f"{said}: $container"
    evidence = [("/proc/1/cgroup", line) for line in (probe.read("/proc/1/cgroup") or "").splitlines()]
    evidence += [("/proc/self/mountinfo", line) for line in _runtime_mounts(probe.read("/proc/self/mountinfo") or "")]
    for path, line in evidence:
        for mark, kind in CONTAINER_MARKS:
            if mark in line:
                return f"{kind}: {path}"
    return ""


# Where a container runtime mounts the container's root and its own files.
RUNTIME_MOUNT_POINTS = ("/", "/etc/hostname", "/etc/hosts", "/etc/resolv.conf")


def _runtime_mounts(mountinfo: str) -> list[str]:
    """The mountinfo lines of RUNTIME_MOUNT_POINTS: root, source and options (the fields that name paths)."""
    lines = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] in RUNTIME_MOUNT_POINTS:
            lines.append(" ".join([fields[3], *fields[fields.index("-") + 1 :]] if "-" in fields else fields[3:4]))
    return lines


def _pid1_container(probe: Probe) -> str:
    environ = probe.read("/proc/1/environ") or ""
    for item in environ.split("\0"):
        if item.startswith("container="):
            return item.partition("=")[2]
    return ""


def _in_container(probe: Probe) -> bool:
    return bool(container_kind(probe))


def _family_hint(probe: Probe, field: str, fallback: str) -> str:
    """Install command of this family's package `field` (FamilyFacts), e.g. dnf install gdrcopy."""
    fam = probe.facts.family(_os_release(probe))
    if fam is None:
        return f"install {fallback}"
    package = str(getattr(fam, field)).format(kver=probe.release())
    return probe.facts.install_hint(probe.read("/etc/os-release") or "", [package])


def _packages_fix(probe: Probe) -> str:
    """Installing the runtime library and the module, with this host's package manager and names."""
    fam = probe.facts.family(_os_release(probe))
    if fam is None:
        return (
            "install libgdrapi and gdrdrv-dkms (Debian, Ubuntu) or gdrcopy and gdrcopy-kmod (RHEL, SUSE)"
            " from a repository that ./toolkit publish wrote"
        )
    packages = [fam.runtime_package, fam.module_package.format(kver=probe.release())]
    return probe.facts.install_hint(probe.read("/etc/os-release") or "", packages)


def _runtime_fix(probe: Probe) -> str:
    return (
        f"install the runtime package of this release ({_family_hint(probe, 'runtime_package', 'libgdrapi (deb) or gdrcopy (rpm)')}),"
        " which carries libgdrapi.so and libgdrapi.so.2, then run ldconfig"
    )


def _module_fix(probe: Probe, library: str) -> str:
    dkms = _family_hint(probe, "module_package", "gdrdrv-dkms (deb) or gdrcopy-kmod (rpm)")
    prebuilt = _family_hint(probe, "prebuilt_module_package", "the prebuilt module package of this kernel")
    where = "on the host (a container uses the host's gdrdrv)" if _in_container(probe) else "here"
    return (
        f"upgrade gdrdrv to {library} or newer {where}: {dkms} (or {prebuilt}), then reload it"
        " (rmmod gdrdrv; modprobe gdrdrv); or pair them the other way: a libgdrapi no newer than"
        " the running gdrdrv (the container image's, where the library comes from one)"
    )


def _libraries(probe: Probe) -> dict[str, Loaded]:
    return {name: probe.dlopen(name) for name in (consumers.UNVERSIONED, consumers.SONAME)}


def _describe(loaded: Loaded) -> str:
    version = f" (runtime {consumers.text(loaded.runtime_version)})" if loaded.runtime_version else ""
    return f"{loaded.name} -> {loaded.path or '?'}{version}"


def check_library_names(probe: Probe) -> Finding:
    """The library as consumers find it: dlopen() by the names each uses, by the real loader."""
    found = _libraries(probe)
    missing = [loaded for loaded in found.values() if loaded.error]
    if len(missing) == len(found):
        return Finding(
            "library names",
            FAIL,
            "dlopen() finds neither libgdrapi.so nor libgdrapi.so.2: no consumer can use GDRCopy",
            _runtime_fix(probe),
        )
    if missing:
        lost = missing[0]
        users = ", ".join(consumers.LOADED_BY[lost.name])
        return Finding(
            "library names",
            FAIL,
            f'dlopen("{lost.name}") fails ({lost.error}), so {users} run without GDRCopy and say so'
            f" only in a debug log; {'; '.join(_describe(x) for x in found.values() if not x.error)}",
            _runtime_fix(probe),
        )
    paths = {loaded.path for loaded in found.values()}
    described = "; ".join(_describe(x) for x in found.values())
    if len(paths) > 1:
        return Finding(
            "library names",
            WARN,
            f"the two names open different files: {described}; consumers of each get a different library",
            "remove the stray copy (often an old build under /usr/local/lib), keep the packaged one, run ldconfig",
        )
    return Finding("library names", OK, described)


def _runtime_version(found: dict[str, Loaded]) -> tuple[int, int] | None:
    """gdr_runtime_get_version() of the library by its soname, else by the unversioned name."""
    for name in (consumers.SONAME, consumers.UNVERSIONED):
        if not found[name].error and found[name].runtime_version:
            return found[name].runtime_version
    return None


def check_module_age(probe: Probe) -> Finding:
    """A gdrdrv older than the library (in a container: the host's gdrdrv against the image's library)."""
    library = _runtime_version(_libraries(probe))
    text = _module_version(probe)
    module = consumers.parse(text) if text else None
    where = " (the host's: this is a container)" if _in_container(probe) else ""
    if library is None or module is None:
        missing = "no libgdrapi" if library is None else "no gdrdrv, loaded or installed for this kernel"
        return Finding("module age", SKIP, f"{missing}: nothing to compare")
    detail = f"gdrdrv {text}{where}, libgdrapi {consumers.text(library)}"
    if module < library:
        return Finding(
            "module age",
            WARN,
            f"{detail}: the module is older than the library; consumers read driver {consumers.text(module)}"
            " (the consumer gates finding says whose gate that fails)",
            _module_fix(probe, consumers.text(library)),
        )
    return Finding("module age", OK, detail)


def _vulkan(probe: Probe) -> tuple[bool, bool]:
    """(a Vulkan loader is there, NVIDIA's Vulkan driver is registered with it)."""
    loader = not probe.dlopen("libvulkan.so.1").error
    icds = ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d")
    nvidia = any(name.startswith("nvidia") for d in icds for name in probe.listdir(d))
    return loader, nvidia


def _forced_backend(probe: Probe) -> str:
    if probe.environ("GDRCOPY_USE_DMABUF_MMAP") not in ("", "0"):
        return "dmabuf"
    return probe.environ("GDRCOPY_BACKEND")


def check_consumer_gates(probe: Probe) -> Finding:
    """Which backend consumers get, the versions they read, and which of their gates pass."""
    found = _libraries(probe)
    library = _runtime_version(found)
    text = _module_version(probe)
    module = consumers.parse(text) if probe.exists(f"/sys/module/{MODULE}") and text else None
    node = probe.node(NODE) is not None
    loader, nvidia_vulkan = _vulkan(probe)
    config = probe.environ("GDRCOPY_CONFIG_FILE") or consumers.NODE_CONFIG
    allowed = consumers.allows_vulkan(probe.read(config))

    def choice(vulkan_allowed: bool) -> consumers.Backend:
        return consumers.backend(
            library, module, node, probe.cuda_driver_version(), loader, nvidia_vulkan, _forced_backend(probe),
            vulkan_allowed,
        )  # fmt: skip

    plain, opted = choice(False), choice(True)
    chosen = opted if allowed else plain
    gates = consumers.gates(
        {name: loaded.runtime_version for name, loaded in found.items() if not loaded.error}, chosen, node
    )
    if chosen.name:
        driver = consumers.text(chosen.driver_version) + (f" ({chosen.driver_errno})" if chosen.driver_errno else "")
        lowest = min(library or (0, 0), chosen.driver_version or (0, 0))
        seen = (
            f"backend {chosen.name} ({chosen.why}); consumers read library {consumers.text(library)},"
            f" driver {driver}, aws-ofi-nccl min {consumers.text(lowest)}"
        )
    else:
        seen = f"no backend: {chosen.why}"
    node_setting = {True: "yes", False: "no", None: "not set"}[allowed]
    seen += (
        f"; a process gets {plain.name or 'no backend'} without opting in to vulkan and"
        f" {opted.name or 'no backend'} with it ({config}: allow_vulkan {node_setting})"
    )
    if allowed and chosen.name == "vulkan":
        seen += (
            "; this node opts in: consumers that pin cudaMalloc memory fail there (NCCL with NCCL_CUMEM_ENABLE=0"
            " or <= 2.18, UCX's cuda memory, NVSHMEM_DISABLE_CUDA_VMM=1; docs/consumers.md)"
        )
    passed = [g.consumer for g in gates if g.passed]
    failed = [g for g in gates if not g.passed]
    detail = f"{seen}; pass: {', '.join(passed) or 'none'}"
    if failed:
        detail += "; fail: " + ", ".join(g.consumer for g in failed)
    fix = _gates_fix(probe, found, chosen, library) if failed else ""
    return Finding("consumer gates", WARN if failed else OK, detail, fix, gates)


def _gates_fix(
    probe: Probe, found: dict[str, Loaded], chosen: consumers.Backend, library: tuple[int, int] | None
) -> str:
    """What makes the failed gates pass: the library of this release, then a gdrdrv at least as new."""
    release = consumers.parse(probe.facts.api_version) or consumers.GIN_MIN
    fixes = []
    if any(loaded.error for loaded in found.values()) or library is None or library < release:
        fixes.append(_runtime_fix(probe))
    wanted = consumers.text(max(library or release, release))
    if chosen.name == "gdrdrv":
        if chosen.driver_version is None or chosen.driver_version < consumers.GIN_MIN:
            fixes.append(_module_fix(probe, wanted))
    else:
        fixes.append(
            f"load gdrdrv {wanted} or newer ({_family_hint(probe, 'module_package', 'gdrdrv-dkms')}, then"
            " modprobe gdrdrv): without it MSCCL++ declines GDRCopy, and on the vulkan backend consumers that"
            " pin cudaMalloc memory (NCCL) fail to pin it"
        )
    return "; ".join(fixes)


CHECKS: tuple[Callable[[Probe], Finding], ...] = (
    check_nvidia_driver,
    check_p2p_symbols,
    check_kernel_headers,
    check_dkms,
    check_versions,
    check_driver_match,
    check_library_names,
    check_module_age,
    check_device_node,
    check_node_access,
    check_nvidia_smi,
    check_gpudirect,
    check_bar1,
    check_secure_boot,
    check_container_access,
    check_consumer_gates,
)


def diagnose(probe: Probe | None = None) -> list[Finding]:
    machine = probe or Probe()
    return [check(machine) for check in CHECKS]


def as_json(findings: list[Finding]) -> str:
    """The findings as a list of {check, status, detail, fix}, and `gates` where a finding judged them."""
    out = []
    for finding in findings:
        item = asdict(finding)
        if not finding.gates:
            del item["gates"]
        out.append(item)
    return json.dumps(out, indent=2)


def as_table(findings: list[Finding]) -> str:
    width = max(len(f.check) for f in findings)
    lines = []
    for f in findings:
        lines.append(f"{f.status.upper():4}  {f.check.ljust(width)}  {f.detail}")
        for gate in f.gates:
            lines.append(f"{'':4}  {'':{width}}  {'pass' if gate.passed else 'FAIL'} {gate.consumer}: {gate.reason}")
        if f.fix and f.status in (FAIL, WARN):
            lines.append(f"{'':4}  {'':{width}}  fix: {f.fix}")
    counts = {s: sum(1 for f in findings if f.status == s) for s in (OK, WARN, FAIL, SKIP)}
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items()))
    return "\n".join(lines)
