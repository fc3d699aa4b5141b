#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# Kernel feature probes for softgpu: compiles one tiny object per probe
# against KDIR and prints the -D flags for the features found.  Probes, not
# LINUX_VERSION_CODE, because distributions backport.
#
# usage: conftest.sh KDIR
set -eu

KDIR=${1:?usage: conftest.sh KDIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/softgpu-conftest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# A module that must always compile: if it does not, KDIR is unusable and
# every probe answer would be wrong.
cat > "$tmp/control.c" <<'C'
#include <linux/module.h>
MODULE_LICENSE("Dual MIT/GPL");
C

# 6.13 made MODULE_IMPORT_NS take a string literal; before, a bare
# identifier.  The bare spelling fails to compile on the new macro.
cat > "$tmp/import_ns_bare.c" <<'C'
#include <linux/module.h>
MODULE_IMPORT_NS(DMA_BUF);
MODULE_LICENSE("Dual MIT/GPL");
C

echo "obj-m := control.o import_ns_bare.o" > "$tmp/Kbuild"

probe() {
	make -C "$KDIR" M="$tmp" "$1.o" >"$tmp/$1.log" 2>&1
}

if ! probe control; then
	echo "conftest.sh: cannot compile a trivial module against $KDIR:" >&2
	cat "$tmp/control.log" >&2
	echo "conftest.sh: install the kernel headers for that kernel, or pass KDIR=" >&2
	exit 1
fi

flags=
probe import_ns_bare || flags="$flags -DSOFTGPU_MODULE_IMPORT_NS_STRING"
echo "$flags"
