#!/bin/bash
# Fault (d): a downgrade from this release to the previous one, then purge.
#
#   fault_downgrade.sh OLD NEW KERNEL
#
# Runs as root in a container of the fault image, this release's packages in
# /pkgs/new and the previous release's in /pkgs/old.
set -euo pipefail
# shellcheck source=tests/packaging/lib.sh
. "$(dirname "$0")/lib.sh"
declare_nvidia_target

old=$1
new=$2
kernel=$3
debs_in /pkgs/new
new_debs=("${DEBS[@]}")
debs_in /pkgs/old
old_debs=("${DEBS[@]}")

snapshot >/tmp/before
check "install $new"
apt-get install -y --no-install-recommends "${new_debs[@]}"
expect_installed "$new" "$kernel"

check "downgrade to $old"
apt-get install -y --no-install-recommends --allow-downgrades "${old_debs[@]}" 2>&1 | tee /tmp/downgrade.log
expect_installed "$old" "$kernel"
[ ! -e "/var/lib/dkms/$MODULE/$new" ] || fail "the DKMS tree of $new is left"

check "purge leaves nothing behind"
# dpkg, not apt: the packages are in no repository apt knows.
dpkg --purge "${DKMS_SET[@]}"
expect_removed
expect_no_leftovers /tmp/before
echo SCENARIO PASSED
