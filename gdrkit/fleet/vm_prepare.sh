#!/bin/bash
# Prepares the root file system the role's VM run boots (run in a container of
# the Molecule bookworm host image, whose file system is then exported):
# softgpu built and installed for KERNEL as the NVIDIA driver's stand-in (as
# the matrix does), the role's first converge with a local connection (no GPU
# in a container: it installs the packages, DKMS builds gdrdrv for KERNEL,
# and nothing is loaded), and Debian's own sources removed (the guest has no
# network; the repository is a file:// one inside the root).
#
#   vm_prepare.sh KERNEL GROUP
#
# Mounts: /src (the source tree), /repo (the published repository),
# /ansible (ansible/ of the tree), /ansible-python (ansible-core for the
# guest's Python), /fleet (this directory).  All read-only.
set -euo pipefail
kernel=$1
group=$2
work=/opt/gdrkit-fleet

mkdir -p "$work"
cp -a /repo "$work/repo"
cp -a /ansible "$work/ansible"
cp -a /ansible-python "$work/python"
cp /fleet/vm_converge.sh "$work/"
chmod -R a+rX "$work"

echo "CHECK: softgpu built and installed for $kernel"
cp -a /src /tmp/src
{
	make -C /tmp/src -j2 softgpu_install KVER="$kernel" prefix=/usr/local &&
		make -C /tmp/src/tests/softgpu/kmod install-nvidia-src KVER="$kernel" &&
		depmod -a "$kernel" && ldconfig
} >/tmp/softgpu.log 2>&1 || {
	tail -n 40 /tmp/softgpu.log
	echo "FAILED: building softgpu"
	exit 1
}
rm -rf /tmp/src

echo "CHECK: the group of /dev/gdrdrv, $group"
getent group "$group" >/dev/null || groupadd --system "$group"

echo "CHECK: only the published repository as a package source (the guest is offline)"
rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*
rm -rf /var/lib/apt/lists/*

echo "CHECK: the role's first converge, in the image (no GPU here)"
bash "$work/vm_converge.sh" image "$group"
# Docker's marker file would make doctor, in the booted guest, think it runs in a container.
rm -f /.dockerenv
echo "PREPARE PASSED"
