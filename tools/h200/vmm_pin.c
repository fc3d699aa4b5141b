// SPDX-License-Identifier: MIT
/*
 * On a machine with a real CUDA driver and no gdrdrv (the H200): libgdrapi's
 * vulkan backend pins memory the program allocated itself with cuMemCreate
 * (a POSIX fd handle requested), as NCCL's cuMem buffers are: pinned at a
 * 64 KiB-aligned offset inside the allocation, mapped, written by the CPU
 * and read by cuMemcpyDtoH and the other way round; a second pin of the same
 * allocation; the allocation freed under a pin; and the reasons for what it
 * refuses (cuMemAlloc memory, cuMemCreate memory without a shareable handle).
 * Also the CUDA driver's own answers the fakes model (tests/unit/fake_vulkan.c).
 *
 * One line per check: "ok - ..." or "not ok - ..."; exit status 1 if any failed.
 * Run with GDRCOPY_ENABLE_LOGGING=1 to see the library's reasons on stderr.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <gdrapi.h>

#define GPU_PAGE (64UL * 1024)
#define PIN_SIZE (1UL << 20)

static int failures;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s - ", ok ? "ok" : "not ok");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	failures += !ok;
}

static void die_cuda(CUresult res, const char *what)
{
	const char *name = NULL;

	cuGetErrorName(res, &name);
	printf("not ok - %s: %s (%d)\n", what, name ? name : "?", res);
	exit(1);
}

#define CU(call)                                    \
	do {                                        \
		CUresult res_ = (call);             \
		if (res_ != CUDA_SUCCESS)           \
			die_cuda(res_, #call);      \
	} while (0)

struct vmm {
	CUdeviceptr ptr;
	size_t size;
	CUmemGenericAllocationHandle handle;
};

/* cuMemCreate + reserve + map + access, as NCCL's ncclCuMemAlloc does. */
static struct vmm vmm_alloc(CUdevice dev, size_t size, CUmemAllocationHandleType types)
{
	CUmemAllocationProp prop;
	CUmemAccessDesc access;
	size_t granularity = 0;
	struct vmm m;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	prop.requestedHandleTypes = types;
	prop.allocFlags.gpuDirectRDMACapable = 1;
	CU(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	m.size = (size + granularity - 1) / granularity * granularity;
	CU(cuMemCreate(&m.handle, m.size, &prop, 0));
	CU(cuMemAddressReserve(&m.ptr, m.size, granularity, 0, 0));
	CU(cuMemMap(m.ptr, m.size, 0, m.handle, 0));
	memset(&access, 0, sizeof(access));
	access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	access.location.id = dev;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CU(cuMemSetAccess(m.ptr, m.size, &access, 1));
	return m;
}

static void vmm_free(struct vmm *m)
{
	CU(cuMemUnmap(m->ptr, m->size));
	CU(cuMemRelease(m->handle));
	CU(cuMemAddressFree(m->ptr, m->size));
}

static void fill(unsigned char *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed + i * 13 + (i >> 8));
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* The CUDA driver's answers that the library's error messages and the unit-test fakes rely on. */
static void driver_facts(CUdevice dev)
{
	struct vmm plain = vmm_alloc(dev, 1, CU_MEM_HANDLE_TYPE_NONE);
	struct vmm fd = vmm_alloc(dev, 1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	CUmemGenericAllocationHandle h1 = 0, h2 = 0;
	CUdeviceptr dptr, base = 0;
	size_t size = 0;
	CUresult res;
	int shared_fd = -1;

	CU(cuMemAlloc(&dptr, 1 << 20));
	res = cuMemRetainAllocationHandle(&h1, (void *)dptr);
	printf("fact: cuMemRetainAllocationHandle(cuMemAlloc memory) = %d\n", res);
	res = cuMemRetainAllocationHandle(&h1, (void *)(fd.ptr + 3 * GPU_PAGE));
	printf("fact: cuMemRetainAllocationHandle(cuMemCreate memory + 192 KiB) = %d, handle %#llx (cuMemCreate gave %#llx)\n",
	       res, (unsigned long long)h1, (unsigned long long)fd.handle);
	res = cuMemRetainAllocationHandle(&h2, (void *)fd.ptr);
	printf("fact: a second retain = %d, handle %#llx (%s)\n", res, (unsigned long long)h2,
	       h1 == h2 ? "the same value" : "a different value");
	res = cuMemGetAddressRange(&base, &size, fd.ptr + 3 * GPU_PAGE);
	printf("fact: cuMemGetAddressRange(cuMemCreate memory + 192 KiB) = %d: base %s, size %zu (allocation %zu)\n", res,
	       base == fd.ptr ? "the allocation's" : "elsewhere", size, fd.size);
	res = cuMemExportToShareableHandle(&shared_fd, h1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
	printf("fact: cuMemExportToShareableHandle(POSIX fd requested) = %d, fd %d\n", res, shared_fd);
	if (shared_fd >= 0)
		close(shared_fd);
	cuMemRelease(h1);
	cuMemRelease(h2);
	CU(cuMemRetainAllocationHandle(&h1, (void *)plain.ptr));
	res = cuMemExportToShareableHandle(&shared_fd, h1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
	printf("fact: cuMemExportToShareableHandle(no handle type requested) = %d\n", res);
	cuMemRelease(h1);
	{
		unsigned int one = 1;

		res = cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, fd.ptr);
		printf("fact: cuPointerSetAttribute(SYNC_MEMOPS) on cuMemCreate memory = %d\n", res);
		res = cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, dptr);
		printf("fact: cuPointerSetAttribute(SYNC_MEMOPS) on cuMemAlloc memory = %d\n", res);
	}
	CU(cuMemFree(dptr));
	vmm_free(&plain);
	vmm_free(&fd);
}

int main(void)
{
	unsigned char *out = malloc(PIN_SIZE), *in = malloc(PIN_SIZE);
	int major = -1, minor = -1, rc, version = 0;
	struct vmm m, plain;
	CUdeviceptr pinned, dptr;
	gdr_mh_t mh, mh2, bad;
	void *map, *map2;
	gdr_info_t info;
	CUcontext ctx;
	CUdevice dev;
	gdr_t g;

	CU(cuInit(0));
	CU(cuDriverGetVersion(&version));
	printf("CUDA driver API %d.%d\n", version / 1000, version % 1000 / 10);
	CU(cuDeviceGet(&dev, 0));
	CU(cuDevicePrimaryCtxRetain(&ctx, dev));
	CU(cuCtxSetCurrent(ctx));
	driver_facts(dev);

	/* It pins only cuMemCreate (POSIX fd) memory, and says so: gdr_open() would not take vulkan. */
	g = gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN);
	if (!g) {
		printf("not ok - gdr_open_ex: %s\n", strerror(errno));
		return 1;
	}
	printf("backend: %s\n", gdr_get_backend_name(g));
	gdr_runtime_get_version(&major, &minor);
	printf("gdr_runtime_get_version: %d.%d\n", major, minor);
	major = minor = -1;
	rc = gdr_driver_get_version(g, &major, &minor);
	printf("gdr_driver_get_version: rc %d, %d.%d\n", rc, major, minor);
	check(rc == 0 && major == 2 && minor == 6, "gdr_driver_get_version is 2.6 where cuMemCreate memory pins");

	/* NCCL's ncclGdrCudaCalloc: size + 64 KiB - 1 allocated, the aligned address inside pinned. */
	m = vmm_alloc(dev, PIN_SIZE + GPU_PAGE - 1 + 3 * GPU_PAGE, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	pinned = m.ptr + 3 * GPU_PAGE;
	rc = gdr_pin_buffer(g, pinned, PIN_SIZE, 0, 0, &mh);
	check(rc == 0, "gdr_pin_buffer of cuMemCreate(POSIX fd) memory at allocation + 192 KiB (rc %d)", rc);
	if (rc)
		return 1;
	rc = gdr_map(g, mh, &map, PIN_SIZE);
	check(rc == 0, "gdr_map (rc %d)", rc);
	if (rc)
		return 1;
	rc = gdr_get_info(g, mh, &info);
	check(rc == 0 && info.va == pinned && info.mapped_size == PIN_SIZE && info.mapped,
	      "gdr_get_info: va %#llx (pinned %#llx), %llu bytes, mapping type %d", (unsigned long long)info.va,
	      (unsigned long long)pinned, (unsigned long long)info.mapped_size, info.mapping_type);

	fill(out, PIN_SIZE, 1);
	gdr_copy_to_mapping(mh, map, out, PIN_SIZE);
	memset(in, 0, PIN_SIZE);
	CU(cuMemcpyDtoH(in, pinned, PIN_SIZE));
	check(memcmp(in, out, PIN_SIZE) == 0, "CPU writes through the mapping, cuMemcpyDtoH reads them (1 MiB)");
	fill(out, PIN_SIZE, 77);
	CU(cuMemcpyHtoD(pinned, out, PIN_SIZE));
	memset(in, 0, PIN_SIZE);
	gdr_copy_from_mapping(mh, in, map, PIN_SIZE);
	check(memcmp(in, out, PIN_SIZE) == 0, "cuMemcpyHtoD writes, the CPU reads them through the mapping (1 MiB)");
	CU(cuMemsetD8(pinned + 4096, 0xab, 64));
	CU(cuCtxSynchronize());	/* a memset of device memory may return before it is done */
	gdr_copy_from_mapping(mh, in, (char *)map + 4096, 64);
	check(in[0] == 0xab && in[63] == 0xab, "cuMemsetD8 seen by a CPU load");

	/* A second pin of the same allocation, at its start: the same bytes through either mapping. */
	rc = gdr_pin_buffer(g, m.ptr, 4 * GPU_PAGE, 0, 0, &mh2);
	check(rc == 0, "a second pin of the same allocation, at its start (rc %d)", rc);
	if (rc == 0 && gdr_map(g, mh2, &map2, 4 * GPU_PAGE) == 0) {
		unsigned char value = 0x3c, seen = 0;

		gdr_copy_to_mapping(mh2, (char *)map2 + 3 * GPU_PAGE + 10, &value, 1);
		gdr_copy_from_mapping(mh, &seen, (char *)map + 10, 1);
		check(seen == 0x3c, "a write through the second mapping is seen through the first");
		gdr_unmap(g, mh2, map2, 4 * GPU_PAGE);
		check(gdr_unpin_buffer(g, mh2) == 0, "unpin of the second pin; the first stays usable");
	}

	/* Small copies through the BAR, as a poller would make them. */
	{
		const int n = 2000;
		double t0, w, r;
		unsigned char line[64];

		t0 = now_us();
		for (int i = 0; i < n; i++)
			gdr_copy_to_mapping(mh, map, line, 64);
		w = (now_us() - t0) / n;
		t0 = now_us();
		for (int i = 0; i < n; i++)
			gdr_copy_from_mapping(mh, line, map, 64);
		r = (now_us() - t0) / n;
		printf("64 B through the mapping: write %.2f us, read %.2f us (mean of %d)\n", w, r, n);
	}

	/* The program frees the allocation while it is still pinned and mapped. */
	vmm_free(&m);
	{
		unsigned char value = 0x11, seen = 0;

		gdr_copy_to_mapping(mh, map, &value, 1);
		gdr_copy_from_mapping(mh, &seen, map, 1);
		check(seen == 0x11, "after cuMemUnmap + cuMemRelease + cuMemAddressFree under the pin, the mapping still works (the import holds the memory)");
	}
	check(gdr_unmap(g, mh, map, PIN_SIZE) == 0 && gdr_unpin_buffer(g, mh) == 0,
	      "unmap and unpin after the free release the memory");

	/* What it refuses, and says why (stderr with GDRCOPY_ENABLE_LOGGING=1). */
	CU(cuMemAlloc(&dptr, 2 * GPU_PAGE));
	rc = gdr_pin_buffer(g, (dptr + GPU_PAGE - 1) & ~(GPU_PAGE - 1), GPU_PAGE, 0, 0, &bad);
	check(rc == EINVAL, "cuMemAlloc memory refused with EINVAL (rc %d)", rc);
	CU(cuMemFree(dptr));
	plain = vmm_alloc(dev, 1, CU_MEM_HANDLE_TYPE_NONE);
	rc = gdr_pin_buffer(g, plain.ptr, GPU_PAGE, 0, 0, &bad);
	check(rc == EINVAL, "cuMemCreate memory without a shareable handle refused with EINVAL (rc %d)", rc);
	vmm_free(&plain);

	check(gdr_close(g) == 0, "gdr_close");
	printf("%s\n", failures ? "FAILED" : "PASSED");
	return failures ? 1 : 0;
}
