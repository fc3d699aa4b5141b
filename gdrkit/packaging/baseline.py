"""Built packages against their target's baseline: the symbol versions and the requirements.

Every ELF file of a package names the glibc (GLIBC_x.y) and libgcc_s
(GCC_x.y) symbol versions it needs (`readelf -V`, the version needs
section); none may be newer than the target's.  And every requirement of
a package (`rpm -qp --requires`, `dpkg-deb -f Depends`) that names a glibc
or a Python must be met by what the target ships.  The parsers are pure;
`check_packages` reads the files.
"""

from __future__ import annotations

import functools
import re
import stat
import subprocess
import tempfile
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from gdrkit.distro.targets import Target
from gdrkit.packaging.toolchain import version_key
from gdrkit.system import die, ensure_debian_packages, run
from gdrkit.version import REPO_ROOT

# libgcc_s's newest version node on each release: that of its system
# compiler's major version (GCC_12.0.0 appeared with gcc 12); a program
# built for the target by its own compiler needs nothing newer.
LIBGCC_BASELINE = {
    "el8": "8", "el9": "11", "el10": "14", "sle15": "7",
    "bullseye": "10", "bookworm": "12", "trixie": "14", "jammy": "12", "noble": "14",
}  # fmt: skip


@functools.cache
def min_python() -> str:
    """The oldest Python the gdrcopy module and gdrcopy_doctor run on: python/pyproject.toml's requires-python."""
    spec = tomllib.loads((REPO_ROOT / "python" / "pyproject.toml").read_text())["project"]["requires-python"]
    found = re.fullmatch(r">=\s*(\d+\.\d+)", spec.strip())
    if found is None:
        raise die(f"python/pyproject.toml: requires-python {spec!r} is not '>=X.Y'", "write it as >=X.Y")
    return found[1]


_NEED = re.compile(r"Name:\s*(GLIBC|GCC)_(\d+(?:\.\d+)*)\b")


def needed_versions(readelf_v: str) -> dict[str, str]:
    """The newest GLIBC and GCC version that `readelf -V` says a file needs (pure).

    Only the version needs section counts: a library's own definitions (GDRAPI_2.0) do not.
    """
    newest: dict[str, str] = {}
    in_needs = False
    for line in readelf_v.splitlines():
        if line.startswith("Version needs section"):
            in_needs = True
            continue
        if line.startswith("Version ") and "section" in line:
            in_needs = False
            continue
        found = _NEED.search(line) if in_needs else None
        if found:
            prefix, version = found.groups()
            if prefix not in newest or version_key(version) > version_key(newest[prefix]):
                newest[prefix] = version
    return newest


def version_problems(target: Target, file: str, needed: dict[str, str]) -> list[str]:
    """What `file` needs beyond the target's glibc and libgcc_s (pure)."""
    problems = []
    limits = {"GLIBC": target.glibc, "GCC": LIBGCC_BASELINE.get(target.release, "")}
    for prefix, version in sorted(needed.items()):
        limit = limits[prefix]
        if limit and version_key(version) > version_key(limit):
            what = "glibc" if prefix == "GLIBC" else "libgcc_s (gcc)"
            problems.append(f"{file} needs {prefix}_{version}, newer than {target.name}'s {what} {limit}")
    return problems


# rpm's automatic requirement on a versioned library symbol: libc.so.6(GLIBC_2.34)(64bit).
_RPM_SYMBOL = re.compile(r"^(?:libc|libpthread|libdl|librt|libm|ld-linux[\w.-]*)\.so\.\d+\((GLIBC)_(\d+(?:\.\d+)*)\)")
_RPM_LIBGCC = re.compile(r"^libgcc_s\.so\.1\((GCC)_(\d+(?:\.\d+)*)\)")
_DEB_RELATION = re.compile(
    r"^(?P<name>[a-z0-9][a-z0-9+.-]*)(?::\w+)?\s*(?:\((?P<op><<|<=|=|>=|>>)\s*(?P<ver>[^)]+)\))?$"
)


def requirement_problems(target: Target, package: str, requirements: Sequence[str]) -> list[str]:
    """The requirements of one package that its target cannot meet (pure).

    Checked: versioned glibc and libgcc_s symbols and libc6 (>= x);
    every Python relation (python(abi), python3.X, python311, /usr/bin/python3.X,
    python3 (>= x)) against the Python the target ships for our packages.
    """
    problems = []
    python = target.python
    # The release's python3 counts only where it runs our Python parts (EL8's and SLE 15's 3.6 does not).
    default_runs = version_key(target.default_python) >= version_key(min_python())
    pythons = {python.version} | ({target.default_python} if default_runs else set())
    interpreters = {python.interpreter} | ({"/usr/bin/python3"} if default_runs else set())
    for item in requirements:
        item = item.strip()
        symbol = _RPM_SYMBOL.match(item) or _RPM_LIBGCC.match(item)
        if symbol:
            problems += version_problems(target, f"{package} requires {item}:", {symbol[1]: symbol[2]})
            continue
        if item.startswith("python(abi)"):
            wanted = item.split("=", 1)[1].strip() if "=" in item else ""
            if wanted not in pythons:
                problems.append(f"{package} requires {item}; {target.name} has Python {', '.join(sorted(pythons))}")
            continue
        if item.startswith("/usr/bin/python"):
            if item not in interpreters:
                problems.append(f"{package} requires {item}; {target.name}'s are {', '.join(sorted(interpreters))}")
            continue
        if target.package_type == "rpm" and re.fullmatch(r"python3?\.?\d+", item):
            if item != python.package:
                problems.append(f"{package} requires {item}; {target.name} ships {python.package} for it")
            continue
        relation = _DEB_RELATION.match(item) if target.package_type == "deb" else None
        if relation and relation["ver"] and relation["op"] in (">=", ">>"):
            limit = {"libc6": target.glibc, "python3": target.default_python}.get(relation["name"], "")
            version = relation["ver"].strip().split("~")[0].split("-")[0]
            if limit and version_key(version) > version_key(limit):
                problems.append(f"{package} requires {item}; {target.name} has {relation['name']} {limit}")
    return problems


def split_depends(field: str) -> list[str]:
    """A Depends field as single relations; of each `a | b` only the first (pure)."""
    return [part.split("|")[0].strip() for part in field.split(",") if part.strip()]


@dataclass(frozen=True)
class PackageReport:
    """One built package against its target: the row of the closing table, and its problems."""

    target: str
    file: str
    newest_glibc: str  # "" when it holds no ELF file that needs one
    target_glibc: str
    python: str  # its Python requirements, as written
    problems: tuple[str, ...]


def newc_files(archive: bytes) -> Iterator[tuple[str, int, bytes]]:
    """The members of a cpio archive of the "newc" format (rpm2cpio's): (path, mode, data) (pure).

    Read here so that the check needs no cpio program (minimal RPM images lack it).
    """
    offset = 0
    while offset + 110 <= len(archive):
        header = archive[offset : offset + 110]
        if header[:6] not in (b"070701", b"070702"):
            raise ValueError(f"not a newc cpio header at byte {offset}")
        fields = [int(header[6 + 8 * i : 14 + 8 * i], 16) for i in range(13)]
        mode, size, name_size = fields[1], fields[6], fields[11]
        name_start = offset + 110
        name = archive[name_start : name_start + name_size - 1].decode()
        data_start = (name_start + name_size + 3) & ~3
        if name == "TRAILER!!!":
            return
        yield name, mode, archive[data_start : data_start + size]
        offset = (data_start + size + 3) & ~3


def _extract(path: Path, into: Path) -> None:
    if path.suffix == ".deb":
        run(["dpkg-deb", "-x", path, into])
        return
    archive = subprocess.run(["rpm2cpio", str(path)], capture_output=True, check=True).stdout
    for name, mode, data in newc_files(archive):
        if stat.S_ISREG(mode):
            target = into / name.lstrip("./")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)


def _elf_files(root: Path) -> list[Path]:
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as handle:
                if handle.read(4) == b"\x7fELF":
                    found.append(path)
    return found


def requirements_of(path: Path) -> list[str]:
    """What a package file requires: `rpm -qp --requires`, or the Depends and Pre-Depends of a .deb."""
    if path.suffix == ".deb":
        fields = run(["dpkg-deb", "-f", path, "Depends", "Pre-Depends"], capture=True).stdout
        text = " ".join(line.split(":", 1)[1] for line in fields.splitlines() if ":" in line)
        return split_depends(text)
    out = run(["rpm", "-qp", "--nosignature", "--requires", path], capture=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip() and not line.startswith("rpmlib(")]


def check_package(target: Target, path: Path) -> PackageReport:
    """Read one package file: its ELF files' needed versions and its requirements."""
    problems: list[str] = []
    newest_glibc = ""
    with tempfile.TemporaryDirectory(prefix="gdrkit-baseline-") as tmp:
        root = Path(tmp)
        _extract(path, root)
        for elf in _elf_files(root):
            out = run(["readelf", "-V", "--wide", elf], capture=True).stdout
            needed = needed_versions(out)
            glibc = needed.get("GLIBC", "")
            if glibc and (not newest_glibc or version_key(glibc) > version_key(newest_glibc)):
                newest_glibc = glibc
            problems += version_problems(target, f"{path.name}: /{elf.relative_to(root)}", needed)
    requirements = requirements_of(path)
    problems += requirement_problems(target, path.name, requirements)
    python = list(dict.fromkeys(r for r in requirements if r.startswith(("python", "/usr/bin/python"))))
    return PackageReport(target.name, path.name, newest_glibc, target.glibc, ", ".join(python) or "-", tuple(problems))


def check_packages(target: Target, paths: Iterable[Path]) -> list[PackageReport]:
    paths = list(paths)
    rpms = any(p.suffix == ".rpm" for p in paths)
    # readelf reads the versions; rpm2cpio unpacks an .rpm and rpm lists its requirements.
    ensure_debian_packages(["binutils", *(["rpm", "rpm2cpio"] if rpms else [])])
    return [check_package(target, path) for path in paths]


def table(reports: Iterable[PackageReport]) -> str:
    """The closing table: target, package file, newest glibc needed vs the target's, Python requirement."""
    header = ("target", "package file", "needs glibc", "target glibc", "python requirement", "ok")
    rows = [
        (r.target, r.file, r.newest_glibc or "-", r.target_glibc, r.python, "yes" if not r.problems else "NO")
        for r in reports
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
