/* SPDX-License-Identifier: MIT */
/*
 * The kernels of gdrcopy_pplat's line modes (-L, -W: pplat_line.c), as PTX
 * text JIT-compiled by the driver like pplat_kernel_ptx.h's, so no nvcc is
 * needed.  Each runs as one warp (1 block x 32 threads); lane k owns word k
 * of the line, so a line of 16..128 B is written by one warp-wide store.
 *
 * The protocol, names and offsets are in pplat_protocol.h (softgpu's
 * emulation follows them too).
 *
 * gdrcopy_pplat_line_responder(seq, line, words): lane 0 polls the 32-bit
 *   sequence number the CPU writes at seq until it changes, the warp shares
 *   it (shfl), lane k stores it into words k, k + 32, ... below words of the
 *   line (one warp-wide store per 128 bytes), then membar.sys; 0xffffffff
 *   ends the kernel (nothing is written for it).
 * gdrcopy_pplat_line_writer(stop, line, words, period_ns, writes): every
 *   period_ns of %globaltimer, the warp stores the next value of a counter
 *   (1, 2, ...) into the line's words as above, then membar.sys, until lane 0
 *   reads a non-zero stop word; lane 0 then stores the number of writes (u64)
 *   at writes.
 *
 * Registers (both):
 *   %rd1 seq / stop   %rd2 line   %rd3 writes   %rd4 this lane's word
 *   %rd5 period_ns    %rd6 next write time      %rd7 %globaltimer   %rd8 scratch
 *   %rd9 the word being stored
 *   %r1 words   %r2 %tid.x   %r3 last value (responder) / counter (writer)
 *   %r4 loaded value   %r5 value shared by lane 0   %r6 index of the word being stored
 *   %p2 lane 0   %p3 branch conditions
 */
#ifndef GDRCOPY_PPLAT_LINE_PTX_H
#define GDRCOPY_PPLAT_LINE_PTX_H

#include "pplat_protocol.h"

static const char pplat_line_ptx[] =
	".version 8.0\n"
	".target sm_80\n"
	".address_size 64\n"
	"\n"
	".visible .entry gdrcopy_pplat_line_responder(\n"
	"	.param .u64 p_seq,\n"
	"	.param .u64 p_line,\n"
	"	.param .u32 p_words\n"
	")\n"
	"{\n"
	"	.reg .pred %p<4>;\n"
	"	.reg .b32 %r<7>;\n"
	"	.reg .b64 %rd<10>;\n"
	"\n"
	"	ld.param.u64 %rd1, [p_seq];\n"
	"	ld.param.u64 %rd2, [p_line];\n"
	"	ld.param.u32 %r1, [p_words];\n"
	"	cvta.to.global.u64 %rd1, %rd1;\n"
	"	cvta.to.global.u64 %rd2, %rd2;\n"
	"	mov.u32 %r2, %tid.x;\n"
		"	setp.eq.u32 %p2, %r2, 0;\n"
	"	mul.wide.u32 %rd8, %r2, 4;\n"
	"	add.s64 %rd4, %rd2, %rd8;\n"
	"	mov.u32 %r3, 0;\n"
	"	mov.u32 %r4, 0;\n"
	"RESPOND:\n"
	"	@!%p2 bra SHARE;\n"
	"POLL:\n"
	"	ld.volatile.global.u32 %r4, [%rd1];\n"
	"	setp.eq.u32 %p3, %r4, %r3;\n"
	"	@%p3 bra POLL;\n"
	"SHARE:\n"
	"	shfl.sync.idx.b32 %r5, %r4, 0, 31, -1;\n"
	"	setp.eq.u32 %p3, %r5, -1;\n"
	"	@%p3 bra RESPONDER_DONE;\n"
	"	mov.u32 %r6, %r2;\n"
	"	mov.u64 %rd9, %rd4;\n"
	"ANSWER:\n"
	"	setp.ge.u32 %p3, %r6, %r1;\n"
	"	@%p3 bra ANSWERED;\n"
	"	st.volatile.global.u32 [%rd9], %r5;\n"
	"	add.u32 %r6, %r6, 32;\n"
	"	add.s64 %rd9, %rd9, 128;\n"
	"	bra ANSWER;\n"
	"ANSWERED:\n"
	"	bar.warp.sync -1;\n"
	"	membar.sys;\n"
	"	mov.u32 %r3, %r5;\n"
	"	bra RESPOND;\n"
	"RESPONDER_DONE:\n"
	"	ret;\n"
	"}\n"
	"\n"
	".visible .entry gdrcopy_pplat_line_writer(\n"
	"	.param .u64 p_stop,\n"
	"	.param .u64 p_line,\n"
	"	.param .u32 p_words,\n"
	"	.param .u64 p_period_ns,\n"
	"	.param .u64 p_writes\n"
	")\n"
	"{\n"
	"	.reg .pred %p<4>;\n"
	"	.reg .b32 %r<7>;\n"
	"	.reg .b64 %rd<10>;\n"
	"\n"
	"	ld.param.u64 %rd1, [p_stop];\n"
	"	ld.param.u64 %rd2, [p_line];\n"
	"	ld.param.u32 %r1, [p_words];\n"
	"	ld.param.u64 %rd5, [p_period_ns];\n"
	"	ld.param.u64 %rd3, [p_writes];\n"
	"	cvta.to.global.u64 %rd1, %rd1;\n"
	"	cvta.to.global.u64 %rd2, %rd2;\n"
	"	cvta.to.global.u64 %rd3, %rd3;\n"
	"	mov.u32 %r2, %tid.x;\n"
		"	setp.eq.u32 %p2, %r2, 0;\n"
	"	mul.wide.u32 %rd8, %r2, 4;\n"
	"	add.s64 %rd4, %rd2, %rd8;\n"
	"	mov.u32 %r3, 0;\n"
	"	mov.u32 %r4, 0;\n"
	"	mov.u64 %rd6, %globaltimer;\n"
	"WRITE:\n"
	"	@%p2 ld.volatile.global.u32 %r4, [%rd1];\n"
	"	shfl.sync.idx.b32 %r5, %r4, 0, 31, -1;\n"
	"	setp.ne.u32 %p3, %r5, 0;\n"
	"	@%p3 bra WRITER_DONE;\n"
	"TICK:\n"
	"	mov.u64 %rd7, %globaltimer;\n"
	"	setp.lt.u64 %p3, %rd7, %rd6;\n"
	"	@%p3 bra TICK;\n"
	/* The lanes may have left the wait apart: one store of the warp. */
	"	bar.warp.sync -1;\n"
	"	add.u64 %rd6, %rd6, %rd5;\n"
	"	add.u32 %r3, %r3, 1;\n"
	"	mov.u32 %r6, %r2;\n"
	"	mov.u64 %rd9, %rd4;\n"
	"STORE:\n"
	"	setp.ge.u32 %p3, %r6, %r1;\n"
	"	@%p3 bra STORED;\n"
	"	st.volatile.global.u32 [%rd9], %r3;\n"
	"	add.u32 %r6, %r6, 32;\n"
	"	add.s64 %rd9, %rd9, 128;\n"
	"	bra STORE;\n"
	"STORED:\n"
	"	bar.warp.sync -1;\n"
	"	membar.sys;\n"
	"	bra WRITE;\n"
	"WRITER_DONE:\n"
	"	@!%p2 bra WRITER_EXIT;\n"
	"	cvt.u64.u32 %rd8, %r3;\n"
	"	st.global.u64 [%rd3], %rd8;\n"
	"WRITER_EXIT:\n"
	"	ret;\n"
	"}\n";

#endif /* GDRCOPY_PPLAT_LINE_PTX_H */
