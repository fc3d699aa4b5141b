#!/bin/bash
# The gdrcopy Python package on the H200 machine (see shared/reference/gpu-machine.md),
# installed from the manylinux wheel that carries libgdrapi (no library build there):
# the vulkan backend's gdr_alloc_mapped memory, the machine's own PyTorch and CuPy.
#
#   run from the repository root on that machine: bash tools/h200/python_bindings.sh
#   needs .device/wheels (tools/h200/fetch_python_wheels.sh, run where PyPI is
#   reachable) and .device/debs (the Vulkan loader packages, as run.sh)
#   results go to $RESULTS (default ./h200-out/python), and as python-results.tgz into $OUT when set
#
# Steps: install the Vulkan loader, install the bundled wheel offline (NumPy and
# cuda-python too, only where the machine's Python lacks them), check which
# library and copy path it uses, build a C program from the wheel's header and
# library, the data check (tools/h200/python_data_check.py), the interchange
# check with PyTorch and CuPy (tools/h200/python_interchange_check.py), then
# `python -m gdrcopy.bench` three times.  Exit status: 0 when every step passed
# and the benchmark met its target (64 B write <= 0.3 us) in at least 2 of the 3 runs.
set -u
# shellcheck source=tools/h200/lib.sh
. "$(dirname "$0")/lib.sh"
ARCHIVE_DIR=${OUT:-}
OUT=${RESULTS:-$PWD/h200-out/python}
REPO=$PWD
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
step() { echo "== $*" | tee -a "$OUT/steps.log"; }
fail=0
# The wheel's own library, not one named by hand.
unset GDRCOPY_LIBRARY
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"

step "install the Vulkan loader (dpkg -x)"
install_vulkan_loader || { echo "(tools/h200/fetch_python_wheels.sh fetches them too)"; exit 1; }
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

step "install the bundled wheel offline into $OUT/site"
PY=${PYTHON:-python3}
"$PY" --version | tee "$OUT/python.txt"
SITE=$OUT/site
rm -rf "$SITE"
mkdir -p "$SITE"
wheels=(.device/wheels/gdrcopy-*-manylinux_2_28_*.whl)
[ -f "${wheels[0]}" ] || { echo "no manylinux gdrcopy wheel in .device/wheels: run tools/h200/fetch_python_wheels.sh"; exit 1; }
wanted=("${wheels[0]}")
# The machine's PyTorch and CuPy were built against its NumPy: bring ours only where there is none.
"$PY" -c "import numpy" 2>/dev/null || wanted+=(.device/wheels/numpy-*.whl)
"$PY" -c "import cuda.bindings" 2>/dev/null || wanted+=(.device/wheels/cuda_*.whl)
echo "installing: ${wanted[*]}" | tee "$OUT/pip.log"
# A wheel is a zip laid out for site-packages (the machine may have no pip).
"$PY" - "$SITE" "${wanted[@]}" <<'PYEOF' || exit 1
import sys, zipfile
for wheel in sys.argv[2:]:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(sys.argv[1])
PYEOF
# zip does not keep modes: the library and the extension must be executable to be mapped.
find "$SITE" -name '*.so*' -exec chmod 755 {} +
export PYTHONPATH=$SITE
# Installed, not the tree's: run from outside the repository.
(cd / && "$PY" -m gdrcopy) | tee "$OUT/import.txt"
grep -q '"source": "bundled"' "$OUT/import.txt" || { echo "FAILED: the bindings did not load the wheel's library"; fail=1; }
grep -q '"fast_path": "compiled"' "$OUT/import.txt" || { echo "FAILED: the compiled copy calls are not in use"; fail=1; }

step "build a C program from the wheel's header and library"
read -ra include_flags <<< "$(cd / && "$PY" -m gdrcopy --includes)"
read -ra lib_flags <<< "$(cd / && "$PY" -m gdrcopy --libs)"
echo "cc ${include_flags[*]} ... ${lib_flags[*]}" > "$OUT/c-build.txt"
cc "${include_flags[@]}" -o "$OUT/wheel_consumer" tools/h200/wheel_consumer.c "${lib_flags[@]}" \
	>> "$OUT/c-build.txt" 2>&1 || fail=1
if command -v pkg-config >/dev/null; then
	PKG_CONFIG_PATH=$("$PY" -m gdrcopy --pkgconfig-dir) pkg-config --cflags --libs gdrapi >> "$OUT/c-build.txt" 2>&1 || fail=1
else
	echo "no pkg-config on this machine: the .pc file is checked by tests/python only" >> "$OUT/c-build.txt"
fi
"$OUT/wheel_consumer" >> "$OUT/c-build.txt" 2>&1 || fail=1
cat "$OUT/c-build.txt"

step "data check: NumPy <-> CUDA through the vulkan backend"
(cd / && "$PY" "$REPO/tools/h200/python_data_check.py") > "$OUT/data.txt" 2>&1
echo "exit status $?" >> "$OUT/data.txt"
tail -n 3 "$OUT/data.txt"
grep -q "^exit status 0" "$OUT/data.txt" || fail=1

step "interchange: PyTorch, CuPy and NumPy on the same memory, no copies, data both ways"
(cd / && "$PY" "$REPO/tools/h200/python_interchange_check.py") > "$OUT/interchange.txt" 2>&1
echo "exit status $?" >> "$OUT/interchange.txt"
grep -v "^ok  " "$OUT/interchange.txt"
grep -q "^exit status 0" "$OUT/interchange.txt" || fail=1

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
