#!/bin/bash
# Prepares the root file system of one documented deployment for
# doctor_deployments.sh (run in a container of the fault image, whose file
# system is then exported and booted): softgpu stands in for the NVIDIA
# driver (its module for KERNEL, under its own name, and its P2P sources
# where DKMS builds of gdrdrv look for the driver's), then this release's
# packages are installed as docs/install.md and docs/nodes.md say:
#
#   dkms      the DKMS set (apt-get install of gdrcopy's set; DKMS builds
#             gdrdrv natively here), the kernel's headers present;
#   prebuilt  libgdrapi, gdrcopy-tests and gdrdrv-modules-KERNEL (a node
#             without compilers), then dkms and the kernel's headers purged.
#
#   doctor_prepare.sh MODE KERNEL
#
# Mounts: /src (the source tree, read-only), /pkgs/new, /faults (this directory).
set -euo pipefail
# shellcheck source=tests/packaging/lib.sh
. "$(dirname "$0")/lib.sh"

mode=$1
kernel=$2
work=/opt/gdrkit-faults

mkdir -p "$work"
cp -a /src "$work/src"
cp /faults/*.sh /faults/pod_run.py "$work/"

check "softgpu built and installed for $kernel, as the NVIDIA P2P provider"
make -s -C "$work/src" -j2 softgpu_install KVER="$kernel" prefix=/usr/local >/tmp/softgpu.log 2>&1 || {
	tail -n 40 /tmp/softgpu.log
	fail "building softgpu"
}
if [ "$mode" = dkms ]; then
	make -s -C "$work/src/tests/softgpu/kmod" install-nvidia-src KVER="$kernel" >>/tmp/softgpu.log 2>&1 || {
		tail -n 40 /tmp/softgpu.log
		fail "installing softgpu's P2P sources"
	}
fi
depmod -a "$kernel"
ldconfig
rm -rf "$work/src"

case $mode in
dkms)
	check "apt-get install of the DKMS set; DKMS builds gdrdrv for $kernel"
	debs_in /pkgs/new
	apt-get install -y -q --no-install-recommends "${DEBS[@]}"
	dkms status -m "$MODULE" -k "$kernel" | grep -q ': installed' || fail "dkms status: $(dkms status)"
	;;
prebuilt)
	check "apt-get install of libgdrapi, gdrcopy-tests and gdrdrv-modules-$kernel"
	apt-get install -y -q --no-install-recommends /pkgs/new/libgdrapi_*.deb /pkgs/new/gdrcopy-tests_*.deb \
		/pkgs/new/gdrdrv-modules-"$kernel"_*.deb
	check "no compiler's node: dkms and the kernel's headers purged"
	apt-get purge -y -q dkms "linux-headers-$kernel"
	apt-get autoremove --purge -y -q
	[ ! -e "/lib/modules/$kernel/build" ] || fail "/lib/modules/$kernel/build is still there"
	modinfo -k "$kernel" -F filename "$MODULE" || fail "gdrdrv-modules-$kernel installed no gdrdrv for $kernel"
	;;
*) fail "unknown mode $mode" ;;
esac
echo SCENARIO PASSED
