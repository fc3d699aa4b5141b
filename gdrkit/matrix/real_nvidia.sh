#!/bin/bash
# SPDX-License-Identifier: MIT
#
# real_nvidia.sh - the checks of a real-NVIDIA matrix row, run in a container
# of the row's image (the suite, its kernel headers, and Debian's NVIDIA
# kernel driver DKMS package with DKMS's build of the real nvidia.ko; see
# nvidia_layer.sh).  Installs our packages next to it, then checks that
#   - DKMS built gdrdrv for the suite kernel after the NVIDIA module, against
#     the real driver sources (/usr/src/<module>-<version>/nvidia/nv-p2p.h);
#   - every nvidia_p2p_* symbol gdrdrv.ko imports carries the CRC that the
#     DKMS-built nvidia.ko exports (its __kcrctab), so a MODVERSIONS kernel
#     loads gdrdrv next to it;
#   - a gdrdrv for the proprietary driver imports no GPL-only kernel symbol
#     (the kernel refuses a module that mixes them with nvidia.ko's);
#   - modinfo and modules.dep make gdrdrv depend on the real nvidia module
#     under the file name Debian installs it as (nvidia-current.ko);
#   - `dkms autoinstall` (a new kernel's path) builds the NVIDIA module first;
#   - installing, removing and reinstalling either package, in either order,
#     leaves DKMS consistent: exactly the installed packages' modules built
#     and installed for the kernel, nothing left of a removed one, gdrdrv
#     built against the NVIDIA sources present; with no driver at all, its
#     build stops and says what to install (issue 36).
# The real nvidia.ko is never loaded (there is no NVIDIA GPU here).
#
# Prints `GDRKIT-STEP install|dkms|nvidia STATUS` marks for the runner, and
# one `ok:` or `FAIL:` line per check.
#
# usage: real_nvidia.sh ABI FLAVOUR PACKAGE VERSION DKMS_MODULE DEB...
set -uo pipefail

abi=$1 flavour=$2 package=$3 version=$4 nvmod=$5
shift 5
debs=("$@")
upstream=${version%-*}
nvsrc=/usr/src/$nvmod-$upstream
dkms_dir=/lib/modules/$abi/updates/dkms
kdir=/lib/modules/$abi/build
# Rebuilds of the NVIDIA module come from the image's warm ccache.
export PATH=/usr/lib/ccache:$PATH
export DEBIAN_FRONTEND=noninteractive
tmp=$(mktemp -d)
# shellcheck source=gdrkit/matrix/module_crcs.sh
. "$(dirname "$0")/module_crcs.sh"
trap 'rm -rf "$tmp"' EXIT
failures=0

mark() { echo "GDRKIT-STEP $1 $2"; }
ok() { echo "ok: $*"; }
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}
section() { printf '\n=== %s\n' "$*"; }

apt_quiet() {
	local log=$tmp/apt.log
	if ! apt-get -q -y --no-install-recommends "$@" >"$log" 2>&1; then
		tail -n 40 "$log"
		fail "apt-get $*"
		return 1
	fi
	grep -E -i 'warning|error' "$log" | grep -v -E '^(W: Download is performed unsandboxed|debconf)' || true
}


# The installed file of the real nvidia module (Debian names the file
# nvidia-current.ko; the module inside is called nvidia).
real_nvidia_ko() {
	local ko
	for ko in "$dkms_dir"/*.ko*; do
		[ -e "$ko" ] || continue
		[ "$(modinfo -F name "$ko" 2>/dev/null)" = nvidia ] && echo "$ko" && return 0
	done
	return 1
}

gdrdrv_ko() { modinfo -k "$abi" -n gdrdrv 2>/dev/null; }



gdrdrv_make_log() { find /var/lib/dkms/gdrdrv -path "*/$abi/*/log/make.log" 2>/dev/null | head -n 1; }

# What gdrdrv's DKMS build compiled against (its Makefile's settings lines).
built_against() {
	local log
	log=$(gdrdrv_make_log)
	[ -n "$log" ] && sed -n 's/^ *nv-p2p declarations *= *//p' "$log" | head -n 1
}

# The checks between gdrdrv and the real driver, both installed.
check_pair() {
	local what=$1 ko gko nko against want_flavour
	ko=$(gdrdrv_ko) || { fail "$what: modinfo finds no gdrdrv for $abi"; return; }
	nko=$(real_nvidia_ko) || { fail "$what: no installed module named nvidia in $dkms_dir"; return; }
	gko=$(plain_ko "$ko")
	echo "gdrdrv: $ko"
	echo "nvidia: $nko ($(modinfo -F version "$nko"), license $(modinfo -F license "$nko"))"

	against=$(built_against)
	if [ "$against" = "$nvsrc/nvidia/nv-p2p.h" ]; then
		ok "$what: gdrdrv was built against the real sources ($against)"
	else
		fail "$what: gdrdrv was built against '${against:-?}', not $nvsrc/nvidia/nv-p2p.h (log: $(gdrdrv_make_log))"
	fi
	want_flavour=$([ "$flavour" = open ] && echo y || echo n)
	if grep -q "NVIDIA_IS_OPENSOURCE = $want_flavour\$" "$(gdrdrv_make_log)"; then
		ok "$what: gdrdrv was built for the $flavour flavour (NVIDIA_IS_OPENSOURCE=$want_flavour)"
	else
		fail "$what: gdrdrv was not built for the $flavour flavour: $(grep NVIDIA_IS_OPENSOURCE "$(gdrdrv_make_log)")"
	fi

	compare_p2p_crcs "$gko" "$nko" "$what"

	if [ "$flavour" = proprietary ]; then
		if [ ! -f "$kdir/Module.symvers" ]; then
			fail "$what: $kdir/Module.symvers is missing; cannot tell GPL-only exports"
		elif sh /src/gdrdrv/scripts/check_gpl_imports.sh "$gko" "$kdir"; then
			ok "$what: gdrdrv imports no GPL-only symbol"
		else
			fail "$what: gdrdrv imports GPL-only symbols next to the proprietary nvidia.ko"
		fi
	fi

	local depends name
	depends=$(modinfo -k "$abi" -F depends gdrdrv)
	name=$(modinfo -F name "$nko")
	if [ "$depends" = "$name" ]; then
		ok "$what: modinfo gdrdrv depends: $depends (the real module's name)"
	else
		fail "$what: modinfo gdrdrv depends: '$depends', the real module is called '$name'"
	fi
	# What modprobe would load, in order: the real driver's file before gdrdrv.
	modprobe -S "$abi" --show-depends gdrdrv >"$tmp/deps" 2>&1
	cat "$tmp/deps"
	local nline gline
	nline=$(grep -n -F "$nko" "$tmp/deps" | head -n 1 | cut -d: -f1)
	gline=$(grep -n -F "$ko" "$tmp/deps" | head -n 1 | cut -d: -f1)
	if [ -n "$nline" ] && [ -n "$gline" ] && [ "$nline" -lt "$gline" ]; then
		ok "$what: modprobe gdrdrv loads $(basename "$nko") first"
	else
		fail "$what: modprobe gdrdrv would not load $(basename "$nko") first"
	fi
}

# DKMS holds exactly the modules of the installed packages, built and installed
# for the kernel, and the module tree agrees.  $1/$2: gdrdrv/nvidia expected (yes/no).
check_state() {
	local want_gdrdrv=$1 want_nvidia=$2 what=$3 module want status
	dkms status >"$tmp/status" 2>&1
	echo "dkms status:"
	sed 's/^/  /' "$tmp/status"
	if grep -i -E 'warning|error' "$tmp/status"; then
		fail "$what: dkms status complains"
	fi
	for module in gdrdrv "$nvmod"; do
		want=$want_gdrdrv
		[ "$module" = gdrdrv ] || want=$want_nvidia
		status=$(dkms status -m "$module" -k "$abi" 2>&1)
		if [ "$want" = yes ]; then
			if [ "$(echo "$status" | grep -c .)" = 1 ] && echo "$status" | grep -q ': installed$'; then
				ok "$what: $module installed for $abi"
			else
				fail "$what: $module should be installed for $abi: ${status:-not in dkms status}"
			fi
		else
			if [ -n "$status" ] || [ -n "$(ls -A "/var/lib/dkms/$module" 2>/dev/null)" ]; then
				fail "$what: $module is gone but DKMS still has: ${status:-$(ls "/var/lib/dkms/$module")}"
			else
				ok "$what: nothing of $module in DKMS"
			fi
		fi
	done
	if [ "$want_gdrdrv" = yes ] && ! gdrdrv_ko >/dev/null; then
		fail "$what: gdrdrv is not in the kernel's module index"
	elif [ "$want_gdrdrv" = no ] && ls "$dkms_dir"/gdrdrv.ko* >/dev/null 2>&1; then
		fail "$what: gdrdrv.ko left in $dkms_dir"
	fi
	if [ "$want_nvidia" = yes ] && ! real_nvidia_ko >/dev/null; then
		fail "$what: the real nvidia module is not in $dkms_dir"
	elif [ "$want_nvidia" = no ] && find "$dkms_dir" -name 'nvidia*.ko*' 2>/dev/null | grep -q .; then
		fail "$what: NVIDIA modules left in $dkms_dir: $(ls "$dkms_dir")"
	fi
	if [ "$want_gdrdrv" = yes ] && [ "$want_nvidia" = yes ]; then
		check_pair "$what"
	elif [ "$want_gdrdrv" = yes ]; then
		# The driver went away under gdrdrv: with no driver to build for, its
		# make refuses to build (gdrdrv/Makefile), so the module stays as it
		# was built, for the driver that left (it cannot load without one).
		local against
		against=$(built_against)
		if [ "$against" = "$nvsrc/nvidia/nv-p2p.h" ]; then
			ok "$what: gdrdrv stays built for the removed $package ($against); nothing to rebuild it for"
		else
			fail "$what: gdrdrv is built against '${against:-?}', neither the removed driver's sources nor refused"
		fi
	fi
}

remove_ours() { apt_quiet remove gdrdrv-dkms; }
install_ours() { apt_quiet install "${debs[@]}"; }
remove_nvidia() { apt_quiet remove "$package"; }
install_nvidia() { apt_quiet install "$package=$version"; }

section "install our packages next to $package $version ($nvmod)"
dkms status
apt-get -q -y --no-install-recommends install "${debs[@]}"
rc=$?
mark install $rc
[ $rc = 0 ] || exit 1
# The postinst builds for the newest kernel with headers (in a container
# `uname -r` is the host's); ask for the suite kernel when it did not.
dkms status -m gdrdrv -k "$abi" | grep -q ': installed' || dkms autoinstall -k "$abi"
check_state yes yes "installed after the driver"
mark dkms $failures
[ "$failures" = 0 ] || {
	mark nvidia 1
	exit 1
}

section "dkms autoinstall (the path of a newly installed kernel) builds $nvmod before gdrdrv"
gver=$(dkms status -m gdrdrv -k "$abi" | sed -n 's|^gdrdrv/\([^,]*\),.*|\1|p' | head -n 1)
# unbuild, not remove: with one kernel, dkms 3's remove deletes the module
# from the DKMS tree altogether, and autoinstall would find nothing to build.
dkms unbuild -m gdrdrv -v "$gver" -k "$abi" >/dev/null
dkms unbuild -m "$nvmod" -v "$upstream" -k "$abi" >/dev/null
dkms autoinstall -k "$abi" >"$tmp/autoinstall" 2>&1
sed 's/^/  /' "$tmp/autoinstall"
# dkms names each module it builds (module/version, or the .ko it installs).
nline=$(grep -n -E "(^|[ /])${nvmod}([/ ]|\.ko)" "$tmp/autoinstall" | head -n 1 | cut -d: -f1)
gline=$(grep -n -E '(^|[ /])gdrdrv([/ ]|\.ko)' "$tmp/autoinstall" | head -n 1 | cut -d: -f1)
if [ -n "$nline" ] && [ -n "$gline" ] && [ "$nline" -lt "$gline" ]; then
	ok "autoinstall built $nvmod (line $nline) before gdrdrv (line $gline)"
else
	tail -n 40 "$tmp/autoinstall"
	fail "autoinstall did not build $nvmod before gdrdrv"
fi
check_state yes yes "after autoinstall"

# Both install orders (the driver first: above; gdrdrv-dkms first: below) and
# both removal orders, each package also removed and reinstalled while the
# other stays.  Each install of the driver package rebuilds the real driver
# (from the image's ccache), so it is installed only once more.
section "remove gdrdrv-dkms and reinstall it next to $package"
remove_ours && check_state no yes "gdrdrv-dkms removed"
install_ours && check_state yes yes "gdrdrv-dkms reinstalled next to the driver"

section "remove gdrdrv-dkms, then $package"
remove_ours && check_state no yes "gdrdrv-dkms removed"
remove_nvidia && check_state no no "both removed (ours first)"

section "install gdrdrv-dkms first: with no driver to build for, it says what to install; then $package"
if apt-get -q -y --no-install-recommends install "${debs[@]}" >"$tmp/apt.log" 2>&1; then
	fail "gdrdrv-dkms installed with no NVIDIA driver to build gdrdrv for"
elif grep -q "gdrdrv: no NVIDIA driver for kernel $abi" /var/lib/dkms/gdrdrv/*/build/make.log 2>/dev/null &&
	grep -q "gdrdrv: fix what the log shows, then run: dpkg --configure -a" "$tmp/apt.log"; then
	ok "without a driver the DKMS build stops; its log says: $(grep -h -m 1 'install the NVIDIA driver' /var/lib/dkms/gdrdrv/*/build/make.log | cut -c1-120)..."
else
	tail -n 30 "$tmp/apt.log"
	fail "gdrdrv-dkms failed without a driver, but not saying that it needs one"
fi
# The documented recovery: install the driver, then configure what is pending.
install_nvidia
dpkg --configure -a >"$tmp/configure.log" 2>&1 || {
	tail -n 30 "$tmp/configure.log"
	fail "dpkg --configure -a after installing $package"
}
dkms status -m gdrdrv -k "$abi" | grep -q ': installed' || dkms autoinstall -k "$abi"
check_state yes yes "driver installed after gdrdrv-dkms"

section "remove $package, then gdrdrv-dkms"
remove_nvidia && check_state yes no "$package removed under gdrdrv-dkms"
remove_ours && check_state no no "both removed (driver first)"

section "summary"
echo "$failures check(s) failed"
mark nvidia "$failures"
[ "$failures" = 0 ]
