// SPDX-License-Identifier: MIT
/* A program that uses the post-2.6 copy-engine extension (GDRAPI_2.6.1). */
#include <stdio.h>
#include <string.h>

#include "gdrapi.h"

int main(void)
{
	char src[7] = "abcdef", dst[7] = { 0 };

	if (gdr_copy_to_mapped_memory(GDR_MAPPING_TYPE_CACHING, dst, src, sizeof(src)) != 0 ||
	    memcmp(src, dst, sizeof(src)) != 0)
		return 1;
	printf("copied %zu\n", sizeof(dst));
	return 0;
}
