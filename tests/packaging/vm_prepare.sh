#!/bin/bash
# Prepares the root file system that fault_busy_module.sh boots with (run in
# a container of the fault image, whose file system is then exported):
# softgpu stands in for the NVIDIA driver (its module for KERNEL, its
# libcuda.so.1, and its P2P sources where DKMS builds of gdrdrv look for the
# driver's), the previous release's DKMS set is installed (DKMS builds gdrdrv
# OLD natively here), gdrdrv_holder is built against the packaged library,
# and this release's packages wait in /opt/gdrkit-faults/new.
#
#   vm_prepare.sh OLD KERNEL [OLD_MODULE_VERSION]
#
# OLD_MODULE_VERSION: what the previous set's module reports (modinfo) when
# it is not OLD, as in the reference GDRCopy's set (2.6-1, gdrdrv 2.6.0);
# gdrdrv_holder needs our libgdrapi and is built only without it.
#
# Mounts: /src (the source tree, read-only), /pkgs/old, /pkgs/new, and
# /faults (this directory).
set -euo pipefail
# shellcheck source=tests/packaging/lib.sh
. "$(dirname "$0")/lib.sh"

old=$1
kernel=$2
old_module_version=${3:-}
work=/opt/gdrkit-faults

mkdir -p "$work/new"
cp -a /src "$work/src"
cp /faults/*.sh /faults/*.c "$work/"
cp /pkgs/new/*.deb "$work/new/"

check "softgpu built and installed for $kernel, as the NVIDIA driver"
make -s -C "$work/src" -j2 softgpu_install KVER="$kernel" prefix=/usr/local >/tmp/softgpu.log 2>&1 || {
	tail -n 40 /tmp/softgpu.log
	fail "building softgpu"
}
make -s -C "$work/src/tests/softgpu/kmod" install-nvidia-src KVER="$kernel" >>/tmp/softgpu.log 2>&1 || {
	tail -n 40 /tmp/softgpu.log
	fail "installing softgpu's P2P sources"
}
depmod -a "$kernel"
ldconfig

check "install the previous release $old"
debs_in /pkgs/old
apt-get install -y -q --no-install-recommends "${DEBS[@]}"
expect_installed "$old" "$kernel" "${old_module_version:-$old}"

if [ -z "$old_module_version" ]; then
	check "gdrdrv_holder built against the packaged libgdrapi and softgpu's libcuda"
	cc -O2 -Wall -Wextra -Werror -std=gnu11 -I"$work/src/tests/softgpu/libcuda/include" \
		-o /usr/local/bin/gdrdrv_holder "$work/gdrdrv_holder.c" -lgdrapi -L/usr/local/lib -lcuda
fi
rm -rf "$work/src"
echo SCENARIO PASSED
