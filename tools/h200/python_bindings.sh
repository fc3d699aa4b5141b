#!/bin/bash
# The gdrcopy Python package on the H200 machine (see shared/reference/gpu-machine.md):
# the vulkan backend's gdr_alloc_mapped memory, a real CUDA stack from PyPI.
#
#   run from the repository root on that machine: bash tools/h200/python_bindings.sh
#   needs .device/wheels (tools/h200/fetch_python_wheels.sh, run where PyPI is
#   reachable) and .device/debs (the Vulkan loader packages, as run.sh)
#   results go to $RESULTS (default ./h200-out/python), and as python-results.tgz into $OUT when set
#
# Steps: build libgdrapi (real CUDA headers), install the Vulkan loader, install
# the wheels offline, the data check (tools/h200/python_data_check.py), then
# `python -m gdrcopy.bench` three times.  Exit status: 0 when every step passed
# and the benchmark met its target in at least 2 of the 3 runs.
set -u
# shellcheck source=tools/h200/lib.sh
. "$(dirname "$0")/lib.sh"
ARCHIVE_DIR=${OUT:-}
OUT=${RESULTS:-$PWD/h200-out/python}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
step() { echo "== $*" | tee -a "$OUT/steps.log"; }
fail=0

step "build libgdrapi"
make -j16 lib CUDA=/usr/local/cuda > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
export GDRCOPY_LIBRARY=$PWD/libgdrapi/build/libgdrapi.so.2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"

step "install the Vulkan loader (dpkg -x)"
install_vulkan_loader || { echo "(tools/h200/fetch_python_wheels.sh fetches them too)"; exit 1; }
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

step "install the wheels offline into $OUT/site"
PY=${PYTHON:-python3}
"$PY" --version | tee "$OUT/python.txt"
SITE=$OUT/site
rm -rf "$SITE"
if "$PY" -m pip --version >/dev/null 2>&1; then
	"$PY" -m pip install -q --no-index --find-links .device/wheels --target "$SITE" gdrcopy numpy cuda-python \
		> "$OUT/pip.log" 2>&1 || { cat "$OUT/pip.log"; echo "pip failed: are the wheels for $("$PY" --version)? re-run the fetch with PYVER=X.Y"; exit 1; }
else
	# No pip on the machine: a wheel is a zip laid out for site-packages.
	echo "no pip: unpacking the wheels" | tee "$OUT/pip.log"
	"$PY" - "$SITE" .device/wheels/*.whl <<'PYEOF' || exit 1
import sys, zipfile
for wheel in sys.argv[2:]:
    zipfile.ZipFile(wheel).extractall(sys.argv[1])
PYEOF
fi
export PYTHONPATH=$SITE
# Installed, not the tree's: run from outside the repository.
(cd / && "$PY" -c "import gdrcopy; print(gdrcopy.__version__, gdrcopy.library_version(), gdrcopy.__file__)") \
	| tee "$OUT/import.txt" || fail=1

step "data check: NumPy <-> CUDA through the vulkan backend"
(cd / && "$PY" "$OLDPWD/tools/h200/python_data_check.py") > "$OUT/data.txt" 2>&1
echo "exit status $?" >> "$OUT/data.txt"
tail -n 3 "$OUT/data.txt"
grep -q "^exit status 0" "$OUT/data.txt" || fail=1

met=0
for run in 1 2 3; do
	step "benchmark, run $run"
	(cd / && taskset -c 2 "$PY" -m gdrcopy.bench --backend vulkan --cuda cuda-python --rounds 15 --calls 2000) \
		> "$OUT/bench-$run.txt" 2>&1
	echo "exit status $?" >> "$OUT/bench-$run.txt"
	grep -v '^{' "$OUT/bench-$run.txt"
	grep '^{' "$OUT/bench-$run.txt" > "$OUT/bench-$run.jsonl"
	grep -q "^target: .*: met$" "$OUT/bench-$run.txt" && met=$((met + 1))
done
step "done: benchmark target met in $met of 3 runs"
[ "$met" -ge 2 ] || fail=1
if [ -n "$ARCHIVE_DIR" ]; then tar -C "$OUT" --exclude=site -czf "$ARCHIVE_DIR/python-results.tgz" .; fi
exit $fail
