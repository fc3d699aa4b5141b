#!/bin/bash
# On the H200 machine (no gdrdrv can load, driver too old for dma-buf mmap):
# libgdrapi's vulkan backend pins memory the program allocated with
# cuMemCreate (a POSIX fd handle requested), as NCCL's cuMem buffers are.
#   - tools/h200/vmm_pin.c: a pin at an offset, CPU <-> cuMemcpy both ways, a
#     second pin, the allocation freed under a pin, the refusals and their
#     reasons, gdr_driver_get_version, and the CUDA driver's own answers
#   - gdrcopy_sanity -a gdr_alloc_mapped: the *_vmmalloc tests on cuMemCreate memory
#   - gdrcopy_copylat and gdrcopy_copybw -a cuMemCreate
#
#   run from the repository root, with .device carried (.device/debs: the
#   Vulkan loader packages); logs go to $OUT (default ./h200-out)
set -u
# shellcheck source=tools/h200/lib.sh
. "$(dirname "$0")/lib.sh"
RESULTS=${OUT:-$PWD/h200-out}
mkdir -p "$RESULTS"
export PATH=/usr/local/cuda/bin:$PATH
step() { echo "== $*"; }

nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader
step "build (real CUDA headers: /usr/local/cuda/include)"
# -B: build outputs an earlier call left on a warm machine may look newer than the copied sources
make -B -j16 lib exes CUDA=/usr/local/cuda > "$RESULTS/build.log" 2>&1 || { tail -50 "$RESULTS/build.log"; exit 1; }
install_vulkan_loader || exit 1
export LD_LIBRARY_PATH=$PWD/libgdrapi/build
make -C libgdrapi check-vulkan-abi 2>&1 | tail -n 2
echo "check-vulkan-abi: exit status ${PIPESTATUS[0]}"

step "vmm_pin: cuMemCreate(POSIX fd) memory pinned, mapped and checked both ways"
cc -O2 -std=gnu11 -Wall -I/usr/local/cuda/include -Iinclude -o "$RESULTS/vmm_pin" tools/h200/vmm_pin.c \
	-Llibgdrapi/build -lgdrapi -L/usr/local/cuda/lib64/stubs -lcuda || exit 1
GDRCOPY_ENABLE_LOGGING=1 "$RESULTS/vmm_pin" 2> "$RESULTS/vmm_pin.stderr"
echo "vmm_pin: exit status $?"
echo "-- what the library said (stderr):"
grep -E "ERR|vulkan backend" "$RESULTS/vmm_pin.stderr"

step "gdrcopy_sanity -a gdr_alloc_mapped (the *_vmmalloc tests on cuMemCreate memory)"
tests/sanity/gdrcopy_sanity -v -a gdr_alloc_mapped > "$RESULTS/sanity.txt" 2>&1
echo "sanity: exit status $?"
grep -E "^&&&& (PASSED|FAILED|WAIVED) .*vmmalloc" "$RESULTS/sanity.txt"
grep -E "^failed: " "$RESULTS/sanity.txt" | sort -u
grep -E "^Total" "$RESULTS/sanity.txt"

step "gdrcopy_copylat -a cuMemCreate (no GDRCOPY_BACKEND: the program asks for vulkan with gdr_open_ex)"
taskset -c 2 tests/bench/gdrcopy_copylat -a cuMemCreate -s 64K -w 200 -r 100 2>&1 | tail -n 30
echo "copylat: exit status ${PIPESTATUS[0]}"
step "gdrcopy_copybw -a cuMemCreate"
taskset -c 2 tests/bench/gdrcopy_copybw -a cuMemCreate -s 16M -w 20 -r 5 2>&1 | tail -n 12
echo "copybw: exit status ${PIPESTATUS[0]}"
