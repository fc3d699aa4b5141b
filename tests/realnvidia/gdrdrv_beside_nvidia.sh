#!/bin/bash
# SPDX-License-Identifier: MIT
#
# gdrdrv_beside_nvidia.sh - gdrdrv built by DKMS next to a real NVIDIA
# kernel module whose sources are gone, as on nodes with precompiled NVIDIA
# modules (Ubuntu's linux-modules-nvidia-*, RHEL's precompiled kmod streams,
# .run installs without DKMS).  Runs in a container of a real-NVIDIA matrix
# image (gdrkit/matrix/nvidia_layer.sh: one of Debian's NVIDIA driver DKMS
# packages, its nvidia.ko built for the suite's kernel).  Removes the
# driver's sources, has DKMS build gdrdrv from GDRDRV_SRC (the DKMS source
# tree the packages install), and checks that gdrdrv chose what the module
# needs:
#   - the flavour its license says ("Dual MIT/GPL": open, "NVIDIA":
#     proprietary), in the build log and in gdrdrv.ko's nvidia_flavor;
#   - the nv-p2p page-table version its version says (580 and newer: 2.x,
#     older: 1.x), in the build log and in gdrdrv.ko's nvidia_p2p_page_table;
#   - every nvidia_p2p_* symbol gdrdrv imports has the CRC nvidia.ko exports;
#   - a proprietary-flavour gdrdrv imports no GPL-only symbol;
# and then, with the module gone too, that the build stops and says what to
# install.  The real nvidia.ko is never loaded (there is no NVIDIA GPU here).
# Prints one `ok:` or `FAIL:` line per check; exit status 1 when one failed.
#
# usage: gdrdrv_beside_nvidia.sh ABI GDRDRV_SRC
set -uo pipefail

abi=$1 src=$2
kdir=/lib/modules/$abi/build
tmp=$(mktemp -d)
# shellcheck source=gdrkit/matrix/module_crcs.sh
. "${MODULE_CRCS:-/realnvidia-lib/module_crcs.sh}"
trap 'rm -rf "$tmp"' EXIT
failures=0

ok() { echo "ok: $*"; }
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}
section() { printf '\n=== %s\n' "$*"; }




section "the NVIDIA module installed for $abi"
nko=$(find "/lib/modules/$abi" -name 'nvidia*.ko*' | while read -r ko; do
	[ "$(modinfo -F name "$ko")" = nvidia ] && echo "$ko" && break
done)
[ -n "$nko" ] || {
	echo "FAIL: no module named nvidia under /lib/modules/$abi"
	exit 1
}
license=$(modinfo -F license "$nko")
nvversion=$(modinfo -F version "$nko")
echo "nvidia: $nko, version $nvversion, license $license"
case $license in
*GPL*) want_flavour=opensource want_open=y ;;
*) want_flavour=proprietary want_open=n ;;
esac
if [ "${nvversion%%.*}" -ge 580 ]; then
	want_pt=2 want_table=2.x
else
	want_pt=1 want_table=1.x
fi
echo "expected: flavour $want_flavour (NVIDIA_IS_OPENSOURCE=$want_open), nv-p2p page table $want_pt.x ($want_table)"

section "NVIDIA's sources removed, as on a node with a precompiled driver"
rm -rf /usr/src/nvidia-* /usr/src/kernel-modules/nvidia-*
# DKMS forgets the driver too (a precompiled one was never DKMS's); its
# module stays installed.  (With the record kept, trixie's DKMS refuses
# gdrdrv's BUILD_DEPENDS on a module whose sources are gone.)
rm -rf /var/lib/dkms/nvidia-current*
if find /usr/src -name nv-p2p.h | grep -q .; then
	fail "an nv-p2p.h is still under /usr/src: $(find /usr/src -name nv-p2p.h)"
else
	ok "no nv-p2p.h under /usr/src; the module stays: $nko"
fi

section "DKMS builds gdrdrv next to it"
version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$src/dkms.conf")
cp -r "$src" "/usr/src/gdrdrv-$version"
echo "gdrdrv: make help says:"
make -s -C "/usr/src/gdrdrv-$version" help KVER="$abi" | sed -n '/^NVIDIA driver for/,$p' | sed 's/^/  /'
dkms add -m gdrdrv -v "$version" >/dev/null
if dkms install -m gdrdrv -v "$version" -k "$abi" >"$tmp/dkms.log" 2>&1; then
	ok "dkms install gdrdrv/$version -k $abi"
else
	cat "$tmp/dkms.log"
	tail -n 40 /var/lib/dkms/gdrdrv/"$version"/build/make.log 2>/dev/null
	fail "dkms install gdrdrv/$version -k $abi"
	exit 1
fi
log=$(find /var/lib/dkms/gdrdrv -path "*/$abi/*/log/make.log" | head -n 1)
echo "gdrdrv's build log ($log) says:"
sed -n '/^gdrdrv build settings:/,/^  P2P symbol CRCs from/p' "$log" | sed 's/^/  /'
if grep -q "^  nv-p2p declarations  = gdrdrv's own declarations (nv_p2p_abi.h, page table $want_pt.x, " "$log"; then
	ok "the build chose page table $want_pt.x"
else
	fail "the build did not choose page table $want_pt.x: $(grep 'nv-p2p declarations' "$log")"
fi
if grep -q "^  NVIDIA_IS_OPENSOURCE = $want_open\$" "$log"; then
	ok "the build chose NVIDIA_IS_OPENSOURCE=$want_open"
else
	fail "the build did not choose NVIDIA_IS_OPENSOURCE=$want_open: $(grep 'NVIDIA_IS_OPENSOURCE' "$log")"
fi
if grep -q "^  flavour from         = the license of nvidia $nvversion ($nko, license $license)" "$log" &&
	grep -q "^  page table from      = the version of nvidia $nvversion " "$log"; then
	ok "the build says it read both from $nko"
else
	fail "the build does not say it read the module: $(grep -E 'flavour from|page table from' "$log")"
fi

gko=$(plain_ko "$(modinfo -k "$abi" -n gdrdrv)")
flavour=$(modinfo -F nvidia_flavor "$gko")
table=$(modinfo -F nvidia_p2p_page_table "$gko")
echo "gdrdrv.ko: nvidia_flavor $flavour, nvidia_p2p_page_table $table, depends $(modinfo -F depends "$gko")"
if [ "$flavour" = "$want_flavour" ]; then
	ok "modinfo gdrdrv: nvidia_flavor $flavour"
else
	fail "modinfo gdrdrv: nvidia_flavor $flavour, want $want_flavour"
fi
if [ "$table" = "$want_table" ]; then
	ok "modinfo gdrdrv: nvidia_p2p_page_table $table"
else
	fail "modinfo gdrdrv: nvidia_p2p_page_table $table, want $want_table"
fi

compare_p2p_crcs "$gko" "$nko"
if [ "$want_open" = n ]; then
	if sh "/usr/src/gdrdrv-$version/scripts/check_gpl_imports.sh" "$gko" "$kdir"; then
		ok "gdrdrv imports no GPL-only symbol"
	else
		fail "gdrdrv imports GPL-only symbols next to the proprietary nvidia.ko"
	fi
fi

section "neither sources nor a module: the build stops and says what to install"
dkms remove -m gdrdrv -v "$version" -k "$abi" >/dev/null 2>&1
rm -f "$nko"
depmod -a "$abi"
cp -r "/usr/src/gdrdrv-$version" "$tmp/bare"
if make -C "$tmp/bare" KVER="$abi" >"$tmp/bare.log" 2>&1; then
	fail "gdrdrv built with no NVIDIA driver to build for"
else
	grep '^gdrdrv: ' "$tmp/bare.log"
	if grep -q "no NVIDIA driver for kernel $abi" "$tmp/bare.log" &&
		grep -q "install the NVIDIA driver for $abi first (Debian: nvidia-kernel-dkms or" "$tmp/bare.log"; then
		ok "make stops: no NVIDIA driver for $abi, and names the packages to install"
	else
		fail "make failed without saying what to install: $(tail -n 5 "$tmp/bare.log")"
	fi
fi
if [ -e "$tmp/bare/gdrdrv.ko" ]; then
	fail "a gdrdrv.ko was built anyway"
else
	ok "no gdrdrv.ko was built"
fi

section "summary"
echo "$failures check(s) failed"
[ "$failures" = 0 ]
