#!/bin/bash
# Upgrade of the DKMS set from the previous release to this one, then remove
# and purge: nothing of the old version, then nothing at all, is left.
#
#   upgrade.sh OLD NEW KERNEL PACKAGE...
#
# Runs as root in a container of the scenario image, this release's packages
# in /pkgs/new and the previous release's in /pkgs/old; the packages are the
# DKMS install set of packages/gdrcopy.yaml.
set -euxo pipefail
# shellcheck source=tests/packaging/lib.sh
. "$(dirname "$0")/lib.sh"
declare_nvidia_target

old=$1
new=$2
kernel=$3
shift 3
packages=("$@")
old_debs=()
new_debs=()
for name in "${packages[@]}"; do
	old_debs+=(/pkgs/old/"$name"_*.deb)
	new_debs+=(/pkgs/new/"$name"_*.deb)
done

snapshot >/tmp/before
check "install the previous version $old"
apt-get install -y --no-install-recommends "${old_debs[@]}"
dkms status -m gdrdrv -v "$old" -k "$kernel" | grep -q ': installed'
check "upgrade to $new"
apt-get install -y --no-install-recommends "${new_debs[@]}"
dkms status
dkms status -m gdrdrv -v "$new" -k "$kernel" | grep -q ': installed'
if dkms status -m gdrdrv -v "$old" | grep -q .; then fail "dkms still lists gdrdrv $old"; fi
test ! -e "/usr/src/gdrdrv-$old"
test ! -e "/var/lib/dkms/gdrdrv/$old"
# shellcheck disable=SC2016 # dpkg-query's field, not a shell expansion
test "$(dpkg-query -W -f='${Version}' gdrdrv-dkms)" = "$(deb_version "$new")"
check "remove keeps nothing of the module, purge keeps nothing at all"
apt-get remove -y "${packages[@]}"
if dkms status | grep -q gdrdrv; then fail "dkms still knows gdrdrv after remove: $(dkms status)"; fi
# dpkg, not apt: the removed packages are in no repository apt knows.
dpkg --purge "${packages[@]}"
if grep -l gdrdrv /lib/modules/*/modules.dep 2>/dev/null | grep -q .; then fail "a modules.dep still names gdrdrv"; fi
snapshot >/tmp/after
comm -13 /tmp/before /tmp/after >/tmp/leftovers || true
echo "leftover paths: $(wc -l </tmp/leftovers)"
cat /tmp/leftovers
test ! -s /tmp/leftovers
echo SCENARIO PASSED
