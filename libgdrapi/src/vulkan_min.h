/* SPDX-License-Identifier: MIT */
/*
 * The few Vulkan 1.1 types the Vulkan backend uses, declared by us so the
 * library builds without Vulkan headers (libvulkan.so.1 is dlopen()ed at run
 * time).  Names carry a gvk_ prefix so this can sit beside the real header:
 * libgdrapi/tools/check_vulkan_min.c compares every layout and value with
 * <vulkan/vulkan.h> where it is installed (`make -C libgdrapi check-vulkan-abi`).
 */
#ifndef GDRAPI_VULKAN_MIN_H
#define GDRAPI_VULKAN_MIN_H

#include <stdint.h>

#define GVK_API_VERSION_1_1 ((1U << 22) | (1U << 12))
#define GVK_SUCCESS 0
#define GVK_MAX_MEMORY_TYPES 32
#define GVK_MAX_MEMORY_HEAPS 16
#define GVK_UUID_SIZE 16
#define GVK_LUID_SIZE 8

#define GVK_STRUCTURE_TYPE_APPLICATION_INFO 0
#define GVK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO 1
#define GVK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO 2
#define GVK_STRUCTURE_TYPE_DEVICE_CREATE_INFO 3
#define GVK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO 5
#define GVK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2 1000059001
#define GVK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES 1000071004
#define GVK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO 1000072002
#define GVK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR 1000074002
#define GVK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR 1000074000
#define GVK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO 1000071002
#define GVK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES 1000071003

#define GVK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT 0x1U
#define GVK_MEMORY_PROPERTY_HOST_VISIBLE_BIT 0x2U
#define GVK_MEMORY_PROPERTY_HOST_COHERENT_BIT 0x4U
#define GVK_MEMORY_PROPERTY_HOST_CACHED_BIT 0x8U
#define GVK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT 0x1U
#define GVK_EXTERNAL_MEMORY_FEATURE_DEDICATED_ONLY_BIT 0x1U
#define GVK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT 0x4U
#define GVK_BUFFER_USAGE_TRANSFER_SRC_BIT 0x1U
#define GVK_BUFFER_USAGE_TRANSFER_DST_BIT 0x2U

/* Dispatchable handles are pointers; non-dispatchable ones are pointers on 64-bit hosts. */
typedef struct gvk_instance_s *gvk_instance;
typedef struct gvk_physical_device_s *gvk_physical_device;
typedef struct gvk_device_s *gvk_device;
#if UINTPTR_MAX == 0xffffffffffffffffULL
typedef struct gvk_device_memory_s *gvk_device_memory;
#else
typedef uint64_t gvk_device_memory;
#endif
typedef int32_t gvk_result;
typedef void (*gvk_void_function)(void);

struct gvk_application_info {
	int32_t s_type;
	const void *next;
	const char *application_name;
	uint32_t application_version;
	const char *engine_name;
	uint32_t engine_version;
	uint32_t api_version;
};

struct gvk_instance_create_info {
	int32_t s_type;
	const void *next;
	uint32_t flags;
	const struct gvk_application_info *application_info;
	uint32_t enabled_layer_count;
	const char *const *enabled_layer_names;
	uint32_t enabled_extension_count;
	const char *const *enabled_extension_names;
};

/* VkPhysicalDeviceProperties is 824 bytes on LP64; we only need the device name at its start. */
#define GVK_PHYSICAL_DEVICE_PROPERTIES_SIZE 824
#define GVK_PHYSICAL_DEVICE_NAME_OFFSET 20
#define GVK_MAX_PHYSICAL_DEVICE_NAME_SIZE 256

struct gvk_physical_device_properties2 {
	int32_t s_type;
	void *next;
	_Alignas(8) unsigned char properties[GVK_PHYSICAL_DEVICE_PROPERTIES_SIZE];
};

struct gvk_physical_device_id_properties {
	int32_t s_type;
	void *next;
	uint8_t device_uuid[GVK_UUID_SIZE];
	uint8_t driver_uuid[GVK_UUID_SIZE];
	uint8_t device_luid[GVK_LUID_SIZE];
	uint32_t device_node_mask;
	uint32_t device_luid_valid;
};

struct gvk_memory_type {
	uint32_t property_flags;
	uint32_t heap_index;
};

struct gvk_memory_heap {
	uint64_t size;
	uint32_t flags;
};

struct gvk_physical_device_memory_properties {
	uint32_t memory_type_count;
	struct gvk_memory_type memory_types[GVK_MAX_MEMORY_TYPES];
	uint32_t memory_heap_count;
	struct gvk_memory_heap memory_heaps[GVK_MAX_MEMORY_HEAPS];
};

struct gvk_device_queue_create_info {
	int32_t s_type;
	const void *next;
	uint32_t flags;
	uint32_t queue_family_index;
	uint32_t queue_count;
	const float *queue_priorities;
};

struct gvk_device_create_info {
	int32_t s_type;
	const void *next;
	uint32_t flags;
	uint32_t queue_create_info_count;
	const struct gvk_device_queue_create_info *queue_create_infos;
	uint32_t enabled_layer_count;
	const char *const *enabled_layer_names;
	uint32_t enabled_extension_count;
	const char *const *enabled_extension_names;
	const void *enabled_features;
};

struct gvk_export_memory_allocate_info {
	int32_t s_type;
	const void *next;
	uint32_t handle_types;
};

struct gvk_memory_allocate_info {
	int32_t s_type;
	const void *next;
	uint64_t allocation_size;
	uint32_t memory_type_index;
};

struct gvk_memory_get_fd_info {
	int32_t s_type;
	const void *next;
	gvk_device_memory memory;
	uint32_t handle_type;
};

/* Importing an fd that another API (CUDA) exported. */
struct gvk_import_memory_fd_info {
	int32_t s_type;
	const void *next;
	uint32_t handle_type;
	int fd;
};

/* vkGetPhysicalDeviceExternalBufferProperties: can this device import a handle type at all. */
struct gvk_physical_device_external_buffer_info {
	int32_t s_type;
	const void *next;
	uint32_t flags;
	uint32_t usage;
	uint32_t handle_type;
};

struct gvk_external_buffer_properties {
	int32_t s_type;
	void *next;
	uint32_t external_memory_features;
	uint32_t export_from_imported_handle_types;
	uint32_t compatible_handle_types;
};

#endif /* GDRAPI_VULKAN_MIN_H */
