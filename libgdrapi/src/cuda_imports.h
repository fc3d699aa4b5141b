/* SPDX-License-Identifier: MIT */
/*
 * Every CUDA driver entry point libgdrapi calls, in one place.
 *
 * libcuda.so.1 is dlopen()ed once per process by the loader (cuda_loader.c)
 * for every backend that uses CUDA, never linked.  The loader first
 * dlsym()s a few bootstrap symbols, then asks cuGetProcAddress for each
 * function by its base name at GDR_CUDA_PROC_VERSION; the driver answers
 * with the variant a program built with that version's cuda.h would link
 * to (cuMemFree at 12000 is cuMemFree_v2).  The second column names that
 * variant: the exported symbol whose signature our function pointer
 * describes, and what dlsym() falls back to where cuGetProcAddress is
 * missing (drivers before CUDA 11.3).
 *
 * tools/print_cuda_imports.c prints these lists, and
 * tests/python/test_real_libcuda.py checks them against NVIDIA's real
 * libcuda.so.1 (Debian's 535 and 550 driver packages): every symbol must be
 * exported, and the real cuGetProcAddress must return exactly that symbol.
 *
 *   X(name passed to cuGetProcAddress, exported symbol, users, (parameters))
 *
 * users says who needs the entry point: LOADER ones every user of libcuda
 * needs (a driver without them is refused by all), the others only the
 * backend named, which is refused when one of its own is missing.
 *
 * Every function returns CUresult.  The parameter lists name types the
 * including file defines (the lists are only expanded where they are used).
 */
#ifndef GDR_CUDA_IMPORTS_H
#define GDR_CUDA_IMPORTS_H

/* The version passed to cuGetProcAddress: our signatures are those of CUDA 12.0's cuda.h. */
#define GDR_CUDA_PROC_VERSION 12000

#define GDR_CUDA_USER_LOADER 0x0u
#define GDR_CUDA_USER_DMABUF 0x1u
#define GDR_CUDA_USER_VULKAN 0x2u
/*
 * Optional for the vulkan backend: pinning memory CUDA allocated with
 * cuMemCreate.  Without them the backend still opens (gdr_alloc_mapped
 * works), so gdr_cuda_require() never asks for these; the backend checks.
 */
#define GDR_CUDA_USER_VMM 0x4u

/* Found with dlsym(), in this order. */
#define GDR_CUDA_DLSYM(X)      \
	X(cuDriverGetVersion)  \
	X(cuGetProcAddress_v2) \
	X(cuGetProcAddress)

#define GDR_CUDA_PROCS(X)                                                                                      \
	X(cuGetErrorString, cuGetErrorString, LOADER, (CUresult err, const char **str))                        \
	X(cuGetErrorName, cuGetErrorName, LOADER, (CUresult err, const char **str))                            \
	X(cuInit, cuInit, LOADER, (unsigned int flags))                                                        \
	X(cuDeviceGet, cuDeviceGet, LOADER, (CUdevice *dev, int ordinal))                                      \
	X(cuDeviceGetCount, cuDeviceGetCount, LOADER, (int *count))                                            \
	X(cuCtxGetCurrent, cuCtxGetCurrent, LOADER, (CUcontext *ctx))                                          \
	X(cuCtxSetCurrent, cuCtxSetCurrent, LOADER, (CUcontext ctx))                                           \
	X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, LOADER, (CUcontext *ctx, CUdevice dev))          \
	X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, LOADER, (CUdevice dev))                     \
	X(cuDeviceGetAttribute, cuDeviceGetAttribute, DMABUF, (int *value, int attr, CUdevice dev))            \
	X(cuMemGetHandleForAddressRange, cuMemGetHandleForAddressRange, DMABUF,                                \
	  (void *handle, CUdeviceptr ptr, size_t size, int type, unsigned long long flags))                    \
	X(cuPointerGetAttribute, cuPointerGetAttribute, DMABUF, (void *data, int attr, CUdeviceptr ptr))       \
	X(cuDeviceGetUuid, cuDeviceGetUuid_v2, VULKAN, (unsigned char uuid[16], CUdevice dev))                 \
	X(cuCtxGetDevice, cuCtxGetDevice, VULKAN, (CUdevice *dev))                                             \
	X(cuImportExternalMemory, cuImportExternalMemory, VULKAN,                                              \
	  (CUexternalMemory *mem, const struct cuda_external_memory_handle_desc *desc))                        \
	X(cuExternalMemoryGetMappedBuffer, cuExternalMemoryGetMappedBuffer, VULKAN,                            \
	  (CUdeviceptr *ptr, CUexternalMemory mem, const struct cuda_external_memory_buffer_desc *desc))       \
	X(cuDestroyExternalMemory, cuDestroyExternalMemory, VULKAN, (CUexternalMemory mem))                    \
	X(cuMemFree, cuMemFree_v2, VULKAN, (CUdeviceptr ptr))                                                  \
	X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, VMM,                                       \
	  (CUmemGenericAllocationHandle *handle, void *addr))                                                  \
	X(cuMemRelease, cuMemRelease, VMM, (CUmemGenericAllocationHandle handle))                              \
	X(cuMemGetAllocationPropertiesFromHandle, cuMemGetAllocationPropertiesFromHandle, VMM,                 \
	  (struct cuda_mem_allocation_prop *prop, CUmemGenericAllocationHandle handle))                        \
	X(cuMemExportToShareableHandle, cuMemExportToShareableHandle, VMM,                                     \
	  (void *shareable, CUmemGenericAllocationHandle handle, int type, unsigned long long flags))          \
	X(cuMemGetAddressRange, cuMemGetAddressRange_v2, VMM, (CUdeviceptr *base, size_t *size, CUdeviceptr ptr))

#endif /* GDR_CUDA_IMPORTS_H */
