// SPDX-License-Identifier: MIT
/*
 * A fake Vulkan loader (libvulkan.so.1) with one GPU, and the CUDA
 * external-memory calls the vulkan backend needs, for fakes.c's dlopen and
 * CUDA symbol table.  "BAR1" allocations are ordinary heap memory, so
 * AddressSanitizer sees any access past an allocation the library makes.
 * Thread-safe.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda_external_memory.h"
#include "vulkan_min.h"
#include "fakes.h"

#define GPU_PAGE_BYTES (64UL * 1024)
#define VK_ERROR_OUT_OF_DEVICE_MEMORY (-2)
#define VK_ERROR_INITIALIZATION_FAILED (-3)
#define VK_ERROR_MEMORY_MAP_FAILED (-5)
#define VK_ERROR_INVALID_EXTERNAL_HANDLE (-1000072003)
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_INVALID_DEVICE 101
/* Where the fake CUDA puts imported memory: far from anything fake gdrdrv or dma-buf uses. */
#define IMPORT_BASE 0x7d0000000000ULL

typedef int CUresult;

static pthread_mutex_t vk_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_vulkan_config vk_cfg;
static char vulkan_token;	/* its address is the fake libvulkan handle */
static char instance_token, physical_token, device_token;
static unsigned int live_instances, live_devices, live_memories, live_imports;
static uint64_t heap_used;
static unsigned long long next_import = IMPORT_BASE;

/* The fake device's UUID, which the fake cuDeviceGetUuid reports too. */
static const uint8_t gpu_uuid[16] = { 0x67, 0x64, 0x72, 0x66, 0x75, 0x7a, 0x7a, 0x00,
				      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01 };

struct fake_vmm;

struct fake_vk_memory {
	uint64_t size;
	void *ptr;
	bool mapped;
	struct fake_vmm *imported;	/* the CUDA allocation this memory imports, or NULL */
};

/* A cuMemCreate allocation: physical memory (a memfd) and, until the caller frees it, its mapping. */
struct fake_vmm {
	struct fake_vmm *next;
	unsigned long long handle;	/* the CUmemGenericAllocationHandle value */
	unsigned long addr;		/* the "GPU" address; 0 once the caller unmapped it */
	size_t size;
	int fd;
	ino_t inode;			/* recognises its exported fds */
	int handle_types;
	int device;
	unsigned int refs;		/* cuMemCreate's handle + retains */
	unsigned int imports;		/* Vulkan memory objects importing it */
};

static struct fake_vmm *vmms;
static unsigned long long next_vmm_handle = 0x1000;

struct fake_import {
	uint64_t size;
	unsigned long long gpu_ptr;
};

void fake_vulkan_set(const struct fake_vulkan_config *cfg)
{
	pthread_mutex_lock(&vk_lock);
	vk_cfg = *cfg;
	pthread_mutex_unlock(&vk_lock);
}

/* Caller holds vk_lock.  Physical memory goes once neither a handle nor an import refers to it. */
static void vmm_put(struct fake_vmm *v)
{
	struct fake_vmm **link;

	if (v->refs || v->imports)
		return;
	for (link = &vmms; *link != v; link = &(*link)->next)
		;
	*link = v->next;
	close(v->fd);
	free(v);
}

void fake_vulkan_reset(void)
{
	pthread_mutex_lock(&vk_lock);
	memset(&vk_cfg, 0, sizeof(vk_cfg));
	/* What a test left behind: unmapped and dropped, imports included (their test failed already). */
	while (vmms) {
		struct fake_vmm *v = vmms;

		if (v->addr)
			munmap((void *)v->addr, v->size);
		vmms = v->next;
		close(v->fd);
		free(v);
	}
	pthread_mutex_unlock(&vk_lock);
}

unsigned long fake_cuda_vmm_create(size_t size, int handle_types, int device)
{
	struct fake_vmm *v = calloc(1, sizeof(*v));
	struct stat st;
	void *va;

	if (!v)
		return 0;
	v->fd = memfd_create("fake-cumemcreate", MFD_CLOEXEC);
	if (v->fd < 0 || ftruncate(v->fd, (off_t)size) < 0 || fstat(v->fd, &st) < 0) {
		if (v->fd >= 0)
			close(v->fd);
		free(v);
		return 0;
	}
	/* cuMemCreate sizes are granularity multiples (2 MiB on the H200), so at least 64 KiB aligned. */
	va = mmap(NULL, size + GPU_PAGE_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (va == MAP_FAILED) {
		close(v->fd);
		free(v);
		return 0;
	}
	v->addr = ((unsigned long)va + GPU_PAGE_BYTES - 1) & ~(GPU_PAGE_BYTES - 1);
	munmap(va, size + GPU_PAGE_BYTES);
	if (mmap((void *)v->addr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, v->fd, 0) == MAP_FAILED) {
		close(v->fd);
		free(v);
		return 0;
	}
	v->size = size;
	v->inode = st.st_ino;
	v->handle_types = handle_types;
	v->device = device;
	v->refs = 1;
	pthread_mutex_lock(&vk_lock);
	v->handle = next_vmm_handle++;
	v->next = vmms;
	vmms = v;
	pthread_mutex_unlock(&vk_lock);
	return v->addr;
}

void fake_cuda_vmm_free(unsigned long addr)
{
	struct fake_vmm *v;

	pthread_mutex_lock(&vk_lock);
	for (v = vmms; v; v = v->next) {
		if (v->addr != addr)
			continue;
		munmap((void *)v->addr, v->size);
		v->addr = 0;
		v->refs--;
		vmm_put(v);
		break;
	}
	pthread_mutex_unlock(&vk_lock);
	if (!v)
		abort();	/* a test freed what it never created */
}

unsigned int fake_cuda_vmm_live(void)
{
	struct fake_vmm *v;
	unsigned int n = 0;

	pthread_mutex_lock(&vk_lock);
	for (v = vmms; v; v = v->next)
		n++;
	pthread_mutex_unlock(&vk_lock);
	return n;
}

unsigned int fake_cuda_vmm_imports(void)
{
	struct fake_vmm *v;
	unsigned int n = 0;

	pthread_mutex_lock(&vk_lock);
	for (v = vmms; v; v = v->next)
		n += v->imports;
	pthread_mutex_unlock(&vk_lock);
	return n;
}

unsigned int fake_cuda_vmm_refs(unsigned long addr)
{
	struct fake_vmm *v;
	unsigned int n = 0;

	pthread_mutex_lock(&vk_lock);
	for (v = vmms; v; v = v->next)
		if (v->addr == addr)
			n = v->refs;
	pthread_mutex_unlock(&vk_lock);
	return n;
}

unsigned int fake_vulkan_live_objects(void)
{
	unsigned int n;

	pthread_mutex_lock(&vk_lock);
	n = live_instances + live_devices + live_memories + live_imports;
	pthread_mutex_unlock(&vk_lock);
	return n;
}

/* ---- instance level ---- */

static gvk_result vk_create_instance(const struct gvk_instance_create_info *info, const void *allocator,
				     gvk_instance *instance)
{
	(void)info;
	(void)allocator;
	pthread_mutex_lock(&vk_lock);
	live_instances++;
	pthread_mutex_unlock(&vk_lock);
	*instance = (gvk_instance)&instance_token;
	return GVK_SUCCESS;
}

static void vk_destroy_instance(gvk_instance instance, const void *allocator)
{
	(void)allocator;
	if (instance != (gvk_instance)&instance_token)
		abort();
	pthread_mutex_lock(&vk_lock);
	live_instances--;
	pthread_mutex_unlock(&vk_lock);
}

static gvk_result vk_enumerate_physical_devices(gvk_instance instance, uint32_t *count, gvk_physical_device *devices)
{
	(void)instance;
	if (!devices) {
		*count = 1;
		return GVK_SUCCESS;
	}
	if (*count < 1)
		return 5;	/* VK_INCOMPLETE */
	devices[0] = (gvk_physical_device)&physical_token;
	*count = 1;
	return GVK_SUCCESS;
}

static void vk_get_physical_device_properties2(gvk_physical_device dev, struct gvk_physical_device_properties2 *props)
{
	const struct gvk_physical_device_id_properties *next = props->next;

	(void)dev;
	memset(props->properties, 0, sizeof(props->properties));
	strcpy((char *)props->properties + GVK_PHYSICAL_DEVICE_NAME_OFFSET, "Fake GPU");
	for (; next; next = next->next) {
		if (next->s_type == GVK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES)
			memcpy(((struct gvk_physical_device_id_properties *)next)->device_uuid, gpu_uuid,
			       sizeof(gpu_uuid));
	}
}

static void vk_get_physical_device_memory_properties(gvk_physical_device dev,
						     struct gvk_physical_device_memory_properties *props)
{
	(void)dev;
	memset(props, 0, sizeof(*props));
	/* Type 0: plain device-local VRAM; type 1: host memory; type 2: BAR1, if the config has it. */
	props->memory_heap_count = 2;
	props->memory_heaps[0].size = vk_cfg.heap_size;
	props->memory_heaps[1].size = 1ULL << 34;
	props->memory_types[0].property_flags = GVK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
	props->memory_types[0].heap_index = 0;
	props->memory_types[1].property_flags = GVK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | GVK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
	props->memory_types[1].heap_index = 1;
	props->memory_type_count = 2;
	if (vk_cfg.bar1_visible) {
		props->memory_types[2].property_flags = GVK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
							GVK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
							GVK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
							(vk_cfg.host_cached ? GVK_MEMORY_PROPERTY_HOST_CACHED_BIT : 0);
		props->memory_types[2].heap_index = 0;
		props->memory_type_count = 3;
	}
}

static gvk_result vk_create_device(gvk_physical_device phys, const struct gvk_device_create_info *info,
				   const void *allocator, gvk_device *dev)
{
	(void)allocator;
	if (phys != (gvk_physical_device)&physical_token || !info)
		abort();
	if (vk_cfg.create_device_fails)
		return VK_ERROR_INITIALIZATION_FAILED;
	pthread_mutex_lock(&vk_lock);
	live_devices++;
	pthread_mutex_unlock(&vk_lock);
	*dev = (gvk_device)&device_token;
	return GVK_SUCCESS;
}

/* ---- device level ---- */

static void vk_destroy_device(gvk_device dev, const void *allocator)
{
	(void)allocator;
	if (dev != (gvk_device)&device_token)
		abort();
	pthread_mutex_lock(&vk_lock);
	live_devices--;
	pthread_mutex_unlock(&vk_lock);
}

/*
 * VkImportMemoryFdInfoKHR: an opaque fd that CUDA exported.  As the spec
 * asks, allocationSize must be the exported allocation's size; Vulkan owns
 * the fd once the import succeeds, the caller keeps it otherwise.
 */
static gvk_result import_memory(const struct gvk_memory_allocate_info *info, gvk_device_memory *out)
{
	const struct gvk_import_memory_fd_info *import = info->next;
	struct fake_vk_memory *mem;
	struct fake_vmm *v;
	struct stat st;

	if (import->s_type != GVK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR || import->next ||
	    import->handle_type != GVK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT)
		abort();	/* the library chains nothing else */
	if (fstat(import->fd, &st) < 0)
		return VK_ERROR_INVALID_EXTERNAL_HANDLE;
	pthread_mutex_lock(&vk_lock);
	for (v = vmms; v; v = v->next)
		if (v->inode == st.st_ino)
			break;
	if (!v || info->allocation_size != v->size) {
		pthread_mutex_unlock(&vk_lock);
		return VK_ERROR_INVALID_EXTERNAL_HANDLE;
	}
	mem = calloc(1, sizeof(*mem));
	if (mem)
		mem->ptr = mmap(NULL, v->size, PROT_READ | PROT_WRITE, MAP_SHARED, import->fd, 0);
	if (!mem || mem->ptr == MAP_FAILED) {
		pthread_mutex_unlock(&vk_lock);
		free(mem);
		return VK_ERROR_OUT_OF_DEVICE_MEMORY;
	}
	mem->size = v->size;
	mem->imported = v;
	v->imports++;
	pthread_mutex_unlock(&vk_lock);
	close(import->fd);
	*out = (gvk_device_memory)mem;
	return GVK_SUCCESS;
}

static gvk_result vk_allocate_memory(gvk_device dev, const struct gvk_memory_allocate_info *info,
				     const void *allocator, gvk_device_memory *out)
{
	struct fake_vk_memory *mem;

	(void)allocator;
	if (dev != (gvk_device)&device_token || info->memory_type_index != 2)
		abort();	/* the library must pick the BAR1 type */
	if (info->next && *(const int32_t *)info->next == GVK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR)
		return import_memory(info, out);
	pthread_mutex_lock(&vk_lock);
	if (info->allocation_size == 0 || info->allocation_size > vk_cfg.heap_size - heap_used) {
		pthread_mutex_unlock(&vk_lock);
		return VK_ERROR_OUT_OF_DEVICE_MEMORY;
	}
	mem = calloc(1, sizeof(*mem));
	if (mem)
		mem->ptr = aligned_alloc(4096, info->allocation_size);
	if (!mem || !mem->ptr) {
		pthread_mutex_unlock(&vk_lock);
		free(mem);
		return VK_ERROR_OUT_OF_DEVICE_MEMORY;
	}
	mem->size = info->allocation_size;
	heap_used += mem->size;
	live_memories++;
	pthread_mutex_unlock(&vk_lock);
	*out = (gvk_device_memory)mem;
	return GVK_SUCCESS;
}

static void vk_free_memory(gvk_device dev, gvk_device_memory memory, const void *allocator)
{
	struct fake_vk_memory *mem = (struct fake_vk_memory *)memory;

	(void)allocator;
	if (dev != (gvk_device)&device_token)
		abort();
	if (!mem)
		return;
	if (mem->mapped)
		abort();	/* the library unmaps before it frees */
	pthread_mutex_lock(&vk_lock);
	if (mem->imported) {
		munmap(mem->ptr, mem->size);
		mem->imported->imports--;
		vmm_put(mem->imported);
		pthread_mutex_unlock(&vk_lock);
		free(mem);
		return;
	}
	heap_used -= mem->size;
	live_memories--;
	pthread_mutex_unlock(&vk_lock);
	free(mem->ptr);
	free(mem);
}

static gvk_result vk_map_memory(gvk_device dev, gvk_device_memory memory, uint64_t offset, uint64_t size,
				uint32_t flags, void **data)
{
	struct fake_vk_memory *mem = (struct fake_vk_memory *)memory;

	(void)flags;
	if (dev != (gvk_device)&device_token || mem->mapped || offset > mem->size || size > mem->size - offset)
		return VK_ERROR_MEMORY_MAP_FAILED;
	mem->mapped = true;
	*data = (char *)mem->ptr + offset;
	return GVK_SUCCESS;
}

static void vk_unmap_memory(gvk_device dev, gvk_device_memory memory)
{
	struct fake_vk_memory *mem = (struct fake_vk_memory *)memory;

	if (dev != (gvk_device)&device_token || !mem->mapped)
		abort();
	mem->mapped = false;
}

static gvk_result vk_get_memory_fd(gvk_device dev, const struct gvk_memory_get_fd_info *info, int *fd)
{
	if (dev != (gvk_device)&device_token || !info->memory)
		abort();
	if (vk_cfg.export_fails)
		return VK_ERROR_OUT_OF_DEVICE_MEMORY;
	/* Any real fd will do: whoever ends up owning it closes it. */
	*fd = memfd_create("fake-vulkan-export", MFD_CLOEXEC);
	return *fd >= 0 ? GVK_SUCCESS : VK_ERROR_OUT_OF_DEVICE_MEMORY;
}

static gvk_void_function vk_get_device_proc_addr(gvk_device dev, const char *name)
{
	static const struct { const char *name; gvk_void_function fn; } table[] = {
		{ "vkDestroyDevice", (gvk_void_function)vk_destroy_device },
		{ "vkAllocateMemory", (gvk_void_function)vk_allocate_memory },
		{ "vkFreeMemory", (gvk_void_function)vk_free_memory },
		{ "vkMapMemory", (gvk_void_function)vk_map_memory },
		{ "vkUnmapMemory", (gvk_void_function)vk_unmap_memory },
		{ "vkGetMemoryFdKHR", (gvk_void_function)vk_get_memory_fd },
	};
	size_t i;

	if (dev != (gvk_device)&device_token)
		abort();
	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (strcmp(table[i].name, name) == 0)
			return table[i].fn;
	return NULL;
}

static void vk_get_physical_device_external_buffer_properties(gvk_physical_device dev,
								const struct gvk_physical_device_external_buffer_info *info,
								struct gvk_external_buffer_properties *props)
{
	if (dev != (gvk_physical_device)&physical_token || props->s_type != GVK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES)
		abort();
	props->external_memory_features = 0;
	props->export_from_imported_handle_types = 0;
	props->compatible_handle_types = 0;
	if (info->handle_type == GVK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT && !vk_cfg.no_opaque_fd_import) {
		props->external_memory_features = 0x2 | GVK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT;	/* + EXPORTABLE */
		props->export_from_imported_handle_types = GVK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
		props->compatible_handle_types = GVK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
	}
}

static gvk_void_function vk_get_instance_proc_addr(gvk_instance instance, const char *name)
{
	static const struct { const char *name; gvk_void_function fn; } table[] = {
		{ "vkDestroyInstance", (gvk_void_function)vk_destroy_instance },
		{ "vkEnumeratePhysicalDevices", (gvk_void_function)vk_enumerate_physical_devices },
		{ "vkGetPhysicalDeviceProperties2", (gvk_void_function)vk_get_physical_device_properties2 },
		{ "vkGetPhysicalDeviceMemoryProperties", (gvk_void_function)vk_get_physical_device_memory_properties },
		{ "vkCreateDevice", (gvk_void_function)vk_create_device },
		{ "vkGetDeviceProcAddr", (gvk_void_function)vk_get_device_proc_addr },
		{ "vkGetPhysicalDeviceExternalBufferProperties",
		  (gvk_void_function)vk_get_physical_device_external_buffer_properties },
	};
	size_t i;

	if (!instance)
		return strcmp(name, "vkCreateInstance") == 0 ? (gvk_void_function)vk_create_instance : NULL;
	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (strcmp(table[i].name, name) == 0)
			return table[i].fn;
	return NULL;
}

/* ---- the loader, for fakes.c's dlopen/dlsym/dlclose ---- */

void *fake_vulkan_dlopen(void)
{
	return vk_cfg.present ? &vulkan_token : NULL;
}

bool fake_vulkan_is_handle(const void *handle)
{
	return handle == &vulkan_token;
}

void *fake_vulkan_dlsym(const char *name)
{
	return strcmp(name, "vkGetInstanceProcAddr") == 0 ? (void *)vk_get_instance_proc_addr : NULL;
}

/* ---- the CUDA side: external memory ---- */

/* Device 1 is a second GPU that CUDA sees and the fake Vulkan does not. */
static CUresult cu_device_get_uuid(unsigned char uuid[16], int dev)
{
	if (dev != 0 && dev != 1)
		return CUDA_ERROR_INVALID_DEVICE;
	memcpy(uuid, gpu_uuid, sizeof(gpu_uuid));
	uuid[15] += (unsigned char)dev;
	return 0;
}

static CUresult cu_ctx_get_device(int *dev)
{
	*dev = 0;
	return 0;
}

static CUresult cu_import_external_memory(struct fake_import **out, const struct cuda_external_memory_handle_desc *desc)
{
	struct fake_import *imp;

	if (desc->type != CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD || desc->handle.fd < 0 || desc->size == 0 || vk_cfg.import_fails)
		return 1;	/* CUDA_ERROR_INVALID_VALUE; the fd stays the caller's */
	imp = calloc(1, sizeof(*imp));
	if (!imp)
		return 2;
	imp->size = desc->size;
	close(desc->handle.fd);	/* CUDA owns the fd once the import succeeds */
	pthread_mutex_lock(&vk_lock);
	live_imports++;
	pthread_mutex_unlock(&vk_lock);
	*out = imp;
	return 0;
}

static CUresult cu_external_memory_get_mapped_buffer(unsigned long long *ptr, struct fake_import *imp,
						     const struct cuda_external_memory_buffer_desc *desc)
{
	if (!imp || desc->offset > imp->size || desc->size > imp->size - desc->offset)
		return 1;
	pthread_mutex_lock(&vk_lock);
	imp->gpu_ptr = next_import;
	next_import += (imp->size + GPU_PAGE_BYTES - 1) & ~(GPU_PAGE_BYTES - 1);
	next_import += GPU_PAGE_BYTES;	/* a gap, so that ranges of two allocations never touch */
	if (vk_cfg.misaligned_import)
		imp->gpu_ptr += 4096;
	pthread_mutex_unlock(&vk_lock);
	*ptr = imp->gpu_ptr + desc->offset;
	return 0;
}

static CUresult cu_destroy_external_memory(struct fake_import *imp)
{
	if (!imp)
		return 1;
	pthread_mutex_lock(&vk_lock);
	live_imports--;
	pthread_mutex_unlock(&vk_lock);
	free(imp);
	return 0;
}

static CUresult cu_mem_free(unsigned long long ptr)
{
	(void)ptr;
	return 0;
}

/* ---- the CUDA side: cuMemCreate allocations (the real driver's answers, measured on the H200) ---- */

/* Caller holds vk_lock. */
static struct fake_vmm *vmm_by_handle(unsigned long long handle)
{
	struct fake_vmm *v;

	for (v = vmms; v; v = v->next)
		if (v->handle == handle && v->refs)
			return v;
	return NULL;
}

/* Caller holds vk_lock.  The mapped allocation covering addr. */
static struct fake_vmm *vmm_by_address(unsigned long long addr)
{
	struct fake_vmm *v;

	for (v = vmms; v; v = v->next)
		if (v->addr && addr >= v->addr && addr - v->addr < v->size)
			return v;
	return NULL;
}

/* cuMemAlloc memory and host memory have no allocation handle: CUDA_ERROR_INVALID_VALUE. */
static CUresult cu_mem_retain_allocation_handle(unsigned long long *handle, void *addr)
{
	struct fake_vmm *v;

	pthread_mutex_lock(&vk_lock);
	v = vmm_by_address((unsigned long)addr);
	if (v) {
		v->refs++;
		*handle = v->handle;
	}
	pthread_mutex_unlock(&vk_lock);
	return v ? 0 : CUDA_ERROR_INVALID_VALUE;
}

static CUresult cu_mem_release(unsigned long long handle)
{
	struct fake_vmm *v;

	pthread_mutex_lock(&vk_lock);
	v = vmm_by_handle(handle);
	if (v) {
		v->refs--;
		vmm_put(v);
	}
	pthread_mutex_unlock(&vk_lock);
	return v ? 0 : CUDA_ERROR_INVALID_VALUE;
}

static CUresult cu_mem_get_allocation_properties_from_handle(struct cuda_mem_allocation_prop *prop,
							     unsigned long long handle)
{
	struct fake_vmm *v;

	pthread_mutex_lock(&vk_lock);
	v = vmm_by_handle(handle);
	if (v) {
		memset(prop, 0, sizeof(*prop));
		prop->type = 1;	/* CU_MEM_ALLOCATION_TYPE_PINNED */
		prop->requested_handle_types = v->handle_types;
		prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop->location.id = v->device;
	}
	pthread_mutex_unlock(&vk_lock);
	return v ? 0 : CUDA_ERROR_INVALID_VALUE;
}

/* Only a handle type the allocation asked for can be exported. */
static CUresult cu_mem_export_to_shareable_handle(void *shareable, unsigned long long handle, int type,
						  unsigned long long flags)
{
	struct fake_vmm *v;
	int fd = -1;

	pthread_mutex_lock(&vk_lock);
	v = vmm_by_handle(handle);
	if (v && flags == 0 && type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR && (v->handle_types & type))
		fd = fcntl(v->fd, F_DUPFD_CLOEXEC, 0);
	pthread_mutex_unlock(&vk_lock);
	if (fd < 0)
		return CUDA_ERROR_INVALID_VALUE;
	*(int *)shareable = fd;
	return 0;
}

/* The range of the mapped allocation around ptr, as for cuMemAlloc memory. */
static CUresult cu_mem_get_address_range(unsigned long long *base, size_t *size, unsigned long long ptr)
{
	struct fake_vmm *v;

	pthread_mutex_lock(&vk_lock);
	v = vmm_by_address(ptr);
	if (v) {
		*base = v->addr;
		*size = v->size;
	}
	pthread_mutex_unlock(&vk_lock);
	return v ? 0 : CUDA_ERROR_INVALID_VALUE;
}

void *fake_vulkan_cuda_symbol(const char *name)
{
	static const struct { const char *name; void *fn; } vmm_table[] = {
		{ "cuMemRetainAllocationHandle", (void *)cu_mem_retain_allocation_handle },
		{ "cuMemRelease", (void *)cu_mem_release },
		{ "cuMemGetAllocationPropertiesFromHandle", (void *)cu_mem_get_allocation_properties_from_handle },
		{ "cuMemExportToShareableHandle", (void *)cu_mem_export_to_shareable_handle },
		{ "cuMemGetAddressRange", (void *)cu_mem_get_address_range },
		{ "cuMemGetAddressRange_v2", (void *)cu_mem_get_address_range },
	};
	static const struct { const char *name; void *fn; } table[] = {
		{ "cuDeviceGetUuid", (void *)cu_device_get_uuid },
		{ "cuCtxGetDevice", (void *)cu_ctx_get_device },
		{ "cuImportExternalMemory", (void *)cu_import_external_memory },
		{ "cuExternalMemoryGetMappedBuffer", (void *)cu_external_memory_get_mapped_buffer },
		{ "cuDestroyExternalMemory", (void *)cu_destroy_external_memory },
		{ "cuMemFree", (void *)cu_mem_free },
	};
	size_t i;

	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (strcmp(table[i].name, name) == 0)
			return table[i].fn;
	for (i = 0; i < sizeof(vmm_table) / sizeof(vmm_table[0]) && !vk_cfg.no_vmm_calls; i++)
		if (strcmp(vmm_table[i].name, name) == 0)
			return vmm_table[i].fn;
	return NULL;
}
