#!/bin/bash
# The real consumers against our library on the H200 machine (issue 22): NCCL
# (the machine's PyTorch and nvidia-nccl-cu13), NVSHMEM (nvidia-nvshmem-cu13),
# UCX from the libucx-cu13 wheel and UCX built there from Debian's source with
# --with-gdrcopy against our header and library.
#
#   run from the repository root on that machine: bash tools/h200/consumers.sh
#   needs .device/ filled here first by tools/h200/fetch_consumers.sh (Vulkan
#   loader, the UCX wheel and Debian's UCX source, our runtime packages' files)
#   results go to $RESULTS (default ./h200-out/consumers), and as
#   consumers-results.tgz into $OUT when set
#
# Each cell (consumer x backend x package layout) prints one CELL line: what
# the consumer decided about GDRCopy, in its own words, and whether its data
# check passed.  A cell that cannot run says why.  Exit status 1 when a cell
# that ran crashed or moved wrong data.
set -u
# shellcheck source=tools/h200/lib.sh
. "$(dirname "$0")/lib.sh"
ARCHIVE_DIR=${OUT:-}
OUT=${RESULTS:-$PWD/h200-out/consumers}
rm -rf "$OUT"
mkdir -p "$OUT"
TOP=$PWD
export PATH=/usr/local/cuda/bin:$PATH
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
step() { echo "== $*" | tee -a "$OUT/steps.log"; }
status=0

step "build our library and install it into a prefix (headers, libgdrapi.so, libgdrapi.so.2)"
if ! { make -j16 lib CUDA=/usr/local/cuda && make prefix="$OUT/prefix" lib_install CUDA=/usr/local/cuda; } > "$OUT/build.log" 2>&1; then
	tail -40 "$OUT/build.log"
	exit 1
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"

# The package layouts: where each put the runtime package's files (fetch_consumers.sh
# unpacked them here); "tree" is the prefix above.
declare -A LAYOUT
LAYOUT[tree]=$OUT/prefix/lib
for layout in deb rpm; do
	dir=$(find "$TOP/.device/layouts/$layout" -name 'libgdrapi.so.2' -printf '%h\n' 2>/dev/null | head -n 1)
	LAYOUT[$layout]=$dir
done

install_vulkan_loader || exit 1
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64

# UCX from Debian's source, configured against our installed prefix: built in the
# background while NCCL runs (it needs only the prefix).
step "build UCX from Debian's source (--with-cuda --with-gdrcopy=our prefix), in the background"
(
	set -e
	rm -rf "$OUT/ucx-src" && mkdir -p "$OUT/ucx-src"
	# fetch_consumers.sh ran UCX's autogen.sh (this machine has no libtool).
	tar -C "$OUT/ucx-src" --strip-components=1 -xf "$TOP/.device/src/ucx-configured.tar.gz"
	cd "$OUT/ucx-src"
	./configure --prefix="$OUT/ucx" --with-cuda=/usr/local/cuda --with-gdrcopy="$OUT/prefix" \
		--without-verbs --without-rdmacm --without-knem --without-xpmem --without-java --without-go \
		--disable-doxygen-doc --disable-logging-check --enable-mt \
		CFLAGS="-O2 -g -Wno-error" CXXFLAGS="-O2 -g -Wno-error" \
		CPPFLAGS="-I/usr/local/cuda/include" LDFLAGS="-L/usr/local/nvidia/lib64 -L/usr/local/cuda/lib64"
	# The libraries and ucx_info only, as in the VM (tests/consumers/build_ucx.sh): UCX 1.13's
	# test/apps do not build with gcc 13 (sa_util.h lacks <cstdint>), and nothing here runs them.
	for dir in src/ucm src/ucs src/uct src/ucp src/tools/info; do
		make -j12 -C "$dir"
		make -C "$dir" install
	done
) > "$OUT/ucx-build.log" 2>&1 &
ucx_build=$!

# cell CONSUMER BACKEND LAYOUT: the environment for our library in that cell.
# Backend "none" runs with no libgdrapi at all.
cell_env() {
	local backend=$1 layout=$2
	if [ "$backend" = none ]; then
		echo "LD_LIBRARY_PATH=/usr/local/nvidia/lib64"
		return
	fi
	echo "LD_LIBRARY_PATH=${LAYOUT[$layout]}:/usr/local/nvidia/lib64 GDRCOPY_BACKEND=$backend GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=3"
}

report() { echo "CELL $*" | tee -a "$OUT/cells.txt"; }

run_nccl() {
	local backend=$1 layout=$2 extra=${3:-} name log
	name="nccl-$backend-$layout${extra:+-${extra//[ =]/_}}"
	log=$OUT/$name.log
	if [ "$backend" != none ] && [ -z "${LAYOUT[$layout]}" ]; then
		report "nccl backend=$backend layout=$layout: not run: no $layout files in .device/layouts (run tools/h200/fetch_consumers.sh here)"
		return
	fi
	# shellcheck disable=SC2046,SC2086 # cell_env and extra are NAME=VALUE words
	env $(cell_env "$backend" "$layout") $extra NCCL_GDRCOPY_ENABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ALLOC,NET \
		NCCL_NVLS_ENABLE=0 NCCL_CHECK_PORT=$((29500 + RANDOM % 400)) timeout 300 "$PY" "$TOP/tools/h200/nccl_check.py" > "$log" 2>&1
	local rc=$?
	local said verdict
	said=$(grep -h "NCCL" "$log" | grep -o -E "GDRCOPY enabled library [0-9.]+ driver [0-9.]+|Failed to open libgdrapi[^\"]*|gdr_pin_buffer[^\"]*failed[^\"]*|GDRCOPY.*" | sort -u | head -n 3 | tr '\n' ';')
	verdict=$(grep -h -E "^nccl-check: [0-9]+ sizes|collective failed" "$log" | tail -n 1)
	[ -n "$said" ] || said="nothing about GDRCopy (gdr_open failed, so NCCL runs without it)"
	ours=$(grep -h -E "^(ERR|WARN):" "$log" | grep -E "gdr_pin_buffer|^ERR: +$backend:" | head -n 2 | tr -s ' ' | tr '\n' ';')
	report "nccl backend=$backend layout=$layout${extra:+ $extra}: rc=$rc; NCCL said: $said ${ours:+ our library said: $ours} => ${verdict:-no verdict}"
	case $rc in 0) ;; 1) [ "$extra" = "NCCL_CUMEM_ENABLE=0" ] || status=1 ;; *) status=1 ;; esac
}

step "NCCL $("$PY" -c 'import torch; print(".".join(map(str, torch.cuda.nccl.version())))' 2>/dev/null): one process, NCCL_GDRCOPY_ENABLE=1"
run_nccl none -
for layout in tree deb rpm; do run_nccl vulkan "$layout"; done
run_nccl vulkan deb "NCCL_CUMEM_ENABLE=0"
run_nccl dmabuf deb
run_nccl gdrdrv deb

step "NVSHMEM: one PE, host put, NVSHMEM_DEBUG=INFO"
NVSHMEM_DIR=$("$PY" -c 'import nvidia.nvshmem, os; print(list(nvidia.nvshmem.__path__)[0])')
grep -l -a "libgdrapi" "$NVSHMEM_DIR"/lib/*.so* 2>/dev/null | sed 's/^/NVSHMEM files naming libgdrapi: /' | tee "$OUT/nvshmem-files.txt"
mkdir -p "$OUT/nvshmem-lib" && ln -sf "$NVSHMEM_DIR/lib/libnvshmem_host.so.3" "$OUT/nvshmem-lib/libnvshmem_host.so"
# nvshmem_init() is inline over nvshmemi_init_thread, which lives in the device library:
# NVSHMEM programs link with nvcc and relocatable device code, as NVSHMEM documents.
if nvcc -rdc=true -arch=sm_90 -std=c++17 -O2 -I"$NVSHMEM_DIR/include" "$TOP/tools/h200/nvshmem_one_pe.cu" \
	-L"$OUT/nvshmem-lib" -lnvshmem_host "$NVSHMEM_DIR/lib/libnvshmem_device.a" -L/usr/local/nvidia/lib64 -lcuda \
	-Xlinker -rpath -Xlinker "$NVSHMEM_DIR/lib" -o "$OUT/nvshmem_one_pe" > "$OUT/nvshmem-build.log" 2>&1; then
	UCX_WHEEL_LIB=$(find "$TOP/.device/ucx-wheel" -name libucp.so.0 -printf '%h\n' 2>/dev/null | head -n 1)
	for spec in "none - none" "vulkan deb none" "vulkan deb ucx" "vulkan deb ibrc"; do
		read -r backend layout transport <<< "$spec"
		log=$OUT/nvshmem-$backend-$layout-$transport.log
		# The cell's environment, with the UCX wheel's libraries for NVSHMEM's ucx transport.
		# shellcheck disable=SC2046 # cell_env prints NAME=VALUE words
		env $(cell_env "$backend" "$layout" | sed "s|LD_LIBRARY_PATH=\\([^ ]*\\)|LD_LIBRARY_PATH=\\1${UCX_WHEEL_LIB:+:$UCX_WHEEL_LIB}|") \
			NVSHMEM_DEBUG=INFO NVSHMEM_DISABLE_NVLS=1 NVSHMEM_REMOTE_TRANSPORT="$transport" \
			timeout 120 "$OUT/nvshmem_one_pe" > "$log" 2>&1
		rc=$?
		said=$(grep -h -E "GDR|gdr|initialized the transport|skipped in favor|failed" "$log" |
			grep -v -E "^nvshmem-check|_HOME=|NVSHMEM_USE_|cudaError" | sed 's|^/[^ ]*/||' | sort -u | head -n 4 | tr '\n' ';')
		report "nvshmem backend=$backend layout=$layout transport=$transport: rc=$rc; NVSHMEM said: ${said:-nothing about GDRCopy} => $(grep -h -E '^nvshmem-check: (PASS|FAIL)' "$log" | tail -n 1)"
		[ $rc -eq 0 ] || status=1
	done
else
	report "nvshmem: not run: the one-PE program did not build ($(tail -n 2 "$OUT/nvshmem-build.log" | tr '\n' ' '))"
fi

step "UCX from the libucx-cu13 wheel: ucx_info -d"
UCX_WHEEL_BIN=$(find "$TOP/.device/ucx-wheel" -name ucx_info -printf '%h\n' 2>/dev/null | head -n 1)
if [ -n "$UCX_WHEEL_BIN" ]; then
	ls "$UCX_WHEEL_BIN/../lib/ucx" > "$OUT/ucx-wheel-modules.txt"
	# The wheel's own libraries first: the machine has an older UCX of its own.
	LD_LIBRARY_PATH=$UCX_WHEEL_BIN/../lib:${LAYOUT[deb]:-${LAYOUT[tree]}}:/usr/local/nvidia/lib64 GDRCOPY_BACKEND=vulkan \
		"$UCX_WHEEL_BIN/ucx_info" -d > "$OUT/ucx-wheel-info.txt" 2>&1
	mds=$(grep -h -E "Memory domain:|Transport:" "$OUT/ucx-wheel-info.txt" | awk '{print $NF}' | sort -u | tr '\n' ' ')
	if grep -q gdr "$OUT/ucx-wheel-modules.txt"; then gdr="has a gdr_copy module"; else gdr="has no gdr_copy module (built without --with-gdrcopy)"; fi
	report "ucx-wheel $(LD_LIBRARY_PATH=$UCX_WHEEL_BIN/../lib "$UCX_WHEEL_BIN/ucx_info" -v 2>/dev/null | head -n 1 | tr -s ' #'): the wheel $gdr; ucx_info -d lists: $mds"
else
	report "ucx-wheel: not run: no .device/ucx-wheel (run tools/h200/fetch_consumers.sh here)"
fi

step "UCX built from Debian's source against our library"
if wait "$ucx_build"; then
	for backend in vulkan dmabuf; do
		log=$OUT/ucx-src-$backend.txt
		# shellcheck disable=SC2046
		env $(cell_env "$backend" tree) "$OUT/ucx/bin/ucx_info" -d > "$log" 2>&1
		said=$(grep -h -A3 -E "Memory domain: gdr_copy|Transport: gdr_copy" "$log" | tr -s ' \t' ' ' | tr '\n' ';' | head -c 400)
		why=$(grep -h -E "^ERR: +$backend:" "$log" | head -n 1 | tr -s ' ')
		report "ucx-source $("$OUT/ucx/bin/ucx_info" -v | head -n 1 | tr -s ' #') backend=$backend: ucx_info -d: ${said:-no gdr_copy memory domain} ${why:+($why)}"
	done
	# Data through UCX's gdr_copy transport (UCT API; tests/consumers/ucx_gdr_copy_check.c, as in the VM):
	# the memory the vulkan backend can pin without a module, and cuMemAlloc memory, which it cannot.
	if gcc -O2 -Wall -I"$OUT/ucx/include" -I/usr/local/cuda/include "$TOP/tests/consumers/ucx_gdr_copy_check.c" \
		-o "$OUT/ucx_gdr_copy_check" -L"$OUT/ucx/lib" -Wl,-rpath,"$OUT/ucx/lib" -luct -lucs \
		-L/usr/local/nvidia/lib64 -lcuda > "$OUT/ucx-check-build.log" 2>&1; then
		for allocator in cuMemCreate cuMemAlloc; do
			log=$OUT/ucx-check-vulkan-$allocator.txt
			# shellcheck disable=SC2046 # cell_env prints NAME=VALUE words
			env $(cell_env vulkan tree) timeout 120 "$OUT/ucx_gdr_copy_check" $((2 << 20)) "$allocator" > "$log" 2>&1
			rc=$?
			said=$(grep -h -E "^UCX-GDR: (registered|FAILED|all data)|gdr_pin_buffer:" "$log" | head -n 3 | tr -s ' ' | tr '\n' ';')
			report "ucx-source gdr_copy data check backend=vulkan memory=$allocator: rc=$rc; $said ($(grep -c ': ok$' "$log") transfers checked ok)"
			[ "$allocator" = cuMemAlloc ] || [ $rc -eq 0 ] || status=1
		done
	else
		report "ucx-source gdr_copy data check: not run: the program did not build ($(tail -n 2 "$OUT/ucx-check-build.log" | tr '\n' ' '))"
		status=1
	fi
else
	report "ucx-source: not run: the build failed: $(tail -n 3 "$OUT/ucx-build.log" | tr '\n' ' ')"
	status=1
fi

step "done"
cat "$OUT/cells.txt"
if [ -n "$ARCHIVE_DIR" ]; then tar -C "$OUT" --exclude=ucx-src --exclude=ucx --exclude=prefix -czf "$ARCHIVE_DIR/consumers-results.tgz" .; fi
exit $status
