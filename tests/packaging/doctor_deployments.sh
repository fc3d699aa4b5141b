#!/bin/bash
# gdrcopy_doctor's exit status in each documented deployment (issue 36), in
# the VM booted from a root doctor_prepare.sh made (softgpu, under its own
# name, as the P2P provider; no NVIDIA GPU):
#
#   dkms      the DKMS node (`gdrcopy_doctor`), NHC's lines of docs/nodes.md
#             (gpu: `check_cmd_status -t 60 -r 0 gdrcopy_doctor`; cpu:
#             `... gdrcopy_doctor --no-gpu-ok`), the liveness probe of
#             docs/kubernetes.md (`gdrcopy_doctor --json`) in a containerd
#             pod and in a Docker container given /dev/gdrdrv, and the
#             same pod without it;
#   prebuilt  the prebuilt-module node without headers or dkms, and the
#             same node once its gdrdrv is gone.
#
# A pod is made as runtimes make it, in a mount namespace (pod_run.py): its
# image has no /lib/modules or /usr/src, the node's /proc, /sys and the
# devices it was given, and the runtime's marks (containerd: a
# service-account mount and KUBERNETES_SERVICE_HOST; Docker: /.dockerenv).  Prints `DOCTOR <name>:
# exit N (expected M)` for each, its findings that are not ok, and ends with
# SCENARIO PASSED when every exit status was the expected one.
#
#   doctor_deployments.sh MODE
set -uo pipefail
# shellcheck source=tests/packaging/lib.sh
. "$(dirname "$0")/lib.sh"

mode=$1
kernel=$(uname -r)
# NHC's lines give the doctor 60 s on a real node.  Under qemu TCG on a
# loaded 2-core host one run took longer than that (exit 124); what is
# judged here is the exit status, so the emulated node gets 300 s.
nhc_timeout=300
failures=0

# run_doctor NAME EXPECTED COMMAND...
run_doctor() {
	local name=$1 want=$2 rc
	shift 2
	"$@" >/tmp/doctor.out 2>&1
	rc=$?
	echo "DOCTOR $name: exit $rc (expected $want)"
	grep -E '^(FAIL|WARN|SKIP) |"status": "(fail|warn)"' /tmp/doctor.out | sed 's/^/  /'
	if [ "$rc" != "$want" ]; then
		cat /tmp/doctor.out
		echo "FAILED: $name: gdrcopy_doctor exited $rc, not $want"
		failures=$((failures + 1))
	fi
}

# In a pod's mount namespace (pod_run.py): its marks, no /lib/modules or
# /usr/src, and /dev as the runtime gives it (with /dev/gdrdrv, or without: $2 = no).
pod() {
	unshare -m python3 "$(dirname "$0")/pod_run.py" "$@"
}

# The root was exported from a Docker container: its marker came along.
rm -f /.dockerenv

check "softgpu stands in for the NVIDIA driver; gdrdrv loads as installed"
modprobe softgpu || fail "modprobe softgpu"
ko=$(modinfo -F filename "$MODULE") || fail "no gdrdrv for $kernel"
insmod "$ko" || fail "insmod $ko"
[ -c /dev/gdrdrv ] || fail "no /dev/gdrdrv"

case $mode in
dkms)
	[ -e "/lib/modules/$kernel/build" ] || fail "the DKMS node has no headers"
	run_doctor "DKMS node" 0 gdrcopy_doctor
	run_doctor "NHC gpu line (check_cmd_status -t 60 -r 0)" 0 timeout "$nhc_timeout" gdrcopy_doctor
	run_doctor "liveness probe in a containerd pod given /dev/gdrdrv" 0 pod containerd yes gdrcopy_doctor --json
	run_doctor "liveness probe in a Docker container given /dev/gdrdrv" 0 pod docker yes gdrcopy_doctor --json
	run_doctor "liveness probe in a containerd pod without /dev/gdrdrv" 1 pod containerd no gdrcopy_doctor --json
	check "a CPU-only node: no P2P provider, no GPU"
	rmmod gdrdrv softgpu || fail "rmmod gdrdrv softgpu"
	run_doctor "NHC cpu line (--no-gpu-ok)" 0 timeout "$nhc_timeout" gdrcopy_doctor --no-gpu-ok
	run_doctor "CPU-only node without --no-gpu-ok" 3 gdrcopy_doctor
	;;
prebuilt)
	[ ! -e "/lib/modules/$kernel/build" ] || fail "the prebuilt-module node has headers"
	run_doctor "prebuilt-module node without headers" 0 gdrcopy_doctor
	run_doctor "NHC gpu line on it" 0 timeout "$nhc_timeout" gdrcopy_doctor
	check "the same node once its gdrdrv is gone: nothing can build one"
	rmmod gdrdrv || fail "rmmod gdrdrv"
	rm -f "$ko"
	run_doctor "no gdrdrv and no headers" 1 gdrcopy_doctor
	;;
*) fail "unknown mode $mode" ;;
esac

[ "$failures" = 0 ] || fail "$failures deployment(s) gave another exit status"
echo SCENARIO PASSED
