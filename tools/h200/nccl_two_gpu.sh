#!/bin/bash
# Issue 29 on the two-GPU machine (nvidia-h200-x2), in one call (about 3-5
# minutes): NCCL's GDRCopy data path across two GPUs, module-free through our
# vulkan backend.  Two processes, one GPU each, the machine's PyTorch and
# NCCL, forced onto NCCL's socket network transport (no P2P, no SHM, no NVLS),
# so that NCCL's proxy keeps its work FIFO and flags in GPU memory that the CPU
# reaches through libgdrapi.  $ROUNDS (default 3) interleaved rounds of a run
# with GDRCopy (NCCL_GDRCOPY_ENABLE=1) and one without (=0); each rank checks
# all-reduce and all-gather of 8 B - 64 MiB exactly and times small
# all-reduces (tools/h200/nccl_two_gpu.py).
#
#   run from the repository root; carry .device/debs (the Vulkan loader)
#   results (JSON lines, every rank's NCCL log, summary.md) go to $OUT
#   (default ./h200-out/nccl-two-gpu)
#
# Exit 77 at once when the machine has fewer than 2 GPUs; otherwise the
# summary's status: 1 when a check failed.
set -u
# shellcheck source=tools/h200/lib.sh
. "$(dirname "$0")/lib.sh"
OUT=${OUT:-$PWD/h200-out/nccl-two-gpu}
ROUNDS=${ROUNDS:-3}
RANK_TIMEOUT=${RANK_TIMEOUT:-150}
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
mkdir -p "$OUT"
step() { echo "== $(date -u +%T) $*" | tee -a "$OUT/steps.log"; }

# Before anything else: on a one-GPU machine nothing below can run.
gpus=0
if command -v nvidia-smi >/dev/null; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU '); fi
if [ "$gpus" -lt 2 ]; then
	echo "nccl_two_gpu: needs 2 GPUs, found $gpus (nvidia-smi -L): run it on the two-GPU machine (kind nvidia-h200-x2)" |
		tee -a "$OUT/steps.log"
	exit 77
fi
if [ ! -x "$PY" ]; then PY=python3; fi
if ! "$PY" -c 'import torch.distributed' 2>/dev/null; then
	echo "nccl_two_gpu: $PY has no PyTorch: set PYTHON to the Python that has torch and nvidia-nccl-cu13" | tee -a "$OUT/steps.log"
	exit 1
fi

step "build libgdrapi"
# From clean: build outputs kept on the machine from an earlier call may look newer than this tree's sources.
{ make -C libgdrapi clean && make -j16 lib; } > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
tree_commit_line | tee -a "$OUT/gpu.txt"
"$PY" -c 'import torch; print("torch", torch.__version__, "NCCL", torch.cuda.nccl.version())' | tee -a "$OUT/gpu.txt"
install_vulkan_loader || exit 1

# NCCL loads libgdrapi.so by that name: ours comes first.
export OUR_LIBGDRAPI_DIR=$PWD/libgdrapi/build
export LD_LIBRARY_PATH=$OUR_LIBGDRAPI_DIR:/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export GDRCOPY_BACKEND=vulkan
# Our library's debug log names every buffer NCCL pins through it (the FIFO, the sync words).
export GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=1
# Every transport but the network one off: the data and its flags cross through NCCL's proxy.
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_NVLS_ENABLE=0
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET}
# What NCCL puts in GDRCopy memory once NCCL_GDRCOPY_ENABLE=1: the work FIFO (init.cc), the
# proxy's sync words and the GDRDMA flush (net.cc; no flush on sockets, which have no GDRDMA).
export NCCL_GDRCOPY_FIFO_ENABLE=${NCCL_GDRCOPY_FIFO_ENABLE:-1}
export NCCL_GDRCOPY_SYNC_ENABLE=${NCCL_GDRCOPY_SYNC_ENABLE:-1}
export NCCL_GDRCOPY_FLUSH_ENABLE=${NCCL_GDRCOPY_FLUSH_ENABLE:-1}
export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1

declare -A hung	# a mode whose ranks ran past RANK_TIMEOUT is not run again: it would only hang again
run_pair() {
	local round=$1 gdrcopy=$2 name="r$1-gdrcopy$2" rank rc pids=()
	if [ -n "${hung[$gdrcopy]:-}" ]; then
		step "round $round, NCCL_GDRCOPY_ENABLE=$gdrcopy: skipped (ran past ${RANK_TIMEOUT} s before)"
		return
	fi
	step "round $round, NCCL_GDRCOPY_ENABLE=$gdrcopy"
	for rank in 0 1; do
		NCCL_GDRCOPY_ENABLE=$gdrcopy RANK=$rank LOCAL_RANK=$rank ROUND=$round MASTER_PORT=$((29600 + 2 * round + gdrcopy)) \
			timeout -k 10 "$RANK_TIMEOUT" "$PY" tools/h200/nccl_two_gpu.py rank --jsonl "$OUT/$name-rank$rank.jsonl" \
			> "$OUT/$name-rank$rank.log" 2>&1 &
		pids+=($!)
	done
	for rank in 0 1; do
		wait "${pids[$rank]}"
		rc=$?
		printf '{"kind":"run","round":%d,"gdrcopy":%d,"rank":%d,"rc":%d}\n' "$round" "$gdrcopy" "$rank" "$rc" >> "$OUT/runs.jsonl"
		grep -h -E "^nccl-two-gpu rank [0-9]: (PASS|FAIL)" "$OUT/$name-rank$rank.log" | tee -a "$OUT/steps.log"
		if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then hung[$gdrcopy]=1; fi
	done
}

for round in $(seq 1 "$ROUNDS"); do
	# Alternate which mode goes first, so that neither always runs on a warmer machine.
	if [ $((round % 2)) -eq 1 ]; then order="1 0"; else order="0 1"; fi
	for gdrcopy in $order; do run_pair "$round" "$gdrcopy"; done
done

step "summary"
"$PY" tools/h200/nccl_two_gpu.py summary "$OUT" --rounds "$ROUNDS" | tee "$OUT/summary.md"
exit "${PIPESTATUS[0]}"
