"""gdrdrv built without NVIDIA sources imports the P2P symbols with the real driver's CRCs.

Our own declarations of the NVIDIA P2P API (gdrdrv/nv_p2p_abi.h) once spelled
the integer types u64/u32/u8 where NVIDIA's nv-p2p.h says uint64_t/...;
genksyms hashes those names, so every nvidia_p2p_* import carried a CRC the
real nvidia.ko does not export and a MODVERSIONS kernel refused gdrdrv next
to it.  softgpu shared the declarations, so the VM agreed with itself.  Here
the judge is the real header from Debian's NVIDIA driver packages (535 in
bookworm, 550 in trixie), compiled with each suite's own kernel headers.
"""

from __future__ import annotations

import re
import shutil

import pytest

from gdrkit.nvidia import driver_sources
from gdrkit.vm import in_root, prepare_suite_root
from gdrkit.vm.rootfs import lock_file, locked, sync_source

pytestmark = pytest.mark.slow

ROW = re.compile(r"^(nvidia_p2p_\w+)\s+own pt(\d)\.x\s+(0x[0-9a-f]+)\s+(\S+)\s+(.*)$", re.MULTILINE)


@pytest.mark.parametrize("suite", ["bookworm", "trixie"])
def test_own_declarations_import_the_crcs_nvidia_exports(suite: str) -> None:
    root = prepare_suite_root(suite)
    nvidia = driver_sources(suite)
    inside = f"/tmp/nv-p2p-{nvidia.version}"
    target = root.root_dir / inside.lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(nvidia.p2p_header_dir / "nv-p2p.h", target / "nv-p2p.h")
    with locked(lock_file(root.root_dir)):
        sync_source(root)
        status, output = in_root(
            root.root_dir,
            f"sh /src/gdrdrv/scripts/p2p_crcs.sh -k /lib/modules/{root.abi}/build -n {inside} "
            f"-l 'NVIDIA {nvidia.version} ({nvidia.package}, {suite})'",
        )
    print(output)  # the CRC table, for the record
    rows = ROW.findall(output)
    compared = [row for row in rows if row[4] in ("same", "DIFFERENT") or row[4].startswith("MISSING")]
    assert status == 0, f"CRCs differ from NVIDIA {nvidia.version}'s:\n{output[-4000:]}"
    # Every P2P import gdrdrv makes, compared with the real header (page table 1.x in 535/550).
    names = {row[0] for row in compared}
    assert names >= {
        "nvidia_p2p_get_pages",
        "nvidia_p2p_put_pages",
        "nvidia_p2p_free_page_table",
        "nvidia_p2p_get_pages_persistent",
        "nvidia_p2p_put_pages_persistent",
    }, output
    assert all(row[4] == "same" for row in compared), output


# Soak (a minute of .ci/run): the declarations themselves are judged against the
# real drivers' CRCs above on every run; this is the 515-530 build option.
@pytest.mark.soak
def test_no_persistent_api_build_imports_no_persistent_symbol() -> None:
    # Drivers 515 to 530 export no nvidia_p2p_get_pages_persistent: a build for them must not import it.
    root = prepare_suite_root("bookworm")
    with locked(lock_file(root.root_dir)):
        sync_source(root)
        status, output = in_root(
            root.root_dir,
            "set -e; rm -rf /tmp/gdrdrv-nopersist && mkdir -p /tmp/gdrdrv-nopersist && "
            "cp -r /src/gdrdrv /src/include /tmp/gdrdrv-nopersist/ && cd /tmp/gdrdrv-nopersist/gdrdrv && "
            "make clean >/dev/null 2>&1; "
            f"make KDIR=/lib/modules/{root.abi}/build NVIDIA_SRC_DIR= NVIDIA_IS_OPENSOURCE=y GDRDRV_P2P_PT_MAJOR=1 GDRDRV_P2P_PERSISTENT_API=n >/dev/null && "
            "modprobe --dump-modversions gdrdrv.ko | grep nvidia_p2p_",
        )
    assert status == 0, output[-3000:]
    assert "nvidia_p2p_get_pages" in output and "persistent" not in output, output
