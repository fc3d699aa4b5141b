/* SPDX-License-Identifier: MIT */
/*
 * The persistent ping-pong kernel of gdrcopy_pplat, as PTX text that the
 * CUDA driver JIT-compiles at cuModuleLoadData time, so building pplat
 * needs no nvcc.  The protocol is described in pplat_protocol.h.
 *
 * PTX ISA 8.0 (CUDA 12.0 drivers and later), target sm_80: runs on Ampere,
 * Hopper (H100/H200) and newer.  sm_70 is the least it needs (.acquire,
 * .release and .relaxed memory operations, per-thread bar.sync); sm_80 is
 * named because CUDA 13's compiler no longer accepts Volta targets.
 *
 * Registers:
 *   %rd1 gpu_flag    %rd2 cpu_flag    %rd3 data      (global addresses)
 *   %rd4 arrive      %rd5 errors      %rd6 timestamps
 *   %rd7 %globaltimer value   %rd8 byte offset   %rd9 element address
 *   %r1 data_words   %r2 iters        %r3 mode       %r4 bucket_iters
 *   %r5 %tid.x       %r6 %ntid.x      %r7 %ctaid.x   %r8 %nctaid.x (B)
 *   %r9 global thread index           %r10 threads in the grid
 *   %r11 wrong words seen by this thread
 *   %r12 loaded value / atomic result %r13 i + 1 or B - 1
 *   %r14 constant 1   %r15 i   %r17 word index w
 *   %r18 expected/produced word, or arrive target   %r19 scratch
 *   %p1 thread 0 of its block (the leader)   %p2 block 0
 *   %p3 branch conditions   %p4 mode 1
 */
#ifndef GDRCOPY_PPLAT_KERNEL_PTX_H
#define GDRCOPY_PPLAT_KERNEL_PTX_H

/*
 * How the GPU polls the flag the CPU writes is chosen at load time (pplat -P):
 * pplat.c replaces PPLAT_POLL_MARK with the load instruction and
 * PPLAT_FENCE_MARK (a line of its own, after each poll loop) with what must
 * follow it.
 *   acquire: every poll is ld.acquire.sys; nothing follows.
 *   relaxed: polls are ld.relaxed.sys; once the flag is seen, one
 *            fence.acq_rel.sys, and only when there is data to order.
 */
#define PPLAT_POLL_MARK "@POLL@"
#define PPLAT_FENCE_MARK "@FENCE@"

static const char pplat_kernel_ptx_template[] =
	".version 8.0\n"
	".target sm_80\n"
	".address_size 64\n"
	"\n"
	".visible .entry gdrcopy_pplat_kernel(\n"
	"	.param .u64 p_gpu_flag,\n"
	"	.param .u64 p_cpu_flag,\n"
	"	.param .u64 p_data,\n"
	"	.param .u64 p_arrive,\n"
	"	.param .u64 p_errors,\n"
	"	.param .u64 p_timestamps,\n"
	"	.param .u32 p_data_words,\n"
	"	.param .u32 p_iters,\n"
	"	.param .u32 p_mode,\n"
	"	.param .u32 p_bucket_iters\n"
	")\n"
	"{\n"
	"	.reg .pred %p<7>;\n"
	"	.reg .b32 %r<20>;\n"
	"	.reg .b64 %rd<10>;\n"
	"\n"
	"	ld.param.u64 %rd1, [p_gpu_flag];\n"
	"	ld.param.u64 %rd2, [p_cpu_flag];\n"
	"	ld.param.u64 %rd3, [p_data];\n"
	"	ld.param.u64 %rd4, [p_arrive];\n"
	"	ld.param.u64 %rd5, [p_errors];\n"
	"	ld.param.u64 %rd6, [p_timestamps];\n"
	"	ld.param.u32 %r1, [p_data_words];\n"
	"	ld.param.u32 %r2, [p_iters];\n"
	"	ld.param.u32 %r3, [p_mode];\n"
	"	ld.param.u32 %r4, [p_bucket_iters];\n"
	/* Host-mapped and device memory both live in the global window. */
	"	cvta.to.global.u64 %rd1, %rd1;\n"
	"	cvta.to.global.u64 %rd2, %rd2;\n"
	"	cvta.to.global.u64 %rd3, %rd3;\n"
	"	cvta.to.global.u64 %rd4, %rd4;\n"
	"	cvta.to.global.u64 %rd5, %rd5;\n"
	"	cvta.to.global.u64 %rd6, %rd6;\n"
	"\n"
	"	mov.u32 %r5, %tid.x;\n"
	"	mov.u32 %r6, %ntid.x;\n"
	"	mov.u32 %r7, %ctaid.x;\n"
	"	mov.u32 %r8, %nctaid.x;\n"
	"	mad.lo.u32 %r9, %r7, %r6, %r5;\n"
	"	mul.lo.u32 %r10, %r8, %r6;\n"
	"	mov.u32 %r11, 0;\n"
	"	mov.u32 %r14, 1;\n"
	"	setp.eq.u32 %p1, %r5, 0;\n"
	"	setp.eq.u32 %p2, %r7, 0;\n"
	"	setp.ne.u32 %p4, %r3, 0;\n"
	/*
	 * %p0: flags only, mode 0, one thread in all (pplat's default): the
	 * answer goes out as soon as the flag is seen, without the two
	 * bar.syncs and the consume loop between (about 0.1 us of the round
	 * trip against a bare 8-byte ping-pong on an H200).
	 */
	"	setp.eq.u32 %p0, %r10, 1;\n"
	"	setp.eq.and.u32 %p0, %r1, 0, %p0;\n"
	"	setp.eq.and.u32 %p0, %r3, 0, %p0;\n"
	"\n"
	/* Phase 0: the last leader to arrive raises cpu_flag = 1. */
	"	@!%p1 bra READY_DONE;\n"
	"	atom.global.add.u32 %r12, [%rd4], 1;\n"
	"	sub.u32 %r13, %r8, 1;\n"
	"	setp.ne.u32 %p3, %r12, %r13;\n"
	"	@%p3 bra READY_WAIT;\n"
	"	st.release.sys.global.u32 [%rd2], %r14;\n"
	"READY_WAIT:\n"
	/* Every block resident before any timing starts. */
	"	ld.relaxed.gpu.global.u32 %r12, [%rd4];\n"
	"	setp.lt.u32 %p3, %r12, %r8;\n"
	"	@%p3 bra READY_WAIT;\n"
	"	@!%p2 bra READY_DONE;\n"
	"	mov.u64 %rd7, %globaltimer;\n"
	"	st.global.u64 [%rd6], %rd7;\n"
	"READY_DONE:\n"
	"	bar.sync 0;\n"
	"	mov.u32 %r15, 1;\n"
	"\n"
	"LOOP:\n"
	"	setp.gt.u32 %p3, %r15, %r2;\n"
	"	@%p3 bra DONE;\n"
	"	add.u32 %r13, %r15, 1;\n"
	/* Arrive target of iteration i: (i + 1) * B - 1 before the last add. */
	"	mul.lo.u32 %r18, %r13, %r8;\n"
	"	sub.u32 %r18, %r18, 1;\n"
	"	@%p4 bra PRODUCE;\n"
	"\n"
	/* Mode 0: wait for the CPU's flag, then read and check the data. */
	"	@!%p1 bra CONSUME_START;\n"
	"WAIT_GPU_FLAG0:\n"
	"	" PPLAT_POLL_MARK " %r12, [%rd1];\n"
	"	setp.ne.u32 %p3, %r12, %r15;\n"
	"	@%p3 bra WAIT_GPU_FLAG0;\n"
	PPLAT_FENCE_MARK "\n"
	"	@%p0 st.relaxed.sys.global.u32 [%rd2], %r13;\n"
	"	@%p0 bra NEXT;\n"
	"CONSUME_START:\n"
	"	bar.sync 0;\n"
	"	mov.u32 %r17, %r9;\n"
	"CONSUME_LOOP:\n"
	"	setp.ge.u32 %p3, %r17, %r1;\n"
	"	@%p3 bra CONSUME_DONE;\n"
	"	mul.wide.u32 %rd8, %r17, 4;\n"
	"	add.s64 %rd9, %rd3, %rd8;\n"
	/* .relaxed.sys: never served from a stale L1 line. */
	"	ld.relaxed.sys.global.u32 %r12, [%rd9];\n"
	"	shl.b32 %r19, %r17, 16;\n"
	"	add.u32 %r19, %r19, %r15;\n"
	"	setp.ne.u32 %p3, %r12, %r19;\n"
	"	selp.u32 %r19, 1, 0, %p3;\n"
	"	add.u32 %r11, %r11, %r19;\n"
	"	add.u32 %r17, %r17, %r10;\n"
	"	bra CONSUME_LOOP;\n"
	"CONSUME_DONE:\n"
	"	bar.sync 0;\n"
	"	@!%p1 bra NEXT;\n"
	/*
	 * One block: bar.sync already joined every thread, so no arrive counter
	 * and no system-wide fence are needed before answering -- each
	 * membar.sys costs about a microsecond.  Flag only: nothing to order,
	 * a relaxed store suffices; with data, the release store orders the
	 * block's reads before the answer.
	 */
	"	setp.eq.u32 %p5, %r8, 1;\n"
	"	@!%p5 bra CONSUME_ARRIVE;\n"
	"	setp.eq.u32 %p6, %r1, 0;\n"
	"	@%p6 st.relaxed.sys.global.u32 [%rd2], %r13;\n"
	"	@!%p6 st.release.sys.global.u32 [%rd2], %r13;\n"
	"	bra NEXT;\n"
	"CONSUME_ARRIVE:\n"
	"	membar.sys;\n"
	"	atom.global.add.u32 %r12, [%rd4], 1;\n"
	"	setp.ne.u32 %p3, %r12, %r18;\n"
	"	@%p3 bra NEXT;\n"
	"	membar.sys;\n"
	"	st.release.sys.global.u32 [%rd2], %r13;\n"
	"	bra NEXT;\n"
	"\n"
	/* Mode 1: write the data, raise cpu_flag, wait for the CPU's flag. */
	"PRODUCE:\n"
	"	mov.u32 %r17, %r9;\n"
	"PRODUCE_LOOP:\n"
	"	setp.ge.u32 %p3, %r17, %r1;\n"
	"	@%p3 bra PRODUCE_DONE;\n"
	"	mul.wide.u32 %rd8, %r17, 4;\n"
	"	add.s64 %rd9, %rd3, %rd8;\n"
	"	shl.b32 %r19, %r17, 16;\n"
	"	add.u32 %r19, %r19, %r15;\n"
	"	st.relaxed.sys.global.u32 [%rd9], %r19;\n"
	"	add.u32 %r17, %r17, %r10;\n"
	"	bra PRODUCE_LOOP;\n"
	"PRODUCE_DONE:\n"
	"	bar.sync 0;\n"
	"	@!%p1 bra PRODUCE_SYNC;\n"
	/* One block: as in mode 0, one store answers (release when there is data). */
	"	setp.eq.u32 %p5, %r8, 1;\n"
	"	@!%p5 bra PRODUCE_ARRIVE;\n"
	"	setp.eq.u32 %p6, %r1, 0;\n"
	"	@%p6 st.relaxed.sys.global.u32 [%rd2], %r13;\n"
	"	@!%p6 st.release.sys.global.u32 [%rd2], %r13;\n"
	"	bra WAIT_GPU_FLAG1;\n"
	"PRODUCE_ARRIVE:\n"
	/* Makes this block's data (ordered by bar.sync) visible system-wide first. */
	"	membar.sys;\n"
	"	atom.global.add.u32 %r12, [%rd4], 1;\n"
	"	setp.ne.u32 %p3, %r12, %r18;\n"
	"	@%p3 bra WAIT_GPU_FLAG1;\n"
	"	membar.sys;\n"
	"	st.release.sys.global.u32 [%rd2], %r13;\n"
	"WAIT_GPU_FLAG1:\n"
	"	" PPLAT_POLL_MARK " %r12, [%rd1];\n"
	"	setp.ne.u32 %p3, %r12, %r15;\n"
	"	@%p3 bra WAIT_GPU_FLAG1;\n"
	PPLAT_FENCE_MARK "\n"
	"	@!%p2 bra PRODUCE_SYNC;\n"
	"	rem.u32 %r19, %r15, %r4;\n"
	"	setp.ne.u32 %p3, %r19, 0;\n"
	"	@%p3 bra PRODUCE_SYNC;\n"
	"	div.u32 %r19, %r15, %r4;\n"
	"	mul.wide.u32 %rd8, %r19, 8;\n"
	"	add.s64 %rd9, %rd6, %rd8;\n"
	"	mov.u64 %rd7, %globaltimer;\n"
	"	st.global.u64 [%rd9], %rd7;\n"
	"PRODUCE_SYNC:\n"
	"	bar.sync 0;\n"
	"\n"
	"NEXT:\n"
	"	add.u32 %r15, %r15, 1;\n"
	"	bra LOOP;\n"
	"\n"
	"DONE:\n"
	"	setp.eq.u32 %p3, %r11, 0;\n"
	"	@%p3 bra EXIT;\n"
	"	red.global.add.u32 [%rd5], %r11;\n"
	"EXIT:\n"
	"	ret;\n"
	"}\n";

#endif /* GDRCOPY_PPLAT_KERNEL_PTX_H */
