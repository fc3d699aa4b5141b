#!/bin/sh
# The predicates below are called through check "$@", which shellcheck cannot follow.
# shellcheck disable=SC2317
# One Kubernetes pod's life on a GPU node, inside the VM (tests/python/test_kube_vm.py).
#
#   kube_pod.sh operator|standalone|kmm CONTAINER_ROOT [DRIVER_ROOT]
#
# operator: the GPU Operator's gdrcopy sidecar.  CONTAINER_ROOT is one of our
#   driver images, unpacked; it runs chrooted there with the node's /proc,
#   /sys and /dev, as a privileged container does, and /run/nvidia/driver
#   (DRIVER_ROOT, see kube_driver_root.sh) appears once the "driver
#   container" is ready.  softgpu stands in for nvidia.ko.  Checked: the
#   entrypoint waits for both the module and the driver root; builds or picks
#   gdrdrv; loads it; the startup probe and the validator's check pass; it
#   refuses to unload a gdrdrv in use; on TERM it unloads gdrdrv at once,
#   and the driver module can be unloaded after it.
# standalone: the loader DaemonSet's two containers (deploy/kubernetes/loader)
#   with a driver installed on the host: `load` privileged, with the node's
#   root read-only at /host and the CDI directory, then `watch` as nobody;
#   the readiness check as nobody; TERM leaves gdrdrv loaded.
# kmm: the KMM image, unpacked; gdrdrv loaded as KMM's worker does
#   (modprobe -d <image>/opt), checked, unloaded.
#
# Prints "kube-pod[<name>]: CHECK <what>: ok|FAILED" per check and a
# "kube-pod[<name>]: VERDICT PASS|FAIL" line (<name>: CONTAINER_ROOT's last
# component, or standalone); exits 0 only on PASS.

set -u

mode=$1
ctr=$2
driver_root=${3:-}
name=${ctr##*/}
[ "$mode" != standalone ] || name=standalone
failed=0
waited=0
log_file=/tmp/kube-pod-$name.log
PATH_IN_CTR=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# The validator's check and the sidecar's startup probe, as the operator writes them.
VALIDATOR="lsmod | grep -E '^gdrdrv\\s'"
STARTUP_PROBE="lsmod | grep gdrdrv"

say() { echo "kube-pod[$name]: $*"; }
check() {
	what=$1
	shift
	if "$@"; then
		say "CHECK $what: ok"
	else
		say "CHECK $what: FAILED"
		failed=1
	fi
}
in_ctr() { chroot "$ctr" /usr/bin/env -i PATH="$PATH_IN_CTR" "$@"; }
loaded() { grep -q "^$1 " /proc/modules; }
not_loaded() { ! loaded "$1"; }
logged() { grep -q -- "$1" "$log_file"; }
running() { kill -0 "$pid" 2>/dev/null; }
waiting_yet() { running && not_loaded gdrdrv && logged "wait: waiting for module softgpu"; }

finish() {
	for mount_point in "$ctr/run/cdi" "$ctr/host" "$ctr/run/nvidia/driver" "$ctr/dev" "$ctr/sys" "$ctr/proc"; do
		umount -l "$mount_point" 2>/dev/null
	done
	if [ -f "$log_file" ]; then
		say "---- the container's log ----"
		sed 's/^/    /' "$log_file"
	fi
	if [ "$failed" != 0 ]; then
		say "---- gdrdrv in the kernel log ----"
		dmesg | grep -i gdrdrv | tail -n 20 | sed 's/^/    /'
	fi
	if [ "$failed" = 0 ]; then
		say "VERDICT PASS"
		exit 0
	fi
	say "VERDICT FAIL"
	exit 1
}

pod_mounts() {
	mkdir -p "$ctr/proc" "$ctr/sys" "$ctr/dev" "$ctr/run/nvidia/driver"
	mount -t proc proc "$ctr/proc"
	mount --rbind /sys "$ctr/sys"
	mount --rbind /dev "$ctr/dev"
}

operator_pod() {
	pod_mounts
	: >"$log_file"
	# The sidecar starts with the driver pod: before nvidia is loaded and before the driver root is there.
	chroot "$ctr" /usr/bin/env -i PATH="$PATH_IN_CTR" NVIDIA_MODULE=softgpu GDRCOPY_POLL_INTERVAL=1 \
		GDRCOPY_MODULE_ARGS=dbg_enabled=1 nvidia-gdrcopy-driver install >"$log_file" 2>&1 &
	pid=$!
	sleep 3
	check "waits while the driver module is not loaded" waiting_yet
	modprobe softgpu || say "modprobe softgpu failed"
	sleep 3
	check "waits while the driver root has no usr/src" waiting_yet
	mount --bind "$driver_root" "$ctr/run/nvidia/driver"
	say "driver root mounted at /run/nvidia/driver"
	start=$(date +%s)
	until in_ctr sh -c "$STARTUP_PROBE" >/dev/null 2>&1; do
		running || break
		[ $(($(date +%s) - start)) -lt 900 ] || break
		sleep 2
	done
	waited=$(($(date +%s) - start))
	say "gdrdrv appeared ${waited}s after the driver root"
	check "startup probe ($STARTUP_PROBE)" in_ctr sh -c "$STARTUP_PROBE >/dev/null"
	check "validator ($VALIDATOR)" in_ctr sh -c "$VALIDATOR >/dev/null"
	check "/dev/gdrdrv exists" test -c /dev/gdrdrv
	check "flavour chosen from the loaded driver: open" logged "flavour: open"
	check "entrypoint still running (waiting for TERM)" running
	check "pin counter is 0" test "$(cat /proc/driver/gdrdrv/nv_get_pages_refcount 2>/dev/null)" = 0

	# A process holding /dev/gdrdrv: unloading must refuse, and at once.
	# One process holds it (exec): killing it closes the device.
	sh -c 'exec 3<>/dev/gdrdrv; exec sleep 120' &
	holder=$!
	sleep 1
	say "holder: refcount $(cat /sys/module/gdrdrv/refcnt)"
	in_ctr nvidia-gdrcopy-driver unload >/tmp/kube-pod-unload.log 2>&1
	unload_status=$?
	sed 's/^/    /' /tmp/kube-pod-unload.log
	check "unload while in use exits 0" test "$unload_status" = 0
	check "unload while in use leaves gdrdrv loaded" loaded gdrdrv
	check "unload while in use says so" grep -q "in use (refcount" /tmp/kube-pod-unload.log
	kill "$holder"
	wait "$holder" 2>/dev/null
	sleep 1

	say "sending TERM to the entrypoint (pid $pid)"
	kill -TERM "$pid"
	start=$(date +%s)
	while running && [ $(($(date +%s) - start)) -lt 20 ]; do
		sleep 1
	done
	check "entrypoint exits within 20s of TERM" not_running
	wait "$pid"
	check "entrypoint exit status 0 after TERM" test "$?" = 0
	check "gdrdrv unloaded after TERM" not_loaded gdrdrv
	check "entrypoint logged the unload at refcount 0" logged "unload: gdrdrv unloaded (refcount was 0)"
	check "the driver module unloads after it (rmmod softgpu)" rmmod softgpu
}

not_running() { ! running; }

standalone_pod() {
	pod_mounts
	: >"$log_file"
	# The image's /var/run is a link to /run, which a runtime resolves inside
	# the image; mount(8) here would follow it out of the image: mount at run/cdi.
	mkdir -p "$ctr/host" "$ctr/run/cdi" /run/cdi
	mount --rbind / "$ctr/host"
	mount -o remount,bind,ro "$ctr/host"
	mount --bind /run/cdi "$ctr/run/cdi"
	modprobe softgpu || say "modprobe softgpu failed"
	# The init container: as the DaemonSet's env says.
	in_ctr NVIDIA_DRIVER_ROOT=/host NVIDIA_MODULE=softgpu GDRCOPY_CDI_DIR=/var/run/cdi \
		GDRCOPY_CDI_SEARCH="/host/etc/cdi /var/run/cdi" GDRCOPY_MODULE_ARGS=dbg_enabled=1 \
		nvidia-gdrcopy-driver load >"$log_file" 2>&1
	check "init container (load) exits 0" test "$?" = 0
	check "gdrdrv loaded" loaded gdrdrv
	check "CDI spec written for nvidia.com/gdrcopy=all" grep -q '^kind: "nvidia.com/gdrcopy"' /run/cdi/gdrcopy-k8s.yaml
	# The long-running container: unprivileged (nobody), as runAsUser 65534.
	chroot --userspec=65534:65534 "$ctr" /usr/bin/env -i PATH="$PATH_IN_CTR" GDRCOPY_POLL_INTERVAL=1 \
		nvidia-gdrcopy-driver watch >>"$log_file" 2>&1 &
	pid=$!
	sleep 3
	check "watch runs as nobody" running
	check "readiness as nobody ($VALIDATOR)" chroot --userspec=65534:65534 "$ctr" /usr/bin/env -i PATH="$PATH_IN_CTR" sh -c "$VALIDATOR >/dev/null"
	kill -TERM "$pid"
	wait "$pid"
	check "watch exits 0 on TERM" test "$?" = 0
	check "gdrdrv stays loaded after the loader goes" loaded gdrdrv
	check "a second load finds it loaded and uses it" sh -c "chroot $ctr /usr/bin/env -i PATH=$PATH_IN_CTR NVIDIA_DRIVER_ROOT=/host NVIDIA_MODULE=softgpu nvidia-gdrcopy-driver load 2>&1 | grep -q 'is loaded already: using it'"
	check "pin counter is 0" test "$(cat /proc/driver/gdrdrv/nv_get_pages_refcount 2>/dev/null)" = 0
	check "rmmod gdrdrv" rmmod gdrdrv
	check "rmmod softgpu" rmmod softgpu
	rm -f /run/cdi/gdrcopy-k8s.yaml
}

kmm_pod() {
	kver=$(uname -r)
	check "KMM layout: /opt/lib/modules/$kver/modules.dep lists gdrdrv" grep -q "gdrdrv.ko" "$ctr/opt/lib/modules/$kver/modules.dep"
	modprobe softgpu || say "modprobe softgpu failed"
	# KMM's worker: modprobe with the image's /opt as module directory.
	say "modprobe -d $ctr/opt gdrdrv dbg_enabled=1"
	check "modprobe -d <image>/opt gdrdrv" modprobe -d "$ctr/opt" gdrdrv dbg_enabled=1
	check "validator ($VALIDATOR)" sh -c "$VALIDATOR >/dev/null"
	check "/dev/gdrdrv exists" test -c /dev/gdrdrv
	check "the image's gdrdrv.ko is for the running kernel (vermagic)" sh -c "modinfo -F vermagic $ctr/opt/lib/modules/$kver/updates/gdrdrv.ko | grep -q '^$kver '"
	check "pin counter is 0" test "$(cat /proc/driver/gdrdrv/nv_get_pages_refcount 2>/dev/null)" = 0
	# shellcheck disable=SC2016 # expanded by that sh
	check "refcount 0, then rmmod gdrdrv" sh -c 'test "$(cat /sys/module/gdrdrv/refcnt)" = 0 && rmmod gdrdrv'
	check "rmmod softgpu" rmmod softgpu
}

case $mode in
operator) operator_pod ;;
standalone) standalone_pod ;;
kmm) kmm_pod ;;
*)
	say "unknown mode"
	failed=1
	;;
esac
finish
