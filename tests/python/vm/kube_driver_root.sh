#!/bin/sh
# Lays out a stand-in for the NVIDIA driver container's root filesystem, as
# the GPU Operator shares it at /run/nvidia/driver: the kernel headers it
# installed, lib/modules/<kver>/build, and the driver sources with the P2P
# header and Module.symvers of the driver it built.  Here softgpu is that
# driver.  Runs chrooted in a VM root (tests/python/test_kube_vm.py).
#
#   kube_driver_root.sh KVER DIR DRIVER_VERSION [LAYOUT]
#     LAYOUT  debian: the headers' tree behind lib/modules/KVER/build [default]
#             el: the tree at usr/src/kernels/KVER and no build link, where
#                 an EL driver container's kernel-devel puts it (the tree is
#                 still Debian's, linked there)
set -eu

kver=$1
root=$2
driver_version=$3
layout=${4:-debian}

rm -rf "$root"
mkdir -p "$root/usr/src" "$root/usr/lib" "$root/lib/modules/$kver"
# Hard links: the same files, no copy (the root is one filesystem).
for tree in /usr/src/linux-headers-* /usr/lib/linux-kbuild-*; do
	[ -e "$tree" ] || continue
	cp -al "$tree" "$root${tree%/*}/"
done
for link in /usr/src/linux-kbuild-*; do
	[ -L "$link" ] && cp -a "$link" "$root/usr/src/"
done
case $layout in
debian) ln -s "/usr/src/linux-headers-$kver" "$root/lib/modules/$kver/build" ;;
el)
	mkdir -p "$root/usr/src/kernels"
	ln -s "../linux-headers-$kver" "$root/usr/src/kernels/$kver"
	;;
*)
	echo "kube_driver_root.sh: unknown layout $layout (debian or el)" >&2
	exit 2
	;;
esac
# The open flavour's half, as NVIDIA's tree has it: kernel-open/nvidia/nv-p2p.h.
make -s -C /src/tests/softgpu/kmod install-nvidia-src KVER="$kver" DESTDIR="$root" \
	NVIDIA_SRC_INSTALL_DIR="/usr/src/nvidia-$driver_version/kernel-open/nvidia"
find "$root/usr/src/nvidia-$driver_version" -type f | sort
