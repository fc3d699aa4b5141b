#!/bin/sh
# Test fixture: the postinst of the reference GDRCopy 2.6-1 gdrdrv-dkms, as
# the interface facts (section 6.5) describe it: DKMS's standard hook adds,
# builds and installs gdrdrv 2.6; debhelper's part (below, from
# dh_installinit --name gdrdrv) adds the rc links of /etc/init.d/gdrdrv and
# starts it.
set -e

NAME=gdrdrv
VERSION=2.6

case "$1" in
configure)
	/usr/lib/dkms/common.postinst "$NAME" "$VERSION" "/usr/share/$NAME-dkms" ""
	;;
abort-upgrade | abort-remove | abort-deconfigure) ;;
*)
	echo "postinst called with unknown argument '$1'" >&2
	exit 1
	;;
esac

#DEBHELPER#

exit 0
