"""What doctor knows about distributions and this release, as data.

Doctor runs in two places: `./toolkit doctor` in this tree, and
`gdrcopy_doctor` installed on nodes by the packages, where neither gdrkit's
distro registry nor the version header exists.  Both run the same modules
(this one, probe.py, doctor.py, cli.py: the standard library only, relative
imports); the facts doctor needs from the registry and the version header
travel with the packages as facts.json, written by the package build from
`gdrkit.packaging.doctor_facts.registry_facts()` (the registry is their one
home).  In the tree the registry hands them over (`provide`): this package
imports nothing else of gdrkit, so what runs on nodes is what runs here.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

# Next to this module in the packaged copy; absent in the source tree.
FACTS_FILE = "facts.json"

# Where the facts come from without a facts.json: set by the tree's registry (provide).
_provider: list[Callable[[], Facts]] = []


def parse_os_release(text: str) -> dict[str, str]:
    """The fields of an /etc/os-release file's text (pure)."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            fields[key.strip()] = value.strip().strip("\"'")
    return fields


def format_install_hint(hint_install: str, packages: Iterable[str]) -> str:
    """`hint_install` followed by the packages, each quoted for a shell (pure)."""
    return f"{hint_install} {' '.join(shlex.quote(p) for p in packages)}"


@dataclass(frozen=True)
class FamilyFacts:
    name: str
    os_ids: tuple[str, ...]
    # The package of kernel `{kver}`'s headers, and what a person types to install packages.
    kernel_headers_package: str
    hint_install: str
    # This release's packages on the family: the one with libgdrapi.so and
    # libgdrapi.so.2 (libgdrapi, gdrcopy), the DKMS module package and the
    # prebuilt module package of kernel `{kver}`.
    runtime_package: str
    module_package: str
    prebuilt_module_package: str


@dataclass(frozen=True)
class Facts:
    api_version: str  # MAJOR.MINOR that gdrdrv and libgdrapi of this release report
    families: tuple[FamilyFacts, ...]

    def family(self, os_release: Mapping[str, str]) -> FamilyFacts | None:
        """The family of a host described by its /etc/os-release fields (ID, then ID_LIKE)."""
        for os_id in [os_release.get("ID", "")] + os_release.get("ID_LIKE", "").split():
            for fam in self.families:
                if os_id in fam.os_ids:
                    return fam
        return None

    def install_hint(self, os_release_text: str, packages: Iterable[str], fallback: str = "install") -> str:
        fam = self.family(parse_os_release(os_release_text))
        if fam is None:
            return f"{fallback} {' '.join(packages)}"
        return format_install_hint(fam.hint_install, packages)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Facts:
        data = json.loads(text)
        families = tuple(
            FamilyFacts(
                f["name"],
                tuple(f["os_ids"]),
                f["kernel_headers_package"],
                f["hint_install"],
                f["runtime_package"],
                f["module_package"],
                f["prebuilt_module_package"],
            )
            for f in data["families"]
        )
        return cls(str(data["api_version"]), families)


def provide(source: Callable[[], Facts]) -> None:
    """Take the facts from source where no facts.json lies beside this module (the source tree)."""
    _provider[:] = [source]


def current() -> Facts:
    """The packaged facts.json, or in the source tree those the registry provided."""
    path = Path(__file__).with_name(FACTS_FILE)
    if path.exists():
        return Facts.from_json(path.read_text(encoding="utf-8"))
    if not _provider:
        raise RuntimeError(
            f"no {FACTS_FILE} beside {Path(__file__).parent} and no registry provided the facts: reinstall the"
            " package that ships gdrcopy_doctor, or in the source tree import gdrkit.packaging.doctor_facts first"
        )
    return _provider[0]()
