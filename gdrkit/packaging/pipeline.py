"""What `invoke build-deb/build-rpm/build-packages/build` do, as plan then act.

`plan_request()` decides (which kinds, families, kernels, packages) without
touching the system; `execute()` carries a plan out and returns one summary
row per built package.  The Invoke tasks in gdrkit/tasks/pkg.py only parse
arguments and call these.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from gdrkit.distro import families, targets
from gdrkit.distro.arch import HOST_ARCH, arch
from gdrkit.distro.debian import DEBIAN_RELEASES
from gdrkit.distro.families import DebianFamily, DebianRelease, Family, family
from gdrkit.distro.rpm import release_of_major
from gdrkit.distro.targets import Target
from gdrkit.packaging import baseline, build, hardening, model, suiteroot, toolchain
from gdrkit.packaging.baseline import PackageReport
from gdrkit.system import die, ensure_debian_packages, log, run
from gdrkit.version import REPO_ROOT


@dataclass(frozen=True)
class Request:
    kinds: tuple[str, ...] = ("deb", "rpm")
    with_dkms: bool = True
    with_kmod: bool = True
    kernels: tuple[str, ...] = ()
    rpm_family: str = "rhel"
    # The RPM release (el8, el9, el10, sle15; gdrkit.distro.rpm): it decides
    # the family, the dist tag, the glibc linked against and the Python.
    # "": the family's default (el9, sle15).
    rpm_release: str = ""
    # Targets to build for (gdrkit.distro.targets: `all` or names such as
    # el8, el9-arm64, bullseye), each into output/<release>/; overrides kinds,
    # suite, rpm_release and host_arch.
    targets: tuple[str, ...] = ()
    # The Debian or Ubuntu release the .deb packages are for (a codename);
    # "": this host's, since they are built with its debhelper and dpkg.
    suite: str = ""
    output: Path = build.DIST
    ref: str = "HEAD"
    repo: Path = REPO_ROOT
    # The NVIDIA driver's kernel sources (nv-p2p.h, Module.symvers) the prebuilt
    # module is built against; handed to the build's environment only.
    nvidia_src_dir: str = ""
    device_mode: str = ""
    device_group: str = ""
    jobs: int = 2
    lint: bool = True
    install_deps: bool = True
    dry_run: bool = False
    # The Debian architecture the .deb packages are for ("": this host's); another one is cross-built.
    host_arch: str = ""
    # The version the packages (module and library included) say they are; "": the tree's
    # (gdrkit.version).  The upgrade tests build one commit as its "previous release".
    package_version: str = ""


OS_RELEASE = Path("/etc/os-release")


def deb_target_release(suite: str = "", os_release: Path = OS_RELEASE) -> DebianRelease:
    """The release .deb packages are built for: `suite` when given, else this host's."""
    if suite:
        return families.debian_release(suite)
    text = os_release.read_text() if os_release.exists() else ""
    release = families.debian_release_for_os_release(families.parse_os_release(text))
    if release is None:
        raise die(
            f"cannot tell which Debian or Ubuntu release this host is ({os_release} names none)",
            "name the release the packages are for: --suite bookworm (or trixie, noble, ...)",
        )
    return release


def rpm_target_family(family_name: str, release: str = "", os_release: Path = OS_RELEASE) -> Family:
    """The RPM family set to the release the packages are for: `release` when named;
    else this host's where it is a known release of that family (a build on Rocky 8 is for el8);
    else the family's default (el9, sle15)."""
    if release:
        return families.rpm_family(release)
    fam = family(family_name)
    fields = families.parse_os_release(os_release.read_text() if os_release.exists() else "")
    host = families.family_for_os_release(fields)
    known = release_of_major(fam.name, fields.get("VERSION_ID", "").split(".")[0])
    if host is not None and host.name == fam.name and known:
        return families.rpm_family(known)
    return fam


@dataclass(frozen=True)
class Job:
    plan: model.Plan
    output: Path
    target: Target
    host_arch: str = ""  # cross-built for this Debian architecture ("": this host's)
    # The Debian suite whose root builds it (gdrkit.packaging.suiteroot); "": this host.
    build_suite: str = ""


@dataclass
class BuildPlan:
    request: Request
    source: build.Source
    kernels: tuple[str, ...]
    jobs: list[Job] = field(default_factory=list)


@dataclass(frozen=True)
class Row:
    file: str
    size: int
    contents: str
    lint_errors: int
    path: Path | None = None  # the package file itself
    baseline: PackageReport | None = None  # against its target's glibc and Python
    lint_warnings: int = 0  # left after the overrides (each with its reason): any fails the build
    elf_files: tuple[hardening.ElfReport, ...] = ()  # each ELF file's hardening


def plan_request(request: Request, source: build.Source | None = None) -> BuildPlan:
    if not request.with_dkms and not request.with_kmod:
        raise die("nothing to build for the kernel module", "drop --no-dkms or --no-kmod")
    build.check_kernel_releases(request.kernels)
    src = source or build.source_at(request.ref, request.repo)
    # Prebuilt modules only for the kernels named: what a build makes must not
    # depend on which kernels' headers this host happens to have.
    kernels = request.kernels if request.with_kmod else ()
    if request.with_kmod and not kernels and not request.targets:
        log("prebuilt module packages: none (name their kernels with --kernel KVER; the DKMS package builds on any)")
    if request.host_arch and kernels:
        raise die(
            f"--arch {request.host_arch} cross-builds the packages without prebuilt modules",
            "add --no-kmod (the DKMS package builds gdrdrv on the arm64 host)",
        )
    result = BuildPlan(request=request, source=src, kernels=kernels)
    if request.targets:
        if kernels and request.kernels:
            raise die(
                "--targets builds the DKMS packages only: prebuilt modules are for one node's kernel",
                "build those with build-deb --suite S / build-rpm --release R and --kernel, or drop --kernel",
            )
        if not request.with_dkms:
            raise die("--targets builds the DKMS packages, and --no-dkms leaves nothing", "drop --no-dkms")
        for target in targets.targets(",".join(request.targets)):
            # dist/<release>/, as publish reads it: one directory per release, both architectures in it.
            job = _job(request, src, target.family, (), request.output / target.release, target.arch)
            result.jobs.append(job)
        return result
    unplaced: dict[str, list[tuple[str, str]]] = {}
    for kind in request.kinds:
        fam: Family
        if kind == "deb":
            release = deb_target_release(request.suite)
            fam = DebianFamily(release=release)
            below = "/usr/lib" if release.usr_merged else "/lib"
            log(
                f"deb: packages for {release.os_id} {release.codename or release.version}: units, rules and modules below {below}"
            )
        else:
            fam = rpm_target_family(request.rpm_family, request.rpm_release)
        if fam.package_type != kind:
            raise die(f"family {fam.name} builds {fam.package_type}, not {kind}")
        # RPMs of different families have equal names but for the dist tag: keep them apart as before.
        out = request.output if kind == "deb" or fam.name == "rhel" else request.output / fam.name
        cross = request.host_arch if request.host_arch and arch(request.host_arch) != HOST_ARCH else ""
        suite = deb_build_suite(fam.release, cross) if isinstance(fam, DebianFamily) else ""
        refusals = {k: kernel_refusal(fam, k, suite) for k in kernels}
        if len(request.kinds) == 1:
            for message, hint in filter(None, refusals.values()):
                raise die(message, hint)
        mine = tuple(k for k in kernels if refusals[k] is None)
        for kver, refusal in refusals.items():
            # build-packages: each kernel's module goes to the family and release it is of, only.
            if refusal is not None:
                unplaced.setdefault(kver, []).append(refusal)
        result.jobs.append(_job(request, src, fam, mine, out, request.host_arch))
    for kver, refused in unplaced.items():
        if not any(kver in job.plan.kernels for job in result.jobs):
            message, hint = refused[0]
            raise die(message + "".join(f"; and {m}" for m, _ in refused[1:]), hint)
    return result


def kernel_refusal(fam: Family, kver: str, build_suite: str = "") -> tuple[str, str] | None:
    """Why a prebuilt module of `fam`'s release cannot be built for kernel `kver`, and what to do; None when it can.

    A module of one release built for another's kernel is a package no node
    of either can use (a Debian kernel's module named an el9 kmod), and a
    build must never fetch headers its release's archive does not have.
    """
    if isinstance(fam, DebianFamily):
        release = fam.release
        if release.kernel_pattern and not re.match(release.kernel_pattern, kver):
            owner = next(
                (r.codename for r in DEBIAN_RELEASES.values() if r.kernel_pattern and re.match(r.kernel_pattern, kver)),
                "",
            )
            return (
                f"--kernel {kver} is not a kernel of {release.codename}"
                + (f" (it is {owner}'s)" if owner else "")
                + f": {release.codename}'s prebuilt module is for its own kernels",
                f"build that kernel's module with --suite {owner or 'RELEASE'} --kernel {kver}, or name a"
                f" {release.codename} kernel (apt-cache search linux-headers in a {release.codename} root lists them)",
            )
        if release.os_id != "debian" and build_suite:
            return (
                f"--kernel {kver}: {release.codename}'s kernel headers come from Ubuntu's archive, which the"
                f" {build_suite} root that builds {release.codename}'s packages does not reach",
                f"build the prebuilt module on a {release.codename} host (./toolkit build-deb --kernel {kver}"
                " there), or leave --kernel out: the DKMS package builds gdrdrv on the node",
            )
        return None
    assert isinstance(fam, families.RpmFamily)
    target = fam.target_release
    major = re.sub(r"\D", "", target.name)
    if not fam.kernel_of_release(kver, major):
        return (
            f"--kernel {kver} is not a kernel of {target.name}: {target.name}'s prebuilt module (gdrcopy-kmod-KVER)"
            " is for its own kernels only",
            f"name an {target.name} kernel, as `uname -r` prints it on an {target.name} node, or --release that"
            " kernel's own release (a Debian kernel's module: build-deb --kernel)",
        )
    tree = Path("/lib/modules") / kver / "build"
    if not (tree / "Makefile").exists():
        return (
            f"--kernel {kver}: no devel tree of that kernel at {tree}, and this host cannot install one",
            f"build on an {target.name} node with its devel package ({fam.headers_hint(kver)}), or point {tree} at"
            f" that kernel's devel tree (its {fam.kernel_headers_package.format(kver=kver)} package unpacked:"
            " rpm2cpio FILE.rpm | cpio -idm, then ln -s DIR/usr/src/kernels/KVER there)",
        )
    return None


def _job(request: Request, src: build.Source, fam: Family, kernels: tuple[str, ...], out: Path, host_arch: str) -> Job:
    """One family's job: its plan, where it is built (this host, or its suite's root) and with what."""
    plan = model.plan(
        fam,
        kernels=kernels,
        with_dkms=request.with_dkms,
        source_date_epoch=src.epoch,
        device_mode=request.device_mode,
        device_group=request.device_group,
        package_version=request.package_version,
    )
    target = targets.target_for(fam, host_arch)
    cross = host_arch if host_arch and arch(host_arch) != HOST_ARCH else ""
    build_suite = ""
    if isinstance(fam, DebianFamily):
        build_suite = deb_build_suite(fam.release, cross)
    log(
        f"{target.name}: glibc {fam.glibc or '(not known)'}, Python {fam.python.version} ({fam.python_requires})"
        + (f", built in the {build_suite} root" if build_suite else "")
    )
    return Job(plan, out, target, cross, build_suite)


def deb_build_suite(release: DebianRelease, cross_arch: str = "", os_release: Path = OS_RELEASE) -> str:
    """The suite whose root builds `release`'s packages; "" for this host (its own release, or a cross build)."""
    if not release.build_suite:
        return ""
    host = deb_target_release("", os_release) if os_release.exists() else None
    # On a host of that release (a jammy container), or of its build suite: here.
    if host is not None and host.codename in (release.codename, release.build_suite):
        return ""
    if cross_arch:
        host_glibc = toolchain.host_glibc()
        if release.glibc and toolchain.needs_baseline_toolchain(release.glibc, host_glibc):
            raise die(
                f"{release.codename} {cross_arch} cannot be cross-built here: this host's glibc {host_glibc}"
                f" is newer than {release.codename}'s {release.glibc}",
                f"build it on a {release.build_suite} host (or its matrix row)",
            )
        return ""
    return release.build_suite


def execute(build_plan: BuildPlan) -> list[Row]:
    request = build_plan.request
    if request.install_deps:
        # Kernel headers from this host's archive only for the .deb packages built on it
        # (a suite root gets its own; an RPM kernel's devel tree is never a Debian package).
        host_kernels = [
            k
            for job in build_plan.jobs
            if job.plan.package_type == "deb" and not job.build_suite
            for k in job.plan.kernels
        ]
        build.ensure_build_deps(host_kernels, kinds=request.kinds, lint=request.lint, dry_run=request.dry_run)
        for cross_arch in dict.fromkeys(job.host_arch for job in build_plan.jobs if job.host_arch):
            build.ensure_cross_build_deps(cross_arch, dry_run=request.dry_run)
    if request.nvidia_src_dir:
        if not Path(request.nvidia_src_dir, "nv-p2p.h").exists() and not request.dry_run:
            raise die(
                f"{request.nvidia_src_dir} has no nv-p2p.h",
                "pass the NVIDIA driver's kernel source directory, e.g. /usr/src/nvidia-550.54.15/nvidia",
            )
    rows: list[Row] = []
    for job in build_plan.jobs:
        started = time.monotonic()
        root = None
        if job.build_suite and not request.dry_run:
            root = suiteroot.ensure_root(job.build_suite, suiteroot.root_packages(job.plan.kernels))
        if job.plan.package_type == "deb":
            built = build.build_debs(
                job.plan,
                build_plan.source,
                job.output,
                jobs=request.jobs,
                dry_run=request.dry_run,
                check_deps=request.install_deps,
                host_arch=job.host_arch,
                nvidia_src_dir=request.nvidia_src_dir,
                suite_root=root if root is not None else (Path(job.build_suite) if job.build_suite else None),
            )
        else:
            built = build.build_rpms(
                job.plan,
                build_plan.source,
                job.output,
                jobs=request.jobs,
                dry_run=request.dry_run,
                host_arch=job.host_arch,
                nvidia_src_dir=request.nvidia_src_dir,
            )
        if request.dry_run:
            continue
        problems = build.verify_contents(job.plan, built, job.host_arch)
        # Printed once, with every job's, by the task's closing table (pipeline.baseline_table).
        reports = {r.file: r for r in baseline.check_packages(job.target, built)}
        problems += [p for r in reports.values() for p in r.problems]
        # Every ELF file: PIE, stack protector, fortify, RELRO, BIND_NOW, build-id, stripped, its debug data.
        elf_reports = hardening.check_packages(built, build.debug_packages(built))
        problems += hardening.misses(elf_reports)
        report = ""
        if request.lint and root is not None:
            _, report = suiteroot.lint(root, build.BUILD_ROOT / "deb", suite=job.build_suite, log_dir=build.LOG_DIR)
        elif request.lint:
            _, report = build.lint(built)
        if request.lint:
            log_file = build.LOG_DIR / f"lint-{job.target.name}.log"
            log_file.parent.mkdir(parents=True, exist_ok=True)
            log_file.write_text(report)
            log(f"{job.target.name}: lint report kept in {log_file}")
        for line in report.splitlines():
            if lint_severity(line) in ("E", "W"):
                print(line)
        for path in built:
            name = build.package_name(path)
            mine = [p for p in problems if p.startswith((f"{name}:", f"{path.name}:", f"{path.name} "))]
            lint_errors = sum(1 for line in report.splitlines() if lint_line_of(line, name) == "E")
            lint_warnings = sum(1 for line in report.splitlines() if lint_line_of(line, name) == "W")
            rows.append(
                Row(
                    str(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path),
                    path.stat().st_size,
                    "ok" if not mine else "; ".join(mine),
                    lint_errors,
                    path,
                    reports.get(path.name),
                    lint_warnings,
                    tuple(r for r in elf_reports if r.package == path.name),
                )
            )
        log(f"{job.plan.package_type}: {len(built)} packages in {time.monotonic() - started:.0f} s")
        others = [
            p for p in problems
            if not any(p.startswith((f"{build.package_name(b)}:", f"{b.name}:", f"{b.name} ")) for b in built)
        ]  # fmt: skip
        if others:
            raise die("built packages differ from packages/gdrcopy.yaml:\n  " + "\n  ".join(others))
    return rows


def lint_severity(line: str) -> str:
    """E, W or "" for one line of lintian's ("W: pkg: tag") or rpmlint's ("pkg.arch: W: tag") report (pure)."""
    found = re.match(r"^([EW]): \S+", line) or re.match(r"^\S+: ([EW]): ", line)
    return found.group(1) if found else ""


def lint_line_of(line: str, name: str) -> str:
    """The severity of a report line about package `name` ("" for another package's or none) (pure)."""
    severity = lint_severity(line)
    if not severity:
        return ""
    if line.startswith(f"{severity}: {name}:") or line.startswith(f"{severity}: {name} "):
        return severity
    if re.match(rf"^{re.escape(name)}\.[\w]+: {severity}: ", line) or line.startswith(f"{name}: {severity}: "):
        return severity
    return ""


def summary_table(rows: list[Row]) -> str:
    header = ("package file", "size", "contents", "lint errors", "lint warnings", "ELF files hardened")
    body = [
        (
            r.file,
            f"{r.size / 1024:.0f} KiB",
            r.contents,
            str(r.lint_errors),
            str(r.lint_warnings),
            _hardened(r.elf_files),
        )
        for r in rows
    ]
    widths = [max(len(x[i]) for x in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)) for line in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _hardened(reports: tuple[hardening.ElfReport, ...]) -> str:
    judged = [r for r in reports if "pie" in r.verdicts and not r.verdicts["pie"].startswith("n/a")]
    if not judged:
        return "-"
    bad = sum(1 for r in judged if r.misses)
    return f"{len(judged) - bad}/{len(judged)}" + ("" if not bad else " (see below)")


def hardening_table(rows: list[Row]) -> str:
    """package × ELF file × property, every package's (gdrkit.packaging.hardening)."""
    return hardening.table(r for row in rows for r in row.elf_files)


def baseline_table(rows: list[Row]) -> str:
    """Each package against its target: newest glibc needed vs the target's, file, Python requirement."""
    return baseline.table(r.baseline for r in rows if r.baseline is not None)


def check_rows(rows: list[Row]) -> None:
    bad = [r for r in rows if r.contents != "ok" or r.lint_errors or r.lint_warnings]
    if bad:
        raise die(
            f"{len(bad)} package(s) failed their checks (see the tables above)",
            "fix the contents in packages/gdrcopy.yaml or the build, and the lint errors and warnings printed above"
            " (a warning that does not apply: an override with its reason, in packages/rpmlintrc or"
            " templates/debian/*.lintian-overrides.j2)",
        )


def headers_hint(kver: str, os_release: Path = OS_RELEASE) -> str:
    """How to install the headers of kernel `kver` on this host."""
    fam = families.host_family(os_release.read_text() if os_release.exists() else "")
    return fam.headers_hint(kver) if fam is not None else f"install the kernel headers of {kver}"


def build_tree(kernel: str = "", *, with_driver: bool = True, jobs: int = 2, dry_run: bool = False) -> None:
    """`invoke build`: the library, test programs and module in the working tree."""
    build.check_kernel_releases([kernel] if kernel else [])
    # A new machine may have no compiler: install it, as every task installs what it needs.
    ensure_debian_packages(["build-essential"], dry_run=dry_run)
    run(["make", f"-j{jobs}", "lib", "exes"], cwd=REPO_ROOT, dry_run=dry_run)
    if not with_driver:
        return
    kver = kernel or (build.default_kernels() or [""])[0]
    if not kver:
        raise die(
            "no kernel headers installed to build gdrdrv against",
            f"install them: {headers_hint(os.uname().release)}, or pass --kernel",
        )
    if not dry_run and not Path(f"/lib/modules/{kver}/build").exists():
        raise die(f"no headers for kernel {kver} (/lib/modules/{kver}/build)", headers_hint(kver))
    run(["make", f"-j{jobs}", "driver", f"KVER={kver}"], cwd=REPO_ROOT, dry_run=dry_run)
