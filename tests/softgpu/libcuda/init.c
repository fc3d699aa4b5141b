// SPDX-License-Identifier: MIT
/*
 * cuInit, the /dev/softgpu file and its life across fork(), versions,
 * logging and the device queries.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "internal.h"

struct sg_process sg = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.fd = -1,
	.next_buffer_id = 1,
};

static pthread_once_t sg_atfork_once = PTHREAD_ONCE_INIT;

void sg_debug(const char *fmt, ...)
{
	const char *env = getenv("SOFTGPU_DEBUG");
	va_list ap;

	if (!env || strcmp(env, "1"))
		return;
	va_start(ap, fmt);
	fputs("softgpu libcuda: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

void sg_lock(void)
{
	pthread_mutex_lock(&sg.lock);
}

void sg_unlock(void)
{
	pthread_mutex_unlock(&sg.lock);
}

/* Keep the lock consistent across fork(): no thread may hold it at the fork. */
static void sg_atfork_prepare(void)
{
	sg_alloc_lock_for_fork(1);
	pthread_mutex_lock(&sg.lock);
}

static void sg_atfork_parent(void)
{
	pthread_mutex_unlock(&sg.lock);
	sg_alloc_lock_for_fork(0);
}

static void sg_atfork_child(void)
{
	pthread_mutex_unlock(&sg.lock);
	sg_alloc_lock_for_fork(0);
}

static void sg_register_atfork(void)
{
	pthread_atfork(sg_atfork_prepare, sg_atfork_parent, sg_atfork_child);
}

CUresult sg_errno_to_result(int err)
{
	switch (err) {
	case 0:
		return CUDA_SUCCESS;
	case ENOMEM:
	case ENOSPC:
		return CUDA_ERROR_OUT_OF_MEMORY;
	case EINVAL:
	case EFAULT:
	case ENOENT:
	case ERANGE:
		return CUDA_ERROR_INVALID_VALUE;
	case EBUSY:
		return CUDA_ERROR_ILLEGAL_STATE;
	case EPERM:
	case EACCES:
		return CUDA_ERROR_NOT_PERMITTED;
	case ENOTTY:
	case EOPNOTSUPP:
		return CUDA_ERROR_NOT_SUPPORTED;
	case ENODEV:
	case ENXIO:
		return CUDA_ERROR_NO_DEVICE;
	default:
		return CUDA_ERROR_UNKNOWN;
	}
}

/*
 * Open /dev/softgpu for this process and read the device description.
 * Called with the lock held.
 */
static CUresult sg_open_locked(void)
{
	struct softgpu_info info;
	int fd;

	fd = open(SOFTGPU_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;

		sg_debug("cannot open %s: %s; load the softgpu module (insmod softgpu.ko) "
			 "and check the device node's permissions", SOFTGPU_DEVICE_PATH,
			 strerror(err));
		return CUDA_ERROR_NO_DEVICE;
	}
	memset(&info, 0, sizeof(info));
	if (ioctl(fd, SOFTGPU_IOC_GET_INFO, &info) < 0) {
		sg_debug("SOFTGPU_IOC_GET_INFO on %s failed: %s", SOFTGPU_DEVICE_PATH,
			 strerror(errno));
		close(fd);
		return CUDA_ERROR_NO_DEVICE;
	}
	if (info.abi_version != SOFTGPU_ABI_VERSION) {
		sg_debug("%s speaks softgpu ABI %u, this library ABI %u; rebuild the "
			 "module and libcuda from the same tree", SOFTGPU_DEVICE_PATH,
			 info.abi_version, SOFTGPU_ABI_VERSION);
		close(fd);
		return CUDA_ERROR_NO_DEVICE;
	}
	info.name[sizeof(info.name) - 1] = '\0';
	sg.info = info;
	sg.fd = fd;
	sg.owner = getpid();
	return CUDA_SUCCESS;
}

/*
 * A fork child inherits the parent's /dev/softgpu file, which the module
 * refuses to serve it (EACCES), and tables that describe the parent's
 * address space.  Drop both; the child gets a fresh, empty space of its own
 * when it next needs the device.  Called with the lock held.
 */
static void sg_forget_parent_locked(void)
{
	if (sg.fd >= 0)
		close(sg.fd);
	sg.fd = -1;
	sg_memory_forget_device();
	sg_vmm_forget();
	sg_streams_forget();
}

/* Return 0 when the lock is held and the device is open for this process. */
static CUresult sg_ensure_open_locked(void)
{
	if (sg.fd >= 0 && sg.owner != getpid()) {
		sg_debug("process %d is a fork child of %d: opening its own %s",
			 (int)getpid(), (int)sg.owner, SOFTGPU_DEVICE_PATH);
		sg_forget_parent_locked();
	}
	if (sg.fd < 0)
		return sg_open_locked();
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuInit(unsigned int Flags)
{
	CUresult rc;

	pthread_once(&sg_atfork_once, sg_register_atfork);
	if (Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	sg_lock();
	rc = sg_ensure_open_locked();
	if (rc == CUDA_SUCCESS)
		sg.initialized = 1;
	sg_unlock();
	return rc;
}

/* Every API call past cuInit starts here. */
CUresult sg_check_init(void)
{
	CUresult rc;

	sg_lock();
	if (!sg.initialized) {
		sg_unlock();
		sg_debug("call cuInit(0) first");
		return CUDA_ERROR_NOT_INITIALIZED;
	}
	rc = sg_ensure_open_locked();
	sg_unlock();
	return rc;
}

CUresult sg_check_device(CUdevice dev)
{
	CUresult rc = sg_check_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	return CUDA_SUCCESS;
}

/*
 * One device, so no peer: as the real driver (580) answers, a device asked
 * about itself succeeds without writing *canAccessPeer, any other ordinal is
 * CUDA_ERROR_INVALID_DEVICE (tools/probe-pointer-attributes.c).
 */
SG_EXPORT CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
	CUresult rc = sg_check_device(dev);

	if (rc == CUDA_SUCCESS)
		rc = sg_check_device(peerDev);
	if (rc != CUDA_SUCCESS)
		return rc;
	return canAccessPeer ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ioctl on this process's file; returns 0 or an errno value. */
int sg_ioctl(unsigned long request, void *arg)
{
	int fd;

	sg_lock();
	if (sg_ensure_open_locked() != CUDA_SUCCESS) {
		sg_unlock();
		return ENODEV;
	}
	fd = sg.fd;
	sg_unlock();
	while (ioctl(fd, request, arg) < 0) {
		if (errno != EINTR)
			return errno;
	}
	return 0;
}

int sg_driver_version(void)
{
	const char *env = getenv("SOFTGPU_CUDA_DRIVER_VERSION");
	char *end;
	long v;

	if (!env || !*env)
		return SG_DEFAULT_DRIVER_VERSION;
	errno = 0;
	v = strtol(env, &end, 10);
	if (errno || *end || v <= 0 || v > 1000000) {
		sg_debug("ignoring SOFTGPU_CUDA_DRIVER_VERSION=%s: give a number such "
			 "as 12080 (12.8) or 13030 (13.3)", env);
		return SG_DEFAULT_DRIVER_VERSION;
	}
	return (int)v;
}

SG_EXPORT CUresult cuDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = sg_driver_version();
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuDeviceGetCount(int *count)
{
	CUresult rc;

	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	rc = sg_check_init();
	if (rc != CUDA_SUCCESS)
		return rc;
	*count = 1;
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	CUresult rc;

	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	rc = sg_check_init();
	if (rc != CUDA_SUCCESS)
		return rc;
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = 0;
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CUresult rc = sg_check_device(dev);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "%s", sg.info.name);
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	CUresult rc = sg_check_device(dev);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(uuid->bytes, sg.info.uuid, sizeof(uuid->bytes));
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	CUresult rc = sg_check_device(dev);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = sg.info.memory_size;
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	CUresult rc = sg_check_device(dev);
	char id[32];
	int n;

	if (rc != CUDA_SUCCESS)
		return rc;
	n = snprintf(id, sizeof(id), "%04x:%02x:%02x.%x", sg.info.pci_domain,
		     sg.info.pci_bus, sg.info.pci_device, sg.info.pci_function);
	/* The real driver refuses a buffer that cannot hold the whole id. */
	if (!pciBusId || len <= n)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(pciBusId, id, (size_t)n + 1);
	return CUDA_SUCCESS;
}

/*
 * Attributes of an H200-like device (compute capability 9.0).  Attributes
 * not listed are not emulated and fail, so a program that depends on one
 * learns it here instead of acting on a made-up value.
 */
static int sg_device_attribute(CUdevice_attribute attrib, int *value)
{
	int coherent = !!(sg.info.flags & SOFTGPU_INFO_CPU_CACHEABLE);

	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *value = 1024; break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *value = 1024; break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *value = 64; break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *value = 2147483647; break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *value = 65535; break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *value = 65535; break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = 49152; break;
	case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: *value = 65536; break;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
	case CU_DEVICE_ATTRIBUTE_MAX_PITCH: *value = 2147483647; break;
	case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *value = 65536; break;
	case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *value = 1980000; break;
	case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: *value = 512; break;
	case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: *value = 1; break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
	case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT: *value = 0; break;
	case CU_DEVICE_ATTRIBUTE_INTEGRATED: *value = 0; break;
	case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: *value = 1; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: *value = CU_COMPUTEMODE_DEFAULT; break;
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: *value = 1; break;
	case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: *value = 1; break;
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *value = (int)sg.info.pci_bus; break;
	case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *value = (int)sg.info.pci_device; break;
	case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *value = (int)sg.info.pci_domain; break;
	case CU_DEVICE_ATTRIBUTE_TCC_DRIVER: *value = 0; break;
	case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *value = 2619000; break;
	case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *value = 5120; break;
	case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *value = 52428800; break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *value = 2048; break;
	case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *value = 3; break;
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *value = 1; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
	case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: *value = 1; break;
	case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: *value = 0; break;
	case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED: *value = coherent; break;
	case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: *value = coherent; break;
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: *value = 1; break;
	case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *value = 1; break;
	case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: *value = 1; break;
	case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES:
		*value = coherent;
		break;
	case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *value = 1; break;
	case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: *value = 0; break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: *value = 32; break;
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED: *value = 1; break;
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED: *value = 1; break;
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS: *value = 1; break;
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING: *value = 0; break;
	case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: *value = 1; break;
	default:
		return -1;
	}
	return 0;
}

SG_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	CUresult rc = sg_check_device(dev);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	if (sg_device_attribute(attrib, pi)) {
		sg_debug("device attribute %d is not emulated by softgpu; add it to "
			 "sg_device_attribute() in tests/softgpu/libcuda/init.c", (int)attrib);
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}
