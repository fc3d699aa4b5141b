#!/bin/bash
# Fault (c): upgrade and removal of the DKMS set while gdrdrv is loaded and
# in use (a process holds /dev/gdrdrv open with GPU memory pinned and mapped).
# No package script may unload the busy module; they must say that the new
# module loads at the next reload or reboot, and leave the packages
# consistent.  Once the process lets go, the reload works.
#
#   fault_busy_module.sh OLD NEW
#
# Runs as root in the test VM (the kernel of the root prepared by
# vm_prepare.sh, with the previous release OLD installed by DKMS); nothing is
# loaded yet.  gdrdrv is loaded with dbg_enabled=1 so that its pin count can
# be read at the end.
set -euo pipefail
# shellcheck source=tests/packaging/lib.sh
. "$(dirname "$0")/lib.sh"

old=$1
new=$2
kernel=$(uname -r)
work=/opt/gdrkit-faults
export DEBIAN_FRONTEND=noninteractive

# The test VM's /dev is a bare devtmpfs; udev or systemd would add these
# links on a host, and dkms needs /dev/fd (it uses process substitution).
for link in fd:/proc/self/fd stdin:/proc/self/fd/0 stdout:/proc/self/fd/1 stderr:/proc/self/fd/2; do
	[ -e "/dev/${link%%:*}" ] || ln -s "${link#*:}" "/dev/${link%%:*}"
done
refcount_file=/proc/driver/$MODULE/nv_get_pages_refcount

loaded_version() {
	cat /sys/module/$MODULE/version 2>/dev/null || echo none
}
users() {
	cat /sys/module/$MODULE/refcnt
}
load() {
	modprobe softgpu
	modprobe $MODULE dbg_enabled=1
	echo "loaded $MODULE $(loaded_version) from $(modinfo -n $MODULE)"
}

# Start gdrdrv_holder in the background; wait until it has pinned and mapped.
holder_pid=
start_holder() {
	rm -f /run/holder.ready
	gdrdrv_holder /run/holder.ready &
	holder_pid=$!
	local tick
	for ((tick = 0; tick < 600; tick++)); do
		[ -s /run/holder.ready ] && return 0
		kill -0 "$holder_pid" 2>/dev/null || fail "gdrdrv_holder exited before it was ready"
		sleep 0.1
	done
	fail "gdrdrv_holder was not ready within 60 s"
}
# Release the holder; it checks its mapping once more and must exit 0.
stop_holder() {
	kill -USR1 "$holder_pid"
	wait "$holder_pid" || fail "gdrdrv_holder failed (status $?)"
	holder_pid=
}
expect_pins() {
	local pins
	pins=$(cat "$refcount_file")
	[ "$pins" = "$1" ] || fail "nv_get_pages_refcount is $pins, not $1"
}

check "gdrdrv $old (installed by DKMS) loads"
load
[ "$(loaded_version)" = "$old" ] || fail "loaded $(loaded_version), not $old"
start_holder
check "a process holds /dev/$MODULE with a pinned and mapped buffer: module users $(users), pins $(cat "$refcount_file")"
[ "$(users)" -gt 0 ] || fail "gdrdrv has no users while the holder runs"
expect_pins 1

check "upgrade $old -> $new while gdrdrv $old is loaded and in use"
debs_in "$work/new"
new_debs=("${DEBS[@]}")
apt-get install -y -q --no-install-recommends "${new_debs[@]}" 2>&1 | tee /tmp/upgrade.log
check "gdrdrv was not unloaded: $old still loaded, the holder still alive"
[ "$(loaded_version)" = "$old" ] || fail "loaded: $(loaded_version)"
kill -0 "$holder_pid" || fail "the holder is gone"
expect_pins 1
check "the postinst said that $new loads at the next reload or reboot"
grep -F "$MODULE: version $old stays loaded (in use: " /tmp/upgrade.log
grep -F "$MODULE: the installed $new loads at the next reload of the module, or at reboot." /tmp/upgrade.log
grep -F "then run: rmmod $MODULE && modprobe $MODULE" /tmp/upgrade.log
! grep -E "(Module|module) $MODULE is in use|rmmod: ERROR|modprobe: FATAL" /tmp/upgrade.log || fail "a package script tried to unload gdrdrv"
expect_installed "$new" "$kernel"

check "the holder lets go (its mapping still held the pattern); the reload loads $new"
stop_holder
expect_pins 0
[ "$(users)" = 0 ] || fail "gdrdrv still has $(users) users"
rmmod $MODULE
modprobe $MODULE dbg_enabled=1
[ "$(loaded_version)" = "$new" ] || fail "after the reload: $(loaded_version), not $new"
echo "reloaded: $MODULE $(loaded_version)"

check "remove gdrdrv-dkms and the meta package while gdrdrv $new is loaded and in use"
start_holder
expect_pins 1
apt-get remove -y -q gdrdrv-dkms gdrcopy 2>&1 | tee /tmp/remove.log
check "gdrdrv was not unloaded, and the prerm said so and how to unload it"
[ "$(loaded_version)" = "$new" ] || fail "loaded: $(loaded_version)"
kill -0 "$holder_pid" || fail "the holder is gone"
grep -F "$MODULE: version $new stays loaded (in use: " /tmp/remove.log
grep -F "then run: rmmod $MODULE (or reboot)." /tmp/remove.log
expect_removed
for name in libgdrapi gdrcopy-tests; do
	state=$(package_state "$name")
	[ "$state" = "ii $(deb_version "$new")" ] || fail "$name is '$state'"
done

check "the holder lets go; gdrdrv unloads cleanly"
stop_holder
expect_pins 0
rmmod $MODULE
[ ! -d /sys/module/$MODULE ] || fail "gdrdrv is still loaded"
rmmod softgpu

check "purge then leaves no gdrdrv-dkms state"
dpkg --purge gdrdrv-dkms gdrcopy
expect_removed
echo SCENARIO PASSED
