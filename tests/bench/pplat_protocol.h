/* SPDX-License-Identifier: MIT */
/*
 * The ping-pong protocol between gdrcopy_pplat (CPU side) and its
 * persistent GPU kernel.  Shared by the PTX kernel (pplat_kernel_ptx.h),
 * the program (pplat.c) and softgpu's emulation of the kernel
 * (tests/softgpu/libcuda/emulated_kernels.c), so the three cannot drift.
 *
 * Objects (all 32-bit words unless noted):
 *   gpu_flag    the GPU polls it, the CPU writes the iteration number i
 *   cpu_flag    the CPU polls it, the GPU writes i + 1
 *   data        data_words words; word w of iteration i is pplat_data_word(i, w)
 *   arrive      GPU-internal counter: each block's leader adds 1 per phase
 *   errors      GPU-internal: data words the GPU read with a wrong value
 *   timestamps  u64[buckets + 1] of %globaltimer (ns), written by block 0
 * arrive, errors and timestamps must be zero before the launch; gpu_flag
 * and cpu_flag too.
 *
 * Kernel: PPLAT_KERNEL_NAME(gpu_flag, cpu_flag, data, arrive, errors,
 * timestamps: u64 device pointers; data_words, iters, mode, bucket_iters:
 * u32), launched with any number of blocks and threads (all blocks must be
 * resident at once: the kernel never returns until the CPU has driven it
 * through every iteration).
 *
 * Phase 0 (ready): every block's leader (thread 0) adds 1 to arrive; the
 * one that brings it to B (the number of blocks) stores cpu_flag = 1.
 * Leaders then wait until arrive >= B, and block 0 stores timestamps[0].
 * The CPU starts timing once cpu_flag != 0: in mode 1 the GPU goes straight
 * on to iteration 1 and may have raised cpu_flag to 2 before the CPU looks.
 *
 * Iterations i = 1 .. iters, mode 0 (CPU produces, GPU consumes):
 *   CPU: write data for i, then gpu_flag = i; wait for cpu_flag == i + 1.
 *   GPU: leaders wait for gpu_flag == i; all threads read and check their
 *        share of data (word w goes to global thread w mod B*T); each
 *        leader adds 1 to arrive, and the one that brings it to (i + 1) * B
 *        stores cpu_flag = i + 1.
 * Mode 1 (GPU produces, CPU consumes):
 *   GPU: all threads write their share of data for i; leaders add 1 to
 *        arrive, the last one stores cpu_flag = i + 1; leaders wait for
 *        gpu_flag == i; block 0 stores %globaltimer in
 *        timestamps[i / bucket_iters] when i is a multiple of bucket_iters.
 *   CPU: wait for cpu_flag == i + 1, read and check data, write gpu_flag = i.
 * The GPU finally adds its wrong-word count to errors.
 *
 * Stores that publish a flag are release stores at system scope, and flag
 * polls are acquire loads at system scope: the data written before a flag
 * is visible to whoever sees the flag.
 */
#ifndef GDRCOPY_PPLAT_PROTOCOL_H
#define GDRCOPY_PPLAT_PROTOCOL_H

#include <stdint.h>

#define PPLAT_KERNEL_NAME "gdrcopy_pplat_kernel"
#define PPLAT_KERNEL_PARAMS 10

#define PPLAT_MODE_CPU_PRODUCES 0
#define PPLAT_MODE_GPU_PRODUCES 1

/*
 * Layout of the GPU buffer and of the mapped host buffer: flags on their
 * own 256-byte lines so polling one never disturbs the other.
 */
#define PPLAT_GPU_FLAG_OFFSET 0
#define PPLAT_CPU_FLAG_OFFSET 256
#define PPLAT_ARRIVE_OFFSET 512
#define PPLAT_ERRORS_OFFSET 768
#define PPLAT_TIMESTAMPS_OFFSET 1024
#define PPLAT_MAX_BUCKETS 100	/* timestamps hold PPLAT_MAX_BUCKETS + 1 values */
#define PPLAT_DATA_OFFSET 4096

/* Word w of iteration i: changes every iteration, differs between words. */
static inline uint32_t pplat_data_word(uint32_t iter, uint32_t word)
{
	return (word << 16) + iter;
}

/* The kernel's parameters, in launch order (what cuLaunchKernel's kernelParams point to). */
struct pplat_kernel_args {
	uint64_t gpu_flag;
	uint64_t cpu_flag;
	uint64_t data;
	uint64_t arrive;
	uint64_t errors;
	uint64_t timestamps;
	uint32_t data_words;
	uint32_t iters;
	uint32_t mode;
	uint32_t bucket_iters;
};

/*
 * The line modes (pplat -L, -W; kernels in pplat_line_ptx.h), one warp each,
 * in a buffer of their own (GPU memory the CPU reaches through a mapping):
 *   seq     u32 at PPLAT_LINE_SEQ_OFFSET: the CPU writes 1, 2, ... (and
 *           PPLAT_LINE_STOP_SEQ to end the responder); the responder stores
 *           each new value into every word of the line's first words words.
 *   stop    u32 at PPLAT_LINE_STOP_OFFSET: non-zero ends the writer.
 *   writes  u64 at PPLAT_LINE_WRITES_OFFSET: how often the writer wrote.
 *   line    at PPLAT_LINE_OFFSET, up to PPLAT_LINE_MAX bytes, aligned to
 *           PPLAT_LINE_MAX; the writer stores 1, 2, ... into every word of
 *           the line's first words words, one value every period_ns.  The
 *           kernels' line argument may point into it (the answer in one
 *           64-byte line of a larger entry); lane k stores words k, k + 32,
 *           ... below words (at most PPLAT_LINE_MAX / 4).
 * Responder: (seq, line: u64; words: u32).  Writer: (stop, line: u64;
 * words: u32; period_ns: u64; writes: u64).
 */
#define PPLAT_LINE_RESPONDER_NAME "gdrcopy_pplat_line_responder"
#define PPLAT_LINE_WRITER_NAME "gdrcopy_pplat_line_writer"
#define PPLAT_LINE_STOP_SEQ 0xffffffffu
#define PPLAT_LINE_WARP 32
#define PPLAT_LINE_SEQ_OFFSET 0
#define PPLAT_LINE_STOP_OFFSET 64
#define PPLAT_LINE_WRITES_OFFSET 128
#define PPLAT_LINE_OFFSET 256
#define PPLAT_LINE_MAX 256

#endif /* GDRCOPY_PPLAT_PROTOCOL_H */
