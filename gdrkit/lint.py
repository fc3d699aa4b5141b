"""The project's static checks (`./toolkit lint`): each one fails on any finding.

A check is a function of the tree's root that returns its findings, one
line each; an empty list is a pass.  Each check says which tools it needs
(Debian packages, installed idempotently, or Python tools of the toolkit's
own environment), so running one alone installs only what it needs.  The
tests (tests/python/test_lint.py) run single checks on temporary trees with
a planted error.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from gdrkit import doclinks
from gdrkit.system import UserError, apt_install_hint, cache_dir, ensure_debian_packages, log, run

# The tree was formatted in one commit (issue 11); lint keeps it so.
RUFF_FORMAT_CHECK = True

# Not named *.so.*: copies of the tree leave those out as build output.
ABI_BASELINE = Path("libgdrapi/abi/libgdrapi-abi2.xml")
# Files checkpatch --strict reads: the module and the ioctl header it shares with the library.
CHECKPATCH_FILES = ("gdrdrv/gdrdrv.c", "gdrdrv/gdrdrv_p2p.h", "gdrdrv/nv_p2p_abi.h",
                    "gdrdrv/p2p-symbols/nvidia_p2p_symbols.c", "include/uapi/gdrdrv.h")  # fmt: skip
# Deliberate departures from kernel style, per file, each with its reason.
CHECKPATCH_IGNORE = {
    # Spelled as NVIDIA's nv-p2p.h: genksyms hashes type names, so u64 would change the CRCs.
    "gdrdrv/nv_p2p_abi.h": ("PREFER_KERNEL_TYPES",),
    "gdrdrv/p2p-symbols/nvidia_p2p_symbols.c": ("PREFER_KERNEL_TYPES",),
    # The format argument of the log macros is always a string literal.
    "gdrdrv/gdrdrv.c": ("MACRO_ARG_REUSE",),
    # _Static_assert is C11's keyword, not a CamelCase identifier.
    "include/uapi/gdrdrv.h": ("CAMELCASE",),
}
# What the -Werror build copies: the library, its tests and test programs, and what they build from.
WERROR_TREE = ("Makefile", "include", "libgdrapi", "tests/common", "tests/sanity", "tests/bench",
               "tests/softgpu/libcuda", "tests/softgpu/include", "tests/unit")  # fmt: skip
# Shell not worth a finding: rendered copies (checked as rendered) and the templates they come from.
SHELL_SKIP = ("tests/python/golden/", "templates/", ".venv/", ".git/")
SHELL_SHEBANG = re.compile(rb"^#!\s*/(usr/)?bin/(env\s+)?(ba|da)?sh\b")
# Build output that never goes into a copy.
COPY_IGNORE = shutil.ignore_patterns("build", "build-*", "*.o", "*.so", "*.so.*", "*.a", "*.ko", ".*.cmd")


@dataclass(frozen=True)
class Check:
    name: str
    what: str
    run: Callable[[Path], list[str]]
    debian_packages: Callable[[], list[str]] = lambda: []


def _output(cmd: Sequence[str | os.PathLike[str]], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run a checker whose non-zero exit means findings, not failure: its status and its output."""
    full_env = dict(os.environ, **env) if env else None
    result = subprocess.run([os.fspath(c) for c in cmd], cwd=cwd, env=full_env, capture_output=True, text=True,
                            check=False)  # fmt: skip
    return result.returncode, result.stdout + result.stderr


def tracked_files(root: Path) -> list[Path]:
    """The tree's files: git's list in a work tree, else every file (a test's temporary tree)."""
    if (root / ".git").exists():
        out = run(["git", "ls-files", "-z"], cwd=root, capture=True).stdout
        return [root / name for name in out.split("\0") if name and (root / name).is_file()]
    return [p for p in root.rglob("*") if p.is_file() and not any(part in (".git", ".venv") for part in p.parts)]


def copy_tree(root: Path, parts: Sequence[str], dest: Path) -> None:
    """Copy the tracked files under parts (directories or files of root) to dest, no build output."""
    for part in parts:
        source = root / part
        if source.is_dir():
            shutil.copytree(source, dest / part, ignore=COPY_IGNORE, symlinks=True)
        elif source.exists():
            (dest / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / part)


# ---- Python ----


def mypy(root: Path) -> list[str]:
    """mypy --strict over the files pyproject.toml names."""
    status, out = _output([sys.executable, "-m", "mypy", "--no-incremental"], root)
    findings = [line for line in out.splitlines() if ": error:" in line]
    if status != 0 and not findings:
        findings = [f"mypy exited {status}: {out.strip()[-2000:]}"]
    return findings


def ruff(root: Path) -> list[str]:
    """ruff check with pyproject.toml's rules, and `ruff format --check` once RUFF_FORMAT_CHECK is on."""
    commands = [["check", "--output-format", "concise", "--no-cache", "."]]
    if RUFF_FORMAT_CHECK:
        commands.append(["format", "--check", "--no-cache", "."])
    findings = []
    for args in commands:
        status, out = _output([sys.executable, "-m", "ruff", *args], root)
        if status != 0:
            findings += [line for line in out.splitlines() if line.strip() and not line.startswith("Found ")]
    return findings


def imports(root: Path) -> list[str]:
    """import-linter's contracts of pyproject.toml: gdrkit's floors, the packages side by side, no circles."""
    lint_imports = Path(sys.executable).parent / "lint-imports"
    # From root, so that root's gdrkit is the one read; no cache left in the tree.
    argv: list[str | os.PathLike[str]] = [lint_imports, "--config", root / "pyproject.toml", "--no-cache", "--no-logo"]
    status, out = _output(argv, root, {"COLUMNS": "200", "NO_COLOR": "1"})
    if status == 0:
        return []
    _, found, broken = out.partition("Broken contracts")
    lines = broken.splitlines() if found else out.splitlines()
    findings = [line for line in lines if line.strip() and not re.fullmatch(r"-+", line.strip())]
    return findings or [f"lint-imports exited {status}: {out.strip()[-2000:]}"]


# ---- Ansible ----

# The role, its Molecule scenario and the example playbook.
ANSIBLE_DIR = "ansible"


def ansible_lint(root: Path) -> list[str]:
    """ansible-lint (production profile, offline) over ansible/."""
    bindir = Path(sys.executable).parent
    # ansible-lint runs ansible-config and ansible-playbook of the same environment.
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1"}
    cmd: list[str | os.PathLike[str]] = [
        bindir / "ansible-lint",
        "--offline",
        "--nocolor",
        "--profile",
        "production",
        "-p",
        ANSIBLE_DIR,
    ]
    status, out = _output(cmd, root, env)
    findings = [line for line in out.splitlines() if re.match(rf"^{ANSIBLE_DIR}/\S+:\d+", line)]
    if status != 0 and not findings:
        findings = [f"ansible-lint exited {status}: {out.strip()[-2000:]}"]
    return findings


# ---- shell ----


def shell_files(root: Path) -> list[Path]:
    """Every *.sh and every file with a sh/bash/dash shebang, outside SHELL_SKIP."""
    found = []
    for path in tracked_files(root):
        rel = path.relative_to(root).as_posix()
        if any(rel.startswith(skip) or f"/{skip}" in f"/{rel}" for skip in SHELL_SKIP):
            continue
        if path.suffix == ".sh":
            found.append(path)
            continue
        with path.open("rb") as f:
            if SHELL_SHEBANG.match(f.readline(128)):
                found.append(path)
    return sorted(found)


def _shellcheck(files: Sequence[Path], cwd: Path, shell: str = "") -> list[str]:
    if not files:
        return []
    argv: list[str | os.PathLike[str]] = ["shellcheck", "--format=gcc", "--external-sources"]
    if shell:
        argv.append(f"--shell={shell}")
    status, out = _output([*argv, *files], cwd)
    findings = [line for line in out.splitlines() if line.strip()]
    if status != 0 and not findings:
        findings = [f"shellcheck exited {status}"]
    return findings


def shellcheck(root: Path) -> list[str]:
    """shellcheck on every shell file of the tree."""
    return [f.replace(str(root) + "/", "") for f in _shellcheck(shell_files(root), root)]


# RPM scriptlets: the section heads whose body is shell (%post -p /sbin/ldconfig has none).
SPEC_SCRIPTLET = re.compile(r"^%(pre|post|preun|postun|posttrans|pretrans|triggerin|triggerun)\b(?!.*\s-p\s)")
SPEC_SECTION = re.compile(r"^%(\w+)")
SPEC_MACRO = re.compile(r"(?<!%)%(\{[^}]*\}|[A-Za-z_]\w*)")
SPEC_SECTIONS = {"package", "description", "prep", "build", "install", "check", "files", "changelog", "pre",
                 "post", "preun", "postun", "posttrans", "pretrans", "triggerin", "triggerun"}  # fmt: skip


def spec_scriptlets(spec: str) -> Iterator[tuple[str, str]]:
    """(section head, shell body) of each scriptlet of a rendered spec, macros replaced, %% unescaped."""
    head = ""
    body: list[str] = []
    for line in spec.splitlines() + ["%end"]:
        match = SPEC_SECTION.match(line)
        if match and (match.group(1) in SPEC_SECTIONS or line == "%end"):
            if head:
                # rpm expands its macros before the shell runs: a placeholder word stands for each.
                text = SPEC_MACRO.sub("RPM_MACRO", "\n".join(body))
                yield head, text.replace("%%", "%") + "\n"
            head, body = (line, []) if SPEC_SCRIPTLET.match(line) else ("", [])
        elif head:
            # %if/%endif and other macro lines are rpm's, not the shell's.
            body.append(f"# {line}" if line.startswith("%") else line)


def _quote_line(finding: str) -> str:
    """A gcc-style finding of a rendered file, with the line it names (the file is gone afterwards)."""
    match = re.match(r"(/[^:]+):(\d+):", finding)
    if not match:
        return finding
    lines = Path(match.group(1)).read_text().splitlines()
    number = int(match.group(2))
    return f"{finding}\n    {lines[number - 1].strip()}" if 0 < number <= len(lines) else finding


def rendered_scripts(root: Path) -> list[str]:
    """shellcheck on every maintainer script the packaging renders, for every family (sh, as dpkg/rpm run them).

    The templates are those of the toolkit that runs (root's when it runs from root).
    """
    from gdrkit.distro import families
    from gdrkit.packaging import model, render

    findings = []
    with tempfile.TemporaryDirectory(prefix="gdrkit-lint-") as tmp:
        for package_type in ("deb", "rpm"):
            for family in families.families_of_type(package_type):
                plan = model.plan(family, kernels=("6.1.0-0-amd64",), source_date_epoch=1)
                out = Path(tmp) / family.name
                scripts = []
                for rel, rendered in sorted(render.render(plan).items()):
                    path = out / rel
                    path.parent.mkdir(parents=True, exist_ok=True)
                    if rel.endswith(".spec"):
                        for n, (head, body) in enumerate(spec_scriptlets(rendered.text)):
                            path = out / f"{rel}.scriptlet{n}"
                            path.write_text(f"#!/bin/sh\n# {head}\n{body}")
                            scripts.append(path)
                    elif re.search(r"\.(preinst|postinst|prerm|postrm)$", rel) or rendered.text.startswith("#!/bin/sh"):
                        path.write_text(rendered.text)
                        scripts.append(path)
                findings += [_quote_line(f).replace(tmp + "/", "rendered/") for f in _shellcheck(scripts, out, "sh")]
        findings += [
            _quote_line(f).replace(tmp + "/", "rendered/") for f in _shellcheck([_vm_init(Path(tmp))], Path(tmp), "sh")
        ]
    return findings


def _vm_init(tmp: Path) -> Path:
    """The VM's /init for a plan that takes every branch of its template (busybox sh: checked as sh)."""
    from gdrkit.vm.initramfs import GuestPlan, ModuleLoad, init_script

    plan = GuestPlan("true", (ModuleLoad("softgpu", ("a=1",)), ModuleLoad("gdrdrv")), True, ("9p.ko",))
    path = tmp / "vm-init"
    path.write_text(init_script(plan))
    return path


# ---- the kernel module ----


def linux_source_script(cache_name: str, names: Sequence[str]) -> Path:
    """scripts/`names[0]` (with the other `names` beside it) from Debian's linux-source tarball.

    Extracted once into cache_dir()/`cache_name`.
    """
    tarballs = sorted(Path("/usr/src").glob("linux-source-*.tar.xz"))
    if not tarballs:
        raise RuntimeError(f"no /usr/src/linux-source-*.tar.xz: {apt_install_hint(['linux-source'])}")
    tarball = tarballs[-1]
    top = tarball.name.removesuffix(".tar.xz")
    dest = cache_dir() / cache_name / top
    script = dest / top / "scripts" / names[0]
    if not script.exists():
        log(f"extracting {names[0]} from {tarball} (once)")
        dest.mkdir(parents=True, exist_ok=True)
        run(["tar", "-xJf", tarball, "-C", dest, *(f"{top}/scripts/{n}" for n in names)])
    return script


def checkpatch_script() -> Path:
    """checkpatch.pl (with spelling.txt beside it) from Debian's linux-source tarball, extracted once into the cache."""
    return linux_source_script("checkpatch", ("checkpatch.pl", "spelling.txt", "const_structs.checkpatch"))


def checkpatch(root: Path) -> list[str]:
    """checkpatch.pl --strict on gdrdrv and the uapi header, less CHECKPATCH_IGNORE."""
    script = checkpatch_script()
    # In a copy outside git: in a work tree checkpatch leaves a .checkpatch-camelcase cache behind.
    with tempfile.TemporaryDirectory(prefix="gdrkit-checkpatch-") as tmp:
        copy_tree(root, CHECKPATCH_FILES, Path(tmp))
        return _checkpatch(script, Path(tmp))


def _checkpatch(script: Path, root: Path) -> list[str]:
    findings = []
    for rel in CHECKPATCH_FILES:
        if not (root / rel).exists():
            continue
        argv: list[str | os.PathLike[str]] = ["perl", script, "--strict", "--no-tree", "--terse", "--show-types",
                                              "--no-summary", "-f", rel]  # fmt: skip
        ignore = CHECKPATCH_IGNORE.get(rel)
        if ignore:
            argv += ["--ignore", ",".join(ignore)]
        _, out = _output(argv, root)
        findings += [line for line in out.splitlines() if re.search(r": (ERROR|WARNING|CHECK):", line)]
    return findings


# The uapi header (every struct) and the driver (its lifecycle functions) carry kernel-doc.
KERNEL_DOC_FILES = ("include/uapi/gdrdrv.h", "gdrdrv/gdrdrv.c")


def kernel_doc(root: Path) -> list[str]:
    """The kernel's scripts/kernel-doc (-none: check only) on KERNEL_DOC_FILES: every warning is a finding."""
    script = linux_source_script("kernel-doc", ("kernel-doc",))
    findings = []
    for rel in KERNEL_DOC_FILES:
        status, out = _output(["perl", script, "-none", rel], root)
        findings += [line for line in out.splitlines() if re.search(r"\b(warning|error)\b", line, re.IGNORECASE)]
        if status != 0 and not findings:
            findings.append(f"kernel-doc exited {status} on {rel}: {out.strip()[-500:]}")
    return findings


def kernel_headers_package() -> list[str]:
    arch = run(["dpkg", "--print-architecture"], capture=True).stdout.strip()
    return [f"linux-headers-{arch}"]


def kernel_build_dir() -> Path:
    """The newest Debian kernel build tree (linux-headers-<arch> installs one)."""
    trees = sorted(p for p in Path("/usr/src").glob("linux-headers-*") if (p / "Module.symvers").exists())
    if not trees:
        raise RuntimeError(
            f"no kernel build tree under /usr/src: {apt_install_hint(['linux-headers-$(dpkg --print-architecture)'])}"
        )
    return trees[-1]


# No NVIDIA driver here: sparse checks the build for the open kernel modules and page table 2.x.
SPARSE_TARGET = ("NVIDIA_SRC_DIR=", "NVIDIA_IS_OPENSOURCE=y", "GDRDRV_P2P_PT_MAJOR=2")


def sparse(root: Path) -> list[str]:
    """gdrdrv built with sparse on every file (C=2) against Debian's kernel headers: any warning is a finding."""
    kdir = kernel_build_dir()
    with tempfile.TemporaryDirectory(prefix="gdrkit-sparse-") as tmp:
        copy_tree(root, ("gdrdrv", "include"), Path(tmp))
        status, out = _output(["make", "-C", Path(tmp) / "gdrdrv", f"KDIR={kdir}", "C=2", *SPARSE_TARGET], root)
        findings = [line.replace(tmp + "/", "") for line in out.splitlines() if re.search(r"\b(warning|error):", line)]
    if status != 0 and not findings:
        findings = [f"gdrdrv does not build against {kdir} (make exit {status}):", *out.splitlines()[-20:]]
    return findings


# ---- the library ----


def werror(root: Path) -> list[str]:
    """The library, the test programs and the unit tests built with -Werror, in a copy of the tree."""
    with tempfile.TemporaryDirectory(prefix="gdrkit-werror-") as tmp:
        copy_tree(root, WERROR_TREE, Path(tmp))
        env = {"CFLAGS": "-O2 -g -Werror"}
        findings = []
        for target in (["lib", "exes"], ["-C", "tests/unit", "all"]):
            status, out = _output(["make", "-s", *target], Path(tmp), env)
            if status != 0:
                lines = [line for line in out.splitlines() if re.search(r"\b(warning|error)\b", line)]
                findings += lines or [f"make {' '.join(target)} failed (exit {status})", *out.splitlines()[-20:]]
    return findings


def build_library(root: Path, dest: Path) -> Path:
    """libgdrapi.so.2 of root, built in dest (with debug info, which abidw reads)."""
    copy_tree(root, ("include", "libgdrapi"), dest)
    run(["make", "-s", "-C", dest / "libgdrapi", "CFLAGS=-O2 -g"], capture=True)
    return dest / "libgdrapi" / "build" / "libgdrapi.so.2"


def abidw(library: Path, headers: Path) -> str:
    return run(["abidw", "--headers-dir", headers, "--no-corpus-path", "--drop-private-types", library],
               capture=True).stdout  # fmt: skip


def abi(root: Path) -> list[str]:
    """libgdrapi.so.2 against the stored baseline (abidiff): any change of the public ABI is a finding."""
    baseline = root / ABI_BASELINE
    if not baseline.exists():
        return [f"no ABI baseline {ABI_BASELINE}: create it with ./toolkit lint --update-abi"]
    with tempfile.TemporaryDirectory(prefix="gdrkit-abi-") as tmp:
        library = build_library(root, Path(tmp))
        status, out = _output(["abidiff", "--headers-dir2", root / "include", baseline, library], root)
    if status == 0:
        return []
    return [f"libgdrapi.so.2 differs from {ABI_BASELINE} (abidiff exit {status}); if intended, follow "
            "libgdrapi/VERSIONING.md and refresh it with ./toolkit lint --update-abi:",
            *out.splitlines()]  # fmt: skip


def update_abi_baseline(root: Path) -> Path:
    with tempfile.TemporaryDirectory(prefix="gdrkit-abi-") as tmp:
        text = abidw(build_library(root, Path(tmp)), root / "include")
    path = root / ABI_BASELINE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def deps(root: Path) -> list[str]:
    """libgdrapi's files include and call each other without a circle (libgdrapi/tools/deps.py)."""
    with tempfile.TemporaryDirectory(prefix="gdrkit-deps-") as tmp:
        copy_tree(root, ("include", "libgdrapi"), Path(tmp))
        status, out = _output([sys.executable, Path(tmp) / "libgdrapi/tools/deps.py"], root)
    return [] if status == 0 else [line for line in out.splitlines() if line.startswith(("circle", "error"))]


CHECKS = [
    Check("mypy", "mypy --strict (pyproject.toml's files)", mypy),
    Check("ruff", "ruff check" + (" and format --check" if RUFF_FORMAT_CHECK else ""), ruff),
    Check("imports", "import-linter: gdrkit's floors, the side-by-side packages, no import circle", imports),
    Check("ansible-lint", "ansible-lint (production profile) on the role and its scenario", ansible_lint),
    Check("shellcheck", "shellcheck on every shell file", shellcheck, lambda: ["shellcheck"]),
    Check("rendered-scripts", "shellcheck on the rendered maintainer scripts and VM /init", rendered_scripts,
          lambda: ["shellcheck"]),
    Check("checkpatch", "checkpatch.pl --strict on gdrdrv and the uapi header", checkpatch,
          lambda: ["linux-source", "xz-utils"]),
    Check("kernel-doc", "scripts/kernel-doc on the uapi header and gdrdrv.c", kernel_doc,
          lambda: ["linux-source", "xz-utils", "perl"]),
    Check("sparse", "gdrdrv with sparse (C=2) against Debian's kernel headers", sparse,
          lambda: ["sparse", "make", "gcc", *kernel_headers_package()]),
    Check("werror", "-Werror builds of the library, test programs and unit tests", werror,
          lambda: ["make", "gcc", "libcmocka-dev"]),
    Check("abi", "libgdrapi.so.2 against its abidw baseline", abi, lambda: ["abigail-tools", "make", "gcc"]),
    Check("deps", "no include/call circle in libgdrapi", deps, lambda: ["make", "gcc", "binutils"]),
    Check("doc-links", "relative links and #anchors of the README, docs/ and the READMEs they name", doclinks.check),
]  # fmt: skip


def select(names: str) -> list[Check]:
    """The checks named (comma separated), or all for ""."""
    if not names:
        return list(CHECKS)
    by_name = {c.name: c for c in CHECKS}
    unknown = [n for n in names.split(",") if n not in by_name]
    if unknown:
        raise ValueError(f"unknown lint check {', '.join(unknown)}; the checks are {', '.join(by_name)}")
    return [by_name[n] for n in names.split(",")]


def prepare(checks: Sequence[Check], *, dry_run: bool = False) -> None:
    """Install the Debian packages the checks need (idempotent)."""
    packages = sorted({p for check in checks for p in check.debian_packages()})
    ensure_debian_packages(packages, dry_run=dry_run)


def lint(root: Path, checks: Sequence[Check]) -> dict[str, list[str]]:
    """Run the checks; check name -> findings (a check that could not run reports why, as a finding)."""
    results = {}
    for check in checks:
        start = time.monotonic()
        try:
            findings = check.run(root)
        except (RuntimeError, OSError, subprocess.SubprocessError, UserError) as error:
            findings = [f"could not run: {error}"]
        took = time.monotonic() - start
        log(f"lint {check.name}: {'ok' if not findings else f'{len(findings)} finding(s)'} ({took:.0f} s)")
        for line in findings:
            print(f"  {line}", flush=True)
        results[check.name] = findings
    return results
