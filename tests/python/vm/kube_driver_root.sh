#!/bin/sh
# Lays out a stand-in for the NVIDIA driver container's root filesystem, as
# the GPU Operator shares it at /run/nvidia/driver: the kernel headers it
# installed, lib/modules/<kver>/build, and the driver sources with the P2P
# header and Module.symvers of the driver it built.  Here softgpu is that
# driver.  Runs chrooted in a VM root (tests/python/test_kube_vm.py).
#
#   kube_driver_root.sh KVER DIR DRIVER_VERSION
set -eu

kver=$1
root=$2
driver_version=$3

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
ln -s "/usr/src/linux-headers-$kver" "$root/lib/modules/$kver/build"
# The open flavour's half, as NVIDIA's tree has it: kernel-open/nvidia/nv-p2p.h.
make -s -C /src/tests/softgpu/kmod install-nvidia-src KVER="$kver" DESTDIR="$root" \
	NVIDIA_SRC_INSTALL_DIR="/usr/src/nvidia-$driver_version/kernel-open/nvidia"
find "$root/usr/src/nvidia-$driver_version" -type f | sort
