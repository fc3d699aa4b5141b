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

echo "1..$n"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
