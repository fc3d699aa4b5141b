#!/bin/bash
# Build against the real CUDA toolkit and run the data-path tests and benchmarks
# on the H200 machine (see shared/reference/gpu-machine.md): GPU memory is mapped
# through BAR1 by libgdrapi's vulkan backend, since no module can load there and
# the driver is too old for dma-buf mmap.
#
#   run from the repository root; results go to $RESULTS (default ./h200-out),
#   and as one archive, results.tgz, into $OUT when that is set
#   needs .device/debs/*.deb: the Vulkan loader packages (libvulkan1, libglvnd0, ...)
set -u
# shellcheck source=tools/h200/lib.sh
. "$(dirname "$0")/lib.sh"
ARCHIVE_DIR=${OUT:-}
OUT=${RESULTS:-$PWD/h200-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
step() { echo "== $*" | tee -a "$OUT/steps.log"; }

step "build (real CUDA headers: /usr/local/cuda/include)"
make -j16 lib exes CUDA=/usr/local/cuda > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
export LD_LIBRARY_PATH=$PWD/libgdrapi/build
SANITY=$PWD/tests/sanity/gdrcopy_sanity
BENCH=$PWD/tests/bench
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"

step "no backend usable without a Vulkan loader: precise reasons, no crash"
GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=3 "$SANITY" -t basic_cumemalloc > "$OUT/no-backend.txt" 2>&1
echo "exit status $?" >> "$OUT/no-backend.txt"

step "install the Vulkan loader (dpkg -x, nothing else changes)"
install_vulkan_loader || exit 1
export GDRCOPY_BACKEND=vulkan

step "gdrcopy_sanity on real H200 memory (vulkan backend, -a gdr_alloc_mapped)"
"$SANITY" -v -a gdr_alloc_mapped --junit "$OUT/sanity.xml" > "$OUT/sanity.txt" 2>&1
echo "exit status $?" >> "$OUT/sanity.txt"

# Every figure is measured in each of $ROUNDS rounds, the configurations
# interleaved within a round (the machine is shared and noisy: one best run
# is not a figure); tools/h200/summarize.py turns the JSON lines into medians
# with ranges.
ROUNDS=${ROUNDS:-3}
single_core="taskset -c 2"
all_cores="taskset -c 0-15"
step "benchmarks: $ROUNDS interleaved rounds"
for round in $(seq 1 "$ROUNDS"); do
	step "round $round: copylat 1 B - 64 KiB, back to back and single calls, with memcpy, the stream loop and cuMemcpy"
	# Info logging: the engine's log says which loads its polls settled on (copy_fast.c).
	GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=2 \
		$single_core "$BENCH/gdrcopy_copylat" -a gdr_alloc_mapped -s 64K -w 2000 -r 400 -m both -c -p -j \
		> "$OUT/copylat-small-$round.jsonl" 2>> "$OUT/copylat.txt" || echo "copylat small: exit $?" >> "$OUT/errors.txt"
	step "round $round: polls with each kind of load forced (GDRCOPY_POLL_READS), against the choice above"
	for kind in lines halves blocks; do
		GDRCOPY_POLL_READS=$kind $single_core "$BENCH/gdrcopy_copylat" -a gdr_alloc_mapped -s 512 -w 2000 -r 400 -m both -j \
			> "$OUT/poll-$kind-$round.jsonl" 2>> "$OUT/copylat.txt" || echo "poll $kind: exit $?" >> "$OUT/errors.txt"
	done
	step "round $round: copylat up to 16 MiB"
	$single_core "$BENCH/gdrcopy_copylat" -a gdr_alloc_mapped -s 16M -w 50 -r 5 -c -p -j \
		> "$OUT/copylat-large-$round.jsonl" 2>> "$OUT/copylat.txt" || echo "copylat large: exit $?" >> "$OUT/errors.txt"
	step "round $round: parallel copies of 1 - 16 threads"
	for threads in 1 2 4 8 16; do
		GDRCOPY_COPY_THREADS=$threads $all_cores "$BENCH/gdrcopy_copylat" -a gdr_alloc_mapped -s 16M -w 20 -r 3 -j \
			> "$OUT/parallel-$threads-$round.jsonl" 2>> "$OUT/parallel.txt" ||
			echo "parallel $threads: exit $?" >> "$OUT/errors.txt"
	done
	step "round $round: pplat"
	for args in "" "-C gpumem" "-G hostmem" "-m 1" "-s 64"; do
		name=$(echo "default $args" | tr -s ' -' '_')
		# shellcheck disable=SC2086 # args is a word list
		$single_core "$BENCH/gdrcopy_pplat" -a gdr_alloc_mapped -t 10000 $args -j \
			> "$OUT/pplat-$name-$round.jsonl" 2>> "$OUT/pplat.txt" || echo "pplat $args: exit $?" >> "$OUT/errors.txt"
	done
done
step "done"
tail -n 3 "$OUT/no-backend.txt" "$OUT/sanity.txt"
grep -E "^(Total|waived|failed):" "$OUT/sanity.txt"
if [ -f "$OUT/errors.txt" ]; then cat "$OUT/errors.txt"; fi
grep -h -E "Round-trip|ERROR" "$OUT/pplat.txt"
grep -h "polls of whole lines" "$OUT/copylat.txt"
if [ -n "$ARCHIVE_DIR" ]; then tar -C "$OUT" -czf "$ARCHIVE_DIR/results.tgz" .; fi
