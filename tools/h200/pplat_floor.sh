#!/bin/bash
# gdrcopy_pplat against the floor of the H200 machine (pingpong.cu -t floor:
# an 8-byte flag each way, nothing else), rounds interleaved, with pplat's own
# kernel and any other PTX kernels named as arguments (`gdrcopy_pplat -K`
# prints the built-in one to start from) side by side in the same rounds.
#
#   tools/h200/pplat_floor.sh [LABEL=KERNEL.ptx ...]
#   ROUNDS (default 9), RESULTS (default ./h200-pplat); carry .device/debs.
# summarize.py's tables: pplat's round trip per kernel, and the built-in
# kernel's against the floor of the same rounds.
set -u
# shellcheck source=tools/h200/lib.sh
. "$(dirname "$0")/lib.sh"
RESULTS=${RESULTS:-$PWD/h200-pplat}
ROUNDS=${ROUNDS:-9}
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p "$RESULTS"
for spec in "$@"; do
	if [ "${spec%%=*}" = "$spec" ] || [ ! -f "${spec#*=}" ]; then
		echo "pplat_floor: '$spec' is not LABEL=KERNEL.ptx with an existing file" >&2
		exit 2
	fi
done
{ make -C libgdrapi clean && make -C tests/bench clean && make -j16 lib && make -j16 -C tests/bench CUDA=/usr/local/cuda; } > "$RESULTS/build.log" 2>&1 ||
	{ tail -30 "$RESULTS/build.log"; exit 1; }
build_pingpong "$RESULTS" || exit 1
export LD_LIBRARY_PATH=$PWD/libgdrapi/build
install_vulkan_loader || exit 1
export GDRCOPY_BACKEND=vulkan
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$RESULTS/gpu.txt"
tree_commit_line | tee -a "$RESULTS/gpu.txt"

run=(timeout 120 taskset -c 2)
for round in $(seq 1 "$ROUNDS"); do
	"${run[@]}" "$RESULTS/pingpong" -n "$round" -t floor >> "$RESULTS/pingpong.jsonl" 2>> "$RESULTS/floor.txt"
	"${run[@]}" tests/bench/gdrcopy_pplat -a gdr_alloc_mapped -t 10000 -j \
		> "$RESULTS/pplat-default-$round.jsonl" 2>> "$RESULTS/pplat.txt"
	for spec in "$@"; do
		"${run[@]}" tests/bench/gdrcopy_pplat -a gdr_alloc_mapped -t 10000 -j -k "${spec#*=}" \
			> "$RESULTS/pplat-${spec%%=*}-$round.jsonl" 2>> "$RESULTS/pplat.txt"
	done
done
# pplat per kernel, and the built-in one's ratio to the floor.
python3 tools/h200/summarize.py "$RESULTS" | tee "$RESULTS/summary.md"
