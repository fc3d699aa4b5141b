#!/bin/bash
# Fault (b): the kernel is installed but its headers are not when the DKMS
# set is installed.  The packages must install anyway, say which headers to
# install and what to run; once the headers are there, `dkms autoinstall`
# completes and the state is the same as a normal install.
#
#   fault_no_headers.sh VERSION KERNEL
#
# Runs as root in a container of the fault image (kernel image and headers of
# KERNEL installed, the headers' .deb kept in /opt/extra-debs), the packages
# in /pkgs/new.
set -euo pipefail
# shellcheck source=tests/packaging/lib.sh
. "$(dirname "$0")/lib.sh"
declare_nvidia_target

version=$1
kernel=$2
debs_in /pkgs/new
debs=("${DEBS[@]}")
headers_deb=$(compgen -G "/opt/extra-debs/linux-headers-${kernel}_*.deb") || fail "no headers .deb in /opt/extra-debs"

check "the headers of $kernel are removed; the kernel stays installed"
dpkg -r "linux-headers-$kernel"
[ -d "/lib/modules/$kernel/kernel" ] || fail "no modules of $kernel: the kernel image is not installed"
[ ! -e "/lib/modules/$kernel/build" ] || fail "/lib/modules/$kernel/build is still there"

check "apt-get install of ${DKMS_SET[*]} succeeds without headers"
apt-get install -y --no-install-recommends "${debs[@]}" 2>&1 | tee /tmp/apt.log

check "the postinst named the missing headers and the command to run afterwards"
grep -F "$MODULE: no kernel headers for $kernel, so DKMS did not build $MODULE for it." /tmp/apt.log
grep -F "$MODULE: install linux-headers-$kernel, then run: dkms autoinstall -k $kernel" /tmp/apt.log

check "every package is configured; dkms holds the source, built for no kernel"
audit=$(dpkg --audit)
[ -z "$audit" ] || fail "dpkg --audit: $audit"
for name in "${DKMS_SET[@]}"; do
	state=$(package_state "$name")
	[ "$state" = "ii $(deb_version "$version")" ] || fail "$name is '$state', not 'ii $(deb_version "$version")'"
done
status=$(dkms status -m "$MODULE")
echo "$status"
[ "$status" = "$MODULE/$version: added" ] || fail "dkms status: '$status'"
[ -z "$(find /lib/modules -name "$MODULE.ko*")" ] || fail "a module was installed without headers"

check "the headers of $kernel are installed (their hook runs dkms autoinstall)"
dpkg -i "$headers_deb" 2>&1 | tee /tmp/headers.log
echo "dkms status after the headers' hook: $(dkms status -m "$MODULE")"

check "dkms autoinstall completes"
dkms autoinstall -k "$kernel"
expect_installed "$version" "$kernel"
echo SCENARIO PASSED
