/* SPDX-License-Identifier: MIT */
/*
 * Prints libgdrapi's CUDA driver imports (src/cuda_imports.h), one a line:
 *
 *   USER dlsym SYMBOL
 *   USER proc NAME VERSION SYMBOL
 *
 * USER is "loader" for what every backend that uses CUDA needs, else the
 * backend.  `make -C libgdrapi print-cuda-imports`.
 * tests/python/test_real_libcuda.py checks every line against NVIDIA's
 * libcuda.so.1.
 */
#include <stdio.h>

#include "../src/cuda_imports.h"

#define USER_NAME_LOADER "loader"
#define USER_NAME_DMABUF "dmabuf"
#define USER_NAME_VULKAN "vulkan"
#define USER_NAME_VMM "vulkan-vmm"

int main(void)
{
#define DLSYM(symbol) printf("loader dlsym %s\n", #symbol);
#define PROC(name, symbol, user, params) \
	printf("%s proc %s %d %s\n", USER_NAME_##user, #name, GDR_CUDA_PROC_VERSION, #symbol);
	GDR_CUDA_DLSYM(DLSYM)
	GDR_CUDA_PROCS(PROC)
	return 0;
}
