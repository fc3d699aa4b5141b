// SPDX-License-Identifier: MIT
/* cuGetErrorName / cuGetErrorString for every CUresult cuda.h declares. */
#include <stddef.h>

#include "internal.h"

#define SG_ERR(code, text) { code, #code, text }

static const struct {
	CUresult code;
	const char *name;
	const char *text;
} sg_errors[] = {
	SG_ERR(CUDA_SUCCESS, "no error"),
	SG_ERR(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
	SG_ERR(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
	SG_ERR(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
	SG_ERR(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
	SG_ERR(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library"),
	SG_ERR(CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA-capable device(s) is/are busy or unavailable"),
	SG_ERR(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
	SG_ERR(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
	SG_ERR(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"),
	SG_ERR(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
	SG_ERR(CUDA_ERROR_MAP_FAILED, "mapping of buffer object failed"),
	SG_ERR(CUDA_ERROR_UNMAP_FAILED, "unmapping of buffer object failed"),
	SG_ERR(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped"),
	SG_ERR(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device"),
	SG_ERR(CUDA_ERROR_NOT_MAPPED, "resource not mapped"),
	SG_ERR(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed"),
	SG_ERR(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid"),
	SG_ERR(CUDA_ERROR_FILE_NOT_FOUND, "file not found"),
	SG_ERR(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS"),
	SG_ERR(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
	SG_ERR(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state"),
	SG_ERR(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
	SG_ERR(CUDA_ERROR_NOT_READY, "device not ready"),
	SG_ERR(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
	SG_ERR(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch"),
	SG_ERR(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated"),
	SG_ERR(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "cannot set while device is active in this process"),
	SG_ERR(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"),
	SG_ERR(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"),
	SG_ERR(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
	SG_ERR(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
	SG_ERR(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "system has unsupported display driver / cuda driver combination"),
	SG_ERR(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, "forward compatibility was attempted on non supported HW"),
	SG_ERR(CUDA_ERROR_UNKNOWN, "unknown error"),
};

static int sg_error_index(CUresult error)
{
	size_t i;

	for (i = 0; i < sizeof(sg_errors) / sizeof(sg_errors[0]); i++)
		if (sg_errors[i].code == error)
			return (int)i;
	return -1;
}

SG_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
	int i = sg_error_index(error);

	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = i < 0 ? NULL : sg_errors[i].name;
	return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

SG_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
	int i = sg_error_index(error);

	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = i < 0 ? NULL : sg_errors[i].text;
	return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
