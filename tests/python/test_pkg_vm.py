"""The installed packages in a VM: the DKMS-built gdrdrv loads and gdrcopy_sanity passes (slow).

A bookworm tree with the .deb packages installed (DKMS builds gdrdrv for
6.1.0-56-amd64) is exported from a container and booted under qemu with
gdrkit.vm; softgpu stands in for the GPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gdrkit.packaging import build, containers, families, model, scenarios
from gdrkit.version import REPO_ROOT
from gdrkit.vm import boot
from gdrkit.vm.runner import default_loads

KERNEL_IMAGE = Path(f"/boot/vmlinuz-{scenarios.BOOKWORM_KERNEL}")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (REPO_ROOT / "gdrdrv" / "Makefile").exists(), reason="gdrdrv has no Makefile yet"),
    pytest.mark.skipif(not KERNEL_IMAGE.exists(), reason=f"needs {KERNEL_IMAGE} to boot"),
]


def test_packaged_module_loads_and_packaged_sanity_passes(tmp_path: Path) -> None:
    build.ensure_build_deps(())
    source = build.source_at("HEAD")
    debs = tmp_path / "debs"
    plan = model.plan(families.family("debian"), source_date_epoch=source.epoch)
    build.build_debs(plan, source, debs)
    tree = tmp_path / "src"
    build.stage(plan, source, tree)
    root = tmp_path / "root"
    try:
        scenarios.prepare_vm_root(debs, tree, root)
    finally:
        containers.cleanup()
    modules = root / "lib" / "modules" / scenarios.BOOKWORM_KERNEL
    dkms_module = next(modules.rglob("gdrdrv.ko*"))
    assert "updates/dkms" in str(dkms_module), dkms_module
    loads = default_loads()
    result = boot(KERNEL_IMAGE, modules, root, "/usr/bin/gdrcopy_sanity", loads=loads, check_refcount=True,
                  log_dir=tmp_path / "vm-logs")
    print(result.console_log.read_text()[-4000:] if result.console_log.exists() else "no console log")
    assert result.status == 0 and not result.problems(loads), result.problems(loads)
