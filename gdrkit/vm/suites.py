"""Debian suites and their kernels: which suite, which kernel ABI, which packages.

A kernel is asked for by suite (`trixie`: that suite's current
linux-image-<flavour>, amd64 unless another architecture or flavour is
asked for) or by ABI string (`6.12.57+deb13-arm64-16k`: those exact
packages, in whichever suite has them).  The suites and mirrors are
gdrkit.distro.debian's.  The host's apt sources are never touched: each suite gets a private sources list and package lists under the
cache, refreshed at most once a day.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gdrkit.distro.arch import HOST_ARCH, Arch, arch_of_abi, flavour_of_abi
from gdrkit.distro.debian import SUITES, Suite
from gdrkit.system import bad_input, die, log, run

__all__ = ["SUITES", "AptLists", "AptQuery", "KernelChoice", "Suite", "resolve_kernel", "suite_lists"]

LISTS_MAX_AGE_S = 24 * 3600
# The components a suite's private lists carry: contrib and non-free hold
# NVIDIA's real driver packages (nvidia-kernel-dkms, libcuda1), the judges
# of our stand-ins.  Roots are built from main alone.
ARCHIVE_COMPONENTS = ("main", "contrib", "non-free")


# ABI strings of Debian's own kernels: 5.10.0-35-amd64 (bullseye),
# 6.1.0-41-amd64 (bookworm), 6.12.57+deb13-amd64 (trixie and later).
_ABI_SERIES = {"5.10.0-": "bullseye", "6.1.0-": "bookworm"}
_ABI_DEB_TAG = re.compile(r"\+deb(\d+)")
_DEPENDS_IMAGE = re.compile(r"Depends:\s*linux-image-(\S+)")


@dataclass(frozen=True)
class KernelChoice:
    """A kernel to boot: its suite, ABI and the packages that hold it."""

    suite: Suite
    abi: str
    arch: Arch = HOST_ARCH

    @property
    def version(self) -> str:
        """The ABI without its flavour (`6.12.57+deb13`): what the flavours of one build share."""
        flavour = flavour_of_abi(self.abi)
        return self.abi.removesuffix(f"-{flavour}") if flavour else self.abi

    @property
    def image_package(self) -> str:
        return f"linux-image-{self.abi}"

    @property
    def headers_package(self) -> str:
        return f"linux-headers-{self.abi}"


# The subprocess edge, replaceable in tests: (argv) -> (status, stdout).
AptQuery = Callable[[Sequence[str]], tuple[int, str]]


def normalize_abi(spec: str, arch: Arch = HOST_ARCH) -> str:
    """`linux-image-6.1.0-41-amd64`, `6.1.0-41` -> `6.1.0-41-amd64` (`-arm64` for arm64)."""
    abi = spec.strip()
    for prefix in ("linux-image-", "linux-headers-"):
        if abi.startswith(prefix):
            abi = abi[len(prefix) :]
    if flavour_of_abi(abi) is None:
        abi += f"-{arch.kernel_flavours[0]}"
    return abi


def candidate_suites(abi: str) -> list[Suite]:
    """Suites to look for `abi` in, most likely first."""
    first: str | None = None
    for prefix, name in _ABI_SERIES.items():
        if abi.startswith(prefix):
            first = name
    tag = _ABI_DEB_TAG.search(abi)
    if tag:
        first = next((s.name for s in SUITES.values() if s.release == int(tag.group(1))), "sid")
    ordered = [SUITES[first]] if first else []
    return ordered + [suite for suite in SUITES.values() if suite.name != first]


class AptLists:
    """A suite's private apt configuration and package lists under `base`."""

    def __init__(self, suite: Suite, base: Path, arch: Arch = HOST_ARCH, *, source_packages: bool = False) -> None:
        self.suite = suite
        self.arch = arch
        # deb-src lines too (apt-get source); kept apart, so the binary lists never refresh for them.
        self.source_packages = source_packages
        # The host architecture's lists keep their old place; others get their own.
        self.base = base / (suite.name if arch == HOST_ARCH else f"{suite.name}-{arch.debian}")
        if source_packages:
            self.base = self.base.with_name(self.base.name + "-src")
        self.sources = self.base / "sources.list"
        self.lists = self.base / "lists"
        self.cache = self.base / "cache"
        self.status = self.base / "dpkg-status"

    def options(self) -> list[str]:
        return [
            f"-oDir::Etc::SourceList={self.sources}",
            "-oDir::Etc::SourceParts=/dev/null",
            f"-oDir::State::Lists={self.lists}",
            f"-oDir::Cache={self.cache}",
            # An empty dpkg status: what the host has installed must not
            # become a suite's candidate (the host's kernel did, for bullseye).
            f"-oDir::State::status={self.status}",
            f"-oAPT::Architecture={self.arch.debian}",
            f"-oAPT::Architectures={self.arch.debian}",
            # A lagging mirror can serve a Release file past its Valid-Until
            # (seen with sid); signatures are still checked.
            "-oAcquire::Check-Valid-Until=false",
            # The lists live under the user's cache, which _apt cannot enter.
            "-oAPT::Sandbox::User=root",
        ]

    def is_fresh(self, now: float | None = None) -> bool:
        stamp = self.base / "updated"
        if not stamp.exists():
            return False
        return (now or time.time()) - stamp.stat().st_mtime < LISTS_MAX_AGE_S

    def update(self, *, force: bool = False) -> None:
        """`apt-get update` into the private lists, unless done within a day (for the same sources)."""
        lines = self.suite.sources_lines(ARCHIVE_COMPONENTS)
        if self.source_packages:
            lines += [line.replace("deb ", "deb-src ", 1) for line in lines]
        wanted = "\n".join(lines) + "\n"
        same_sources = self.sources.exists() and self.sources.read_text() == wanted
        if self.is_fresh() and same_sources and not force:
            return
        log(f"refreshing package lists of {self.suite.name}")
        (self.lists / "partial").mkdir(parents=True, exist_ok=True)
        (self.cache / "archives" / "partial").mkdir(parents=True, exist_ok=True)
        self.sources.write_text(wanted)
        self.status.touch()
        result = run(["apt-get", "-q", "update", *self.options()], capture=True, check=False)
        if result.returncode != 0 and (self.base / "updated").exists():
            log(f"warning: could not refresh the {self.suite.name} package lists; using the ones from before")
            return
        if result.returncode != 0:
            raise die(
                f"apt-get update for {self.suite.name} failed:\n{result.stdout[-1500:]}{result.stderr[-1500:]}",
                "check network access to deb.debian.org and that the host's debian-archive-keyring knows this suite",
            )
        (self.base / "updated").touch()

    def query(self, args: Sequence[str]) -> tuple[int, str]:
        result = run(["apt-cache", *self.options(), *args], capture=True, check=False)
        return result.returncode, result.stdout

    def _deb_arch(self, show: str) -> str:
        found = re.search(r"^Architecture: (\S+)", show, re.MULTILINE)
        return found.group(1) if found else self.arch.debian

    def download(self, package: str) -> Path:
        """The candidate .deb of `package`, fetched into the lists' cache once."""
        archives = self.cache / "archives"
        archives.mkdir(parents=True, exist_ok=True)
        status, out = self.query(["show", "--no-all-versions", package])
        version = re.search(r"^Version: (\S+)", out, re.MULTILINE)
        if status != 0 or not version:
            raise die(f"{self.suite.name} has no package {package}", "check the name, or refresh the lists (--refresh)")
        # The file name apt gives it: the epoch's colon is written %3a.
        deb = archives / f"{package}_{version.group(1).replace(':', '%3a')}_{self._deb_arch(out)}.deb"
        if not deb.exists():
            result = run(
                ["apt-get", "-q", "download", *self.options(), package], cwd=archives, capture=True, check=False
            )
            if result.returncode != 0 or not deb.exists():
                raise die(
                    f"downloading {package} from {self.suite.name} failed:\n{result.stdout[-1500:]}{result.stderr[-1500:]}",
                    "check network access to deb.debian.org",
                )
        return deb


def current_abi(query: AptQuery, flavour: str = HOST_ARCH.kernel_flavours[0]) -> str | None:
    """The ABI that a suite's linux-image-<flavour> depends on, from `apt-cache depends`."""
    status, out = query(["depends", "--no-recommends", "--no-suggests", f"linux-image-{flavour}"])
    if status != 0:
        return None
    match = _DEPENDS_IMAGE.search(out)
    return match.group(1) if match else None


def has_package(query: AptQuery, package: str) -> bool:
    status, out = query(["show", "--no-all-versions", package])
    return status == 0 and f"Package: {package}" in out


def check_kernel_spec(spec: str) -> None:
    """Refuse a `spec` that is neither a suite name nor a kernel version (pure)."""
    if spec.strip().lower() in SUITES:
        return
    if not re.match(r"^(linux-(image|headers)-)?\d+\.\d+", spec.strip()):
        raise bad_input(
            f"{spec!r} is neither a Debian suite nor a kernel version",
            f"use one of {', '.join(SUITES)} or an ABI string such as 6.12.57+deb13-amd64",
        )


def check_flavour(arch: Arch, flavour: str | None) -> str:
    """`flavour`, or the architecture's default one; dies naming the flavours `arch` has (pure)."""
    if flavour is None or flavour == "":
        return arch.kernel_flavours[0]
    name = flavour.strip().lower()
    if name not in arch.kernel_flavours:
        raise die(
            f"{arch.debian} has no kernel flavour {flavour!r}",
            f"use one of: {', '.join(arch.kernel_flavours)} (linux-image-<flavour>)",
        )
    return name


def resolve_kernel(
    spec: str,
    *,
    lists_for: Callable[[Suite], AptQuery] | None = None,
    base: Path | None = None,
    refresh: bool = False,
    arch: Arch = HOST_ARCH,
    flavour: str | None = None,
) -> KernelChoice:
    """Which suite and ABI `spec` (a suite name or a kernel ABI string) means, for `arch`."""
    wanted = check_flavour(arch, flavour)
    if lists_for is None:
        lists_for = _real_lists(base, refresh, arch)
    name = spec.strip().lower()
    if name in SUITES:
        suite = SUITES[name]
        abi = current_abi(lists_for(suite), wanted)
        if abi is None:
            raise die(f"{suite.name} has no linux-image-{wanted} in its package lists", "try again with --refresh")
        return KernelChoice(suite, abi, arch)
    check_kernel_spec(spec)
    abi = normalize_abi(spec, arch)
    named = arch_of_abi(abi)
    if named is not None and named != arch:
        raise die(
            f"kernel {abi} is an {named.debian} kernel, not {arch.debian}",
            f"pass --arch {named.debian}, or an {arch.debian} kernel",
        )
    likely = candidate_suites(abi)
    for suite in likely:
        query = lists_for(suite)
        if has_package(query, f"linux-image-{abi}") and has_package(query, f"linux-headers-{abi}"):
            return KernelChoice(suite, abi, arch)
    nearby = similar_abis(lists_for(likely[0]), abi)
    offer = f"{likely[0].name} has {', '.join(nearby)}" if nearby else "pick a current one (e.g. --kernel trixie)"
    raise die(
        f"no Debian suite ({', '.join(SUITES)}) has both linux-image-{abi} and linux-headers-{abi}",
        f"older kernel ABIs leave the archive; {offer}",
    )


def flavour(abi: str) -> str:
    """`6.1.0-41-cloud-amd64` -> `cloud-amd64`; plain kernels -> `amd64` (their architecture's name)."""
    return flavour_of_abi(abi) or HOST_ARCH.kernel_flavours[0]


def similar_abis(query: AptQuery, abi: str, limit: int = 6) -> list[str]:
    """ABIs of the same major.minor and flavour that have headers in a suite, newest last."""
    status, out = query(["pkgnames", "linux-headers-"])
    if status != 0:
        return []
    series = ".".join(abi.split(".")[:2]) + "."
    found = [
        candidate
        for candidate in (name.removeprefix("linux-headers-") for name in out.split())
        if candidate.startswith(series) and flavour_of_abi(candidate) == flavour(abi)
    ]
    return sorted(found, key=_version_key)[-limit:]


def _version_key(abi: str) -> list[int]:
    return [int(part) for part in re.findall(r"\d+", abi)]


def suite_lists(suite: Suite, base: Path | None = None, refresh: bool = False, arch: Arch = HOST_ARCH) -> AptLists:
    """A suite's private package lists (of `arch`) under the cache, refreshed at most daily."""
    from gdrkit.system import cache_dir

    lists = AptLists(suite, base or cache_dir() / "vm" / "apt", arch)
    lists.update(force=refresh)
    return lists


def _real_lists(base: Path | None, refresh: bool, arch: Arch = HOST_ARCH) -> Callable[[Suite], AptQuery]:
    def lists_for(suite: Suite) -> AptQuery:
        return suite_lists(suite, base, refresh, arch).query

    return lists_for
