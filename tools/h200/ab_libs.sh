#!/bin/bash
# Issue 26 on the H200 machine: pingpong.cu's reads and round trips against
# several builds of libgdrapi in one call, their rounds interleaved, so that a
# change to the copy path is judged against what it replaces on the same
# machine at the same time (the machine is shared: figures of two calls do
# not compare).
#
#   tools/h200/ab_libs.sh LABEL=TREE [LABEL=TREE ...]
#     TREE: a tree holding libgdrapi/ and include/, e.g. the working tree (.)
#     or `git archive REV libgdrapi include | tar -x -C DIR` for an older one
#   ROUNDS (default 7), TESTS (default reads,pingpong), RESULTS (default
#   ./h200-ab); carry .device/debs (the Vulkan loader), and
#   .device/reference-gdrcopy for NVIDIA's routines beside ours.
# Each label gets RESULTS/LABEL/pingpong.jsonl and its tables, summary.md
# (tools/h200/summarize.py); RESULTS, as ab.tgz, goes into $OUT.
set -u
# shellcheck source=tools/h200/lib.sh
. "$(dirname "$0")/lib.sh"
if [ $# -eq 0 ]; then
	echo "usage: $0 LABEL=TREE [LABEL=TREE ...]   (e.g. after=. before=.device/ab/before)" >&2
	exit 2
fi
ARCHIVE_DIR=${OUT:-}
RESULTS=${RESULTS:-$PWD/h200-ab}
ROUNDS=${ROUNDS:-7}
TESTS=${TESTS:-reads,pingpong}
REFERENCE=${REFERENCE:-$PWD/.device/reference-gdrcopy}
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p "$RESULTS"
finish() {
	if [ -n "$ARCHIVE_DIR" ]; then tar -C "$RESULTS" -czf "$ARCHIVE_DIR/ab.tgz" .; fi
}
trap finish EXIT

labels=()
for spec in "$@"; do
	label=${spec%%=*}
	tree=${spec#*=}
	if [ "$label" = "$spec" ] || [ ! -f "$tree/libgdrapi/Makefile" ]; then
		echo "ab_libs: '$spec' is not LABEL=TREE with TREE/libgdrapi/Makefile" >&2
		exit 2
	fi
	mkdir -p "$RESULTS/$label"
	# Each tree's own build folder, from clean: a copy from an earlier call may look newer than its sources.
	rm -rf "${RESULTS:?}/$label/lib"
	make -C "$tree/libgdrapi" BUILD="$RESULTS/$label/lib" -j16 > "$RESULTS/$label/build.log" 2>&1 ||
		{ tail -30 "$RESULTS/$label/build.log"; exit 1; }
	labels+=("$label")
done
make -j16 lib > "$RESULTS/build.log" 2>&1 || { tail -30 "$RESULTS/build.log"; exit 1; }
build_pingpong "$RESULTS" || exit 1
install_vulkan_loader || exit 1
export GDRCOPY_BACKEND=vulkan
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$RESULTS/gpu.txt"
tree_commit_line | tee -a "$RESULTS/gpu.txt"

for round in $(seq 1 "$ROUNDS"); do
	for label in "${labels[@]}"; do
		echo "== $(date -u +%T) round $round: $label"
		LD_LIBRARY_PATH=$RESULTS/$label/lib timeout 120 taskset -c 2 "$RESULTS/pingpong" -R "$REFERENCE" \
			-n "$round" -l "$label" -t "$TESTS" >> "$RESULTS/$label/pingpong.jsonl" 2>> "$RESULTS/$label/pingpong.txt" ||
			echo "$label round $round: exit $?" | tee -a "$RESULTS/errors.txt"
	done
done
for label in "${labels[@]}"; do
	python3 tools/h200/summarize.py "$RESULTS/$label" > "$RESULTS/$label/summary.md" 2>> "$RESULTS/$label/pingpong.txt"
	echo "== $label"
	# The reads tables: what this comparison is for.
	sed -n '/^### Reads back to back/,$p' "$RESULTS/$label/summary.md" | head -16
done
# The builds side by side, ours against NVIDIA's paired round by round.
python3 tools/h200/summarize.py "$RESULTS" | tee "$RESULTS/summary.md"
