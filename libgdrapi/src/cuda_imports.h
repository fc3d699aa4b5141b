/* SPDX-License-Identifier: MIT */
/*
 * Every CUDA driver entry point libgdrapi calls, in one place.
 *
 * libcuda.so.1 is dlopen()ed by the dma-buf and vulkan backends, never
 * linked.  Each backend first dlsym()s a few bootstrap symbols, then asks
 * cuGetProcAddress for each function by its base name at one CUDA version;
 * the driver answers with the variant a program built with that version's
 * cuda.h would link to (cuMemFree at 12000 is cuMemFree_v2).  The second
 * column names that variant: the exported symbol whose signature our
 * function pointer describes, and what dlsym() falls back to where
 * cuGetProcAddress is missing (drivers before CUDA 11.3).
 *
 * tools/print_cuda_imports.c prints these lists, and
 * tests/python/test_real_libcuda.py checks them against NVIDIA's real
 * libcuda.so.1 (Debian's 535 and 550 driver packages): every symbol must be
 * exported, and the real cuGetProcAddress must return exactly that symbol.
 *
 *   X(name passed to cuGetProcAddress, exported symbol, (parameters))
 *
 * Every function returns CUresult.  The parameter lists name types the
 * including file defines (the lists are only expanded where they are used).
 */
#ifndef GDR_CUDA_IMPORTS_H
#define GDR_CUDA_IMPORTS_H

/* The CUDA versions each backend passes to cuGetProcAddress. */
#define GDR_CUDA_DMABUF_PROC_VERSION 13030	/* CUDA 13.3: the first whose dma-buf fds mmap */
#define GDR_CUDA_VULKAN_PROC_VERSION 12000

/* Found with dlsym() by the dma-buf backend, in this order. */
#define GDR_CUDA_DMABUF_DLSYM(X) \
	X(cuDriverGetVersion)     \
	X(cuGetProcAddress_v2)    \
	X(cuGetProcAddress)

#define GDR_CUDA_DMABUF_PROCS(X)                                                                         \
	X(cuGetErrorString, cuGetErrorString, (CUresult err, const char **str))                          \
	X(cuGetErrorName, cuGetErrorName, (CUresult err, const char **str))                              \
	X(cuInit, cuInit, (unsigned int flags))                                                          \
	X(cuDeviceGet, cuDeviceGet, (CUdevice *dev, int ordinal))                                        \
	X(cuDeviceGetCount, cuDeviceGetCount, (int *count))                                              \
	X(cuDeviceGetAttribute, cuDeviceGetAttribute, (int *value, int attr, CUdevice dev))              \
	X(cuMemGetHandleForAddressRange, cuMemGetHandleForAddressRange,                                  \
	  (void *handle, CUdeviceptr ptr, size_t size, int type, unsigned long long flags))              \
	X(cuCtxGetCurrent, cuCtxGetCurrent, (CUcontext *ctx))                                            \
	X(cuCtxSetCurrent, cuCtxSetCurrent, (CUcontext ctx))                                             \
	X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, (CUcontext *ctx, CUdevice dev))            \
	X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, (CUdevice dev))                       \
	X(cuPointerGetAttribute, cuPointerGetAttribute, (void *data, int attr, CUdeviceptr ptr))

/* Found with dlsym() by the vulkan backend. */
#define GDR_CUDA_VULKAN_DLSYM(X) \
	X(cuGetProcAddress_v2)

#define GDR_CUDA_VULKAN_PROCS(X)                                                                         \
	X(cuGetErrorString, cuGetErrorString, (CUresult err, const char **str))                          \
	X(cuGetErrorName, cuGetErrorName, (CUresult err, const char **str))                              \
	X(cuDriverGetVersion, cuDriverGetVersion, (int *version))                                        \
	X(cuInit, cuInit, (unsigned int flags))                                                          \
	X(cuDeviceGetCount, cuDeviceGetCount, (int *count))                                              \
	X(cuDeviceGet, cuDeviceGet, (CUdevice *dev, int ordinal))                                        \
	X(cuDeviceGetUuid, cuDeviceGetUuid_v2, (unsigned char uuid[16], CUdevice dev))                   \
	X(cuCtxGetCurrent, cuCtxGetCurrent, (CUcontext *ctx))                                            \
	X(cuCtxSetCurrent, cuCtxSetCurrent, (CUcontext ctx))                                             \
	X(cuCtxGetDevice, cuCtxGetDevice, (CUdevice *dev))                                               \
	X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, (CUcontext *ctx, CUdevice dev))            \
	X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, (CUdevice dev))                       \
	X(cuImportExternalMemory, cuImportExternalMemory,                                                \
	  (CUexternalMemory *mem, const struct cuda_external_memory_handle_desc *desc))                  \
	X(cuExternalMemoryGetMappedBuffer, cuExternalMemoryGetMappedBuffer,                              \
	  (CUdeviceptr *ptr, CUexternalMemory mem, const struct cuda_external_memory_buffer_desc *desc)) \
	X(cuDestroyExternalMemory, cuDestroyExternalMemory, (CUexternalMemory mem))                      \
	X(cuMemFree, cuMemFree_v2, (CUdeviceptr ptr))

#endif /* GDR_CUDA_IMPORTS_H */
