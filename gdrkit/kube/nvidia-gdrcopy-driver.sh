#!/bin/bash
# nvidia-gdrcopy-driver: loads gdrdrv on a Kubernetes node, as the GPU
# Operator's gdrcopy sidecar (nvidia-gdrcopy-ctr) and the standalone loader's
# init container expect.  Installed as /usr/local/bin/nvidia-gdrcopy-driver in
# the images `./toolkit build-image` makes (gdrkit/kube/images.py).
#
#   install  wait for the NVIDIA driver, build gdrdrv against its sources (or
#            take the prebuilt module for the running kernel), load it, then
#            wait; on TERM or INT unload it if nothing holds it, and exit 0
#   load     the same without the waiting at the end (init containers)
#   watch    wait, unprivileged, until TERM; exit 1 if gdrdrv goes away (the
#            standalone loader's long-running container; it unloads nothing)
#   unload   unload gdrdrv if its refcount is 0; leave it loaded otherwise
#   status   exit 0 when gdrdrv is loaded (the operator validator's check)
#   cdi DIR  write our CDI spec (nvidia.com/gdrcopy=all) into DIR, unless a
#            spec there or in the other CDI directories already has that kind
#
# Environment (defaults in brackets):
#   NVIDIA_DRIVER_ROOT     the NVIDIA driver's root filesystem [/run/nvidia/driver];
#                          "/" or a host mount (/host) for a driver installed on the host
#   NVIDIA_MODULE          the module to wait for [nvidia]
#   NVIDIA_DRIVER_VERSION  which /usr/src/nvidia-<version> to build against
#                          [the loaded module's version, else the only one there]
#   GDRCOPY_NVIDIA_FLAVOUR open, proprietary or auto [auto: the loaded module's
#                          taint, else the driver branch (560 and newer: open)]
#   GDRCOPY_KDIR           kernel build tree [this image's /lib/modules/<kver>/build,
#                          else the driver root's: lib/modules/<kver>/build,
#                          usr/src/kernels/<kver> (EL, RHCOS) or
#                          usr/src/linux-<version>-obj/<arch>/<flavour> (SUSE)]
#   GDRCOPY_BUILD_DIR      where gdrdrv is built [/var/lib/gdrcopy/build]
#   GDRCOPY_MODULE_ARGS    gdrdrv parameters added after modprobe.d's options
#   GDRCOPY_ALLOW_UNSUPPORTED
#                          1: where a SUSE kernel refuses modules not marked
#                          supported (kernel.unsupported=0), raise it to 1 for
#                          our insmod alone and put 0 back [0: refuse, saying so]
#   GDRCOPY_WAIT_TIMEOUT   seconds to wait for the driver, 0 = forever [0]
#   GDRCOPY_POLL_INTERVAL  seconds between checks [5]
#   GDRCOPY_CDI_DIR        after loading, write the CDI spec there (as `cdi DIR`) [none]
#   GDRCOPY_CDI_SEARCH     where other CDI specs are looked for [/etc/cdi /var/run/cdi]
#   GDRCOPY_NODE_GID       group id of /dev/gdrdrv: pods whose user is in this group
#                          (securityContext.supplementalGroups) may open it, other
#                          non-root users may not.  Passed to insmod as node_gid, applied
#                          to the node in GDRCOPY_DEV_DIR, and written into the CDI spec
#                          (gid, fileMode), from which the runtime creates the pod's node
#                          [unset: the node stays as modprobe.d's node_mode makes it, root's]
#   GDRCOPY_NODE_MODE      its mode, with GDRCOPY_NODE_GID [0660]
#   GDRCOPY_DEV_DIR        the node's /dev: the host's, mounted into the container [/dev]
# Tests point these at fake trees: GDRCOPY_SYSFS [/sys], GDRCOPY_PROC [/proc],
# GDRCOPY_CDI_SPEC [the image's spec], GDRCOPY_LIB_MODULES [/lib/modules: the
# image's modules and build tree], GDRCOPY_USR_SRC [/usr/src: the image's
# gdrdrv sources, and where the driver root's /usr/src entries are linked].
#
# Every step logs one line "nvidia-gdrcopy-driver: <step>: ..." so that the
# pod's log says where it stopped.

set -euo pipefail

NAME=nvidia-gdrcopy-driver
MODULE=gdrdrv
DRIVER_ROOT=${NVIDIA_DRIVER_ROOT:-/run/nvidia/driver}
NVIDIA_MODULE=${NVIDIA_MODULE:-nvidia}
SYSFS=${GDRCOPY_SYSFS:-/sys}
PROC=${GDRCOPY_PROC:-/proc}
LIB_MODULES=${GDRCOPY_LIB_MODULES:-/lib/modules}
USR_SRC=${GDRCOPY_USR_SRC:-/usr/src}
POLL=${GDRCOPY_POLL_INTERVAL:-5}
WAIT_TIMEOUT=${GDRCOPY_WAIT_TIMEOUT:-0}
BUILD_DIR=${GDRCOPY_BUILD_DIR:-/var/lib/gdrcopy/build}
CDI_SPEC=${GDRCOPY_CDI_SPEC:-/usr/share/gdrcopy/cdi/nvidia.com-gdrcopy.yaml}
CDI_DIRS=${GDRCOPY_CDI_SEARCH:-/etc/cdi /var/run/cdi}

# On stderr: stdout carries the values the functions return.
log() { echo "$NAME: $1: $2" >&2; }
fail() {
	log "$1" "FAILED: $2"
	exit 1
}

module_loaded() { grep -q "^$1 " "$PROC/modules"; }

unload_on_term=""

# Sleep in the background so that a signal is handled at once, not after the sleep.
pause() {
	sleep "$1" &
	wait $! || true
}

# Leave no sleep behind when a signal ends us (every background job: a
# signal can come before `$!` of the latest is known).
stop_pause() {
	local left
	left=$(jobs -p)
	if [ -n "$left" ]; then
		# shellcheck disable=SC2086 # one pid per word
		kill $left 2>/dev/null || true
	fi
}

# Exit when TERM or INT arrives during the waits (before anything is loaded).
stop_waiting() {
	stop_pause
	log term "signal before gdrdrv was loaded: nothing to unload"
	exit 0
}

wait_for_driver() {
	local waited=0 said=""
	trap stop_waiting TERM INT
	while :; do
		if [ -d "$DRIVER_ROOT/usr/src" ] && module_loaded "$NVIDIA_MODULE"; then
			log wait "module $NVIDIA_MODULE is loaded and $DRIVER_ROOT/usr/src exists (after ${waited}s)"
			return 0
		fi
		if [ -z "$said" ]; then
			log wait "waiting for module $NVIDIA_MODULE to be loaded and $DRIVER_ROOT/usr/src to exist"
			said=1
		fi
		if [ "$WAIT_TIMEOUT" -gt 0 ] && [ "$waited" -ge "$WAIT_TIMEOUT" ]; then
			fail wait "the NVIDIA driver did not appear within ${WAIT_TIMEOUT}s; is the driver container running?"
		fi
		pause "$POLL"
		waited=$((waited + POLL))
	done
}

driver_version() {
	local version_file="$SYSFS/module/$NVIDIA_MODULE/version"
	if [ -n "${NVIDIA_DRIVER_VERSION:-}" ]; then
		echo "$NVIDIA_DRIVER_VERSION"
	elif [ -r "$version_file" ]; then
		cat "$version_file"
	fi
}

# The driver's source directory: /usr/src/nvidia-<version> of the driver root.
driver_sources() {
	local version candidates=()
	version=$(driver_version)
	if [ -n "$version" ]; then
		[ -d "$DRIVER_ROOT/usr/src/nvidia-$version" ] ||
			fail sources "$DRIVER_ROOT/usr/src/nvidia-$version is missing (driver $version is loaded); mount the driver root at $DRIVER_ROOT"
		echo "$DRIVER_ROOT/usr/src/nvidia-$version"
		return 0
	fi
	for dir in "$DRIVER_ROOT"/usr/src/nvidia-*; do
		[ -d "$dir" ] && candidates+=("$dir")
	done
	case ${#candidates[@]} in
	1) echo "${candidates[0]}" ;;
	0) fail sources "no $DRIVER_ROOT/usr/src/nvidia-* directory: mount the NVIDIA driver's root at $DRIVER_ROOT (NVIDIA_DRIVER_ROOT)" ;;
	*) fail sources "several driver sources (${candidates[*]}) and $NVIDIA_MODULE reports no version: set NVIDIA_DRIVER_VERSION" ;;
	esac
}

# open or proprietary.  The loaded module knows: a proprietary license taints
# the kernel with P.  Without it, the branch decides: NVIDIA made the open
# modules the default from 560 on, and before 515 there were none.
choose_flavour() {
	local requested=${GDRCOPY_NVIDIA_FLAVOUR:-auto} taint_file="$SYSFS/module/$NVIDIA_MODULE/taint" version major
	case $requested in
	open | proprietary)
		echo "$requested requested (GDRCOPY_NVIDIA_FLAVOUR)"
		return 0
		;;
	auto) ;;
	*) fail flavour "GDRCOPY_NVIDIA_FLAVOUR=$requested: say open, proprietary or auto" ;;
	esac
	if [ -r "$taint_file" ]; then
		if grep -q P "$taint_file"; then
			echo "proprietary (module $NVIDIA_MODULE taints the kernel: $(cat "$taint_file"))"
		else
			echo "open (module $NVIDIA_MODULE is not proprietary: taint '$(cat "$taint_file")')"
		fi
		return 0
	fi
	version=$(driver_version)
	major=${version%%.*}
	case $major in
	'' | *[!0-9]*) fail flavour "neither $taint_file nor a driver version tells the flavour: set GDRCOPY_NVIDIA_FLAVOUR" ;;
	esac
	if [ "$major" -ge 560 ]; then
		echo "open (driver branch $major: open modules are the default from 560)"
	else
		echo "proprietary (driver branch $major: proprietary modules are the default before 560)"
	fi
}

# The directory holding nv-p2p.h in the flavour's half of the driver sources
# (kernel-open/ or kernel/), else anywhere in them.
p2p_header_dir() {
	local sources=$1 flavour=$2 half found
	half=kernel
	[ "$flavour" = open ] && half=kernel-open
	for where in "$sources/$half" "$sources"; do
		[ -d "$where" ] || continue
		found=$(find "$where" -name nv-p2p.h -print -quit)
		if [ -n "$found" ]; then
			dirname "$found"
			return 0
		fi
	done
	fail sources "no nv-p2p.h under $sources; the driver root's sources are incomplete"
}

# The kernel build tree for `kver`: GDRCOPY_KDIR, else this image's, else
# the one the NVIDIA driver container installed for the running kernel, where
# its family keeps it:
#   lib/modules/<kver>/build   a link on every family (Debian, Ubuntu: to
#                              /usr/src/linux-headers-<kver>); an absolute
#                              target is taken inside the driver root
#   usr/src/kernels/<kver>     EL's and RHCOS's kernel-devel; its build link
#                              is not always there
#   usr/src/linux-<version>-obj/<arch>/<flavour>
#                              SUSE's kernel-<flavour>-devel (<kver> is
#                              <version>-<flavour>)
# The driver root's trees name each other by absolute paths (Debian's
# Makefile includes /usr/src/linux-headers-<kver>-common, SUSE's obj tree's
# the sources /usr/src/linux-<version>), so its /usr/src entries are linked
# into ours (link_driver_sources).  Logs the tree and why; without one, fails
# with every place looked at.
kernel_tree() {
	local kver=$1 root=${DRIVER_ROOT%/} looked=() link target tree version flavour arch places packages
	if [ -n "${GDRCOPY_KDIR:-}" ]; then
		[ -e "$GDRCOPY_KDIR/Makefile" ] ||
			fail kernel "GDRCOPY_KDIR=$GDRCOPY_KDIR has no Makefile: point it at the build tree of $kver"
		log kernel "build tree $GDRCOPY_KDIR (GDRCOPY_KDIR)"
		echo "$GDRCOPY_KDIR"
		return 0
	fi
	if [ -e "$LIB_MODULES/$kver/build/Makefile" ]; then
		log kernel "build tree $LIB_MODULES/$kver/build (this image's headers for $kver)"
		echo "$LIB_MODULES/$kver/build"
		return 0
	fi
	looked+=("$LIB_MODULES/$kver/build (this image)")
	for link in "$root/lib/modules/$kver/build" "$root/usr/lib/modules/$kver/build"; do
		if [ -L "$link" ]; then
			target=$(readlink "$link")
			case $target in
			/*) tree=$root$target ;;
			*) tree=${link%/*}/$target ;;
			esac
			if [ -e "$tree/Makefile" ]; then
				driver_root_tree "$tree" "the driver root's ${link#"$root"} -> $target, taken inside the driver root"
				return 0
			fi
			looked+=("$link -> $target (no $tree/Makefile)")
		elif [ -e "$link/Makefile" ]; then
			driver_root_tree "$link" "the driver root's ${link#"$root"}"
			return 0
		else
			looked+=("$link")
		fi
	done
	tree=$root/usr/src/kernels/$kver
	if [ -e "$tree/Makefile" ]; then
		driver_root_tree "$tree" "EL kernel-devel in the driver root, which has no lib/modules/$kver/build link to it"
		return 0
	fi
	looked+=("$tree (EL, RHCOS)")
	packages="Debian, Ubuntu: linux-headers-$kver; EL, RHCOS: kernel-devel-$kver"
	version=${kver%-*}
	flavour=${kver##*-}
	# A SUSE release ends in its flavour (default, rt, azure); EL's in .<arch>.
	case $flavour in
	"$kver" | *.*) ;;
	*)
		arch=$(uname -m)
		tree=$root/usr/src/linux-$version-obj/$arch/$flavour
		if [ -e "$tree/Makefile" ]; then
			driver_root_tree "$tree" "SUSE kernel-$flavour-devel in the driver root, which has no lib/modules/$kver/build link to it"
			return 0
		fi
		looked+=("$tree (SUSE)")
		packages="$packages; SUSE: kernel-$flavour-devel $version"
		;;
	esac
	places=$(printf '%s; ' "${looked[@]}")
	fail kernel "no kernel build tree for $kver; looked at: ${places%; }. Install the running kernel's headers in the NVIDIA driver container ($packages), or set GDRCOPY_KDIR to a build tree for $kver"
}

# `tree` of the driver root, chosen for `why`: logged, its /usr/src linked, printed.
driver_root_tree() {
	log kernel "build tree $1 ($2)"
	link_driver_sources
	echo "$1"
}

# The driver root's /usr/src entries, linked into ours where we have no entry of that name.
link_driver_sources() {
	local root=${DRIVER_ROOT%/} entry name linked=()
	mkdir -p "$USR_SRC"
	for entry in "$root"/usr/src/*; do
		[ -e "$entry" ] || [ -L "$entry" ] || continue # an empty /usr/src: the glob itself
		name=${entry##*/}
		if [ ! -e "$USR_SRC/$name" ] && [ ! -L "$USR_SRC/$name" ]; then
			ln -s "$entry" "$USR_SRC/$name"
			linked+=("$name")
		fi
	done
	if [ ${#linked[@]} -gt 0 ]; then
		log kernel "linked the driver root's /usr/src entries into $USR_SRC, as the trees name each other by absolute paths: ${linked[*]}"
	fi
}

# A prebuilt gdrdrv.ko for `kver` in this image, if any.
prebuilt_module() {
	local kver=$1
	[ -d "$LIB_MODULES/$kver" ] || return 0
	find "$LIB_MODULES/$kver" -name "$MODULE.ko*" -print -quit
}

build_module() {
	local kver=$1 flavour=$2 sources header_dir kdir source_tree opensource=n
	source_tree=$(find "$USR_SRC" -maxdepth 1 -name "$MODULE-*" -print -quit)
	[ -n "$source_tree" ] || fail build "no $USR_SRC/$MODULE-* in this image and no prebuilt module for $kver: use the image built with the gdrdrv-dkms package"
	if ! command -v make >/dev/null || ! command -v gcc >/dev/null; then
		fail build "this image has no compiler and no prebuilt module for $kver: use the build image (<version>-<os>) or one precompiled for $kver"
	fi
	sources=$(driver_sources)
	header_dir=$(p2p_header_dir "$sources" "$flavour")
	kdir=$(kernel_tree "$kver")
	[ "$flavour" = open ] && opensource=y
	log build "gdrdrv from $source_tree for $kver: kernel tree $kdir, nv-p2p.h from $header_dir, NVIDIA_IS_OPENSOURCE=$opensource"
	rm -rf "$BUILD_DIR"
	mkdir -p "$BUILD_DIR"
	cp -a "$source_tree/." "$BUILD_DIR/"
	if ! make -C "$BUILD_DIR" KVER="$kver" KDIR="$kdir" NVIDIA_SRC_DIR="$header_dir" \
		NVIDIA_IS_OPENSOURCE="$opensource" >"$BUILD_DIR/build.log" 2>&1; then
		tail -n 40 "$BUILD_DIR/build.log" >&2
		fail build "make failed (last lines above; whole log $BUILD_DIR/build.log)"
	fi
	echo "$BUILD_DIR/$MODULE.ko"
}

# GDRCOPY_NODE_GID and GDRCOPY_NODE_MODE, checked: "" when no group is asked for.
node_access() {
	local gid=${GDRCOPY_NODE_GID:-} mode=${GDRCOPY_NODE_MODE:-0660}
	[ -n "$gid" ] || return 0
	case $gid in
	'' | *[!0-9]*) fail node "GDRCOPY_NODE_GID=$gid: give a numeric group id (the pods' supplementalGroups entry)" ;;
	esac
	case $mode in
	0[0-7][0-7][0-7] | [0-7][0-7][0-7]) ;;
	*) fail node "GDRCOPY_NODE_MODE=$mode: give octal permission bits, e.g. 0660" ;;
	esac
	# Only the owner (root) and the group: "other" bits would let every user in.
	case $mode in
	*[1-7]) fail node "GDRCOPY_NODE_MODE=$mode gives every user access, which GDRCOPY_NODE_GID is meant to restrict: use 0660" ;;
	esac
	echo "$gid $mode"
}

# gdrdrv's options as modprobe would give them (modprobe.d), then the node's
# group and mode (GDRCOPY_NODE_GID), then GDRCOPY_MODULE_ARGS: the last of a name wins.
module_options() {
	local options access
	options=$(modprobe -c 2>/dev/null | awk -v m="$MODULE" '$1 == "options" && $2 == m { for (i = 3; i <= NF; i++) printf "%s ", $i }' || true)
	access=$(node_access)
	if [ -n "$access" ]; then
		options="${options}node_mode=${access#* } node_gid=${access%% *} "
	fi
	echo "$options${GDRCOPY_MODULE_ARGS:-}"
}

# The kernel makes /dev/gdrdrv root's: give it the group and mode asked for
# (on hosts with our packages, their udev rule does this from node_gid).
apply_node_access() {
	local access node=${GDRCOPY_DEV_DIR:-/dev}/$MODULE
	access=$(node_access)
	[ -n "$access" ] || return 0
	# devtmpfs has made the node by the time insmod returns.  A container
	# whose /dev is its own (made before gdrdrv loaded) does not see it: say
	# so and go on, as the pods' node comes from the CDI spec.
	if [ ! -c "$node" ]; then
		log node "$node is not here: the host's /dev is not mounted at ${GDRCOPY_DEV_DIR:-/dev} (GDRCOPY_DEV_DIR), so the host's node keeps root's group; pods get mode ${access#* } and group ${access%% *} from the CDI spec"
		return 0
	fi
	chgrp "${access%% *}" "$node" || fail node "chgrp ${access%% *} $node failed: the container must be privileged"
	chmod "${access#* }" "$node" || fail node "chmod ${access#* } $node failed"
	log node "$node: mode ${access#* }, group ${access%% *} (GDRCOPY_NODE_GID): non-root users outside that group are refused"
}

# The flavour the module `ko` was built for, as "open" or "proprietary".
module_flavour() {
	case $(modinfo -F nvidia_flavor "$1" 2>/dev/null) in
	opensource) echo open ;;
	proprietary) echo proprietary ;;
	*) echo unknown ;;
	esac
}

# SUSE's enterprise kernels (CONFIG_SUSE_KERNEL_SUPPORTED, the kernels that
# have /proc/sys/kernel/unsupported) read a "supported" flag in each module's
# modinfo: "yes" (SUSE's own), "external" (a SolidDriver partner's) or none.
# gdrdrv, built out of the kernel's tree, has none.  Two switches decide
# whether such a module loads:
#   kernel.unsupported   the kernel's own: 0 refuses it (ENOEXEC, which insmod
#                        reports as "Invalid module format"), 1 loads it and
#                        warns in the kernel log, 2 loads it quietly (SLE's
#                        default); both taint the kernel N
#   allow_unsupported_modules
#                        SUSE's modprobe's, in modprobe.d (0 on SLE): modprobe
#                        refuses such a module unless it is 1 or
#                        --allow-unsupported-modules is given.  insmod reads no
#                        modprobe.d, so it does not apply to our insmod.
# So with 1 or 2 gdrdrv loads and nothing on the node changes.  With 0, set
# by the node's administrator, we refuse and say what to set, unless
# GDRCOPY_ALLOW_UNSUPPORTED=1 asks us to raise it to 1 for our insmod alone;
# restore_unsupported puts 0 back right after it (or on any exit), so the
# node is left as it was, and both steps are logged.  (Another unsupported
# module loaded in that moment would pass too; 1, not 2, has the kernel log
# each one.)  We never mark gdrdrv "external": that claims a SUSE partner's
# support, which it does not have.
unsupported_restore=""

allow_unsupported() {
	local ko=$1 knob="$PROC/sys/kernel/unsupported" allow=${GDRCOPY_ALLOW_UNSUPPORTED:-0} value supported
	case $allow in
	0 | 1) ;;
	*) fail supported "GDRCOPY_ALLOW_UNSUPPORTED=$allow: say 0 or 1" ;;
	esac
	[ -r "$knob" ] || return 0 # not a SUSE enterprise kernel
	value=$(cat "$knob")
	supported=$(modinfo -F supported "$ko" 2>/dev/null || true)
	case $supported in
	yes | external)
		log supported "SUSE kernel: $ko is marked supported=$supported, which kernel.unsupported ($value) does not restrict"
		return 0
		;;
	esac
	if [ "$value" != 0 ]; then
		log supported "SUSE kernel: $MODULE is not marked supported by SUSE and kernel.unsupported=$value lets it load (the kernel is tainted N); modprobe's allow_unsupported_modules does not apply to insmod; nothing on the node is changed"
		return 0
	fi
	[ "$allow" = 1 ] ||
		fail supported "this SUSE kernel refuses modules not marked supported (kernel.unsupported=0, set on the node by sysctl or the boot option unsupported=0) and $MODULE is not marked: set kernel.unsupported=1 on the node (sysctl -w kernel.unsupported=1, kept in /etc/sysctl.d), or GDRCOPY_ALLOW_UNSUPPORTED=1 in this container to raise it for this insmod alone"
	trap restore_unsupported EXIT
	unsupported_restore=$value
	if ! echo 1 >"$knob"; then
		unsupported_restore=""
		fail supported "cannot write $knob to allow $MODULE (GDRCOPY_ALLOW_UNSUPPORTED=1): the container must be privileged"
	fi
	log supported "SUSE kernel: kernel.unsupported raised from 0 to 1 for this insmod of $MODULE alone (GDRCOPY_ALLOW_UNSUPPORTED=1); the kernel logs the load and is tainted N"
}

# Put kernel.unsupported back to what allow_unsupported found, if it changed it.
restore_unsupported() {
	[ -n "$unsupported_restore" ] || return 0
	if echo "$unsupported_restore" >"$PROC/sys/kernel/unsupported"; then
		log supported "kernel.unsupported put back to $unsupported_restore"
	else
		log supported "FAILED to put kernel.unsupported back to $unsupported_restore: run sysctl -w kernel.unsupported=$unsupported_restore on the node"
	fi
	unsupported_restore=""
	trap - EXIT
}

# insmod `ko` with its options, once SUSE's support policy allows it.
insert_module() {
	local ko=$1 rc=0
	shift
	allow_unsupported "$ko"
	insmod "$ko" "$@" || rc=$?
	restore_unsupported
	[ "$rc" = 0 ] || fail load "insmod failed; the kernel log (dmesg) says why"
}

load_module() {
	local kver flavour_line flavour ko built options
	# Refuse a bad GDRCOPY_NODE_GID/MODE here: in the substitutions below a failure would not stop us.
	node_access >/dev/null
	kver=$(uname -r)
	if module_loaded "$MODULE"; then
		log load "$MODULE $(cat "$SYSFS/module/$MODULE/version" 2>/dev/null || echo '(version unknown)') is loaded already: using it"
		return 0
	fi
	flavour_line=$(choose_flavour)
	flavour=${flavour_line%% *}
	log flavour "$flavour_line"
	ko=$(prebuilt_module "$kver")
	if [ -n "$ko" ]; then
		built=$(module_flavour "$ko")
		# An open-flavour gdrdrv uses GPL-only exports, which a proprietary driver refuses.
		if [ "$built" = open ] && [ "$flavour" = proprietary ]; then
			log module "prebuilt $ko is for the open driver, this one is proprietary: building instead"
			ko=""
		else
			log module "prebuilt $ko for $kver ($built flavour)"
		fi
	fi
	if [ -z "$ko" ]; then
		ko=$(build_module "$kver" "$flavour")
		log module "built $ko"
	fi
	options=$(module_options)
	# From here on a TERM must unload what insmod loads (install mode), or
	# the driver container could not unload nvidia under it.
	if [ -n "$unload_on_term" ]; then
		trap on_term TERM INT
	fi
	log load "insmod $ko $options"
	# shellcheck disable=SC2086 # the options are separate words
	insert_module "$ko" $options
	module_loaded "$MODULE" || fail load "$MODULE is not in $PROC/modules after insmod"
	apply_node_access
	log load "$MODULE $(cat "$SYSFS/module/$MODULE/version" 2>/dev/null) loaded; /dev/gdrdrv $([ -e /dev/gdrdrv ] && echo present || echo 'not seen here')"
}

# Unload gdrdrv only when nothing holds it: a process with /dev/gdrdrv open
# (or pinned GPU memory) keeps it, and NVIDIA's driver stays loaded under it.
unload_module() {
	local refcnt
	if ! module_loaded "$MODULE"; then
		log unload "$MODULE is not loaded"
		return 0
	fi
	refcnt=$(cat "$SYSFS/module/$MODULE/refcnt" 2>/dev/null || echo unknown)
	if [ "$refcnt" != 0 ]; then
		log unload "$MODULE is in use (refcount $refcnt): left loaded; stop what uses /dev/gdrdrv, then rmmod $MODULE"
		return 0
	fi
	if rmmod "$MODULE"; then
		log unload "$MODULE unloaded (refcount was 0)"
	else
		log unload "rmmod $MODULE failed; left loaded"
	fi
}

on_term() {
	stop_pause
	log term "signal received"
	unload_module
	exit 0
}

# The standalone loader's long-running container: unprivileged, so it unloads nothing.
watch_module() {
	trap 'stop_pause; log term "signal received; gdrdrv stays loaded (the loader unloads nothing)"; exit 0' TERM INT
	module_loaded "$MODULE" || fail watch "$MODULE is not loaded: the init container did not load it"
	log watch "$MODULE is loaded; watching (readiness: lsmod | grep -E '^$MODULE\\s')"
	while :; do
		pause "$POLL"
		module_loaded "$MODULE" || fail watch "$MODULE was unloaded by someone else"
	done
}

cdi_if_asked() {
	if [ -n "${GDRCOPY_CDI_DIR:-}" ]; then
		install_cdi "$GDRCOPY_CDI_DIR"
	fi
}

serve() {
	trap on_term TERM INT
	log ready "$MODULE is loaded; waiting for TERM (readiness: lsmod | grep -E '^$MODULE\\s')"
	while :; do
		pause "$POLL"
		module_loaded "$MODULE" || fail ready "$MODULE was unloaded by someone else"
	done
}

# The image's CDI spec; with GDRCOPY_NODE_GID, its device node says the
# owner, group and mode the runtime gives the pod's node (fileMode in decimal,
# as the spec's JSON form has it).  Without them runtimes differ: some copy the
# host's mode, some default to 0666.
cdi_spec_with_access() {
	local access
	access=$(node_access)
	if [ -z "$access" ]; then
		cat "$CDI_SPEC"
		return 0
	fi
	awk -v gid="${access%% *}" -v mode="$((8#${access#* }))" '
		{ print }
		/^ *permissions:/ {
			indent = $0
			sub(/[^ ].*$/, "", indent)
			printf "%sfileMode: %s\n%suid: 0\n%sgid: %s\n", indent, mode, indent, indent, gid
		}' "$CDI_SPEC"
}

install_cdi() {
	local dir=$1 other kind
	[ -r "$CDI_SPEC" ] || fail cdi "$CDI_SPEC is missing from this image"
	node_access >/dev/null
	# The kind comes from the spec itself (rendered from packages/gdrcopy.yaml).
	kind=$(sed -n 's/^kind: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$CDI_SPEC")
	[ -n "$kind" ] || fail cdi "$CDI_SPEC names no kind"
	for where in $CDI_DIRS "$dir"; do
		[ -d "$where" ] || continue
		other=$(grep -l -E "^kind: *\"?$kind\"?\$" "$where"/*.yaml 2>/dev/null | grep -v -x "$dir/gdrcopy-k8s.yaml" || true)
		other=$other$(grep -l -E "\"kind\": *\"$kind\"" "$where"/*.json 2>/dev/null || true)
		if [ -n "$other" ]; then
			log cdi "$other already defines $kind: ours is not written (two specs of one kind conflict)"
			return 0
		fi
	done
	mkdir -p "$dir"
	cdi_spec_with_access >"$dir/gdrcopy-k8s.yaml.tmp"
	mv "$dir/gdrcopy-k8s.yaml.tmp" "$dir/gdrcopy-k8s.yaml"
	log cdi "wrote $dir/gdrcopy-k8s.yaml ($(sed -n 's/^  - name: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$CDI_SPEC" | sed "s|^|$kind=|"))"
}

main() {
	case ${1:-} in
	install)
		unload_on_term=1
		wait_for_driver
		load_module
		cdi_if_asked
		serve
		;;
	load)
		wait_for_driver
		load_module
		cdi_if_asked
		;;
	watch) watch_module ;;
	unload) unload_module ;;
	status) module_loaded "$MODULE" ;;
	cdi)
		[ -n "${2:-}" ] || fail cdi "usage: $NAME cdi DIR"
		install_cdi "$2"
		;;
	*)
		echo "usage: $NAME install|load|watch|unload|status|cdi DIR" >&2
		exit 2
		;;
	esac
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
