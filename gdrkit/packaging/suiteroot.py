"""Debian packages built inside the root of the suite they are for.

dpkg-shlibdeps writes `libc6 (>= x)` from the glibc the programs were
linked against, and debhelper, dh_python3 and lintian differ per suite: a
build for bullseye on a bookworm host gives packages bullseye cannot
install.  So a release other than this host's is built in a root of its
build suite (gdrkit.distro.debian's `build_suite`), made once with
mmdebstrap (`mmdebstrap_command`, as the VM roots and images are) and
cached; the staged tree is bind-mounted into it and suite_build.sh runs
dpkg-buildpackage (and that suite's lintian) chrooted there.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from gdrkit.distro import debian
from gdrkit.distro.families import DebianFamily
from gdrkit.system import apt_install_hint, cache_dir, die, ensure_debian_packages, log, run_step
from gdrkit.version import REPO_ROOT

# The lintian tags that do not apply, each with its reason (rpmlint's: packages/rpmlintrc).
LINTIAN_SUPPRESS = REPO_ROOT / "packages" / "lintian-suppress"

SCRIPT = Path(__file__).resolve().parent / "suite_build.sh"
ROOT_BUILD_TIMEOUT_S = 1200


def root_packages(kernels: Sequence[str] = ()) -> tuple[str, ...]:
    """What a build root holds besides minbase: the family's build and lint tools, kernel headers (pure)."""
    fam = DebianFamily
    wanted = [*fam.build_deps, *fam.kind_lint_deps["deb"]]
    wanted += [fam.kernel_headers_package.format(kver=k) for k in kernels]
    return tuple(dict.fromkeys(wanted))


def root_dir(suite: str, packages: Sequence[str]) -> Path:
    """Where the root of `suite` holding `packages` is cached (pure but for the cache's place)."""
    digest = hashlib.sha256(" ".join([suite, *packages]).encode()).hexdigest()[:12]
    return cache_dir() / "pkg-roots" / f"{suite}-{digest}"


def ensure_root(suite_name: str, packages: Sequence[str]) -> Path:
    """The cached build root of `suite_name`, made with mmdebstrap on first use (one maker at a time)."""
    suite = debian.suite(suite_name)
    target = root_dir(suite.name, packages)
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f".{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "usr" / "bin" / "dpkg-buildpackage").exists():
            return target
        if os.geteuid() != 0:
            raise die(f"building the {suite.name} root needs root (mmdebstrap, chroot)", "run the task as root")
        if not shutil.which("mmdebstrap"):
            ensure_debian_packages(["mmdebstrap"])
        if not shutil.which("mmdebstrap"):
            raise die("mmdebstrap not found", apt_install_hint(["mmdebstrap"]))
        partial = target.with_name(f".{target.name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        argv = debian.mmdebstrap_command(suite, str(partial), packages)
        try:
            run_step(
                f"building the {suite.name} package build root (mmdebstrap; once, cached in {target})",
                argv,
                timeout=ROOT_BUILD_TIMEOUT_S,
                hint="see the log; a mirror out of reach or a package missing from the suite are the usual causes",
            )
            partial.rename(target)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return target


def _in_root(root: Path, workdir: Path, args: Sequence[str], *, title: str, log_dir: Path) -> str:
    argv = [
        "unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child",
        "sh", str(SCRIPT), "outside", str(root), str(workdir), *args,
    ]  # fmt: skip
    return run_step(title, argv, log_dir=log_dir, hint=f"the tree is staged in {workdir}")


def build(root: Path, workdir: Path, tree: Path, *, epoch: int, jobs: int, suite: str, log_dir: Path) -> list[Path]:
    """dpkg-buildpackage of `tree` (under `workdir`) in `root`; the .deb files it left in `workdir`."""
    _in_root(
        root, workdir, ["build", tree.name, str(epoch), str(jobs)],
        title=f"deb: dpkg-buildpackage in the {suite} root", log_dir=log_dir,
    )  # fmt: skip
    built = sorted(workdir.glob("*.deb"))
    if not built:
        raise die(f"dpkg-buildpackage in the {suite} root produced no .deb in {workdir}")
    log(f"deb: built in the {suite} root: {', '.join(p.name for p in built)}")
    return built


def lint(root: Path, workdir: Path, *, suite: str, log_dir: Path) -> tuple[int, str]:
    """The suite's own lintian on the .deb files in `workdir`: (number of errors, the report)."""
    shutil.copy2(LINTIAN_SUPPRESS, workdir / ".lintian-suppress")
    report = _in_root(root, workdir, ["lint"], title=f"deb: lintian of {suite}", log_dir=log_dir)
    return sum(1 for line in report.splitlines() if line.startswith("E: ")), report
