"""What a publish run is given, what the repository holds, and the plan between them (pure).

A repository directory keeps its own record, `published.json`: for every
release, the package files it took (name, version, architecture, the
SHA-256 of the file as given).  The plan compares the files of dist/ with
that record, per release and package name:

  * the same version with the same content: already there (re-publishing is
    idempotent: nothing is written);
  * the same version with other content: refused, a published version never
    changes under the users' feet;
  * a lower version than the newest one held: refused, users would not get it;
  * anything else: added.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gdrkit.publish.versions import compare

RECORD = "published.json"
RECORD_FORMAT = 1
KINDS = ("deb", "rpm")


@dataclass(frozen=True)
class PackageFile:
    """One package file: its identity as the package manager sees it, and its content's hash."""

    kind: str  # "deb" or "rpm"
    name: str
    version: str  # deb: [epoch:]upstream[-revision]; rpm: [epoch:]version-release
    arch: str
    sha256: str
    path: Path | None = None  # where it was read from (not recorded)

    @property
    def filename(self) -> str:
        return self.path.name if self.path is not None else f"{self.name}_{self.version}_{self.arch}.{self.kind}"

    def as_record(self) -> dict[str, str]:
        return {
            "name": self.name,
            "version": self.version,
            "arch": self.arch,
            "sha256": self.sha256,
            "file": self.filename,
        }


@dataclass(frozen=True)
class Target:
    """A repository of one release: kind "deb" with a Debian/Ubuntu codename, or "rpm" with a release name (el9, sle15)."""

    kind: str
    release: str

    def __str__(self) -> str:
        return f"{'apt' if self.kind == 'deb' else 'rpm'} {self.release}"


@dataclass(frozen=True)
class Record:
    """What the repository holds: per target, the package files it took."""

    held: Mapping[Target, tuple[PackageFile, ...]] = field(default_factory=dict)

    def newest(self, target: Target, name: str, arch: str) -> PackageFile | None:
        best: PackageFile | None = None
        for package in self.held.get(target, ()):
            if package.name == name and package.arch == arch:
                if best is None or compare(target.kind, package.version, best.version) > 0:
                    best = package
        return best

    def find(self, target: Target, name: str, version: str, arch: str) -> PackageFile | None:
        for package in self.held.get(target, ()):
            if (package.name, package.version, package.arch) == (name, version, arch):
                return package
        return None

    def with_added(self, target: Target, added: Iterable[PackageFile]) -> Record:
        held = dict(self.held)
        held[target] = tuple(held.get(target, ())) + tuple(added)
        return Record(held)

    def to_json(self) -> str:
        data: dict[str, Any] = {"format": RECORD_FORMAT, "repositories": []}
        for target in sorted(self.held, key=lambda t: (t.kind, t.release)):
            packages = sorted(self.held[target], key=lambda p: (p.name, p.arch, p.version))
            data["repositories"].append(
                {"kind": target.kind, "release": target.release, "packages": [p.as_record() for p in packages]}
            )
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str = RECORD) -> Record:
        try:
            data = json.loads(text)
            if data.get("format") != RECORD_FORMAT:
                raise ValueError(f"format {data.get('format')!r}, expected {RECORD_FORMAT}")
            held: dict[Target, tuple[PackageFile, ...]] = {}
            for repo in data["repositories"]:
                target = Target(str(repo["kind"]), str(repo["release"]))
                held[target] = tuple(
                    PackageFile(target.kind, p["name"], p["version"], p["arch"], p["sha256"], Path(p["file"]))
                    for p in repo["packages"]
                )
            return cls(held)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ValueError(f"{where} is not a publish record ({error})") from error


@dataclass(frozen=True)
class Refusal:
    package: PackageFile
    target: Target
    reason: str


@dataclass(frozen=True)
class TargetPlan:
    target: Target
    add: tuple[PackageFile, ...]
    present: tuple[PackageFile, ...]


@dataclass(frozen=True)
class Plan:
    targets: tuple[TargetPlan, ...]
    refused: tuple[Refusal, ...]

    @property
    def changes(self) -> bool:
        return any(t.add for t in self.targets)

    def lines(self) -> list[str]:
        """What the plan does, one line per repository and package, for --dry-run and the log."""
        out = []
        for tp in self.targets:
            for package in tp.add:
                out.append(f"{tp.target}: add {package.name} {package.version} ({package.arch})")
            for package in tp.present:
                out.append(f"{tp.target}: already holds {package.name} {package.version} ({package.arch}): unchanged")
        for refusal in self.refused:
            out.append(f"{refusal.target}: REFUSED {refusal.package.name} {refusal.package.version}: {refusal.reason}")
        return out


def plan(inputs: Mapping[Target, Sequence[PackageFile]], record: Record) -> Plan:
    """Decide, for every given file, add / already present / refused (see the module's docstring)."""
    targets = []
    refused = []
    for target in sorted(inputs, key=lambda t: (t.kind, t.release)):
        add, present = [], []
        for package in inputs[target]:
            same = record.find(target, package.name, package.version, package.arch)
            newest = record.newest(target, package.name, package.arch)
            if same is not None and same.sha256 == package.sha256:
                present.append(package)
            elif same is not None:
                refused.append(
                    Refusal(
                        package,
                        target,
                        (
                            f"the repository already holds this version with other content ({same.filename}); "
                            "a published version never changes: raise the package release and build again"
                        ),
                    )
                )
            elif newest is not None and compare(target.kind, package.version, newest.version) < 0:
                refused.append(
                    Refusal(
                        package,
                        target,
                        (
                            f"lower than {newest.version}, which the repository already holds; users would never get it: "
                            "publish a higher version, or into another --output"
                        ),
                    )
                )
            else:
                add.append(package)
        targets.append(TargetPlan(target, tuple(add), tuple(present)))
    return Plan(tuple(targets), tuple(refused))


def releases_in(directory: Path, known: Iterable[str]) -> dict[str, Path]:
    """The subdirectories of `directory` named after a release in `known` (dist/<release>/ layouts)."""
    names = set(known)
    if not directory.is_dir():
        return {}
    return {p.name: p for p in sorted(directory.iterdir()) if p.is_dir() and p.name in names}
