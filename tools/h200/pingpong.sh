#!/bin/bash
# Issue 26 on the H200 machine, in one call (about 2-4 minutes): build the
# library, the benchmarks and tools/h200/pingpong.cu, then $ROUNDS (default 5)
# interleaved rounds of
#   - pingpong.cu (ping-pong round trips through a 16-128 B line, torn reads
#     under a GPU writer, the 8-byte-flag floor, back-to-back and single reads)
#     with every routine: ours, exported, NVIDIA's reference, 16/32/64-byte
#     loads, memcpy;
#   - gdrcopy_pplat -L all -W all: our benchmark's line modes, the same
#     protocol through the installed engine, no nvcc;
#   - gdrcopy_pplat (default flags), beside the floor;
#   - pingpong.cu with the engine's general path forced (GDRCOPY_COPY_ROUTINE=avx512);
#   - pingpong.cu with reads of one line overlapping (GDRCOPY_READ_WAIT=0);
#   - gdrcopy_copylat 1 B - 512 B, back to back and single, with memcpy, the
#     streaming loop and cuMemcpy;
#   - gdrcopy_copylat 64-512 B reads with each kind of poll load forced
#     (GDRCOPY_POLL_READS=lines|halves|blocks), against the engine's own choice.
# JSON lines go to $RESULTS (default ./h200-out) and, as results.tgz, into $OUT.
#
#   run from the repository root; carry .device/debs (the Vulkan loader) and
#   .device/reference-gdrcopy (a checkout of NVIDIA's GDRCopy, or at least its
#   src/memcpy_avx2.c and src/memcpy_sse41.c: never committed, never shipped)
#   then: python3 tools/h200/summarize.py RESULTS [--plots DIR]
set -u
# shellcheck source=tools/h200/lib.sh
. "$(dirname "$0")/lib.sh"
ARCHIVE_DIR=${OUT:-}
OUT=${RESULTS:-$PWD/h200-out}
ROUNDS=${ROUNDS:-5}
REFERENCE=${REFERENCE:-$PWD/.device/reference-gdrcopy}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
step() { echo "== $(date -u +%T) $*" | tee -a "$OUT/steps.log"; }
finish() {
	if [ -n "$ARCHIVE_DIR" ]; then tar -C "$OUT" -czf "$ARCHIVE_DIR/results.tgz" .; fi
}
trap finish EXIT

step "build"
# From clean: build outputs kept on the machine from an earlier call may look newer than this tree's sources.
{ make -C libgdrapi clean && make -C tests/bench clean && make -j16 lib && make -j16 -C tests/bench CUDA=/usr/local/cuda; } > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
build_pingpong "$OUT" || exit 1
export LD_LIBRARY_PATH=$PWD/libgdrapi/build
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
tree_commit_line | tee -a "$OUT/gpu.txt"
install_vulkan_loader || exit 1
export GDRCOPY_BACKEND=vulkan
if [ ! -f "$REFERENCE/src/memcpy_avx2.c" ]; then
	echo "reference: not run: no $REFERENCE/src/memcpy_avx2.c (carry a checkout of NVIDIA's GDRCopy there)" | tee -a "$OUT/gpu.txt"
fi

# A kernel that never hears its stop flag would hang the call: every run has a limit.
single_core=(timeout 120 taskset -c 2)
# Info logging: the engine's log says which loads its polls settled on (copy_fast.c).
engine_log=(env GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=2)
for round in $(seq 1 "$ROUNDS"); do
	step "round $round: pingpong.cu (engine as chosen)"
	"${engine_log[@]}" "${single_core[@]}" "$OUT/pingpong" -R "$REFERENCE" -n "$round" \
		>> "$OUT/pingpong.jsonl" 2>> "$OUT/pingpong.txt" || echo "pingpong round $round: exit $?" >> "$OUT/errors.txt"
	step "round $round: gdrcopy_pplat -L all -W all (line modes)"
	"${engine_log[@]}" "${single_core[@]}" tests/bench/gdrcopy_pplat -a gdr_alloc_mapped -L all -W all -R 1 -t 10000 -j \
		> "$OUT/pplat-line-$round.jsonl" 2>> "$OUT/pplat-line.txt" || echo "pplat -L round $round: exit $?" >> "$OUT/errors.txt"
	step "round $round: gdrcopy_pplat (default)"
	"${single_core[@]}" tests/bench/gdrcopy_pplat -a gdr_alloc_mapped -t 10000 -j \
		> "$OUT/pplat-default-$round.jsonl" 2>> "$OUT/pplat.txt" || echo "pplat round $round: exit $?" >> "$OUT/errors.txt"
	step "round $round: pingpong.cu, general path forced (GDRCOPY_COPY_ROUTINE=avx512)"
	GDRCOPY_COPY_ROUTINE=avx512 "${single_core[@]}" "$OUT/pingpong" -n "$round" -l general_path -t pingpong,torn -o ours \
		>> "$OUT/pingpong.jsonl" 2>> "$OUT/pingpong.txt" || echo "pingpong general round $round: exit $?" >> "$OUT/errors.txt"
	step "round $round: pingpong.cu, reads of one line overlapping (GDRCOPY_READ_WAIT=0)"
	GDRCOPY_READ_WAIT=0 "${single_core[@]}" "$OUT/pingpong" -n "$round" -l read_overlap -t pingpong,torn,reads -o ours \
		>> "$OUT/pingpong.jsonl" 2>> "$OUT/pingpong.txt" || echo "pingpong overlap round $round: exit $?" >> "$OUT/errors.txt"
	step "round $round: copylat 1 B - 512 B with memcpy, the stream loop and cuMemcpy"
	"${engine_log[@]}" "${single_core[@]}" tests/bench/gdrcopy_copylat -a gdr_alloc_mapped -s 512 -w 2000 -r 400 -m both -p -c -j \
		> "$OUT/copylat-small-$round.jsonl" 2>> "$OUT/copylat.txt" || echo "copylat round $round: exit $?" >> "$OUT/errors.txt"
	for kind in lines halves blocks; do
		step "round $round: copylat 1 B - 512 B, polls with $kind forced (GDRCOPY_POLL_READS)"
		GDRCOPY_POLL_READS=$kind "${single_core[@]}" tests/bench/gdrcopy_copylat -a gdr_alloc_mapped -s 512 -w 2000 -r 400 -m both -j \
			> "$OUT/poll-$kind-$round.jsonl" 2>> "$OUT/copylat.txt" || echo "poll $kind round $round: exit $?" >> "$OUT/errors.txt"
	done
	finish	# what is done so far comes back even if the call is cut short
done
step "summarize"
# The tables (and the pictures where matplotlib is installed) come back with the data.
python3 tools/h200/summarize.py "$OUT" --plots "$OUT" > "$OUT/summary.md" 2> "$OUT/summary.txt" ||
	python3 tools/h200/summarize.py "$OUT" > "$OUT/summary.md" 2>> "$OUT/summary.txt"
finish
step "done"
if [ -f "$OUT/errors.txt" ]; then cat "$OUT/errors.txt"; fi
grep -h -E "ERR|SKIPPED|pingpong:|polls of" "$OUT/pingpong.txt" "$OUT/pplat-line.txt" "$OUT/copylat.txt" | sort | uniq -c | head -20
grep -h -E "line ping-pong|torn reads" "$OUT/pplat-line.txt" | head -16
grep -h -E "Round-trip|ERROR" "$OUT/pplat.txt" | head -5
grep -c '"test":"pingpong"' "$OUT/pingpong.jsonl"
