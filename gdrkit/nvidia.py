"""NVIDIA's real driver parts, from Debian's archive (contrib and non-free).

Our stand-ins (softgpu and its libcuda) are built from our own reading of
NVIDIA's interfaces; where the real part can be had, it is the judge.  Debian
ships the NVIDIA kernel driver's sources as DKMS packages
(`nvidia-kernel-dkms`, `nvidia-open-kernel-dkms`: 535 in bookworm, 550 in
trixie), whose `nvidia/nv-p2p.h` is the P2P API's real header, and the
driver's user-space half: the CUDA driver library (`libcuda1`) and
`nvidia-smi`.  This module fetches them once into the cache and says where
they are; `run_without_driver` runs their programs as on a host whose kernel
driver is not loaded (none can be loaded here: there is no GPU).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gdrkit.system import cache_dir, die
from gdrkit.version import REPO_ROOT
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
        raise die(
            f"{deb.name} has no nvidia/nv-p2p.h under /usr/src",
            "the package layout changed; look inside it with dpkg-deb -c",
        )
    source_dir = found[0].parent
    match = re.search(r"(\d+\.\d+(?:\.\d+)?)$", source_dir.name)
    return DriverSources(suite, package, match.group(1) if match else source_dir.name, source_dir)


# The driver's user-space half: the CUDA driver library and what it dlopens
# (the PTX JIT; the PKCS#11 provider for confidential computing), and
# nvidia-smi with the management library it dlopens.
USERSPACE_PACKAGES = (
    "libcuda1",
    "libnvidia-ptxjitcompiler1",
    "libnvidia-pkcs11-openssl3",
    "nvidia-smi",
    "libnvidia-ml1",
)
# Runs a command in a private /dev, so that the libraries' mknod of
# /dev/nvidiactl never reaches the host (see the script).
NO_DRIVER_SANDBOX = REPO_ROOT / "tests" / "realcuda" / "no-driver.sh"


@dataclass(frozen=True)
class DriverLibraries:
    """The user-space half of one NVIDIA driver, unpacked from Debian's packages."""

    suite: str
    version: str  # upstream driver version, e.g. 535.309.01
    root: Path  # the packages' files, unpacked under here

    @property
    def lib_dir(self) -> Path:
        return self.root / "usr/lib/x86_64-linux-gnu/nvidia/current"

    @property
    def libcuda(self) -> Path:
        return self.lib_dir / "libcuda.so.1"

    @property
    def nvidia_smi(self) -> Path:
        return self.root / "usr/lib/nvidia/current/nvidia-smi"

    @property
    def library_path(self) -> str:
        """LD_LIBRARY_PATH that finds libcuda.so.1, libnvidia-ml.so.1 and the rest."""
        return f"{self.lib_dir}:{self.root / 'usr/lib/x86_64-linux-gnu'}"


_unpacked: dict[str, DriverLibraries] = {}


def driver_libraries(suite: str, *, refresh: bool = False) -> DriverLibraries:
    """libcuda1, nvidia-smi and their libraries from `suite`, downloaded and unpacked once."""
    if suite not in SUITES:
        raise die(f"unknown Debian suite {suite!r}", f"use one of {', '.join(SUITES)}")
    if suite in _unpacked and not refresh:
        return _unpacked[suite]
    lists = suite_lists(SUITES[suite], refresh=refresh)
    # One apt-cache call for the candidate versions: the set is named by libcuda1's.
    status, out = lists.query(["show", "--no-all-versions", *USERSPACE_PACKAGES])
    versions = dict(re.findall(r"^Package: (\S+)\n(?:.*\n)*?Version: (\S+)", out, re.MULTILINE))
    missing = [package for package in USERSPACE_PACKAGES if package not in versions]
    if status != 0 or missing:
        raise die(
            f"{suite} has no {', '.join(missing) or 'packages'} (apt-cache show exited {status})",
            "the NVIDIA packages live in contrib and non-free; refresh the lists (--refresh)",
        )
    debian_version = versions["libcuda1"].split(":")[-1]
    root = cache_dir() / "nvidia" / f"userspace-{suite}-{debian_version}"
    if not (root / ".unpacked").exists():
        debs = [lists.download(package) for package in USERSPACE_PACKAGES]
        root.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=root.name + ".", dir=root.parent))
        try:
            for deb in debs:
                result = subprocess.run(["dpkg-deb", "-x", str(deb), str(partial)], capture_output=True, text=True)
                if result.returncode != 0:
                    raise die(f"cannot unpack {deb}: {result.stderr.strip()}", f"delete {deb} and try again")
            (partial / ".unpacked").touch()
            shutil.rmtree(root, ignore_errors=True)
            partial.rename(root)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    # 535.309.01-0+deb12u1 -> 535.309.01
    libraries = DriverLibraries(suite, debian_version.rsplit("-", 1)[0], root)
    for needed in (libraries.libcuda, libraries.nvidia_smi):
        if not needed.exists():
            raise die(
                f"{needed.relative_to(root)} is not in {suite}'s {', '.join(USERSPACE_PACKAGES)}",
                "the package layout changed; look inside them with dpkg-deb -c",
            )
    _unpacked[suite] = libraries
    return libraries


def run_without_driver(
    argv: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run `argv` as on a host without the NVIDIA kernel driver (private /dev; needs root)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [str(NO_DRIVER_SANDBOX), *(os.fspath(a) for a in argv)],
        env=full_env, input=input_text if input_text is not None else "", capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip
