// SPDX-License-Identifier: MIT
/*
 * Unversioned legacy entry points, exported because real libcuda exports
 * them and old binaries or dlsym() users may call them.  Those whose
 * signature equals the current one forward to it.  Those that pass device
 * pointers as 32-bit values (CUDA < 3.2) cannot address softgpu memory, which
 * lies above 4 GiB, so they fail with CUDA_ERROR_NOT_SUPPORTED.
 */
#include <limits.h>

#include "internal.h"
#include "legacy.h"

static CUresult sg_legacy_32bit(const char *name)
{
	sg_debug("%s is the pre-CUDA-3.2 entry point with 32-bit device pointers; "
		 "rebuild the program against a current cuda.h (it links %s_v2)", name, name);
	return CUDA_ERROR_NOT_SUPPORTED;
}

static unsigned int sg_clamp32(size_t v)
{
	return v > UINT_MAX ? UINT_MAX : (unsigned int)v;
}

SG_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
	size_t total;
	CUresult rc;

	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	rc = cuDeviceTotalMem_v2(&total, dev);
	if (rc == CUDA_SUCCESS)
		*bytes = sg_clamp32(total);
	return rc;
}

SG_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	return cuDeviceGetUuid_v2(uuid, dev);
}

SG_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return cuCtxCreate_v2(pctx, flags, dev);
}

SG_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
	return cuCtxDestroy_v2(ctx);
}

SG_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx)
{
	return cuCtxPushCurrent_v2(ctx);
}

SG_EXPORT CUresult cuCtxPopCurrent(CUcontext *pctx)
{
	return cuCtxPopCurrent_v2(pctx);
}

SG_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	return cuDevicePrimaryCtxRelease_v2(dev);
}

SG_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
	return cuDevicePrimaryCtxReset_v2(dev);
}

SG_EXPORT CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
	return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

SG_EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total)
{
	size_t f, t;
	CUresult rc = cuMemGetInfo_v2(&f, &t);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (free_bytes)
		*free_bytes = sg_clamp32(f);
	if (total)
		*total = sg_clamp32(t);
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
	return cuMemAllocHost_v2(pp, bytesize);
}

SG_EXPORT CUresult cuStreamDestroy(CUstream hStream)
{
	return cuStreamDestroy_v2(hStream);
}

SG_EXPORT CUresult cuMemAlloc(sg_deviceptr_v1 *dptr, unsigned int bytesize)
{
	(void)dptr;
	(void)bytesize;
	return sg_legacy_32bit("cuMemAlloc");
}

SG_EXPORT CUresult cuMemFree(sg_deviceptr_v1 dptr)
{
	(void)dptr;
	return sg_legacy_32bit("cuMemFree");
}

SG_EXPORT CUresult cuMemGetAddressRange(sg_deviceptr_v1 *pbase, unsigned int *psize,
					sg_deviceptr_v1 dptr)
{
	(void)pbase;
	(void)psize;
	(void)dptr;
	return sg_legacy_32bit("cuMemGetAddressRange");
}

SG_EXPORT CUresult cuMemHostGetDevicePointer(sg_deviceptr_v1 *pdptr, void *p, unsigned int Flags)
{
	(void)pdptr;
	(void)p;
	(void)Flags;
	return sg_legacy_32bit("cuMemHostGetDevicePointer");
}

SG_EXPORT CUresult cuMemcpyHtoD(sg_deviceptr_v1 dstDevice, const void *srcHost,
				unsigned int ByteCount)
{
	(void)dstDevice;
	(void)srcHost;
	(void)ByteCount;
	return sg_legacy_32bit("cuMemcpyHtoD");
}

SG_EXPORT CUresult cuMemcpyDtoH(void *dstHost, sg_deviceptr_v1 srcDevice, unsigned int ByteCount)
{
	(void)dstHost;
	(void)srcDevice;
	(void)ByteCount;
	return sg_legacy_32bit("cuMemcpyDtoH");
}

SG_EXPORT CUresult cuMemcpyDtoD(sg_deviceptr_v1 dstDevice, sg_deviceptr_v1 srcDevice,
				unsigned int ByteCount)
{
	(void)dstDevice;
	(void)srcDevice;
	(void)ByteCount;
	return sg_legacy_32bit("cuMemcpyDtoD");
}

SG_EXPORT CUresult cuMemcpyHtoDAsync(sg_deviceptr_v1 dstDevice, const void *srcHost,
				     unsigned int ByteCount, CUstream hStream)
{
	(void)dstDevice;
	(void)srcHost;
	(void)ByteCount;
	(void)hStream;
	return sg_legacy_32bit("cuMemcpyHtoDAsync");
}

SG_EXPORT CUresult cuMemcpyDtoHAsync(void *dstHost, sg_deviceptr_v1 srcDevice,
				     unsigned int ByteCount, CUstream hStream)
{
	(void)dstHost;
	(void)srcDevice;
	(void)ByteCount;
	(void)hStream;
	return sg_legacy_32bit("cuMemcpyDtoHAsync");
}

SG_EXPORT CUresult cuMemsetD8(sg_deviceptr_v1 dstDevice, unsigned char uc, unsigned int N)
{
	(void)dstDevice;
	(void)uc;
	(void)N;
	return sg_legacy_32bit("cuMemsetD8");
}

SG_EXPORT CUresult cuMemsetD16(sg_deviceptr_v1 dstDevice, unsigned short us, unsigned int N)
{
	(void)dstDevice;
	(void)us;
	(void)N;
	return sg_legacy_32bit("cuMemsetD16");
}

SG_EXPORT CUresult cuMemsetD32(sg_deviceptr_v1 dstDevice, unsigned int ui, unsigned int N)
{
	(void)dstDevice;
	(void)ui;
	(void)N;
	return sg_legacy_32bit("cuMemsetD32");
}
