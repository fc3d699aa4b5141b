// SPDX-License-Identifier: MIT
/*
 * testutil.c - see testutil.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "testutil.h"

/* libgdrapi extensions; weak so the programs still run on GDRCopy's library, which lacks them. */
#pragma weak gdr_alloc_mapped
#pragma weak gdr_free_mapped
#pragma weak gdr_get_backend_name
#pragma weak gdr_open_ex

int test_verbose;
static test_reporter_fn test_reporter;

void test_set_reporter(test_reporter_fn reporter)
{
	test_reporter = reporter;
}

void test_debug(const char *fmt, ...)
{
	va_list ap;

	if (!test_verbose)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void __attribute__((noreturn))
test_end(enum test_outcome outcome, const char *message)
{
	fflush(stdout);
	if (test_reporter)
		test_reporter(outcome, message);
	/* _exit: a failing test must not run atexit handlers or flush a fork parent's buffers. */
	_exit(outcome == TEST_OUTCOME_WAIVED ? TEST_EXIT_WAIVED : TEST_EXIT_FAILED);
}

void test_fail_at(const char *file, int line, const char *fmt, ...)
{
	char what[768], message[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(message, sizeof(message), "%s:%d: %s", file, line, what);
	/* A harness that collects the message prints it itself (unless verbose). */
	if (!test_reporter || test_verbose)
		fprintf(stderr, "%s\n", message);
	test_end(TEST_OUTCOME_FAILED, message);
}

void test_waive(const char *fmt, ...)
{
	char message[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	test_debug("waiving: %s", message);
	test_end(TEST_OUTCOME_WAIVED, message);
}

const char *cuda_error_name(CUresult res)
{
	const char *name = NULL;

	if (cuGetErrorName(res, &name) != CUDA_SUCCESS || !name)
		return "CUDA_ERROR_UNKNOWN_CODE";
	return name;
}

const char *cuda_error_string(CUresult res)
{
	const char *text = NULL;

	if (cuGetErrorString(res, &text) != CUDA_SUCCESS || !text)
		return "no description";
	return text;
}

const char *test_errno_text(int err)
{
	static __thread char buf[64];

	if (err > 0)
		return strerror(err);
	snprintf(buf, sizeof(buf), "unknown error %d", err);
	return buf;
}

/* ---- CUDA devices ----------------------------------------------------- */

int gpu_attribute(CUdevice dev, CUdevice_attribute attr)
{
	int value = 0;

	ASSERTDRV(cuDeviceGetAttribute(&value, attr, dev));
	return value;
}

int gpu_driver_version(void)
{
	int version = 0;

	ASSERTDRV(cuDriverGetVersion(&version));
	return version;
}

static int print_gpu_list(void)
{
	int count = 0;
	CUresult res;

	res = cuDeviceGetCount(&count);
	if (res != CUDA_SUCCESS) {
		fprintf(stderr, "cuDeviceGetCount failed: %s (%s)\n", cuda_error_name(res),
			cuda_error_string(res));
		return -1;
	}
	for (int id = 0; id < count; id++) {
		char name[256] = "";
		int domain = 0, bus = 0, device = 0;
		CUdevice dev;

		if (cuDeviceGet(&dev, id) != CUDA_SUCCESS ||
		    cuDeviceGetName(name, sizeof(name), dev) != CUDA_SUCCESS ||
		    cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev) ||
		    cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev) ||
		    cuDeviceGetAttribute(&device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev)) {
			fprintf(stderr, "cannot query GPU %d\n", id);
			return -1;
		}
		printf("GPU id:%d; name: %s; Bus id: %04x:%02x:%02x\n", id, name, domain, bus,
		       device);
	}
	fflush(stdout);
	return count;
}

/*
 * The same sentence libgdrapi's backends add (its cuda_loader.c): libcuda says
 * CUDA_ERROR_NO_DEVICE both where the kernel driver is not loaded (measured
 * with Debian's libcuda1 535 and 550) and where no GPU is visible.
 */
const char *cuda_init_hint(CUresult res)
{
	if (res == CUDA_ERROR_STUB_LIBRARY)
		return "libcuda.so.1 is the CUDA toolkit's stub, not the driver's: take the toolkit's stubs directory out of LD_LIBRARY_PATH";
	if (access("/proc/driver/nvidia/version", F_OK) != 0)
		return "the NVIDIA kernel driver is not loaded (no /proc/driver/nvidia/version): install the driver for this kernel and load it (modprobe nvidia)";
	if (res == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH || res == CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)
		return "libcuda.so.1 and the loaded NVIDIA kernel driver are different versions: reload the driver (or reboot) after an upgrade";
	if (res == CUDA_ERROR_NO_DEVICE)
		return "the NVIDIA driver is loaded but this process sees no GPU: check CUDA_VISIBLE_DEVICES, and that a container was given the /dev/nvidia* devices";
	return "nvidia-smi and the kernel log (NVRM lines) say more";
}

int gpu_print_list(void)
{
	CUresult res = cuInit(0);

	if (res != CUDA_SUCCESS) {
		fprintf(stderr, "cuInit failed: %s (%s): %s\n", cuda_error_name(res), cuda_error_string(res),
			cuda_init_hint(res));
		return -1;
	}
	return print_gpu_list();
}

CUdevice gpu_init(int dev_id, bool require_default_compute_mode, bool print_list,
		  CUcontext *ctx)
{
	CUcontext primary;
	CUdevice dev;
	int count = 0;

	ASSERTDRV(cuInit(0));
	ASSERTDRV(cuDeviceGetCount(&count));
	ASSERT_MSG(count > 0, "no CUDA device found");
	if (print_list)
		ASSERT(print_gpu_list() == count);
	ASSERT_MSG(dev_id >= 0 && dev_id < count,
		   "GPU %d does not exist (there are %d); pick one with -d", dev_id, count);
	if (print_list) {
		printf("selecting device %d\n", dev_id);
		fflush(stdout);
	}
	ASSERTDRV(cuDeviceGet(&dev, dev_id));

	if (require_default_compute_mode) {
		int mode = gpu_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE);

		if (mode != CU_COMPUTEMODE_DEFAULT)
			test_waive("GPU %d is in compute mode %d, the test needs DEFAULT (0) to use it from two processes",
				   dev_id, mode);
	}

	ASSERTDRV(cuDevicePrimaryCtxRetain(&primary, dev));
	ASSERTDRV(cuCtxSetCurrent(primary));
	if (ctx)
		*ctx = primary;
	return dev;
}

void gpu_finalize(CUdevice dev)
{
	ASSERTDRV(cuCtxSetCurrent(NULL));
	ASSERTDRV(cuDevicePrimaryCtxRelease(dev));
}

/* ---- GPU memory ------------------------------------------------------- */

static size_t round_up(size_t value, size_t to)
{
	return (value + to - 1) / to * to;
}

static CUresult set_sync_memops(CUdeviceptr ptr)
{
	unsigned int flag = 1;

	return cuPointerSetAttribute(&flag, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, ptr);
}

CUresult gpu_mem_alloc(struct gpu_mem *mem, size_t size, bool aligned, bool sync_memops)
{
	size_t alloc_size = aligned ? size + GPU_ALLOC_ALIGNMENT - 1 : size;
	CUdeviceptr ptr;
	CUresult res;

	memset(mem, 0, sizeof(*mem));
	res = cuMemAlloc(&ptr, alloc_size);
	if (res != CUDA_SUCCESS)
		return res;
	if (sync_memops) {
		res = set_sync_memops(ptr);
		if (res != CUDA_SUCCESS) {
			cuMemFree(ptr);
			return res;
		}
	}
	mem->kind = GPU_ALLOC_CUMEMALLOC;
	mem->alloc_ptr = ptr;
	mem->alloc_size = alloc_size;
	mem->ptr = aligned ? (CUdeviceptr)round_up(ptr, GPU_ALLOC_ALIGNMENT) : ptr;
	mem->size = size;
	return CUDA_SUCCESS;
}

CUresult gpu_vmm_alloc(struct gpu_mem *mem, size_t size, bool aligned, bool sync_memops)
{
	CUmemAllocationProp prop;
	CUmemAccessDesc access;
	size_t granularity = 0, alloc_size;
	CUmemGenericAllocationHandle handle;
	CUdeviceptr ptr;
	CUdevice dev;
	CUresult res;

	/* cuMemCreate memory is always granularity aligned, which is at least 64 KiB. */
	(void)aligned;
	memset(mem, 0, sizeof(*mem));
	res = cuCtxGetDevice(&dev);
	if (res != CUDA_SUCCESS)
		return res;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	prop.allocFlags.gpuDirectRDMACapable = 1;
	res = cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (res != CUDA_SUCCESS)
		return res;
	granularity = round_up(granularity ? granularity : 1, GPU_ALLOC_ALIGNMENT);
	alloc_size = round_up(size ? size : 1, granularity);

	/*
	 * A POSIX fd handle lets libgdrapi's vulkan backend pin this memory with
	 * no kernel module (it exports the fd into Vulkan).  A driver that cannot
	 * export (softgpu's libcuda: CUDA_ERROR_NOT_SUPPORTED) still allocates
	 * without it; gdrdrv needs none, and the vulkan backend then says why.
	 */
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	res = cuMemCreate(&handle, alloc_size, &prop, 0);
	if (res == CUDA_ERROR_NOT_SUPPORTED) {
		prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
		res = cuMemCreate(&handle, alloc_size, &prop, 0);
	}
	if (res != CUDA_SUCCESS)
		return res;
	res = cuMemAddressReserve(&ptr, alloc_size, granularity, 0, 0);
	if (res != CUDA_SUCCESS)
		goto out_release;
	res = cuMemMap(ptr, alloc_size, 0, handle, 0);
	if (res != CUDA_SUCCESS)
		goto out_free_va;
	memset(&access, 0, sizeof(access));
	access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	access.location.id = dev;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	res = cuMemSetAccess(ptr, alloc_size, &access, 1);
	if (res != CUDA_SUCCESS)
		goto out_unmap;
	/* The real driver (580) refuses SYNC_MEMOPS on cuMemCreate memory with NOT_SUPPORTED; nothing to set then. */
	if (sync_memops) {
		res = set_sync_memops(ptr);
		if (res != CUDA_SUCCESS && res != CUDA_ERROR_NOT_SUPPORTED)
			goto out_unmap;
	}

	mem->kind = GPU_ALLOC_CUMEMCREATE;
	mem->alloc_ptr = ptr;
	mem->alloc_size = alloc_size;
	mem->vmm_handle = handle;
	mem->ptr = ptr;
	mem->size = size;
	return CUDA_SUCCESS;

out_unmap:
	cuMemUnmap(ptr, alloc_size);
out_free_va:
	cuMemAddressFree(ptr, alloc_size);
out_release:
	cuMemRelease(handle);
	return res;
}

static int gdr_mapped_free(struct gpu_mem *mem)
{
	if (!gdr_free_mapped)
		return ENOTSUP;
	return gdr_free_mapped(mem->gdr, (uint64_t)mem->alloc_ptr);
}

CUresult gpu_mem_free(struct gpu_mem *mem)
{
	CUresult res, first;

	if (!mem->alloc_ptr)
		return CUDA_SUCCESS;
	if (mem->kind == GPU_ALLOC_CUMEMALLOC) {
		res = cuMemFree(mem->alloc_ptr);
	} else if (mem->kind == GPU_ALLOC_GDR_MAPPED) {
		res = gdr_mapped_free(mem) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
	} else {
		/* Keep going after an error so nothing leaks; report the first one. */
		first = cuMemUnmap(mem->alloc_ptr, mem->alloc_size);
		res = cuMemAddressFree(mem->alloc_ptr, mem->alloc_size);
		if (first == CUDA_SUCCESS)
			first = res;
		res = cuMemRelease(mem->vmm_handle);
		if (first != CUDA_SUCCESS)
			res = first;
	}
	mem->alloc_ptr = 0;
	mem->ptr = 0;
	mem->cpu_ptr = NULL;
	return res;
}

bool gpu_vmm_rdma_supported(CUdevice dev, char *why, size_t why_len)
{
	int version = gpu_driver_version();

	if (version < 11000) {
		snprintf(why, why_len,
			 "CUDA driver %d.%d is older than 11.0: no cuMemCreate with GPUDirect RDMA",
			 version / 1000, version % 1000 / 10);
		return false;
	}
	if (!gpu_attribute(dev, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED)) {
		snprintf(why, why_len,
			 "the GPU does not support GPUDirect RDMA on cuMemCreate memory (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED is 0)");
		return false;
	}
	return true;
}

static enum gpu_alloc_status gdr_mapped_alloc(gdr_t g, struct gpu_mem *mem, size_t size, bool sync_memops,
					     char *why, size_t why_len)
{
	uint64_t gpu_ptr = 0;
	void *cpu_ptr = NULL;
	int err;

	if (!g) {
		snprintf(why, why_len, "gdr_alloc_mapped needs an open gdr_t (the program passed none)");
		return GPU_ALLOC_ERROR;
	}
	if (!gdr_alloc_mapped) {
		snprintf(why, why_len,
			 "this libgdrapi has no gdr_alloc_mapped() (GDRCopy's own library?): use cuMemAlloc or cuMemCreate");
		return GPU_ALLOC_UNAVAILABLE;
	}
	err = gdr_alloc_mapped(g, size ? size : 1, &gpu_ptr, &cpu_ptr);
	if (err == ENOTSUP || err == EOPNOTSUPP) {
		const char *backend = gdr_get_backend_name ? gdr_get_backend_name(g) : "gdrdrv";

		snprintf(why, why_len,
			 "gdr_alloc_mapped() is not supported by libgdrapi's %s backend (ENOTSUP): it needs the vulkan backend (GDRCOPY_BACKEND=vulkan, a Vulkan loader and a GPU with device-local host-visible memory)",
			 backend);
		return GPU_ALLOC_UNAVAILABLE;
	}
	if (err) {
		snprintf(why, why_len,
			 "gdr_alloc_mapped(%zu bytes) failed: %s (GDRCOPY_ENABLE_LOGGING=1 shows the library's reason)",
			 size, test_errno_text(err));
		return GPU_ALLOC_ERROR;
	}
	mem->kind = GPU_ALLOC_GDR_MAPPED;
	mem->gdr = g;
	mem->alloc_ptr = (CUdeviceptr)gpu_ptr;
	mem->alloc_size = round_up(size ? size : 1, GPU_ALLOC_ALIGNMENT);
	mem->ptr = (CUdeviceptr)gpu_ptr;
	mem->cpu_ptr = cpu_ptr;
	mem->size = size;
	/* Orders cuMemcpy with CPU accesses where the driver takes it; imported memory may not. */
	if (sync_memops && set_sync_memops(mem->ptr) != CUDA_SUCCESS)
		test_debug("CU_POINTER_ATTRIBUTE_SYNC_MEMOPS not taken by gdr_alloc_mapped memory at 0x%llx",
			   (unsigned long long)mem->ptr);
	return GPU_ALLOC_OK;
}

enum gpu_alloc_status gpu_alloc(enum gpu_alloc_kind kind, gdr_t g, struct gpu_mem *mem, size_t size,
				bool aligned, bool sync_memops, char *why, size_t why_len)
{
	CUresult res;
	CUdevice dev;

	memset(mem, 0, sizeof(*mem));
	switch (kind) {
	case GPU_ALLOC_CUMEMALLOC:
		res = gpu_mem_alloc(mem, size, aligned, sync_memops);
		break;
	case GPU_ALLOC_CUMEMCREATE:
		res = cuCtxGetDevice(&dev);
		if (res == CUDA_SUCCESS && !gpu_vmm_rdma_supported(dev, why, why_len))
			return GPU_ALLOC_UNAVAILABLE;
		if (res == CUDA_SUCCESS)
			res = gpu_vmm_alloc(mem, size, aligned, sync_memops);
		break;
	case GPU_ALLOC_GDR_MAPPED:
		return gdr_mapped_alloc(g, mem, size, sync_memops, why, why_len);
	default:
		snprintf(why, why_len, "unknown allocation kind %d", (int)kind);
		return GPU_ALLOC_ERROR;
	}
	if (res != CUDA_SUCCESS) {
		snprintf(why, why_len, "%s of %zu bytes failed: %s (%s)", gpu_alloc_kind_name(kind), size,
			 cuda_error_name(res), cuda_error_string(res));
		return GPU_ALLOC_ERROR;
	}
	return GPU_ALLOC_OK;
}

int gpu_free(struct gpu_mem *mem, char *why, size_t why_len)
{
	CUresult res;
	int err;

	if (!mem->alloc_ptr)
		return 0;
	if (mem->kind == GPU_ALLOC_GDR_MAPPED) {
		err = gdr_mapped_free(mem);
		if (err) {
			snprintf(why, why_len, "gdr_free_mapped(0x%llx) failed: %s%s",
				 (unsigned long long)mem->alloc_ptr, test_errno_text(err),
				 err == EBUSY ? " (still pinned: unpin first)" : "");
			return -1;
		}
		mem->alloc_ptr = 0;
		mem->ptr = 0;
		mem->cpu_ptr = NULL;
		return 0;
	}
	res = gpu_mem_free(mem);
	if (res != CUDA_SUCCESS) {
		snprintf(why, why_len, "freeing %s memory failed: %s (%s)", gpu_alloc_kind_name(mem->kind),
			 cuda_error_name(res), cuda_error_string(res));
		return -1;
	}
	return 0;
}

gdr_t gdr_open_for(enum gpu_alloc_kind kind)
{
#ifdef GDRAPI_HAVE_OPEN_EX
	if (kind != GPU_ALLOC_CUMEMALLOC && gdr_open_ex)
		return gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN);
#endif
	(void)kind;
	return gdr_open();
}

const char *gpu_alloc_kind_name(enum gpu_alloc_kind kind)
{
	switch (kind) {
	case GPU_ALLOC_CUMEMALLOC:
		return "cuMemAlloc";
	case GPU_ALLOC_CUMEMCREATE:
		return "cuMemCreate";
	case GPU_ALLOC_GDR_MAPPED:
		return "gdr_alloc_mapped";
	}
	return "unknown";
}

/* ---- host data patterns ------------------------------------------------ */

static void fill_words(void *buf, size_t size, uint32_t (*word)(size_t index, uint32_t arg),
		       uint32_t arg)
{
	size_t words = size / sizeof(uint32_t), tail = size % sizeof(uint32_t);
	unsigned char *bytes = buf;

	for (size_t w = 0; w < words; w++) {
		uint32_t value = word(w, arg);

		memcpy(bytes + w * sizeof(value), &value, sizeof(value));
	}
	if (tail) {
		uint32_t value = word(words, arg);

		memcpy(bytes + words * sizeof(value), &value, tail);
	}
}

static uint32_t walking_bit_word(size_t w, uint32_t arg)
{
	(void)arg;
	return 0x3F4C5E6AU ^ (1U << (w % 32));
}

static uint32_t ramp_word(size_t w, uint32_t arg)
{
	(void)arg;
	return (uint32_t)w;
}

static uint32_t seeded_word(size_t w, uint32_t seed)
{
	return seed * 2654435761U + (uint32_t)w;
}

void fill_walking_bit(void *buf, size_t size)
{
	fill_words(buf, size, walking_bit_word, 0);
}

void fill_linear_ramp(void *buf, size_t size)
{
	fill_words(buf, size, ramp_word, 0);
}

void fill_seeded(void *buf, size_t size, uint32_t seed)
{
	fill_words(buf, size, seeded_word, seed);
}

size_t first_difference(const void *a, const void *b, size_t size)
{
	const unsigned char *pa = a, *pb = b;

	if (!memcmp(a, b, size))
		return (size_t)-1;
	for (size_t i = 0; i < size; i++)
		if (pa[i] != pb[i])
			return i;
	return (size_t)-1;
}

/* ---- parsers ----------------------------------------------------------- */

int parse_gpu_alloc_kind(const char *arg, enum gpu_alloc_kind *kind)
{
	static const enum gpu_alloc_kind kinds[] = {
		GPU_ALLOC_CUMEMALLOC, GPU_ALLOC_CUMEMCREATE, GPU_ALLOC_GDR_MAPPED,
	};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (!strcasecmp(arg, gpu_alloc_kind_name(kinds[i]))) {
			*kind = kinds[i];
			return 0;
		}
	}
	return -1;
}

int parse_gpu_alloc(const char *arg, gpu_alloc_fn *alloc_fn, const char **name)
{
	if (!strcasecmp(arg, "cuMemAlloc")) {
		*alloc_fn = gpu_mem_alloc;
		*name = "cuMemAlloc";
		return 0;
	}
	if (!strcasecmp(arg, "cuMemCreate")) {
		*alloc_fn = gpu_vmm_alloc;
		*name = "cuMemCreate";
		return 0;
	}
	return -1;
}

static const struct {
	const char *name;
	int flags;
} map_flag_names[] = {
	{ "default", GDR_MAP_FLAG_DEFAULT },
	{ "wc", GDR_MAP_FLAG_REQ_WC_MAPPING },
	{ "cache", GDR_MAP_FLAG_REQ_CACHE_MAPPING },
	{ "device", GDR_MAP_FLAG_REQ_DEVICE_MAPPING },
};

int parse_map_flags(const char *arg, int *flags)
{
	for (size_t i = 0; i < sizeof(map_flag_names) / sizeof(map_flag_names[0]); i++) {
		if (!strcasecmp(arg, map_flag_names[i].name)) {
			*flags = map_flag_names[i].flags;
			return 0;
		}
	}
	return -1;
}

const char *map_flags_name(int flags)
{
	for (size_t i = 0; i < sizeof(map_flag_names) / sizeof(map_flag_names[0]); i++)
		if (map_flag_names[i].flags == flags)
			return map_flag_names[i].name;
	return "unknown";
}
