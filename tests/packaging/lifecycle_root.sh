#!/bin/bash
# Prepares the root of the booted lifecycle test (tests/python/pkgkit/booted.py;
# run chrooted in an overlay of a cached bookworm root with dkms, udev and the
# init system INIT): softgpu built as the module nvidia for KERNEL and loaded
# at boot from /etc/modules-load.d, as a node's NVIDIA driver is (under
# systemd by systemd-modules-load, under sysvinit by /etc/init.d/kmod); its
# P2P sources where gdrdrv's DKMS build looks for the driver's; and the
# reporter that runs at the end of every boot (lifecycle_boot.sh).
#
#   lifecycle_root.sh INIT KERNEL     INIT: systemd or sysvinit
set -euo pipefail
# shellcheck source=tests/packaging/lib.sh
. "$(dirname "$0")/lib.sh"

init=$1
kernel=$2
work=$(dirname "$0")

check "softgpu built as the module nvidia for $kernel, its P2P sources in /usr/src"
make -s -C "$work/softgpu/kmod" install-nvidia-src KVER="$kernel" SOFTGPU_MODULE=nvidia >/tmp/softgpu.log 2>&1 || {
	tail -n 40 /tmp/softgpu.log
	fail "building softgpu"
}
install -D -m 0644 "$work/softgpu/kmod/nvidia.ko" "/lib/modules/$kernel/extra/nvidia.ko"
depmod -a "$kernel"
mkdir -p /etc/modules-load.d
echo nvidia >/etc/modules-load.d/nvidia.conf

check "the boot reporter, under $init"
case "$init" in
systemd)
	[ "$(readlink -f /sbin/init)" = "$(readlink -f /lib/systemd/systemd)" ] || fail "/sbin/init is not systemd"
	cp "$work/gdrkit-lifecycle-boot.service" /etc/systemd/system/
	systemd-machine-id-setup
	systemctl enable gdrkit-lifecycle-boot.service
	# Units that would run apt or ask questions in a root that is offline and unattended.
	systemctl mask apt-daily.timer apt-daily-upgrade.timer systemd-firstboot.service
	;;
sysvinit)
	[ ! -e /lib/systemd/systemd ] || fail "systemd is installed in the sysvinit root"
	dpkg-query -W -f='${Status}\n' sysvinit-core | grep -q "install ok installed" || fail "no sysvinit-core"
	install -m 0755 "$work/gdrkit-lifecycle-boot.init" /etc/init.d/gdrkit-lifecycle-boot
	update-rc.d gdrkit-lifecycle-boot defaults
	;;
*) fail "INIT is systemd or sysvinit, not $init" ;;
esac
echo SCENARIO PASSED
