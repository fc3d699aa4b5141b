#!/bin/bash
# Builds UCX from Debian's source tree against our libgdrapi and a CUDA
# prefix (Debian's CUDA headers and runtime, softgpu's libcuda), installs it
# under /opt/consumers/ucx in STAGE, and builds our UCX programs against it.
# Run by gdrkit.consumers on the host (Debian 12, the VMs' userland).
#   build_ucx.sh SOURCE_DIR BUILD_DIR STAGE_DIR CUDA_PREFIX GDRAPI_PREFIX
set -euo pipefail
if [ $# -ne 5 ]; then
    echo "usage: $0 SOURCE_DIR BUILD_DIR STAGE_DIR CUDA_PREFIX GDRAPI_PREFIX" >&2
    exit 2
fi
source_dir="$1" build_dir="$2" stage="$3" cuda="$4" gdrapi="$5"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prefix=/opt/consumers/ucx
jobs="$(nproc)"

# Debian's source tree has no generated configure.
if [ ! -x "$source_dir/configure" ]; then
    (cd "$source_dir" && ./autogen.sh)
fi
mkdir -p "$build_dir"
cd "$build_dir"
# Only what the VM checks: no network hardware, no language bindings.
"$source_dir/configure" --prefix="$prefix" \
    --with-cuda="$cuda" --with-gdrcopy="$gdrapi" \
    --without-java --without-go --disable-doxygen-doc --disable-numa \
    --without-verbs --without-rdmacm --without-knem --without-xpmem \
    --without-rocm --without-ugni --without-fuse3
grep -q '^#define HAVE_GDRAPI_H 1' config.h || {
    echo "error: UCX's configure did not find gdrapi.h under $gdrapi (see config.log)" >&2
    exit 1
}
grep -q '^#define uct_cuda_MODULES ":gdrcopy"' config.h || {
    echo "error: UCX's configure left the gdrcopy module out (see config.log)" >&2
    exit 1
}
# The libraries and tools only: UCX's test/apps link CUDA calls softgpu's
# libcuda does not define (cuCtxDetach), and nothing here runs them.
for dir in src/ucm src/ucs src/uct src/ucp src/tools/info; do
    make -j"$jobs" -C "$dir"
    make -C "$dir" install DESTDIR="$stage"
done

ucx="$stage$prefix"
mkdir -p "$stage/opt/consumers/bin"
cc -O2 -Wall -Wextra -Werror -I"$ucx/include" -I"$cuda/include" \
    "$here/ucx_gdr_copy_check.c" -o "$stage/opt/consumers/bin/ucx_gdr_copy_check" \
    -L"$ucx/lib" -Wl,-rpath-link,"$ucx/lib" -Wl,-rpath,"$prefix/lib" -luct -lucs -L"$cuda/lib" -lcuda
cc -O2 -Wall -Wextra -Werror -I"$cuda/include" \
    "$here/cudart_device_count.c" -o "$stage/opt/consumers/bin/cudart_device_count" -L"$cuda/lib" -lcudart
