#!/bin/bash
# Runs in a container of an RPM family's build base (gdrkit/kube/images.py:
# Rocky Linux, openSUSE Leap), whose repositories carry the devel package of
# each kernel of the release: compiles gdrdrv for one kernel from our DKMS
# package, for the precompiled and KMM images of nodes of that release.
# Their own bases (UBI, SLE BCI) have no kernel-devel, so only the module
# travels: /out/gdrdrv.ko.
#
#   module_build.sh KVER HEADERS_PACKAGE SOURCE_PACKAGE
#     KVER             the kernel release (uname -r) to build for
#     HEADERS_PACKAGE  the package with its build tree (kernel-devel-<version>)
#     SOURCE_PACKAGE   our DKMS package file (the gdrdrv sources)
# Environment: REFRESH and INSTALL (the family's commands; REFRESH may be
# empty), HEADERS_FLAGS (what INSTALL needs for an older kernel's package),
# BUILD_PACKAGES (compiler, make, kmod) and INSTALL_FILES (how a package
# file is installed without its dependencies and scriptlets).

set -euo pipefail

kver=$1
headers=$2
source_package=$3

step() { echo "module-build: $*"; }
fail() {
	step "FAILED: $*"
	exit 1
}

refreshed=""
install_packages() {
	if [ -z "$refreshed" ] && [ -n "${REFRESH:-}" ]; then
		# shellcheck disable=SC2086 # the commands are argv prefixes
		$REFRESH
	fi
	refreshed=1
	# shellcheck disable=SC2086
	$INSTALL "$@"
}

# The build tree of KVER: /lib/modules/KVER/build where the package links
# it, else where RHEL (/usr/src/kernels) and SUSE
# (/usr/src/linux-<version>-obj/<arch>/<flavour>) put it.  Its
# generated/utsrelease.h says whose it is: every module build reads it (the
# vermagic), where include/config/kernel.release is not in every package.
find_tree() {
	local candidate
	for candidate in "/lib/modules/$kver/build" "/usr/src/kernels/$kver" /usr/src/linux-*-obj/*/*; do
		if grep -qsF "\"$kver\"" "$candidate/include/generated/utsrelease.h"; then
			echo "$candidate"
			return 0
		fi
	done
	return 1
}

# A base that has them already (OpenShift's Driver Toolkit: the compiler and
# the kernel-devel of its release, and no repository to fetch from) is used as it is.
if command -v gcc >/dev/null && command -v make >/dev/null && command -v modinfo >/dev/null; then
	step "compiler, make and kmod are in the base already"
else
	step "installing $BUILD_PACKAGES"
	# shellcheck disable=SC2086
	install_packages $BUILD_PACKAGES
fi
if kdir=$(find_tree); then
	step "the build tree of $kver is in the base already: $kdir"
else
	step "installing $headers"
	# shellcheck disable=SC2086
	install_packages ${HEADERS_FLAGS:-} "$headers"
	kdir=$(find_tree) ||
		fail "$headers put no build tree of $kver in /lib/modules/$kver/build, /usr/src/kernels or /usr/src/linux-*-obj"
fi
# shellcheck disable=SC2086
$INSTALL_FILES "$source_package"
tree=$(find /usr/src -maxdepth 1 -name 'gdrdrv-*' -print -quit)
[ -n "$tree" ] || fail "$source_package put no gdrdrv source tree under /usr/src"

step "compiling $tree for $kver against $kdir"
# NVIDIA_SRC_DIR empty: gdrdrv's own P2P declarations, whose symbol versions
# are NVIDIA's; no NVIDIA driver here, so the target is named: the open
# flavour and page table 2.x (drivers 580 and newer), as the prebuilt module
# packages' (gdrcopy_doctor on the node reports a driver that differs).
if ! make -C "$tree" KVER="$kver" KDIR="$kdir" NVIDIA_SRC_DIR= NVIDIA_IS_OPENSOURCE=y GDRDRV_P2P_PT_MAJOR=2 \
	>/tmp/gdrdrv-build.log 2>&1; then
	tail -n 40 /tmp/gdrdrv-build.log
	fail "make failed (its last lines above)"
fi
install -m 0644 "$tree/gdrdrv.ko" /out/gdrdrv.ko
step "built gdrdrv.ko: vermagic $(modinfo -F vermagic /out/gdrdrv.ko)"
