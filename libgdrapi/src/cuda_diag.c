// SPDX-License-Identifier: MIT
/*
 * Why cuInit failed, in words a user can act on.  The CUDA driver library
 * says only "no CUDA-capable device is detected" (CUDA_ERROR_NO_DEVICE)
 * both where the NVIDIA kernel driver is not loaded and where it is but
 * this process sees no GPU; the two need different fixes.  Measured with
 * Debian's libcuda1 535 and 550 on a host without the kernel driver:
 * cuInit returns 100 and /proc/driver/nvidia/version does not exist.
 */
#include <unistd.h>

#include "internal.h"

#define CUDA_ERROR_STUB_LIBRARY 34
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_SYSTEM_DRIVER_MISMATCH 803
#define CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE 804
#define NVIDIA_DRIVER_VERSION_FILE "/proc/driver/nvidia/version"

const char *gdr_cuda_init_hint(int cuda_error)
{
	if (cuda_error == CUDA_ERROR_STUB_LIBRARY)
		return "libcuda.so.1 is the CUDA toolkit's stub, not the driver's: take the toolkit's stubs directory out of LD_LIBRARY_PATH";
	if (access(NVIDIA_DRIVER_VERSION_FILE, F_OK) != 0)
		return "the NVIDIA kernel driver is not loaded (no " NVIDIA_DRIVER_VERSION_FILE "): install the driver for this kernel and load it (modprobe nvidia)";
	if (cuda_error == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH || cuda_error == CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)
		return "libcuda.so.1 and the loaded NVIDIA kernel driver are different versions: reload the driver (or reboot) after an upgrade";
	if (cuda_error == CUDA_ERROR_NO_DEVICE)
		return "the NVIDIA driver is loaded but this process sees no GPU: check CUDA_VISIBLE_DEVICES, and that a container was given the /dev/nvidia* devices";
	return "nvidia-smi and the kernel log (NVRM lines) say more";
}
