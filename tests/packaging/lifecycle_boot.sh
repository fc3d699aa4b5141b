#!/bin/bash
# What a boot did with gdrdrv, seen from inside the booted VM of the booted
# lifecycle test (tests/python/pkgkit/booted.py), under systemd (run by
# gdrkit-lifecycle-boot.service) or sysvinit-core (by the init script
# gdrkit-lifecycle-boot.init), once the boot has finished.  softgpu, built as
# the module nvidia, stands in for NVIDIA's driver and is loaded at boot from
# /etc/modules-load.d, as a node's driver is.
#
# It only reports; the host judges (pkgkit.booted.judge_boot).  One
# `BOOT: key=value` line per fact into /var/log/gdrkit-lifecycle/boot.log
# (which snapshot does not look at) and the console, then the VM's results
# protocol (command_status, the kernel log, done) and a power-off.
set -uo pipefail

RESULTS_PORT=/dev/ttyS1
KERNEL_LOG_PORT=/dev/ttyS2
MODULE=gdrdrv
LOG=/var/log/gdrkit-lifecycle/boot.log
mkdir -p "$(dirname "$LOG")"
: >"$LOG"

fact() {
	echo "BOOT: $1=$2" | tee -a "$LOG"
}

init=$(cat /proc/1/comm)
if [ "$init" = systemd ]; then
	# Every unit of the boot has run (this one is Type=simple: it does not hold the boot up).
	timeout 600 systemctl is-system-running --wait >/dev/null 2>&1 || true
else
	udevadm settle --timeout=120 || true
fi
fact init "$init"
fact nvidia "$([ -d /sys/module/nvidia ] && echo loaded || echo absent)"
fact gdrdrv "$([ -d /sys/module/$MODULE ] && echo "loaded $(cat /sys/module/$MODULE/version 2>/dev/null)" || echo absent)"
if [ -c /dev/$MODULE ]; then
	fact node "$(stat -c '%a %G' /dev/$MODULE)"
else
	fact node none
fi
fact init_script "$([ -e /etc/init.d/$MODULE ] && echo present || echo absent)"
fact rc_links "$(find /etc/rc?.d -name "*$MODULE" -printf '%p ' 2>/dev/null)"
fact udev_rule "$(find /etc/udev/rules.d /lib/udev/rules.d -name "*$MODULE*.rules" -printf '%p ' 2>/dev/null)"
fact dangling "$(find /etc/systemd/system /etc/rc?.d -xtype l 2>/dev/null | grep -i -e gdr -e cdi | paste -sd' ')"
if [ "$init" = systemd ]; then
	for unit in $MODULE gdrcopy; do
		fact "unit_$unit" "$(systemctl show -p LoadState,ActiveState,Result,FragmentPath,SourcePath "$unit.service" | paste -sd' ')"
	done
	fact failed_units "$(systemctl list-units --failed --plain --no-legend | awk '{ print $1 }' | paste -sd' ')"
	# What the unit that loaded gdrdrv printed (NVIDIA's script, through the generator, prints here).
	journalctl -b -u $MODULE.service -o cat --no-pager 2>/dev/null | sed 's/^/journal: /' | tee -a "$LOG"
fi
dmesg --color=never | grep -i "$MODULE" | sed 's/^/kernel: /' | tee -a "$LOG"
echo "BOOT: end" | tee -a "$LOG"

echo "command_status=0" >"$RESULTS_PORT"
# The port is a tty: dmesg would colour its lines.
dmesg --color=never >"$KERNEL_LOG_PORT"
echo "done=1" >"$RESULTS_PORT"
sync
# No orderly shutdown: its stop actions are not what is being looked at, and
# the report is already written.
poweroff -f
