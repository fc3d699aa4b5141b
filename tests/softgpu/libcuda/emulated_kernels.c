// SPDX-License-Identifier: MIT
/*
 * GPU kernels softgpu "runs" by emulating them on a host thread (see
 * emulated_kernels.h).  Each emulation follows the protocol of the PTX it
 * stands for, touching GPU memory only through the softgpu_gpu_*() helpers,
 * so the CPU side of a program is exercised exactly as on a GPU.
 */
#include <sched.h>
#include <stdlib.h>

#include "emulated_kernels.h"
#include "../../bench/pplat_protocol.h"

/* Poll a 32-bit GPU word until it holds want; yield so the CPU side can run. */
static int wait_for_word(CUdeviceptr addr, uint32_t want)
{
	uint32_t value;
	int ret;

	for (;;) {
		ret = softgpu_gpu_load32(addr, &value);
		if (ret)
			return ret;
		if (value == want)
			return CUDA_SUCCESS;
		sched_yield();
	}
}

/*
 * gdrcopy_pplat_kernel (tests/bench/pplat_kernel_ptx.h, protocol in
 * tests/bench/pplat_protocol.h).  One thread plays every block and thread
 * of the grid: the block leaders' arrivals collapse into one step per
 * phase, and the data words all threads share are read or written at once.
 */
static int pplat_kernel(void **params, const void *launch_config_or_null)
{
	const struct softgpu_launch_config *cfg = launch_config_or_null;
	struct pplat_kernel_args a;
	uint32_t *words = NULL;
	uint32_t blocks = 1, arrive = 0, errors = 0, iter, w;
	size_t data_bytes;
	int ret;

	a.gpu_flag = *(CUdeviceptr *)params[0];
	a.cpu_flag = *(CUdeviceptr *)params[1];
	a.data = *(CUdeviceptr *)params[2];
	a.arrive = *(CUdeviceptr *)params[3];
	a.errors = *(CUdeviceptr *)params[4];
	a.timestamps = *(CUdeviceptr *)params[5];
	a.data_words = *(uint32_t *)params[6];
	a.iters = *(uint32_t *)params[7];
	a.mode = *(uint32_t *)params[8];
	a.bucket_iters = *(uint32_t *)params[9];
	if (cfg)
		blocks = cfg->grid_dim[0];
	/* The PTX divides by bucket_iters in mode 1; a GPU would compute garbage. */
	if (a.mode == PPLAT_MODE_GPU_PRODUCES && !a.bucket_iters)
		return CUDA_ERROR_LAUNCH_FAILED;

	data_bytes = (size_t)a.data_words * sizeof(uint32_t);
	if (a.data_words) {
		words = malloc(data_bytes);
		if (!words)
			return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
	}

	/* Phase 0: all blocks arrive; the last raises cpu_flag = 1; block 0 starts the clock. */
	arrive += blocks;
	ret = softgpu_gpu_store32(a.arrive, arrive);
	if (!ret)
		ret = softgpu_gpu_store32(a.cpu_flag, 1);
	if (!ret)
		ret = softgpu_gpu_store64(a.timestamps, softgpu_globaltimer_ns());

	for (iter = 1; !ret && iter <= a.iters; iter++) {
		if (a.mode == PPLAT_MODE_CPU_PRODUCES) {
			ret = wait_for_word(a.gpu_flag, iter);
			if (ret)
				break;
			if (a.data_words) {
				ret = softgpu_gpu_read(a.data, words, data_bytes);
				if (ret)
					break;
				for (w = 0; w < a.data_words; w++)
					errors += words[w] != pplat_data_word(iter, w);
			}
			arrive += blocks;
			ret = softgpu_gpu_store32(a.arrive, arrive);
			if (!ret)
				ret = softgpu_gpu_store32(a.cpu_flag, iter + 1);
		} else {
			if (a.data_words) {
				for (w = 0; w < a.data_words; w++)
					words[w] = pplat_data_word(iter, w);
				ret = softgpu_gpu_write(a.data, words, data_bytes);
				if (ret)
					break;
			}
			arrive += blocks;
			ret = softgpu_gpu_store32(a.arrive, arrive);
			if (!ret)
				ret = softgpu_gpu_store32(a.cpu_flag, iter + 1);
			if (!ret)
				ret = wait_for_word(a.gpu_flag, iter);
			if (!ret && iter % a.bucket_iters == 0)
				ret = softgpu_gpu_store64(a.timestamps +
							  (iter / a.bucket_iters) * sizeof(uint64_t),
							  softgpu_globaltimer_ns());
		}
	}

	if (!ret && errors) {
		uint32_t total;

		ret = softgpu_gpu_load32(a.errors, &total);
		if (!ret)
			ret = softgpu_gpu_store32(a.errors, total + errors);
	}
	free(words);
	return ret;
}

/*
 * gdrcopy_pplat_line_responder (tests/bench/pplat_line_ptx.h, protocol in
 * pplat_protocol.h): wait for the sequence number to change, store it into
 * the line's first words words, until PPLAT_LINE_STOP_SEQ.  The line is one
 * softgpu copy, not one store: a CPU poll may see it half-written (it then
 * polls again, as pplat does), so torn figures under softgpu mean nothing.
 */
static int pplat_line_responder(void **params, const void *launch_config_or_null)
{
	CUdeviceptr seq_addr = *(CUdeviceptr *)params[0], line = *(CUdeviceptr *)params[1];
	uint32_t words = *(uint32_t *)params[2], last = 0, seq, line_words[PPLAT_LINE_MAX / 4], w;
	int ret;

	(void)launch_config_or_null;
	if (words > PPLAT_LINE_MAX / 4)
		return CUDA_ERROR_LAUNCH_FAILED;	/* a GPU would write past the line */
	for (;;) {
		ret = softgpu_gpu_load32(seq_addr, &seq);
		if (ret)
			return ret;
		if (seq == last) {
			sched_yield();
			continue;
		}
		if (seq == PPLAT_LINE_STOP_SEQ)
			return CUDA_SUCCESS;
		for (w = 0; w < words; w++)
			line_words[w] = seq;
		ret = softgpu_gpu_write(line, line_words, words * sizeof(uint32_t));
		if (ret)
			return ret;
		last = seq;
	}
}

/* gdrcopy_pplat_line_writer: 1, 2, ... into the line every period_ns until stop; then the count. */
static int pplat_line_writer(void **params, const void *launch_config_or_null)
{
	CUdeviceptr stop_addr = *(CUdeviceptr *)params[0], line = *(CUdeviceptr *)params[1];
	uint32_t words = *(uint32_t *)params[2], stop = 0, value = 0, line_words[PPLAT_LINE_MAX / 4], w;
	uint64_t period = *(uint64_t *)params[3], next = softgpu_globaltimer_ns();
	CUdeviceptr writes = *(CUdeviceptr *)params[4];
	int ret;

	(void)launch_config_or_null;
	if (words > PPLAT_LINE_MAX / 4)
		return CUDA_ERROR_LAUNCH_FAILED;
	for (;;) {
		ret = softgpu_gpu_load32(stop_addr, &stop);
		if (ret)
			return ret;
		if (stop)
			break;
		while (softgpu_globaltimer_ns() < next)
			sched_yield();
		next += period;
		value++;
		for (w = 0; w < words; w++)
			line_words[w] = value;
		ret = softgpu_gpu_write(line, line_words, words * sizeof(uint32_t));
		if (ret)
			return ret;
	}
	return softgpu_gpu_store64(writes, value);
}

/* probe_nop (tools/probe-contextless.c): an empty kernel, so the probe's launches run here too. */
static int probe_nop(void **params, const void *launch_config_or_null)
{
	(void)params;
	(void)launch_config_or_null;
	return CUDA_SUCCESS;
}

const struct softgpu_emulated_kernel softgpu_emulated_kernels[] = {
	{ PPLAT_KERNEL_NAME, pplat_kernel },
	{ PPLAT_LINE_RESPONDER_NAME, pplat_line_responder },
	{ PPLAT_LINE_WRITER_NAME, pplat_line_writer },
	{ "probe_nop", probe_nop },
	{ NULL, NULL },
};

