#!/bin/bash
# Diagnostics for the copy engine on the H200 machine (see run.sh for the
# machine's setup): engine_probe's one-variable-at-a-time variants, and pplat
# with each poll flavour and flag location, each repeated, interleaved.
#   run from the repository root; output on stdout, files into $OUT if set
set -u
# shellcheck source=tools/h200/lib.sh
. "$(dirname "$0")/lib.sh"
here=$(dirname "$0")
export PATH=/usr/local/cuda/bin:$PATH
make -j16 lib exes CUDA=/usr/local/cuda > /tmp/diag-build.log 2>&1 || { tail -50 /tmp/diag-build.log; exit 1; }
install_vulkan_loader || exit 1
export LD_LIBRARY_PATH=$PWD/libgdrapi/build
export GDRCOPY_BACKEND=vulkan
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
src=libgdrapi/src
cc -O2 -o /tmp/engine_probe "$here/engine_probe.c" $src/copy.c $src/copy_fast.c $src/copy_x86.c $src/copy_generic.c $src/log.c \
	-Iinclude -I$src -I/usr/local/cuda/include \
	-Llibgdrapi/build -lgdrapi -L/usr/local/nvidia/lib64 -lcuda -lpthread || exit 1

mkdir -p "${OUT:-/tmp}"
echo "== engine_probe (us per call: median [min-max] of 7 interleaved rounds)"
taskset -c 2 /tmp/engine_probe

# A GPU poll with three loads in flight, staggered, so the flag is sampled
# about three times per load latency instead of once.
poll3=/tmp/pplat-poll3.ptx
tests/bench/gdrcopy_pplat -K | awk '
/^\t\.reg \.b64/ { print; print "\t.reg .b32 %q<3>;"; next }
/^WAIT_GPU_FLAG0:/ {
	print "\tld.relaxed.sys.global.u32 %q0, [%rd1];"
	print "\tnanosleep.u32 100;"
	print "\tld.relaxed.sys.global.u32 %q1, [%rd1];"
	print "\tnanosleep.u32 100;"
	print "\tld.relaxed.sys.global.u32 %q2, [%rd1];"
	print
	for (k = 0; k < 3; k++) {
		print "\tsetp.eq.u32 %p3, %q" k ", %r15;"
		print "\t@%p3 bra SEEN0;"
		print "\tld.relaxed.sys.global.u32 %q" k ", [%rd1];"
	}
	print "\tbra WAIT_GPU_FLAG0;"
	print "SEEN0:"
	skip = 3
	next
}
skip > 0 { skip--; next }
{ print }' > "$poll3"
grep -c "SEEN0" "$poll3"

echo "== pplat: poll flavour x flag locations, 3 interleaved rounds (median round trip us)"
bench=tests/bench
for round in 1 2 3; do
	for poll in relaxed acquire; do
		for args in "" "-k $poll3" "-C gpumem" "-G hostmem" "-s 64" "-m 1"; do
			# shellcheck disable=SC2086 # args is a word list
			med=$(taskset -c 2 "$bench/gdrcopy_pplat" -a gdr_alloc_mapped -t 10000 -P "$poll" $args 2>&1 |
				sed -n 's/.*(min) \([^,]*\), (median) \([^ ]*\) us.*/min \1 median \2/p; /ERROR/p')
			echo "round $round poll $poll args '${args}': $med"
		done
	done
done
