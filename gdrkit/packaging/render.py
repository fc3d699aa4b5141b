"""Render every packaging file of a Plan from templates/ (Jinja2).

`render(plan)` returns the files as data (path -> text and mode); writing
them is `write()`.  Undefined template variables are errors (StrictUndefined),
and nothing is post-processed after rendering.
"""

from __future__ import annotations

import hashlib

import email.utils
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from gdrkit.gdrcopy_doctor import facts
from gdrkit.gdrcopy_doctor.consumers import NODE_CONFIG
from gdrkit.packaging.doctor_facts import registry_facts
from gdrkit.packaging.model import Package, Plan
from gdrkit import version
from gdrkit.packaging.toolchain import HARDENING_FLAGS
from gdrkit.version import REPO_ROOT

TEMPLATE_DIR = REPO_ROOT / "templates"
# GDRCopy's service script (RPM packages), run by gdrcopy.service.
GDRCOPY_SERVICE_SCRIPT = "/usr/libexec/gdrcopy/gdrcopy"
# The installed doctor: the program, and the package its modules (gdrkit/gdrcopy_doctor) form under doctordir.
DOCTOR_PROGRAM = "gdrcopy_doctor"
DOCTOR_PACKAGE = "gdrcopy_doctor"
LINTIAN_OVERRIDES_DIR = "/usr/share/lintian/overrides/"


@dataclass(frozen=True)
class RenderedFile:
    text: str
    mode: int = 0o644


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def _context(plan: Plan) -> dict[str, Any]:
    epoch = plan.source_date_epoch
    main = [p for p in plan.packages if p.name == plan.project.source]
    return {
        "project": plan.project,
        "module": plan.kernel_module,
        "node": plan.description.device_node,
        "family": plan.family,
        "version": plan.version,
        "full_version": plan.full_version,
        "package_version": plan.package_version,
        "package_mark": version.PACKAGE_MARK,
        "release": plan.release,
        "packages": plan.packages,
        "main": main[0] if main else None,
        "subpackages": [p for p in plan.packages if p.name != plan.project.source],
        "kernels": plan.kernels,
        "device_mode": plan.device_mode,
        "device_group": plan.device_group,
        "lib_major": plan.lib_major,
        "changelog_entry": plan.project.changelog.format(version=plan.version),
        "changelog_date": (
            email.utils.formatdate(epoch, usegmt=False).replace("-0000", "+0000")
            if plan.package_type == "deb"
            else time.strftime("%a %b %d %Y", time.gmtime(epoch))
        ),
        "copyright_year": time.strftime("%Y", time.gmtime(epoch)),
        "mit_text": (TEMPLATE_DIR / "licenses" / "MIT.txt").read_text(),
        "doctor_package": DOCTOR_PACKAGE,
        "hardening_flags": HARDENING_FLAGS,
    }


def _deb_install_lines(plan: Plan, package: Package) -> list[str]:
    """debian/<pkg>.install: the package's contents, relative to debian/tmp."""
    lines = []
    for path in package.contents:
        if path.startswith(plan.family.docdir + "/"):
            continue  # dh_installdocs writes copyright and changelog there
        if path.startswith(LINTIAN_OVERRIDES_DIR):
            continue  # dh_lintian installs debian/<package>.lintian-overrides there
        lines.append(path.lstrip("/").rstrip("/"))
    return lines


def system_files(plan: Plan) -> dict[str, RenderedFile]:
    """The files installed on the target host, under pkgroot/ of the build tree."""
    env = environment()
    ctx = _context(plan)
    fam = plan.family
    files = {
        f"pkgroot{fam.unitdir}/gdrdrv.service": "system/gdrdrv.service.j2",
        f"pkgroot{fam.udevrulesdir}/60-gdrdrv.rules": "system/udev.rules.j2",
        f"pkgroot{fam.modprobedir}/gdrdrv.conf": "system/modprobe.conf.j2",
        "pkgroot/etc/cdi/gdrcopy.yaml": "system/cdi.yaml.j2",
        # libgdrapi's node settings (allow_vulkan = no): a conffile, /etc being
        # conffiles to dh_installdeb and %config(noreplace) in the spec.
        f"pkgroot{NODE_CONFIG}": "system/gdrcopy.conf.j2",
    }
    if plan.with_dkms:
        files[f"pkgroot{plan.dkms_src}/dkms.conf"] = "dkms.conf.j2"
    # gdrcopy_doctor: its launcher here, its modules from `make doctor_install`.
    files[f"pkgroot{fam.bindir}/{DOCTOR_PROGRAM}"] = "system/gdrcopy_doctor.j2"
    executables = {f"pkgroot{fam.bindir}/{DOCTOR_PROGRAM}"}
    if plan.package_type == "rpm":
        # The unit and service script of GDRCopy's RPMs, at their paths
        # (`systemctl enable gdrcopy`, `/usr/libexec/gdrcopy/gdrcopy start`).
        files[f"pkgroot{fam.unitdir}/gdrcopy.service"] = "system/gdrcopy.service.j2"
        files[f"pkgroot{GDRCOPY_SERVICE_SCRIPT}"] = "system/gdrcopy.sh.j2"
        executables.add(f"pkgroot{GDRCOPY_SERVICE_SCRIPT}")
    out = {
        path: RenderedFile(env.get_template(name).render(ctx), 0o755 if path in executables else 0o644)
        for path, name in files.items()
    }
    # What doctor knows of the distributions and this release, from their homes (data, not a template).
    out[f"pkgroot{fam.doctordir}/{DOCTOR_PACKAGE}/{facts.FACTS_FILE}"] = doctor_facts_file()
    return out


def doctor_facts_file() -> RenderedFile:
    """The installed doctor's facts.json, from the registry, the description and the version header."""
    return RenderedFile(registry_facts().to_json())


def doctor_launcher(interpreter: str, doctordir: str) -> RenderedFile:
    """The gdrcopy_doctor program that runs the doctor's modules installed under doctordir (`make install`'s;
    the packages render the same template with their family's interpreter and directory)."""
    family = {"python_interpreter": interpreter, "doctordir": doctordir}
    text = environment().get_template("system/gdrcopy_doctor.j2").render(family=family, doctor_package=DOCTOR_PACKAGE)
    return RenderedFile(text, 0o755)


def render(plan: Plan) -> dict[str, RenderedFile]:
    """Every rendered file of a build tree for `plan`, by relative path."""
    env = environment()
    ctx = _context(plan)
    out = system_files(plan)
    for name, path in plan.family.templates.items():
        mode = 0o755 if path == "debian/rules" else 0o644
        out[path] = RenderedFile(env.get_template(name).render(ctx), mode)
    if plan.package_type == "deb":
        runtime = plan.description.runtime_package("deb")
        for package in plan.packages:
            pctx = dict(ctx, package=package, kver=package.kver)
            if package.name == runtime:
                out[f"debian/{package.name}.lintian-overrides"] = RenderedFile(
                    env.get_template("debian/runtime.lintian-overrides.j2").render(pctx)
                )
            lines = _deb_install_lines(plan, package)
            if lines:
                install = env.get_template("debian/install.j2").render(pctx, paths=lines)
                out[f"debian/{package.name}.install"] = RenderedFile(install)
            scripts: dict[str, str] = {}
            # The postrm removes the CDI spec when NVIDIA's package replaces ours, if unchanged.
            cdi = out.get("pkgroot/etc/cdi/gdrcopy.yaml")
            pctx["cdi_md5"] = hashlib.md5(cdi.text.encode()).hexdigest() if cdi else ""
            if package.kind == "dkms":
                scripts = {
                    "preinst": "debian/dkms.preinst.j2",
                    "postinst": "debian/dkms.postinst.j2",
                    "prerm": "debian/dkms.prerm.j2",
                    "postrm": "debian/dkms.postrm.j2",
                }
            elif package.kind == "kmod":
                scripts = {"postinst": "debian/kmod.postinst.j2", "postrm": "debian/kmod.postrm.j2"}
            for script, name in scripts.items():
                out[f"debian/{package.name}.{script}"] = RenderedFile(env.get_template(name).render(pctx), 0o755)
            if package.kind == "dkms":
                out[f"debian/{package.name}.triggers"] = RenderedFile(
                    env.get_template("debian/dkms.triggers.j2").render(pctx)
                )
                # What changes for the admin when NVIDIA's packages are replaced (apt-listchanges).
                out[f"debian/{package.name}.NEWS"] = RenderedFile(env.get_template("debian/dkms.NEWS.j2").render(pctx))
    else:
        out["pkgdoc/LICENSE"] = RenderedFile(ctx["mit_text"])
    return out


def write(files: dict[str, RenderedFile], root: Path) -> None:
    for rel, rendered in sorted(files.items()):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rendered.text)
        path.chmod(rendered.mode)
