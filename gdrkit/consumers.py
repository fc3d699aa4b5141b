"""Real consumers of libgdrapi, built from Debian's source packages against our header and library.

Issue 22's consumer suite, the VM half: UCX and libfabric are fetched at
test time with `apt-get source` (private lists with deb-src lines, never the
host's sources), built on the host (Debian 12, the VMs' userland) with
GDRCopy and CUDA support, cached, and copied into a VM root under
/opt/consumers.  Nothing of theirs is committed.

- `cuda_prefix()`: Debian non-free's CUDA headers and runtime (nvidia-cuda-dev,
  libcudart11.0, libnvidia-ml-dev, libnvidia-ml1) with softgpu's libcuda as
  the link-time driver: what a consumer's `--with-cuda=DIR` takes.
- `gdrapi_prefix()`: this tree's header and library (`make lib lib_install`).
- `build(consumer)`: the consumer's tree under `/opt/consumers/<name>` in a
  stage directory, cached under `cache_dir()/consumers/builds`, keyed by the
  source version, our header and exported symbols, the CUDA packages'
  versions and the build script and programs.
- `install_into_root(root_dir, builds, cuda)`: copies the builds, the CUDA
  runtime libraries and tests/consumers/consumers_guest.sh into a VM root.

All raise `gdrkit.system.UserError` with a hint on expected failures (no
source reachable, a configure that left GDRCopy out).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gdrkit.packaging.build import package_fields
from gdrkit.system import cache_dir, die, ensure_debian_packages, file_sha256, log, run, run_step
from gdrkit.version import REPO_ROOT
from gdrkit.vm.suites import SUITES, AptLists, suite_lists

__all__ = [
    "CONSUMERS",
    "Build",
    "Consumer",
    "SourceTree",
    "build",
    "build_key",
    "cuda_prefix",
    "fetch_source",
    "gdrapi_prefix",
    "install_into_root",
]

SCRIPTS = REPO_ROOT / "tests" / "consumers"
GUEST_SCRIPT = SCRIPTS / "consumers_guest.sh"
GUEST_PREFIX = Path("/opt/consumers")
# Debian 12's CUDA (11.8, non-free): headers and runtime; NVML for UCX's configure.
CUDA_PACKAGES = ("nvidia-cuda-dev", "libcudart11.0", "libnvidia-ml-dev", "libnvidia-ml1")
CUDA_SUITE = "bookworm"
# What the host build needs besides build-essential: Debian's trees carry no configure.
HOST_BUILD_PACKAGES = ("build-essential", "autoconf", "automake", "libtool", "pkg-config")


@dataclass(frozen=True)
class Consumer:
    name: str
    source_package: str
    suites: tuple[str, ...]  # tried in order: the first whose source the mirror serves
    script: Path  # tests/consumers/build_<name>.sh
    programs: tuple[Path, ...] = ()  # our programs the script builds against it (in the key)


CONSUMERS: dict[str, Consumer] = {
    "ucx": Consumer(
        "ucx",
        "ucx",
        ("bookworm",),
        SCRIPTS / "build_ucx.sh",
        (SCRIPTS / "ucx_gdr_copy_check.c", SCRIPTS / "cudart_device_count.c"),
    ),
    # bookworm's 1.17.0-3 source files answer 404 on the mirror (its binaries do
    # not): trixie's 2.1.0 source, built on bookworm, is the one reachable.
    "libfabric": Consumer("libfabric", "libfabric", ("bookworm", "trixie"), SCRIPTS / "build_libfabric.sh"),
}


def _digest(*parts: str | bytes) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part if isinstance(part, bytes) else part.encode())
        sha.update(b"\0")
    return sha.hexdigest()


# ---- sources -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceTree:
    package: str
    suite: str
    version: str  # the Debian version, e.g. 1.13.1-1
    directory: Path  # the unpacked tree
    how: str  # "Debian source package" or why only upstream's tarball was used


def source_lists(suite: str) -> AptLists:
    lists = AptLists(SUITES[suite], cache_dir() / "consumers" / "apt", source_packages=True)
    lists.update()
    return lists


def source_files(showsrc: str) -> tuple[str, dict[str, str]]:
    """The version and {file name: sha256} of the first record of `apt-cache showsrc` (pure)."""
    record = showsrc.split("\n\n")[0]
    version = re.search(r"^Version: (\S+)", record, re.MULTILINE)
    block = re.search(r"^Checksums-Sha256:\n((?: .*\n?)+)", record, re.MULTILINE)
    if not version or not block:
        return "", {}
    files = {}
    for line in block.group(1).splitlines():
        fields = line.split()
        if len(fields) == 3:
            files[fields[2]] = fields[0]
    return version.group(1), files


def fetch_source(consumer: Consumer) -> SourceTree:
    """The consumer's Debian source, downloaded and unpacked once; the first suite that serves it."""
    refusals = []
    for suite in consumer.suites:
        lists = source_lists(suite)
        status, out = lists.query(["showsrc", consumer.source_package])
        version, files = source_files(out)
        if status != 0 or not version:
            refusals.append(f"{suite}: no source package {consumer.source_package}")
            continue
        base = cache_dir() / "consumers" / "src" / f"{consumer.source_package}_{version}"
        tree = base / "tree"
        stamp = base / "unpacked"
        if stamp.exists():
            return SourceTree(consumer.source_package, suite, version, tree, stamp.read_text())
        base.mkdir(parents=True, exist_ok=True)
        # apt checks each file it keeps against the Sources index; it keeps those it got.
        fetched = run(["apt-get", "-q", "source", "--download-only", *lists.options(), consumer.source_package],
                      cwd=base, capture=True, check=False)  # fmt: skip
        present = {name for name, sha in files.items() if (base / name).exists() and file_sha256(base / name) == sha}
        dsc = [name for name in files if name.endswith(".dsc")]
        origs = [name for name in present if ".orig.tar." in name]
        if dsc and set(files) <= present:
            how = "Debian source package (dpkg-source -x, Debian's patches applied)"
            shutil.rmtree(tree, ignore_errors=True)
            run(["dpkg-source", "-x", base / dsc[0], tree], capture=True)
        elif origs:
            missing = ", ".join(sorted(set(files) - present))
            how = f"upstream's tarball as Debian ships it ({origs[0]}, sha256 checked); not reachable: {missing}"
            shutil.rmtree(tree, ignore_errors=True)
            unpack = base / "unpack"
            shutil.rmtree(unpack, ignore_errors=True)
            unpack.mkdir()
            run(["tar", "-xf", base / origs[0], "-C", unpack], capture=True)
            [top] = list(unpack.iterdir())
            top.rename(tree)
            unpack.rmdir()
        else:
            tail = (fetched.stdout + fetched.stderr).strip().splitlines()[-3:]
            refusals.append(f"{suite} {version}: {' / '.join(tail) or 'nothing downloaded'}")
            continue
        stamp.write_text(how)
        log(f"{consumer.source_package} {version} from {suite}: {how}")
        return SourceTree(consumer.source_package, suite, version, tree, how)
    raise die(
        f"no source of {consumer.source_package} is reachable: {'; '.join(refusals)}",
        "check access to deb.debian.org (deb-src of main contrib non-free), or name another suite in"
        " gdrkit.consumers.CONSUMERS",
    )


# ---- CUDA and our library ----------------------------------------------------------------------


@dataclass(frozen=True)
class CudaPrefix:
    path: Path  # include/ and lib/: what --with-cuda=DIR takes
    versions: tuple[str, ...]  # "package=version" of each Debian package used

    @property
    def runtime_libraries(self) -> list[Path]:
        """What the consumers load at run time besides libcuda (which stays softgpu's in the VM)."""
        lib = self.path / "lib"
        return sorted(p for p in lib.iterdir() if p.name.startswith(("libcudart.so", "libnvidia-ml.so")))


def softgpu_libcuda() -> Path:
    run(["make", "-s", "-C", REPO_ROOT / "tests" / "softgpu" / "libcuda"], capture=True)
    return REPO_ROOT / "tests" / "softgpu" / "libcuda" / "libcuda.so.1"


def cuda_prefix() -> CudaPrefix:
    """Debian's CUDA 11.8 headers and runtime, unpacked once (nvidia-cuda-dev is a 775 MB download)."""
    lists = suite_lists(SUITES[CUDA_SUITE])
    debs = [lists.download(package) for package in CUDA_PACKAGES]
    versions = tuple(f"{fields.name}={fields.version}" for fields in map(package_fields, debs))
    unpacked = cache_dir() / "consumers" / "cuda" / _digest(*versions)[:16]
    if not (unpacked / ".unpacked").exists():
        shutil.rmtree(unpacked, ignore_errors=True)
        files = unpacked / "files"
        files.mkdir(parents=True)
        for deb in debs:
            if deb.name.startswith("nvidia-cuda-dev_"):
                # Only the headers and the runtime's link: the rest is 2.7 GB of libraries.
                wanted = ["./usr/include/*", "./usr/lib/x86_64-linux-gnu/libcudart.so"]
                extract = f"dpkg-deb --fsys-tarfile {deb} | tar -x -C {files} --wildcards " + " ".join(
                    f"'{w}'" for w in wanted
                )
                run_step(f"unpacking CUDA headers from {deb.name}", ["sh", "-c", extract])
            else:
                run(["dpkg-deb", "-x", deb, files], capture=True)
        (unpacked / ".unpacked").touch()
    files = unpacked / "files"
    prefix = unpacked / "prefix"
    shutil.rmtree(prefix, ignore_errors=True)
    (prefix / "lib").mkdir(parents=True)
    (prefix / "include").symlink_to(files / "usr" / "include")
    lib_dirs = [files / "usr/lib/x86_64-linux-gnu", files / "usr/lib/x86_64-linux-gnu/nvidia/current"]
    for directory in lib_dirs:
        for library in directory.glob("lib*.so*"):
            if library.name.startswith(("libcudart.so", "libnvidia-ml.so")):
                shutil.copy2(library, prefix / "lib" / library.name, follow_symlinks=False)
    # softgpu's libcuda is the driver the consumers link with here and run with in the VM.
    libcuda = softgpu_libcuda()
    shutil.copy2(libcuda, prefix / "lib" / "libcuda.so.1")
    (prefix / "lib" / "libcuda.so").symlink_to("libcuda.so.1")
    for needed in ("include/cuda.h", "include/cuda_runtime.h", "include/nvml.h", "lib/libcudart.so",
                   "lib/libnvidia-ml.so"):  # fmt: skip
        if not (prefix / needed).exists():
            raise die(f"{needed} is not in {', '.join(CUDA_PACKAGES)}", "the packages' layout changed; dpkg-deb -c")
    return CudaPrefix(prefix, versions)


@dataclass(frozen=True)
class GdrapiPrefix:
    path: Path
    abi: str  # digest of our installed headers and the library's exported symbols


def gdrapi_prefix() -> GdrapiPrefix:
    """This tree's libgdrapi and headers, installed into a fresh prefix (`make config lib lib_install`)."""
    prefix = cache_dir() / "consumers" / "gdrapi"
    shutil.rmtree(prefix, ignore_errors=True)
    run(["make", "-s", "-C", REPO_ROOT, "config", "lib", f"prefix={prefix}"], capture=True)
    run(["make", "-s", "-C", REPO_ROOT, "lib_install", f"prefix={prefix}"], capture=True)
    library = prefix / "lib" / "libgdrapi.so"
    symbols = run(["nm", "-D", "--defined-only", library], capture=True).stdout
    exported = sorted(line.split()[-1] for line in symbols.splitlines() if line.strip())
    headers = [h.read_bytes() for h in sorted((prefix / "include").glob("*.h"))]
    return GdrapiPrefix(prefix, _digest(*headers, *exported))


# ---- builds ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Build:
    consumer: str
    source: SourceTree
    stage: Path  # holds opt/consumers/<name> (and opt/consumers/bin)
    key: str
    seconds: float  # what building it took now; 0.0 when the cache had it


def build_key(consumer: Consumer, source_version: str, cuda: Sequence[str], gdrapi_abi: str) -> str:
    """The cache key of a build (pure): whatever goes into it changes it."""
    scripts = [consumer.script.read_bytes(), *(p.read_bytes() for p in consumer.programs)]
    return _digest(consumer.name, source_version, *cuda, gdrapi_abi, *scripts)[:16]


def build(name: str) -> Build:
    """`name` (a key of CONSUMERS) built against this tree's library, from the cache when its key matches."""
    if name not in CONSUMERS:
        raise die(f"unknown consumer {name!r}", f"use one of {', '.join(CONSUMERS)}")
    consumer = CONSUMERS[name]
    ensure_debian_packages(HOST_BUILD_PACKAGES)
    source = fetch_source(consumer)
    cuda = cuda_prefix()
    gdrapi = gdrapi_prefix()
    key = build_key(consumer, source.version, cuda.versions, gdrapi.abi)
    where = cache_dir() / "consumers" / "builds" / f"{name}-{source.version}-{key}"
    if (where / "complete").exists():
        return Build(name, source, where / "stage", key, 0.0)
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    start = time.monotonic()
    run_step(
        f"building {name} {source.version} with GDRCopy against this tree's libgdrapi",
        ["bash", consumer.script, source.directory, where / "build", where / "stage", cuda.path, gdrapi.path],
        hint=f"the build's output is in the log; {consumer.script.name} names what it checks",
    )
    seconds = time.monotonic() - start
    shutil.rmtree(where / "build", ignore_errors=True)
    (where / "complete").write_text(f"{seconds:.0f}\n")
    return Build(name, source, where / "stage", key, seconds)


def install_into_root(root_dir: Path, builds: Sequence[Build], cuda: CudaPrefix) -> None:
    """Copy `builds` and the CUDA runtime libraries into `root_dir`/opt/consumers (replacing what was there)."""
    target = root_dir / GUEST_PREFIX.relative_to("/")
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for one in builds:
        staged = one.stage / GUEST_PREFIX.relative_to("/")
        # The stage's own tree and our programs built against it (bin/).
        subprocess.run(["cp", "-a", f"{staged}/.", str(target)], check=True)
    (target / "cuda" / "lib").mkdir(parents=True)
    for library in cuda.runtime_libraries:
        shutil.copy2(library, target / "cuda" / "lib" / library.name, follow_symlinks=False)
    # The root's /src follows whichever tree built it last; the script goes with the builds.
    shutil.copy2(GUEST_SCRIPT, target / GUEST_SCRIPT.name)


# ---- what the guest printed ------------------------------------------------------------------

SECTION = re.compile(r"^==== (.+?) ====\s*$", re.MULTILINE)


def sections(console: str) -> dict[str, str]:
    """The guest script's `==== name ====` sections of a console log, by name (pure)."""
    found = list(SECTION.finditer(console))
    ends = [match.start() for match in found[1:]] + [len(console)]
    return {match.group(1): console[match.end() : end].strip("\n") for match, end in zip(found, ends)}
