"""The programs that load libgdrapi, and the gates each puts on it (pure).

Facts from each consumer's own source (../shared/reference/consumers.md in
the project's notes): the name each one passes to dlopen(), which versions
it reads and what it requires of them.  Doctor (gdrkit.gdrcopy_doctor.doctor) feeds
this module what it probed and reports the answers; nothing here touches
the machine.  The standard library only: the packages install it with doctor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Version = tuple[int, int]

# The names consumers dlopen(), and who uses each.
UNVERSIONED = "libgdrapi.so"
SONAME = "libgdrapi.so.2"
LOADED_BY = {
    UNVERSIONED: ("NCCL", "aws-ofi-nccl", "DPDK gpudev", "libfabric < 2.4", "MVAPICH2-GDR"),
    SONAME: ("NVSHMEM", "NCCL's DOCA GPUNetIO", "libfabric >= 2.4", "UCX and MSCCL++ (linked)"),
}

# CUDA driver version (cuDriverGetVersion) from which the dma-buf backend can map GPU memory.
DMABUF_MIN_CUDA = 13030

NODE = "/dev/gdrdrv"
# GDRCOPY_BACKEND's names (gdr_get_backend_list) and the other spelling it takes.
BACKENDS = ("gdrdrv", "dmabuf", "vulkan")
BACKEND_SPELLINGS = {"dma-buf": "dmabuf"}
# The node's settings file the packages install (libgdrapi/src/node_config.h).
NODE_CONFIG = "/etc/gdrcopy.conf"
VULKAN_OPT_IN = f"GDRCOPY_BACKEND=vulkan, or allow_vulkan = yes in {NODE_CONFIG}"


def allows_vulkan(config: str | None) -> bool | None:
    """allow_vulkan in the text of a node's settings file, as libgdrapi reads it; None: not set (pure)."""
    allowed = None
    for line in (config or "").splitlines():
        key, eq, value = line.split("#", 1)[0].partition("=")
        if eq and key.strip() == "allow_vulkan":
            allowed = value.strip().lower() in ("yes", "true", "on", "1")
    return allowed


# aws-ofi-nccl's GPU-initiated networking and MSCCL++ need this much of both (pin_v2, FORCE_PCIE).
GIN_MIN = (2, 5)


def text(version: Version | None) -> str:
    return f"{version[0]}.{version[1]}" if version is not None else "none"


def parse(version: str) -> Version | None:
    """MAJOR.MINOR of "2.6", "2.6.1" or "2.6.1-1"; None when it is not a version."""
    parts = version.strip().lstrip("v").split("-")[0].split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return int(parts[0]), int(parts[1])


@dataclass(frozen=True)
class Backend:
    """The backend gdr_open() gives consumers here, and what gdr_driver_get_version() then writes."""

    name: str  # gdrdrv, dmabuf, vulkan; "" when gdr_open() fails
    # The two integers consumers read (they ignore the return value); None: no handle to ask.
    driver_version: Version | None
    driver_errno: str  # "" (success) or ENODEV
    why: str


def backend(
    library: Version | None,
    module: Version | None,
    node: bool,
    cuda_driver: int | None,
    vulkan_loader: bool,
    nvidia_vulkan: bool,
    forced: str = "",
    vulkan_allowed: bool = False,
) -> Backend:
    """gdr_open()'s choice, in its order (gdrdrv, dmabuf, vulkan), from what doctor probed (pure).

    The module-free backends report the library's own interface version
    (2.6) as the driver version where they can pin memory CUDA allocated (dma-buf:
    any; vulkan: cuMemCreate allocations with POSIX-FD shareable handles,
    which NVIDIA's Vulkan driver imports), else 0.0 with ENODEV.
    `forced` is GDRCOPY_BACKEND (or dmabuf for GDRCOPY_USE_DMABUF_MMAP=1) as doctor sees it.
    Vulkan is tried only when asked (issue 35): `forced` names it, or
    `vulkan_allowed` (the node's allow_vulkan = yes, or gdr_open_ex()).
    """
    if library is None:
        return Backend("", None, "", "no libgdrapi to open")
    forced = BACKEND_SPELLINGS.get(forced, forced)
    if forced and forced not in BACKENDS:
        return Backend(
            "",
            None,
            "",
            f"gdr_open() fails: GDRCOPY_BACKEND={forced} names no backend (it accepts {', '.join(BACKENDS)})",
        )
    reasons = []
    if forced in ("", "gdrdrv"):
        if module is not None and node:
            return Backend("gdrdrv", module, "", f"gdrdrv {text(module)} through {NODE}")
        reasons.append(f"gdrdrv: {'no ' + NODE if module is not None else 'gdrdrv is not loaded'}")
    cuda = f"CUDA driver {cuda_driver // 1000}.{cuda_driver % 1000 // 10}" if cuda_driver else "no libcuda.so.1"
    if forced in ("", "dmabuf"):
        if cuda_driver is not None and cuda_driver >= DMABUF_MIN_CUDA:
            return Backend(
                "dmabuf",
                library,
                "",
                f"dma-buf ({cuda}, where the GPU exports dma-buf): pins any memory CUDA allocated",
            )
        reasons.append(f"dmabuf: {cuda} (it needs a CUDA 13.3 driver or newer)")
    if forced == "" and not vulkan_allowed:
        reasons.append(f"vulkan: not tried unless asked ({VULKAN_OPT_IN})")
    elif forced in ("", "vulkan"):
        if cuda_driver is not None and vulkan_loader and nvidia_vulkan:
            return Backend(
                "vulkan",
                library,
                "",
                "vulkan: pins only cuMemCreate allocations made with POSIX-FD shareable handles"
                " (not cudaMalloc/cuMemAlloc memory) and gdr_alloc_mapped() memory",
            )
        if cuda_driver is not None and vulkan_loader:
            return Backend(
                "vulkan",
                (0, 0),
                "ENODEV",
                "vulkan without NVIDIA's Vulkan driver (no nvidia_icd.json): it cannot pin memory CUDA allocated",
            )
        reasons.append(f"vulkan: {cuda}, {'a' if vulkan_loader else 'no'} Vulkan loader (libvulkan.so.1)")
    if forced:
        reasons.insert(0, f"only {forced} is allowed (GDRCOPY_BACKEND/GDRCOPY_USE_DMABUF_MMAP)")
    return Backend("", None, "", "gdr_open() fails: " + "; ".join(reasons))


@dataclass(frozen=True)
class Gate:
    consumer: str
    rule: str  # what the consumer requires, in its terms
    passed: bool
    reason: str  # what it would see here


def gates(libraries: dict[str, Version | None], chosen: Backend, node: bool) -> tuple[Gate, ...]:
    """Each consumer's gate against what it would see on this host (pure).

    `libraries` maps each name consumers dlopen() to the gdr_runtime_get_version()
    of the library the loader opens for it (absent: dlopen fails); `chosen`
    is the backend gdr_open() gives.
    """
    driver = chosen.driver_version
    drv = driver or (0, 0)

    def at_least(name: str, version: Version | None, floor: Version) -> tuple[bool, str]:
        ok = version is not None and version >= floor
        return ok, f"{name} {text(version)} {'>=' if ok else '<'} {text(floor)}"

    def gate(consumer: str, name: str, rule: str, needs: Callable[[Version], list[tuple[bool, str]]]) -> Gate:
        if name not in libraries:
            return Gate(consumer, rule, False, f'dlopen("{name}") fails: it runs without GDRCopy')
        library = libraries[name]
        if library is None:
            return Gate(consumer, rule, False, f"{name} has no gdr_runtime_get_version: not a GDRCopy 2.x library")
        if not chosen.name:
            return Gate(consumer, rule, False, "gdr_open() finds no backend here: it runs without GDRCopy")
        results = needs(library)
        failed = [why for ok, why in results if not ok]
        return Gate(consumer, rule, not failed, "; ".join(failed or [why for _, why in results]))

    def aws(lib: Version) -> list[tuple[bool, str]]:
        lowest = min(lib, drv)
        ok = lowest >= (2, 5) and driver is not None
        return [(ok, f"min({text(lib)}, {text(driver)}) = {text(lowest)} {'>=' if ok else '<'} 2.5")]

    def msccl(lib: Version) -> list[tuple[bool, str]]:
        ok = drv >= (2, 5) and not chosen.driver_errno
        detail = f"driver {text(driver)}" + (f" ({chosen.driver_errno})" if chosen.driver_errno else "")
        return [(node, f"{NODE} {'exists' if node else 'is missing'}"), (ok, detail + (" >= 2.5" if ok else " < 2.5"))]

    def nvshmem(lib: Version) -> list[tuple[bool, str]]:
        if lib[0] != 2:
            return [(False, f"runtime major {lib[0]} is not its headers' 2")]
        return [
            (
                True,
                f"runtime minor {lib[1]}: an NVSHMEM built against gdrapi.h 2.0 to {text(lib)} enables it;"
                f" one built against a newer header (2.{lib[1] + 1} or later) disables it",
            )
        ]

    return (
        gate(
            "UCX",
            SONAME,
            "runtime >= 2.4 (a UCX built against >= 2.4 drops gdr_copy on a runtime <= 2.3)",
            lambda lib: [at_least("runtime", lib, (2, 4))],
        ),
        gate(
            "NCCL",
            UNVERSIONED,
            "library >= 2.1 and driver >= 2.1 (with NCCL_GDRCOPY_ENABLE=1)",
            lambda lib: [at_least("library", lib, (2, 1)), at_least("driver", driver, (2, 1))],
        ),
        gate("aws-ofi-nccl GPU-initiated networking", UNVERSIONED, "min(runtime, driver) >= 2.5", aws),
        gate("MSCCL++", SONAME, f"access({NODE}) and driver >= 2.5, its call succeeding", msccl),
        gate("NVSHMEM", SONAME, "runtime major == its header's (2) and runtime minor >= its header's", nvshmem),
    )
