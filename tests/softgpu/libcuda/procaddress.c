// SPDX-License-Identifier: MIT
/*
 * cuGetProcAddress: the entry point for a base name ("cuMemAlloc") at a
 * requested CUDA version is the newest variant introduced at or before that
 * version, i.e. the one a program built with that version's header links
 * to.  Probed against a real CUDA 13.0 driver: cuCtxCreate at 12000 is
 * neither _v2 nor _v4 (so _v3), at 13000 it is _v4; a version older than a
 * symbol gives VERSION_NOT_SUFFICIENT; versioned names ("cuMemAlloc_v2") are
 * not looked up.
 */
#include <string.h>

#include "internal.h"
#include "legacy.h"

#define SG_FN(fn) ((void *)(fn))

static const struct {
	const char *name;
	int version;		/* the CUDA version that introduced this variant */
	void *fn;
} sg_procs[] = {
	{ "cuGetErrorString", 6000, SG_FN(cuGetErrorString) },
	{ "cuGetErrorName", 6000, SG_FN(cuGetErrorName) },
	{ "cuInit", 2000, SG_FN(cuInit) },
	{ "cuDriverGetVersion", 2020, SG_FN(cuDriverGetVersion) },
	{ "cuDeviceGet", 2000, SG_FN(cuDeviceGet) },
	{ "cuDeviceGetCount", 2000, SG_FN(cuDeviceGetCount) },
	{ "cuDeviceGetName", 2000, SG_FN(cuDeviceGetName) },
	{ "cuDeviceGetUuid", 9020, SG_FN(cuDeviceGetUuid) },
	{ "cuDeviceGetUuid", 11040, SG_FN(cuDeviceGetUuid_v2) },
	{ "cuDeviceTotalMem", 2000, SG_FN(cuDeviceTotalMem) },
	{ "cuDeviceTotalMem", 3020, SG_FN(cuDeviceTotalMem_v2) },
	{ "cuDeviceGetAttribute", 2000, SG_FN(cuDeviceGetAttribute) },
	{ "cuDeviceGetPCIBusId", 4010, SG_FN(cuDeviceGetPCIBusId) },
	{ "cuDevicePrimaryCtxRetain", 7000, SG_FN(cuDevicePrimaryCtxRetain) },
	{ "cuDevicePrimaryCtxRelease", 7000, SG_FN(cuDevicePrimaryCtxRelease) },
	{ "cuDevicePrimaryCtxRelease", 11000, SG_FN(cuDevicePrimaryCtxRelease_v2) },
	{ "cuDevicePrimaryCtxReset", 7000, SG_FN(cuDevicePrimaryCtxReset) },
	{ "cuDevicePrimaryCtxReset", 11000, SG_FN(cuDevicePrimaryCtxReset_v2) },
	{ "cuDevicePrimaryCtxSetFlags", 7000, SG_FN(cuDevicePrimaryCtxSetFlags) },
	{ "cuDevicePrimaryCtxSetFlags", 11000, SG_FN(cuDevicePrimaryCtxSetFlags_v2) },
	{ "cuDevicePrimaryCtxGetState", 7000, SG_FN(cuDevicePrimaryCtxGetState) },
	{ "cuCtxCreate", 2000, SG_FN(cuCtxCreate) },
	{ "cuCtxCreate", 3020, SG_FN(cuCtxCreate_v2) },
	{ "cuCtxCreate", 11040, SG_FN(cuCtxCreate_v3) },
	{ "cuCtxCreate", 12050, SG_FN(cuCtxCreate_v4) },
	{ "cuCtxDestroy", 2000, SG_FN(cuCtxDestroy) },
	{ "cuCtxDestroy", 4000, SG_FN(cuCtxDestroy_v2) },
	{ "cuCtxPushCurrent", 2000, SG_FN(cuCtxPushCurrent) },
	{ "cuCtxPushCurrent", 4000, SG_FN(cuCtxPushCurrent_v2) },
	{ "cuCtxPopCurrent", 2000, SG_FN(cuCtxPopCurrent) },
	{ "cuCtxPopCurrent", 4000, SG_FN(cuCtxPopCurrent_v2) },
	{ "cuCtxSetCurrent", 4000, SG_FN(cuCtxSetCurrent) },
	{ "cuCtxGetCurrent", 4000, SG_FN(cuCtxGetCurrent) },
	{ "cuCtxGetDevice", 2000, SG_FN(cuCtxGetDevice) },
	{ "cuCtxSynchronize", 2000, SG_FN(cuCtxSynchronize) },
	{ "cuMemGetInfo", 2000, SG_FN(cuMemGetInfo) },
	{ "cuMemGetInfo", 3020, SG_FN(cuMemGetInfo_v2) },
	{ "cuMemAlloc", 2000, SG_FN(cuMemAlloc) },
	{ "cuMemAlloc", 3020, SG_FN(cuMemAlloc_v2) },
	{ "cuMemFree", 2000, SG_FN(cuMemFree) },
	{ "cuMemFree", 3020, SG_FN(cuMemFree_v2) },
	{ "cuMemGetAddressRange", 2000, SG_FN(cuMemGetAddressRange) },
	{ "cuMemGetAddressRange", 3020, SG_FN(cuMemGetAddressRange_v2) },
	{ "cuMemAllocHost", 2000, SG_FN(cuMemAllocHost) },
	{ "cuMemAllocHost", 3020, SG_FN(cuMemAllocHost_v2) },
	{ "cuMemFreeHost", 2000, SG_FN(cuMemFreeHost) },
	{ "cuMemHostAlloc", 2020, SG_FN(cuMemHostAlloc) },
	{ "cuMemHostGetDevicePointer", 2020, SG_FN(cuMemHostGetDevicePointer) },
	{ "cuMemHostGetDevicePointer", 3020, SG_FN(cuMemHostGetDevicePointer_v2) },
	{ "cuMemcpy", 4000, SG_FN(cuMemcpy) },
	{ "cuMemcpyHtoD", 2000, SG_FN(cuMemcpyHtoD) },
	{ "cuMemcpyHtoD", 3020, SG_FN(cuMemcpyHtoD_v2) },
	{ "cuMemcpyDtoH", 2000, SG_FN(cuMemcpyDtoH) },
	{ "cuMemcpyDtoH", 3020, SG_FN(cuMemcpyDtoH_v2) },
	{ "cuMemcpyDtoD", 2000, SG_FN(cuMemcpyDtoD) },
	{ "cuMemcpyDtoD", 3020, SG_FN(cuMemcpyDtoD_v2) },
	{ "cuMemcpyAsync", 4000, SG_FN(cuMemcpyAsync) },
	{ "cuMemcpyHtoDAsync", 2000, SG_FN(cuMemcpyHtoDAsync) },
	{ "cuMemcpyHtoDAsync", 3020, SG_FN(cuMemcpyHtoDAsync_v2) },
	{ "cuMemcpyDtoHAsync", 2000, SG_FN(cuMemcpyDtoHAsync) },
	{ "cuMemcpyDtoHAsync", 3020, SG_FN(cuMemcpyDtoHAsync_v2) },
	{ "cuMemsetD8", 2000, SG_FN(cuMemsetD8) },
	{ "cuMemsetD8", 3020, SG_FN(cuMemsetD8_v2) },
	{ "cuMemsetD16", 2000, SG_FN(cuMemsetD16) },
	{ "cuMemsetD16", 3020, SG_FN(cuMemsetD16_v2) },
	{ "cuMemsetD32", 2000, SG_FN(cuMemsetD32) },
	{ "cuMemsetD32", 3020, SG_FN(cuMemsetD32_v2) },
	{ "cuPointerGetAttribute", 4000, SG_FN(cuPointerGetAttribute) },
	{ "cuPointerGetAttributes", 7000, SG_FN(cuPointerGetAttributes) },
	{ "cuDeviceCanAccessPeer", 4000, SG_FN(cuDeviceCanAccessPeer) },
	{ "cuPointerSetAttribute", 6000, SG_FN(cuPointerSetAttribute) },
	{ "cuMemCreate", 10020, SG_FN(cuMemCreate) },
	{ "cuMemRelease", 10020, SG_FN(cuMemRelease) },
	{ "cuMemAddressReserve", 10020, SG_FN(cuMemAddressReserve) },
	{ "cuMemAddressFree", 10020, SG_FN(cuMemAddressFree) },
	{ "cuMemMap", 10020, SG_FN(cuMemMap) },
	{ "cuMemUnmap", 10020, SG_FN(cuMemUnmap) },
	{ "cuMemSetAccess", 10020, SG_FN(cuMemSetAccess) },
	{ "cuMemGetAllocationGranularity", 10020, SG_FN(cuMemGetAllocationGranularity) },
	{ "cuMemGetHandleForAddressRange", 11070, SG_FN(cuMemGetHandleForAddressRange) },
	{ "cuStreamCreate", 2000, SG_FN(cuStreamCreate) },
	{ "cuStreamDestroy", 2000, SG_FN(cuStreamDestroy) },
	{ "cuStreamDestroy", 4000, SG_FN(cuStreamDestroy_v2) },
	{ "cuStreamSynchronize", 2000, SG_FN(cuStreamSynchronize) },
	{ "cuStreamQuery", 2000, SG_FN(cuStreamQuery) },
	{ "cuModuleLoadData", 2000, SG_FN(cuModuleLoadData) },
	{ "cuModuleUnload", 2000, SG_FN(cuModuleUnload) },
	{ "cuModuleGetFunction", 2000, SG_FN(cuModuleGetFunction) },
	{ "cuFuncGetAttribute", 2020, SG_FN(cuFuncGetAttribute) },
	{ "cuLaunchKernel", 4000, SG_FN(cuLaunchKernel) },
	{ "cuGetExportTable", 3000, SG_FN(cuGetExportTable) },
	{ "cuGetProcAddress", 11030, SG_FN(cuGetProcAddress) },
	{ "cuGetProcAddress", 12000, SG_FN(cuGetProcAddress_v2) },
};

static CUdriverProcAddressQueryResult sg_lookup(const char *symbol, int version, void **pfn)
{
	int found = 0, best_version = -1;
	size_t i;

	*pfn = NULL;
	for (i = 0; i < sizeof(sg_procs) / sizeof(sg_procs[0]); i++) {
		if (strcmp(sg_procs[i].name, symbol))
			continue;
		found = 1;
		if (sg_procs[i].version <= version && sg_procs[i].version > best_version) {
			best_version = sg_procs[i].version;
			*pfn = sg_procs[i].fn;
		}
	}
	if (!found)
		return CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
}

SG_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
				       cuuint64_t flags,
				       CUdriverProcAddressQueryResult *symbolStatus)
{
	CUdriverProcAddressQueryResult status;

	if (!symbol || !pfn || cudaVersion <= 0 ||
	    (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
				   CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
		return CUDA_ERROR_INVALID_VALUE;
	/* A real 13.0 driver refuses versions newer than itself (probed). */
	if (cudaVersion > sg_driver_version()) {
		sg_debug("cuGetProcAddress(%s, %d): the driver is version %d", symbol,
			 cudaVersion, sg_driver_version());
		return CUDA_ERROR_INVALID_VALUE;
	}
	/*
	 * Every call here completes before returning, so the per-thread
	 * default-stream variants (_ptds/_ptsz) would behave the same: the
	 * flags select nothing different.
	 */
	status = sg_lookup(symbol, cudaVersion, pfn);
	if (status != CU_GET_PROC_ADDRESS_SUCCESS)
		sg_debug("cuGetProcAddress(%s, %d): %s", symbol, cudaVersion,
			 status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND ?
			 "not provided by softgpu" : "requested version is older than the symbol");
	if (symbolStatus) {
		*symbolStatus = status;
		return CUDA_SUCCESS;
	}
	return status == CU_GET_PROC_ADDRESS_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

SG_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
				    cuuint64_t flags)
{
	return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

/*
 * The driver's private, undocumented function tables, asked for by id.  The
 * CUDA runtime (libcudart) asks for them before it does anything, for
 * cudaGetDeviceCount too; softgpu provides none.  For an id it does not know,
 * the real driver (535 and 550, probed without a kernel driver, before cuInit)
 * answers CUDA_ERROR_INVALID_VALUE and leaves *ppExportTable as it was; it
 * does the same for a NULL argument.  The debug line names the id, which is
 * what stops a program built on the runtime here.
 */
SG_EXPORT CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
	if (pExportTableId) {
		const unsigned char *b = (const unsigned char *)pExportTableId->bytes;

		sg_debug("cuGetExportTable(%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x):"
			 " softgpu provides none of the driver's private export tables",
			 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
			 b[12], b[13], b[14], b[15]);
	}
	(void)ppExportTable;
	return CUDA_ERROR_INVALID_VALUE;
}
