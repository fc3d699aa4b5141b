#!/bin/bash
# Puts a root with our packages back as they were before issue 41's fix, to
# show what a boot did then (the booted lifecycle test's before run,
# pkgkit.booted with before_fix): NVIDIA's /etc/init.d/gdrdrv and its rc
# links kept beside our packages (dpkg-maintscript-helper skipped the
# rm_conffile of gdrdrv-dkms:amd64), and our udev rule without the modprobe
# that loads gdrdrv where systemd is not running (a copy in /etc/udev/rules.d
# without that line replaces it).
#
#   lifecycle_unfix.sh NVIDIA_DEBS_DIR
set -euo pipefail
# shellcheck source=tests/packaging/lib.sh
. "$(dirname "$0")/lib.sh"

check "NVIDIA's init script and its rc links back beside ours, the udev rule's modprobe gone"
deb=$(compgen -G "$1/gdrdrv-dkms_*.deb") || fail "no gdrdrv-dkms in $1"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C / ./etc/init.d/$MODULE
update-rc.d $MODULE defaults
rule=$(dpkg -L gdrdrv-dkms | grep "/udev/rules.d/60-$MODULE.rules$") || fail "gdrdrv-dkms has no udev rule"
grep -v 'TEST!="/run/systemd/system"' "$rule" >/etc/udev/rules.d/60-$MODULE.rules
echo SCENARIO PASSED
