// SPDX-License-Identifier: MIT
/*
 * A C program built only from what the gdrcopy wheel carries (gdrapi.h and
 * libgdrapi.so.2, found through `python -m gdrcopy --includes/--libs` or its
 * pkg-config file), as NVSHMEM or NIXL builders would: prints the library's
 * interface version and backends, and opens it.
 */
#include <stdio.h>

#include <gdrapi.h>

int main(void)
{
	int major = 0, minor = 0;
	gdr_t g;

	gdr_runtime_get_version(&major, &minor);
	printf("libgdrapi %d.%d (header %d.%d), backends: ", major, minor, GDR_API_MAJOR_VERSION,
	       GDR_API_MINOR_VERSION);
#ifdef GDRAPI_HAVE_BACKEND_LIST
	fputs(gdr_get_backend_list(), stdout);
#else
	putchar('\n');
#endif
#ifdef GDRAPI_HAVE_OPEN_EX
	/* It pins nothing, so it may say that it pins only what the vulkan backend can. */
	g = gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN);
#else
	g = gdr_open();
#endif
	if (!g) {
#ifdef GDRAPI_HAVE_BACKEND_LIST
		printf("gdr_open failed:\n%s", gdr_get_open_failure());
#endif
		return 1;
	}
	printf("gdr_open: the %s backend\n", gdr_get_backend_name(g));
	gdr_close(g);
	return 0;
}
