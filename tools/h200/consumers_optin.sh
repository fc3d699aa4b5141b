#!/bin/bash
# Issue 35's judge on the GPU machine (no gdrdrv, a CUDA driver too old for
# dma-buf mmap): real consumers with our library, each cell twice, without
# the vulkan opt-in and with GDRCOPY_BACKEND=vulkan, beside a control with no
# libgdrapi on the path.  A cell passes when the run with our library does at
# least what the control does; without the opt-in every cell must pass.
#   - NCCL: PyTorch's (tools/h200/nccl_check.py), the machine's system NCCL
#     and one release built here from source (tools/h200/nccl_api_check.cu),
#     NCCL_GDRCOPY_ENABLE=1, NCCL_CUMEM_ENABLE unset and 0, all-reduce and
#     all-gather of 8 B to 64 MiB, data checked.  NCCL <= 2.18 does not build
#     with CUDA 13; its default is the cudaMalloc path that NCCL_CUMEM_ENABLE=0
#     takes, so that cell stands for it.
#   - UCX built here from its source with --with-gdrcopy: ucx_perftest -m cuda
#     (cudaMalloc) tag_lat and tag_bw at eager and rendezvous sizes, two
#     processes on the one GPU.
#   - NVSHMEM (PyTorch's nvidia-nvshmem): one PE, IBRC proxy transport
#     (which opens libgdrapi), default heap and NVSHMEM_DISABLE_CUDA_VMM=1.
#   - Latency, with the opt-in: host <-> cuMemCreate GPU memory through UCX's
#     gdr_copy against its cuda_copy, 8 B to 8 KiB (tools/h200/ucx_copy_lat.c).
#
#   here first:  bash tools/h200/fetch_consumers.sh --optin   (carry .device)
#   there:       bash tools/h200/consumers_optin.sh
# Results under $OUT (default ./h200-out/optin): cells.tsv, latency.txt,
# table.md (tools/h200/optin_summary.py) and logs.tgz.  Builds go to $CACHE
# (default /tmp/gdrcopy-optin) and are reused by a later call on a warm
# machine.  BUDGET seconds (default 560) bounds the run: cells past it are
# recorded as not run.  Exit status: optin_summary.py's (1 when a cell fails
# without the opt-in).
set -u
# shellcheck source=tools/h200/lib.sh
. "$(dirname "$0")/lib.sh"
RESULTS=${OUT:-$PWD/h200-out/optin}
CACHE=${CACHE:-/tmp/gdrcopy-optin}
BUDGET=${BUDGET:-560}
ROUNDS=${ROUNDS:-5}
TOP=$PWD
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
UCX_TAR=$(find "$TOP/.device/src" -name 'ucx-v*-configured.tar.gz' 2>/dev/null | sort | tail -n 1)
NCCL_TAR=$(find "$TOP/.device/src" -name 'nccl-v*.tar.gz' 2>/dev/null | sort | tail -n 1)
LOGS=$RESULTS/logs
CELLS=$RESULTS/cells.tsv
mkdir -p "$RESULTS" "$LOGS" "$CACHE"
: > "$CELLS"
: > "$RESULTS/latency.txt"
export PATH=/usr/local/cuda/bin:$PATH
step() { echo "== $(date -u +%T) $*"; }
time_left() { [ "$SECONDS" -lt "$BUDGET" ]; }

{
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	tree_commit_line
	echo "libgdrapi elsewhere on this machine: $(ldconfig -p | grep -c libgdrapi) (the controls need 0)"
} | tee "$RESULTS/machine.txt"

step "build our library: $CACHE/prefix, and a copy UCX builds against"
if ! { make -j16 lib CUDA=/usr/local/cuda && make prefix="$CACHE/prefix" lib_install CUDA=/usr/local/cuda &&
	make prefix="$CACHE/ucx-gdrcopy" lib_install CUDA=/usr/local/cuda; } > "$LOGS/build-lib.log" 2>&1; then
	tail -40 "$LOGS/build-lib.log"
	exit 1
fi
OURS=$(dirname "$(find "$CACHE/prefix" -name libgdrapi.so.2 | head -n 1)")
install_vulkan_loader || exit 1

# UCX against the copy, whose library is then removed: UCX finds libgdrapi only
# where a cell's LD_LIBRARY_PATH puts ours, so the control runs without any.
if [ ! -x "$CACHE/ucx/bin/ucx_perftest" ] && [ -n "$UCX_TAR" ]; then
	step "build UCX from $(basename "$UCX_TAR") (--with-cuda --with-gdrcopy), in the background"
	(
		set -e
		rm -rf "$CACHE/ucx-src" && mkdir -p "$CACHE/ucx-src"
		tar -C "$CACHE/ucx-src" --strip-components=1 -xzf "$UCX_TAR"
		cd "$CACHE/ucx-src"
		./configure --prefix="$CACHE/ucx" --with-cuda=/usr/local/cuda --with-gdrcopy="$CACHE/ucx-gdrcopy" \
			--without-verbs --without-rdmacm --without-knem --without-xpmem --without-java --without-go \
			--disable-doxygen-doc --disable-logging-check --enable-mt \
			CFLAGS="-O2 -g -Wno-error" CXXFLAGS="-O2 -g -Wno-error" \
			CPPFLAGS="-I/usr/local/cuda/include" LDFLAGS="-L/usr/local/nvidia/lib64 -L/usr/local/cuda/lib64"
		for dir in src/ucm src/ucs src/uct src/ucp src/tools/info src/tools/perf; do
			make -j10 -C "$dir"
			make -C "$dir" install
		done
		rm -rf "$CACHE/ucx-gdrcopy/lib"
	) > "$LOGS/build-ucx.log" 2>&1 &
	ucx_build=$!
fi
NCCL_BUILT=$CACHE/nccl/build/lib/libnccl.so
if [ ! -f "$NCCL_BUILT" ] && [ -n "$NCCL_TAR" ]; then
	step "build NCCL from $(basename "$NCCL_TAR") (sm_90), in the background"
	(
		set -e
		rm -rf "$CACHE/nccl" && mkdir -p "$CACHE/nccl"
		tar -C "$CACHE/nccl" --strip-components=1 -xzf "$NCCL_TAR"
		make -C "$CACHE/nccl" -j6 src.build CUDA_HOME=/usr/local/cuda \
			NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90"
	) > "$LOGS/build-nccl.log" 2>&1 &
	nccl_build=$!
fi

# env_for OPTIN [LIBDIR...]: the cell's environment as NAME=VALUE words.
env_for() {
	local optin=$1 path=/usr/local/nvidia/lib64 dir
	shift
	for dir in "$@"; do [ -z "$dir" ] || path=$dir:$path; done
	case $optin in
	control) echo "LD_LIBRARY_PATH=$path" ;;
	off) echo "LD_LIBRARY_PATH=$OURS:$path GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=2" ;;
	on) echo "LD_LIBRARY_PATH=$OURS:$path GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=2 GDRCOPY_BACKEND=vulkan" ;;
	esac
}

# record CONSUMER VERSION SETTING OPTIN RC USES SAID COMMAND (one line of cells.tsv)
record() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$(echo "$7" | tr '\t\n' '  ' | cut -c1-300)" "$8" >> "$CELLS"
	echo "CELL $1 $2 $3 opt-in=$4: rc=$5 uses=$6; $7"
}

# One NCCL run: nccl_cell VERSION SETTING OPTIN PROGRAM... (the program prints nccl-check lines).
nccl_cell() {
	local version=$1 setting=$2 optin=$3 log rc uses said cumem=""
	shift 3
	log=$LOGS/nccl-$version-${setting//[ =]/_}-$optin.log
	[ "$setting" = "NCCL_CUMEM_ENABLE=0" ] && cumem=NCCL_CUMEM_ENABLE=0
	if ! time_left; then
		record nccl "$version" "$setting" "$optin" 125 0 "not run: time budget spent" "-"
		return
	fi
	# shellcheck disable=SC2046 # env_for prints NAME=VALUE words
	env $(env_for "$optin" "${NCCL_LIB:-}") $cumem NCCL_GDRCOPY_ENABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ALLOC \
		NCCL_NVLS_ENABLE=0 NCCL_CHECK_PORT=$((29500 + RANDOM % 400)) timeout 240 "$@" > "$log" 2>&1
	rc=$?
	uses=0
	grep -q "GDRCOPY enabled" "$log" && uses=1
	said=$(grep -h -o -E "GDRCOPY enabled library [0-9.]+ driver [0-9.]+|Failed to open libgdrapi[^\"]*|gdr_pin_buffer\(.*failed: [0-9]+|ncclSystemError|nccl-check: [0-9]+ sizes, [A-Z]+|collective failed: .*" "$log" |
		sort -u | head -n 4 | tr '\n' ';')
	record nccl "$version" "$setting" "$optin" "$rc" "$uses" "${said:-nothing about GDRCopy}" \
		"${cumem:+$cumem }NCCL_GDRCOPY_ENABLE=1 $(basename "$1")${2:+ $(basename "$2")}"
}

nccl_release() {
	local version=$1 setting optin
	shift
	for setting in "cuMem default" "NCCL_CUMEM_ENABLE=0"; do
		for optin in control off on; do nccl_cell "$version" "$setting" "$optin" "$@"; done
	done
}

step "NCCL inside PyTorch"
torch_nccl=$("$PY" -c 'import torch; print(".".join(map(str, torch.cuda.nccl.version())))' 2>/dev/null)
nccl_release "${torch_nccl:-torch}" "$PY" "$TOP/tools/h200/nccl_check.py"

step "the machine's system NCCL (nccl.h, -lnccl)"
if nvcc -O2 -arch=sm_90 -o "$CACHE/nccl_api_check_system" "$TOP/tools/h200/nccl_api_check.cu" -lnccl \
	> "$LOGS/build-nccl-check.log" 2>&1; then
	system_nccl=$(awk '/define NCCL_(MAJOR|MINOR|PATCH) /{printf "%s%s", sep, $3; sep="."}' /usr/include/nccl.h)
	nccl_release "${system_nccl:-system}" "$CACHE/nccl_api_check_system"
else
	record nccl system - control 1 0 "not run: $(tail -n 2 "$LOGS/build-nccl-check.log" | tr '\n' ' ')" "-"
fi

step "NVSHMEM, one PE, IBRC transport"
NVSHMEM_DIR=$("$PY" -c 'import nvidia.nvshmem, os; print(list(nvidia.nvshmem.__path__)[0])' 2>/dev/null)
mkdir -p "$CACHE/nvshmem-lib" && ln -sf "$NVSHMEM_DIR/lib/libnvshmem_host.so.3" "$CACHE/nvshmem-lib/libnvshmem_host.so"
if [ -n "$NVSHMEM_DIR" ] && nvcc -rdc=true -arch=sm_90 -std=c++17 -O2 -I"$NVSHMEM_DIR/include" \
	"$TOP/tools/h200/nvshmem_one_pe.cu" -L"$CACHE/nvshmem-lib" -lnvshmem_host "$NVSHMEM_DIR/lib/libnvshmem_device.a" \
	-L/usr/local/nvidia/lib64 -lcuda -Xlinker -rpath -Xlinker "$NVSHMEM_DIR/lib" -o "$CACHE/nvshmem_one_pe" \
	> "$LOGS/build-nvshmem.log" 2>&1; then
	nvshmem_version=$("$PY" -c 'import importlib.metadata as m; print(next(d.version for d in m.distributions() if (d.metadata["Name"] or "").startswith("nvidia-nvshmem")))' 2>/dev/null)
	for setting in "VMM heap default" "NVSHMEM_DISABLE_CUDA_VMM=1"; do
		vmm=""
		[ "$setting" = "NVSHMEM_DISABLE_CUDA_VMM=1" ] && vmm=$setting
		for optin in control off on; do
			log=$LOGS/nvshmem-${setting//[ =]/_}-$optin.log
			if ! time_left; then
				record nvshmem "${nvshmem_version:-?}" "$setting" "$optin" 125 0 "not run: time budget spent" "-"
				continue
			fi
			# shellcheck disable=SC2046,SC2086 # env_for and vmm are NAME=VALUE words
			env $(env_for "$optin") $vmm NVSHMEM_DEBUG=INFO NVSHMEM_DISABLE_NVLS=1 NVSHMEM_REMOTE_TRANSPORT=ibrc \
				timeout 120 "$CACHE/nvshmem_one_pe" > "$log" 2>&1
			rc=$?
			uses=0
			grep -q -E "gdr_open: using the|GDR driver version" "$log" && uses=1
			said=$(grep -h -E "GDR|gdr_|initialized the transport|nvshmem-check: (PASS|FAIL)|ERROR" "$log" |
				grep -v -E "_HOME=|NVSHMEM_USE_" | sed 's|^/[^ ]*/||' | sort -u | head -n 3 | tr '\n' ';')
			record nvshmem "${nvshmem_version:-?}" "$setting" "$optin" "$rc" "$uses" "${said:-nothing}" \
				"${vmm:+$vmm }NVSHMEM_REMOTE_TRANSPORT=ibrc nvshmem_one_pe"
		done
	done
else
	record nvshmem - - control 1 0 "not run: $(tail -n 2 "$LOGS/build-nvshmem.log" 2>/dev/null | tr '\n' ' ')" "-"
fi

step "UCX: ucx_perftest -m cuda, two processes on the GPU"
if [ -n "${ucx_build:-}" ]; then
	while kill -0 "$ucx_build" 2>/dev/null && time_left; do sleep 5; done
	kill -0 "$ucx_build" 2>/dev/null && { pkill -TERM -P "$ucx_build"; kill "$ucx_build"; echo "UCX's build outlasted the budget" >> "$LOGS/build-ucx.log"; }
fi
if [ -n "${ucx_build:-}" ] && ! wait "$ucx_build"; then
	record ucx - - control 1 0 "not run: UCX did not build: $(tail -n 3 "$LOGS/build-ucx.log" | tr '\n' ' ')" "-"
elif [ -x "$CACHE/ucx/bin/ucx_perftest" ]; then
	ucx_version=$("$CACHE/ucx/bin/ucx_info" -v 2>/dev/null | grep -o -m1 -iE 'version:? [0-9.]+' | grep -oE '[0-9.]+$')
	for spec in "tag_lat 8 20000" "tag_lat 4096 10000" "tag_lat 1048576 500" "tag_bw 4096 10000" "tag_bw 1048576 500"; do
		read -r test size iters <<< "$spec"
		for optin in control off on; do
			log=$LOGS/ucx-$test-$size-$optin
			if ! time_left; then
				record ucx "${ucx_version:-?}" "$test $size B" "$optin" 125 0 "not run: time budget spent" "-"
				continue
			fi
			port=$((13000 + RANDOM % 2000))
			# shellcheck disable=SC2046 # env_for prints NAME=VALUE words
			env $(env_for "$optin" "$CACHE/ucx/lib") timeout 90 "$CACHE/ucx/bin/ucx_perftest" -p "$port" -m cuda \
				> "$log.server" 2>&1 &
			server=$!
			sleep 2
			# shellcheck disable=SC2046
			env $(env_for "$optin" "$CACHE/ucx/lib") timeout 60 "$CACHE/ucx/bin/ucx_perftest" 127.0.0.1 -p "$port" \
				-t "$test" -m cuda -s "$size" -n "$iters" > "$log.client" 2>&1
			rc=$?
			wait "$server"
			server_rc=$?
			[ "$rc" -ne 0 ] || rc=$server_rc
			uses=0
			grep -q "gdr_open: using the" "$log.client" "$log.server" && uses=1
			said=$(grep -h -E "UCX +(ERROR|FATAL)|Final:|Failed" "$log.client" "$log.server" | tr -s ' ' | sort -u | head -n 3 | tr '\n' ';')
			[ -n "$said" ] || said=$(grep -h -E '^ *[0-9]+ +' "$log.client" | tail -n 1 | tr -s ' ')
			record ucx "${ucx_version:-?}" "$test $size B" "$optin" "$rc" "$uses" "${said:-no result line}" \
				"ucx_perftest 127.0.0.1 -t $test -m cuda -s $size -n $iters (server: ucx_perftest -m cuda)"
		done
	done

	step "latency with the opt-in: UCX gdr_copy against cuda_copy, cuMemCreate memory, $ROUNDS rounds"
	if gcc -O2 -Wall -I"$CACHE/ucx/include" -I/usr/local/cuda/include "$TOP/tools/h200/ucx_copy_lat.c" \
		-o "$CACHE/ucx_copy_lat" -L"$CACHE/ucx/lib" -Wl,-rpath,"$CACHE/ucx/lib" -luct -lucs \
		-L/usr/local/nvidia/lib64 -lcuda > "$LOGS/build-ucx-lat.log" 2>&1; then
		# shellcheck disable=SC2046
		env $(env_for on) taskset -c 2 timeout 120 "$CACHE/ucx_copy_lat" "$ROUNDS" 2000 > "$RESULTS/latency.txt" 2> "$LOGS/ucx-lat.stderr"
		echo "ucx_copy_lat: exit status $?" | tee -a "$RESULTS/latency.txt"
	else
		tail -n 5 "$LOGS/build-ucx-lat.log" | tee "$RESULTS/latency.txt"
	fi
else
	record ucx - - control 1 0 "not run: no UCX source in .device/src (fetch_consumers.sh --optin)" "-"
fi

step "NCCL built from $(basename "${NCCL_TAR:-none}")"
if [ -n "${nccl_build:-}" ]; then
	# What is left of the budget, at most; a build still running then is reported as such.
	while kill -0 "$nccl_build" 2>/dev/null && time_left; do sleep 5; done
	kill -0 "$nccl_build" 2>/dev/null && { pkill -TERM -P "$nccl_build"; kill "$nccl_build"; }
	wait "$nccl_build" 2>/dev/null
fi
if [ -f "$NCCL_BUILT" ] && nvcc -O2 -arch=sm_90 -I"$CACHE/nccl/build/include" -o "$CACHE/nccl_api_check_built" \
	"$TOP/tools/h200/nccl_api_check.cu" -L"$CACHE/nccl/build/lib" -lnccl >> "$LOGS/build-nccl-check.log" 2>&1; then
	built=$(basename "$NCCL_TAR" .tar.gz)
	NCCL_LIB=$CACHE/nccl/build/lib nccl_release "${built#nccl-}" "$CACHE/nccl_api_check_built"
else
	record nccl "$(basename "${NCCL_TAR:-none}" .tar.gz)" - control 1 0 \
		"not run: the build did not finish in the budget or failed ($(tail -n 1 "$LOGS/build-nccl.log" 2>/dev/null))" "-"
fi

step "the tables"
python3 "$TOP/tools/h200/optin_summary.py" "$CELLS" "$RESULTS/latency.txt" > "$RESULTS/table.md"
status=$?
cat "$RESULTS/table.md"
tar -C "$RESULTS" -czf "$RESULTS/logs.tgz" logs && rm -rf "$LOGS"
exit $status
