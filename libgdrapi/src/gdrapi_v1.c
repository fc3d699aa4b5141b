// SPDX-License-Identifier: MIT
/*
 * The gdr_get_info symbol of GDRCopy <= 2.3, kept for binaries built
 * against those headers.  gdrapi.h turns every new call of gdr_get_info into
 * gdr_get_info_v2, so this file must #undef the macro to define the old
 * entry point, with the old struct layout (no mapping_type).
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "gdrapi_info.h"
#include "gdrapi_v1.h"
#include "internal.h"

GDR_EXPORT int gdr_get_info(gdr_t g, gdr_mh_t handle, struct gdr_info_v1 *info);

GDR_EXPORT int gdr_get_info(gdr_t g, gdr_mh_t handle, struct gdr_info_v1 *info)
{
	gdr_info_v2_t v2;
	int rc;

	if (!info)
		return EINVAL;
	memset(&v2, 0, sizeof(v2));
	rc = gdr_get_info_common(g, handle, &v2, true);
	if (rc)
		return rc;
	info->va = v2.va;
	info->mapped_size = v2.mapped_size;
	info->page_size = v2.page_size;
	info->tm_cycles = v2.tm_cycles;
	info->cycles_per_ms = v2.cycles_per_ms;
	info->mapped = v2.mapped;
	info->wc_mapping = v2.wc_mapping;
	return 0;
}
