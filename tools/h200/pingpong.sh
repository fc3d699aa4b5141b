#!/bin/bash
# Issue 26 on the H200 machine, in one call: build the library, the benchmarks
# and tools/h200/pingpong.cu, then $ROUNDS interleaved rounds of
#   - pingpong (ping-pong round trips, torn reads under a GPU writer, the 8-byte flag floor),
#     once with the engine as chosen and once with its general path forced
#     (GDRCOPY_COPY_ROUTINE=avx512 turns the inline path off: the exported
#     entry points' old way),
#   - gdrcopy_pplat (default flags), beside the floor,
#   - gdrcopy_copylat reads and writes of 1 B - 512 B, back to back and single.
# JSON lines go to $RESULTS (default ./h200-out) and, as results.tgz, into $OUT.
#
#   run from the repository root; carry .device/debs (the Vulkan loader) and
#   .device/reference-gdrcopy (a checkout of NVIDIA's GDRCopy, or at least its
#   src/memcpy_avx2.c and src/memcpy_sse41.c: never committed, never shipped)
#   then: python3 tools/h200/summarize.py RESULTS --pingpong [--plots DIR]
set -u
# shellcheck source=tools/h200/lib.sh
. "$(dirname "$0")/lib.sh"
ARCHIVE_DIR=${OUT:-}
OUT=${RESULTS:-$PWD/h200-out}
ROUNDS=${ROUNDS:-4}
REFERENCE=${REFERENCE:-$PWD/.device/reference-gdrcopy}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
step() { echo "== $(date -u +%T) $*" | tee -a "$OUT/steps.log"; }
finish() {
	if [ -n "$ARCHIVE_DIR" ]; then tar -C "$OUT" -czf "$ARCHIVE_DIR/results.tgz" .; fi
}
trap finish EXIT

step "build"
{ make -j16 lib && make -j16 -C tests/bench CUDA=/usr/local/cuda; } > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
nvcc -O2 -arch=sm_90 -o "$OUT/pingpong" tools/h200/pingpong.cu -Iinclude -Llibgdrapi/build -lgdrapi \
	-L/usr/local/nvidia/lib64 -lcuda -ldl >> "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
export LD_LIBRARY_PATH=$PWD/libgdrapi/build
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
git log -1 --format='commit %h %s' 2>/dev/null | tee -a "$OUT/gpu.txt"
install_vulkan_loader || exit 1
export GDRCOPY_BACKEND=vulkan
if [ ! -f "$REFERENCE/src/memcpy_avx2.c" ]; then
	echo "reference: not run: no $REFERENCE/src/memcpy_avx2.c (carry a checkout of NVIDIA's GDRCopy there)" | tee -a "$OUT/gpu.txt"
fi

# A kernel that never hears its stop flag would hang the call: every run has a limit.
single_core="timeout 120 taskset -c 2"
for round in $(seq 1 "$ROUNDS"); do
	step "round $round: pingpong (engine as chosen)"
	GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=2 $single_core "$OUT/pingpong" -R "$REFERENCE" -n "$round" \
		>> "$OUT/pingpong.jsonl" 2>> "$OUT/pingpong.txt" || echo "pingpong round $round: exit $?" >> "$OUT/errors.txt"
	step "round $round: pplat (default)"
	$single_core tests/bench/gdrcopy_pplat -a gdr_alloc_mapped -t 10000 -j \
		> "$OUT/pplat-default-$round.jsonl" 2>> "$OUT/pplat.txt" || echo "pplat round $round: exit $?" >> "$OUT/errors.txt"
	step "round $round: pingpong, general path forced (GDRCOPY_COPY_ROUTINE=avx512)"
	GDRCOPY_COPY_ROUTINE=avx512 $single_core "$OUT/pingpong" -n "$round" -l general_path -t pingpong,torn -o ours \
		>> "$OUT/pingpong.jsonl" 2>> "$OUT/pingpong.txt" || echo "pingpong general round $round: exit $?" >> "$OUT/errors.txt"
	if [ "$round" -le 3 ]; then
		step "round $round: copylat 1 B - 512 B"
		GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=2 $single_core tests/bench/gdrcopy_copylat -a gdr_alloc_mapped \
			-s 512 -w 2000 -r 400 -m both -p -j \
			> "$OUT/copylat-small-$round.jsonl" 2>> "$OUT/copylat.txt" || echo "copylat round $round: exit $?" >> "$OUT/errors.txt"
	fi
	finish	# what is done so far comes back even if the call is cut short
done
step "done"
if [ -f "$OUT/errors.txt" ]; then cat "$OUT/errors.txt"; fi
grep -h -E "ERR|pingpong:|polls of" "$OUT/pingpong.txt" "$OUT/copylat.txt" | sort | uniq -c | head -20
grep -h -E "Round-trip|ERROR" "$OUT/pplat.txt" | head -5
grep -c '"test":"pingpong"' "$OUT/pingpong.jsonl"
