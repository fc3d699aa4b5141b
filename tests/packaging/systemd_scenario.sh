#!/bin/bash
# gdrdrv.service under Debian's own systemd as PID 1 (run by
# gdrkit-scenario.service in the VM that tests/python/pkgkit/systemd.py boots
# twice).  softgpu, built under the module name nvidia, stands in for the
# NVIDIA driver and is loaded at boot by systemd-modules-load, as a driver is.
#
#   systemd_scenario.sh install OLD KERNEL    first boot: install OLD, then start, stop,
#                                             restart, and the unit's GDRCopy name
#   systemd_scenario.sh reboot OLD NEW KERNEL second boot: gdrdrv was loaded at boot; upgrade
#                                             to NEW, then remove (gdrdrv stays loaded) and purge
#
# It reports `command_status` and `done` to the results port, the kernel log
# to the kernel-log port, and powers the VM off, as gdrkit.vm's /init does.
set -uo pipefail
# shellcheck source=tests/packaging/lib.sh
. "$(dirname "$0")/lib.sh"

# On a failure, what the units and the journal say, before lib.sh's verdict.
fail() {
	echo "FAILED: $*"
	SYSTEMD_COLORS=0 systemctl --no-pager status nvidia-persistenced.service "$MODULE.service" 2>&1 | tail -n 40
	journalctl --no-pager -b -n 60 2>&1
	exit 1
}

RESULTS_PORT=/dev/ttyS1
KERNEL_LOG_PORT=/dev/ttyS2
work=$(dirname "$0")
export DEBIAN_FRONTEND=noninteractive

# The prebuilt-module set: DKMS builds of gdrdrv take 5-15 min under TCG, and
# this package ships the same unit, udev rule and maintainer script parts.
kmod_set() {
	echo "gdrdrv-modules-$1" libgdrapi gdrcopy-tests
}

# $1: the unit (gdrdrv or gdrcopy); its ActiveState.
active_state() {
	systemctl show -p ActiveState --value "$1.service"
}
expect_loaded() {
	[ -d /sys/module/$MODULE ] || fail "$MODULE is not loaded ($*)"
	[ -c /dev/$MODULE ] || fail "/dev/$MODULE does not exist ($*)"
	echo "$MODULE $(cat /sys/module/$MODULE/version) loaded, $(stat -c '%A %G' /dev/$MODULE) /dev/$MODULE"
}
expect_unloaded() {
	[ ! -d /sys/module/$MODULE ] || fail "$MODULE is still loaded ($*)"
}
expect_state() {
	local state
	state=$(active_state "$1")
	[ "$state" = "$2" ] || fail "$1.service is $state, not $2"
}
show_unit() {
	echo "--- systemctl status $MODULE"
	SYSTEMD_COLORS=0 systemctl status --no-pager --lines=20 "$MODULE.service" || true
	echo "--- journalctl -u $MODULE"
	journalctl --no-pager -o short-monotonic -u "$MODULE.service" || true
	echo "---"
}
# The packages of set $2 (a directory) for kernel $1, as apt-get arguments.
set_files() {
	local name file
	FILES=()
	for name in $(kmod_set "$1"); do
		file=$(compgen -G "$2/${name}_*.deb") || fail "no ${name}_*.deb in $2"
		FILES+=("$file")
	done
}

install_phase() {
	local old=$1 kernel=$2
	check "systemd is PID 1 and the system came up"
	[ "$(cat /proc/1/comm)" = systemd ] || fail "PID 1 is $(cat /proc/1/comm)"
	check "the NVIDIA driver (softgpu as nvidia) was loaded at boot, and persistenced's stand-in holds it"
	[ -d /sys/module/nvidia ] || fail "nvidia is not loaded: see systemd-modules-load.service"
	expect_state nvidia-persistenced active
	expect_unloaded "before any package"

	check "install $old ($(kmod_set "$kernel")) under systemd"
	set_files "$kernel" "$work/old"
	apt-get install -y -q --no-install-recommends "${FILES[@]}" || fail "apt-get install $old"
	check "the postinst enabled and started $MODULE.service (the driver is loaded)"
	[ "$(systemctl is-enabled $MODULE.service)" = enabled ] || fail "$MODULE.service is $(systemctl is-enabled $MODULE.service)"
	expect_state $MODULE active
	expect_loaded "after install"

	check "$MODULE.service is ordered after the module loader and the NVIDIA units"
	after=$(systemctl show -p After --value $MODULE.service)
	for unit in systemd-modules-load.service nvidia-persistenced.service; do
		case " $after " in *" $unit "*) ;; *) fail "$MODULE.service is not After=$unit (After=$after)" ;; esac
	done

	# With persistenced stopped, nvidia is held by gdrdrv alone: `modprobe -r
	# gdrdrv` would unload it too, as it would on a node without persistenced.
	check "systemctl stop unloads $MODULE alone: nvidia, held by nothing else, stays loaded"
	systemctl stop nvidia-persistenced.service || fail "systemctl stop nvidia-persistenced"
	[ "$(cat /sys/module/nvidia/refcnt)" = 1 ] || fail "nvidia's refcnt is $(cat /sys/module/nvidia/refcnt), not 1 ($MODULE's)"
	systemctl stop $MODULE.service || fail "systemctl stop"
	expect_state $MODULE inactive
	expect_unloaded "after stop"
	[ -d /sys/module/nvidia ] || fail "stopping $MODULE.service unloaded nvidia"
	echo "nvidia still loaded after systemctl stop $MODULE (refcnt $(cat /sys/module/nvidia/refcnt))"
	systemctl start nvidia-persistenced.service || fail "systemctl start nvidia-persistenced"
	expect_state nvidia-persistenced active
	check "systemctl start loads it"
	systemctl start $MODULE.service || fail "systemctl start"
	expect_state $MODULE active
	expect_loaded "after start"
	check "systemctl restart unloads and loads it again"
	before=$(systemctl show -p ExecMainStartTimestampMonotonic --value $MODULE.service)
	systemctl restart $MODULE.service || fail "systemctl restart"
	expect_state $MODULE active
	expect_loaded "after restart"
	[ "$(systemctl show -p ExecMainStartTimestampMonotonic --value $MODULE.service)" != "$before" ] ||
		fail "restart did not run ExecStart again"

	check "GDRCopy's unit name: gdrcopy.service is $MODULE.service"
	[ "$(systemctl show -p Id --value gdrcopy.service)" = $MODULE.service ] ||
		fail "gdrcopy.service is $(systemctl show -p Id --value gdrcopy.service) (LoadState $(systemctl show -p LoadState --value gdrcopy.service))"
	systemctl stop gdrcopy.service || fail "systemctl stop gdrcopy"
	expect_unloaded "after systemctl stop gdrcopy"
	systemctl start gdrcopy.service || fail "systemctl start gdrcopy"
	expect_loaded "after systemctl start gdrcopy"
	expect_state gdrcopy active

	check "journalctl -u $MODULE shows the unit's starts and stops"
	journal=$(journalctl --no-pager -u $MODULE.service)
	[ "$(grep -c 'Finished .*Load the gdrdrv kernel module\|Started .*Load the gdrdrv kernel module' <<<"$journal")" -ge 4 ] ||
		fail "expected 4 starts of $MODULE.service in its journal: $journal"
	grep -q 'Stopped .*Load the gdrdrv kernel module' <<<"$journal" || fail "no stop in the journal: $journal"
	show_unit
}

reboot_phase() {
	local old=$1 new=$2 kernel=$3
	check "systemd is PID 1 again (second boot)"
	[ "$(cat /proc/1/comm)" = systemd ] || fail "PID 1 is $(cat /proc/1/comm)"
	check "$MODULE.service loaded $MODULE at boot, after the NVIDIA driver"
	expect_state $MODULE active
	expect_loaded "at boot"
	[ "$(cat /sys/module/$MODULE/version)" = "$old" ] || fail "the module loaded at boot is $(cat /sys/module/$MODULE/version), not $old"
	[ -e /sys/module/nvidia/holders/$MODULE ] || fail "$MODULE does not hold nvidia (built against its symbols?)"
	loader=$(systemctl show -p ActiveEnterTimestampMonotonic --value systemd-modules-load.service)
	started=$(systemctl show -p ExecMainStartTimestampMonotonic --value $MODULE.service)
	echo "systemd-modules-load.service active at ${loader} us, $MODULE.service started at ${started} us (monotonic)"
	[ "$started" -ge "$loader" ] || fail "$MODULE.service started before systemd-modules-load.service finished"
	journalctl --no-pager -b -u $MODULE.service | grep -q 'Load the gdrdrv kernel module' ||
		fail "this boot's journal has no line of $MODULE.service"
	show_unit

	check "upgrade to $new under systemd: the unit stays enabled, the loaded module stays loaded"
	set_files "$kernel" "$work/new"
	apt-get install -y -q --no-install-recommends "${FILES[@]}" || fail "apt-get install $new"
	[ "$(systemctl is-enabled $MODULE.service)" = enabled ] || fail "$MODULE.service is $(systemctl is-enabled $MODULE.service) after the upgrade"
	expect_state $MODULE active
	expect_loaded "after the upgrade"
	check "systemctl restart loads the new module"
	systemctl restart $MODULE.service || fail "systemctl restart after the upgrade"
	expect_loaded "after the restart"
	[ "$(cat /sys/module/$MODULE/version)" = "$new" ] || fail "the module after restart is $(cat /sys/module/$MODULE/version), not $new"

	# No maintainer script stops the unit or unloads gdrdrv (dh_installsystemd
	# --no-start: no prerm; a program may have the node open): the postrm
	# reloads systemd and says how to unload it.
	check "removal: $MODULE stays loaded, the postrm says so and how to unload it"
	removal=$(apt-get remove -y -q "gdrdrv-modules-$kernel" 2>&1) || fail "apt-get remove: $removal"
	echo "$removal" | grep -v '^(Reading database'
	grep -q "$MODULE: version $new stays loaded" <<<"$removal" || fail "the removal did not say that $MODULE stays loaded"
	expect_loaded "after the removal"
	[ "$(systemctl show -p LoadState --value $MODULE.service)" = not-found ] ||
		fail "$MODULE.service is still installed after the removal"
	check "rmmod $MODULE, as the removal said: nvidia stays loaded"
	rmmod $MODULE || fail "rmmod $MODULE after the removal"
	expect_unloaded "after rmmod"
	[ -d /sys/module/nvidia ] || fail "unloading $MODULE unloaded nvidia too"
	check "purge: no unit, no enablement links, no alias left"
	apt-get purge -y -q "gdrdrv-modules-$kernel" libgdrapi gdrcopy-tests || fail "apt-get purge"
	systemctl daemon-reload
	for link in /etc/systemd/system/multi-user.target.wants/$MODULE.service /etc/systemd/system/gdrcopy.service; do
		if [ -e "$link" ] || [ -L "$link" ]; then
			fail "$link is left after the purge"
		fi
	done
	[ "$(systemctl show -p LoadState --value $MODULE.service)" = not-found ] ||
		fail "$MODULE.service is still known after the purge ($(systemctl show -p LoadState --value $MODULE.service))"
}

finish() {
	local status=$1
	echo "command_status=$status" >"$RESULTS_PORT"
	dmesg >"$KERNEL_LOG_PORT"
	echo "done=1" >"$RESULTS_PORT"
	sync
	systemctl --no-block poweroff
}

phase=${1:-}
shift || true
# The console interleaves kernel messages; the host reads this copy too.
exec > >(tee -a "/var/log/gdrkit-systemd-$phase.log") 2>&1
case "$phase" in
install) (install_phase "$@" && echo SCENARIO PASSED) ;;
reboot) (reboot_phase "$@" && echo SCENARIO PASSED) ;;
*) (fail "unknown phase '$phase': install or reboot") ;;
esac
finish $?
