"""Packaging tasks: `invoke build`, `build-deb`, `build-rpm`, `build-packages`.

Thin: they parse arguments and call gdrkit.packaging.pipeline.
"""

from __future__ import annotations

from pathlib import Path

from invoke.context import Context
from invoke.tasks import task

from gdrkit.packaging import pipeline
from gdrkit.packaging.build import DIST

_COMMON_HELP = {
    "dkms": "build the DKMS module package (--no-dkms: skip it)",
    "kmod": "build the prebuilt module package (--no-kmod: skip it)",
    "kernel": "kernel release(s) for the prebuilt module, comma-separated (default: running, else newest with headers)",
    "nvidia_src_dir": "NVIDIA driver kernel sources (with nv-p2p.h) for the prebuilt module",
    "output": "directory for the packages (default: dist/)",
    "ref": "git commit to package (default: HEAD; uncommitted changes are not packaged)",
    "device_mode": "mode of /dev/gdrdrv in the udev rule (default from packages/gdrcopy.yaml: 0660)",
    "device_group": "group of /dev/gdrdrv in the udev rule (default: video)",
    "lint": "run lintian/rpmlint on the results (--no-lint: skip)",
    "deps": "install the build dependencies first (--no-deps: neither install nor check them)",
    "dry_run": "print what would be installed and built, change nothing",
}
_SUITE_HELP = {
    "suite": "Debian/Ubuntu release the .deb packages are for, by codename (bookworm, trixie, noble, ...);"
    " it decides /lib or /usr/lib paths (default: this host's, from /etc/os-release)",
}


def _request(kinds: tuple[str, ...], **options: object) -> pipeline.Request:
    kernel = str(options.pop("kernel") or "")
    output = str(options.pop("output") or "")
    values: dict[str, object] = {
        "kinds": kinds,
        "kernels": tuple(k for k in kernel.split(",") if k),
        "output": Path(output).resolve() if output else DIST,
    }
    values.update(options)
    return pipeline.Request(**values)  # type: ignore[arg-type]


def _build(request: pipeline.Request) -> None:
    plan = pipeline.plan_request(request)
    rows = pipeline.execute(plan)
    if rows:
        print(pipeline.summary_table(rows))
    pipeline.check_rows(rows)


@task(help={"kernel": "kernel release to build gdrdrv for", "driver": "also build gdrdrv (--no-driver: skip)",
            "dry_run": _COMMON_HELP["dry_run"]})
def build(c: Context, kernel: str = "", driver: bool = True, dry_run: bool = False) -> None:
    """Build the library, test programs and gdrdrv (for the running or a given kernel) in the tree."""
    pipeline.build_tree(kernel, with_driver=driver, dry_run=dry_run)


@task(name="build-deb", help=dict(_COMMON_HELP, **_SUITE_HELP))
def build_deb(
    c: Context,
    dkms: bool = True,
    kmod: bool = True,
    kernel: str = "",
    nvidia_src_dir: str = "",
    output: str = "",
    ref: str = "HEAD",
    device_mode: str = "",
    device_group: str = "",
    suite: str = "",
    lint: bool = True,
    deps: bool = True,
    dry_run: bool = False,
) -> None:
    """Build the .deb packages (gdrdrv-dkms, gdrdrv-modules-<kver>, libgdrapi, gdrcopy-tests, gdrcopy)."""
    _build(_request(("deb",), with_dkms=dkms, with_kmod=kmod, kernel=kernel, nvidia_src_dir=nvidia_src_dir,
                    output=output, ref=ref, device_mode=device_mode, device_group=device_group, suite=suite,
                    lint=lint, install_deps=deps, dry_run=dry_run))


@task(name="build-rpm", help=dict(_COMMON_HELP, family="rpm family: rhel or suse (default rhel)"))
def build_rpm(
    c: Context,
    dkms: bool = True,
    kmod: bool = True,
    kernel: str = "",
    nvidia_src_dir: str = "",
    output: str = "",
    ref: str = "HEAD",
    family: str = "rhel",
    device_mode: str = "",
    device_group: str = "",
    lint: bool = True,
    deps: bool = True,
    dry_run: bool = False,
) -> None:
    """Build the .rpm packages (gdrcopy, gdrcopy-devel, gdrcopy-kmod, gdrcopy-kmod-<kver>)."""
    _build(_request(("rpm",), with_dkms=dkms, with_kmod=kmod, kernel=kernel, nvidia_src_dir=nvidia_src_dir,
                    output=output, ref=ref, rpm_family=family, device_mode=device_mode,
                    device_group=device_group, lint=lint, install_deps=deps, dry_run=dry_run))


@task(name="build-packages", help=dict(_COMMON_HELP, **_SUITE_HELP))
def build_packages(
    c: Context,
    dkms: bool = True,
    kmod: bool = True,
    kernel: str = "",
    nvidia_src_dir: str = "",
    output: str = "",
    ref: str = "HEAD",
    device_mode: str = "",
    device_group: str = "",
    suite: str = "",
    lint: bool = True,
    deps: bool = True,
    dry_run: bool = False,
) -> None:
    """Build every package, deb and rpm, into dist/ (installs the build dependencies first)."""
    _build(_request(("deb", "rpm"), with_dkms=dkms, with_kmod=kmod, kernel=kernel,
                    nvidia_src_dir=nvidia_src_dir, output=output, ref=ref, device_mode=device_mode,
                    device_group=device_group, suite=suite, lint=lint, install_deps=deps, dry_run=dry_run))


@task(name="build-wheel", help={"output": _COMMON_HELP["output"], "ref": _COMMON_HELP["ref"]})
def build_wheel(c: Context, output: str = "", ref: str = "HEAD") -> None:
    """Build the gdrcopy Python package's py3-none-any wheel (pure Python) from a commit."""
    from gdrkit.packaging import build, wheel

    path = wheel.build_wheel(build.source_at(ref), Path(output).resolve() if output else DIST)
    print(path)


TASKS = [build, build_deb, build_rpm, build_packages, build_wheel]
