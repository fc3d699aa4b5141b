#!/bin/bash
# Every way between NVIDIA's GDRCopy 2.6-1 packages (the stand-in built by
# tests/python/pkgkit/reference.py, in /pkgs/old) and ours (/pkgs/new), each
# path from a clean root and back to it:
#   nvidia-ours-nvidia-purge  nvidia-ours-purge  ours-nvidia-purge  ours-purge
# ours-nvidia@2.6.1-purge and ours-nvidia@2.7-purge, where a later NVIDIA
# release (the stand-in built as that version) upgrades ours in place,
# nvidia-group-ours-purge, where the admin chose the hardened node
# (GDRDRV_ACCESS=group in /etc/default/gdrdrv) before the upgrade, and
# nvidia-edit-ours-purge, where the admin changed NVIDIA's init script: the
# upgrade keeps that copy as /etc/init.d/gdrdrv.dpkg-bak and says so, as
# dpkg does for an obsolete conffile; the purge deletes it.
# After every step, for a systemd host and for a sysvinit one read from the
# root (no init runs in the container): which boot mechanisms would load
# gdrdrv (exactly one each: an enabled unit, a live init script, our udev
# rule's modprobe), no dangling unit or rc link, the node mode and group the
# configuration gives, no conffile prompt (dpkg's stdin is /dev/null), and
# dpkg-maintscript-helper never "skipping rm_conffile" (DPKG_DEBUG=1).  After
# each final purge: no path that was not there at the start.
#
#   lifecycle.sh NEW_VERSION KERNEL [PATH...]
#
# Prints one `TABLE:` line per step (path | step | boot mechanisms | node |
# left or wrong), then `SCENARIO PASSED` only if every check held; a failed
# check does not stop the other paths (each is reported as `FAILED:`).
#
# LIFECYCLE_STATE=DIR LIFECYCLE_STEP=N runs step N (from 1) of the one path
# given and keeps in DIR what the later steps need (the start snapshot, the
# step before, the admin's choices): the booted test
# (tests/python/pkgkit/booted.py) runs each step so in the VM's root and
# boots the root between steps.  DIR must be where snapshot does not look.
set -uo pipefail
# shellcheck source=tests/packaging/lib.sh
. "$(dirname "$0")/lib.sh"

new=$1
kernel=$2
shift 2
paths=("$@")
[ ${#paths[@]} -gt 0 ] || paths=(nvidia-ours-nvidia-purge nvidia-ours-purge ours-nvidia-purge ours-purge)
export DEBIAN_FRONTEND=noninteractive DPKG_DEBUG=1
state=${LIFECYCLE_STATE:-}
only_step=${LIFECYCLE_STEP:-}
if [ -n "$state" ]; then
	if [ ${#paths[@]} != 1 ] || [ -z "$only_step" ]; then
		fail "LIFECYCLE_STATE needs one path and LIFECYCLE_STEP"
	fi
	mkdir -p "$state"
fi
start_list=${state:-/tmp}/start
failures=0
# Where no NVIDIA driver's sources are (the container), say which driver
# gdrdrv is for, as the other scenarios do; the booted root has softgpu's.
if ! compgen -G "/usr/src/nvidia-*/nv-p2p.h" >/dev/null; then
	declare_nvidia_target
fi
problems=()

problem() {
	echo "PROBLEM: $*"
	problems+=("$*")
}

# The udev rules that apply, as udev orders them (a file in /etc replaces one of the same name).
udev_rules() {
	local name
	for name in $(find /etc/udev/rules.d /lib/udev/rules.d /usr/lib/udev/rules.d -name '*.rules' -printf '%f\n' 2>/dev/null | sort -u); do
		for dir in /etc/udev/rules.d /lib/udev/rules.d /usr/lib/udev/rules.d; do
			if [ -e "$dir/$name" ]; then
				echo "$dir/$name"
				break
			fi
		done
	done
}
unit_file() {
	local dir
	for dir in /etc/systemd/system /lib/systemd/system /usr/lib/systemd/system; do
		[ -e "$dir/$1" ] && echo "$dir/$1" && return 0
	done
	return 1
}
start_links() {
	compgen -G "/etc/rc[2-5].d/S[0-9][0-9]$MODULE" || true
}

# What would load gdrdrv at boot under init $1 (systemd or sysvinit), one per line.
boot_mechanisms() {
	local init=$1 rule
	if [ "$init" = systemd ]; then
		[ -e /etc/systemd/system/multi-user.target.wants/$MODULE.service ] && echo "$MODULE.service"
		if [ -x /etc/init.d/$MODULE ] && [ -n "$(start_links)" ] && ! unit_file $MODULE.service >/dev/null; then
			echo "init.d/$MODULE(generated unit)"
		fi
	else
		[ -x /etc/init.d/$MODULE ] && [ -n "$(start_links)" ] && echo "init.d/$MODULE"
		for rule in $(udev_rules); do
			if grep -Eq "KERNEL==\"nvidia\".*TEST!=\"/run/systemd/system\".*RUN\+=\"[^\"]*modprobe $MODULE\"" "$rule"; then
				echo "udev:$(basename "$rule")"
			fi
		done
	fi
	return 0
}

# Links that point nowhere: units, aliases, rc links.
dangling() {
	find /etc/systemd/system /etc/rc?.d -xtype l 2>/dev/null | grep -i -e gdr -e cdi || true
}

# The node mode and group the configuration gives ("0666 root" ...), or none.
node_mode() {
	local mode="" group="" rule access
	if [ -x /etc/init.d/$MODULE ] && [ -n "$(start_links)" ] && grep -q 'mknod -m 666' /etc/init.d/$MODULE; then
		echo "0666(init.d)"
		return 0
	fi
	for rule in $(udev_rules); do
		grep -q "KERNEL==\"$MODULE\"" "$rule" || continue
		mode=$(sed -n "s/^KERNEL==\"$MODULE\", MODE=\"\\([0-7]*\\)\".*/\\1/p" "$rule" | tail -n 1)
		group=$(sed -n "s/^KERNEL==\"$MODULE\".*GROUP=\"\\([a-z]*\\)\".*/\\1/p" "$rule" | tail -n 1)
		access=$(sed -n 's/^GDRDRV_ACCESS=//p' /etc/default/$MODULE 2>/dev/null | tail -n 1)
		if [ "$access" = open ] && grep -q 'ENV{GDRDRV_ACCESS}=="open", MODE="0666"' "$rule"; then
			mode=0666
		fi
	done
	echo "${mode:-none}${group:+ $group}"
}

# Record step $2 of path $1 whose expected node mode is $3 ("" = none) and
# expected mechanisms $4 (systemd) and $5 (sysvinit); $6: the step's log.
judge() {
	local path=$1 step=$2 want_node=$3 want_systemd=$4 want_sysv=$5 log=$6 systemd sysv node links
	systemd=$(boot_mechanisms systemd | paste -sd+)
	sysv=$(boot_mechanisms sysvinit | paste -sd+)
	node=$(node_mode)
	links=$(dangling | paste -sd' ')
	[ "$systemd" = "$want_systemd" ] || problem "systemd boot: '${systemd:-none}', want '${want_systemd:-none}'"
	[ "$sysv" = "$want_sysv" ] || problem "sysvinit boot: '${sysv:-none}', want '${want_sysv:-none}'"
	[ "$node" = "$want_node" ] || problem "node: '$node', want '$want_node'"
	[ -z "$links" ] || problem "dangling: $links"
	if [ -n "$log" ]; then
		! grep -F "skipping rm_conffile" "$log" || problem "dpkg-maintscript-helper skipped rm_conffile"
		! grep -E "Configuration file .* (==>|Modified)" "$log" || problem "conffile prompt"
	fi
	if [ -e /etc/init.d/$MODULE ] && unit_file $MODULE.service >/dev/null; then
		problem "/etc/init.d/$MODULE left, shadowed by $MODULE.service"
	fi
	echo "TABLE: $path | $step | systemd: ${systemd:-none}; sysvinit: ${sysv:-none} | ${node} | $(
		IFS=';'
		echo "${problems[*]:-ok}"
	)"
	if [ ${#problems[@]} -gt 0 ]; then
		echo "FAILED: $path, $step: ${problems[*]}"
		failures=$((failures + 1))
	fi
}

install_set() { # $1: directory of the set; the rest: apt-get options
	local dir=$1 log
	shift
	debs_in "$dir"
	log=/tmp/step.log
	apt-get install -y -q --no-install-recommends "$@" "${DEBS[@]}" </dev/null >"$log" 2>&1
	local status=$?
	cat "$log"
	[ $status = 0 ] || problem "apt-get install from $dir failed ($status)"
}

purge_all() {
	apt-get purge -y -q "${DKMS_SET[@]}" </dev/null >/tmp/step.log 2>&1 || problem "purge failed"
	cat /tmp/step.log
	apt-get autoremove -y -q </dev/null >/dev/null 2>&1 || true
}

nvidia_mech_systemd="init.d/$MODULE(generated unit)"
nvidia_mech_sysv="init.d/$MODULE"
ours_mech_systemd="$MODULE.service"
ours_mech_sysv="udev:60-$MODULE.rules"

if [ -z "$state" ] || [ ! -e "$start_list" ]; then
	snapshot >"$start_list"
fi
for path in "${paths[@]}"; do
	check "path $path"
	prev=""
	admin_access=""
	edited=""
	# shellcheck source=/dev/null  # written below by the step before
	[ -z "$state" ] || [ ! -e "$state/vars" ] || . "$state/vars"
	IFS=- read -r -a steps <<<"$path"
	index=0
	for step in "${steps[@]}"; do
		index=$((index + 1))
		[ -z "$only_step" ] || [ "$index" = "$only_step" ] || continue
		problems=()
		case "$step" in
		nvidia | nvidia@*)
			# nvidia@2.7: a later NVIDIA release (the stand-in built as 2.7 in
			# /pkgs/old), which must upgrade ours as a plain upgrade.
			nvidia_version=${step#nvidia}
			nvidia_version=${nvidia_version#@}
			if [ -n "$nvidia_version" ]; then
				install_set /pkgs/old
			else
				nvidia_version=2.6
				install_set /pkgs/old --allow-downgrades
			fi
			[ "$(package_state "gdrdrv-dkms:$(dpkg --print-architecture)")" = "ii $nvidia_version-1" ] ||
				problem "NVIDIA's gdrdrv-dkms is '$(package_state "gdrdrv-dkms:$(dpkg --print-architecture)")'"
			# NVIDIA's postinst hands DKMS the dpkg architecture (amd64), not uname -m's.
			[ "$(dkms status -m $MODULE)" = "$MODULE/$nvidia_version, $kernel, $(dpkg --print-architecture): installed" ] ||
				problem "dkms status: $(dkms status -m $MODULE | paste -sd' ')"
			judge "$path" "$step" "0666(init.d)" "$nvidia_mech_systemd" "$nvidia_mech_sysv" /tmp/step.log
			;;
		ours)
			install_set /pkgs/new
			want=$([ "$prev" != ours ] && [ -n "$prev" ] && [ -z "$admin_access" ] && echo "0666 video" || echo "0660 video")
			if [ -n "$edited" ]; then
				grep -q "changed by the admin" /etc/init.d/$MODULE.dpkg-bak 2>/dev/null || problem "no /etc/init.d/$MODULE.dpkg-bak with the admin's change"
				grep -q "Saving as /etc/init.d/$MODULE.dpkg-bak" /tmp/step.log || problem "the upgrade did not say it kept the admin's script"
			elif [ -e /etc/init.d/$MODULE.dpkg-bak ]; then
				problem "/etc/init.d/$MODULE.dpkg-bak kept, but nobody changed the script"
			fi
			if [ "${prev%@*}" = nvidia ] || [ "$prev" = group ] || [ "$prev" = edit ]; then
				grep -q "gdrdrv-dkms: replacing NVIDIA's GDRCopy packages" /tmp/step.log || problem "the upgrade did not say what changes"
				grep -q "/dev/$MODULE: ${admin_access:-open} access" /tmp/step.log || problem "the upgrade did not name the node's access"
			else
				grep -q "/dev/$MODULE is mode 0660, group video" /tmp/step.log || problem "the install did not say who may open /dev/$MODULE"
			fi
			[ "$(package_state gdrdrv-dkms)" = "ii $(deb_version "$new")" ] || problem "gdrdrv-dkms is '$(package_state gdrdrv-dkms)'"
			[ "$(dkms status -m $MODULE)" = "$MODULE/$new, $kernel, $(uname -m): installed" ] ||
				problem "dkms status: $(dkms status -m $MODULE | paste -sd' ')"
			judge "$path" "$step" "$want" "$ours_mech_systemd" "$ours_mech_sysv" /tmp/step.log
			;;
		edit)
			echo "# changed by the admin" >>/etc/init.d/$MODULE
			edited=yes
			judge "$path" "$step" "0666(init.d)" "$nvidia_mech_systemd" "$nvidia_mech_sysv" ""
			;;
		group)
			# The admin (or the Ansible role) chooses the hardened node before upgrading.
			echo "GDRDRV_ACCESS=group" >/etc/default/$MODULE
			admin_access=group
			judge "$path" "$step" "0666(init.d)" "$nvidia_mech_systemd" "$nvidia_mech_sysv" ""
			;;
		purge)
			purge_all
			if [ -n "$admin_access" ]; then
				check "the admin's /etc/default/$MODULE is theirs: kept by the purge, deleted here"
				grep -qx "GDRDRV_ACCESS=$admin_access" /etc/default/$MODULE || problem "/etc/default/$MODULE changed"
				rm -f /etc/default/$MODULE
			fi
			expect_removed_soft=$(
				dkms status -m $MODULE
				find /lib/modules -name "$MODULE.ko*"
			)
			[ -z "$expect_removed_soft" ] || problem "gdrdrv left: $expect_removed_soft"
			snapshot >/tmp/after
			comm -13 "$start_list" /tmp/after >/tmp/leftovers || true
			[ ! -s /tmp/leftovers ] || problem "left: $(tr '\n' ' ' </tmp/leftovers)"
			judge "$path" "$step" "none" "" "" /tmp/step.log
			;;
		esac
		prev=$step
		if [ -n "$state" ]; then
			declare -p prev admin_access edited >"$state/vars"
		fi
	done
done
[ "$failures" = 0 ] || fail "$failures step(s) wrong (see the TABLE lines)"
echo SCENARIO PASSED
