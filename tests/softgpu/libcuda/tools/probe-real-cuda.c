/*
 * Probe a real CUDA driver for behaviour softgpu's libcuda imitates: the
 * width each pointer attribute writes, error codes on odd pointers, and how
 * cuMemAlloc packs small allocations.  Build on the GPU machine with
 *   gcc -I/usr/local/cuda/include tools/probe-real-cuda.c \
 *       -L/usr/local/nvidia/lib64 -lcuda -o probe
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>

/* CUDA 13 headers no longer declare the CUDA 12 default variant. */
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

static void show_attr(const char *what, CUpointer_attribute attr, CUdeviceptr ptr)
{
	unsigned char buf[16];
	CUresult rc;
	int i;

	memset(buf, 0xAA, sizeof(buf));
	rc = cuPointerGetAttribute(buf, attr, ptr);
	printf("%-10s attr %2d rc %3d bytes:", what, (int)attr, (int)rc);
	for (i = 0; i < 16; i++)
		printf(" %02x", buf[i]);
	printf("\n");
}

int main(void)
{
	CUdevice dev;
	CUcontext ctx;
	CUdeviceptr fa, a[4], small[4];
	CUmemGenericAllocationHandle h;
	CUmemAllocationProp prop;
	CUmemAccessDesc acc;
	CUdeviceptr vmm;
	size_t gran;
	void *host, *pageable = malloc(4096);
	int i, v, attr;

	cuInit(0);
	cuDeviceGet(&dev, 0);
	cuDevicePrimaryCtxRetain(&ctx, dev);
	cuCtxSetCurrent(ctx);
	cuMemAlloc(&fa, 65539);
	for (i = 0; i < 4; i++)
		cuMemAlloc(&a[i], 65540);
	printf("fa %llx a0 %llx a1 %llx a2 %llx a3 %llx\n", fa, a[0], a[1], a[2], a[3]);
	for (i = 0; i < 4; i++)
		cuMemAlloc(&small[i], 8);
	printf("small %llx %llx %llx %llx\n", small[0], small[1], small[2], small[3]);
	{
		CUdeviceptr big1, big2, mid;
		cuMemAlloc(&big1, 4 << 20);
		cuMemAlloc(&big2, (2 << 20) + 1);
		cuMemAlloc(&mid, 1 << 20);
		printf("big1 %llx big2 %llx mid %llx\n", big1, big2, mid);
	}
	for (attr = 1; attr <= 20; attr++)
		show_attr("device", attr, a[0] + 16);
	cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_DEVICEMAP);
	{
		CUdeviceptr dp;
		CUresult rc = cuMemHostGetDevicePointer(&dp, host, 0);
		printf("host %p devptr %llx rc %d\n", host, dp, rc);
	}
	for (attr = 1; attr <= 20; attr++)
		show_attr("hostalloc", attr, (CUdeviceptr)host + 8);
	for (attr = 1; attr <= 13; attr++)
		show_attr("pageable", attr, (CUdeviceptr)pageable);
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	prop.allocFlags.gpuDirectRDMACapable = 1;
	cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	printf("granularity min %zu\n", gran);
	cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
	printf("granularity rec %zu\n", gran);
	printf("create rc %d\n", cuMemCreate(&h, 4 * gran, &prop, 0));
	printf("reserve rc %d\n", cuMemAddressReserve(&vmm, 8 * gran, 0, 0, 0));
	printf("map rc %d\n", cuMemMap(vmm + gran, 2 * gran, gran, h, 0));
	acc.location = prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	printf("setaccess rc %d\n", cuMemSetAccess(vmm + gran, 2 * gran, &acc, 1));
	printf("vmm %llx\n", vmm);
	for (attr = 1; attr <= 20; attr++)
		show_attr("vmm", attr, vmm + gran + 100);
	printf("unmapped-in-reserve rc:\n");
	show_attr("vmmhole", CU_POINTER_ATTRIBUTE_MEMORY_TYPE, vmm + 100);
	printf("release-while-mapped rc %d\n", cuMemRelease(h));
	printf("addressfree-while-mapped rc %d\n", cuMemAddressFree(vmm, 8 * gran));
	printf("unmap rc %d\n", cuMemUnmap(vmm + gran, 2 * gran));
	printf("addressfree rc %d\n", cuMemAddressFree(vmm, 8 * gran));
	printf("free inner ptr rc %d\n", cuMemFree(a[0] + 16));
	printf("double free rc %d\n", cuMemFree(small[0]) + 1000 * cuMemFree(small[0]));
	printf("alloc 0 rc %d\n", cuMemAlloc(&fa, 0));
	cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, dev);
	printf("pageable-uses-host-pt %d\n", v);
	{
		const char *s;
		char bus[64];
		printf("geterrorname(12345) rc %d\n", cuGetErrorName(12345, &s));
		cuGetErrorString(CUDA_ERROR_NO_DEVICE, &s);
		printf("string(100) %s\n", s);
		cuGetErrorName(CUDA_ERROR_NO_DEVICE, &s);
		printf("name(100) %s\n", s);
		cuDeviceGetPCIBusId(bus, sizeof(bus), dev);
		printf("busid %s\n", bus);
		printf("busid short rc %d\n", cuDeviceGetPCIBusId(bus, 5, dev));
	}
	{
		void *pfn;
		CUdriverProcAddressQueryResult st;
		CUresult rc = cuGetProcAddress("cuMemAlloc", &pfn, 13000, 0, &st);
		printf("gpa cuMemAlloc rc %d st %d same_v2 %d\n", rc, st, pfn == (void *)cuMemAlloc_v2);
		rc = cuGetProcAddress("cuCtxCreate", &pfn, 12000, 0, &st);
		printf("gpa cuCtxCreate@12000 v2 %d v4 %d\n", pfn == (void *)cuCtxCreate_v2, pfn == (void *)cuCtxCreate_v4);
		rc = cuGetProcAddress("cuCtxCreate", &pfn, 13000, 0, &st);
		printf("gpa cuCtxCreate@13000 v2 %d v4 %d\n", pfn == (void *)cuCtxCreate_v2, pfn == (void *)cuCtxCreate_v4);
		rc = cuGetProcAddress("cuMemCreate", &pfn, 10000, 0, &st);
		printf("gpa cuMemCreate@10000 rc %d st %d\n", rc, st);
		rc = cuGetProcAddress("cuNoSuch", &pfn, 13000, 0, &st);
		printf("gpa nosuch rc %d st %d pfn %p\n", rc, st, pfn);
		rc = cuGetProcAddress("cuMemAlloc_v2", &pfn, 13000, 0, &st);
		printf("gpa cuMemAlloc_v2 rc %d st %d\n", rc, st);
	}
	return 0;
}
