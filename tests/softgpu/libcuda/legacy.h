/* SPDX-License-Identifier: MIT */
/*
 * The entry points that cuda.h hides behind its versioned names: the
 * unversioned legacy symbols real libcuda still exports, and the variants
 * that older headers (CUDA 12) link to.  Included after cuda.h; it undoes
 * cuda.h's renaming so both spellings can be declared.
 */
#ifndef SOFTGPU_LIBCUDA_LEGACY_H
#define SOFTGPU_LIBCUDA_LEGACY_H

#include "cuda.h"

#undef cuDeviceTotalMem
#undef cuDeviceGetUuid
#undef cuCtxCreate
#undef cuCtxDestroy
#undef cuCtxPushCurrent
#undef cuCtxPopCurrent
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
#undef cuDevicePrimaryCtxSetFlags
#undef cuMemGetInfo
#undef cuMemAlloc
#undef cuMemFree
#undef cuMemGetAddressRange
#undef cuMemAllocHost
#undef cuMemHostGetDevicePointer
#undef cuMemcpyHtoD
#undef cuMemcpyDtoH
#undef cuMemcpyDtoD
#undef cuMemcpyHtoDAsync
#undef cuMemcpyDtoHAsync
#undef cuMemsetD8
#undef cuMemsetD16
#undef cuMemsetD32
#undef cuStreamDestroy
#undef cuGetProcAddress

/* Before CUDA 3.2, device pointers and sizes were 32-bit. */
typedef unsigned int sg_deviceptr_v1;

/* The unversioned (oldest) entry points. */
CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev);
CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxDestroy(CUcontext ctx);
CUresult cuCtxPushCurrent(CUcontext ctx);
CUresult cuCtxPopCurrent(CUcontext *pctx);
CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult cuDevicePrimaryCtxReset(CUdevice dev);
CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags);
CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total);
CUresult cuMemAlloc(sg_deviceptr_v1 *dptr, unsigned int bytesize);
CUresult cuMemFree(sg_deviceptr_v1 dptr);
CUresult cuMemGetAddressRange(sg_deviceptr_v1 *pbase, unsigned int *psize,
			      sg_deviceptr_v1 dptr);
CUresult cuMemAllocHost(void **pp, unsigned int bytesize);
CUresult cuMemHostGetDevicePointer(sg_deviceptr_v1 *pdptr, void *p, unsigned int Flags);
CUresult cuMemcpyHtoD(sg_deviceptr_v1 dstDevice, const void *srcHost, unsigned int ByteCount);
CUresult cuMemcpyDtoH(void *dstHost, sg_deviceptr_v1 srcDevice, unsigned int ByteCount);
CUresult cuMemcpyDtoD(sg_deviceptr_v1 dstDevice, sg_deviceptr_v1 srcDevice,
		      unsigned int ByteCount);
CUresult cuMemcpyHtoDAsync(sg_deviceptr_v1 dstDevice, const void *srcHost,
			   unsigned int ByteCount, CUstream hStream);
CUresult cuMemcpyDtoHAsync(void *dstHost, sg_deviceptr_v1 srcDevice, unsigned int ByteCount,
			   CUstream hStream);
CUresult cuMemsetD8(sg_deviceptr_v1 dstDevice, unsigned char uc, unsigned int N);
CUresult cuMemsetD16(sg_deviceptr_v1 dstDevice, unsigned short us, unsigned int N);
CUresult cuMemsetD32(sg_deviceptr_v1 dstDevice, unsigned int ui, unsigned int N);
CUresult cuStreamDestroy(CUstream hStream);
/* CUDA 11.3 .. 11.8: without the symbol status. */
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

#endif /* SOFTGPU_LIBCUDA_LEGACY_H */
