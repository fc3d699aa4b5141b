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

if [ -n "${REFRESH:-}" ]; then
	# shellcheck disable=SC2086 # the commands are argv prefixes
	$REFRESH
fi
step "installing $BUILD_PACKAGES and $headers"
# shellcheck disable=SC2086
$INSTALL $BUILD_PACKAGES
# shellcheck disable=SC2086
$INSTALL ${HEADERS_FLAGS:-} "$headers"
# shellcheck disable=SC2086
$INSTALL_FILES "$source_package"

tree=$(find /usr/src -maxdepth 1 -name 'gdrdrv-*' -print -quit)
[ -n "$tree" ] || fail "$source_package put no gdrdrv source tree under /usr/src"

# The build tree of KVER: /lib/modules/KVER/build where the package links
# it, else where RHEL (/usr/src/kernels) and SUSE
# (/usr/src/linux-<version>-obj/<arch>/<flavour>) put it.  Its
# generated/utsrelease.h says whose it is: every module build reads it (the
# vermagic), where include/config/kernel.release is not in every package.
kdir=""
for candidate in "/lib/modules/$kver/build" "/usr/src/kernels/$kver" /usr/src/linux-*-obj/*/*; do
	if grep -qsF "\"$kver\"" "$candidate/include/generated/utsrelease.h"; then
		kdir=$candidate
		break
	fi
done
[ -n "$kdir" ] || fail "$headers put no build tree of $kver in /lib/modules/$kver/build, /usr/src/kernels or /usr/src/linux-*-obj"

step "compiling $tree for $kver against $kdir"
# NVIDIA_SRC_DIR empty: gdrdrv's own P2P declarations, whose symbol versions
# are NVIDIA's; the open flavour, as the Debian prebuilt module package's.
if ! make -C "$tree" KVER="$kver" KDIR="$kdir" NVIDIA_SRC_DIR= >/tmp/gdrdrv-build.log 2>&1; then
	tail -n 40 /tmp/gdrdrv-build.log
	fail "make failed (its last lines above)"
fi
install -m 0644 "$tree/gdrdrv.ko" /out/gdrdrv.ko
step "built gdrdrv.ko: vermagic $(modinfo -F vermagic /out/gdrdrv.ko)"
