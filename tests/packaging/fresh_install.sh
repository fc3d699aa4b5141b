#!/bin/bash
# Fresh install of the DKMS set: DKMS builds gdrdrv for the installed kernel
# and, once its headers come, for a second one; purge leaves no file behind.
#
#   fresh_install.sh VERSION KERNEL OTHER_KERNEL UDEVRULESDIR MODPROBEDIR UNITDIR RUNTIME PACKAGE...
#
# Runs as root in a container of the scenario image, this release's packages
# in /pkgs/new, OTHER_KERNEL's headers in /opt/extra-debs.  The directories
# are the family's (where the rule, modprobe.d file and unit must be); the
# packages are the DKMS install set of packages/gdrcopy.yaml, RUNTIME the one
# of them that carries the library (first installed alone).
set -euxo pipefail
# shellcheck source=tests/packaging/lib.sh
. "$(dirname "$0")/lib.sh"
declare_nvidia_target

version=$1
kernel=$2
other=$3
udevrulesdir=$4
modprobedir=$5
unitdir=$6
runtime=$7
shift 7
packages=("$@")
debs=()
for name in "${packages[@]}"; do
	debs+=(/pkgs/new/"$name"_*.deb)
done

snapshot >/tmp/before
# NCCL, aws-ofi-nccl, DPDK and libfabric < 2.4 dlopen("libgdrapi.so"): a node
# with only the runtime package must give it to them, not only libgdrapi.so.2.
check "$runtime alone: dlopen() finds libgdrapi.so and libgdrapi.so.2"
apt-get install -y --no-install-recommends /pkgs/new/"$runtime"_*.deb
python3 "$(dirname "$0")/dlopen_by_name.py" libgdrapi.so libgdrapi.so.2
check "apt installs ${packages[*]} and DKMS builds gdrdrv for $kernel"
apt-get install -y --no-install-recommends "${debs[@]}"
dkms status
dkms status -m gdrdrv -v "$version" -k "$kernel" | grep -q ': installed'
ko=$(find "/lib/modules/$kernel" -name 'gdrdrv.ko*' | head -n1)
test -n "$ko"
check "modinfo version of $ko"
modinfo -F version "$ko"
check "udev rule, modprobe.d and unit are installed"
test -f "$udevrulesdir/60-gdrdrv.rules"
test -f "$modprobedir/gdrdrv.conf"
test -f "$unitdir/gdrdrv.service"
check "gdrcopy-tests does not depend on libcuda"
# shellcheck disable=SC2016 # dpkg-query's field, not a shell expansion
if dpkg-query -W -f='${Depends}' gdrcopy-tests | grep -qi cuda; then fail "gdrcopy-tests depends on libcuda"; fi
check "headers of $other installed later: DKMS builds for it too"
dpkg -i /opt/extra-debs/linux-headers-"$other"_*.deb
dkms autoinstall -k "$other"
dkms status -m gdrdrv -v "$version" -k "$other" | grep -q ': installed'
check "purge leaves no file behind"
apt-get purge -y "${packages[@]}"
if dpkg -l | grep -E 'gdrdrv|gdrcopy|libgdrapi' | grep -v '^un'; then fail "packages left after purge"; fi
if dkms status | grep -q gdrdrv; then fail "dkms still knows gdrdrv: $(dkms status)"; fi
test ! -e "/usr/src/gdrdrv-$version"
test ! -e /var/lib/dkms/gdrdrv
if grep -l gdrdrv /lib/modules/*/modules.dep 2>/dev/null | grep -q .; then fail "a modules.dep still names gdrdrv"; fi
dpkg -L "linux-headers-$other" >/tmp/headers-files
snapshot >/tmp/after
comm -13 /tmp/before /tmp/after | grep -vxF -f /tmp/headers-files |
	grep -v -e "^/lib/modules/$other" -e "^/usr/lib/modules/$other" -e '^/usr/src/linux-headers-' \
		>/tmp/leftovers || true
echo "leftover paths: $(wc -l </tmp/leftovers)"
cat /tmp/leftovers
test ! -s /tmp/leftovers
echo "checked $(wc -l </tmp/before) paths of the file system before and after"
echo SCENARIO PASSED
