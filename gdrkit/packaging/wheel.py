"""The gdrcopy Python package as a py3-none-any wheel, from one git commit.

A wheel is a zip of the module's files plus a .dist-info directory
(METADATA, WHEEL, RECORD); writing it here needs no build backend and no
network.  METADATA is rendered from templates/python/METADATA.j2 with the
package description (packages/gdrcopy.yaml).  Reproducible: the files are the
commit's, in sorted order, with the commit's time and fixed modes.
"""

from __future__ import annotations

import base64
import hashlib
import time
import zipfile
from pathlib import Path

from gdrkit import version
from gdrkit.packaging import model, render
from gdrkit.packaging.build import Source
from gdrkit.system import die, run

TAG = "py3-none-any"


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def metadata(description: model.Description, package_version: str) -> str:
    """The METADATA file's text (pure)."""
    python = description.python
    values = {"lib_major": str(version.MAJOR)}
    return (
        render.environment()
        .get_template("python/METADATA.j2")
        .render(
            python=python,
            project=description.project,
            version=package_version,
            description=model.fill(python.description, values).strip(),
        )
    )


def module_files(source: Source, source_dir: str) -> dict[str, bytes]:
    """The module's files at the commit: path inside the wheel -> content."""
    listing = run(
        ["git", "-C", source.repo, "ls-tree", "-r", "--name-only", source.commit, "--", source_dir], capture=True
    ).stdout.split()
    if not listing:
        raise die(f"{source_dir} has no files at {source.commit[:12]}", "commit the Python package first")
    parent = str(Path(source_dir).parent)
    files = {}
    for path in listing:
        # Text files only (Python sources and the empty py.typed marker).
        blob = run(["git", "-C", source.repo, "cat-file", "blob", f"{source.commit}:{path}"], capture=True).stdout
        files[str(Path(path).relative_to(parent))] = blob.encode()
    return files


def build_wheel(source: Source, output: Path, description: model.Description | None = None) -> Path:
    desc = description or model.load()
    name, ver = desc.python.name, version.VERSION
    files = module_files(source, desc.python.source_dir)
    if f"{name}/_version.py" in files:
        # The wheel's version is the project's, whatever the committed file says.
        files[f"{name}/_version.py"] = f'__version__ = "{ver}"\n'.encode()
    info = f"{name}-{ver}.dist-info"
    files[f"{info}/METADATA"] = metadata(desc, ver).encode()
    files[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: gdrkit {ver}\nRoot-Is-Purelib: true\nTag: {TAG}\n"
    ).encode()
    files[f"{info}/top_level.txt"] = f"{name}\n".encode()
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in sorted(files.items()))
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()

    output.mkdir(parents=True, exist_ok=True)
    wheel = output / f"{name}-{ver}-{TAG}.whl"
    # Zip times cannot be before 1980.
    stamp = time.gmtime(max(source.epoch, 315532800))[:6]
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        # RECORD last, as installers expect; everything else sorted.
        for path in sorted(files, key=lambda p: (p.endswith("/RECORD"), p)):
            entry = zipfile.ZipInfo(path, date_time=stamp)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, files[path])
    return wheel
