#!/bin/sh
# no-driver.sh COMMAND [ARG]...: run COMMAND as on a host whose NVIDIA kernel
# driver is not loaded, without touching this host's /dev.
#
# NVIDIA's user-space libraries create the nodes they miss when they run as
# root (libcuda and nvidia-smi mknod /dev/nvidiactl, 195:255, even with no
# driver to answer it).  So COMMAND runs in a mount namespace of its own
# whose /dev is a fresh tmpfs holding only the usual character devices;
# whatever they create there goes with the namespace.  Needs root
# (unshare --mount).
set -eu

if [ $# -eq 0 ]; then
	echo "usage: $0 COMMAND [ARG]..." >&2
	exit 2
fi
if [ "$1" != "--in-namespace" ]; then
	exec unshare --mount --propagation private "$0" --in-namespace "$@"
fi
shift

dev=$(mktemp -d)
mount -t tmpfs -o mode=0755,size=1m nodriver-dev "$dev"
for node in null zero full random urandom tty; do
	if [ -c "/dev/$node" ]; then
		touch "$dev/$node"
		mount --bind "/dev/$node" "$dev/$node"
	fi
done
mkdir "$dev/shm" "$dev/pts"
mount -t tmpfs -o mode=1777 nodriver-shm "$dev/shm"
ln -s /proc/self/fd "$dev/fd"
mount --move "$dev" /dev
rmdir "$dev" 2>/dev/null || true
exec "$@"
