/*
 * probe-contextless: what the CUDA driver answers to calls made from a
 * thread with no current context (and from one whose current context was
 * destroyed by another thread), on objects made in the primary context.
 *
 * Known on the real driver (580.159.04, H200): cuMemFree of a live
 * allocation from a thread with no current context returns CUDA_SUCCESS,
 * and softgpu's libcuda does the same.  The other answers are what softgpu
 * should follow; run this on the GPU machine and in a softgpu VM and diff:
 *
 *   GPU machine: gcc -O2 -I/usr/local/cuda/include tools/probe-contextless.c \
 *                    -L/usr/local/nvidia/lib64 -lcuda -lpthread -o probe && ./probe
 *   softgpu VM:  make probe-contextless-static, run it where /dev/softgpu exists
 *
 * One line per call: "<case> <CUresult> <name>".  Exits 0 unless setup fails.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

static void show(const char *what, CUresult rc)
{
	const char *name = NULL;

	if (cuGetErrorName(rc, &name) != CUDA_SUCCESS || !name)
		name = "?";
	printf("%-52s %4d %s\n", what, (int)rc, name);
	fflush(stdout);
}

#define SETUP(call) do {						\
	CUresult rc_ = (call);						\
	if (rc_ != CUDA_SUCCESS) {					\
		show("setup: " #call, rc_);				\
		exit(1);						\
	}								\
} while (0)

static const char nop_ptx[] =
	".version 8.0\n.target sm_80\n.address_size 64\n"
	".visible .entry probe_nop()\n{\n\tret;\n}\n";

/* Made in the primary context by the main thread. */
static struct {
	CUcontext primary;
	CUdeviceptr dev, dev2, dev_free_last;
	void *host, *host_mapped;
	CUstream stream;
	CUmodule module;
	CUfunction function;	/* NULL where the PTX cannot be loaded (softgpu) */
	int ordinal;
} made;

static void *no_context(void *arg)
{
	unsigned char buf[64];
	CUcontext ctx = (CUcontext)1;
	CUdeviceptr p = 0, base = 0, mapped_dev = 0, va = 0;
	CUmemGenericAllocationHandle handle = 0;
	CUmemAllocationProp prop;
	CUmemAccessDesc access;
	size_t size = 0, free_bytes = 0, total = 0, gran = 0;
	CUmodule module = NULL;
	CUdevice dev = -1;
	void *h = NULL;
	int fd = -1, ordinal = -1;

	(void)arg;
	memset(buf, 0x5A, sizeof(buf));
	show("cuCtxGetCurrent", cuCtxGetCurrent(&ctx));
	printf("%-52s %s\n", "  current context", ctx ? "non-NULL" : "NULL");

	/* Calls that act in "the current context". */
	show("cuMemAlloc", cuMemAlloc(&p, 4096));
	show("cuMemAllocHost", cuMemAllocHost(&h, 4096));
	show("cuMemHostAlloc(DEVICEMAP)", cuMemHostAlloc(&h, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
	show("cuMemGetInfo", cuMemGetInfo(&free_bytes, &total));
	show("cuCtxSynchronize", cuCtxSynchronize());
	show("cuCtxGetDevice", cuCtxGetDevice(&dev));
	show("cuModuleLoadData", cuModuleLoadData(&module, nop_ptx));

	/* Calls on a pointer, a stream, a module of the primary context. */
	show("cuPointerGetAttribute(CONTEXT)", cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, made.dev));
	printf("%-52s %s\n", "  = the primary context", ctx == made.primary ? "yes" : "no");
	show("cuPointerGetAttribute(DEVICE_ORDINAL)",
	     cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, made.dev));
	show("cuMemGetAddressRange", cuMemGetAddressRange(&base, &size, made.dev + 16));
	show("cuMemcpyHtoD", cuMemcpyHtoD(made.dev, buf, sizeof(buf)));
	show("cuMemcpyDtoH", cuMemcpyDtoH(buf, made.dev, sizeof(buf)));
	show("cuMemcpyDtoD", cuMemcpyDtoD(made.dev2, made.dev, sizeof(buf)));
	show("cuMemcpy (unified, device to device)", cuMemcpy(made.dev2, made.dev, sizeof(buf)));
	show("cuMemsetD8", cuMemsetD8(made.dev, 0x11, sizeof(buf)));
	show("cuMemsetD32", cuMemsetD32(made.dev, 0x11223344, 4));
	show("cuMemHostGetDevicePointer", cuMemHostGetDevicePointer(&mapped_dev, made.host_mapped, 0));
	show("cuMemGetHandleForAddressRange(DMA_BUF_FD)",
	     cuMemGetHandleForAddressRange(&fd, made.dev, 2 << 20, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
	show("cuStreamQuery(primary's stream)", cuStreamQuery(made.stream));
	show("cuStreamSynchronize(primary's stream)", cuStreamSynchronize(made.stream));
	show("cuStreamSynchronize(NULL)", cuStreamSynchronize(NULL));
	if (made.function) {
		show("cuLaunchKernel(primary's function, its stream)",
		     cuLaunchKernel(made.function, 1, 1, 1, 1, 1, 1, 0, made.stream, NULL, NULL));
		show("cuLaunchKernel(primary's function, NULL stream)",
		     cuLaunchKernel(made.function, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
		show("cuModuleGetFunction(primary's module)", cuModuleGetFunction(&made.function, made.module,
										 "probe_nop"));
	} else {
		printf("%-52s skipped: PTX not loadable here\n", "cuLaunchKernel / cuModuleGetFunction");
	}

	/* The virtual memory management API names its device in the properties. */
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = made.ordinal;
	show("cuMemGetAllocationGranularity", cuMemGetAllocationGranularity(&gran, &prop,
									      CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	if (!gran)
		gran = 2 << 20;
	show("cuMemCreate", cuMemCreate(&handle, gran, &prop, 0));
	show("cuMemAddressReserve", cuMemAddressReserve(&va, gran, 0, 0, 0));
	show("cuMemMap", cuMemMap(va, gran, 0, handle, 0));
	memset(&access, 0, sizeof(access));
	access.location = prop.location;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	show("cuMemSetAccess", cuMemSetAccess(va, gran, &access, 1));
	show("cuMemUnmap", cuMemUnmap(va, gran));
	show("cuMemAddressFree", cuMemAddressFree(va, gran));
	show("cuMemRelease", cuMemRelease(handle));

	/* Teardown calls. */
	show("cuStreamDestroy(primary's stream)", cuStreamDestroy(made.stream));
	show("cuModuleUnload(primary's module)", made.module ? cuModuleUnload(made.module) : CUDA_ERROR_INVALID_HANDLE);
	show("cuMemFreeHost(primary's)", cuMemFreeHost(made.host));
	show("cuMemFree(live allocation) [known: 0]", cuMemFree(made.dev_free_last));
	show("cuMemFree(same pointer again)", cuMemFree(made.dev_free_last));
	show("cuMemFree(0)", cuMemFree(0));
	show("cuMemFree(a host address)", cuMemFree((CUdeviceptr)(uintptr_t)buf));
	return NULL;
}

/* A thread whose current context another thread destroys. */
static pthread_barrier_t barrier;
static CUcontext doomed;

static void *destroyed_context(void *arg)
{
	CUcontext cur = NULL;
	CUdeviceptr p;

	(void)arg;
	show("cuCtxCreate (becomes current here)", cuCtxCreate(&doomed, NULL, 0, made.ordinal));
	pthread_barrier_wait(&barrier);	/* main destroys it */
	pthread_barrier_wait(&barrier);
	show("destroyed current: cuCtxGetCurrent", cuCtxGetCurrent(&cur));
	printf("%-52s %s\n", "  current context", !cur ? "NULL" : cur == doomed ? "the destroyed one" : "another");
	show("destroyed current: cuMemAlloc", cuMemAlloc(&p, 4096));
	show("destroyed current: cuMemFree(primary's live allocation)", cuMemFree(made.dev2));
	show("destroyed current: cuCtxSynchronize", cuCtxSynchronize());
	return NULL;
}

int main(void)
{
	CUdevice dev;
	pthread_t t;
	int version = 0;

	SETUP(cuInit(0));
	SETUP(cuDriverGetVersion(&version));
	printf("CUDA driver %d\n", version);
	SETUP(cuDeviceGet(&dev, 0));
	made.ordinal = 0;
	SETUP(cuDevicePrimaryCtxRetain(&made.primary, dev));
	SETUP(cuCtxSetCurrent(made.primary));
	SETUP(cuMemAlloc(&made.dev, 2 << 20));
	SETUP(cuMemAlloc(&made.dev2, 4096));
	SETUP(cuMemAlloc(&made.dev_free_last, 4096));
	SETUP(cuMemAllocHost(&made.host, 4096));
	SETUP(cuMemHostAlloc(&made.host_mapped, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
	SETUP(cuStreamCreate(&made.stream, 0));
	if (cuModuleLoadData(&made.module, nop_ptx) != CUDA_SUCCESS ||
	    cuModuleGetFunction(&made.function, made.module, "probe_nop") != CUDA_SUCCESS)
		made.function = NULL;

	printf("--- a thread with no current context\n");
	pthread_create(&t, NULL, no_context, NULL);
	pthread_join(t, NULL);

	printf("--- a thread whose current context was destroyed by another\n");
	pthread_barrier_init(&barrier, NULL, 2);
	pthread_create(&t, NULL, destroyed_context, NULL);
	pthread_barrier_wait(&barrier);
	show("main: cuCtxDestroy(the other thread's current)", cuCtxDestroy(doomed));
	pthread_barrier_wait(&barrier);
	pthread_join(t, NULL);
	return 0;
}
