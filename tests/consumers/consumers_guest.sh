#!/bin/bash
# Runs inside a test VM (tests/python/test_consumers_vm.py), from
# /opt/consumers where gdrkit.consumers copies it, with softgpu and
# gdrdrv loaded, our library installed under /usr/local and the consumers
# built on the host (gdrkit.consumers) copied under /opt/consumers:
#   consumers_guest.sh
# Each consumer's own words about GDRCopy are printed between
# "==== <name> ====" markers; the Python test judges them.  Nothing here
# decides pass or fail except a crash or a missing file.
set -uo pipefail

top=/opt/consumers
cuda_libs="$top/cuda/lib"

section() {
    echo "==== $1 ===="
}

[ -x "$top/ucx/bin/ucx_info" ] || {
    echo "FAILED: $top/ucx/bin/ucx_info is missing: the consumers were not copied into this root"
    exit 1
}

# The runtime libraries UCX was linked with (libcudart, libnvidia-ml) come
# from Debian's packages; libcuda.so.1 stays softgpu's, from the library path.
export LD_LIBRARY_PATH="$cuda_libs"

section "libraries"
echo "libcuda: $(readlink -f "$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}')")"
echo "libgdrapi: $(readlink -f "$(ldconfig -p | awk '/libgdrapi.so.2 /{print $NF; exit}')")"
ldd "$top/ucx/lib/ucx/libuct_cuda_gdrcopy.so.0" | grep -E 'libgdrapi|libcuda|libcudart' | sed 's/^[[:space:]]*/ldd gdrcopy module: /'

section "cudart"
# UCX counts GPUs with the CUDA runtime (cudaGetDeviceCount) before it
# lists gdr_copy; say what the runtime answers over softgpu's libcuda.
SOFTGPU_DEBUG=1 "$top/bin/cudart_device_count" 2>&1 | grep -v 'cuGetProcAddress(.*not provided by softgpu'

section "ucx_info -v"
"$top/ucx/bin/ucx_info" -v

section "ucx_info -d"
"$top/ucx/bin/ucx_info" -d > /tmp/ucx_info_d.txt 2>&1
echo "ucx_info -d exit status: $?"
grep -E '^#[[:space:]]+(Memory domain|Component|Transport|Device):' /tmp/ucx_info_d.txt
grep -i -B2 -A12 'gdr' /tmp/ucx_info_d.txt || echo "ucx_info -d: no line names gdr_copy"

# The data check, then which of our backends gdr_open picked (its log).
ucx_data_check() {
    UCX_TLS=gdr_copy GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=2 "$top/bin/ucx_gdr_copy_check" > /tmp/ucx_check.txt 2>&1
    echo "ucx_gdr_copy_check exit status: $?"
    grep '^UCX-GDR' /tmp/ucx_check.txt
    grep -m 4 -E 'gdr_open: (using|backend)' /tmp/ucx_check.txt || echo "libgdrapi logged no backend line"
}

section "ucx gdr_copy data check"
ucx_data_check

# Our dma-buf backend: softgpu exports its memory as dma-bufs as well.
section "ucx gdr_copy data check (dma-buf backend)"
GDRCOPY_USE_DMABUF_MMAP=1 ucx_data_check

fi_info_run() {
    FI_HMEM_CUDA_USE_GDRCOPY=1 FI_LOG_LEVEL=info FI_PROVIDER=shm \
        "$top/libfabric/bin/fi_info" -p shm > /tmp/fi_info.txt 2>&1
    echo "fi_info exit status: $?"
    # Its log lines about CUDA hmem and GDRCopy, without the parameter echo.
    grep -iE 'hmem|cuda|gdr|nvml|provider:' /tmp/fi_info.txt | grep -v 'fi_param_get_' ||
        echo "fi_info: no line names CUDA hmem or GDRCopy"
}

if [ -x "$top/libfabric/bin/fi_info" ]; then
    section "fi_info"
    fi_info_run
    # libfabric asks NVML first when it can load it; NVML needs NVIDIA's
    # kernel driver and says nothing more.  Without NVML it asks the CUDA
    # runtime, which says why.
    mkdir -p /tmp/cudart-only
    cp -a "$cuda_libs"/libcudart.so* /tmp/cudart-only/
    section "fi_info without NVML"
    LD_LIBRARY_PATH=/tmp/cudart-only fi_info_run
fi
section "end"
exit 0
