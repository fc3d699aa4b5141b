#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Smoke test of the benchmark programs: every tool and its main options,
# with tiny sizes and iteration counts so it finishes in seconds even on
# softgpu under TCG.  Timings are not checked (they mean nothing there);
# what is checked is that each run exits 0 and prints, with -j, exactly the
# JSON records it should -- every copy inside the tools is also verified
# against cuMemcpy, so a run only exits 0 when the data arrived.
#
#   tests/bench/smoke.sh [BINDIR]     (default: the directory of this script)
#
# Prints TAP ("ok N - ...") and a closing "N passed, N failed" line;
# exits 1 if anything failed.  Each run is killed after SMOKE_TIMEOUT
# seconds (default 300) when timeout(1) exists.

bindir=${1:-$(dirname "$0")}
limit=${SMOKE_TIMEOUT:-300}
wrap=
command -v timeout >/dev/null 2>&1 && wrap="timeout $limit"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
n=0

# check TOOL RECORDS ARGS...: run bindir/TOOL ARGS -j, expect RECORDS records.
check() {
	tool=$1
	want=$2
	shift 2
	n=$((n + 1))
	desc="$tool $*"
	$wrap "$bindir/$tool" "$@" -j >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ "$rc" -ne 0 ]; then
		echo "not ok $n - $desc: exit status $rc (124: killed after ${limit}s)"
		sed 's/^/#   /' "$tmp/err" | tail -n 20
		failed=$((failed + 1))
		return
	fi
	got=$(grep -c "^{\"tool\": \"$tool\", \"argv\": " "$tmp/out")
	lines=$(wc -l <"$tmp/out")
	if [ "$got" -ne "$want" ] || [ "$lines" -ne "$want" ]; then
		echo "not ok $n - $desc: $got records in $lines stdout lines, expected $want"
		sed 's/^/#   /' "$tmp/out" | head -n 10
		failed=$((failed + 1))
		return
	fi
	if command -v python3 >/dev/null 2>&1 &&
	   ! python3 -c 'import json, sys
for line in sys.stdin:
    json.loads(line)' <"$tmp/out" 2>"$tmp/err"; then
		echo "not ok $n - $desc: stdout is not JSON Lines"
		sed 's/^/#   /' "$tmp/err" | tail -n 5
		failed=$((failed + 1))
		return
	fi
	echo "ok $n - $desc"
	passed=$((passed + 1))
}

# check_text TOOL LINE... -- ARGS...: run bindir/TOOL ARGS (text output) and
# expect each LINE (a fixed string) at the start of some output line, in
# that order: the fields NVIDIA's next release prints.
check_text() {
	tool=$1
	shift
	: >"$tmp/want"
	while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
		printf '%s\n' "$1" >>"$tmp/want"
		shift
	done
	shift
	n=$((n + 1))
	desc="$tool $* (text)"
	$wrap "$bindir/$tool" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ "$rc" -ne 0 ]; then
		echo "not ok $n - $desc: exit status $rc"
		sed 's/^/#   /' "$tmp/err" | tail -n 20
		failed=$((failed + 1))
		return
	fi
	# Each wanted line must come after the previous one.
	rest=$(cat "$tmp/out")
	while IFS= read -r line; do
		case "$rest" in
		"$line"* | *"
$line"*)
			rest=${rest#*"$line"}
			;;
		*)
			echo "not ok $n - $desc: no line starting \"$line\" (in order) in:"
			sed 's/^/#   /' "$tmp/out" | head -n 40
			failed=$((failed + 1))
			return
			;;
		esac
	done <"$tmp/want"
	echo "ok $n - $desc"
	passed=$((passed + 1))
}

# The text fields of NVIDIA's next release, where it prints them.
check_text gdrcopy_copybw "gpu alloc fn: cuMemAlloc" "device ptr: " "use force pcie: no" "map_d_ptr: " \
	"user-space pointer: " "store fences: enabled" "writing test, size=65536" "write BW: median " \
	"reading test, size=65536" "read BW: median " -- -s 64K -w 200 -r 10
check_text gdrcopy_copylat "gpu alloc fn: cuMemAlloc" "use force pcie: no" "map_d_ptr: " \
	"user-space pointer: " "use cold cache: no" "store fences: enabled" \
	"load fences (gdr_copy_from_mapping): enabled" "Test " -- -s 64 -w 100 -r 10
check_text gdrcopy_pplat "selecting device 0" "use force pcie: no" "Round-trip latency" -- -t 100 -u 120
# -F pins with GDR_PIN_FLAG_FORCE_PCIE (softgpu's BAR honours it with persistent pins).
check_text gdrcopy_copybw "use force pcie: yes" "store fences: enabled" "write BW: median " -- -s 64K -w 5 -r 5 -F
check gdrcopy_copylat 14 -s 64 -w 100 -r 10 -F
check gdrcopy_pplat 1 -t 100 -u 120 -F

# copybw: one size with plain memcpy too (4 records); a sweep 1..256 B at
# offset 4 (9 sizes x 2); the cuMemCreate allocator.
check gdrcopy_copybw 4 -s 64K -c 4K -w 10 -r 10 -p
check gdrcopy_copybw 18 -s 64K -l -c 256 -o 4 -w 5 -r 5
check gdrcopy_copybw 2 -s 64K -w 5 -r 5 -a cuMemCreate

# copylat: 1..4096 B (13 sizes) x gdr/memcpy/stream loop/cuMemcpy in both
# directions; then both timing modes (13 sizes x 2 directions x 2 modes).
check gdrcopy_copylat 104 -s 4K -w 100 -r 20 -c -p
check gdrcopy_copylat 52 -s 4K -w 100 -r 20 -m both

# apiperf: pin sizes 64 KiB and 128 KiB.
check gdrcopy_apiperf 2 -s 128K -n 5 -w 1

# pplat: both modes, flag only and with data, every location.
check gdrcopy_pplat 1 -t 100 -u 120
check gdrcopy_pplat 1 -t 100 -u 120 -m 1
check gdrcopy_pplat 1 -t 100 -u 120 -P acquire
check gdrcopy_pplat 1 -t 50 -u 120 -s 256 -B 2 -T 32
check gdrcopy_pplat 1 -t 50 -u 120 -s 64 -m 1 -G hostmem -C gpumem -D hostmem
check gdrcopy_pplat 1 -t 50 -u 120 -s 64 -G hostmem -C hostmem -D gpumem
# pplat's line modes with softgpu's emulated warp: per round and size one
# record, then one per size over the rounds.
check gdrcopy_pplat 6 -L 16,128 -R 2 -t 50 -u 120
check gdrcopy_pplat 3 -W 64 -R 2 -r 200 -w 100000 -u 120
# The shapes of a ring slot: the answer in one line of a larger entry, and a
# whole 256 B entry (two warp-wide stores).
check gdrcopy_pplat 6 -L 128/first,256 -R 2 -t 50 -u 120
check gdrcopy_pplat 3 -W 256/last -R 2 -r 200 -w 100000 -u 120

echo "1..$n"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
