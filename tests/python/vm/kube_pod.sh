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
# Who may open /dev/gdrdrv (docs/kubernetes.md), as the manifests say:
# KUBE_NODE_GID and KUBE_NODE_MODE in the environment (test_kube_vm.py reads
# them from deploy/kubernetes/).  Each pod checks that a process running as a
# non-root user in that group opens the node and one outside it is refused.
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

NODE_GID=${KUBE_NODE_GID:?KUBE_NODE_GID: the group id the manifests give /dev/gdrdrv}
NODE_MODE=${KUBE_NODE_MODE:?KUBE_NODE_MODE: the mode the manifests give /dev/gdrdrv}
# Pod users: in the node's group (as supplementalGroups puts it) and not.
POD_USER=1000

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

# As a pod process: non-root, chrooted into the container, with exactly the groups given.
as_pod() {
	groups=$1
	shift
	chroot --userspec="$POD_USER:$POD_USER" --groups="$groups" "$ctr" /usr/bin/env -i PATH="$PATH_IN_CTR" "$@"
}
# A pod process opens NODE read-write: in the group it must, outside it it must be refused.
pod_opens() { as_pod "$POD_USER,$NODE_GID" sh -c "exec 3<>$1" 2>/tmp/kube-pod-open.err; }
pod_refused() {
	! as_pod "$POD_USER" sh -c "exec 3<>$1" 2>/tmp/kube-pod-open.err && grep -q "Permission denied" /tmp/kube-pod-open.err
}
node_is() { test "$(stat -c '%a %u %g' "$1")" = "$2"; }
check_node_access() {
	node=$1
	say "$node: $(stat -c '%A %U(%u) %G(%g)' "$node")"
	check "$node is ${NODE_MODE#0} root:$NODE_GID" node_is "$node" "${NODE_MODE#0} 0 $NODE_GID"
	check "a pod process as uid $POD_USER in group $NODE_GID opens $node" pod_opens "$node"
	check "a pod process as uid $POD_USER outside group $NODE_GID is refused $node (EACCES)" pod_refused "$node"
}

# What the container runtime does with the CDI spec's device node (runc:
# mknod with its fileMode, then chown to its uid and gid), into a /dev of the
# pod's own; then the pod's processes open that node.
cdi_value() { sed -n "s/^ *$1: *\([0-9]*\)\$/\1/p" "$2" | head -n 1; }
check_cdi_node() {
	spec=$1
	file_mode=$(cdi_value fileMode "$spec")
	uid=$(cdi_value uid "$spec")
	gid=$(cdi_value gid "$spec")
	say "CDI spec $spec: fileMode $file_mode uid $uid gid $gid"
	check "the CDI spec gives fileMode ${NODE_MODE} (decimal $((NODE_MODE))) and gid $NODE_GID" \
		test "$file_mode $uid $gid" = "$((NODE_MODE)) 0 $NODE_GID"
	mkdir -p "$ctr/pod-dev"
	mount -t tmpfs -o mode=0755 pod-dev "$ctr/pod-dev"
	major=$(stat -c '%t' /dev/gdrdrv)
	minor=$(stat -c '%T' /dev/gdrdrv)
	mknod -m "$(printf '%o' "$file_mode")" "$ctr/pod-dev/gdrdrv" c "$((0x$major))" "$((0x$minor))"
	chown "$uid:$gid" "$ctr/pod-dev/gdrdrv"
	check "a pod process as uid $POD_USER in group $NODE_GID opens the CDI node" pod_opens /pod-dev/gdrdrv
	check "a pod process as uid $POD_USER outside group $NODE_GID is refused the CDI node" pod_refused /pod-dev/gdrdrv
	umount "$ctr/pod-dev"
}

finish() {
	for mount_point in "$ctr/pod-dev" "$ctr/host-dev" "$ctr/run/cdi" "$ctr/host" "$ctr/run/nvidia/driver" "$ctr/dev" "$ctr/sys" "$ctr/proc"; do
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
		GDRCOPY_MODULE_ARGS=dbg_enabled=1 GDRCOPY_NODE_GID="$NODE_GID" GDRCOPY_NODE_MODE="$NODE_MODE" \
		nvidia-gdrcopy-driver install >"$log_file" 2>&1 &
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
	check_node_access /dev/gdrdrv
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
	mkdir -p "$ctr/host" "$ctr/run/cdi" /run/cdi "$ctr/host-dev"
	mount --rbind / "$ctr/host"
	mount -o remount,bind,ro "$ctr/host"
	mount --bind /run/cdi "$ctr/run/cdi"
	# The host's /dev, where the init container sets the node's group (hostPath /dev).
	mount --bind /dev "$ctr/host-dev"
	modprobe softgpu || say "modprobe softgpu failed"
	# The init container: as the DaemonSet's env says.
	in_ctr NVIDIA_DRIVER_ROOT=/host NVIDIA_MODULE=softgpu GDRCOPY_CDI_DIR=/var/run/cdi \
		GDRCOPY_CDI_SEARCH="/host/etc/cdi /var/run/cdi" GDRCOPY_MODULE_ARGS=dbg_enabled=1 \
		GDRCOPY_NODE_GID="$NODE_GID" GDRCOPY_NODE_MODE="$NODE_MODE" GDRCOPY_DEV_DIR=/host-dev \
		nvidia-gdrcopy-driver load >"$log_file" 2>&1
	check "init container (load) exits 0" test "$?" = 0
	check "gdrdrv loaded" loaded gdrdrv
	check "CDI spec written for nvidia.com/gdrcopy=all" grep -q '^kind: "nvidia.com/gdrcopy"' /run/cdi/gdrcopy-k8s.yaml
	check_node_access /dev/gdrdrv
	check_cdi_node /run/cdi/gdrcopy-k8s.yaml
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
	# KMM's worker: modprobe with the image's /opt as module directory and the Module's parameters.
	say "modprobe -d $ctr/opt gdrdrv dbg_enabled=1 node_mode=$NODE_MODE node_gid=$NODE_GID"
	check "modprobe -d <image>/opt gdrdrv" modprobe -d "$ctr/opt" gdrdrv dbg_enabled=1 node_mode="$NODE_MODE" node_gid="$NODE_GID"
	check "validator ($VALIDATOR)" sh -c "$VALIDATOR >/dev/null"
	check "/dev/gdrdrv exists" test -c /dev/gdrdrv
	check "gdrdrv's node_mode and node_gid are the Module's" \
		test "$(cat /sys/module/gdrdrv/parameters/node_mode) $(cat /sys/module/gdrdrv/parameters/node_gid)" = "$NODE_MODE $NODE_GID"
	# The kernel makes the node root's: non-root users are refused until a CDI
	# spec (as the loader writes it) or the packaged udev rule gives the group.
	check "/dev/gdrdrv is ${NODE_MODE#0} root:root as the kernel makes it" node_is /dev/gdrdrv "${NODE_MODE#0} 0 0"
	check "a pod process as uid $POD_USER in group $NODE_GID is refused the kernel's node" pod_refused /dev/gdrdrv
	# The CDI spec the KMM image's entrypoint writes (nvidia-gdrcopy-driver cdi
	# DIR), as a KMM cluster runs it for its pods (docs/kubernetes.md).
	in_ctr GDRCOPY_NODE_GID="$NODE_GID" GDRCOPY_NODE_MODE="$NODE_MODE" GDRCOPY_CDI_SEARCH=/nonexistent \
		nvidia-gdrcopy-driver cdi /tmp/kmm-cdi >"$log_file" 2>&1
	check_cdi_node "$ctr/tmp/kmm-cdi/gdrcopy-k8s.yaml"
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
