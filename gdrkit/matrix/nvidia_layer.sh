#!/bin/bash
# SPDX-License-Identifier: MIT
#
# nvidia_layer.sh - the cached image layer of a real-NVIDIA matrix row: one
# of Debian's NVIDIA kernel driver DKMS packages installed from the suite's
# archive, and DKMS's build of the real nvidia.ko for the suite's kernel.
# Runs once per (suite image, driver package and version, kernel ABI); the
# runner commits the container as an image tagged with all three.
#
# usage: nvidia_layer.sh ABI PACKAGE VERSION DKMS_MODULE REFRESH INSTALL
#   ABI          the suite kernel's ABI (its headers are in the image)
#   PACKAGE      nvidia-kernel-dkms or nvidia-open-kernel-dkms
#   VERSION      the package version to install (the runner read it from
#                the suite's lists, so the image tag names what is inside)
#   DKMS_MODULE  the DKMS module name the package registers
#                (nvidia-current, nvidia-current-open)
#   REFRESH      the words of the command that refreshes the package lists
#   INSTALL      the words of the command that installs packages by name
#                (the Debian family's verbs, gdrkit/distro/families.py)
# exit status 3: the driver package itself does not build for ABI (its first
# compiler error is printed on a line starting "nvidia_layer: ... does not build")
set -euo pipefail

abi=$1 package=$2 version=$3 module=$4
read -r -a refresh <<<"$5"
read -r -a install <<<"$6"
upstream=${version%-*}

# contrib and non-free hold the driver packages; non-free-firmware holds
# firmware-nvidia-gsp, which the 525+ kernel packages depend on.
for list in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
	[ -f "$list" ] || continue
	sed -i -E 's/^(deb .*) main$/\1 main contrib non-free non-free-firmware/' "$list"
done
# A suite mixes driver versions (bookworm: open 535.261.03 in the release,
# proprietary 535.309.01 in bookworm-security); every binary of the driver's
# source packages must come from the one version asked for.
cat > /etc/apt/preferences.d/gdrkit-nvidia <<EOF
Package: src:nvidia-graphics-drivers src:nvidia-open-gpu-kernel-modules
Pin: version $upstream-*
Pin-Priority: 1001
EOF

# The VM boots its own initramfs: nothing here needs the suite's rebuilt on
# every kernel module package.
if [ -f /etc/initramfs-tools/update-initramfs.conf ]; then
	sed -i 's/^update_initramfs=.*/update_initramfs=no/' /etc/initramfs-tools/update-initramfs.conf
fi

"${refresh[@]}"
# ccache (on PATH for every later DKMS build in this image, see the rows'
# script): the rows remove and reinstall the driver package, and each
# reinstall rebuilds the real nvidia.ko; from this layer's warm cache that
# takes a fraction of the first build.
"${install[@]}" ccache
printf 'cache_dir = /var/cache/ccache\nmax_size = 6G\ncompression = true\n' > /etc/ccache.conf
export PATH=/usr/lib/ccache:$PATH
# apt runs dpkg, and so the packages' DKMS builds, with a PATH of its own.
echo 'DPkg::Path "/usr/lib/ccache:/usr/sbin:/usr/bin:/sbin:/bin";' > /etc/apt/apt.conf.d/50gdrkit-ccache

# The packages stay in /var/cache/apt/archives for the rows' reinstalls.
if ! "${install[@]}" "$package=$version"; then
	log=$(find /var/lib/dkms/"$module" -path "*/build/make.log" 2>/dev/null | head -n 1)
	if [ -n "$log" ] && grep -q -E '(error|fatal error): ' "$log"; then
		# The distro's driver does not compile for the distro's kernel: nothing
		# of ours has run, and no row can; the runner reports it as a skip.
		echo "nvidia_layer: $package $version does not build for $abi:" \
			"$(grep -m 1 -E '(error|fatal error): ' "$log")"
		tail -n 60 "$log" >&2
		exit 3
	fi
	echo "nvidia_layer: installing $package $version failed" >&2
	exit 1
fi
# The package's postinst builds for the newest kernel with headers; make sure.
dkms status -m "$module" -k "$abi" | grep -q ': installed' || dkms autoinstall -k "$abi"
dkms status
dkms status -m "$module" -k "$abi" | grep -q ': installed' || {
	echo "nvidia_layer: DKMS did not build $module for $abi" >&2
	cat /var/lib/dkms/"$module"/*/build/make.log 2>/dev/null | tail -n 40 >&2 || true
	exit 1
}
# Proof that the driver build went through the cache (the rows' rebuilds hit it).
ccache -s
[ -d /var/cache/ccache ] || {
	echo "nvidia_layer: the DKMS build did not go through ccache" >&2
	exit 1
}
echo "nvidia_layer: $package $version built by DKMS ($module) for $abi"
