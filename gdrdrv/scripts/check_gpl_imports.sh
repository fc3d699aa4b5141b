#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# Fails when a module imports GPL-only kernel exports.  A gdrdrv built for
# the proprietary NVIDIA driver must not: the kernel refuses to load a module
# that uses symbols of a proprietary module and GPL-only symbols together,
# and that refusal would only show on the user's machine.
#
# Usage: check_gpl_imports.sh MODULE.ko KDIR
set -eu
ko=$1
symvers=$2/Module.symvers
[ -f "$symvers" ] || { echo "check_gpl_imports: no $symvers; cannot check" >&2; exit 0; }
gpl=$(nm -u "$ko" | awk '{print $2}' | while read -r sym; do
	awk -v s="$sym" '$2 == s && $4 == "EXPORT_SYMBOL_GPL" {print s}' "$symvers"
done)
if [ -n "$gpl" ]; then
	# Unquoted on purpose: one line of names, not one a line.
	# shellcheck disable=SC2086
	echo "gdrdrv: built for the proprietary NVIDIA driver but imports GPL-only symbols:" $gpl >&2
	echo "gdrdrv: the kernel would refuse to load it next to nvidia.ko; please report this with your kernel version" >&2
	exit 1
fi
echo "gdrdrv: no GPL-only imports (required for the proprietary NVIDIA driver)"
