#!/bin/sh
# SPDX-License-Identifier: MIT
#
# run_fuzz.sh - run gdrdrv_fuzz in every configuration the VM offers:
# softgpu on the ivshmem BAR (write-combined) and in RAM (cacheable), each
# with gdrdrv's persistent and legacy (callback) pins, loading the modules
# as run_ktests.sh does.  After each run gdrdrv's pin refcount must be 0 and
# both modules must unload.  Run it as root inside a test VM.
#
# usage: run_fuzz.sh [-s SOFTGPU_KO] [-g GDRDRV_KO] [-c CONFIGS] [-- FUZZ_ARGS...]
#   -s PATH     softgpu.ko to insmod (default: $SOFTGPU_KO, else modprobe)
#   -g PATH     gdrdrv.ko to insmod (default: $GDRDRV_KO, else modprobe)
#   -c CONFIGS  which, as MODE/PINS words: MODE bar or ram, PINS persistent
#               or legacy, e.g. "bar/legacy ram/persistent" (default: all
#               four, without bar if the VM has no ivshmem device)
#   FUZZ_ARGS   for gdrdrv_fuzz in each configuration, e.g. -n 200000 -t 3
# Prints the fuzzer's output, "ok N - CONFIG: OPS ops, ..." or "not ok N -
# CONFIG: WHY" per configuration, and last "N passed, N failed" counted per
# configuration; exits non-zero if one failed or could not be set up.
set -u

SOFTGPU_KO=${SOFTGPU_KO:-}
GDRDRV_KO=${GDRDRV_KO:-}
configs=''
while getopts s:g:c:h opt; do
	case $opt in
	s) SOFTGPU_KO=$OPTARG ;;
	g) GDRDRV_KO=$OPTARG ;;
	c) configs=$OPTARG ;;
	h) sed -n '3,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ "${1:-}" = -- ] && shift

# shellcheck source-path=SCRIPTDIR source=ktest_lib.sh
. "$(dirname "$0")/ktest_lib.sh"
FUZZ=$(kt_find_prog gdrdrv_fuzz) || { echo "run_fuzz.sh: gdrdrv_fuzz not found next to me or in PATH" >&2; exit 2; }

kt_save_initial
if [ -z "$configs" ]; then
	for mode in $KT_MODES; do
		configs="$configs $mode/persistent $mode/legacy"
	done
fi
for c in $configs; do
	case $c in
	bar/persistent | bar/legacy | ram/persistent | ram/legacy) ;;
	*) echo "run_fuzz.sh: -c takes bar|ram/persistent|legacy words, not $c" >&2; exit 2 ;;
	esac
done
passed=0 failed=0 num=0 total_ops=0
for c in $configs; do
	mode=${c%/*} pins=${c#*/}
	num=$((num + 1))
	persistent=0
	[ "$pins" = persistent ] && persistent=1
	config="softgpu $mode, $pins pins"
	case " $KT_MODES " in
	*" $mode "*) ;;
	*)
		echo "not ok $num - $config: this VM has no softgpu $mode backing"
		failed=$((failed + 1))
		continue ;;
	esac
	echo "# === $config ==="
	if ! kt_setup "$mode" "$persistent"; then
		echo "not ok $num - $config: could not load the modules"
		failed=$((failed + 1))
		continue
	fi
	out=$(mktemp)
	"$FUZZ" "$@" | tee "$out"
	ops=$(sed -n 's/^# total: \([0-9]*\) ops.*/\1/p' "$out" | tail -n 1)
	ops=${ops:-0}
	total_ops=$((total_ops + ops))
	KT_PASS=0 KT_FAIL=0
	why=
	if ! kt_add_summary "$out"; then
		why="gdrdrv_fuzz printed no summary (crashed?)"
	elif [ "$KT_FAIL" != 0 ] || [ "$KT_PASS" = 0 ]; then
		why="$KT_FAIL of $((KT_PASS + KT_FAIL)) seed(s) failed"
	fi
	rm -f "$out"
	if ! kt_check_refcount; then
		why="${why:+$why; }pins left behind"
	fi
	if ! kt_unload; then
		why="${why:+$why; }could not unload"
	fi
	if [ -z "$why" ]; then
		echo "ok $num - $config: $ops ops, $KT_PASS seed(s), refcount 0, unloaded"
		passed=$((passed + 1))
	else
		echo "not ok $num - $config: $ops ops; $why"
		failed=$((failed + 1))
	fi
done
if ! kt_restore; then
	echo "# could not load the modules back as they were"
	failed=$((failed + 1))
fi
echo "# configurations:$configs; $total_ops ops in all"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
