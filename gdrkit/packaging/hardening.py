"""Every ELF file of every package against the hardening the distributions require.

Each user-space ELF file a package installs must be a position-independent
executable or a shared object, built with a strong stack protector and
_FORTIFY_SOURCE, linked with full RELRO (GNU_RELRO and BIND_NOW), carry a
build-id, and be stripped with its debug data in the family's debug package
(-dbgsym .ddeb, -debuginfo .rpm) found by its build-id or its debuglink.
Kernel modules follow the kernel's own rules and are listed, not judged.

What is read is what readelf shows of the packaged file (the checksec way):
the ELF type, the program headers, the dynamic section, the sections, the
notes and the dynamic symbols.  The stack protector shows as an import of
__stack_chk_fail; _FORTIFY_SOURCE as imports of __*_chk, and is missing
where a function it always replaces (printf and kin) is imported plainly.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gdrkit.system import ensure_debian_packages, run

# The properties, in the table's order.
PROPERTIES = ("pie", "stack-protector", "fortify", "relro", "bind-now", "build-id", "stripped", "debug-data")
# Functions that _FORTIFY_SOURCE (level 1 and up, with optimisation) always
# replaces by their __*_chk form: importing one plainly means it was off.
# (Those with a destination, snprintf and kin, stay plain where its size is unknown.)
ALWAYS_FORTIFIED = frozenset(("printf", "fprintf", "vprintf", "vfprintf"))
ELF_MAGIC = b"\x7fELF"


@dataclass(frozen=True)
class ElfReport:
    """One ELF file of one package: each property's verdict ("yes", "n/a: why" or "NO: why")."""

    package: str
    path: str
    verdicts: dict[str, str] = field(default_factory=dict)

    @property
    def misses(self) -> list[str]:
        return [f"{self.package}: {self.path}: {name} {v}" for name, v in self.verdicts.items() if v.startswith("NO")]


def is_elf(path: Path) -> bool:
    if not path.is_file() or path.is_symlink():
        return False
    with path.open("rb") as handle:
        return handle.read(4) == ELF_MAGIC


def extract(package: Path, root: Path) -> Path:
    """The files of a .deb, .ddeb or .rpm under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    if package.suffix in (".deb", ".ddeb"):
        run(["dpkg-deb", "-x", package, root])
    else:
        rpm2cpio = subprocess.Popen(["rpm2cpio", str(package)], stdout=subprocess.PIPE)
        subprocess.run(["cpio", "-idm", "--quiet"], stdin=rpm2cpio.stdout, cwd=root, check=True)
        if rpm2cpio.wait() != 0:
            raise RuntimeError(f"rpm2cpio {package} failed")
    return root


def package_files(package: Path) -> list[str]:
    """The paths a package installs, "/"-rooted (files and links)."""
    if package.suffix in (".deb", ".ddeb"):
        listing = run(["dpkg-deb", "--contents", package], capture=True).stdout
        paths = []
        for line in listing.splitlines():
            parts = line.split(None, 5)
            if len(parts) == 6 and not parts[0].startswith("d"):
                paths.append("/" + parts[5].split(" -> ")[0].removeprefix("./"))
        return paths
    listing = run(["rpm", "-qlp", "--nosignature", package], capture=True).stdout
    return [line for line in listing.splitlines() if line.startswith("/")]


@dataclass(frozen=True)
class ElfFacts:
    """What readelf says of one file (parsed, pure)."""

    elf_type: str  # EXEC, DYN, REL
    interp: bool
    relro: bool
    bind_now: bool
    build_id: str
    sections: frozenset[str]
    imports: frozenset[str]


def parse_readelf(text: str) -> ElfFacts:
    """readelf -hlSdnW --dyn-syms output, read (pure)."""
    elf_type = ""
    found = re.search(r"^\s*Type:\s+(\w+)", text, re.MULTILINE)
    if found:
        elf_type = found.group(1)
    sections = frozenset(re.findall(r"^\s*\[\s*\d+\]\s+(\S+)", text, re.MULTILINE))
    flags = " ".join(re.findall(r"\((?:FLAGS|FLAGS_1)\)\s+(.*)$", text, re.MULTILINE))
    build_id = re.search(r"Build ID:\s*([0-9a-f]+)", text)
    imports = frozenset(
        m.group(1).split("@")[0]
        for m in re.finditer(r"^\s*\d+:\s+0+\s+\d+\s+\w+\s+\w+\s+\w+\s+UND\s+(\S+)", text, re.MULTILINE)
    )
    return ElfFacts(
        elf_type=elf_type,
        interp=re.search(r"^\s*INTERP\s", text, re.MULTILINE) is not None,
        relro=re.search(r"^\s*GNU_RELRO\s", text, re.MULTILINE) is not None,
        bind_now=re.search(r"\bBIND_NOW\b|\bNOW\b", flags) is not None,
        build_id=build_id.group(1) if build_id else "",
        sections=sections,
        imports=imports,
    )


def read_elf(path: Path) -> ElfFacts:
    out = run(["readelf", "-hlSdnW", "--dyn-syms", path], capture=True, check=False).stdout
    return parse_readelf(out)


def judge(facts: ElfFacts, debug_files: Iterable[str], debuglink: str = "") -> dict[str, str]:
    """Each property's verdict for one user-space ELF file (pure)."""
    shared = facts.elf_type == "DYN" and not facts.interp
    verdicts: dict[str, str] = {}
    if facts.elf_type == "DYN":
        verdicts["pie"] = "yes (shared object)" if shared else "yes"
    else:
        verdicts["pie"] = f"NO: ELF type {facts.elf_type or '?'}"
    verdicts["stack-protector"] = "yes" if "__stack_chk_fail" in facts.imports else "NO: no __stack_chk_fail import"
    checked = sorted(name for name in facts.imports if re.fullmatch(r"__\w+_chk", name) and name != "__stack_chk_fail")
    plain = sorted(ALWAYS_FORTIFIED & facts.imports)
    if plain:
        verdicts["fortify"] = f"NO: plain {', '.join(plain)}"
    elif checked:
        verdicts["fortify"] = f"yes ({len(checked)} _chk)"
    else:
        verdicts["fortify"] = "n/a: nothing fortifiable imported"
    verdicts["relro"] = "yes" if facts.relro else "NO: no GNU_RELRO"
    verdicts["bind-now"] = "yes" if facts.bind_now else "NO: lazy binding"
    verdicts["build-id"] = "yes" if facts.build_id else "NO: no .note.gnu.build-id"
    debug_sections = sorted(s for s in facts.sections if s.startswith((".debug_", ".zdebug_")))
    if ".symtab" in facts.sections or debug_sections:
        verdicts["stripped"] = f"NO: has {', '.join(['.symtab', *debug_sections][:3])}"
    else:
        verdicts["stripped"] = "yes"
    files = set(debug_files)
    by_id = f"/usr/lib/debug/.build-id/{facts.build_id[:2]}/{facts.build_id[2:]}.debug" if facts.build_id else ""
    if by_id and by_id in files:
        verdicts["debug-data"] = "yes (by build-id)"
    elif debuglink and any(Path(f).name == debuglink for f in files):
        verdicts["debug-data"] = "yes (by debuglink)"
    else:
        verdicts["debug-data"] = "NO: no debug package holds it"
    return verdicts


def debuglink_of(path: Path) -> str:
    """The file name the .gnu_debuglink section names ("" when none)."""
    # The section ends in a binary CRC: read the bytes, not text.
    raw = subprocess.run(["readelf", "-p", ".gnu_debuglink", str(path)], capture_output=True, check=False).stdout
    out = raw.decode(errors="replace")
    found = re.search(r"\]\s+(\S+\.debug)", out)
    return found.group(1) if found else ""


def check_packages(packages: Sequence[Path], debug_packages: Sequence[Path] = ()) -> list[ElfReport]:
    """One report per ELF file of each package; the debug data is looked for in `debug_packages`."""
    rpms = any(p.suffix == ".rpm" for p in [*packages, *debug_packages])
    # readelf; rpm2cpio and cpio to unpack an .rpm, rpm to list one.
    ensure_debian_packages(["binutils", *(["rpm", "rpm2cpio", "cpio"] if rpms else [])])
    debug_files = [f for d in debug_packages for f in package_files(d)]
    reports = []
    with tempfile.TemporaryDirectory(prefix="gdrkit-hardening-") as scratch:
        for number, package in enumerate(sorted(packages, key=lambda p: p.name)):
            root = extract(package, Path(scratch) / str(number))
            for path in sorted(root.rglob("*")):
                if not is_elf(path):
                    continue
                shown = "/" + str(path.relative_to(root))
                if path.suffix == ".ko" or path.name.endswith((".ko.xz", ".ko.zst")):
                    reports.append(ElfReport(package.name, shown, {"pie": "n/a: kernel module"}))
                    continue
                verdicts = judge(read_elf(path), debug_files, debuglink_of(path))
                reports.append(ElfReport(package.name, shown, verdicts))
            shutil.rmtree(root, ignore_errors=True)
    return reports


def table(reports: Iterable[ElfReport]) -> str:
    """package × ELF × property, one row per ELF file (yes / n/a / NO and why)."""
    rows: list[tuple[str, ...]] = [("package", "ELF", *PROPERTIES)]
    for report in reports:
        rows.append(
            (
                report.package,
                report.path,
                *(report.verdicts.get(name, "-").split(":")[0].split(" (")[0] for name in PROPERTIES),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def misses(reports: Iterable[ElfReport]) -> list[str]:
    return [miss for report in reports for miss in report.misses]
