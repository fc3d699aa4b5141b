"""A minimal source tree with the real tree's make targets, for packaging tests.

The packaging pipeline (stage, dpkg-buildpackage, rpmbuild, lintian, DKMS in
a container) must be testable on its own, whatever state the C parts are in.
`make_tree()` writes a git repository whose top-level Makefile has the same
targets and variables as ours (lib, exes, install, driver, driver_install,
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

_TOP_MAKEFILE = """\
prefix ?= /usr/local
libdir ?= $(prefix)/lib
bindir ?= $(prefix)/bin
includedir ?= $(prefix)/include
DESTDIR ?=
KVER ?= $(shell uname -r)
KDIR ?= /lib/modules/$(KVER)/build
modulesdir ?= /lib/modules
CFLAGS ?= -O2
PROGS = gdrcopy_sanity gdrcopy_copybw gdrcopy_copylat gdrcopy_apiperf gdrcopy_pplat

all: lib exes
lib: libgdrapi.so.2.6
libgdrapi.so.2.6: lib.c lib.map
\t$(CC) $(CFLAGS) $(CPPFLAGS) $(LDFLAGS) -shared -fPIC -Wl,-soname,libgdrapi.so.2 \\
\t\t-Wl,--version-script=lib.map -o $@ lib.c -Wl,--no-as-needed -lc
\tln -sf libgdrapi.so.2.6 libgdrapi.so.2
\tln -sf libgdrapi.so.2 libgdrapi.so
libcuda.so.1: cuda.c
\t$(CC) $(CFLAGS) -shared -fPIC -Wl,-soname,libcuda.so.1 -o $@ cuda.c
\tln -sf libcuda.so.1 libcuda.so
exes: lib libcuda.so.1
\tfor p in $(PROGS); do $(CC) $(CFLAGS) $(CPPFLAGS) $(LDFLAGS) -Iinclude -o $$p prog.c \\
\t\t-L. -lgdrapi -lcuda || exit 1; done
install: lib exes
\tinstall -d $(DESTDIR)$(libdir)/pkgconfig $(DESTDIR)$(libdir)/cmake/gdrapi \\
\t\t$(DESTDIR)$(includedir) $(DESTDIR)$(bindir)
\tinstall -m 755 libgdrapi.so.2.6 $(DESTDIR)$(libdir)/
\tln -sf libgdrapi.so.2.6 $(DESTDIR)$(libdir)/libgdrapi.so.2
\tln -sf libgdrapi.so.2 $(DESTDIR)$(libdir)/libgdrapi.so
\tinstall -m 644 include/gdrapi.h $(DESTDIR)$(includedir)/
\tprintf 'libdir=%s\\nName: gdrapi\\nDescription: fixture\\nVersion: 2.6.1\\nLibs: -L$${libdir} -lgdrapi\\n' \\
\t\t'$(libdir)' > $(DESTDIR)$(libdir)/pkgconfig/gdrapi.pc
\techo 'set(gdrapi_FOUND TRUE)' > $(DESTDIR)$(libdir)/cmake/gdrapi/gdrapiConfig.cmake
\tinstall -m 755 $(PROGS) $(DESTDIR)$(bindir)/
\tfor p in apiperf copybw copylat sanity; do ln -sf gdrcopy_$$p $(DESTDIR)$(bindir)/$$p; done
driver:
\t$(MAKE) -C gdrdrv KVER=$(KVER) KDIR=$(KDIR)
driver_install: driver
\t$(MAKE) -C gdrdrv install KVER=$(KVER) KDIR=$(KDIR) DESTDIR=$(DESTDIR) MODULE_SUBDIR=$(MODULE_SUBDIR) modulesdir=$(modulesdir)
clean:
\trm -f libgdrapi.so* libcuda.so* $(PROGS)
\t$(MAKE) -C gdrdrv clean KVER=$(KVER) KDIR=$(KDIR) || true
.PHONY: all lib exes install driver driver_install clean
"""

_DRIVER_MAKEFILE = """\
KVER ?= $(shell uname -r)
KDIR ?= /lib/modules/$(KVER)/build
MODULE_SUBDIR ?= /extra
modulesdir ?= /lib/modules
all:
\t$(MAKE) -C $(KDIR) M=$(CURDIR) modules
install:
\tinstall -D -m 644 gdrdrv.ko $(DESTDIR)$(modulesdir)/$(KVER)$(MODULE_SUBDIR)/gdrdrv.ko
clean:
\t$(MAKE) -C $(KDIR) M=$(CURDIR) clean
"""

_DRIVER_KBUILD = """\
obj-m := gdrdrv.o
ccflags-y += -I$(src)/include -I$(src)/../include
"""

_DRIVER_C = """\
// SPDX-License-Identifier: MIT OR GPL-2.0-only
/* Packaging-test fixture: a module that only proves it was built and loaded. */
#include <linux/module.h>
#include <gdrcopy_version.h>
#include <uapi/gdrdrv.h>

static int __init gdrdrv_fixture_init(void)
{
\tpr_info("gdrdrv fixture %d.%d loaded\\n", GDRCOPY_VERSION_MAJOR, GDRCOPY_VERSION_MINOR);
\treturn 0;
}

static void __exit gdrdrv_fixture_exit(void)
{
}

module_init(gdrdrv_fixture_init);
module_exit(gdrdrv_fixture_exit);
MODULE_LICENSE("Dual MIT/GPL");
MODULE_VERSION("{version}");
"""

_PROG_C = """\
#include <stdio.h>
#include "gdrapi.h"
int cuInit(unsigned int flags);
int main(void)
{
\tint major = 0, minor = 0;
\tgdr_runtime_get_version(&major, &minor);
\tprintf("fixture %d.%d cuInit=%d\\n", major, minor, cuInit(0));
\treturn 0;
}
"""


def make_tree(root: Path, version: str = "", symbols_file: Path = REPO_SYMBOLS) -> Path:
    """Write the fixture repository at `root` and commit it; returns root."""
    from gdrkit import version as project_version

    major, minor, patch = (version or project_version.VERSION).split(".")
    files: dict[str, str] = {
        "Makefile": _TOP_MAKEFILE,
        "gdrdrv/Makefile": _DRIVER_MAKEFILE,
        "gdrdrv/Kbuild": _DRIVER_KBUILD,
        "gdrdrv/gdrdrv.c": _DRIVER_C.replace("{version}", f"{major}.{minor}.{patch}"),
        "include/gdrcopy_version.h": (
            f"#define GDRCOPY_VERSION_MAJOR {major}\n"
            f"#define GDRCOPY_VERSION_MINOR {minor}\n"
            f"#define GDRCOPY_VERSION_PATCH {patch}\n"
        ),
        "include/uapi/gdrdrv.h": "#define GDRDRV_IOCTL 0xDA\n",
        "cuda.c": "int cuInit(unsigned int flags) { return (int)flags; }\n",
        "prog.c": _PROG_C,
        "packages/README.md": (REPO_ROOT / "packages" / "README.md").read_text(),
    }
    # The library's ABI, from its own Debian symbols file.
    symbols_text = symbols_file.read_text()
    files["libgdrapi/libgdrapi.symbols"] = symbols_text
    header = ["void gdr_runtime_get_version(int *major, int *minor);"]
    body = [f"void gdr_runtime_get_version(int *major, int *minor) {{ *major = {major}; *minor = {minor}; }}"]
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
    files["lib.c"] = '#include "include/gdrapi.h"\n' + "\n".join(body) + "\n"
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
