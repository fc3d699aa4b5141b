// SPDX-License-Identifier: MIT
/*
 * The public structs and enums of gdrapi.h are ABI: programs built against
 * GDRCopy 2.6's header pass them to this library.  A change to any size,
 * offset or value below fails the build here, before abidiff (./toolkit
 * lint) would notice it in the binary.  The numbers are those of GDRCopy
 * 2.6 on LP64 (x86_64, aarch64, ppc64le), the platforms it supports.
 */
#include <stddef.h>

#include "gdrapi.h"

#define ABI_SIZE(type, size) _Static_assert(sizeof(type) == (size), "sizeof(" #type ") is ABI")
#define ABI_OFFSET(type, field, offset) \
	_Static_assert(offsetof(type, field) == (offset), "offsetof(" #type ", " #field ") is ABI")
#define ABI_VALUE(name, value) _Static_assert((name) == (value), #name " is ABI")

#if defined(__LP64__)
ABI_SIZE(gdr_mh_t, 8);
ABI_OFFSET(gdr_mh_t, h, 0);

ABI_SIZE(gdr_info_v2_t, 48);
ABI_OFFSET(gdr_info_v2_t, va, 0);
ABI_OFFSET(gdr_info_v2_t, mapped_size, 8);
ABI_OFFSET(gdr_info_v2_t, page_size, 16);
ABI_OFFSET(gdr_info_v2_t, tm_cycles, 24);
ABI_OFFSET(gdr_info_v2_t, cycles_per_ms, 32);
ABI_OFFSET(gdr_info_v2_t, mapping_type, 40);
#endif

ABI_SIZE(gdr_mapping_type_t, 4);
ABI_SIZE(gdr_pin_flags_t, 4);
ABI_SIZE(gdr_map_flags_t, 4);
ABI_SIZE(gdr_attr_t, 4);

ABI_VALUE(GDR_PIN_FLAG_DEFAULT, 0);
ABI_VALUE(GDR_PIN_FLAG_FORCE_PCIE, 1);
ABI_VALUE(GDR_MAPPING_TYPE_NONE, 0);
ABI_VALUE(GDR_MAPPING_TYPE_WC, 1);
ABI_VALUE(GDR_MAPPING_TYPE_CACHING, 2);
ABI_VALUE(GDR_MAPPING_TYPE_DEVICE, 3);
ABI_VALUE(GDR_MAPPING_TYPE_MAX, 4);
ABI_VALUE(GDR_MAP_FLAG_DEFAULT, 0);
ABI_VALUE(GDR_MAP_FLAG_REQ_WC_MAPPING, 1);
ABI_VALUE(GDR_MAP_FLAG_REQ_CACHE_MAPPING, 2);
ABI_VALUE(GDR_MAP_FLAG_REQ_DEVICE_MAPPING, 3);
ABI_VALUE(GDR_ATTR_USE_PERSISTENT_MAPPING, 1);
ABI_VALUE(GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE, 2);
ABI_VALUE(GDR_ATTR_USING_DMA_BUF_MMAP, 3);
ABI_VALUE(GDR_ATTR_VMA_INHERITED_ON_FORK, 4);
ABI_VALUE(GDR_ATTR_MAX, 5);
ABI_VALUE(GPU_PAGE_SHIFT, 16);
