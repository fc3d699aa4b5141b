#!/bin/bash
# The published apt repository, as a fleet host uses it: apt is configured
# by nothing but the published .sources file (the key inline in Signed-By),
# and `apt-get install gdrcopy` succeeds with signature verification on.
# First the same repository with another key: apt must refuse it.
#
#   apt_from_sources.sh SOURCES WRONG_KEY_SOURCES VERSION KERNEL
#
# Runs as root in a container of the fault image (dkms and the headers of
# KERNEL installed), the repository served over loopback HTTP by the test.
set -euo pipefail
# shellcheck source=tests/packaging/lib.sh
. "$(dirname "$0")/lib.sh"
declare_nvidia_target

sources=$1
wrong=$2
version=$3
kernel=$4

check "the .sources file asks for no exemption from signature checks"
if grep -Eiq 'trusted|allow-insecure|allow-weak|allow-downgrade-to-insecure' "$sources"; then
	fail "$sources relaxes signature checks"
fi

check "apt is configured by the published .sources file alone"
rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*
rm -rf /var/lib/apt/lists/*
mkdir -p /var/lib/apt/lists/partial

check "a repository signed by another key than Signed-By names is refused"
cp "$wrong" /etc/apt/sources.list.d/gdrcopy.sources
if apt-get update >/tmp/wrong.log 2>&1; then
	cat /tmp/wrong.log
	fail "apt-get update accepted a repository signed by a key it was not given"
fi
grep -E 'NO_PUBKEY|not signed|signatures were invalid|signature' /tmp/wrong.log || fail "no signature error in: $(cat /tmp/wrong.log)"
if apt-cache show gdrcopy >/dev/null 2>&1; then
	fail "apt knows gdrcopy from the wrongly signed repository"
fi

check "apt-get update verifies the repository with the key of the .sources file"
cp "$sources" /etc/apt/sources.list.d/gdrcopy.sources
rm -rf /var/lib/apt/lists/*
mkdir -p /var/lib/apt/lists/partial
apt-get update 2>&1 | tee /tmp/update.log
if grep -E '^(W|E): ' /tmp/update.log; then
	fail "apt-get update warned or failed"
fi

check "apt-get install -y gdrcopy installs $version from the repository"
apt-get install -y gdrcopy
for name in "${DKMS_SET[@]}"; do
	state=$(package_state "$name")
	[ "$state" = "ii $version" ] || fail "$name: $state, expected ii $version"
done
apt-cache policy gdrcopy | grep -q 'http://127.0.0.1' || fail "gdrcopy did not come from the repository"

module_version=$(release_of_deb_version "$version") # DKMS knows the module's version (2.6.1)
check "DKMS built gdrdrv $module_version for $kernel"
dkms status -m "$MODULE" -v "$module_version" -k "$kernel" | grep -q ': installed' || fail "dkms status: $(dkms status)"

echo "SCENARIO PASSED"
