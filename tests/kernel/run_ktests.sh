#!/bin/sh
# SPDX-License-Identifier: MIT
#
# run_ktests.sh - run gdrdrv_ktest (or gdrdrv_race) in every configuration
# the VM offers: softgpu backed by the ivshmem BAR (write-combined mappings)
# and by RAM (cacheable), each with gdrdrv's persistent and legacy (callback)
# pins.  Reloads softgpu and gdrdrv between configurations; run it as root
# inside a test VM, never on a host with a real GPU.
#
# usage: run_ktests.sh [-s SOFTGPU_KO] [-g GDRDRV_KO] [-b] [-r] [-c CONFIG]... [-- ARGS...]
#   -s PATH    softgpu.ko to insmod (default: $SOFTGPU_KO, else modprobe softgpu)
#   -g PATH    gdrdrv.ko to insmod (default: $GDRDRV_KO, else modprobe gdrdrv)
#   -b         also run gdrdrv_pinbench (first configuration only)
#   -r         run gdrdrv_race (the race tests) instead of gdrdrv_ktest
#   -c CONFIG  only this configuration (repeatable): bar-persistent,
#              bar-legacy, ram-persistent or ram-legacy
# ARGS go to the program in each configuration.
# gdrdrv is loaded with $GDRDRV_PARAMS besides use_persistent_mapping;
# by default, the debug/info/node parameters it was loaded with.  Modules that
# were loaded at the start are loaded again the same way at the end, so a
# caller's own unload checks still apply.
# Prints each run's TAP output, then the totals as "N passed, N failed,
# N skipped"; exits non-zero if a test failed or a configuration could not
# be set up.
set -u

SOFTGPU_KO=${SOFTGPU_KO:-}
GDRDRV_KO=${GDRDRV_KO:-}
BENCH=0
PROGRAM=gdrdrv_ktest
CONFIGS=
while getopts s:g:brc:h opt; do
	case $opt in
	s) SOFTGPU_KO=$OPTARG ;;
	g) GDRDRV_KO=$OPTARG ;;
	b) BENCH=1 ;;
	r) PROGRAM=gdrdrv_race ;;
	c)
		case $OPTARG in
		bar-persistent | bar-legacy | ram-persistent | ram-legacy) CONFIGS="$CONFIGS $OPTARG" ;;
		*) echo "run_ktests.sh: unknown configuration '$OPTARG'" >&2; exit 2 ;;
		esac
		;;
	h) sed -n '3,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ "${1:-}" = -- ] && shift

here=$(dirname "$0")
find_prog() {
	if [ -x "$here/$1" ]; then echo "$here/$1"; else command -v "$1"; fi
}
PROG=$(find_prog "$PROGRAM") || { echo "run_ktests.sh: $PROGRAM not found next to me or in PATH" >&2; exit 2; }
PINBENCH=$(find_prog gdrdrv_pinbench || true)

loaded() { grep -q "^$1 " /proc/modules; }

unload() {
	for m in gdrdrv softgpu; do
		if loaded $m && ! rmmod $m; then
			echo "run_ktests.sh: cannot unload $m (in use?)" >&2
			return 1
		fi
	done
}

load() {	# load MODULE KO_PATH PARAMS...
	name=$1 ko=$2
	shift 2
	if [ -n "$ko" ]; then insmod "$ko" "$@"; else modprobe "$name" "$@"; fi
}

has_ivshmem() {
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat "$d/vendor" 2>/dev/null)" = 0x1af4 ] &&
			[ "$(cat "$d/device" 2>/dev/null)" = 0x1110 ] && return 0
	done
	return 1
}

param() { cat "/sys/module/$1/parameters/$2" 2>/dev/null; }

# How the modules were loaded when we started, to put them back so.
initial_gdrdrv='' initial_softgpu=''
if loaded gdrdrv; then
	initial_gdrdrv="use_persistent_mapping=$(param gdrdrv use_persistent_mapping || echo 1)"
	if [ -z "${GDRDRV_PARAMS+set}" ]; then
		GDRDRV_PARAMS=
		for p in dbg_enabled info_enabled node_mode node_gid; do
			v=$(param gdrdrv $p) && GDRDRV_PARAMS="$GDRDRV_PARAMS $p=$v"
		done
	fi
fi
GDRDRV_PARAMS=${GDRDRV_PARAMS:-}
if loaded softgpu; then
	initial_softgpu="force_ram=$(param softgpu force_ram || echo N)"
fi

modes=ram
has_ivshmem && modes="bar ram"

# Whether to run mode MODE with persistent pins PERSISTENT (1 or 0).
selected() {
	[ -z "$CONFIGS" ] && return 0
	case $2 in 1) pins=persistent ;; *) pins=legacy ;; esac
	case " $CONFIGS " in *" $1-$pins "*) return 0 ;; esac
	return 1
}

# The program's run in one configuration.
run_program() {
	if [ "$PROGRAM" = gdrdrv_ktest ] && [ -n "$GDRDRV_KO" ]; then
		"$PROG" -k "$GDRDRV_KO" "$@"
	else
		"$PROG" "$@"
	fi
}

total_pass=0 total_fail=0 total_skip=0 broken=0 ran=0
for mode in $modes; do
	for persistent in 1 0; do
		selected "$mode" "$persistent" || continue
		ran=$((ran + 1))
		echo "# === softgpu $mode, gdrdrv use_persistent_mapping=$persistent ==="
		started=$(date +%s)
		sg_params=
		[ "$mode" = ram ] && sg_params=force_ram=1
		# Parameters are lists of words: split on purpose.
		# shellcheck disable=SC2086
		if ! unload || ! load softgpu "$SOFTGPU_KO" $sg_params ||
		   ! load gdrdrv "$GDRDRV_KO" use_persistent_mapping=$persistent $GDRDRV_PARAMS; then
			echo "# could not set up this configuration"
			broken=$((broken + 1))
			continue
		fi
		out=$(mktemp)
		run_program "$@" | tee "$out"
		summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
		rm -f "$out"
		if [ -z "$summary" ]; then
			echo "# $PROGRAM printed no summary (crashed?)"
			broken=$((broken + 1))
			continue
		fi
		p=$(echo "$summary" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
		f=$(echo "$summary" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
		s=$(echo "$summary" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
		total_pass=$((total_pass + p))
		total_fail=$((total_fail + f))
		total_skip=$((total_skip + ${s:-0}))
		echo "# $PROGRAM took $(($(date +%s) - started)) s here, module reloads included"
		if [ "$BENCH" = 1 ] && [ -n "$PINBENCH" ]; then
			echo "# === gdrdrv_pinbench (softgpu $mode, persistent=$persistent) ==="
			"$PINBENCH" || broken=$((broken + 1))
			BENCH=0
		fi
	done
done
if [ "$ran" = 0 ]; then
	echo "# none of the configurations asked for ($CONFIGS ) exists here (softgpu modes: $modes)"
	broken=$((broken + 1))
fi
unload || broken=$((broken + 1))
# shellcheck disable=SC2086
if [ -n "$initial_softgpu" ]; then
	load softgpu "$SOFTGPU_KO" $initial_softgpu || broken=$((broken + 1))
	if [ -n "$initial_gdrdrv" ]; then
		load gdrdrv "$GDRDRV_KO" $initial_gdrdrv $GDRDRV_PARAMS || broken=$((broken + 1))
	fi
fi

echo "# configurations: $modes x persistent 1,0${CONFIGS:+ (only$CONFIGS)}; $broken could not run"
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" = 0 ] && [ "$broken" = 0 ]
