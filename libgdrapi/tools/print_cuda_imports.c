/* SPDX-License-Identifier: MIT */
/*
 * Prints libgdrapi's CUDA driver imports (src/cuda_imports.h), one a line:
 *
 *   BACKEND dlsym SYMBOL
 *   BACKEND proc NAME VERSION SYMBOL
 *
 * `make -C libgdrapi print-cuda-imports`.  tests/python/test_real_libcuda.py
 * checks every line against NVIDIA's libcuda.so.1.
 */
#include <stdio.h>

#include "../src/cuda_imports.h"

int main(void)
{
#define DLSYM(backend, symbol) printf("%s dlsym %s\n", backend, #symbol);
#define DMABUF_DLSYM(symbol) DLSYM("dmabuf", symbol)
#define VULKAN_DLSYM(symbol) DLSYM("vulkan", symbol)
#define PROC(backend, version, name, symbol) printf("%s proc %s %d %s\n", backend, #name, version, #symbol);
#define DMABUF_PROC(name, symbol, params) PROC("dmabuf", GDR_CUDA_DMABUF_PROC_VERSION, name, symbol)
#define VULKAN_PROC(name, symbol, params) PROC("vulkan", GDR_CUDA_VULKAN_PROC_VERSION, name, symbol)
	GDR_CUDA_DMABUF_DLSYM(DMABUF_DLSYM)
	GDR_CUDA_DMABUF_PROCS(DMABUF_PROC)
	GDR_CUDA_VULKAN_DLSYM(VULKAN_DLSYM)
	GDR_CUDA_VULKAN_PROCS(VULKAN_PROC)
	return 0;
}
