/* SPDX-License-Identifier: MIT */
/*
 * Emulated GPU kernels for softgpu's libcuda.
 *
 * softgpu cannot run GPU code.  A program that needs a kernel (the pplat
 * benchmark's persistent ping-pong kernel) loads its PTX text with
 * cuModuleLoadData as usual; libcuda finds each `.entry NAME` in the text
 * and, at cuLaunchKernel, runs the C function registered under NAME in
 * softgpu_emulated_kernels[] on a host thread of its own.  That thread is
 * the GPU: it reaches GPU memory only through the softgpu_gpu_*() helpers
 * below (softgpu's COPY ioctls, or the memory itself for mapped host
 * allocations), never by dereferencing a CUdeviceptr.
 * cuStreamSynchronize / cuCtxSynchronize wait for the thread and return
 * what run() returned.
 *
 * To add a kernel: write `static int my_kernel(void **params, const void *cfg)`
 * and list `{ "my_kernel_ptx_entry_name", my_kernel }` in
 * softgpu_emulated_kernels[] (emulated_kernels.c), before the
 * { NULL, NULL } terminator.  C++ entries use their mangled name, exactly as
 * `.entry` spells it in the PTX.
 */
#ifndef SOFTGPU_EMULATED_KERNELS_H
#define SOFTGPU_EMULATED_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "cuda.h"

/* The launch parameters of cuLaunchKernel, passed to run() as its second argument. */
struct softgpu_launch_config {
	unsigned int grid_dim[3];
	unsigned int block_dim[3];
	unsigned int shared_mem_bytes;
	CUstream stream;
};

/**
 * struct softgpu_emulated_kernel - one kernel softgpu can "run".
 * @name: the PTX entry name.
 * @run:  the kernel.  @params holds one pointer per PTX parameter, in
 *        order, each to a private copy of the argument taken at launch (as
 *        on a GPU, the caller's argument storage may be gone by then).
 *        @launch_config_or_null points to a struct softgpu_launch_config
 *        (cuLaunchKernel always passes one).  It emulates the whole grid.
 *        Return CUDA_SUCCESS (0) or the CUresult the next synchronize
 *        reports, such as CUDA_ERROR_LAUNCH_FAILED or CUDA_ERROR_ILLEGAL_ADDRESS.
 */
struct softgpu_emulated_kernel {
	const char *name;
	int (*run)(void **params, const void *launch_config_or_null);
};

/* Defined in emulated_kernels.c; ends with { NULL, NULL }. */
extern const struct softgpu_emulated_kernel softgpu_emulated_kernels[];

/* The entry for a PTX entry name, or NULL. */
const struct softgpu_emulated_kernel *softgpu_find_emulated_kernel(const char *name);

/*
 * GPU-side memory access, for emulated kernels.  Each returns CUDA_SUCCESS
 * or CUDA_ERROR_ILLEGAL_ADDRESS (the address is neither GPU memory of this
 * process nor mapped host memory).  The 32/64-bit loads and stores are
 * single accesses with sequentially consistent ordering (system scope), for
 * flags shared with the CPU; the address must be naturally aligned.
 */
int softgpu_gpu_read(CUdeviceptr src, void *dst, size_t size);
int softgpu_gpu_write(CUdeviceptr dst, const void *src, size_t size);
int softgpu_gpu_load32(CUdeviceptr addr, uint32_t *value);
int softgpu_gpu_store32(CUdeviceptr addr, uint32_t value);
int softgpu_gpu_load64(CUdeviceptr addr, uint64_t *value);
int softgpu_gpu_store64(CUdeviceptr addr, uint64_t value);

/* %globaltimer: nanoseconds of a monotonic clock. */
uint64_t softgpu_globaltimer_ns(void);

#endif /* SOFTGPU_EMULATED_KERNELS_H */
