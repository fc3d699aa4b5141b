# SPDX-License-Identifier: MIT
# shellcheck shell=sh
#
# ktest_lib.sh - sourced by run_ktests.sh and run_fuzz.sh: loads softgpu and
# gdrdrv in each test configuration (softgpu on the ivshmem BAR or in RAM,
# gdrdrv with persistent or legacy pins), checks that gdrdrv gives every pin
# back and unloads, and loads the modules again as they were at the start.
#
# The sourcing script sets SOFTGPU_KO and GDRDRV_KO (paths to insmod, or
# empty for modprobe) and may set GDRDRV_PARAMS; then:
#   kt_save_initial              remember how the modules are loaded now; sets
#                                KT_MODES ("bar ram" or "ram") and, unless set,
#                                GDRDRV_PARAMS (debug/info/node parameters)
#   kt_setup MODE PERSISTENT     unload both, load softgpu for MODE (bar|ram),
#                                then gdrdrv with use_persistent_mapping=PERSISTENT
#   kt_check_refcount            gdrdrv's nv_get_pages_refcount is 0 (or absent)
#   kt_restore                   unload both, load them as they were
#   kt_add_summary FILE          adds FILE's last "N passed, N failed[, N skipped]"
#                                to KT_PASS, KT_FAIL, KT_SKIP; fails if none
#   kt_find_prog NAME            the program next to the script, else in PATH
# Messages are prefixed with $KT_PROG.

KT_PROG=${KT_PROG:-$(basename "$0")}
KT_HERE=$(dirname "$0")
KT_PASS=0 KT_FAIL=0 KT_SKIP=0
KT_REFCOUNT=/proc/driver/gdrdrv/nv_get_pages_refcount

kt_find_prog() {
	if [ -x "$KT_HERE/$1" ]; then echo "$KT_HERE/$1"; else command -v "$1"; fi
}

kt_loaded() { grep -q "^$1 " /proc/modules; }

kt_unload() {
	for m in gdrdrv softgpu; do
		if kt_loaded $m && ! rmmod $m; then
			echo "$KT_PROG: cannot unload $m (in use?)" >&2
			return 1
		fi
	done
}

kt_load() {	# kt_load MODULE KO_PATH PARAMS...
	name=$1 ko=$2
	shift 2
	if [ -n "$ko" ]; then insmod "$ko" "$@"; else modprobe "$name" "$@"; fi
}

kt_has_ivshmem() {
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat "$d/vendor" 2>/dev/null)" = 0x1af4 ] &&
			[ "$(cat "$d/device" 2>/dev/null)" = 0x1110 ] && return 0
	done
	return 1
}

kt_param() { cat "/sys/module/$1/parameters/$2" 2>/dev/null; }

kt_save_initial() {
	kt_initial_gdrdrv='' kt_initial_softgpu=''
	if kt_loaded gdrdrv; then
		kt_initial_gdrdrv="use_persistent_mapping=$(kt_param gdrdrv use_persistent_mapping || echo 1)"
		if [ -z "${GDRDRV_PARAMS+set}" ]; then
			GDRDRV_PARAMS=
			for p in dbg_enabled info_enabled node_mode node_gid; do
				v=$(kt_param gdrdrv $p) && GDRDRV_PARAMS="$GDRDRV_PARAMS $p=$v"
			done
		fi
	fi
	GDRDRV_PARAMS=${GDRDRV_PARAMS:-}
	if kt_loaded softgpu; then
		kt_initial_softgpu="force_ram=$(kt_param softgpu force_ram || echo N)"
	fi
	# shellcheck disable=SC2034 # for the sourcing script
	KT_MODES=ram
	# shellcheck disable=SC2034
	if kt_has_ivshmem; then KT_MODES="bar ram"; fi
}

kt_setup() {	# kt_setup MODE PERSISTENT
	sg_params=
	[ "$1" = ram ] && sg_params=force_ram=1
	# shellcheck disable=SC2086 # the parameter lists are word lists
	kt_unload && kt_load softgpu "$SOFTGPU_KO" $sg_params &&
		kt_load gdrdrv "$GDRDRV_KO" use_persistent_mapping="$2" $GDRDRV_PARAMS
}

kt_check_refcount() {
	[ -r "$KT_REFCOUNT" ] || return 0
	n=$(cat "$KT_REFCOUNT")
	[ "$n" = 0 ] && return 0
	echo "$KT_PROG: gdrdrv's nv_get_pages_refcount is $n, not 0" >&2
	return 1
}

kt_restore() {
	kt_unload || return 1
	[ -n "$kt_initial_softgpu" ] || return 0
	# shellcheck disable=SC2086
	kt_load softgpu "$SOFTGPU_KO" $kt_initial_softgpu || return 1
	[ -n "$kt_initial_gdrdrv" ] || return 0
	# shellcheck disable=SC2086
	kt_load gdrdrv "$GDRDRV_KO" $kt_initial_gdrdrv $GDRDRV_PARAMS
}

kt_add_summary() {	# kt_add_summary FILE
	summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
	[ -n "$summary" ] || return 1
	p=$(echo "$summary" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
	f=$(echo "$summary" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
	s=$(echo "$summary" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
	KT_PASS=$((KT_PASS + p))
	KT_FAIL=$((KT_FAIL + f))
	KT_SKIP=$((KT_SKIP + ${s:-0}))
}
