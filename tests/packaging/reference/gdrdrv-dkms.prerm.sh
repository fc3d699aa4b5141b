#!/bin/sh
# Test fixture: the prerm of the reference GDRCopy 2.6-1 gdrdrv-dkms (facts
# section 6.5): drop gdrdrv 2.6 from DKMS on remove, upgrade and deconfigure.
# debhelper's part (below) stops /etc/init.d/gdrdrv on removal: rmmod
# gdrdrv and the node deleted.
set -e

NAME=gdrdrv
VERSION=2.6

case "$1" in
remove | upgrade | deconfigure)
	dkms remove -m "$NAME" -v "$VERSION" --all || true
	;;
esac

#DEBHELPER#

exit 0
