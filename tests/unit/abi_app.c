// SPDX-License-Identifier: MIT
/*
 * A program that uses both gdr_get_info symbols, built once against the
 * unversioned stand-in for GDRCopy's library and once against ours.  It
 * prints what it got, so run_tests.sh can tell which library answered.
 */
#include <stdio.h>

#include "gdrapi.h"

/* Old sources called the v1 symbol; keep one such call. */
#undef gdr_get_info
struct gdr_info_v1;
int gdr_get_info(gdr_t g, gdr_mh_t handle, struct gdr_info_v1 *info);

int main(void)
{
	gdr_mh_t none = { 0 };
	const char *type = "?";
	int major = -1, minor = -1;
	gdr_info_v2_t info;

	gdr_runtime_get_version(&major, &minor);
	gdr_get_mapping_type_string(GDR_MAPPING_TYPE_WC, &type);
	printf("version %d.%d type %s v1 %d v2 %d\n", major, minor, type, gdr_get_info(NULL, none, NULL),
	       gdr_get_info_v2(NULL, none, &info));
	return 0;
}
