#!/bin/sh
# SPDX-License-Identifier: MIT
#
# run_ktests.sh - run gdrdrv_ktest (or gdrdrv_race) in every configuration
# the VM offers: softgpu backed by the ivshmem BAR (write-combined mappings)
# and by RAM (cacheable), each with gdrdrv's persistent and legacy (callback)
# pins.  Reloads softgpu and gdrdrv between configurations; run it as root
# inside a test VM, never on a host with a real GPU.
#
# usage: run_ktests.sh [-s SOFTGPU_KO] [-g GDRDRV_KO] [-b] [-r] [-p PROGRAM] [-c CONFIG]... [-- ARGS...]
#   -s PATH    softgpu.ko to insmod (default: $SOFTGPU_KO, else modprobe softgpu)
#   -g PATH    gdrdrv.ko to insmod (default: $GDRDRV_KO, else modprobe gdrdrv)
#   -b         also run gdrdrv_pinbench (first configuration only)
#   -r         run gdrdrv_race (the race tests) instead of gdrdrv_ktest
#   -p PROGRAM run PROGRAM (gdrdrv_sectest: the isolation tests) instead
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
while getopts s:g:brp:c:h opt; do
	case $opt in
	s) SOFTGPU_KO=$OPTARG ;;
	g) GDRDRV_KO=$OPTARG ;;
	b) BENCH=1 ;;
	r) PROGRAM=gdrdrv_race ;;
	p)
		case $OPTARG in
		gdrdrv_ktest | gdrdrv_sectest | gdrdrv_race) PROGRAM=$OPTARG ;;
		*) echo "run_ktests.sh: unknown program '$OPTARG'" >&2; exit 2 ;;
		esac
		;;
	c)
		case $OPTARG in
		bar-persistent | bar-legacy | ram-persistent | ram-legacy) CONFIGS="$CONFIGS $OPTARG" ;;
		*) echo "run_ktests.sh: unknown configuration '$OPTARG'" >&2; exit 2 ;;
		esac
		;;
	h) sed -n '3,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ "${1:-}" = -- ] && shift

# shellcheck source-path=SCRIPTDIR source=ktest_lib.sh
. "$(dirname "$0")/ktest_lib.sh"
PROG=$(kt_find_prog "$PROGRAM") || { echo "run_ktests.sh: $PROGRAM not found next to me or in PATH" >&2; exit 2; }
PINBENCH=$(kt_find_prog gdrdrv_pinbench || true)

# Whether to run mode MODE with persistent pins PERSISTENT (1 or 0).
selected() {
	[ -z "$CONFIGS" ] && return 0
	case $2 in 1) pins=persistent ;; *) pins=legacy ;; esac
	case " $CONFIGS " in *" $1-$pins "*) return 0 ;; esac
	return 1
}

# The program's run in one configuration.
run_program() {
	if [ "$PROGRAM" != gdrdrv_race ] && [ -n "$GDRDRV_KO" ]; then
		"$PROG" -k "$GDRDRV_KO" "$@"
	else
		"$PROG" "$@"
	fi
}

kt_save_initial
broken=0 ran=0
for mode in $KT_MODES; do
	for persistent in 1 0; do
		selected "$mode" "$persistent" || continue
		ran=$((ran + 1))
		echo "# === softgpu $mode, gdrdrv use_persistent_mapping=$persistent ==="
		started=$(date +%s)
		if ! kt_setup "$mode" "$persistent"; then
			echo "# could not set up this configuration"
			broken=$((broken + 1))
			continue
		fi
		out=$(mktemp)
		run_program "$@" | tee "$out"
		if ! kt_add_summary "$out"; then
			echo "# $PROGRAM printed no summary (crashed?)"
			broken=$((broken + 1))
			rm -f "$out"
			continue
		fi
		rm -f "$out"
		echo "# $PROGRAM took $(($(date +%s) - started)) s here, module reloads included"
		if [ "$BENCH" = 1 ] && [ -n "$PINBENCH" ]; then
			echo "# === gdrdrv_pinbench (softgpu $mode, persistent=$persistent) ==="
			"$PINBENCH" || broken=$((broken + 1))
			BENCH=0
		fi
	done
done
if [ "$ran" = 0 ]; then
	echo "# none of the configurations asked for ($CONFIGS ) exists here (softgpu modes: $KT_MODES)"
	broken=$((broken + 1))
fi
kt_restore || broken=$((broken + 1))

echo "# configurations: $KT_MODES x persistent 1,0${CONFIGS:+ (only$CONFIGS)}; $broken could not run"
echo "$KT_PASS passed, $KT_FAIL failed, $KT_SKIP skipped"
[ "$KT_FAIL" = 0 ] && [ "$broken" = 0 ]
