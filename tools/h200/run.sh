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
for deb in .device/debs/*.deb; do dpkg -x "$deb" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export GDRCOPY_BACKEND=vulkan

step "gdrcopy_sanity on real H200 memory (vulkan backend, -a gdr_alloc_mapped)"
"$SANITY" -v -a gdr_alloc_mapped --junit "$OUT/sanity.xml" > "$OUT/sanity.txt" 2>&1
echo "exit status $?" >> "$OUT/sanity.txt"

step "copylat with cuMemcpy (-c) and plain memcpy (-p) side by side"
taskset -c 2 "$BENCH/gdrcopy_copylat" -a gdr_alloc_mapped -s 16M -c -p -j > "$OUT/copylat.jsonl" 2> "$OUT/copylat.txt"
echo "exit status $?" >> "$OUT/copylat.txt"

step "copybw 16 MiB"
taskset -c 2 "$BENCH/gdrcopy_copybw" -a gdr_alloc_mapped -s 16M -w 200 -r 10 > "$OUT/copybw.txt" 2>&1

step "parallel copies: GDRCOPY_COPY_THREADS=1,2,4,8 at 1..16 MiB"
for threads in 1 2 4 8; do
	GDRCOPY_COPY_THREADS=$threads "$BENCH/gdrcopy_copylat" -a gdr_alloc_mapped -s 16M -w 200 -r 20 -j \
		> "$OUT/parallel-$threads.jsonl" 2>> "$OUT/parallel.txt"
done

step "pplat: CPU writes a flag into GPU memory, a GPU kernel answers"
{
	"$BENCH/gdrcopy_pplat" -a gdr_alloc_mapped -t 10000
	"$BENCH/gdrcopy_pplat" -a gdr_alloc_mapped -t 10000 -C gpumem
	"$BENCH/gdrcopy_pplat" -a gdr_alloc_mapped -t 10000 -m 1
} > "$OUT/pplat.txt" 2>&1
step "done"
tail -n 3 "$OUT/no-backend.txt" "$OUT/sanity.txt"
grep -E "^(Total|waived|failed):" "$OUT/sanity.txt"
grep -E "Round-trip|ERROR" "$OUT/pplat.txt"
if [ -n "$ARCHIVE_DIR" ]; then tar -C "$OUT" -czf "$ARCHIVE_DIR/results.tgz" .; fi
