"""module_build.sh and a module-only image, run for real in Debian containers.

The RPM families' precompiled and KMM images get a gdrdrv.ko compiled in
their release's rebuild (Rocky Linux, openSUSE Leap) by module_build.sh, and
then only that module laid into the image (image_setup.sh with a .ko).  No
registry serves those bases here, so the same two scripts run with Debian's
commands in their place: the bookworm headers package of a kernel from the
mirror, our DKMS package's sources unpacked without its scriptlets (as
`rpm --noscripts` does), make, and the module in precompiled and KMM images
built through gdrkit.kube.images.build_image.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from gdrkit import containers
from gdrkit.kube import images
from gdrkit.vm.suites import resolve_kernel
from pkgkit.faults import DebSets

pytestmark = pytest.mark.slow


def test_module_build_compiles_gdrdrv_and_a_module_only_image_holds_it(deb_sets: DebSets, tmp_path: Path) -> None:
    # The container installs this kernel's headers from the archive: the host needs none,
    # so the kernel is bookworm's current one, not whichever the host has headers for.
    kver = resolve_kernel("bookworm").abi
    node = images.node_os("debian12")
    (source,) = deb_sets.new.glob("gdrdrv-dkms_*.deb")
    out = tmp_path / "out"
    out.mkdir()
    kube = tmp_path / "kube"
    kube.mkdir()
    shutil.copy2(images.MODULE_BUILD_SCRIPT, kube)
    env = {
        "REFRESH": "apt-get update -q",
        "INSTALL": "apt-get install -y -q --no-install-recommends",
        "HEADERS_FLAGS": "",
        "BUILD_PACKAGES": "kmod make gcc libc6-dev libelf1",
        "INSTALL_FILES": "dpkg --unpack",
    }
    with containers.engine() as engine:
        # The loader's base (kmod alone), as bare of a compiler as the rebuilds' images.
        base = engine.ensure_image(images.base_recipe(images.ImageSpec("kmm", node, kver)))
        command = images.module_build_command(kver, f"linux-headers-{kver}", source.name)
        result, _ = engine.run(
            base, shlex.join(command), mounts={kube: "/kube", source.parent: "/pkgs", out: "/out"}, env=env
        )
        assert result.status == 0, result.output[-4000:]
        assert "module-build: installing kmod make gcc libc6-dev libelf1\n" in result.output
        assert f"module-build: built gdrdrv.ko: vermagic {kver} " in result.output
        module = out / "gdrdrv.ko"
        vermagic = subprocess.run(["modinfo", "-F", "vermagic", module], capture_output=True, text=True, check=True)
        assert vermagic.stdout.startswith(f"{kver} ")

        for kind in ("precompiled", "kmm"):
            spec = images.ImageSpec(kind, node, kver, "gdrkit-test")
            row = images.build_image(engine, spec, base, [], module=module)
            assert row.status == "built", row
            unpacked = tmp_path / kind
            engine.export_image(spec.tag, unpacked)
            placed = unpacked / "lib" / "modules" / kver / "updates" / "gdrdrv.ko"
            assert placed.read_bytes() == module.read_bytes()
            if kind == "kmm":
                dep = (unpacked / "opt" / "lib" / "modules" / kver / "modules.dep").read_text()
                assert dep.startswith("updates/gdrdrv.ko:"), dep
            else:
                assert (unpacked / "usr" / "local" / "bin" / "nvidia-gdrcopy-driver").is_file()
                assert not (unpacked / "usr" / "bin" / "gcc").exists()
            engine.client.images.remove(spec.tag)
