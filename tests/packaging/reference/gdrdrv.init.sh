#!/bin/bash
# Test fixture: /etc/init.d/gdrdrv of NVIDIA's GDRCopy 2.6-1 gdrdrv-dkms,
# written from what the interface facts (section 6.3) and NVIDIA's public
# packaging say it does, not copied.  What a host sees of it:
#   - its LSB header provides "gdrcopy" (not the script's name), starts in
#     runlevels 2-5 and stops in 0, 1 and 6, with no dependencies;
#   - start reports whether the nvidia module is loaded but goes on either
#     way, loads gdrdrv with modprobe when modinfo finds one, then deletes
#     /dev/gdrdrv and makes it again with mknod, mode 0666, from the major
#     that the first /proc/devices line naming gdrdrv gives;
#   - stop unloads gdrdrv with rmmod and deletes /dev/gdrdrv*;
#   - no status action; every failure is logged through Debian's
#     log_failure_msg, which returns 0, so the script exits 0 whatever
#     happened (a failed start never fails the package's postinst).
# Our gdrdrv is a misc device with no major of its own in /proc/devices, so
# this start deletes the node that the kernel made and cannot make it again:
# the reason our packages take this script away.
### BEGIN INIT INFO
# Provides:       gdrcopy
# Required-Start:
# Required-Stop:
# Default-Start:  2 3 4 5
# Default-Stop:   0 1 6
# Description:    gdrdrv kernel module for GDRCopy (test fixture)
### END INIT INFO

# shellcheck source=/dev/null  # the target host's, not ours
. /lib/lsb/init-functions

MODULE=gdrdrv
NODE=/dev/$MODULE

loaded() {
	/sbin/lsmod | grep -qw "$1"
}

start() {
	if loaded nvidia; then
		log_success_msg "nvidia is loaded"
	else
		log_failure_msg "nvidia is not loaded"
	fi
	if loaded "$MODULE"; then
		echo "$MODULE is loaded already"
	elif [ -z "$(modinfo "$MODULE" 2>/dev/null | awk '$1 == "filename:" { print $2 }')" ]; then
		echo "no $MODULE module for this kernel"
		logger -i "$MODULE: no module for this kernel"
		return 0
	elif /sbin/modprobe "$MODULE"; then
		log_success_msg "$MODULE loaded"
	else
		log_failure_msg "$MODULE could not be loaded"
	fi
	major=$(grep -F "$MODULE" /proc/devices | awk '{ print $1; exit }')
	logger -i "$MODULE: major number ${major:-none}"
	rm -f "$NODE"
	if mknod -m 666 "$NODE" c "$major" 0 2>/dev/null; then
		log_success_msg "$NODE created"
	else
		log_failure_msg "$NODE not created"
	fi
}

stop() {
	if /sbin/rmmod "$MODULE"; then
		log_success_msg "$MODULE unloaded"
	else
		log_failure_msg "$MODULE could not be unloaded"
	fi
	rm -f "$NODE"*
}

case "$1" in
start) start ;;
stop) stop ;;
restart)
	stop
	start
	;;
*)
	echo "Usage: $0 {start|stop|restart}"
	exit 1
	;;
esac
exit 0
