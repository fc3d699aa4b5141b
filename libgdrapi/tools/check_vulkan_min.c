/* SPDX-License-Identifier: MIT */
/*
 * Compile-time proof that src/vulkan_min.h matches the real Vulkan headers.
 * Built by `make -C libgdrapi check-vulkan-abi` where <vulkan/vulkan.h> exists;
 * it compiles only if every layout and constant agrees.
 */
#include <stddef.h>
#include <vulkan/vulkan.h>

#include "../src/vulkan_min.h"

#define SAME_SIZE(ours, theirs) _Static_assert(sizeof(struct ours) == sizeof(theirs), #ours " size")
#define SAME_OFFSET(ours, of, theirs, tf) \
	_Static_assert(offsetof(struct ours, of) == offsetof(theirs, tf), #ours "." #of " offset")
#define SAME_VALUE(ours, theirs) _Static_assert((ours) == (theirs), #ours " value")

SAME_VALUE(GVK_API_VERSION_1_1, VK_API_VERSION_1_1);
SAME_VALUE(GVK_MAX_MEMORY_TYPES, VK_MAX_MEMORY_TYPES);
SAME_VALUE(GVK_MAX_MEMORY_HEAPS, VK_MAX_MEMORY_HEAPS);
SAME_VALUE(GVK_UUID_SIZE, VK_UUID_SIZE);
SAME_VALUE(GVK_STRUCTURE_TYPE_APPLICATION_INFO, VK_STRUCTURE_TYPE_APPLICATION_INFO);
SAME_VALUE(GVK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
SAME_VALUE(GVK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
SAME_VALUE(GVK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
SAME_VALUE(GVK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
SAME_VALUE(GVK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
SAME_VALUE(GVK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES);
SAME_VALUE(GVK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO, VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO);
SAME_VALUE(GVK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR, VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR);
SAME_VALUE(GVK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
SAME_VALUE(GVK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
SAME_VALUE(GVK_MEMORY_PROPERTY_HOST_COHERENT_BIT, VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
SAME_VALUE(GVK_MEMORY_PROPERTY_HOST_CACHED_BIT, VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
SAME_VALUE(GVK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT, VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT);
SAME_VALUE(GVK_PHYSICAL_DEVICE_PROPERTIES_SIZE, sizeof(VkPhysicalDeviceProperties));
SAME_VALUE(GVK_PHYSICAL_DEVICE_NAME_OFFSET, offsetof(VkPhysicalDeviceProperties, deviceName));
SAME_VALUE(GVK_MAX_PHYSICAL_DEVICE_NAME_SIZE, VK_MAX_PHYSICAL_DEVICE_NAME_SIZE);
_Static_assert(sizeof(gvk_device_memory) == sizeof(VkDeviceMemory), "VkDeviceMemory");

SAME_SIZE(gvk_application_info, VkApplicationInfo);
SAME_OFFSET(gvk_application_info, api_version, VkApplicationInfo, apiVersion);
SAME_SIZE(gvk_instance_create_info, VkInstanceCreateInfo);
SAME_OFFSET(gvk_instance_create_info, enabled_extension_names, VkInstanceCreateInfo, ppEnabledExtensionNames);
SAME_SIZE(gvk_physical_device_properties2, VkPhysicalDeviceProperties2);
SAME_OFFSET(gvk_physical_device_properties2, properties, VkPhysicalDeviceProperties2, properties);
SAME_SIZE(gvk_physical_device_id_properties, VkPhysicalDeviceIDProperties);
SAME_OFFSET(gvk_physical_device_id_properties, device_uuid, VkPhysicalDeviceIDProperties, deviceUUID);
SAME_OFFSET(gvk_physical_device_id_properties, device_luid_valid, VkPhysicalDeviceIDProperties, deviceLUIDValid);
SAME_SIZE(gvk_physical_device_memory_properties, VkPhysicalDeviceMemoryProperties);
SAME_OFFSET(gvk_physical_device_memory_properties, memory_heap_count, VkPhysicalDeviceMemoryProperties, memoryHeapCount);
SAME_OFFSET(gvk_physical_device_memory_properties, memory_heaps, VkPhysicalDeviceMemoryProperties, memoryHeaps);
SAME_SIZE(gvk_memory_heap, VkMemoryHeap);
SAME_SIZE(gvk_device_queue_create_info, VkDeviceQueueCreateInfo);
SAME_OFFSET(gvk_device_queue_create_info, queue_priorities, VkDeviceQueueCreateInfo, pQueuePriorities);
SAME_SIZE(gvk_device_create_info, VkDeviceCreateInfo);
SAME_OFFSET(gvk_device_create_info, enabled_extension_names, VkDeviceCreateInfo, ppEnabledExtensionNames);
SAME_OFFSET(gvk_device_create_info, enabled_features, VkDeviceCreateInfo, pEnabledFeatures);
SAME_SIZE(gvk_export_memory_allocate_info, VkExportMemoryAllocateInfo);
SAME_SIZE(gvk_memory_allocate_info, VkMemoryAllocateInfo);
SAME_OFFSET(gvk_memory_allocate_info, memory_type_index, VkMemoryAllocateInfo, memoryTypeIndex);
SAME_SIZE(gvk_memory_get_fd_info, VkMemoryGetFdInfoKHR);
SAME_OFFSET(gvk_memory_get_fd_info, handle_type, VkMemoryGetFdInfoKHR, handleType);
SAME_VALUE(GVK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR, VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR);
SAME_VALUE(GVK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO);
SAME_VALUE(GVK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES, VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES);
SAME_VALUE(GVK_EXTERNAL_MEMORY_FEATURE_DEDICATED_ONLY_BIT, VK_EXTERNAL_MEMORY_FEATURE_DEDICATED_ONLY_BIT);
SAME_VALUE(GVK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT, VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT);
SAME_VALUE(GVK_BUFFER_USAGE_TRANSFER_SRC_BIT, VK_BUFFER_USAGE_TRANSFER_SRC_BIT);
SAME_VALUE(GVK_BUFFER_USAGE_TRANSFER_DST_BIT, VK_BUFFER_USAGE_TRANSFER_DST_BIT);
SAME_SIZE(gvk_import_memory_fd_info, VkImportMemoryFdInfoKHR);
SAME_OFFSET(gvk_import_memory_fd_info, fd, VkImportMemoryFdInfoKHR, fd);
SAME_SIZE(gvk_physical_device_external_buffer_info, VkPhysicalDeviceExternalBufferInfo);
SAME_OFFSET(gvk_physical_device_external_buffer_info, handle_type, VkPhysicalDeviceExternalBufferInfo, handleType);
SAME_SIZE(gvk_external_buffer_properties, VkExternalBufferProperties);
SAME_OFFSET(gvk_external_buffer_properties, external_memory_features, VkExternalBufferProperties,
	    externalMemoryProperties.externalMemoryFeatures);

int main(void)
{
	return 0;
}
