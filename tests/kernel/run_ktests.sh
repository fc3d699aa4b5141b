#!/bin/sh
# SPDX-License-Identifier: MIT
#
# run_ktests.sh - run gdrdrv_ktest in every configuration the VM offers:
# softgpu backed by the ivshmem BAR (write-combined mappings) and by RAM
# (cacheable), each with gdrdrv's persistent and legacy (callback) pins.
# Reloads softgpu and gdrdrv between configurations; run it as root inside a
# test VM, never on a host with a real GPU.
#
# usage: run_ktests.sh [-s SOFTGPU_KO] [-g GDRDRV_KO] [-b] [-- KTEST_ARGS...]
#   -s PATH  softgpu.ko to insmod (default: $SOFTGPU_KO, else modprobe softgpu)
#   -g PATH  gdrdrv.ko to insmod (default: $GDRDRV_KO, else modprobe gdrdrv)
#   -b       also run gdrdrv_pinbench (first configuration only)
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
while getopts s:g:bh opt; do
	case $opt in
	s) SOFTGPU_KO=$OPTARG ;;
	g) GDRDRV_KO=$OPTARG ;;
	b) BENCH=1 ;;
	h) sed -n '3,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ "${1:-}" = -- ] && shift

# shellcheck source-path=SCRIPTDIR source=ktest_lib.sh
. "$(dirname "$0")/ktest_lib.sh"
KTEST=$(kt_find_prog gdrdrv_ktest) || { echo "run_ktests.sh: gdrdrv_ktest not found next to me or in PATH" >&2; exit 2; }
PINBENCH=$(kt_find_prog gdrdrv_pinbench || true)

kt_save_initial
broken=0
for mode in $KT_MODES; do
	for persistent in 1 0; do
		echo "# === softgpu $mode, gdrdrv use_persistent_mapping=$persistent ==="
		if ! kt_setup "$mode" "$persistent"; then
			echo "# could not set up this configuration"
			broken=$((broken + 1))
			continue
		fi
		out=$(mktemp)
		if [ -n "$GDRDRV_KO" ]; then
			"$KTEST" -k "$GDRDRV_KO" "$@" | tee "$out"
		else
			"$KTEST" "$@" | tee "$out"
		fi
		if ! kt_add_summary "$out"; then
			echo "# gdrdrv_ktest printed no summary (crashed?)"
			broken=$((broken + 1))
			rm -f "$out"
			continue
		fi
		rm -f "$out"
		if [ "$BENCH" = 1 ] && [ -n "$PINBENCH" ]; then
			echo "# === gdrdrv_pinbench (softgpu $mode, persistent=$persistent) ==="
			"$PINBENCH" || broken=$((broken + 1))
			BENCH=0
		fi
	done
done
kt_restore || broken=$((broken + 1))

echo "# configurations: $KT_MODES x persistent 1,0; $broken could not run"
echo "$KT_PASS passed, $KT_FAIL failed, $KT_SKIP skipped"
[ "$KT_FAIL" = 0 ] && [ "$broken" = 0 ]
