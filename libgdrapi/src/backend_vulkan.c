// SPDX-License-Identifier: MIT
/*
 * The Vulkan backend: GPU memory the CPU can reach with no kernel module of
 * ours and no root.
 *
 * Where the GPU exposes a memory type that is both DEVICE_LOCAL and
 * HOST_VISIBLE (its BAR1, resizable BAR), Vulkan can allocate GPU memory and
 * map it into the process: the very write-combined BAR1 mapping gdrdrv would
 * make.  We allocate such memory exportable as an opaque fd, import the fd
 * into CUDA (cuImportExternalMemory + cuExternalMemoryGetMappedBuffer) and so
 * hold two names for the same bytes: a CUdeviceptr for CUDA and a CPU
 * pointer.  gdr_alloc_mapped() hands both out; pins, maps and copies then
 * work on addresses inside those allocations.
 *
 * It also pins memory the caller allocated with CUDA, the other way round:
 * memory from cuMemCreate that asked for a POSIX fd handle
 * (requestedHandleTypes) is found from its pointer
 * (cuMemRetainAllocationHandle), exported as an fd
 * (cuMemExportToShareableHandle), imported into Vulkan (VkImportMemoryFdInfoKHR,
 * opaque fd) in the BAR1 memory type and mapped (vkMapMemory).  One import
 * serves every pin of that allocation; the last unpin releases it.  The
 * import holds a reference on CUDA's allocation, so the physical memory
 * outlives a cuMemRelease by the caller until then.
 *
 * libvulkan.so.1 is dlopen()ed and libcuda comes from the shared loader
 * (cuda_loader.h): the library loads, and the other backends work, where
 * neither exists.
 *
 * Differences from gdrdrv, documented in libgdrapi/README.md:
 *  - Only memory from gdr_alloc_mapped() or from cuMemCreate with a POSIX fd
 *    handle can be pinned (EINVAL, with the reason, otherwise).
 *  - Pins are persistent (there is no free callback); gdr_unmap() leaves the
 *    allocation's mapping in place until gdr_free_mapped() or gdr_close().
 *  - The mapping type follows the memory type: WC, or CACHING where the
 *    memory type is HOST_CACHED (coherent platforms).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cuda_loader.h"
#include "internal.h"
#include "vulkan_min.h"

#define GVK_ERROR_OUT_OF_DEVICE_MEMORY (-2)
#define VULKAN_LIBRARY "libvulkan.so.1"
#define GPU_PAGE ((uint64_t)GPU_PAGE_SIZE)
#define MAX_GPUS 64

/* cuImportExternalMemory and cuExternalMemoryGetMappedBuffer arrived in CUDA 10.0. */
#define CUDA_EXTERNAL_MEMORY_MIN_DRIVER 10000

struct vulkan_api {
	gvk_void_function (*vkGetInstanceProcAddr)(gvk_instance instance, const char *name);
	gvk_result (*vkCreateInstance)(const struct gvk_instance_create_info *info, const void *allocator,
				       gvk_instance *instance);
	void (*vkDestroyInstance)(gvk_instance instance, const void *allocator);
	gvk_result (*vkEnumeratePhysicalDevices)(gvk_instance instance, uint32_t *count, gvk_physical_device *devices);
	void (*vkGetPhysicalDeviceProperties2)(gvk_physical_device dev, struct gvk_physical_device_properties2 *props);
	void (*vkGetPhysicalDeviceMemoryProperties)(gvk_physical_device dev,
						    struct gvk_physical_device_memory_properties *props);
	/* Vulkan 1.1; NULL where the loader lacks it, and then nothing is imported. */
	void (*vkGetPhysicalDeviceExternalBufferProperties)(gvk_physical_device dev,
							    const struct gvk_physical_device_external_buffer_info *info,
							    struct gvk_external_buffer_properties *props);
	gvk_result (*vkCreateDevice)(gvk_physical_device phys, const struct gvk_device_create_info *info,
				     const void *allocator, gvk_device *dev);
	gvk_void_function (*vkGetDeviceProcAddr)(gvk_device dev, const char *name);
};

/* What a logical Vulkan device offers us; created on the first allocation on that GPU. */
struct vulkan_device_api {
	void (*vkDestroyDevice)(gvk_device dev, const void *allocator);
	gvk_result (*vkAllocateMemory)(gvk_device dev, const struct gvk_memory_allocate_info *info,
				       const void *allocator, gvk_device_memory *mem);
	void (*vkFreeMemory)(gvk_device dev, gvk_device_memory mem, const void *allocator);
	gvk_result (*vkMapMemory)(gvk_device dev, gvk_device_memory mem, uint64_t offset, uint64_t size,
				  uint32_t flags, void **data);
	void (*vkUnmapMemory)(gvk_device dev, gvk_device_memory mem);
	gvk_result (*vkGetMemoryFdKHR)(gvk_device dev, const struct gvk_memory_get_fd_info *info, int *fd);
};

/* One GPU as both APIs see it. */
struct vulkan_gpu {
	gvk_physical_device phys;
	uint8_t uuid[GVK_UUID_SIZE];
	char name[GVK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
	int memory_type;		/* device-local + host-visible, or -1 */
	gdr_mapping_type_t mapping_type;
	uint64_t heap_size;
	bool imports_opaque_fd;		/* can take CUDA's exported fds */
	gvk_device device;		/* NULL until first use */
	struct vulkan_device_api api;
};

struct vulkan_allocation {
	struct vulkan_allocation *next;
	struct vulkan_gpu *gpu;
	gvk_device_memory memory;
	CUexternalMemory external;
	struct gdr_cuda_ctx ctx;	/* the context the CUDA pointer belongs to */
	CUdeviceptr gpu_ptr;
	void *cpu_ptr;
	uint64_t size;
	unsigned int pins;
};

/* A cuMemCreate allocation of the caller's, imported into Vulkan and mapped; shared by its pins. */
struct vulkan_import {
	struct vulkan_import *next;
	struct vulkan_gpu *gpu;
	CUmemGenericAllocationHandle handle;	/* retained: keeps CUDA's memory alive */
	CUdeviceptr base;		/* where the caller's allocation is mapped */
	uint64_t size;
	gvk_device_memory memory;
	void *cpu_ptr;
	unsigned int pins;
};

struct vulkan_state {
	void *vulkan_library;
	bool cuda_held;			/* a libcuda reference (gdr_cuda_acquire) */
	/* Whether cuMemCreate memory can be pinned here; why not, for the errors. */
	bool pins_cuda_memory;
	char no_cuda_pins_why[GDR_BACKEND_WHY_LEN];
	struct vulkan_api vk;
	gvk_instance instance;
	unsigned int gpu_count;
	struct vulkan_gpu gpus[MAX_GPUS];

	pthread_mutex_t lock;		/* allocations, imports and lazily created devices */
	struct vulkan_allocation *allocations;
	struct vulkan_import *imports;
};

/* A pin lies in exactly one of: our own allocation, or an imported one of the caller's. */
struct vulkan_pin {
	struct vulkan_allocation *alloc;
	struct vulkan_import *import;
	struct vulkan_gpu *gpu;
	uint64_t gpu_base;		/* the GPU address cpu_base maps */
	void *cpu_base;
	uint64_t start;			/* pinned range, on GPU pages */
	uint64_t size;
};

static int load_cuda(struct vulkan_state *st, char *why)
{
	int rc = gdr_cuda_acquire(why), version;

	if (rc)
		return rc;
	st->cuda_held = true;
	version = gdr_cuda_driver_version();
	if (version < CUDA_EXTERNAL_MEMORY_MIN_DRIVER) {
		snprintf(why, GDR_BACKEND_WHY_LEN,
			 "the CUDA driver is %d.%d; importing Vulkan memory needs 10.0 or newer: upgrade the NVIDIA driver",
			 version / 1000, version % 1000 / 10);
		return ENOTSUP;
	}
	return gdr_cuda_require(GDR_CUDA_USER_VULKAN, why);
}

static int load_vulkan(struct vulkan_state *st, char *why)
{
	struct gvk_application_info app = {
		.s_type = GVK_STRUCTURE_TYPE_APPLICATION_INFO,
		.application_name = "libgdrapi",
		.api_version = GVK_API_VERSION_1_1,
	};
	struct gvk_instance_create_info info = {
		.s_type = GVK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
		.application_info = &app,
	};
	gvk_result vr;

	st->vulkan_library = dlopen(VULKAN_LIBRARY, RTLD_NOW | RTLD_LOCAL);
	if (!st->vulkan_library) {
		snprintf(why, GDR_BACKEND_WHY_LEN,
			 "cannot load %s: install the Vulkan loader (Debian/Ubuntu: libvulkan1, RHEL/SUSE: vulkan-loader)",
			 VULKAN_LIBRARY);
		return ENOENT;
	}
	*(void **)&st->vk.vkGetInstanceProcAddr = dlsym(st->vulkan_library, "vkGetInstanceProcAddr");
	if (!st->vk.vkGetInstanceProcAddr) {
		snprintf(why, GDR_BACKEND_WHY_LEN, "%s has no vkGetInstanceProcAddr", VULKAN_LIBRARY);
		return ENOSYS;
	}
	*(void **)&st->vk.vkCreateInstance = (void *)st->vk.vkGetInstanceProcAddr(NULL, "vkCreateInstance");
	if (!st->vk.vkCreateInstance) {
		snprintf(why, GDR_BACKEND_WHY_LEN, "%s cannot create instances", VULKAN_LIBRARY);
		return ENOSYS;
	}
	vr = st->vk.vkCreateInstance(&info, NULL, &st->instance);
	if (vr != GVK_SUCCESS) {
		snprintf(why, GDR_BACKEND_WHY_LEN,
			 "vkCreateInstance (Vulkan 1.1) failed with VkResult %d: no Vulkan driver found; install the NVIDIA Vulkan ICD or point VK_DRIVER_FILES at nvidia_icd.json",
			 vr);
		st->instance = NULL;
		return ENODEV;
	}
#define INSTANCE_FN(fn)                                                                                \
	do {                                                                                           \
		*(void **)&st->vk.fn = (void *)st->vk.vkGetInstanceProcAddr(st->instance, #fn);        \
		if (!st->vk.fn) {                                                                      \
			snprintf(why, GDR_BACKEND_WHY_LEN, "the Vulkan instance has no %s (needs 1.1)", #fn); \
			return ENOSYS;                                                                 \
		}                                                                                      \
	} while (0)
	INSTANCE_FN(vkDestroyInstance);
	INSTANCE_FN(vkEnumeratePhysicalDevices);
	INSTANCE_FN(vkGetPhysicalDeviceProperties2);
	INSTANCE_FN(vkGetPhysicalDeviceMemoryProperties);
	INSTANCE_FN(vkCreateDevice);
	INSTANCE_FN(vkGetDeviceProcAddr);
#undef INSTANCE_FN
	*(void **)&st->vk.vkGetPhysicalDeviceExternalBufferProperties =
		(void *)st->vk.vkGetInstanceProcAddr(st->instance, "vkGetPhysicalDeviceExternalBufferProperties");
	return 0;
}

/* Does the device say it can import opaque fds (what CUDA exports) as ordinary, non-dedicated memory? */
static bool imports_opaque_fd(struct vulkan_state *st, gvk_physical_device phys)
{
	struct gvk_physical_device_external_buffer_info info = {
		.s_type = GVK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO,
		.usage = GVK_BUFFER_USAGE_TRANSFER_SRC_BIT | GVK_BUFFER_USAGE_TRANSFER_DST_BIT,
		.handle_type = GVK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
	};
	struct gvk_external_buffer_properties props = {
		.s_type = GVK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES,
	};

	if (!st->vk.vkGetPhysicalDeviceExternalBufferProperties)
		return false;
	st->vk.vkGetPhysicalDeviceExternalBufferProperties(phys, &info, &props);
	return (props.external_memory_features & GVK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT) &&
	       !(props.external_memory_features & GVK_EXTERNAL_MEMORY_FEATURE_DEDICATED_ONLY_BIT);
}

/* Pick the memory type that is device-local and host-visible; prefer coherent ones. */
static void choose_memory_type(struct vulkan_state *st, struct vulkan_gpu *gpu)
{
	const uint32_t needed = GVK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | GVK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
	struct gvk_physical_device_memory_properties props;
	uint32_t i;
	int best = -1;

	memset(&props, 0, sizeof(props));
	st->vk.vkGetPhysicalDeviceMemoryProperties(gpu->phys, &props);
	for (i = 0; i < props.memory_type_count && i < GVK_MAX_MEMORY_TYPES; i++) {
		uint32_t flags = props.memory_types[i].property_flags;

		if ((flags & needed) != needed)
			continue;
		if (best < 0 || ((flags & GVK_MEMORY_PROPERTY_HOST_COHERENT_BIT) &&
				 !(props.memory_types[best].property_flags & GVK_MEMORY_PROPERTY_HOST_COHERENT_BIT)))
			best = (int)i;
	}
	gpu->memory_type = best;
	if (best >= 0) {
		uint32_t flags = props.memory_types[best].property_flags;
		uint32_t heap = props.memory_types[best].heap_index;

		gpu->mapping_type = (flags & GVK_MEMORY_PROPERTY_HOST_CACHED_BIT) ? GDR_MAPPING_TYPE_CACHING
										     : GDR_MAPPING_TYPE_WC;
		gpu->heap_size = heap < GVK_MAX_MEMORY_HEAPS ? props.memory_heaps[heap].size : 0;
	}
}

static int find_gpus(struct vulkan_state *st, char *why)
{
	gvk_physical_device phys[MAX_GPUS];
	uint32_t count = MAX_GPUS, i, usable = 0;
	gvk_result vr;

	vr = st->vk.vkEnumeratePhysicalDevices(st->instance, &count, phys);
	if ((vr != GVK_SUCCESS && count == 0) || count == 0) {
		snprintf(why, GDR_BACKEND_WHY_LEN, "Vulkan sees no GPU (VkResult %d)", vr);
		return ENODEV;
	}
	for (i = 0; i < count && i < MAX_GPUS; i++) {
		struct vulkan_gpu *gpu = &st->gpus[st->gpu_count];
		struct gvk_physical_device_id_properties id = {
			.s_type = GVK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES,
		};
		struct gvk_physical_device_properties2 props = {
			.s_type = GVK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
			.next = &id,
		};

		st->vk.vkGetPhysicalDeviceProperties2(phys[i], &props);
		memset(gpu, 0, sizeof(*gpu));
		gpu->phys = phys[i];
		memcpy(gpu->uuid, id.device_uuid, sizeof(gpu->uuid));
		memcpy(gpu->name, props.properties + GVK_PHYSICAL_DEVICE_NAME_OFFSET, sizeof(gpu->name) - 1);
		choose_memory_type(st, gpu);
		gpu->imports_opaque_fd = imports_opaque_fd(st, gpu->phys);
		gdr_dbg("vulkan backend: %s: %s; %s", gpu->name,
			gpu->memory_type >= 0 ? "has device-local host-visible memory" :
						"no device-local host-visible memory (BAR1 not exposed)",
			gpu->imports_opaque_fd ? "imports opaque fds" : "cannot import opaque fds");
		if (gpu->memory_type >= 0)
			usable++;
		st->gpu_count++;
	}
	if (!usable) {
		snprintf(why, GDR_BACKEND_WHY_LEN,
			 "no Vulkan GPU exposes memory that is both device-local and host-visible (enable resizable BAR / a large BAR1 in the firmware)");
		return ENOTSUP;
	}
	return 0;
}

static void vulkan_release(struct vulkan_state *st)
{
	unsigned int i;

	for (i = 0; i < st->gpu_count; i++)
		if (st->gpus[i].device)
			st->gpus[i].api.vkDestroyDevice(st->gpus[i].device, NULL);
	if (st->instance && st->vk.vkDestroyInstance)
		st->vk.vkDestroyInstance(st->instance, NULL);
	if (st->vulkan_library)
		dlclose(st->vulkan_library);
	if (st->cuda_held)
		gdr_cuda_release();
	pthread_mutex_destroy(&st->lock);
	free(st);
}

/* Can this driver pair pin CUDA's own (cuMemCreate) allocations?  Decided once, at open. */
static void check_cuda_pins(struct vulkan_state *st)
{
	unsigned int i;

	st->pins_cuda_memory = false;
#define VMM_CALL(name, symbol, user, params)                                                                   \
	if (GDR_CUDA_USER_##user == GDR_CUDA_USER_VMM && !gdr_cuda.name) {                                    \
		snprintf(st->no_cuda_pins_why, sizeof(st->no_cuda_pins_why),                                 \
			 "%s has no %s (CUDA 10.2 or newer has it): upgrade the NVIDIA driver, or load gdrdrv", \
			 GDR_CUDA_LIBRARY, #symbol);                                                          \
		return;                                                                                       \
	}
	GDR_CUDA_PROCS(VMM_CALL)
#undef VMM_CALL
	for (i = 0; i < st->gpu_count; i++)
		if (st->gpus[i].memory_type >= 0 && st->gpus[i].imports_opaque_fd)
			break;
	if (i == st->gpu_count) {
		snprintf(st->no_cuda_pins_why, sizeof(st->no_cuda_pins_why),
			 "no Vulkan GPU with BAR1-visible memory can import opaque fds (VK_KHR_external_memory_fd, Vulkan 1.1): update the NVIDIA Vulkan driver, or load gdrdrv");
		return;
	}
	st->pins_cuda_memory = true;
}

static int vulkan_open(struct gdr *g, char *why)
{
	struct vulkan_state *st = calloc(1, sizeof(*st));
	int rc;

	if (!st) {
		snprintf(why, GDR_BACKEND_WHY_LEN, "out of memory");
		return ENOMEM;
	}
	pthread_mutex_init(&st->lock, NULL);
	rc = load_vulkan(st, why);
	if (rc == 0)
		rc = find_gpus(st, why);
	if (rc == 0)
		rc = load_cuda(st, why);
	if (rc) {
		vulkan_release(st);
		return rc;
	}
	check_cuda_pins(st);
	if (st->pins_cuda_memory)
		gdr_info("vulkan backend: GPU memory from gdr_alloc_mapped() or from cuMemCreate with a POSIX fd handle is reached through BAR1; no kernel module needed");
	else
		gdr_info("vulkan backend: GPU memory is allocated with gdr_alloc_mapped() and reached through BAR1; no kernel module needed; CUDA's own allocations cannot be pinned: %s",
			 st->no_cuda_pins_why);
	g->backend_priv = st;
	return 0;
}

/* Caller holds st->lock.  Create the logical device with external-memory export on first use. */
static int gpu_device(struct vulkan_state *st, struct vulkan_gpu *gpu)
{
	static const char *const extensions[] = { "VK_KHR_external_memory", "VK_KHR_external_memory_fd" };
	static const float priority = 1.0f;
	struct gvk_device_queue_create_info queue = {
		.s_type = GVK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		.queue_family_index = 0,
		.queue_count = 1,
		.queue_priorities = &priority,
	};
	struct gvk_device_create_info info = {
		.s_type = GVK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
		.queue_create_info_count = 1,
		.queue_create_infos = &queue,
		.enabled_extension_count = 2,
		.enabled_extension_names = extensions,
	};
	gvk_result vr;

	if (gpu->device)
		return 0;
	vr = st->vk.vkCreateDevice(gpu->phys, &info, NULL, &gpu->device);
	if (vr != GVK_SUCCESS) {
		gdr_err("vulkan backend: vkCreateDevice with VK_KHR_external_memory_fd on %s failed (VkResult %d): the Vulkan driver cannot share memory with CUDA",
			gpu->name, vr);
		gpu->device = NULL;
		return ENOTSUP;
	}
#define DEVICE_FN(fn) (*(void **)&gpu->api.fn = (void *)st->vk.vkGetDeviceProcAddr(gpu->device, #fn))
	DEVICE_FN(vkDestroyDevice);
	DEVICE_FN(vkAllocateMemory);
	DEVICE_FN(vkFreeMemory);
	DEVICE_FN(vkMapMemory);
	DEVICE_FN(vkUnmapMemory);
	DEVICE_FN(vkGetMemoryFdKHR);
#undef DEVICE_FN
	if (!gpu->api.vkDestroyDevice || !gpu->api.vkAllocateMemory || !gpu->api.vkFreeMemory ||
	    !gpu->api.vkMapMemory || !gpu->api.vkUnmapMemory || !gpu->api.vkGetMemoryFdKHR) {
		gdr_err("vulkan backend: the Vulkan device %s lacks memory or fd-export entry points", gpu->name);
		if (gpu->api.vkDestroyDevice)
			gpu->api.vkDestroyDevice(gpu->device, NULL);
		gpu->device = NULL;
		return ENOTSUP;
	}
	return 0;
}

/* The CUDA device of the calling thread's context (or GPU 0) and the matching Vulkan GPU. */
static int target_gpu(struct vulkan_state *st, CUdevice *cuda_device, struct vulkan_gpu **gpu)
{
	unsigned char uuid[16];
	CUcontext ctx = NULL;
	unsigned int i;
	CUresult cr;

	if (gdr_cuda.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx) {
		cr = gdr_cuda.cuCtxGetDevice(cuda_device);
	} else {
		cr = gdr_cuda.cuDeviceGet(cuda_device, 0);
	}
	if (cr != CUDA_SUCCESS) {
		gdr_err("gdr_alloc_mapped: cannot tell which GPU to allocate on: %s", gdr_cuda_strerror(cr));
		return ENODEV;
	}
	cr = gdr_cuda.cuDeviceGetUuid(uuid, *cuda_device);
	if (cr != CUDA_SUCCESS) {
		gdr_err("gdr_alloc_mapped: cuDeviceGetUuid failed: %s", gdr_cuda_strerror(cr));
		return ENODEV;
	}
	for (i = 0; i < st->gpu_count; i++) {
		if (memcmp(st->gpus[i].uuid, uuid, sizeof(uuid)) != 0)
			continue;
		if (st->gpus[i].memory_type < 0) {
			gdr_err("gdr_alloc_mapped: %s exposes no device-local host-visible memory to Vulkan (BAR1 too small or resizable BAR off)",
				st->gpus[i].name);
			return ENOTSUP;
		}
		*gpu = &st->gpus[i];
		return 0;
	}
	gdr_err("gdr_alloc_mapped: CUDA device %d is not among the GPUs Vulkan sees; check VK_DRIVER_FILES and CUDA_VISIBLE_DEVICES",
		*cuda_device);
	return ENODEV;
}

/* Import the exported fd into CUDA in the calling thread's context, borrowing the primary one if none. */
static int import_into_cuda(struct vulkan_allocation *a, int fd)
{
	struct cuda_external_memory_handle_desc handle = {
		.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
		.handle.fd = fd,
		.size = a->size,
	};
	struct cuda_external_memory_buffer_desc buffer = { .offset = 0, .size = a->size };
	CUresult cr;

	cr = gdr_cuda_ctx_borrow(&a->ctx, a->ctx.dev);
	if (cr != CUDA_SUCCESS) {
		gdr_err("gdr_alloc_mapped: cannot retain the primary context: %s", gdr_cuda_strerror(cr));
		close(fd);
		return ENODEV;
	}
	cr = gdr_cuda.cuImportExternalMemory(&a->external, &handle);
	if (cr != CUDA_SUCCESS) {
		gdr_err("gdr_alloc_mapped: cuImportExternalMemory(OPAQUE_FD) failed: %s", gdr_cuda_strerror(cr));
		close(fd);	/* CUDA owns the fd only when the import succeeds */
		a->external = NULL;
	} else {
		cr = gdr_cuda.cuExternalMemoryGetMappedBuffer(&a->gpu_ptr, a->external, &buffer);
		if (cr != CUDA_SUCCESS)
			gdr_err("gdr_alloc_mapped: cuExternalMemoryGetMappedBuffer failed: %s", gdr_cuda_strerror(cr));
	}
	gdr_cuda_ctx_detach(&a->ctx);
	if (cr != CUDA_SUCCESS) {
		if (a->external)
			gdr_cuda.cuDestroyExternalMemory(a->external);
		gdr_cuda_ctx_release(&a->ctx);	/* the allocation keeps it only when it exists */
		return EIO;
	}
	return 0;
}

/* Caller holds st->lock; a is unlinked already. */
static void release_allocation(struct vulkan_allocation *a)
{
	CUcontext current = NULL;
	bool switched = false;

	if (gdr_cuda.cuCtxGetCurrent(&current) != CUDA_SUCCESS || current != a->ctx.ctx) {
		gdr_cuda.cuCtxSetCurrent(a->ctx.ctx);
		switched = true;
	}
	gdr_cuda.cuMemFree(a->gpu_ptr);
	gdr_cuda.cuDestroyExternalMemory(a->external);
	if (switched)
		gdr_cuda.cuCtxSetCurrent(current);
	gdr_cuda_ctx_release(&a->ctx);
	a->gpu->api.vkUnmapMemory(a->gpu->device, a->memory);
	a->gpu->api.vkFreeMemory(a->gpu->device, a->memory, NULL);
	free(a);
}

static int vulkan_alloc_mapped(struct gdr *g, size_t size, uint64_t *gpu_ptr, void **cpu_ptr)
{
	struct vulkan_state *st = g->backend_priv;
	struct gvk_export_memory_allocate_info export_info = {
		.s_type = GVK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO,
		.handle_types = GVK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
	};
	struct gvk_memory_allocate_info alloc_info = {
		.s_type = GVK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
		.next = &export_info,
	};
	struct gvk_memory_get_fd_info fd_info = {
		.s_type = GVK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR,
		.handle_type = GVK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
	};
	struct vulkan_allocation *a;
	gvk_result vr;
	int fd = -1, rc;

	if (size == 0 || size > UINT64_MAX - GPU_PAGE) {
		gdr_err("gdr_alloc_mapped: size %zu is not a valid allocation size", size);
		return EINVAL;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		return ENOMEM;
	a->size = (size + GPU_PAGE - 1) & ~(GPU_PAGE - 1);

	pthread_mutex_lock(&st->lock);
	rc = target_gpu(st, &a->ctx.dev, &a->gpu);
	if (rc == 0)
		rc = gpu_device(st, a->gpu);
	if (rc)
		goto fail;
	alloc_info.allocation_size = a->size;
	alloc_info.memory_type_index = (uint32_t)a->gpu->memory_type;
	vr = a->gpu->api.vkAllocateMemory(a->gpu->device, &alloc_info, NULL, &a->memory);
	if (vr != GVK_SUCCESS) {
		gdr_err("gdr_alloc_mapped: vkAllocateMemory of %llu bytes of BAR1-visible memory on %s failed (VkResult %d): BAR1 or GPU memory exhausted?",
			(unsigned long long)a->size, a->gpu->name, vr);
		rc = ENOMEM;
		goto fail;
	}
	vr = a->gpu->api.vkMapMemory(a->gpu->device, a->memory, 0, a->size, 0, &a->cpu_ptr);
	if (vr != GVK_SUCCESS) {
		gdr_err("gdr_alloc_mapped: vkMapMemory failed (VkResult %d)", vr);
		rc = ENOMEM;
		goto fail_free;
	}
	fd_info.memory = a->memory;
	vr = a->gpu->api.vkGetMemoryFdKHR(a->gpu->device, &fd_info, &fd);
	if (vr != GVK_SUCCESS) {
		gdr_err("gdr_alloc_mapped: vkGetMemoryFdKHR failed (VkResult %d)", vr);
		rc = ENOTSUP;
		goto fail_unmap;
	}
	rc = import_into_cuda(a, fd);
	if (rc)
		goto fail_unmap;
	if (a->gpu_ptr & (GPU_PAGE - 1)) {
		gdr_err("gdr_alloc_mapped: CUDA placed the imported memory at %#llx, not on a 64 KiB GPU page", a->gpu_ptr);
		rc = EIO;
		goto fail_release;
	}
	a->next = st->allocations;
	st->allocations = a;
	pthread_mutex_unlock(&st->lock);
	*gpu_ptr = a->gpu_ptr;
	*cpu_ptr = a->cpu_ptr;
	gdr_dbg("gdr_alloc_mapped: %llu bytes on %s: GPU %#llx, CPU %p", (unsigned long long)a->size, a->gpu->name,
		a->gpu_ptr, a->cpu_ptr);
	return 0;

fail_release:
	release_allocation(a);
	pthread_mutex_unlock(&st->lock);
	return rc;
fail_unmap:
	a->gpu->api.vkUnmapMemory(a->gpu->device, a->memory);
fail_free:
	a->gpu->api.vkFreeMemory(a->gpu->device, a->memory, NULL);
fail:
	pthread_mutex_unlock(&st->lock);
	free(a);
	return rc;
}

static int vulkan_free_mapped(struct gdr *g, uint64_t gpu_ptr)
{
	struct vulkan_state *st = g->backend_priv;
	struct vulkan_allocation **link, *a;
	int rc = EINVAL;

	pthread_mutex_lock(&st->lock);
	for (link = &st->allocations; (a = *link) != NULL; link = &a->next) {
		if (a->gpu_ptr != gpu_ptr)
			continue;
		if (a->pins) {
			gdr_err("gdr_free_mapped: %#llx is still pinned %u time(s); unpin it first",
				(unsigned long long)gpu_ptr, a->pins);
			rc = EBUSY;
			break;
		}
		*link = a->next;
		release_allocation(a);
		rc = 0;
		break;
	}
	pthread_mutex_unlock(&st->lock);
	if (rc == EINVAL)
		gdr_err("gdr_free_mapped: %#llx was not returned by gdr_alloc_mapped()", (unsigned long long)gpu_ptr);
	return rc;
}

static void unpin_import(struct vulkan_state *st, struct vulkan_import *imp);

static void vulkan_close(struct gdr *g)
{
	struct vulkan_state *st = g->backend_priv;
	struct vulkan_allocation *a;

	pthread_mutex_lock(&st->lock);
	/* gdr_close() unpinned every buffer, and with them every import. */
	while (st->imports) {
		gdr_warn("gdr_close: an import of CUDA memory at %#llx outlived its pins", st->imports->base);
		st->imports->pins = 1;
		unpin_import(st, st->imports);
	}
	while ((a = st->allocations) != NULL) {
		st->allocations = a->next;
		gdr_warn("gdr_close: freeing %llu bytes at %#llx that gdr_free_mapped() never freed",
			 (unsigned long long)a->size, a->gpu_ptr);
		release_allocation(a);
	}
	pthread_mutex_unlock(&st->lock);
	vulkan_release(st);
	g->backend_priv = NULL;
}

/* CUDA's answer for a pointer that no cuMemCreate allocation covers (cuMemAlloc memory, host memory). */
#define CUDA_ERROR_INVALID_VALUE 1

/* Caller holds st->lock.  The Vulkan GPU that CUDA device dev is, or NULL with the reason logged. */
static struct vulkan_gpu *gpu_of_cuda_device(struct vulkan_state *st, CUdevice dev, uint64_t addr)
{
	unsigned char uuid[16];
	unsigned int i;
	CUresult cr;

	cr = gdr_cuda.cuDeviceGetUuid(uuid, dev);
	if (cr != CUDA_SUCCESS) {
		gdr_err("gdr_pin_buffer: %#llx lives on CUDA device %d, whose UUID CUDA does not tell (%s)",
			(unsigned long long)addr, dev, gdr_cuda_strerror(cr));
		return NULL;
	}
	for (i = 0; i < st->gpu_count; i++) {
		struct vulkan_gpu *gpu = &st->gpus[i];

		if (memcmp(gpu->uuid, uuid, sizeof(uuid)) != 0)
			continue;
		if (gpu->memory_type < 0) {
			gdr_err("gdr_pin_buffer: %#llx lives on CUDA device %d (%s), which exposes no device-local host-visible memory to Vulkan (BAR1 too small or resizable BAR off): load gdrdrv to pin it",
				(unsigned long long)addr, dev, gpu->name);
			return NULL;
		}
		if (!gpu->imports_opaque_fd) {
			gdr_err("gdr_pin_buffer: %#llx lives on CUDA device %d (%s), whose Vulkan driver cannot import opaque fds: update the NVIDIA Vulkan driver, or load gdrdrv",
				(unsigned long long)addr, dev, gpu->name);
			return NULL;
		}
		return gpu;
	}
	gdr_err("gdr_pin_buffer: %#llx lives on CUDA device %d, which is not among the GPUs Vulkan sees (a different GPU, or hidden from Vulkan): check VK_DRIVER_FILES and CUDA_VISIBLE_DEVICES, or load gdrdrv",
		(unsigned long long)addr, dev);
	return NULL;
}

/* Caller holds st->lock.  Import the retained allocation [base, +size) into Vulkan and map it. */
static int import_into_vulkan(struct vulkan_state *st, struct vulkan_import *imp)
{
	struct gvk_import_memory_fd_info import_info = {
		.s_type = GVK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR,
		.handle_type = GVK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
		.fd = -1,
	};
	struct gvk_memory_allocate_info alloc_info = {
		.s_type = GVK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
		.next = &import_info,
		.allocation_size = imp->size,
		.memory_type_index = (uint32_t)imp->gpu->memory_type,
	};
	struct vulkan_gpu *gpu = imp->gpu;
	gvk_result vr;
	CUresult cr;
	int rc;

	cr = gdr_cuda.cuMemExportToShareableHandle(&import_info.fd, imp->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
	if (cr != CUDA_SUCCESS) {
		gdr_err("gdr_pin_buffer: cuMemExportToShareableHandle(POSIX fd) of the allocation at %#llx failed: %s; load gdrdrv to pin it",
			imp->base, gdr_cuda_strerror(cr));
		return EINVAL;
	}
	rc = gpu_device(st, gpu);
	if (rc) {
		close(import_info.fd);
		return rc;
	}
	vr = gpu->api.vkAllocateMemory(gpu->device, &alloc_info, NULL, &imp->memory);
	if (vr != GVK_SUCCESS) {
		close(import_info.fd);	/* Vulkan owns the fd only when the import succeeds */
		gdr_err("gdr_pin_buffer: Vulkan could not import the %llu-byte allocation at %#llx on %s into its BAR1 memory type (vkAllocateMemory with an opaque fd: VkResult %d); load gdrdrv to pin it",
			(unsigned long long)imp->size, imp->base, gpu->name, vr);
		return vr == GVK_ERROR_OUT_OF_DEVICE_MEMORY ? ENOMEM : EIO;
	}
	vr = gpu->api.vkMapMemory(gpu->device, imp->memory, 0, imp->size, 0, &imp->cpu_ptr);
	if (vr != GVK_SUCCESS) {
		gpu->api.vkFreeMemory(gpu->device, imp->memory, NULL);
		gdr_err("gdr_pin_buffer: vkMapMemory of the %llu-byte allocation at %#llx failed (VkResult %d): BAR1 space exhausted?",
			(unsigned long long)imp->size, imp->base, vr);
		return ENOMEM;
	}
	return 0;
}

/*
 * Caller holds st->lock.  The import of the caller's cuMemCreate allocation
 * around [addr, end), shared with earlier pins of it or made now; one more
 * pin counted on it.  EINVAL, with the reason logged, for memory it is not.
 */
static int pin_cuda_allocation(struct vulkan_state *st, uint64_t addr, uint64_t end, struct vulkan_import **out)
{
	struct cuda_mem_allocation_prop prop;
	CUmemGenericAllocationHandle handle = 0;
	struct vulkan_import *imp;
	struct vulkan_gpu *gpu;
	struct gdr_cuda_ctx ctx;
	CUdeviceptr base = 0;
	size_t size = 0;
	CUresult cr;
	int rc = EINVAL;

	if (!st->pins_cuda_memory) {
		gdr_err("gdr_pin_buffer: %#llx is not inside memory from gdr_alloc_mapped(), and this vulkan backend cannot pin memory CUDA allocated: %s",
			(unsigned long long)addr, st->no_cuda_pins_why);
		return EINVAL;
	}
	/* cuMemGetAddressRange wants a context; any of this process's names the same addresses. */
	cr = gdr_cuda_ctx_borrow(&ctx, 0);
	if (cr != CUDA_SUCCESS) {
		gdr_err("gdr_pin_buffer: no CUDA context to look %#llx up in: %s", (unsigned long long)addr,
			gdr_cuda_strerror(cr));
		return ENODEV;
	}
	cr = gdr_cuda.cuMemRetainAllocationHandle(&handle, (void *)(uintptr_t)addr);
	if (cr != CUDA_SUCCESS) {
		gdr_err("gdr_pin_buffer: %#llx is not cuMemCreate memory (cuMemRetainAllocationHandle: %s%s); the vulkan backend cannot pin cuMemAlloc/cudaMalloc or host memory: allocate with cuMemCreate requesting CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, or load gdrdrv",
			(unsigned long long)addr, gdr_cuda_strerror(cr),
			cr == CUDA_ERROR_INVALID_VALUE ? ", as for memory with no allocation handle" : "");
		goto out;
	}
	memset(&prop, 0, sizeof(prop));
	cr = gdr_cuda.cuMemGetAllocationPropertiesFromHandle(&prop, handle);
	if (cr != CUDA_SUCCESS) {
		gdr_err("gdr_pin_buffer: cuMemGetAllocationPropertiesFromHandle for %#llx failed: %s",
			(unsigned long long)addr, gdr_cuda_strerror(cr));
		goto release;
	}
	if (prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
		gdr_err("gdr_pin_buffer: %#llx is cuMemCreate memory located in host memory (location type %d), not GPU memory: there is nothing to map through BAR1",
			(unsigned long long)addr, prop.location.type);
		goto release;
	}
	if (!(prop.requested_handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
		gdr_err("gdr_pin_buffer: %#llx is cuMemCreate memory that requested no shareable POSIX fd handle (requestedHandleTypes %#x), so it cannot be exported to Vulkan: allocate with cuMemCreate requesting CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, or load gdrdrv",
			(unsigned long long)addr, (unsigned int)prop.requested_handle_types);
		goto release;
	}
	gpu = gpu_of_cuda_device(st, prop.location.id, addr);
	if (!gpu)
		goto release;
	cr = gdr_cuda.cuMemGetAddressRange(&base, &size, addr);
	if (cr != CUDA_SUCCESS) {
		gdr_err("gdr_pin_buffer: cuMemGetAddressRange(%#llx) failed: %s", (unsigned long long)addr,
			gdr_cuda_strerror(cr));
		goto release;
	}
	if (end > base + size || (base & (GPU_PAGE - 1))) {
		gdr_err("gdr_pin_buffer: [%#llx, +%llu) does not lie inside one 64 KiB-aligned cuMemCreate allocation (this one is [%#llx, +%zu)): pin within one allocation",
			(unsigned long long)addr, (unsigned long long)(end - addr), base, size);
		goto release;
	}
	for (imp = st->imports; imp; imp = imp->next) {
		if (imp->handle == handle && imp->base == base && imp->size == size) {
			gdr_dbg("gdr_pin_buffer: %#llx shares the import of the allocation at %#llx (%u pins before)",
				(unsigned long long)addr, base, imp->pins);
			imp->pins++;
			gdr_cuda.cuMemRelease(handle);	/* the import holds its own reference */
			*out = imp;
			rc = 0;
			goto out;
		}
	}
	imp = calloc(1, sizeof(*imp));
	if (!imp) {
		rc = ENOMEM;
		goto release;
	}
	*imp = (struct vulkan_import){ .gpu = gpu, .handle = handle, .base = base, .size = size, .pins = 1 };
	rc = import_into_vulkan(st, imp);
	if (rc) {
		free(imp);
		goto release;
	}
	imp->next = st->imports;
	st->imports = imp;
	gdr_dbg("gdr_pin_buffer: imported the %llu-byte cuMemCreate allocation at %#llx on %s: CPU %p",
		(unsigned long long)size, base, gpu->name, imp->cpu_ptr);
	*out = imp;
	goto out;
release:
	gdr_cuda.cuMemRelease(handle);
out:
	gdr_cuda_ctx_detach(&ctx);
	gdr_cuda_ctx_release(&ctx);
	return rc;
}

/* Caller holds st->lock.  The last pin of an import gives the memory back to CUDA. */
static void unpin_import(struct vulkan_state *st, struct vulkan_import *imp)
{
	struct vulkan_import **link;

	if (--imp->pins)
		return;
	for (link = &st->imports; *link != imp; link = &(*link)->next)
		;
	*link = imp->next;
	imp->gpu->api.vkUnmapMemory(imp->gpu->device, imp->memory);
	imp->gpu->api.vkFreeMemory(imp->gpu->device, imp->memory, NULL);
	gdr_cuda.cuMemRelease(imp->handle);
	free(imp);
}

static int vulkan_pin(struct gdr *g, struct gdr_memh *mh, const struct gdr_pin_request *req)
{
	struct vulkan_state *st = g->backend_priv;
	uint64_t addr = req->addr, end;
	struct vulkan_allocation *a;
	struct vulkan_pin *pin;
	int rc = 0;

	if (addr + req->size < addr) {
		gdr_err("gdr_pin_buffer: [%#llx, +%zu) wraps around", (unsigned long long)addr, req->size);
		return EINVAL;
	}
	end = addr + req->size;
	pin = calloc(1, sizeof(*pin));
	if (!pin)
		return ENOMEM;
	pthread_mutex_lock(&st->lock);
	for (a = st->allocations; a; a = a->next)
		if (addr >= a->gpu_ptr && end <= a->gpu_ptr + a->size)
			break;
	if (a) {
		a->pins++;
		pin->alloc = a;
		pin->gpu = a->gpu;
		pin->gpu_base = a->gpu_ptr;
		pin->cpu_base = a->cpu_ptr;
	} else {
		rc = pin_cuda_allocation(st, addr, end, &pin->import);
		if (rc == 0) {
			pin->gpu = pin->import->gpu;
			pin->gpu_base = pin->import->base;
			pin->cpu_base = pin->import->cpu_ptr;
		}
	}
	pthread_mutex_unlock(&st->lock);
	if (rc) {
		free(pin);
		return rc;
	}
	pin->start = addr & ~(GPU_PAGE - 1);
	pin->size = ((end + GPU_PAGE - 1) & ~(GPU_PAGE - 1)) - pin->start;
	mh->backend_priv = pin;
	mh->pinned_addr = req->addr;
	mh->pinned_size = req->size;
	mh->pin_flags = req->flags;
	return 0;
}

static int vulkan_unpin(struct gdr *g, struct gdr_memh *mh)
{
	struct vulkan_state *st = g->backend_priv;
	struct vulkan_pin *pin = mh->backend_priv;

	pthread_mutex_lock(&st->lock);
	if (pin->alloc)
		pin->alloc->pins--;
	else
		unpin_import(st, pin->import);
	pthread_mutex_unlock(&st->lock);
	free(pin);
	mh->backend_priv = NULL;
	return 0;
}

static int vulkan_map(struct gdr *g, struct gdr_memh *mh, size_t size, gdr_mapping_type_t requested, void **va,
		      gdr_mapping_type_t *type)
{
	struct vulkan_pin *pin = mh->backend_priv;
	gdr_mapping_type_t have = pin->gpu->mapping_type;

	(void)g;
	if (requested != GDR_MAPPING_TYPE_NONE && requested != have) {
		gdr_err("gdr_map: the vulkan backend maps this memory as %s only, not %s", gdr_mapping_type_name(have),
			gdr_mapping_type_name(requested));
		return EINVAL;
	}
	if (mh->pinned_addr != pin->start) {
		gdr_err("gdr_map: buffer %#lx does not start on a 64 KiB GPU page and cannot be mapped (as with gdrdrv); pin from an aligned address and add the offset",
			mh->pinned_addr);
		return EINVAL;
	}
	if (size > pin->size) {
		gdr_err("gdr_map: %zu bytes asked, but the pin covers %llu", size, (unsigned long long)pin->size);
		return EINVAL;
	}
	*va = (char *)pin->cpu_base + (pin->start - pin->gpu_base);
	*type = have;
	return 0;
}

static int vulkan_unmap(struct gdr *g, struct gdr_memh *mh, void *va, size_t size)
{
	/* The allocation's mapping stays until gdr_free_mapped(); nothing to undo. */
	(void)g;
	(void)mh;
	(void)va;
	(void)size;
	return 0;
}

static int vulkan_get_info(struct gdr *g, struct gdr_memh *mh, gdr_info_v2_t *info)
{
	struct vulkan_pin *pin = mh->backend_priv;

	(void)g;
	memset(info, 0, sizeof(*info));
	info->va = pin->start;
	info->mapped_size = pin->size;
	info->page_size = (uint32_t)GPU_PAGE;
	info->mapping_type = atomic_load(&mh->map_va) ? pin->gpu->mapping_type : GDR_MAPPING_TYPE_NONE;
	return 0;
}

static int vulkan_get_attr(struct gdr *g, gdr_attr_t attr, int *value)
{
	(void)g;
	switch (attr) {
	case GDR_ATTR_USE_PERSISTENT_MAPPING:
		*value = 1;	/* the allocation keeps the memory; there is no free callback */
		return 0;
	case GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE:
		*value = 1;	/* every mapping already goes through PCIe BAR1 */
		return 0;
	case GDR_ATTR_USING_DMA_BUF_MMAP:
		*value = 0;
		return 0;
	case GDR_ATTR_VMA_INHERITED_ON_FORK:
		*value = 1;	/* the NVIDIA driver maps BAR1 without VM_DONTCOPY: a fork child shares it */
		return 0;
	default:
		return EINVAL;
	}
}

static int vulkan_get_cb_flag(struct gdr *g, struct gdr_memh *mh, int *flag)
{
	(void)g;
	(void)mh;
	*flag = 0;
	return 0;
}

/*
 * The version of the gdrdrv interface this backend stands in for.  Consumers
 * read both numbers whatever this returns (NCCL, aws-ofi-nccl, NVSHMEM) and
 * enable GDRCopy when they are high enough, then pin their own cuMemCreate or
 * cudaMalloc memory.  So claim 2.6 only where such pins can work, and answer
 * 0.0, which fails every consumer's gate, where they cannot
 * (libgdrapi/README.md, "gdr_driver_get_version without gdrdrv").
 */
static int vulkan_driver_version(struct gdr *g, int *major, int *minor)
{
	struct vulkan_state *st = g->backend_priv;

	if (st->pins_cuda_memory) {
		*major = GDR_API_MAJOR_VERSION;
		*minor = GDR_API_MINOR_VERSION;
		return 0;
	}
	*major = 0;
	*minor = 0;
	gdr_err("gdr_driver_get_version: 0.0, so that consumers (NCCL, aws-ofi-nccl, MSCCL++) leave GDRCopy off: the vulkan backend stands in for gdrdrv only where it can pin memory CUDA allocated, and here it cannot: %s",
		st->no_cuda_pins_why);
	return ENODEV;
}

const struct gdr_backend_ops gdr_backend_vulkan = {
	.name = "vulkan",
	.only_when_asked = true,
	.open = vulkan_open,
	.close = vulkan_close,
	.pin = vulkan_pin,
	.unpin = vulkan_unpin,
	.map = vulkan_map,
	.unmap = vulkan_unmap,
	.get_info = vulkan_get_info,
	.get_attr = vulkan_get_attr,
	.get_cb_flag = vulkan_get_cb_flag,
	.driver_version = vulkan_driver_version,
	.alloc_mapped = vulkan_alloc_mapped,
	.free_mapped = vulkan_free_mapped,
};
