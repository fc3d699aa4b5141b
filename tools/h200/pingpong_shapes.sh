#!/bin/bash
# Issue 39 on the GPU machine, in one call (about 4-6 minutes): every shape a
# ring or mailbox has, every routine, every candidate of the copy engine, in
# $ROUNDS (default 5) interleaved rounds, then one summary table.
#
#   Shapes (tools/h200/pingpong.cu -s): the GPU's answer in the whole 16, 32,
#   64, 128 or 256 B entry the CPU polls, or in the first or last 64-byte line
#   of a 128 or 256 B entry (128/first, 128/last, 256/first, 256/last).
#   Each round, in this order:
#   - pingpong.cu with the library's defaults and every routine: ours
#     (gdr_copy_from_mapping), exported (gdr_copy_from_mapped_memory),
#     NVIDIA's routines, plain 16/32/64-byte streaming-load loops, loops of
#     ordinary 64-byte loads and of 64-byte ones from the last line, memcpy;
#     ping-pong round trips, polls per round trip, torn reads under a GPU
#     writer, reads back to back, single and over a ring of distinct entries;
#   - pingpong.cu, ours and exported only, once per candidate below (an
#     environment variable the library reads at start-up), each on the
#     shapes it changes;
#   - gdrcopy_pplat -L shapes -W shapes: the same ping-pong and torn reads
#     through the installed benchmark (default engine).
#   Candidates (CANDIDATES overrides: space-separated LABEL:VARIABLE=VALUE, or
#   none for the defaults alone, as a final run after choosing them):
#   GDRCOPY_READ_WAIT (reads of one line, the 16/32/64 B shapes) 0, 2, 4,
#   repeat; GDRCOPY_POLL_READS (polls of 128-512 B, the 128/256 B shapes)
#   lines, halves, blocks and each with _wait, first_wait.
#
#   run from the repository root; carry .device/debs (the Vulkan loader) and
#   .device/reference-gdrcopy (NVIDIA's src/memcpy_avx2.c and
#   src/memcpy_sse41.c: never committed, never shipped; without them the
#   reference columns say why not).  $RESULTS (default ./h200-shapes) gets
#   pingpong.jsonl, pplat-line-ROUND.jsonl and summary.md
#   (tools/h200/summarize_shapes.py); $OUT gets summary.md and shapes.tgz.
set -u
# shellcheck source=tools/h200/lib.sh
. "$(dirname "$0")/lib.sh"
ARCHIVE_DIR=${OUT:-}
RESULTS=${RESULTS:-$PWD/h200-shapes}
ROUNDS=${ROUNDS:-5}
REFERENCE=${REFERENCE:-$PWD/.device/reference-gdrcopy}
CANDIDATES=${CANDIDATES:-"wait0:GDRCOPY_READ_WAIT=0 wait2:GDRCOPY_READ_WAIT=2 wait4:GDRCOPY_READ_WAIT=4
	repeat:GDRCOPY_READ_WAIT=repeat lines:GDRCOPY_POLL_READS=lines lines_wait:GDRCOPY_POLL_READS=lines_wait
	halves:GDRCOPY_POLL_READS=halves halves_wait:GDRCOPY_POLL_READS=halves_wait blocks:GDRCOPY_POLL_READS=blocks
	blocks_wait:GDRCOPY_POLL_READS=blocks_wait first_wait:GDRCOPY_POLL_READS=first_wait"}
SMALL_SHAPES=16,32,64
LARGE_SHAPES=128,128/first,128/last,256,256/first,256/last
export PATH=/usr/local/cuda/bin:$PATH

# Each candidate's label and variable, checked before anything is built.
labels=() settings=()
if [ "$CANDIDATES" = none ]; then CANDIDATES=; fi
for spec in $CANDIDATES; do
	label=${spec%%:*} setting=${spec#*:}
	case $setting in
	GDRCOPY_READ_WAIT=* | GDRCOPY_POLL_READS=*) ;;
	*)
		echo "pingpong_shapes: '$spec' is not LABEL:GDRCOPY_READ_WAIT=VALUE or LABEL:GDRCOPY_POLL_READS=VALUE" >&2
		exit 2
		;;
	esac
	labels+=("$label")
	settings+=("$setting")
done
# A folder of this script's own: an earlier call's records would join this call's rounds.
rm -rf "$RESULTS"
mkdir -p "$RESULTS"
step() { echo "== $(date -u +%T) $*" | tee -a "$RESULTS/steps.log"; }
finish() {
	if [ -n "$ARCHIVE_DIR" ]; then
		tar -C "$RESULTS" -czf "$ARCHIVE_DIR/shapes.tgz" .
		if [ -f "$RESULTS/summary.md" ]; then cp "$RESULTS/summary.md" "$ARCHIVE_DIR/summary.md"; fi
	fi
}
trap finish EXIT

step "build"
# From clean: build outputs kept on the machine from an earlier call may look newer than this tree's sources.
{ make -C libgdrapi clean && make -C tests/bench clean && make -j16 lib && make -j16 -C tests/bench CUDA=/usr/local/cuda; } > "$RESULTS/build.log" 2>&1 || { tail -40 "$RESULTS/build.log"; exit 1; }
build_pingpong "$RESULTS" || exit 1
export LD_LIBRARY_PATH=$PWD/libgdrapi/build
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$RESULTS/gpu.txt"
tree_commit_line | tee -a "$RESULTS/gpu.txt"
install_vulkan_loader || exit 1
export GDRCOPY_BACKEND=vulkan
if [ ! -f "$REFERENCE/src/memcpy_avx2.c" ]; then
	echo "reference: not run: no $REFERENCE/src/memcpy_avx2.c (carry NVIDIA's GDRCopy src/memcpy_avx2.c and src/memcpy_sse41.c there)" | tee -a "$RESULTS/gpu.txt"
fi

# A kernel that never hears its stop flag would hang the call: every run has a limit.
single_core=(timeout 120 taskset -c 2)
for round in $(seq 1 "$ROUNDS"); do
	step "round $round: pingpong.cu, defaults, every routine"
	GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=2 "${single_core[@]}" "$RESULTS/pingpong" -R "$REFERENCE" -n "$round" -l default \
		-t pingpong,torn,reads >> "$RESULTS/pingpong.jsonl" 2>> "$RESULTS/pingpong.txt" ||
		echo "default round $round: exit $?" | tee -a "$RESULTS/errors.txt"
	for i in "${!labels[@]}"; do
		shapes=$LARGE_SHAPES
		case ${settings[$i]} in GDRCOPY_READ_WAIT=*) shapes=$SMALL_SHAPES ;; esac
		env "${settings[$i]}" "${single_core[@]}" "$RESULTS/pingpong" -n "$round" -l "${labels[$i]}" -o ours,exported \
			-s "$shapes" -t pingpong,torn,reads >> "$RESULTS/pingpong.jsonl" 2>> "$RESULTS/pingpong.txt" ||
			echo "${labels[$i]} round $round: exit $?" | tee -a "$RESULTS/errors.txt"
	done
	step "round $round: gdrcopy_pplat -L shapes -W shapes"
	"${single_core[@]}" tests/bench/gdrcopy_pplat -a gdr_alloc_mapped -L shapes -W shapes -R 1 -t 10000 -j \
		> "$RESULTS/pplat-line-$round.jsonl" 2>> "$RESULTS/pplat-line.txt" ||
		echo "pplat -L round $round: exit $?" | tee -a "$RESULTS/errors.txt"
	finish	# what is done so far comes back even if the call is cut short
done
step "summarize"
python3 tools/h200/summarize_shapes.py "$RESULTS" > "$RESULTS/summary.md" 2> "$RESULTS/summary.txt" ||
	{ echo "summarize_shapes.py failed:"; cat "$RESULTS/summary.txt"; }
finish
step "done"
if [ -f "$RESULTS/errors.txt" ]; then cat "$RESULTS/errors.txt"; fi
grep -h -E "^pingpong:|ERR|polls of" "$RESULTS/pingpong.txt" | sort | uniq -c | head -20
# The verdicts: which candidate the table would make the default, shape by shape.
sed -n '/^## Candidates/,$p' "$RESULTS/summary.md" | head -60
