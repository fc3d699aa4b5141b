"""NVIDIA's real driver parts, from Debian's archive (contrib and non-free).

Our stand-ins (softgpu and its libcuda) are built from our own reading of
NVIDIA's interfaces; where the real part can be had, it is the judge.  Debian
ships the NVIDIA kernel driver's sources as DKMS packages
(`nvidia-kernel-dkms`, `nvidia-open-kernel-dkms`: 535 in bookworm, 550 in
trixie), whose `nvidia/nv-p2p.h` is the P2P API's real header.  This module
fetches them once into the cache and says where they are.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gdrkit.system import cache_dir, die
from gdrkit.vm.suites import SUITES, suite_lists

# The DKMS source package of each flavour of NVIDIA's kernel driver.
DKMS_PACKAGES = {
    "proprietary": "nvidia-kernel-dkms",
    "open": "nvidia-open-kernel-dkms",
}

# The DKMS module name each flavour's package registers (dkms status, /var/lib/dkms,
# /usr/src/<name>-<version>; the module files are installed as nvidia-current*.ko).
DKMS_MODULES = {
    "proprietary": "nvidia-current",
    "open": "nvidia-current-open",
}


@dataclass(frozen=True)
class DriverPackage:
    """The NVIDIA kernel driver DKMS package that a suite's apt would install."""

    suite: str
    flavour: str
    package: str
    version: str  # the Debian package version, e.g. 535.309.01-0+deb12u1
    dkms_module: str

    @property
    def upstream_version(self) -> str:
        return self.version.rsplit("-", 1)[0]


def driver_package(suite: str, flavour: str, *, refresh: bool = False) -> DriverPackage:
    """The candidate version of `suite`'s NVIDIA DKMS package of `flavour`, from its private lists."""
    if suite not in SUITES:
        raise die(f"unknown Debian suite {suite!r}", f"use one of {', '.join(SUITES)}")
    if flavour not in DKMS_PACKAGES:
        raise die(f"unknown NVIDIA driver flavour {flavour!r}", f"use one of {', '.join(DKMS_PACKAGES)}")
    package = DKMS_PACKAGES[flavour]
    status, out = suite_lists(SUITES[suite], refresh=refresh).query(["show", "--no-all-versions", package])
    version = re.search(r"^Version: (\S+)", out, re.MULTILINE)
    if status != 0 or not version:
        raise die(f"{suite} has no package {package} in main, contrib or non-free", "refresh the lists (--refresh)")
    return DriverPackage(suite, flavour, package, version.group(1), DKMS_MODULES[flavour])


@dataclass(frozen=True)
class DriverSources:
    """One NVIDIA kernel driver's sources, unpacked from Debian's DKMS package."""

    suite: str
    package: str
    version: str  # upstream driver version, e.g. 535.261.03
    source_dir: Path  # the unpacked /usr/src/nvidia-current[-open]-<version>

    @property
    def p2p_header_dir(self) -> Path:
        """The directory holding the real nv-p2p.h."""
        return self.source_dir / "nvidia"


def driver_sources(suite: str, flavour: str = "proprietary", *, refresh: bool = False) -> DriverSources:
    """The NVIDIA driver sources that `suite` ships, downloaded and unpacked once."""
    if suite not in SUITES:
        raise die(f"unknown Debian suite {suite!r}", f"use one of {', '.join(SUITES)}")
    if flavour not in DKMS_PACKAGES:
        raise die(f"unknown NVIDIA driver flavour {flavour!r}", f"use one of {', '.join(DKMS_PACKAGES)}")
    package = DKMS_PACKAGES[flavour]
    deb = suite_lists(SUITES[suite], refresh=refresh).download(package)
    unpacked = cache_dir() / "nvidia" / deb.stem
    if not (unpacked / "usr" / "src").is_dir():
        unpacked.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], capture_output=True, text=True)
        if result.returncode != 0:
            raise die(f"cannot unpack {deb}: {result.stderr.strip()}", f"delete {deb} and try again")
    found = sorted(p.parent for p in (unpacked / "usr" / "src").glob("nvidia-*/nvidia/nv-p2p.h"))
    if not found:
        raise die(f"{deb.name} has no nvidia/nv-p2p.h under /usr/src", "the package layout changed; look inside it with dpkg-deb -c")
    source_dir = found[0].parent
    match = re.search(r"(\d+\.\d+(?:\.\d+)?)$", source_dir.name)
    return DriverSources(suite, package, match.group(1) if match else source_dir.name, source_dir)
