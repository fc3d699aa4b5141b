"""Real consumers in the VM: UCX and libfabric, built from Debian's sources against this tree (issue 22).

gdrkit.consumers fetches each consumer's Debian source package at test time
(`apt-get source`, never committed), builds it on the host with GDRCopy and
CUDA support against this tree's gdrapi.h and libgdrapi (CUDA headers and
runtime from Debian non-free, softgpu's libcuda as the driver), caches the
build, and copies it into the bookworm VM root, where softgpu and gdrdrv are
loaded and our library is installed under /usr/local.
tests/consumers/consumers_guest.sh then prints, per consumer, what it says
about GDRCopy; these tests judge it:

- UCX 1.13.1 (bookworm): its gdr_copy module resolves our libgdrapi.so.2,
  and tests/consumers/ucx_gdr_copy_check.c (UCX's public UCT API, UCX_TLS=
  gdr_copy) registers cuMemAlloc memory with the gdr_copy memory domain and
  moves data both ways through the transport, each byte checked with
  cuMemcpy: once on our gdrdrv backend, once on our dma-buf backend
  (GDRCOPY_USE_DMABUF_MMAP=1; softgpu exports its memory as dma-bufs too),
  each run naming the backend gdr_open chose.  `ucx_info -d` lists gdr_copy only when the CUDA runtime counts a
  GPU; over softgpu, Debian's libcudart 11.8 cannot (it needs the driver's
  private export table, cuGetExportTable), and that test is skipped with the
  runtime's and the driver's own lines as the reason.
- libfabric (trixie's 2.1.0 source: bookworm's 1.17 source files are not on
  the mirror), CUDA and libgdrapi dlopened: with FI_HMEM_CUDA_USE_GDRCOPY=1,
  what its CUDA hmem initialisation says, once with NVIDIA's NVML on the path
  (its nvmlInit needs NVIDIA's kernel driver: "FI_HMEM_CUDA not supported")
  and once without (it then asks the CUDA runtime, which fails as above);
  skipped with its own words where it cannot start.

Each runs twice: softgpu BAR-backed (write-combined, as on a discrete GPU)
and RAM-backed (force_ram=1, cached, the coherent-platform path).

Cost on 2 cores shared with other work, measured 2026-12-02: cold (nothing
cached) 861 s of builds: the 775 MB nvidia-cuda-dev download and unpack
(130 s), UCX's autogen, configure and build (489 s), libfabric's (190 s),
plus source and list downloads.  Warm (builds cached; the key is the source
version, our installed headers and the library's exported symbols, the CUDA
packages' versions and the build scripts and programs, so a change inside
libgdrapi does not rebuild): 129 s for the whole file, of which about 60 s
is the bookworm root's build of this tree that test_in_vm.py and the other
VM tests share, so about 70 s of its own (`make lib` into a prefix, copying
into the root, two boots of ~30 s).  UCX is in the slow tier (.ci/run) for
that warm cost and its cold one (about 10 min: CUDA headers and UCX); the
cold cost is paid once per source version or change of our ABI.  libfabric,
whose cold build adds about 3 min and which cannot start its CUDA hmem over
softgpu, is in the soak tier (./toolkit test --soak), with a boot of its own.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gdrkit import consumers
from gdrkit.system import UserError
from gdrkit.vm import SuiteRoot, boot, default_loads

GUEST_SCRIPT = f"{consumers.GUEST_PREFIX}/{consumers.GUEST_SCRIPT.name}"
EXPORT_TABLE = re.compile(r"cuGetExportTable\(([0-9a-f-]{36})\)")


# --- fast: the pure parts ---------------------------------------------------------------------------


def test_sections_split_the_console_by_marker() -> None:
    console = "boot noise\n==== a ====\nline 1\n[ 1.0] kernel\n==== b c ====\nx\n==== end ====\npower off\n"
    assert consumers.sections(console) == {"a": "line 1\n[ 1.0] kernel", "b c": "x", "end": "power off"}


def test_source_files_reads_version_and_checksums() -> None:
    showsrc = (
        "Package: ucx\nVersion: 1.13.1-1\nChecksums-Sha256:\n aa 12 ucx_1.13.1-1.dsc\n bb 34 ucx_1.13.1.orig.tar.xz\n"
        "Homepage: x\n\nPackage: ucx\nVersion: 1.12.0-1\n"
    )
    assert consumers.source_files(showsrc) == (
        "1.13.1-1",
        {"ucx_1.13.1-1.dsc": "aa", "ucx_1.13.1.orig.tar.xz": "bb"},
    )
    assert consumers.source_files("") == ("", {})


def test_build_key_follows_every_input() -> None:
    ucx = consumers.CONSUMERS["ucx"]
    base = consumers.build_key(ucx, "1.13.1-1", ("libcudart11.0=11.8",), "abi")
    assert base == consumers.build_key(ucx, "1.13.1-1", ("libcudart11.0=11.8",), "abi")
    assert base != consumers.build_key(ucx, "1.13.1-2", ("libcudart11.0=11.8",), "abi")
    assert base != consumers.build_key(ucx, "1.13.1-1", ("libcudart11.0=12.0",), "abi")
    assert base != consumers.build_key(ucx, "1.13.1-1", ("libcudart11.0=11.8",), "other abi")
    assert base != consumers.build_key(consumers.CONSUMERS["libfabric"], "1.13.1-1", ("libcudart11.0=11.8",), "abi")


def test_source_lists_add_deb_src_lines_in_a_place_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gdrkit.vm import suites

    calls: list[list[str]] = []

    def fake_run(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(suites, "run", fake_run)
    binary = suites.AptLists(suites.SUITES["bookworm"], tmp_path)
    sources = suites.AptLists(suites.SUITES["bookworm"], tmp_path, source_packages=True)
    assert sources.base != binary.base and sources.base.name == "bookworm-src"
    sources.update()
    lines = sources.sources.read_text().splitlines()
    assert "deb http://deb.debian.org/debian bookworm main contrib non-free" in lines
    assert "deb-src http://deb.debian.org/debian bookworm main contrib non-free" in lines
    assert len([line for line in lines if line.startswith("deb-src ")]) == len(lines) // 2
    assert calls and calls[0][:3] == ["apt-get", "-q", "update"]


def test_build_refuses_an_unknown_consumer() -> None:
    with pytest.raises(UserError, match="unknown consumer 'nccl'"):
        consumers.build("nccl")


# --- slow: the real consumers in the VM ---------------------------------------------------------------


@dataclass
class GuestRun:
    status: int | None
    console: str
    problems: list[str]
    parts: dict[str, str]
    builds: dict[str, consumers.Build] = field(default_factory=dict)
    build_errors: dict[str, str] = field(default_factory=dict)

    def part(self, name: str) -> str:
        assert name in self.parts, f"the guest printed no '{name}' section:\n{self.console[-6000:]}"
        return self.parts[name]


# softgpu's two kinds of GPU memory: a PCI BAR mapped write-combined (as on a
# discrete GPU), and ordinary pages mapped cached (the coherent-platform path).
SOFTGPU_MODES = {"bar": "", "ram": "force_ram=1"}


@dataclass
class Consumers:
    root: SuiteRoot
    builds: dict[str, consumers.Build]
    errors: dict[str, str]  # consumer -> why it could not be built
    cuda: consumers.CudaPrefix


# The slow tier (.ci/run) builds and runs UCX; libfabric, which cannot start its
# CUDA hmem over softgpu anyway, costs a cold build of its own and runs in the soak tier.
SLOW_TIER_CONSUMERS = ("ucx",)


def _build_consumers(built_root: Callable[[str], SuiteRoot], names: tuple[str, ...]) -> Consumers:
    root = built_root("bookworm")
    builds: dict[str, consumers.Build] = {}
    errors: dict[str, str] = {}
    for name in names:
        try:
            builds[name] = consumers.build(name)
        except UserError as error:
            errors[name] = str(error)
    for name, one in builds.items():
        cost = f"built in {one.seconds:.0f} s" if one.seconds else "from the cache"
        print(f"{name} {one.source.version} ({one.source.suite}, {one.source.how}): key {one.key}, {cost}")
    return Consumers(root, builds, errors, consumers.cuda_prefix())


def _boot_guest(built: Consumers, softgpu_mode: str) -> GuestRun:
    root, builds, errors = built.root, built.builds, built.errors
    # A fresh copy before each boot, whatever an earlier run left in the shared root.
    consumers.install_into_root(root.root_dir, list(builds.values()), built.cuda)
    loads = default_loads(softgpu_args=SOFTGPU_MODES[softgpu_mode])
    result = boot(
        root.kernel_image, root.modules_dir, root.root_dir, f"bash {GUEST_SCRIPT}", loads=loads, check_refcount=True
    )
    console = result.console_log.read_text(errors="replace")
    run = GuestRun(result.status, console, result.problems(loads), consumers.sections(console), builds, errors)
    print(f"---- softgpu {softgpu_mode}-backed ({' '.join(load.name + ' ' + ' '.join(load.args) for load in loads)})")
    for name, text in run.parts.items():
        if name != "end":
            print(f"==== {name} ====\n{text}")
    return run


@pytest.fixture(scope="module")
def built_consumers(built_root: Callable[[str], SuiteRoot]) -> Consumers:
    return _build_consumers(built_root, SLOW_TIER_CONSUMERS)


@pytest.fixture(scope="module", params=list(SOFTGPU_MODES))
def guest(request: pytest.FixtureRequest, built_consumers: Consumers) -> GuestRun:
    return _boot_guest(built_consumers, str(request.param))


@pytest.fixture(scope="module")
def guest_with_every_consumer(built_root: Callable[[str], SuiteRoot]) -> GuestRun:
    return _boot_guest(_build_consumers(built_root, tuple(consumers.CONSUMERS)), "bar")


@pytest.mark.slow
def test_the_vm_run_is_clean(guest: GuestRun) -> None:
    assert guest.status == 0, guest.console[-6000:]
    assert not guest.problems, (guest.problems, guest.console[-6000:])


def _need(guest: GuestRun, name: str) -> None:
    if name not in guest.builds:
        pytest.fail(f"{name} could not be built: {guest.build_errors.get(name)}")


@pytest.mark.slow
def test_ucx_gdr_copy_module_loads_our_libgdrapi(guest: GuestRun) -> None:
    _need(guest, "ucx")
    libraries = guest.part("libraries")
    assert "libgdrapi: /usr/local/lib/libgdrapi.so.2." in libraries, libraries
    assert re.search(r"ldd gdrcopy module: libgdrapi\.so\.2 => /usr/local/lib/libgdrapi\.so\.2 ", libraries), libraries
    assert "libcuda: /usr/local/lib/libcuda.so.1" in libraries, libraries


# The guest's data-check sections: our backend each one forces (none: gdr_open's first choice).
DATA_CHECKS = {"gdrdrv": "ucx gdr_copy data check", "dmabuf": "ucx gdr_copy data check (dma-buf backend)"}


@pytest.mark.slow
@pytest.mark.parametrize("backend", list(DATA_CHECKS))
def test_ucx_gdr_copy_moves_correct_data_between_host_and_gpu_memory(guest: GuestRun, backend: str) -> None:
    _need(guest, "ucx")
    check = guest.part(DATA_CHECKS[backend])
    assert f"gdr_open: using the {backend} backend" in check, check
    assert "UCX-GDR: memory domain gdr_copy opened" in check, check
    assert "UCX-GDR: transport gdr_copy on device cuda" in check, check
    assert len(re.findall(r"^UCX-GDR: (host->gpu put_short|gpu->host get_short) .*: ok$", check, re.M)) == 8, check
    assert "UCX-GDR: all data checks passed" in check and "ucx_gdr_copy_check exit status: 0" in check, check


@pytest.mark.slow
def test_ucx_info_lists_the_gdr_copy_memory_domain_and_transport(guest: GuestRun) -> None:
    _need(guest, "ucx")
    listing = guest.part("ucx_info -d")
    assert "ucx_info -d exit status: 0" in listing, listing
    if "# Memory domain: gdr_copy" in listing:
        after = listing.split("# Memory domain: gdr_copy", 1)[1]
        assert re.search(r"#\s+Transport: gdr_copy", after), listing
        return
    cudart = guest.part("cudart")
    blocked = EXPORT_TABLE.search(cudart)
    if blocked and "cudaGetDeviceCount returned" in cudart:
        runtime = next(line for line in cudart.splitlines() if line.startswith("CUDART:"))
        pytest.skip(
            "ucx_info -d lists no gdr_copy: UCX 1.13 lists it only when cudaGetDeviceCount counts a GPU, and"
            f" Debian's libcudart 11.8 first asks the driver for its private export table {blocked.group(1)}"
            f" (cuGetExportTable), which softgpu's libcuda cannot provide. The runtime said: {runtime}"
        )
    pytest.fail(f"ucx_info -d lists no gdr_copy, for no reason seen here:\n{listing}\n---- cudart ----\n{cudart}")


def libfabric_stops(said: str) -> list[str]:
    """libfabric's lines that say its CUDA hmem (and so GDRCopy) is off, and why (pure)."""
    return [
        line
        for line in said.splitlines()
        if "FI_HMEM_CUDA not supported" in line
        or (re.search(r"[Ff]ail|[Uu]nable", line) and re.search(r"CUDA|cuda|GDR|gdr|\bcu[A-Z]|nvml", line))
    ]


@pytest.mark.soak
def test_libfabric_cuda_hmem_with_gdrcopy(guest_with_every_consumer: GuestRun) -> None:
    guest = guest_with_every_consumer
    _need(guest, "libfabric")
    with_nvml, without_nvml = guest.part("fi_info"), guest.part("fi_info without NVML")
    for said in (with_nvml, without_nvml):
        assert "fi_info exit status: 0" in said, said
    stops = libfabric_stops(with_nvml), libfabric_stops(without_nvml)
    if all(stops):
        pytest.skip(
            "libfabric's CUDA hmem (and so GDRCopy) did not initialise here. With NVIDIA's NVML on the path it"
            f" said: {' | '.join(stops[0])}. Without NVML: {' | '.join(stops[1])}"
        )
    # It initialised: this suite has no libfabric data check to judge it by yet, so it does not pass.
    pytest.skip(f"libfabric reported no CUDA hmem failure, and no libfabric data check exists yet:\n{without_nvml}")


def test_libfabric_stops_are_found_in_its_log() -> None:
    log = (
        "libfabric:1::core:core:ofi_hmem_init():665<info> Hmem iface FI_HMEM_CUDA not supported\n"
        "libfabric:1::core:core:ofi_hmem_init():665<info> Hmem iface FI_HMEM_ZE not supported\n"
        "libfabric:1::core:core:cuda_hmem_dl_init():503<warn> Failed to find cuPointerGetAttributes\n"
        "libfabric:1::core:core:cuda_hmem_verify_devices():590<warn> Failed to perform cudaGetDeviceCount: x\n"
        "provider: shm\n"
    )
    assert [line.split("> ")[1] for line in libfabric_stops(log)] == [
        "Hmem iface FI_HMEM_CUDA not supported",
        "Failed to find cuPointerGetAttributes",
        "Failed to perform cudaGetDeviceCount: x",
    ]


def test_install_into_root_brings_the_guest_script(tmp_path: Path) -> None:
    stage = tmp_path / "stage" / "opt" / "consumers" / "ucx" / "bin"
    stage.mkdir(parents=True)
    (stage / "ucx_info").write_text("")
    cuda = consumers.CudaPrefix(tmp_path / "cuda", ())
    (cuda.path / "lib").mkdir(parents=True)
    (cuda.path / "lib" / "libcudart.so.11.0").write_text("")
    source = consumers.SourceTree("ucx", "bookworm", "1", tmp_path, "test")
    one = consumers.Build("ucx", source, tmp_path / "stage", "key", 0.0)
    root = tmp_path / "root"
    consumers.install_into_root(root, [one], cuda)
    assert (root / GUEST_SCRIPT.lstrip("/")).read_text() == consumers.GUEST_SCRIPT.read_text()
    assert (root / "opt/consumers/ucx/bin/ucx_info").exists()
    assert (root / "opt/consumers/cuda/lib/libcudart.so.11.0").exists()
