#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# Finds the NVIDIA kernel module installed for a kernel and says which gdrdrv
# it needs.  Used by the Makefile when no NVIDIA sources (nv-p2p.h) are
# installed: nodes with precompiled NVIDIA modules (Ubuntu's
# linux-modules-nvidia-*, RHEL's precompiled kmod streams, .run installs
# without DKMS) have the module but not its sources.
#
# The module's own fields decide, as NVIDIA writes them:
#   license  "Dual MIT/GPL" (the open kernel modules) -> flavour open;
#            "NVIDIA" (the proprietary ones)         -> flavour proprietary
#   version  580 and newer: nv-p2p page table 2.x; 515 to 575: 1.x;
#            535 and newer export nvidia_p2p_get_pages_persistent
#            (NVIDIA_P2P_PAGE_TABLE_VERSION of each branch's nv-p2p.h:
#            0x00010002 up to 575, 0x00020000 from 580).
#
# Usage: nvidia_module.sh KVER [ROOT]   (ROOT: a system image's root; default /)
# Prints one line: FLAVOUR PT_MAJOR PERSISTENT VERSION FILE LICENSE...
#   e.g. "proprietary 1 y 535.261.03 /lib/modules/6.1.0-57-amd64/updates/dkms/nvidia-current.ko NVIDIA"
# Exit status: 0 found; 1 no nvidia module for KVER; 2 found, but its
# version says nothing gdrdrv can use (printed on stderr: why).
set -eu

kver=$1
root=${2:-}
modules=$root/lib/modules

# modinfo finds the module by name (and by the aliases of modprobe.d, as
# Debian's "alias nvidia nvidia-current"); else look at the files that could
# hold it: the module inside is called nvidia whatever its file name.
if [ -n "$root" ]; then
	file=$(modinfo -b "$root" -k "$kver" -F filename nvidia 2>/dev/null | head -n 1) || file=
else
	file=$(modinfo -k "$kver" -F filename nvidia 2>/dev/null | head -n 1) || file=
fi
case $file in
/*) [ -f "$root$file" ] && file=$root$file ;;
*) file= ;;
esac
if [ -z "$file" ] && [ -d "$modules/$kver" ]; then
	file=$(find "$modules/$kver" -name 'nvidia*.ko*' 2>/dev/null | sort | while read -r ko; do
		if [ "$(modinfo -F name "$ko" 2>/dev/null)" = nvidia ]; then
			echo "$ko"
			break
		fi
	done)
fi
[ -n "$file" ] || exit 1

license=$(modinfo -F license "$file" 2>/dev/null | head -n 1)
version=$(modinfo -F version "$file" 2>/dev/null | head -n 1)
case $license in
*GPL*) flavour=open ;;
*) flavour=proprietary ;;
esac
branch=${version%%.*}
case $branch in
'' | *[!0-9]*)
	echo "nvidia_module.sh: $file has version '${version}', not an NVIDIA driver version (NNN.x)" >&2
	exit 2
	;;
esac
if [ "$branch" -lt 515 ]; then
	echo "nvidia_module.sh: $file is NVIDIA driver $version; gdrdrv needs 515 or newer" >&2
	exit 2
fi
if [ "$branch" -ge 580 ]; then pt=2; else pt=1; fi
if [ "$branch" -ge 535 ]; then persistent=y; else persistent=n; fi
echo "$flavour $pt $persistent $version $file $license"
