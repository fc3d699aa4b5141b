"""Packaging tasks: `invoke build`, `build-deb`, `build-rpm`, `build-packages`.

Thin: they parse arguments and call gdrkit.packaging.pipeline.  The three
package tasks share one options type, `PackageOptions`: each of its fields is
a flag (with its help text), and each task takes the fields that apply to it.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from invoke.context import Context

from gdrkit.tasks.convention import ConventionTask, task

from gdrkit import system
from gdrkit.distro import targets
from gdrkit.distro.arch import ARCHES, HOST_ARCH, arch
from gdrkit.packaging import model, pipeline
from gdrkit.packaging.build import DIST


def _flag(default: Any, help_text: str) -> Any:
    return field(default=default, metadata={"help": help_text})


@dataclass(frozen=True)
class PackageOptions:
    """What build-deb, build-rpm and build-packages are asked for: one field per flag."""

    dkms: bool = _flag(True, "build the DKMS module package (--no-dkms: skip it)")
    kmod: bool = _flag(True, "build the prebuilt module package (--no-kmod: skip it)")
    kernel: str = _flag(
        "",
        "kernel release(s) of the target release to build prebuilt modules for, comma-separated (default: none;"
        " what is built never depends on the host's headers)",
    )
    nvidia_src_dir: str = _flag("", "NVIDIA driver kernel sources (with nv-p2p.h) for the prebuilt module")
    output: str = _flag("", "directory for the packages (default: dist/)")
    ref: str = _flag("HEAD", "git commit to package (default: HEAD; uncommitted changes are not packaged)")
    family: str = _flag("rhel", "rpm family: rhel or suse (default rhel; --release names it too)")
    release: str = _flag(
        "",
        "RPM release the packages are for: el8, el9, el10 or sle15 (its dist tag, glibc and Python;"
        " default: el9 for rhel, sle15 for suse)",
    )
    targets: str = _flag(
        "",
        "build for these targets, each into <output>/<release>/ (as publish reads it): `all` (every claimed one) or"
        f" comma-separated names ({','.join(dict.fromkeys(t.release for t in targets.CLAIMED))}; -arm64 for arm64)",
    )
    device_mode: str = _flag("", "mode of /dev/gdrdrv in the udev rule (default from packages/gdrcopy.yaml: 0660)")
    device_group: str = _flag("", "group of /dev/gdrdrv in the udev rule (default: video)")
    suite: str = _flag(
        "",
        "Debian/Ubuntu release the .deb packages are for, by codename (bookworm, trixie, noble, ...);"
        " it decides /lib or /usr/lib paths (default: this host's, from /etc/os-release)",
    )
    arch: str = _flag(
        "",
        f"architecture the packages are for: {' or '.join(ARCHES)} ({' or '.join(a.uname for a in ARCHES.values())}"
        f" also taken); one other than this host's ({HOST_ARCH.debian}) is cross-built, with --no-kmod"
        " (default: this host's)",
    )
    lint: bool = _flag(True, "run lintian/rpmlint on the results (--no-lint: skip)")
    deps: bool = _flag(True, "install the build dependencies first (--no-deps: neither install nor check them)")
    dry_run: bool = _flag(False, "print what would be installed and built, change nothing")

    def request(self, kinds: tuple[str, ...]) -> pipeline.Request:
        """The pipeline's request for packages of `kinds` (pure)."""
        return pipeline.Request(
            kinds=kinds,
            with_dkms=self.dkms,
            with_kmod=self.kmod,
            kernels=tuple(k for k in self.kernel.split(",") if k),
            rpm_family=self.family,
            rpm_release=self.release,
            targets=tuple(t for t in self.targets.split(",") if t.strip()),
            suite=self.suite,
            output=Path(self.output).resolve() if self.output else DIST,
            ref=self.ref,
            nvidia_src_dir=self.nvidia_src_dir,
            device_mode=self.device_mode,
            device_group=self.device_group,
            lint=self.lint,
            install_deps=self.deps,
            dry_run=self.dry_run,
            host_arch=arch(self.arch).debian if self.arch else "",
        )


# Flags that only one kind of package has: the others' tasks leave them out.
_ONLY_FOR = {"suite": "deb", "family": "rpm", "release": "rpm"}
# Flags that only one task has.
_ONLY_IN = {"targets": "build-packages"}


def _build(request: pipeline.Request) -> None:
    plan = pipeline.plan_request(request)
    first = len(system.STEPS)
    try:
        rows = pipeline.execute(plan)
    finally:
        if len(system.STEPS) > first:
            print("steps:\n" + system.step_summary(first), flush=True)
    if rows:
        print(pipeline.summary_table(rows))
        print("\nagainst each target's baseline:\n" + pipeline.baseline_table(rows))
        print("\neach ELF file's hardening:\n" + pipeline.hardening_table(rows))
    pipeline.check_rows(rows)


def package_task(name: str, kinds: tuple[str, ...], doc: str) -> ConventionTask:
    """An Invoke task `name` building `kinds` whose flags are PackageOptions' fields for those kinds."""
    fields = [
        f
        for f in dataclasses.fields(PackageOptions)
        if _ONLY_FOR.get(f.name, kinds[0]) in kinds and _ONLY_IN.get(f.name, name) == name
    ]

    def body(c: Context, **flags: Any) -> None:
        _build(PackageOptions(**flags).request(kinds))

    # Invoke reads a task's flags from its signature: give the body the options' own.
    context = inspect.Parameter("c", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context)
    parameters = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type) for f in fields
    ]
    body.__signature__ = inspect.Signature([context, *parameters])  # type: ignore[attr-defined]
    body.__name__ = body.__qualname__ = name.replace("-", "_")
    body.__doc__ = doc
    return task(name=name, help={f.name: f.metadata["help"] for f in fields})(body)


@task(
    help={
        "kernel": "kernel release to build gdrdrv for",
        "driver": "also build gdrdrv (--no-driver: skip)",
        "dry_run": "print what would be built, change nothing",
    }
)
def build(c: Context, kernel: str = "", driver: bool = True, dry_run: bool = False) -> None:
    """Build the library, test programs and gdrdrv (for the running or a given kernel) in the tree."""
    pipeline.build_tree(kernel, with_driver=driver, dry_run=dry_run)


def kind_doc(package_type: str) -> str:
    """A build task's one line, its packages named as packages/gdrcopy.yaml names them."""
    return f"Build the .{package_type} packages ({', '.join(model.load().package_names(package_type))})."


build_deb = package_task("build-deb", ("deb",), kind_doc("deb"))
build_rpm = package_task("build-rpm", ("rpm",), kind_doc("rpm"))
build_packages = package_task(
    "build-packages",
    ("deb", "rpm"),
    "Build every package, deb and rpm, into dist/ (installs the build dependencies first);"
    " --targets all: for every claimed target, each into dist/<release>/.",
)

_OPTION_HELP = {f.name: f.metadata["help"] for f in dataclasses.fields(PackageOptions)}


@task(
    name="build-wheel",
    help={
        "output": _OPTION_HELP["output"],
        "ref": _OPTION_HELP["ref"],
        "kind": "pure (py3-none-any, bindings only), bundled (manylinux, with libgdrapi) or all (default)",
        "dry_run": "print the wheels that would be built, write nothing",
    },
)
def build_wheel(c: Context, output: str = "", ref: str = "HEAD", kind: str = "all", dry_run: bool = False) -> None:
    """Build the gdrcopy wheels from a commit with python/'s build backend: pure and bundled (manylinux_2_28)."""
    from gdrkit.packaging import build, wheel

    kinds = wheel.KINDS if kind == "all" else (kind,)
    source = build.source_at(ref)
    directory = Path(output).resolve() if output else DIST
    if dry_run:
        print(f"[dry-run] would write the {', '.join(kinds)} wheel(s) of {source.commit[:12]} into {directory}")
        return
    for path in wheel.build_wheels(source, directory, kinds):
        print(path)


@task(
    name="man-pages",
    help={
        "check": "write nothing: fail if man/ differs from the pages the programs' -h texts make now",
        "dry_run": "print the pages that would be written, write nothing",
    },
)
def man_pages(c: Context, check: bool = False, dry_run: bool = False) -> None:
    """Make man/<program>.1 of every shipped program from its -h text (the programs built here; ./toolkit build)."""
    from gdrkit.host import programs
    from gdrkit.packaging import manpages

    made = manpages.pages(programs.help_texts())
    stale = sorted(
        name
        for name, text in made.items()
        if not (manpages.MAN_DIR / name).exists() or (manpages.MAN_DIR / name).read_text() != text
    )
    extra = (
        sorted(p.name for p in manpages.MAN_DIR.glob("*.1") if p.name not in made) if manpages.MAN_DIR.exists() else []
    )
    if check:
        if stale or extra:
            raise system.die(
                f"man/ is out of date: {', '.join(stale + extra)}", "run ./toolkit man-pages and commit man/"
            )
        print(f"man/: all {len(made)} pages match the programs' -h texts")
        return
    for name in stale:
        if dry_run:
            print(f"[dry-run] would write {manpages.MAN_DIR / name}")
        else:
            manpages.MAN_DIR.mkdir(exist_ok=True)
            (manpages.MAN_DIR / name).write_text(made[name])
            print(f"wrote {manpages.MAN_DIR / name}")
    for name in extra:
        print(f"{'[dry-run] would remove' if dry_run else 'removed'} {manpages.MAN_DIR / name}")
        if not dry_run:
            (manpages.MAN_DIR / name).unlink()


TASKS = [build, build_deb, build_rpm, build_packages, build_wheel, man_pages]
