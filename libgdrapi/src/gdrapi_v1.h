/* SPDX-License-Identifier: MIT */
/*
 * The gdr_info layout of GDRCopy 2.0 - 2.3 (no mapping_type), taken by the
 * old gdr_get_info entry point that the library keeps for binaries built
 * against those headers.  gdrapi.h turns every new call of gdr_get_info into
 * gdr_get_info_v2, so including this file #undefs that macro: include it only
 * where the old entry point itself is defined or tested.
 */
#ifndef GDR_GDRAPI_V1_H
#define GDR_GDRAPI_V1_H

#include <stddef.h>
#include <stdint.h>

#include "gdrapi.h"

#undef gdr_get_info

struct gdr_info_v1 {
	uint64_t va;
	uint64_t mapped_size;
	uint32_t page_size;
	uint64_t tm_cycles;
	uint32_t cycles_per_ms;
	unsigned mapped:1;
	unsigned wc_mapping:1;
};

_Static_assert(sizeof(struct gdr_info_v1) == 40, "gdr_info v1 layout is ABI");
_Static_assert(offsetof(struct gdr_info_v1, tm_cycles) == 24, "gdr_info v1 layout is ABI");

#endif /* GDR_GDRAPI_V1_H */
