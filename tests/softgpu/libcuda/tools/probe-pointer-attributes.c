/*
 * What the driver answers to cuPointerGetAttributes and cuDeviceCanAccessPeer
 * (libfabric's CUDA hmem resolves both): device memory, an offset into it,
 * host malloc memory, a pointer nobody allocated, NULL arguments; every
 * output pre-filled with a sentinel so "left untouched" shows.  Built against
 * whichever cuda.h and libcuda it is given; its output on the real driver is
 * kept next to it (probe-pointer-attributes-on-h200.out: driver 580.159.04,
 * 2026-12-02).  softgpu answers the same but for SYNC_MEMOPS of fresh
 * cuMemAlloc memory, which its cuPointerGetAttribute gives as 1, the H200 0.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SENTINEL 0xa5

static const struct {
	CUpointer_attribute attr;
	const char *name;
	size_t size;
} attrs[] = {
	{ CU_POINTER_ATTRIBUTE_CONTEXT, "CONTEXT", sizeof(CUcontext) },
	{ CU_POINTER_ATTRIBUTE_MEMORY_TYPE, "MEMORY_TYPE", sizeof(unsigned int) },
	{ CU_POINTER_ATTRIBUTE_DEVICE_POINTER, "DEVICE_POINTER", sizeof(CUdeviceptr) },
	{ CU_POINTER_ATTRIBUTE_HOST_POINTER, "HOST_POINTER", sizeof(void *) },
	{ CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, "SYNC_MEMOPS", sizeof(unsigned int) },
	{ CU_POINTER_ATTRIBUTE_BUFFER_ID, "BUFFER_ID", sizeof(unsigned long long) },
	{ CU_POINTER_ATTRIBUTE_IS_MANAGED, "IS_MANAGED", sizeof(unsigned int) },
	{ CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, "DEVICE_ORDINAL", sizeof(int) },
	{ CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, "RANGE_START_ADDR", sizeof(CUdeviceptr) },
	{ CU_POINTER_ATTRIBUTE_RANGE_SIZE, "RANGE_SIZE", sizeof(size_t) },
	{ CU_POINTER_ATTRIBUTE_MAPPED, "MAPPED", sizeof(unsigned int) },
};
#define NATTRS (sizeof(attrs) / sizeof(attrs[0]))

static void show(const char *what, CUdeviceptr ptr, CUdeviceptr base)
{
	CUpointer_attribute list[NATTRS];
	unsigned char store[NATTRS][16];
	void *data[NATTRS];

	for (size_t i = 0; i < NATTRS; i++) {
		list[i] = attrs[i].attr;
		memset(store[i], SENTINEL, sizeof(store[i]));
		data[i] = store[i];
	}
	CUresult rc = cuPointerGetAttributes(NATTRS, list, data, ptr);
	printf("%s: rc=%d\n", what, (int)rc);
	for (size_t i = 0; i < NATTRS; i++) {
		unsigned long long v = 0;
		int untouched = 1;
		for (size_t b = 0; b < attrs[i].size; b++)
			untouched &= store[i][b] == SENTINEL;
		memcpy(&v, store[i], attrs[i].size);
		if (untouched)
			printf("  %s: untouched\n", attrs[i].name);
		else if (attrs[i].attr == CU_POINTER_ATTRIBUTE_CONTEXT)
			printf("  %s: %s\n", attrs[i].name, v ? "a context" : "NULL");
		else if (attrs[i].attr == CU_POINTER_ATTRIBUTE_BUFFER_ID)
			printf("  %s: %s\n", attrs[i].name, v ? "nonzero" : "0");
		else if (attrs[i].attr == CU_POINTER_ATTRIBUTE_DEVICE_POINTER ||
			 attrs[i].attr == CU_POINTER_ATTRIBUTE_HOST_POINTER ||
			 attrs[i].attr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
			printf("  %s: %s%+lld\n", attrs[i].name, v ? "base" : "0", v ? (long long)(v - base) : 0LL);
		else if (attrs[i].attr == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
			printf("  %s: %d\n", attrs[i].name, (int)(unsigned int)v);
		else
			printf("  %s: %llu\n", attrs[i].name, v);
	}
}

int main(void)
{
	CUdevice dev;
	CUcontext ctx;
	CUdeviceptr d;
	int can = 77;

	if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) ||
	    cuMemAlloc(&d, 4 << 20)) {
		printf("setup failed\n");
		return 1;
	}
	show("cuMemAlloc 4 MiB, at its start", d, d);
	show("cuMemAlloc 4 MiB, 4096 bytes in", d + 4096, d);
	char *h = malloc(1 << 20);
	show("host malloc", (CUdeviceptr)(uintptr_t)h, (CUdeviceptr)(uintptr_t)h);
	show("never allocated (0x1000)", 0x1000, 0x1000);
	show("0", 0, 0);
	CUpointer_attribute one = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
	void *nodata = NULL;
	printf("NULL attributes: rc=%d\n", (int)cuPointerGetAttributes(1, NULL, &nodata, d));
	printf("NULL data: rc=%d\n", (int)cuPointerGetAttributes(1, &one, NULL, d));
	printf("numAttributes 0: rc=%d\n", (int)cuPointerGetAttributes(0, &one, &nodata, d));
	printf("cuDeviceCanAccessPeer(0, 0): rc=%d can=%d\n", (int)cuDeviceCanAccessPeer(&can, dev, dev), can);
	can = 77;
	printf("cuDeviceCanAccessPeer(0, 1): rc=%d can=%d\n", (int)cuDeviceCanAccessPeer(&can, dev, 1), can);
	can = 77;
	printf("cuDeviceCanAccessPeer(1, 0): rc=%d can=%d\n", (int)cuDeviceCanAccessPeer(&can, 1, dev), can);
	printf("cuDeviceCanAccessPeer(NULL): rc=%d\n", (int)cuDeviceCanAccessPeer(NULL, dev, dev));
	cuMemFree(d);
	free(h);
	return 0;
}
