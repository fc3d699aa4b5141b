#!/bin/bash
# Builds libfabric from Debian's source tree with CUDA hmem and GDRCopy, the
# shm and tcp providers only, and installs it under /opt/consumers/libfabric
# in STAGE.  CUDA and libgdrapi are dlopened at run time ("libgdrapi.so", the
# unversioned name, as consumers.md says libfabric looks for it), as builds
# meant for hosts with and without GPUs are: what is missing at run time is
# then reported by libfabric itself, not by the dynamic linker.
# Run by gdrkit.consumers on the host (Debian 12, the VMs' userland).
#   build_libfabric.sh SOURCE_DIR BUILD_DIR STAGE_DIR CUDA_PREFIX GDRAPI_PREFIX
set -euo pipefail
if [ $# -ne 5 ]; then
    echo "usage: $0 SOURCE_DIR BUILD_DIR STAGE_DIR CUDA_PREFIX GDRAPI_PREFIX" >&2
    exit 2
fi
source_dir="$1" build_dir="$2" stage="$3" cuda="$4" gdrapi="$5"
prefix=/opt/consumers/libfabric

if [ ! -x "$source_dir/configure" ]; then
    (cd "$source_dir" && ./autogen.sh)
fi
mkdir -p "$build_dir"
cd "$build_dir"
providers=()
for provider in udp sockets verbs efa psm2 psm3 opx usnic rxd mrail sm2 ucx lpp cxi perf; do
    providers+=("--enable-$provider=no")
done
"$source_dir/configure" --prefix="$prefix" \
    --with-cuda="$cuda" --enable-cuda-dlopen --with-gdrcopy="$gdrapi" --enable-gdrcopy-dlopen \
    --enable-shm=yes --enable-tcp=yes --enable-rxm=yes "${providers[@]}"
for define in 'HAVE_CUDA 1' 'ENABLE_CUDA_DLOPEN 1' 'HAVE_GDRCOPY 1' 'ENABLE_GDRCOPY_DLOPEN 1'; do
    grep -q "^#define $define\$" config.h || {
        echo "error: libfabric's configure did not set $define (see config.log)" >&2
        exit 1
    }
done
make -j"$(nproc)"
make install DESTDIR="$stage"
