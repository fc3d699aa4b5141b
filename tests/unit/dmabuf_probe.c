// SPDX-License-Identifier: MIT
/*
 * The dma-buf backend against a real CUDA driver: allocate with cuMemAlloc,
 * then gdr_open / pin / map / copy with GDRCOPY_USE_DMABUF_MMAP=1, printing
 * every result so that what the driver refuses, and how the library explains
 * it, can be read off.  Needs libcuda.so.1 and a GPU; not part of check.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdrapi.h"

typedef int (*cu_init_fn)(unsigned int);
typedef int (*cu_device_get_fn)(int *, int);
typedef int (*cu_primary_retain_fn)(void **, int);
typedef int (*cu_ctx_set_fn)(void *);
typedef int (*cu_mem_alloc_fn)(unsigned long long *, size_t);

int main(void)
{
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
	unsigned long long dptr = 0;
	void *ctx = NULL, *va = NULL;
	size_t size = 2 << 20;
	char buf[64] = "hello";
	gdr_mh_t mh;
	int dev, rc;
	gdr_t g;

	if (!cuda) {
		printf("no libcuda.so.1: %s\n", dlerror());
		return 2;
	}
	rc = ((cu_init_fn)dlsym(cuda, "cuInit"))(0);
	rc = rc ? rc : ((cu_device_get_fn)dlsym(cuda, "cuDeviceGet"))(&dev, 0);
	rc = rc ? rc : ((cu_primary_retain_fn)dlsym(cuda, "cuDevicePrimaryCtxRetain"))(&ctx, dev);
	rc = rc ? rc : ((cu_ctx_set_fn)dlsym(cuda, "cuCtxSetCurrent"))(ctx);
	rc = rc ? rc : ((cu_mem_alloc_fn)dlsym(cuda, "cuMemAlloc_v2"))(&dptr, size + (64 << 10));
	if (rc) {
		printf("CUDA setup failed: %d\n", rc);
		return 2;
	}
	dptr = (dptr + 0xffff) & ~0xffffULL;
	setenv("GDRCOPY_USE_DMABUF_MMAP", "1", 0);
	g = gdr_open();
	printf("gdr_open: %s (errno %d)\n", g ? "ok" : "failed", g ? 0 : errno);
	if (!g)
		return 1;
	printf("backend: %s\n", gdr_get_backend_name(g));
	rc = gdr_pin_buffer(g, dptr, size, 0, 0, &mh);
	printf("gdr_pin_buffer: %d (%s)\n", rc, strerror(rc));
	if (rc == 0) {
		rc = gdr_map(g, mh, &va, size);
		printf("gdr_map: %d (%s)\n", rc, strerror(rc));
		if (rc == 0) {
			rc = gdr_copy_to_mapping(mh, va, buf, sizeof(buf));
			printf("gdr_copy_to_mapping: %d\n", rc);
			gdr_unmap(g, mh, va, size);
		}
		gdr_unpin_buffer(g, mh);
	}
	printf("gdr_close: %d\n", gdr_close(g));
	return 0;
}
