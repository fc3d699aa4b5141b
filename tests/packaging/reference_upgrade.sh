#!/bin/bash
# Upgrade from the reference GDRCopy's own 2.6-1 packages (rebuilt to their
# layout: tests/python/pkgkit/reference.py) to this release, then purge.  The
# reference's SysV script /etc/init.d/gdrdrv (a conffile) and its rc links
# must go with the upgrade, and nothing of the reference may outlive the
# purge.  In the VM, gdrdrv 2.6 is loaded during the upgrade, and after each
# step gdrdrv must be loaded with /dev/gdrdrv there.
#
#   reference_upgrade.sh WHERE NEW KERNEL [modified]
#
# WHERE: container (no module loading; the reference set in /pkgs/old, this
# release in /pkgs/new) or vm (the root made by vm_prepare.sh with the
# reference set installed; this release in /opt/gdrkit-faults/new).
# `modified`: the admin changed /etc/init.d/gdrdrv first; the upgrade keeps
# that copy as /etc/init.d/gdrdrv.dpkg-bak (and drops the links), purge
# deletes it.
set -euo pipefail
# shellcheck source=tests/packaging/lib.sh
. "$(dirname "$0")/lib.sh"

where=$1
new=$2
kernel=$3
modified=${4:-}
ref=2.6
init_script=/etc/init.d/$MODULE
export DEBIAN_FRONTEND=noninteractive

rc_links() {
	compgen -G "/etc/rc?.d/[SK][0-9][0-9]$MODULE" || true
}
loaded_version() {
	cat /sys/module/$MODULE/version 2>/dev/null || echo none
}
# In the VM: gdrdrv is loaded (at version $1) and its node exists.
expect_loaded() {
	[ "$where" = vm ] || return 0
	check "gdrdrv $1 is loaded and /dev/$MODULE exists"
	[ "$(loaded_version)" = "$1" ] || fail "loaded: $(loaded_version), not $1"
	[ -c /dev/$MODULE ] || fail "/dev/$MODULE does not exist (gdrdrv $(loaded_version) loaded)"
	ls -l /dev/$MODULE
}

if [ "$where" = vm ]; then
	# The test VM's /dev is a bare devtmpfs; dkms needs /dev/fd.
	for link in fd:/proc/self/fd stdin:/proc/self/fd/0 stdout:/proc/self/fd/1 stderr:/proc/self/fd/2; do
		[ -e "/dev/${link%%:*}" ] || ln -s "${link#*:}" "/dev/${link%%:*}"
	done
	new_dir=/opt/gdrkit-faults/new
else
	new_dir=/pkgs/new
	snapshot >/tmp/before
	check "install the reference-layout set $ref-1"
	debs_in /pkgs/old
	apt-get install -y -q --no-install-recommends "${DEBS[@]}"
fi
debs_in "$new_dir"
new_debs=("${DEBS[@]}")

check "the reference's gdrdrv-dkms $ref-1: $init_script is its conffile, with seven rc links"
for name in "${DKMS_SET[@]}"; do
	[ "$(package_state "$name")" = "ii $ref-1" ] || fail "$name is '$(package_state "$name")', not 'ii $ref-1'"
done
dpkg-query -W -f='${Conffiles}\n' gdrdrv-dkms | grep -q " $init_script " || fail "$init_script is not a conffile of gdrdrv-dkms"
rc_links
[ "$(rc_links | wc -l)" = 7 ] || fail "rc links: $(rc_links | tr '\n' ' ')"
# NVIDIA's postinst hands DKMS the dpkg architecture (amd64), not uname -m's.
[ "$(dkms status -m $MODULE)" = "$MODULE/$ref, $kernel, $(dpkg --print-architecture): installed" ] || fail "dkms status: $(dkms status -m $MODULE)"

if [ "$where" = vm ]; then
	check "gdrdrv $ref loads (softgpu as the NVIDIA driver)"
	modprobe softgpu
	modprobe $MODULE
	expect_loaded 2.6.0
fi
if [ "$modified" = modified ]; then
	check "the admin changes $init_script"
	echo "# changed by the admin" >>"$init_script"
fi

check "upgrade $ref-1 -> $new-1"
apt-get install -y -q --no-install-recommends "${new_debs[@]}" 2>&1 | tee /tmp/upgrade.log
expect_installed "$new" "$kernel"
check "$init_script is gone and no longer a conffile; no rc link is left"
[ ! -e "$init_script" ] || fail "$init_script is still there"
for leftover in "$init_script.dpkg-remove" "$init_script.dpkg-backup"; do
	[ ! -e "$leftover" ] || fail "dpkg-maintscript-helper left $leftover"
done
! dpkg-query -W -f='${Conffiles}\n' gdrdrv-dkms | grep -q " $init_script " || fail "dpkg still lists $init_script as a conffile"
[ -z "$(rc_links)" ] || fail "rc links left: $(rc_links | tr '\n' ' ')"
if [ "$modified" = modified ]; then
	check "the admin's copy is kept as $init_script.dpkg-bak"
	grep -q "changed by the admin" "$init_script.dpkg-bak" || fail "no $init_script.dpkg-bak with the admin's change"
else
	[ ! -e "$init_script.dpkg-bak" ] || fail "$init_script.dpkg-bak kept, but nobody changed the script"
fi
check "nothing of gdrdrv $ref is left: /usr/src/$MODULE-$ref, its DKMS tree"
[ ! -e /usr/src/$MODULE-$ref ] || fail "/usr/src/$MODULE-$ref is left"
[ ! -e /var/lib/dkms/$MODULE/$ref ] || fail "/var/lib/dkms/$MODULE/$ref is left"

if [ "$where" = vm ]; then
	check "gdrdrv 2.6.0 was not unloaded by the upgrade, and the postinst said how to switch"
	expect_loaded 2.6.0
	grep -F "$MODULE: version 2.6.0 stays loaded (not in use); it was not unloaded." /tmp/upgrade.log
	check "unloaded as the reference's stop leaves it (rmmod, node deleted); configuring again loads $new"
	rmmod $MODULE
	rm -f /dev/$MODULE
	# What `dpkg --configure` and the end of a reinstall run (DKMS's
	# common.postinst rebuilds gdrdrv each time: under TCG, 15-25 min).
	# dpkg-maintscript-helper needs to be told whose script runs, as dpkg does.
	DPKG_MAINTSCRIPT_PACKAGE=gdrdrv-dkms DPKG_MAINTSCRIPT_NAME=postinst DPKG_MAINTSCRIPT_ARCH=all \
		/var/lib/dpkg/info/gdrdrv-dkms.postinst configure "$(deb_version "$new")" 2>&1 | tee /tmp/configure.log
	grep -F "$MODULE: version $new loaded, /dev/$MODULE ready" /tmp/configure.log
	expect_loaded "$new"
fi

check "purge the DKMS set"
dpkg --purge "${DKMS_SET[@]}"
expect_removed
check "nothing of the reference's packages is left: $init_script*, rc links"
[ -z "$(compgen -G "$init_script*")" ] || fail "left: $(compgen -G "$init_script*" | tr '\n' ' ')"
[ -z "$(rc_links)" ] || fail "rc links left: $(rc_links | tr '\n' ' ')"
if [ "$where" = vm ]; then
	check "the purge left gdrdrv $new loaded (never unloaded by a package); it unloads cleanly"
	expect_loaded "$new"
	rmmod $MODULE
	rmmod softgpu
else
	expect_no_leftovers /tmp/before
fi
echo SCENARIO PASSED
