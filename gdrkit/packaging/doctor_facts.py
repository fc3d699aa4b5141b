"""Doctor's facts (gdrkit.gdrcopy_doctor.facts) taken from their homes: the distro registry, the package description and the version header.

Importing this module hands them to the doctor of the source tree (the
packages write them to facts.json instead): the doctor, at the bottom
floor, never imports the registry.
"""

from __future__ import annotations

from gdrkit import version
from gdrkit.distro import families
from gdrkit.gdrcopy_doctor import facts
from gdrkit.gdrcopy_doctor.facts import Facts, FamilyFacts
from gdrkit.packaging import model


def registry_facts() -> Facts:
    description = model.load()
    fams = tuple(
        FamilyFacts(
            cls.name,
            tuple(cls.os_ids),
            cls.kernel_headers_package,
            cls.hint_install,
            description.runtime_package(cls.package_type),
            description.package_of_kind(cls.package_type, "dkms"),
            # The description writes the kernel as {kver}, as kernel_headers_package does.
            description.package_of_kind(cls.package_type, "kmod"),
        )
        for cls in families.Family.registry.values()
    )
    return Facts(version.api_version(), fams)


facts.provide(registry_facts)
