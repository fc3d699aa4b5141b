"""A minimal source tree with the real tree's make targets, for packaging tests.

The packaging pipeline (stage, dpkg-buildpackage, rpmbuild, lintian, DKMS in
a container) must be testable on its own, whatever state the C parts are in.
`make_tree()` writes a git repository of tests/packaging/fixture/'s files
and the headers, library and map made from the version and symbols.  Its
top-level Makefile has the same targets and variables as ours (lib, exes, install, driver, driver_install,
clean), a real (trivial) gdrdrv kernel module that includes its headers the
way gdrdrv's Kbuild does, a library exporting exactly the symbols of
libgdrapi/libgdrapi.symbols with their version nodes, and test programs that link
libcuda.so.1 (from a stub), so the libcuda dependency exclusion is exercised.
"""

from __future__ import annotations

from pathlib import Path

from gdrkit.system import run
from gdrkit.version import REPO_ROOT

REPO_SYMBOLS = REPO_ROOT / "libgdrapi" / "libgdrapi.symbols"

# The files that are the same in every fixture tree (Makefiles, module and program sources).
FILES = REPO_ROOT / "tests" / "packaging" / "fixture"


def make_tree(root: Path, version: str = "", symbols_file: Path = REPO_SYMBOLS) -> Path:
    """Write the fixture repository at `root` and commit it; returns root."""
    from gdrkit import version as project_version

    major, minor, patch = (version or project_version.VERSION).split(".")
    files: dict[str, str] = {
        path.relative_to(FILES).as_posix(): path.read_text() for path in sorted(FILES.rglob("*")) if path.is_file()
    }
    files |= {
        "include/gdrcopy_version.h": (
            f"#define GDRCOPY_VERSION_MAJOR {major}\n"
            f"#define GDRCOPY_VERSION_MINOR {minor}\n"
            f"#define GDRCOPY_VERSION_PATCH {patch}\n"
        ),
        "packages/README.md": (REPO_ROOT / "packages" / "README.md").read_text(),
    }
    # The real man pages: the packages' lint judges them.
    files |= {f"man/{page.name}": page.read_text() for page in sorted((REPO_ROOT / "man").glob("*.1"))}
    # The library's ABI, from its own Debian symbols file.
    symbols_text = symbols_file.read_text()
    files["libgdrapi/libgdrapi.symbols"] = symbols_text
    header = ["void gdr_runtime_get_version(int *major, int *minor);"]
    # It calls into libc, as the real library does: Zig's linker (the RPMs'
    # baseline toolchain) drops a libc the code never calls, and rpmlint
    # refuses a shared library that then needs nothing.
    body = [
        "void gdr_runtime_get_version(int *major, int *minor)"
        f' {{ *major = getenv("GDRCOPY_FIXTURE_UNSET") ? 0 : {major}; *minor = {minor}; }}'
    ]
    nodes: dict[str, list[str]] = {}
    for line in symbols_text.splitlines():
        if not line.startswith(" ") or "@" not in line:
            continue
        name, node = line.split()[0].split("@")
        if name == node:
            continue  # the version node itself
        if node != "Base":
            nodes.setdefault(node, []).append(name)
        if name != "gdr_runtime_get_version":
            header.append(f"int {name}(void);")
            body.append(f"int {name}(void) {{ return 0; }}")
    files["include/gdrapi.h"] = "\n".join(header) + "\n"
    files["lib.c"] = '#include <stdlib.h>\n#include "include/gdrapi.h"\n' + "\n".join(body) + "\n"
    # Base symbols stay unversioned, as in the real library; later nodes chain.
    stanzas = []
    previous = ""
    for node, names in nodes.items():
        exported = "".join(f"\t\t{name};\n" for name in names)
        stanzas.append(f"{node} {{\n\tglobal:\n{exported}}}{(' ' + previous) if previous else ''};\n")
        previous = node
    files["lib.map"] = "".join(stanzas) or "{ global: *; };\n"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    run(["git", "init", "-q", root])
    run(["git", "-C", root, "add", "-A"])
    env = {
        "GIT_AUTHOR_NAME": "fixture",
        "GIT_AUTHOR_EMAIL": "fixture@example.org",
        "GIT_COMMITTER_NAME": "fixture",
        "GIT_COMMITTER_EMAIL": "fixture@example.org",
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }
    run(["git", "-C", root, "commit", "-q", "-m", "fixture"], env=env)
    return root
