#!/bin/sh
# Test fixture: the postinst of NVIDIA's GDRCopy 2.6-1 gdrdrv-dkms, as the
# interface facts (section 6.5) and NVIDIA's public packaging describe it:
# the DKMS version is the package's upstream version (2.6, read back from
# dpkg), and DKMS's standard hook gets the name, that version, the package's
# share directory, the dpkg architecture and the version being upgraded
# from.  debhelper's part (below, from dh_installinit --name gdrdrv in
# compat 9) adds the rc links of /etc/init.d/gdrdrv (update-rc.d defaults)
# and starts it (invoke-rc.d).
set -e

NAME=gdrdrv
PACKAGE=$NAME-dkms
VERSION=$(dpkg-query -W -f='${Version}' "$PACKAGE" | sed -e 's/^[0-9]*://' -e 's/-[^-]*$//')
ARCH=$(dpkg --print-architecture)

case "$1" in
configure)
	/usr/lib/dkms/common.postinst "$NAME" "$VERSION" "/usr/share/$PACKAGE" "$ARCH" "$2"
	;;
abort-upgrade | abort-remove | abort-deconfigure) ;;
*)
	echo "postinst called with unknown argument '$1'" >&2
	exit 1
	;;
esac

#DEBHELPER#

exit 0
