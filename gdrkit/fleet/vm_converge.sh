#!/bin/bash
# Applies the Ansible role gdrcopy with a local connection and checks the
# outcome.  Two phases, one script:
#
#   vm_converge.sh image GROUP   in the container that becomes the VM's root:
#                                no GPU, so the role installs and loads nothing
#   vm_converge.sh node GROUP    in the booted guest, softgpu loaded: the role
#                                loads gdrdrv, /dev/gdrdrv gets mode 0660 and
#                                GROUP, doctor passes; a second converge
#                                changes nothing; state absent unloads gdrdrv
#                                and removes the packages
#
# Prints `CHECK: ...` before each check, `FAILED: ...` at the first failure,
# `CONVERGE PASSED` at the end.
set -uo pipefail
phase=$1
group=$2
work=/opt/gdrkit-fleet
mode=0660

check() { echo "CHECK: $*"; }
fail() {
	echo "FAILED: $*"
	exit 1
}

export PYTHONPATH="$work/python" HOME=/root
export ANSIBLE_ROLES_PATH="$work/ansible/roles" ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0
export ANSIBLE_LOCAL_TEMP=/tmp/ansible-local ANSIBLE_REMOTE_TEMP=/tmp/ansible-remote
export ANSIBLE_PYTHON_INTERPRETER=/usr/bin/python3 ANSIBLE_RETRY_FILES_ENABLED=0

# converge LOG [extra ansible-playbook arguments]: the role, its recap line printed.
converge() {
	local log=$1
	shift
	python3 -m ansible.cli.playbook -i localhost, -c local "$work/ansible/local.yml" \
		-e "gdrcopy_repo_url=file://$work/repo" -e "gdrcopy_node_mode=$mode" -e "gdrcopy_node_group=$group" \
		"$@" >"$log" 2>&1
	local rc=$?
	grep -E '^(localhost +:|TASK \[|fatal:|failed:)|"msg":' "$log" | grep -vE '^TASK \[' || true
	grep -A3 -E '^(fatal|failed):' "$log" | head -n 40 || true
	return $rc
}

recap() { grep -E '^localhost +:' "$1" | tr -s ' '; }

case $phase in
image)
	check "converge without a GPU: installs, loads nothing"
	converge /tmp/converge-image.log || {
		tail -n 60 /tmp/converge-image.log
		fail "the image converge"
	}
	grep -q 'no NVIDIA GPU, driver or P2P provider' /tmp/converge-image.log || fail "the role did not report the host without a GPU"
	[ ! -e /sys/module/gdrdrv ] || fail "gdrdrv was loaded without a GPU"
	dkms status -m gdrdrv | grep -q ': installed' || fail "DKMS did not build gdrdrv: $(dkms status -m gdrdrv)"
	;;
node)
	[ -e /sys/module/softgpu ] || fail "softgpu is not loaded"
	check "converge with softgpu loaded: the role loads gdrdrv"
	converge /tmp/converge-node.log || {
		tail -n 80 /tmp/converge-node.log
		fail "the node converge"
	}
	echo "converge: $(recap /tmp/converge-node.log)"
	[ -e /sys/module/gdrdrv ] || fail "gdrdrv is not loaded after the converge"

	check "/dev/gdrdrv has mode $mode and group $group, as configured"
	node=$(stat -c '%a %G %F' /dev/gdrdrv) || fail "no /dev/gdrdrv"
	echo "/dev/gdrdrv: $node"
	[ "$node" = "${mode#0} $group character special file" ] || fail "/dev/gdrdrv is $node"
	gid=$(getent group "$group" | cut -d: -f3)
	params="$(cat /sys/module/gdrdrv/parameters/node_mode) $(cat /sys/module/gdrdrv/parameters/node_gid)"
	echo "gdrdrv node_mode node_gid: $params"
	[ "$params" = "$mode $gid" ] || fail "gdrdrv was loaded with node_mode node_gid $params, not $mode $gid"

	check "gdrcopy_doctor passes (exit 0)"
	gdrcopy_doctor
	status=$?
	echo "gdrcopy_doctor exit $status"
	[ $status = 0 ] || fail "gdrcopy_doctor exit $status"

	check "gdrcopy_sanity through the role-loaded gdrdrv"
	gdrcopy_sanity >/tmp/sanity.log 2>&1
	status=$?
	grep -E '^Total:' /tmp/sanity.log || tail -n 20 /tmp/sanity.log
	[ $status = 0 ] || fail "gdrcopy_sanity exit $status"

	check "a second converge changes nothing"
	converge /tmp/converge-again.log || fail "the second converge"
	line=$(recap /tmp/converge-again.log)
	echo "idempotence: $line"
	case $line in *" changed=0 "*) ;; *) fail "the second converge changed something: $line" ;; esac

	check "state absent unloads gdrdrv and removes the packages"
	converge /tmp/converge-absent.log -e gdrcopy_state=absent || {
		tail -n 60 /tmp/converge-absent.log
		fail "the removal"
	}
	echo "absent: $(recap /tmp/converge-absent.log)"
	[ ! -e /sys/module/gdrdrv ] || fail "gdrdrv is still loaded"
	left=$(dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' 2>/dev/null | grep -E ' (gdrcopy|gdrdrv|libgdrapi)' | grep -v '^un' || true)
	[ -z "$left" ] || fail "packages left: $left"
	[ ! -e /etc/modprobe.d/gdrdrv.conf ] || fail "/etc/modprobe.d/gdrdrv.conf left behind"
	;;
*)
	fail "unknown phase $phase"
	;;
esac
echo "CONVERGE PASSED"
