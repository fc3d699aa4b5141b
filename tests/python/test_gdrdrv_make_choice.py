"""Which NVIDIA driver gdrdrv's make builds for, without NVIDIA's sources (issue 36; quick).

gdrdrv/Makefile reads the nvidia module installed for KVER
(gdrdrv/scripts/nvidia_module.sh): its license gives the flavour, its version
the nv-p2p page-table version; with neither sources nor a module the build
stops and says what to install.  Here the module is an ELF object carrying
only the .modinfo fields that modinfo reads (license, version, name) under a
root given as NVIDIA_MODULES_ROOT, so each branch of the choice runs in
milliseconds; tests/python/test_nvidia_module_choice.py (soak) judges the
same choice against Debian's real NVIDIA modules, DKMS build and CRCs included.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gdrkit.system import ensure_debian_packages
from gdrkit.version import REPO_ROOT

KVER = "9.9.9-gdrkit-test"


@pytest.fixture(scope="module", autouse=True)
def tools() -> None:
    ensure_debian_packages(["make", "binutils", "kmod"])


def plant_module(root: Path, license_text: str, version: str, file_name: str = "nvidia-current.ko") -> Path:
    """An object under root/lib/modules/KVER whose .modinfo says what a module of that license and version says."""
    where = root / "lib" / "modules" / KVER / "updates" / "dkms"
    where.mkdir(parents=True, exist_ok=True)
    fields = root / "modinfo.bin"
    fields.write_bytes(f"license={license_text}\0version={version}\0name=nvidia\0".encode())
    ko = where / file_name
    subprocess.run(
        ["objcopy", "-I", "binary", "-O", "elf64-x86-64", "-B", "i386:x86-64",
         "--rename-section", ".data=.modinfo,alloc,load,readonly,data,contents", fields.name, str(ko)],
        cwd=root, check=True,
    )  # fmt: skip
    return ko


def make(root: Path, target: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-s", "-C", str(REPO_ROOT / "gdrdrv"), target, f"KVER={KVER}", f"NVIDIA_MODULES_ROOT={root}",
         "NVIDIA_SRC_DIR=", *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def settings(out: str) -> dict[str, str]:
    pairs = (line.strip().partition(" = ") for line in out.splitlines() if " = " in line)
    return {key.strip(): value for key, _, value in pairs}


@pytest.mark.parametrize(
    ("license_text", "version", "open_source", "table", "persistent"),
    [
        ("NVIDIA", "535.261.03", "n", "1", "y"),  # bookworm's nvidia-kernel-dkms
        ("Dual MIT/GPL", "535.261.03", "y", "1", "y"),  # bookworm's nvidia-open-kernel-dkms
        ("NVIDIA", "550.163.01", "n", "1", "y"),  # trixie
        ("Dual MIT/GPL", "575.57.08", "y", "1", "y"),
        ("Dual MIT/GPL", "580.95.05", "y", "2", "y"),  # page table 2.0 from 580
        ("NVIDIA", "595.45.04", "n", "2", "y"),
        ("NVIDIA", "530.41.03", "n", "1", "n"),  # before nvidia_p2p_get_pages_persistent
    ],
)
def test_the_installed_module_decides_flavour_and_page_table(
    tmp_path: Path, license_text: str, version: str, open_source: str, table: str, persistent: str
) -> None:
    ko = plant_module(tmp_path, license_text, version)
    done = make(tmp_path, "settings")
    assert done.returncode == 0, done.stderr
    found = settings(done.stdout)
    assert found["NVIDIA_IS_OPENSOURCE"] == open_source
    assert found["nv-p2p declarations"] == (
        f"gdrdrv's own declarations (nv_p2p_abi.h, page table {table}.x, persistent API {persistent})"
    )
    described = f"nvidia {version} ({ko}, license {license_text})"
    assert found["flavour from"] == f"the license of {described}"
    assert found["page table from"].startswith(f"the version of {described}")
    helped = make(tmp_path, "help")
    assert f"NVIDIA driver for {KVER}: {described}" in helped.stdout


def test_a_module_found_by_any_file_name(tmp_path: Path) -> None:
    # Ubuntu's linux-modules-nvidia-* and .run installs name the file nvidia.ko, elsewhere than updates/dkms.
    ko = plant_module(tmp_path, "NVIDIA", "570.172.08", file_name="nvidia.ko")
    assert str(ko) in make(tmp_path, "settings").stdout


def test_without_sources_or_module_the_build_stops_and_says_what_to_install(tmp_path: Path) -> None:
    done = make(tmp_path, "all")
    assert done.returncode != 0
    assert f"gdrdrv: no NVIDIA driver for kernel {KVER}" in done.stderr
    assert (
        "install the NVIDIA driver for" in done.stderr
        and "nvidia-kernel-dkms or nvidia-open-kernel-dkms" in done.stderr
    )
    assert 'MAKE[0]="${MAKE[0]} NVIDIA_IS_OPENSOURCE=n GDRDRV_P2P_PT_MAJOR=1"' in done.stderr
    helped = make(tmp_path, "help")
    assert helped.returncode == 0 and f"NVIDIA driver for {KVER}: none found" in helped.stdout
    assert "a build would stop: no NVIDIA driver" in helped.stdout


@pytest.mark.parametrize(
    ("version", "says"),
    [("470.256.02", "gdrdrv needs 515 or newer"), ("", "not an NVIDIA driver version")],
)
def test_a_module_gdrdrv_cannot_serve_stops_the_build(tmp_path: Path, version: str, says: str) -> None:
    plant_module(tmp_path, "NVIDIA", version)
    done = make(tmp_path, "settings")
    assert done.returncode != 0 and says in done.stderr, done.stderr
    # Told what to build for, it builds (a stand-in named nvidia, as the test VMs load softgpu).
    assert make(tmp_path, "settings", "NVIDIA_IS_OPENSOURCE=y", "GDRDRV_P2P_PT_MAJOR=2").returncode == 0


def test_given_values_win_and_say_so(tmp_path: Path) -> None:
    plant_module(tmp_path, "NVIDIA", "535.261.03")
    found = settings(make(tmp_path, "settings", "NVIDIA_IS_OPENSOURCE=y", "GDRDRV_P2P_PT_MAJOR=2").stdout)
    assert found["NVIDIA_IS_OPENSOURCE"] == "y" and "page table 2.x" in found["nv-p2p declarations"]
    assert found["flavour from"] == found["page table from"] == "given (command line)"
    # No module: both must be given.
    bare = tmp_path / "bare"
    bare.mkdir()
    done = make(bare, "settings", "NVIDIA_IS_OPENSOURCE=n")
    assert done.returncode != 0 and "NVIDIA_IS_OPENSOURCE is given but not GDRDRV_P2P_PT_MAJOR" in done.stderr
    told = make(bare, "settings", "NVIDIA_IS_OPENSOURCE=n", "GDRDRV_P2P_PT_MAJOR=1")
    assert told.returncode == 0 and "built as told, with no NVIDIA driver here" in told.stdout


def test_a_stand_in_provider_alone_keeps_the_open_page_table_2_build(tmp_path: Path) -> None:
    symvers = tmp_path / "Module.symvers"
    symvers.write_text("")
    found = settings(make(tmp_path, "settings", f"P2P_SYMVERS={symvers}").stdout)
    assert found["NVIDIA_IS_OPENSOURCE"] == "y" and "page table 2.x" in found["nv-p2p declarations"]
    assert "stand-in provider" in found["flavour from"]
