#!/bin/sh
# Test fixture: the prerm of NVIDIA's GDRCopy 2.6-1 gdrdrv-dkms (facts
# section 6.5): on remove, upgrade and deconfigure, when DKMS knows any
# gdrdrv, drop gdrdrv 2.6 from every kernel (a failure fails the prerm, as
# there).  debhelper's part (below, dh_installinit in compat 9) runs the
# init script's stop before every removal and upgrade: rmmod gdrdrv, the
# node deleted.
set -e

NAME=gdrdrv
VERSION=2.6

case "$1" in
remove | upgrade | deconfigure)
	if [ -n "$(dkms status -m "$NAME")" ]; then
		dkms remove -m "$NAME" -v "$VERSION" --all
	fi
	;;
failed-upgrade) ;;
*)
	echo "prerm called with unknown argument '$1'" >&2
	exit 1
	;;
esac

#DEBHELPER#

exit 0
