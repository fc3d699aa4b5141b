#!/bin/bash
# Runs inside the base container of one Kubernetes image (gdrkit/kube/images.py),
# which is committed afterwards.  Installs our packages, the entrypoint and the
# CDI spec, and lays the module out as the image's kind needs it.
#
#   image_setup.sh KIND KVER FILE...
#     KIND  driver       gdrdrv is built on the node (the DKMS package's sources)
#           precompiled  gdrdrv.ko for KVER, loaded by the entrypoint
#           kmm          gdrdrv.ko for KVER under /opt/lib/modules/KVER, for KMM
#     KVER  the kernel of precompiled and kmm images ("-" for driver)
#     FILE  a package file, or a gdrdrv.ko compiled for KVER (the RPM
#           families' precompiled and kmm images: module_build.sh's)
# Environment: INSTALL_FILES, the family's command that installs package
# files for an image, CLEAN, the one that drops its download cache (may be
# empty), and MODULE_SUBDIR, where a module goes below /lib/modules/KVER;
# on a registry base also BASE_PACKAGES, installed first with REFRESH and
# INSTALL (the family's commands).  /kube holds nvidia-gdrcopy-driver.sh and cdi.yaml.

set -euo pipefail

kind=$1
kver=$2
shift 2

step() { echo "image-setup: $*"; }

if [ -n "${BASE_PACKAGES:-}" ]; then
	step "installing the base's tools: $BASE_PACKAGES"
	if [ -n "${REFRESH:-}" ]; then
		# shellcheck disable=SC2086
		$REFRESH
	fi
	# shellcheck disable=SC2086
	$INSTALL $BASE_PACKAGES
fi
packages=()
modules=()
for file in "$@"; do
	case $file in
	*.ko) modules+=("$file") ;;
	*) packages+=("$file") ;;
	esac
done
if [ ${#packages[@]} -gt 0 ]; then
	step "installing ${packages[*]}"
	# shellcheck disable=SC2086 # the commands are argv prefixes
	$INSTALL_FILES "${packages[@]}"
fi
for ko in "${modules[@]}"; do
	placed="/lib/modules/$kver${MODULE_SUBDIR:?set to where the family puts modules below /lib/modules/KVER}/gdrdrv.ko"
	install -D -m 0644 "$ko" "$placed"
	step "installed $ko as $placed"
done
if [ -n "${CLEAN:-}" ]; then
	# shellcheck disable=SC2086
	$CLEAN
fi
install -D -m 0755 /kube/nvidia-gdrcopy-driver.sh /usr/local/bin/nvidia-gdrcopy-driver
install -D -m 0644 /kube/cdi.yaml /usr/share/gdrcopy/cdi/nvidia.com-gdrcopy.yaml

prebuilt() {
	find "/lib/modules/$kver" -name 'gdrdrv.ko*' -print -quit 2>/dev/null || true
}

case $kind in
driver)
	tree=$(find /usr/src -maxdepth 1 -name 'gdrdrv-*' -print -quit)
	[ -n "$tree" ] || {
		step "FAILED: the packages put no gdrdrv source tree under /usr/src"
		exit 1
	}
	step "gdrdrv sources for the node's build: $tree"
	;;
precompiled)
	ko=$(prebuilt)
	[ -n "$ko" ] || {
		step "FAILED: no gdrdrv.ko for $kver after installing the packages"
		exit 1
	}
	step "prebuilt module $ko ($(modinfo -F vermagic "$ko"))"
	;;
kmm)
	ko=$(prebuilt)
	[ -n "$ko" ] || {
		step "FAILED: no gdrdrv.ko for $kver after installing the packages"
		exit 1
	}
	# KMM loads with `modprobe -d /opt`: the module and its depmod output there.
	install -D -m 0644 "$ko" "/opt/lib/modules/$kver/updates/${ko##*/}"
	depmod -b /opt "$kver"
	step "KMM layout: /opt/lib/modules/$kver/updates/${ko##*/}, modules.dep: $(cat "/opt/lib/modules/$kver/modules.dep")"
	;;
*)
	step "FAILED: unknown image kind $kind"
	exit 2
	;;
esac

# Smaller images: no documentation (the package cache went with CLEAN).
rm -rf /usr/share/doc/* /usr/share/man/* /usr/share/info/*
step "done"
