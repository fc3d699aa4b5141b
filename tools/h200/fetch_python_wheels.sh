#!/bin/bash
# Run HERE (a machine that reaches PyPI and a Debian mirror), before
# python_bindings.sh on the H200 machine, which reaches neither.  Fills
#   .device/wheels/  gdrcopy's own wheels (./toolkit build-wheel: the pure one and
#                    the manylinux_2_28 one that carries libgdrapi, cp311-abi3, so
#                    it installs on the H200's 3.12) and, from PyPI, numpy and
#                    cuda-python (with cuda-bindings, cuda-pathfinder) for the
#                    H200's Python (PYVER, default 3.12: Ubuntu 24.04), used there
#                    only where its Python lacks them
#   .device/debs/    the Vulkan loader packages (as for tools/h200/run.sh), if empty
# About 35 MiB in all; carry `.device` to the machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYVER=${PYVER:-3.12}
NUMPY=${NUMPY:-numpy==2.3.5}
CUDA_PYTHON=${CUDA_PYTHON:-cuda-python==13.0.3}   # CUDA 13.0: the H200's driver 580
mkdir -p .device/wheels .device/debs
rm -f .device/wheels/*.whl
./toolkit build-wheel --output .device/wheels
python3 -m pip download -q -d .device/wheels --only-binary=:all: --python-version "$PYVER" \
	--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
	"$NUMPY" "$CUDA_PYTHON"
if ! ls .device/debs/*.deb >/dev/null 2>&1; then
	(cd .device/debs && apt-get download libvulkan1 libvulkan-dev libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
ls -l .device/wheels .device/debs
du -sh .device
