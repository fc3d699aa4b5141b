"""Doctor's facts (gdrkit.host.facts) taken from their homes: the distro registry and the version header."""

from __future__ import annotations

from gdrkit import version
from gdrkit.distro import families
from gdrkit.host.facts import Facts, FamilyFacts


def registry_facts() -> Facts:
    fams = tuple(
        FamilyFacts(cls.name, tuple(cls.os_ids), cls.kernel_headers_package, cls.hint_install)
        for cls in families.Family.registry.values()
    )
    return Facts(version.api_version(), fams)
