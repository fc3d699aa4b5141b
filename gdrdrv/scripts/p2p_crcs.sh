#!/bin/sh
# SPDX-License-Identifier: MIT
#
# p2p_crcs.sh - check that gdrdrv built WITHOUT NVIDIA sources imports each
# nvidia_p2p_* symbol with the CRC that a module compiled against NVIDIA's
# real nv-p2p.h exports.  A MODVERSIONS kernel refuses to load gdrdrv next to
# the real nvidia.ko when they differ ("disagrees about version of symbol").
#
# usage: p2p_crcs.sh -k KDIR -n NV_P2P_DIR [-m PT_MAJORS] [-l LABEL]
#   -k KDIR        kernel build tree (e.g. /lib/modules/$(uname -r)/build)
#   -n NV_P2P_DIR  directory holding the real nv-p2p.h
#   -m PT_MAJORS   page-table majors of our own declarations to build, space
#                  separated (default: "1 2"); each is compared with the real
#                  header when the majors agree, and only printed otherwise
#   -l LABEL       names the real header in the table (default: its directory)
# Prints one line per symbol and build: symbol, build, own CRC, real CRC,
# verdict; exits 1 if a compared CRC differs or a symbol is missing.
set -eu

KDIR='' NV='' MAJORS="1 2" LABEL=''
while getopts k:n:m:l:h opt; do
	case $opt in
	k) KDIR=$OPTARG ;;
	n) NV=$OPTARG ;;
	m) MAJORS=$OPTARG ;;
	l) LABEL=$OPTARG ;;
	h) sed -n '3,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) exit 2 ;;
	esac
done
if [ -z "$KDIR" ] || [ ! -d "$KDIR" ]; then echo "p2p_crcs.sh: no kernel build tree (-k)" >&2; exit 2; fi
if [ -z "$NV" ] || [ ! -f "$NV/nv-p2p.h" ]; then echo "p2p_crcs.sh: no nv-p2p.h in -n '$NV'" >&2; exit 2; fi
LABEL=${LABEL:-$NV}
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/p2p-crcs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

# The real header's page-table major, as the NVIDIA driver reports it.
real_major=$(sed -n 's/^#define NVIDIA_P2P_PAGE_TABLE_VERSION[[:space:]]*0x\(0*\)\([0-9a-fA-F]*\)\([0-9a-fA-F]\{4\}\).*/\2/p' "$NV/nv-p2p.h")
real_major=$((0x${real_major:-0}))

# Exports of a module compiled against the real header: the symbols-only
# companion, built from nv-p2p.h as the NVIDIA build compiles nv-p2p.c.
cp -r "$src/p2p-symbols" "$tmp/real"
cp "$src/gdrdrv_p2p.h" "$src/nv_p2p_abi.h" "$tmp/"
make -s -C "$KDIR" M="$tmp/real" GDRDRV_NV_P2P_DIR="$(cd "$NV" && pwd)" \
	KBUILD_EXTRA_SYMBOLS= modules > "$tmp/real.log" 2>&1 ||
	{ cat "$tmp/real.log" >&2; echo "p2p_crcs.sh: building against $NV failed" >&2; exit 1; }
awk '$2 ~ /^nvidia_p2p_/ {print $2, $1}' "$tmp/real/Module.symvers" | sort > "$tmp/real.crcs"

status=0
printf '%-36s %-22s %-12s %-12s %s\n' symbol build own real verdict
for major in $MAJORS; do
	build="$tmp/own$major"
	mkdir -p "$build"
	cp -r "$src/." "$build/gdrdrv"
	mkdir -p "$build/include"
	cp -r "$src/../include/." "$build/include/" 2>/dev/null || cp -r "$src/include/." "$build/include/"
	make -s -C "$build/gdrdrv" clean > /dev/null 2>&1 || true
	make -s -C "$build/gdrdrv" KDIR="$KDIR" NVIDIA_SRC_DIR= NVIDIA_IS_OPENSOURCE=y GDRDRV_P2P_PT_MAJOR="$major" \
		> "$build/log" 2>&1 || { cat "$build/log" >&2; echo "p2p_crcs.sh: own build (page table $major.x) failed" >&2; exit 1; }
	modprobe --dump-modversions "$build/gdrdrv/gdrdrv.ko" |
		awk '$2 ~ /^nvidia_p2p_/ {print $2, $1}' | sort > "$build/crcs"
	[ -s "$build/crcs" ] || { echo "p2p_crcs.sh: gdrdrv.ko imports no nvidia_p2p_* with a CRC" >&2; exit 1; }
	while read -r sym own; do
		real=$(awk -v s="$sym" '$1 == s {print $2}' "$tmp/real.crcs")
		own=$(printf '0x%08x' "$own")
		if [ "$major" != "$real_major" ]; then
			verdict="not compared (real header is page table $real_major.x)"
			real=${real:+$(printf '0x%08x' "$real")}
		elif [ -z "$real" ]; then
			verdict="MISSING from $LABEL"; status=1
		else
			real=$(printf '0x%08x' "$real")
			if [ "$own" = "$real" ]; then verdict=same; else verdict=DIFFERENT; status=1; fi
		fi
		printf '%-36s %-22s %-12s %-12s %s\n' "$sym" "own pt$major.x" "$own" "${real:--}" "$verdict"
	done < "$build/crcs"
done
echo "real header: $LABEL (page table $real_major.x)"
exit $status
