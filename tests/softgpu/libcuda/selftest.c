// SPDX-License-Identifier: MIT
/*
 * selftest: softgpu's libcuda.so.1 against a live /dev/softgpu (in a VM
 * with the softgpu module loaded).  Prints TAP; exits 0 when every test
 * passes, 1 otherwise, and 4 (kselftest "skip") when there is no
 * /dev/softgpu, after checking that cuInit then reports
 * CUDA_ERROR_NO_DEVICE.
 *
 *   selftest [-v]      -v: print SOFTGPU_DEBUG diagnostics too
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>

#define KSFT_SKIP 4
#define GPU_PAGE (64ULL * 1024)

static int test_failed;
static int tests_run, tests_bad;

#define CHECK(cond) do {						\
	if (!(cond)) {							\
		printf("#   %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
		test_failed = 1;					\
		return;							\
	}								\
} while (0)

#define CHECK_CU(call, want) do {					\
	CUresult rc_ = (call);						\
	if (rc_ != (want)) {						\
		printf("#   %s:%d: %s returned %d, expected %d\n",	\
		       __FILE__, __LINE__, #call, (int)rc_, (int)(want)); \
		test_failed = 1;					\
		return;							\
	}								\
} while (0)

#define OK(call) CHECK_CU(call, CUDA_SUCCESS)

static void run_test(const char *name, void (*fn)(void))
{
	test_failed = 0;
	fn();
	tests_run++;
	if (test_failed)
		tests_bad++;
	printf("%s %d - %s\n", test_failed ? "not ok" : "ok", tests_run, name);
	fflush(stdout);
}

static CUcontext primary;

/* ---- Device and version ---- */

static void test_driver_version(void)
{
	int v;

	unsetenv("SOFTGPU_CUDA_DRIVER_VERSION");
	OK(cuDriverGetVersion(&v));
	CHECK(v == 13030);
	setenv("SOFTGPU_CUDA_DRIVER_VERSION", "12080", 1);
	OK(cuDriverGetVersion(&v));
	CHECK(v == 12080);
	setenv("SOFTGPU_CUDA_DRIVER_VERSION", "garbage", 1);
	OK(cuDriverGetVersion(&v));
	CHECK(v == 13030);
	unsetenv("SOFTGPU_CUDA_DRIVER_VERSION");
	CHECK_CU(cuDriverGetVersion(NULL), CUDA_ERROR_INVALID_VALUE);
}

static void test_device_queries(void)
{
	char name[128], bus[32];
	unsigned int a, b, c, d;
	CUdevice dev;
	size_t total;
	int n, v;

	OK(cuDeviceGetCount(&n));
	CHECK(n == 1);
	OK(cuDeviceGet(&dev, 0));
	CHECK(dev == 0);
	CHECK_CU(cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
	OK(cuDeviceGetName(name, sizeof(name), 0));
	CHECK(name[0] != '\0');
	OK(cuDeviceGetPCIBusId(bus, sizeof(bus), 0));
	CHECK(sscanf(bus, "%4x:%2x:%2x.%1x", &a, &b, &c, &d) == 4 && strlen(bus) == 12);
	CHECK_CU(cuDeviceGetPCIBusId(bus, 5, 0), CUDA_ERROR_INVALID_VALUE);
	OK(cuDeviceTotalMem(&total, 0));
	CHECK(total >= GPU_PAGE);
	OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
	CHECK(v == 9);
	OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0));
	CHECK(v == 0);
	OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, 0));
	CHECK(v == 1);
	OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, 0));
	CHECK(v == 1);
	OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 0));
	CHECK(v == 1);
	OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
	CHECK(v == 1);
	OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, 0));
	CHECK(v == CU_COMPUTEMODE_DEFAULT);
	OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0));
	CHECK(v == 1);
	OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0));
	CHECK(v == 1024);
	OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, 0));
	CHECK(v == 0 || v == 1);
	printf("#   device \"%s\" at %s, %zu MiB, coherent %d\n", name, bus, total >> 20, v);
	CHECK_CU(cuDeviceGetAttribute(&v, (CUdevice_attribute)9999, 0), CUDA_ERROR_INVALID_VALUE);
}

static void test_error_strings(void)
{
	const char *s;

	OK(cuGetErrorName(CUDA_ERROR_NO_DEVICE, &s));
	CHECK(!strcmp(s, "CUDA_ERROR_NO_DEVICE"));
	OK(cuGetErrorString(CUDA_ERROR_NO_DEVICE, &s));
	CHECK(!strcmp(s, "no CUDA-capable device is detected"));
	OK(cuGetErrorName(CUDA_ERROR_NOT_SUPPORTED, &s));
	CHECK(!strcmp(s, "CUDA_ERROR_NOT_SUPPORTED"));
	CHECK_CU(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
}

/* ---- Contexts ---- */

struct free_in_thread {
	CUdeviceptr ptr;
	CUresult rc;
};

static void *free_in_thread(void *arg)
{
	struct free_in_thread *f = arg;

	f->rc = cuMemFree(f->ptr);
	return NULL;
}

static void test_no_context(void)
{
	struct free_in_thread f = { 0, CUDA_ERROR_UNKNOWN };
	CUcontext ctx;
	CUdeviceptr p;
	pthread_t t;

	OK(cuCtxSetCurrent(NULL));
	CHECK_CU(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
	/*
	 * cuMemFree finds the allocation by its address: a thread with no
	 * current context frees it (as the real driver does: 580 on an H200).
	 */
	OK(cuDevicePrimaryCtxRetain(&ctx, 0));
	OK(cuCtxSetCurrent(ctx));
	OK(cuMemAlloc(&f.ptr, 16));
	CHECK(pthread_create(&t, NULL, free_in_thread, &f) == 0);
	pthread_join(t, NULL);
	CHECK_CU(f.rc, CUDA_SUCCESS);
	OK(cuMemAlloc(&p, 16));
	OK(cuCtxSetCurrent(NULL));
	OK(cuMemFree(p));
	OK(cuDevicePrimaryCtxRelease(0));
}

static void *thread_current_ctx(void *arg)
{
	CUcontext c = (CUcontext)1;

	*(int *)arg = cuCtxGetCurrent(&c) == CUDA_SUCCESS && c == NULL;
	return NULL;
}

static void test_contexts(void)
{
	CUcontext ctx, cur, again;
	CUdevice dev = -1;
	unsigned int flags;
	CUresult rc;
	pthread_t t;
	int active, fresh = 0;

	OK(cuDevicePrimaryCtxRetain(&primary, 0));
	OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
	CHECK(active == 1);
	OK(cuCtxSetCurrent(primary));
	OK(cuCtxGetCurrent(&cur));
	CHECK(cur == primary);
	OK(cuCtxGetDevice(&dev));
	CHECK(dev == 0);
	/* Another thread starts with no current context. */
	CHECK(pthread_create(&t, NULL, thread_current_ctx, &fresh) == 0);
	pthread_join(t, NULL);
	CHECK(fresh);

	OK(cuCtxCreate(&ctx, NULL, 0, 0));
	OK(cuCtxGetCurrent(&cur));
	CHECK(cur == ctx && ctx != primary);
	OK(cuCtxSynchronize());
	OK(cuCtxDestroy(ctx));
	OK(cuCtxGetCurrent(&cur));
	CHECK(cur == primary);
	rc = cuCtxDestroy(ctx);
	CHECK(rc == CUDA_ERROR_CONTEXT_IS_DESTROYED || rc == CUDA_ERROR_INVALID_CONTEXT);

	OK(cuDevicePrimaryCtxRetain(&again, 0));
	CHECK(again == primary);
	OK(cuDevicePrimaryCtxRelease(0));
}

/* ---- cuMemAlloc ---- */

static void test_alloc_packing(void)
{
	CUdeviceptr fa, a, s1, s2, big;

	OK(cuMemAlloc(&fa, 65536 + 3));
	OK(cuMemAlloc(&a, 65536 + 4));
	/* As on a real driver: 512-byte granules, so a follows fa unaligned. */
	CHECK(a == fa + 66048);
	CHECK(a % GPU_PAGE != 0);
	CHECK(a / GPU_PAGE == (fa + 65536 + 3) / GPU_PAGE);
	OK(cuMemAlloc(&s1, 8));
	OK(cuMemAlloc(&s2, 8));
	CHECK(s1 % 256 == 0 && s2 % 256 == 0);
	CHECK(s1 / GPU_PAGE == s2 / GPU_PAGE);
	OK(cuMemAlloc(&big, 4 << 20));
	CHECK(big % GPU_PAGE == 0);
	CHECK_CU(cuMemFree(a + 16), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemAlloc(&big, 0), CUDA_ERROR_INVALID_VALUE);
	OK(cuMemFree(s1));
	CHECK_CU(cuMemFree(s1), CUDA_ERROR_INVALID_VALUE);
	/* A freed gap is reused. */
	OK(cuMemAlloc(&s1, 8));
	CHECK(s1 + 512 == s2);
	OK(cuMemFree(s1));
	OK(cuMemFree(s2));
	OK(cuMemFree(a));
	OK(cuMemFree(fa));
	OK(cuMemFree(big));
}

static void test_free_returns_memory(void)
{
	size_t free0, free1, free2, total;
	CUdeviceptr big, small;

	OK(cuMemGetInfo(&free0, &total));
	OK(cuMemAlloc(&big, 8 << 20));
	OK(cuMemAlloc(&small, 100));
	OK(cuMemGetInfo(&free1, &total));
	/* The small one takes one 64 KiB page of a shared chunk. */
	CHECK(free0 - free1 == (8 << 20) + GPU_PAGE);
	OK(cuMemFree(big));
	OK(cuMemFree(small));
	OK(cuMemGetInfo(&free2, &total));
	CHECK(free2 == free0);
}

/*
 * Freeing a block gives back the GPU pages it used alone, at once, even
 * while a neighbour keeps the page they share (and so the chunk) alive.
 */
static void test_free_revokes_own_pages(void)
{
	size_t free0, free1, free2, total;
	CUdeviceptr a, b;

	OK(cuMemGetInfo(&free0, &total));
	OK(cuMemAlloc(&a, 3 * GPU_PAGE + 1000));	/* pages 0-3 of a chunk */
	OK(cuMemAlloc(&b, 8));				/* right after, in page 3 */
	CHECK(b / GPU_PAGE == (a + 3 * GPU_PAGE) / GPU_PAGE);
	OK(cuMemGetInfo(&free1, &total));
	CHECK(free0 - free1 == 4 * GPU_PAGE);
	OK(cuMemFree(a));
	OK(cuMemGetInfo(&free2, &total));
	CHECK(free2 - free1 == 3 * GPU_PAGE);
	OK(cuMemFree(b));
	OK(cuMemGetInfo(&free2, &total));
	CHECK(free2 == free0);
}

static void fill(unsigned char *p, size_t n, unsigned int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(seed + i * 7 + (i >> 8));
}

static void test_copies(void)
{
	const size_t n = 300000;
	unsigned char *in = malloc(n), *out = malloc(n);
	CUdeviceptr d1, d2;
	unsigned int *words = (unsigned int *)out;
	size_t i;

	CHECK(in && out);
	fill(in, n, 3);
	OK(cuMemAlloc(&d1, n));
	OK(cuMemAlloc(&d2, n));
	OK(cuMemcpyHtoD(d1, in, n));
	memset(out, 0, n);
	OK(cuMemcpyDtoH(out, d1, n));
	CHECK(!memcmp(in, out, n));
	/* Unaligned offsets on both sides. */
	OK(cuMemcpyHtoD(d1 + 3, in + 5, 1001));
	OK(cuMemcpyDtoH(out, d1 + 3, 1001));
	CHECK(!memcmp(in + 5, out, 1001));
	OK(cuMemcpyDtoD(d2, d1, n));
	memset(out, 0, n);
	OK(cuMemcpyDtoH(out, d2, n));
	OK(cuMemcpyDtoH(in, d1, n));
	CHECK(!memcmp(in, out, n));
	/* cuMemcpy works out the direction itself. */
	fill(in, n, 9);
	OK(cuMemcpy(d1, (CUdeviceptr)(uintptr_t)in, n));
	OK(cuMemcpy((CUdeviceptr)(uintptr_t)out, d1, n));
	CHECK(!memcmp(in, out, n));
	/* Unified addressing: the typed copies accept either side, as on CUDA 13.0. */
	OK(cuMemcpyDtoH((void *)(uintptr_t)d2, d1, 16));
	OK(cuMemcpyDtoH(out, d2, 16));
	OK(cuMemcpyDtoH(in, d1, 16));
	CHECK(!memcmp(in, out, 16));
	/* But a "device" side must be something the device can address. */
	CHECK_CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)out, in, 16), CUDA_ERROR_INVALID_VALUE);
	/* memset */
	OK(cuMemsetD8(d1, 0xA5, n));
	OK(cuMemcpyDtoH(out, d1, n));
	for (i = 0; i < n; i++)
		CHECK(out[i] == 0xA5);
	OK(cuMemsetD32(d1 + 4, 0x12345678, 1000));
	OK(cuMemcpyDtoH(out, d1, 4 * 1002));
	CHECK(words[0] == 0xA5A5A5A5 && words[1001] == 0xA5A5A5A5);
	for (i = 1; i <= 1000; i++)
		CHECK(words[i] == 0x12345678);
	CHECK_CU(cuMemsetD32(d1 + 2, 0, 4), CUDA_ERROR_INVALID_VALUE);
	OK(cuMemFree(d1));
	OK(cuMemFree(d2));
	free(in);
	free(out);
}

static void test_pointer_attributes(void)
{
	CUDA_POINTER_ATTRIBUTE_P2P_TOKENS tokens;
	unsigned long long id1, id2;
	unsigned int type, flag;
	CUdeviceptr d1, d2, start;
	CUcontext ctx;
	size_t size;
	int ordinal;
	void *hp;

	OK(cuMemAlloc(&d1, 1000));
	OK(cuMemAlloc(&d2, 1000));
	OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d1 + 10));
	CHECK(type == CU_MEMORYTYPE_DEVICE);
	OK(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, d1));
	CHECK(ctx == primary);
	OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d1));
	CHECK(ordinal == 0);
	memset(&tokens, 0, sizeof(tokens));
	OK(cuPointerGetAttribute(&tokens, CU_POINTER_ATTRIBUTE_P2P_TOKENS, d1));
	/* A real H200 reports p2pToken 0; the va space token is what identifies. */
	CHECK(tokens.vaSpaceToken != 0);
	OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d2 + 999));
	CHECK(start == d2);
	OK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d2));
	CHECK(size == 1000);
	OK(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, d1));
	OK(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, d2));
	CHECK(id1 != id2);
	CHECK_CU(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, d1),
		 CUDA_ERROR_INVALID_VALUE);
	flag = 0;
	OK(cuPointerSetAttribute(&flag, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d1));
	flag = 7;
	OK(cuPointerGetAttribute(&flag, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d1));
	CHECK(flag == 0);
	flag = 1;
	OK(cuPointerSetAttribute(&flag, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d1));
	OK(cuPointerGetAttribute(&flag, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d1));
	CHECK(flag == 1);
	/* Pageable host memory is unknown to the driver. */
	CHECK_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				       (CUdeviceptr)(uintptr_t)&type), CUDA_ERROR_INVALID_VALUE);
	OK(cuMemFree(d1));
	CHECK_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d1),
		 CUDA_ERROR_INVALID_VALUE);
	OK(cuMemFree(d2));
}

static void test_host_memory(void)
{
	CUDA_POINTER_ATTRIBUTE_P2P_TOKENS tokens;
	unsigned char buf[4096];
	unsigned int type;
	CUdeviceptr dp, d;
	void *h, *h2;

	OK(cuMemHostAlloc(&h, 8192, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
	OK(cuMemHostGetDevicePointer(&dp, h, 0));
	CHECK(dp == (CUdeviceptr)(uintptr_t)h);
	OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dp + 100));
	CHECK(type == CU_MEMORYTYPE_HOST);
	CHECK_CU(cuPointerGetAttribute(&tokens, CU_POINTER_ATTRIBUTE_P2P_TOKENS, dp),
		 CUDA_ERROR_INVALID_VALUE);
	/* The device pointer of mapped host memory works as a device address. */
	fill(buf, sizeof(buf), 1);
	OK(cuMemcpyHtoD(dp + 64, buf, sizeof(buf)));
	CHECK(!memcmp((char *)h + 64, buf, sizeof(buf)));
	OK(cuMemsetD8(dp, 0x5A, 16));
	CHECK(((unsigned char *)h)[15] == 0x5A);
	OK(cuMemAlloc(&d, 4096));
	OK(cuMemcpyDtoD(d, dp + 64, 4096));
	memset(buf, 0, sizeof(buf));
	OK(cuMemcpyDtoH(buf, d, 4096));
	CHECK(!memcmp((char *)h + 64, buf, sizeof(buf)));
	OK(cuMemFree(d));
	OK(cuMemAllocHost(&h2, 100));
	OK(cuMemFreeHost(h2));
	CHECK_CU(cuMemFreeHost(h2), CUDA_ERROR_INVALID_VALUE);
	OK(cuMemFreeHost(h));
	CHECK_CU(cuMemHostGetDevicePointer(&dp, h, 0), CUDA_ERROR_INVALID_VALUE);
}

/* ---- VMM and dma-buf ---- */

static void test_vmm(void)
{
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle handle;
	CUmemAccessDesc access;
	unsigned char in[1000], out[1000];
	size_t gran, rec, size;
	CUdeviceptr base, start;
	unsigned int type;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	prop.allocFlags.gpuDirectRDMACapable = 1;
	OK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	OK(cuMemGetAllocationGranularity(&rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
	CHECK(gran == GPU_PAGE && rec % gran == 0);
	CHECK_CU(cuMemCreate(&handle, gran + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
	OK(cuMemCreate(&handle, 2 * gran, &prop, 0));
	OK(cuMemAddressReserve(&base, 4 * gran, 0, 0, 0));
	CHECK(base % gran == 0);
	OK(cuMemMap(base + gran, 2 * gran, 0, handle, 0));
	/* Mapped but not yet accessible. */
	CHECK_CU(cuMemcpyHtoD(base + gran, in, 8), CUDA_ERROR_INVALID_VALUE);
	access.location = prop.location;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CHECK_CU(cuMemSetAccess(base, 2 * gran, &access, 1), CUDA_ERROR_INVALID_VALUE);
	OK(cuMemSetAccess(base + gran, 2 * gran, &access, 1));
	fill(in, sizeof(in), 77);
	OK(cuMemcpyHtoD(base + 2 * gran - 500, in, sizeof(in)));
	OK(cuMemcpyDtoH(out, base + 2 * gran - 500, sizeof(out)));
	CHECK(!memcmp(in, out, sizeof(in)));
	OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, base + gran));
	CHECK(type == CU_MEMORYTYPE_DEVICE);
	OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, base + 2 * gran));
	CHECK(start == base + gran);
	OK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, base + 2 * gran));
	CHECK(size == 2 * gran);
	/* The memory lives while mapped, after the handle is released. */
	OK(cuMemRelease(handle));
	OK(cuMemcpyDtoH(out, base + 2 * gran - 500, sizeof(out)));
	CHECK(!memcmp(in, out, sizeof(in)));
	CHECK(cuMemAddressFree(base, 4 * gran) != CUDA_SUCCESS);
	OK(cuMemUnmap(base + gran, 2 * gran));
	CHECK_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, base + gran),
		 CUDA_ERROR_INVALID_VALUE);
	OK(cuMemAddressFree(base, 4 * gran));
}

static void test_dmabuf(void)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned char in[256];
	unsigned char *map;
	int fd = -1, coherent;
	CUdeviceptr d;
	CUresult rc;

	OK(cuMemAlloc(&d, 4 << 20));	/* a chunk of its own: page aligned */
	CHECK_CU(cuMemGetHandleForAddressRange(&fd, d + 1, (size_t)page,
					       CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0),
		 CUDA_ERROR_INVALID_VALUE);
	setenv("SOFTGPU_CUDA_DRIVER_VERSION", "13000", 1);
	CHECK_CU(cuMemGetHandleForAddressRange(&fd, d, (size_t)page,
					       CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
					       CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE),
		 CUDA_ERROR_NOT_SUPPORTED);
	unsetenv("SOFTGPU_CUDA_DRIVER_VERSION");
	OK(cuMemGetHandleForAddressRange(&fd, d + page, 2 * (size_t)page,
					 CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
	CHECK(fd >= 0);
	fill(in, sizeof(in), 42);
	OK(cuMemcpyHtoD(d + page + 100, in, sizeof(in)));
	map = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		printf("#   mmap of the dma-buf failed: %s\n", strerror(errno));
		close(fd);
		CHECK(0);
	}
	CHECK(!memcmp(map + 100, in, sizeof(in)));
	map[page + 1] = 0xEE;
	OK(cuMemcpyDtoH(in, d + 2 * page + 1, 1));
	CHECK(in[0] == 0xEE);
	munmap(map, 2 * (size_t)page);
	close(fd);
	/*
	 * Forcing the PCIe (BAR) mapping type needs a BAR: softgpu refuses it
	 * in RAM-backed (coherent) mode, as a coherent GPU without BAR access
	 * would.
	 */
	OK(cuDeviceGetAttribute(&coherent,
				CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, 0));
	rc = cuMemGetHandleForAddressRange(&fd, d, (size_t)page,
					   CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
					   CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE);
	CHECK(rc == CUDA_SUCCESS || (coherent && rc == CUDA_ERROR_NOT_SUPPORTED));
	if (rc == CUDA_SUCCESS)
		close(fd);
	OK(cuMemFree(d));
}

/* ---- cuGetProcAddress ---- */

static void test_proc_address(void)
{
	CUdriverProcAddressQueryResult st;
	void *fn;

	OK(cuGetProcAddress("cuMemAlloc", &fn, 13030, 0, &st));
	CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS && fn == (void *)cuMemAlloc);
	OK(cuGetProcAddress("cuCtxCreate", &fn, 13000, 0, &st));
	CHECK(fn == (void *)cuCtxCreate);
	OK(cuGetProcAddress("cuCtxCreate", &fn, 12000, 0, &st));
	CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS && fn != (void *)cuCtxCreate);
	OK(cuGetProcAddress("cuDevicePrimaryCtxRelease", &fn, 13030, 0, &st));
	CHECK(fn == (void *)cuDevicePrimaryCtxRelease);
	OK(cuGetProcAddress("cuMemCreate", &fn, 10000, 0, &st));
	CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT && fn == NULL);
	OK(cuGetProcAddress("cuNoSuchCall", &fn, 13030, 0, &st));
	CHECK(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && fn == NULL);
	CHECK_CU(cuGetProcAddress("cuNoSuchCall", &fn, 13030, 0, NULL), CUDA_ERROR_NOT_FOUND);
	OK(cuGetProcAddress("cuGetProcAddress", &fn, 13030, 0, &st));
	CHECK(fn == (void *)cuGetProcAddress);
	/* Newer than the driver: refused. */
	setenv("SOFTGPU_CUDA_DRIVER_VERSION", "13000", 1);
	CHECK_CU(cuGetProcAddress("cuMemAlloc", &fn, 13030, 0, &st), CUDA_ERROR_INVALID_VALUE);
	unsetenv("SOFTGPU_CUDA_DRIVER_VERSION");
}

/* ---- fork ---- */

static int child_body(CUdeviceptr parents)
{
	unsigned char in[64], out[64];
	CUcontext ctx;
	CUdeviceptr d;

	/* The parent's memory is not in the child's address space. */
	if (cuMemcpyDtoH(out, parents, sizeof(out)) == CUDA_SUCCESS)
		return 10;
	if (cuInit(0) != CUDA_SUCCESS)
		return 11;
	if (cuCtxCreate(&ctx, NULL, 0, 0) != CUDA_SUCCESS)
		return 12;
	if (cuMemAlloc(&d, sizeof(in)) != CUDA_SUCCESS)
		return 13;
	fill(in, sizeof(in), 5);
	if (cuMemcpyHtoD(d, in, sizeof(in)) != CUDA_SUCCESS ||
	    cuMemcpyDtoH(out, d, sizeof(out)) != CUDA_SUCCESS || memcmp(in, out, sizeof(in)))
		return 14;
	if (cuMemFree(d) != CUDA_SUCCESS || cuCtxDestroy(ctx) != CUDA_SUCCESS)
		return 15;
	return 0;
}

static void test_fork(void)
{
	unsigned char in[64], out[64];
	CUdeviceptr d;
	int status;
	pid_t pid;

	OK(cuMemAlloc(&d, sizeof(in)));
	fill(in, sizeof(in), 8);
	OK(cuMemcpyHtoD(d, in, sizeof(in)));
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(child_body(d));
	CHECK(waitpid(pid, &status, 0) == pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		printf("#   child status 0x%x\n", status);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The parent's space is untouched by the child. */
	OK(cuMemcpyDtoH(out, d, sizeof(out)));
	CHECK(!memcmp(in, out, sizeof(in)));
	OK(cuMemFree(d));
}

/* ---- Modules and launches ---- */

static const char unknown_ptx[] =
	".version 8.0\n.target sm_80\n.address_size 64\n"
	".visible .entry no_such_emulation(\n\t.param .u64 p0,\n\t.param .u32 p1\n)\n{\n\tret;\n}\n";

/*
 * gdrcopy_pplat_kernel is the one emulated kernel; with zero iterations it
 * only announces itself (arrive = blocks, cpu_flag = 1), which is enough to
 * see arguments copied and the launch run and synchronized.
 */
static const char pplat_ptx[] =
	".version 8.0\n.target sm_80\n.address_size 64\n"
	".visible .entry gdrcopy_pplat_kernel(\n"
	"\t.param .u64 a, .param .u64 b, .param .u64 c, .param .u64 d, .param .u64 e,\n"
	"\t.param .u64 f, .param .u32 g, .param .u32 h, .param .u32 i, .param .u32 j\n)\n"
	"{\n\tret;\n}\n";

static void test_modules(void)
{
	CUdeviceptr gpu_flag, cpu_flag, arrive, stamps, errors;
	unsigned int words = 0, iters = 0, mode = 0, bucket = 1;
	unsigned int got_flag = 0, got_arrive = 0;
	void *params[10];
	CUmodule mod;
	CUfunction fn;
	CUstream s;
	int v;

	OK(cuModuleLoadData(&mod, unknown_ptx));
	CHECK_CU(cuModuleGetFunction(&fn, mod, "no_such_emulation"), CUDA_ERROR_NOT_SUPPORTED);
	CHECK_CU(cuModuleGetFunction(&fn, mod, "not_in_module"), CUDA_ERROR_NOT_FOUND);
	OK(cuModuleUnload(mod));
	CHECK_CU(cuModuleLoadData(&mod, "this is not PTX"), CUDA_ERROR_INVALID_PTX);

	OK(cuModuleLoadData(&mod, pplat_ptx));
	OK(cuModuleGetFunction(&fn, mod, "gdrcopy_pplat_kernel"));
	OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn));
	CHECK(v == 1024);
	OK(cuMemAlloc(&gpu_flag, 4));
	OK(cuMemAlloc(&cpu_flag, 4));
	OK(cuMemAlloc(&arrive, 4));
	OK(cuMemAlloc(&errors, 4));
	OK(cuMemAlloc(&stamps, 64));
	OK(cuMemsetD32(cpu_flag, 0, 1));
	OK(cuMemsetD32(arrive, 0, 1));
	params[0] = &gpu_flag;
	params[1] = &cpu_flag;
	params[2] = &gpu_flag;	/* data: unused with zero words */
	params[3] = &arrive;
	params[4] = &errors;
	params[5] = &stamps;
	params[6] = &words;
	params[7] = &iters;
	params[8] = &mode;
	params[9] = &bucket;
	OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK_CU(cuLaunchKernel(fn, 3, 1, 1, 2048, 1, 1, 0, s, params, NULL),
		 CUDA_ERROR_INVALID_VALUE);
	OK(cuLaunchKernel(fn, 3, 1, 1, 32, 1, 1, 0, s, params, NULL));
	OK(cuStreamSynchronize(s));
	OK(cuMemcpyDtoH(&got_flag, cpu_flag, 4));
	OK(cuMemcpyDtoH(&got_arrive, arrive, 4));
	CHECK(got_flag == 1 && got_arrive == 3);
	OK(cuStreamDestroy(s));
	/* The default stream and cuCtxSynchronize. */
	OK(cuMemsetD32(arrive, 0, 1));
	OK(cuLaunchKernel(fn, 5, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
	OK(cuCtxSynchronize());
	OK(cuMemcpyDtoH(&got_arrive, arrive, 4));
	CHECK(got_arrive == 5);
	OK(cuModuleUnload(mod));
	OK(cuMemFree(gpu_flag));
	OK(cuMemFree(cpu_flag));
	OK(cuMemFree(arrive));
	OK(cuMemFree(errors));
	OK(cuMemFree(stamps));
}

static void test_ctx_destroy_frees(void)
{
	size_t free0, free1, total;
	CUcontext ctx;
	CUdeviceptr d;

	OK(cuMemGetInfo(&free0, &total));
	OK(cuCtxCreate(&ctx, NULL, 0, 0));
	OK(cuMemAlloc(&d, 4 << 20));
	OK(cuCtxDestroy(ctx));
	OK(cuCtxSetCurrent(primary));
	OK(cuMemGetInfo(&free1, &total));
	CHECK(free1 == free0);
	CHECK_CU(cuMemFree(d), CUDA_ERROR_INVALID_VALUE);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "-v"))
		setenv("SOFTGPU_DEBUG", "1", 1);
	printf("TAP version 13\n");
	if (access("/dev/softgpu", F_OK)) {
		CUresult rc = cuInit(0);

		printf("1..1\n%s 1 - cuInit without /dev/softgpu returns CUDA_ERROR_NO_DEVICE "
		       "(got %d)\n", rc == CUDA_ERROR_NO_DEVICE ? "ok" : "not ok", (int)rc);
		printf("# SKIP the rest: no /dev/softgpu (load the softgpu module)\n");
		return rc == CUDA_ERROR_NO_DEVICE ? KSFT_SKIP : 1;
	}
	printf("1..17\n");
	{
		CUdevice dev;

		if (cuDeviceGet(&dev, 0) != CUDA_ERROR_NOT_INITIALIZED)
			printf("# warning: cuDeviceGet before cuInit did not fail\n");
	}
	if (cuInit(0) != CUDA_SUCCESS) {
		printf("Bail out! cuInit failed with /dev/softgpu present\n");
		return 1;
	}
	run_test("driver_version", test_driver_version);
	run_test("device_queries", test_device_queries);
	run_test("error_strings", test_error_strings);
	run_test("no_context", test_no_context);
	run_test("contexts", test_contexts);
	run_test("alloc_packing", test_alloc_packing);
	run_test("free_returns_memory", test_free_returns_memory);
	run_test("free_revokes_own_pages", test_free_revokes_own_pages);
	run_test("copies", test_copies);
	run_test("pointer_attributes", test_pointer_attributes);
	run_test("host_memory", test_host_memory);
	run_test("vmm", test_vmm);
	run_test("dmabuf", test_dmabuf);
	run_test("proc_address", test_proc_address);
	run_test("fork", test_fork);
	run_test("modules", test_modules);
	run_test("ctx_destroy_frees", test_ctx_destroy_frees);
	printf("# %d/%d passed\n", tests_run - tests_bad, tests_run);
	return tests_bad ? 1 : 0;
}
