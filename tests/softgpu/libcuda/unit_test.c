// SPDX-License-Identifier: MIT
/*
 * unit_test: softgpu's libcuda without a kernel.  The library's objects are
 * linked in with open/close/ioctl/getpid wrapped (-Wl,--wrap) onto a fake
 * /dev/softgpu that keeps the ioctl ABI's bookkeeping (reservations,
 * handles, mappings, allocations) and logs every call, so the tests can
 * check which calls the library makes: how cuMemAlloc backs and releases
 * GPU pages, what a failure rolls back, what a fork child reopens, and how
 * launch arguments are copied.  The fake does not move bytes; data paths
 * are the VM selftest's job.
 *
 *   make check
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cuda.h"
#include "emulated_kernels.h"
#include "softgpu_uapi.h"

/* ---- The fake device ---- */

#define FAKE_FD 4242
#define MAX_LOG 256
#define MAX_OBJS 64

struct fake_call {
	unsigned long cmd;
	uint64_t va;
	uint64_t size;
};

struct fake_range {
	int used;
	uint64_t va, size;
};

static struct {
	int exists;		/* /dev/softgpu present */
	unsigned int abi;
	int open_fds;		/* opened and not closed */
	int opens;
	pid_t owner;
	uint64_t next_va;
	uint64_t next_handle;
	uint64_t used;
	struct fake_range maps[MAX_OBJS];	/* MEM_MAP and ALLOC ranges */
	struct fake_range reservations[MAX_OBJS];
	struct fake_call log[MAX_LOG];
	int nlog;
	unsigned long fail_cmd;	/* fail the fail_nth-th call of this command */
	int fail_nth;
	int fail_errno;
} fake;

static pid_t fake_pid = 1000;

static void fake_reset(void)
{
	int open_fds = fake.open_fds, opens = fake.opens;

	/* The library's open files outlive a reset of the device. */
	memset(&fake, 0, sizeof(fake));
	fake.open_fds = open_fds;
	fake.opens = opens;
	fake.exists = 1;
	fake.abi = SOFTGPU_ABI_VERSION;
	fake.next_va = 0x10000000000ULL;
}

static int count_calls(unsigned long cmd)
{
	int i, n = 0;

	for (i = 0; i < fake.nlog; i++)
		n += fake.log[i].cmd == cmd;
	return n;
}

static int has_call(unsigned long cmd, uint64_t va, uint64_t size)
{
	int i;

	for (i = 0; i < fake.nlog; i++)
		if (fake.log[i].cmd == cmd && fake.log[i].va == va && fake.log[i].size == size)
			return 1;
	return 0;
}

static struct fake_range *range_add(struct fake_range *set, uint64_t va, uint64_t size)
{
	int i;

	for (i = 0; i < MAX_OBJS; i++) {
		if (!set[i].used) {
			set[i].used = 1;
			set[i].va = va;
			set[i].size = size;
			return &set[i];
		}
	}
	fail_msg("fake softgpu: too many objects");
	return NULL;
}

static struct fake_range *range_find(struct fake_range *set, uint64_t va)
{
	int i;

	for (i = 0; i < MAX_OBJS; i++)
		if (set[i].used && va >= set[i].va && va < set[i].va + set[i].size)
			return &set[i];
	return NULL;
}

static uint64_t fake_va(uint64_t size)
{
	uint64_t va = fake.next_va;

	fake.next_va += (size + SOFTGPU_PAGE_SIZE - 1) / SOFTGPU_PAGE_SIZE * SOFTGPU_PAGE_SIZE +
			SOFTGPU_PAGE_SIZE;
	return va;
}

static void fake_log(unsigned long cmd, uint64_t va, uint64_t size)
{
	assert_true(fake.nlog < MAX_LOG);
	fake.log[fake.nlog++] = (struct fake_call){ cmd, va, size };
}

static int fake_ioctl(unsigned long cmd, void *arg)
{
	if (fake_pid != fake.owner)
		return EACCES;
	if (cmd == fake.fail_cmd && --fake.fail_nth == 0)
		return fake.fail_errno;

	switch (cmd) {
	case SOFTGPU_IOC_GET_INFO: {
		struct softgpu_info *info = arg;

		memset(info, 0, sizeof(*info));
		info->abi_version = fake.abi;
		info->flags = SOFTGPU_INFO_BAR_BACKED;
		info->memory_size = 256ULL << 20;
		info->memory_used = fake.used;
		info->p2p_token = 0x1234;
		info->va_space = 7;
		strcpy(info->name, "fake softgpu");
		fake_log(cmd, 0, 0);
		return 0;
	}
	case SOFTGPU_IOC_ALLOC: {
		struct softgpu_alloc *a = arg;

		a->va = fake_va(a->size);
		range_add(fake.maps, a->va, a->size);
		fake.used += a->size;
		fake_log(cmd, a->va, a->size);
		return 0;
	}
	case SOFTGPU_IOC_FREE: {
		struct softgpu_free *f = arg;
		struct fake_range *r = range_find(fake.maps, f->va);

		fake_log(cmd, f->va, 0);
		if (!r || r->va != f->va)
			return EINVAL;
		fake.used -= r->size;
		r->used = 0;
		return 0;
	}
	case SOFTGPU_IOC_VA_RESERVE: {
		struct softgpu_va_reserve *r = arg;

		r->va = fake_va(r->size);
		range_add(fake.reservations, r->va, r->size);
		fake_log(cmd, r->va, r->size);
		return 0;
	}
	case SOFTGPU_IOC_VA_FREE: {
		struct softgpu_va_free *f = arg;
		struct fake_range *r = range_find(fake.reservations, f->va);

		fake_log(cmd, f->va, f->size);
		if (!r || r->va != f->va || r->size != f->size)
			return EINVAL;
		if (range_find(fake.maps, f->va) ||
		    range_find(fake.maps, f->va + f->size - 1))
			return EBUSY;
		r->used = 0;
		return 0;
	}
	case SOFTGPU_IOC_MEM_CREATE: {
		struct softgpu_mem_create *c = arg;

		c->handle = ++fake.next_handle;
		fake_log(cmd, 0, c->size);
		return 0;
	}
	case SOFTGPU_IOC_MEM_RELEASE:
		fake_log(cmd, 0, 0);
		return 0;
	case SOFTGPU_IOC_MEM_MAP: {
		struct softgpu_mem_map *m = arg;

		fake_log(cmd, m->va, m->size);
		if (!range_find(fake.reservations, m->va) || range_find(fake.maps, m->va))
			return EINVAL;
		range_add(fake.maps, m->va, m->size);
		fake.used += m->size;
		return 0;
	}
	case SOFTGPU_IOC_MEM_UNMAP: {
		struct softgpu_mem_unmap *u = arg;
		struct fake_range *r = range_find(fake.maps, u->va);

		fake_log(cmd, u->va, u->size);
		if (!r || r->va != u->va || r->size != u->size)
			return EINVAL;
		fake.used -= r->size;
		r->used = 0;
		return 0;
	}
	case SOFTGPU_IOC_COPY:
	case SOFTGPU_IOC_COPY_D2D:
	case SOFTGPU_IOC_MEMSET:
		fake_log(cmd, 0, 0);
		return 0;
	default:
		return ENOTTY;
	}
}

/* ---- The wraps ---- */

int __real_open(const char *path, int flags, ...);
int __real_close(int fd);
int __real_ioctl(int fd, unsigned long request, ...);
pid_t __real_getpid(void);
int __wrap_open(const char *path, int flags, ...);
int __wrap_close(int fd);
int __wrap_ioctl(int fd, unsigned long request, ...);
pid_t __wrap_getpid(void);

int __wrap_open(const char *path, int flags, ...)
{
	va_list ap;
	int mode;

	if (!strcmp(path, SOFTGPU_DEVICE_PATH)) {
		if (!fake.exists) {
			errno = ENOENT;
			return -1;
		}
		fake.open_fds++;
		fake.opens++;
		fake.owner = fake_pid;
		return FAKE_FD;
	}
	va_start(ap, flags);
	mode = va_arg(ap, int);
	va_end(ap);
	return __real_open(path, flags, mode);
}

int __wrap_close(int fd)
{
	if (fd == FAKE_FD) {
		fake.open_fds--;
		return 0;
	}
	return __real_close(fd);
}

int __wrap_ioctl(int fd, unsigned long request, ...)
{
	va_list ap;
	void *arg;
	int err;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (fd != FAKE_FD)
		return __real_ioctl(fd, request, arg);
	err = fake_ioctl(request, arg);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

pid_t __wrap_getpid(void)
{
	return fake_pid;
}

/* ---- An emulated kernel that records its arguments ---- */

static unsigned char probe_args[64];
static struct softgpu_launch_config probe_config;

static int probe_kernel(void **params, const void *launch_config_or_null)
{
	memcpy(probe_args, params[0], 4);
	memcpy(probe_args + 8, params[1], 12);
	memcpy(probe_args + 24, params[2], 8);
	probe_config = *(const struct softgpu_launch_config *)launch_config_or_null;
	return CUDA_SUCCESS;
}

static int failing_kernel(void **params, const void *launch_config_or_null)
{
	(void)params;
	(void)launch_config_or_null;
	return CUDA_ERROR_ILLEGAL_ADDRESS;
}

static int probe_nop_kernel(void **params, const void *launch_config_or_null)
{
	(void)params;
	(void)launch_config_or_null;
	return CUDA_SUCCESS;
}

const struct softgpu_emulated_kernel softgpu_emulated_kernels[] = {
	{ "probe", probe_kernel },
	{ "failing", failing_kernel },
	{ "probe_nop", probe_nop_kernel },
	{ NULL, NULL },
};

/* ---- Fixtures ---- */

/* Each test is a new "process": the library drops its tables and reopens. */
static int setup(void **state)
{
	CUcontext ctx;

	(void)state;
	fake_reset();
	fake_pid++;
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	assert_int_equal(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
	assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
	fake.nlog = 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	assert_int_equal(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
	/* Releasing the primary context freed everything allocated in it. */
	assert_int_equal(fake.used, 0);
	return 0;
}

/* ---- Tests ---- */

static void test_no_device(void **state)
{
	(void)state;
	fake_reset();
	fake.exists = 0;
	fake_pid++;
	assert_int_equal(cuInit(0), CUDA_ERROR_NO_DEVICE);
}

static void test_abi_mismatch(void **state)
{
	(void)state;
	fake_reset();
	fake.abi = SOFTGPU_ABI_VERSION + 1;
	fake_pid++;
	assert_int_equal(cuInit(0), CUDA_ERROR_NO_DEVICE);
	assert_int_equal(fake.open_fds, 0);	/* the refused file was closed */
}

/* The CUDA runtime's first request, as Debian's libcudart 11.8 makes it; the real driver knows this id. */
static void test_export_tables_are_refused_as_unknown(void **state)
{
	static const unsigned char cudart_table[16] = { 0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a,
							0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9 };
	const void *table = &table;
	CUuuid id;
	void *fn = NULL;

	(void)state;
	memcpy(id.bytes, cudart_table, sizeof(id.bytes));
	/* As the real driver answers an id it does not know: refused, the out-pointer untouched. */
	assert_int_equal(cuGetExportTable(&table, &id), CUDA_ERROR_INVALID_VALUE);
	assert_ptr_equal(table, &table);
	assert_int_equal(cuGetExportTable(NULL, &id), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGetExportTable(&table, NULL), CUDA_ERROR_INVALID_VALUE);
	assert_ptr_equal(table, &table);
	/* Handed out by cuGetProcAddress from CUDA 3.0 on, as the real one is. */
	assert_int_equal(cuGetProcAddress("cuGetExportTable", &fn, 3000, 0, NULL), CUDA_SUCCESS);
	assert_ptr_equal(fn, (void *)cuGetExportTable);
	assert_int_equal(cuGetProcAddress("cuGetExportTable", &fn, 2040, 0, NULL), CUDA_ERROR_NOT_FOUND);
}

static void test_small_allocs_back_pages(void **state)
{
	CUdeviceptr s1, s2, a, chunk;

	(void)state;
	assert_int_equal(cuMemAlloc(&s1, 8), CUDA_SUCCESS);
	/* A 2 MiB reservation, and one page backed for the block. */
	assert_int_equal(count_calls(SOFTGPU_IOC_VA_RESERVE), 1);
	chunk = fake.log[0].va;
	assert_true(has_call(SOFTGPU_IOC_VA_RESERVE, chunk, 2 << 20));
	assert_int_equal(s1, chunk);
	assert_true(has_call(SOFTGPU_IOC_MEM_MAP, chunk, SOFTGPU_PAGE_SIZE));
	assert_int_equal(count_calls(SOFTGPU_IOC_MEM_CREATE), 1);
	assert_int_equal(count_calls(SOFTGPU_IOC_MEM_RELEASE), 1);

	assert_int_equal(cuMemAlloc(&s2, 8), CUDA_SUCCESS);
	assert_int_equal(s2, chunk + 512);
	assert_int_equal(count_calls(SOFTGPU_IOC_MEM_MAP), 1);	/* page 0 again */

	/* 200000 bytes from offset 1024: pages 0-3, of which 1-3 are new. */
	assert_int_equal(cuMemAlloc(&a, 200000), CUDA_SUCCESS);
	assert_int_equal(a, chunk + 1024);
	assert_int_equal(count_calls(SOFTGPU_IOC_MEM_MAP), 4);
	assert_true(has_call(SOFTGPU_IOC_MEM_MAP, chunk + 3 * SOFTGPU_PAGE_SIZE,
			     SOFTGPU_PAGE_SIZE));

	/* Freeing it gives back pages 1-3 at once; page 0 serves s1 and s2. */
	fake.nlog = 0;
	assert_int_equal(cuMemFree(a), CUDA_SUCCESS);
	assert_int_equal(count_calls(SOFTGPU_IOC_MEM_UNMAP), 3);
	assert_false(has_call(SOFTGPU_IOC_MEM_UNMAP, chunk, SOFTGPU_PAGE_SIZE));
	assert_int_equal(fake.used, SOFTGPU_PAGE_SIZE);

	assert_int_equal(cuMemFree(s1), CUDA_SUCCESS);
	assert_int_equal(count_calls(SOFTGPU_IOC_MEM_UNMAP), 3);
	assert_int_equal(cuMemFree(s2), CUDA_SUCCESS);
	assert_true(has_call(SOFTGPU_IOC_MEM_UNMAP, chunk, SOFTGPU_PAGE_SIZE));
	assert_true(has_call(SOFTGPU_IOC_VA_FREE, chunk, 2 << 20));
	assert_int_equal(cuMemFree(s2), CUDA_ERROR_INVALID_VALUE);
}

static void test_large_alloc_own_chunk(void **state)
{
	CUdeviceptr big;

	(void)state;
	assert_int_equal(cuMemAlloc(&big, (1 << 20) + 1), CUDA_SUCCESS);
	assert_int_equal(count_calls(SOFTGPU_IOC_ALLOC), 1);
	/* Rounded to the granule, as asked of the kernel. */
	assert_true(has_call(SOFTGPU_IOC_ALLOC, big, (1 << 20) + 512));
	assert_int_equal(count_calls(SOFTGPU_IOC_VA_RESERVE), 0);
	assert_int_equal(cuMemFree(big), CUDA_SUCCESS);
	assert_true(has_call(SOFTGPU_IOC_FREE, big, 0));
}

/* As the real driver answered on the H200 (tools/probe-pointer-attributes-on-h200.out). */
static void test_pointer_attributes_at_once(void **state)
{
	CUpointer_attribute attrs[] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_HOST_POINTER,
					CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
					CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_CONTEXT };
	unsigned int type = 99;
	void *host = &host;
	int ordinal = 99;
	CUdeviceptr gpu, start = 7;
	size_t size = 7;
	CUcontext ctx = (CUcontext)&ctx;
	void *data[] = { &type, &host, &ordinal, &start, &size, &ctx };
	int can = 77;

	(void)state;
	assert_int_equal(cuMemAlloc(&gpu, 4 << 20), CUDA_SUCCESS);
	assert_int_equal(cuPointerGetAttributes(6, attrs, data, gpu + 4096), CUDA_SUCCESS);
	assert_int_equal(type, CU_MEMORYTYPE_DEVICE);
	assert_null(host);	/* not applicable: written as 0, no error */
	assert_int_equal(ordinal, 0);
	assert_int_equal(start, gpu);
	assert_int_equal(size, 4 << 20);
	assert_non_null(ctx);
	/* Memory the driver does not know: no error, defaults, the range untouched. */
	start = 7;
	size = 7;
	assert_int_equal(cuPointerGetAttributes(6, attrs, data, 0x1000), CUDA_SUCCESS);
	assert_int_equal(type, 0);
	assert_ptr_equal(host, (void *)0x1000);
	assert_int_equal(ordinal, -2);
	assert_int_equal(start, 7);
	assert_int_equal(size, 7);
	assert_null(ctx);
	assert_int_equal(cuPointerGetAttributes(0, attrs, data, gpu), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuPointerGetAttributes(1, NULL, data, gpu), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuPointerGetAttributes(1, attrs, NULL, gpu), CUDA_ERROR_INVALID_VALUE);
	/* One device: asked about itself it succeeds and writes nothing; no other ordinal exists. */
	assert_int_equal(cuDeviceCanAccessPeer(&can, 0, 0), CUDA_SUCCESS);
	assert_int_equal(can, 77);
	assert_int_equal(cuDeviceCanAccessPeer(&can, 0, 1), CUDA_ERROR_INVALID_DEVICE);
	assert_int_equal(cuDeviceCanAccessPeer(&can, 1, 0), CUDA_ERROR_INVALID_DEVICE);
	assert_int_equal(cuDeviceCanAccessPeer(NULL, 0, 0), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemFree(gpu), CUDA_SUCCESS);
}

static void test_alloc_failure_rolls_back(void **state)
{
	CUdeviceptr p;

	(void)state;
	/* The third page cannot be created: the two before it are given back. */
	fake.fail_cmd = SOFTGPU_IOC_MEM_CREATE;
	fake.fail_nth = 3;
	fake.fail_errno = ENOMEM;
	assert_int_equal(cuMemAlloc(&p, 4 * SOFTGPU_PAGE_SIZE), CUDA_ERROR_OUT_OF_MEMORY);
	assert_int_equal(count_calls(SOFTGPU_IOC_MEM_MAP), 2);
	assert_int_equal(count_calls(SOFTGPU_IOC_MEM_UNMAP), 2);
	assert_int_equal(count_calls(SOFTGPU_IOC_VA_FREE), 1);
	assert_int_equal(fake.used, 0);

	/* A failed large allocation reports the kernel's errno as a CUresult. */
	fake.fail_cmd = SOFTGPU_IOC_ALLOC;
	fake.fail_nth = 1;
	fake.fail_errno = ENOMEM;
	assert_int_equal(cuMemAlloc(&p, 8 << 20), CUDA_ERROR_OUT_OF_MEMORY);
}

static void test_fork_child_reopens(void **state)
{
	CUdeviceptr parents, childs;
	int opens;

	(void)state;
	assert_int_equal(cuMemAlloc(&parents, 100), CUDA_SUCCESS);
	opens = fake.opens;

	/* Now in a "fork child": the parent's file would answer EACCES. */
	fake_pid++;
	fake.nlog = 0;
	assert_int_equal(cuMemAlloc(&childs, 100), CUDA_SUCCESS);
	assert_int_equal(fake.opens, opens + 1);
	assert_int_equal(fake.open_fds, 1);	/* the inherited one was closed */
	assert_int_equal(count_calls(SOFTGPU_IOC_VA_RESERVE), 1);	/* a fresh table */
	/* The parent's allocation is not the child's to free. */
	assert_int_equal(cuMemFree(parents), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemFree(childs), CUDA_SUCCESS);
	/* Back in the "parent" would be another process again; the fake forgets it. */
	fake.used = 0;
}

static void test_host_memory_is_uva(void **state)
{
	CUdeviceptr dp;
	unsigned int type;
	void *h;

	(void)state;
	assert_int_equal(cuMemHostAlloc(&h, 100, CU_MEMHOSTALLOC_DEVICEMAP), CUDA_SUCCESS);
	assert_int_equal(cuMemHostGetDevicePointer(&dp, h, 0), CUDA_SUCCESS);
	assert_int_equal(dp, (CUdeviceptr)(uintptr_t)h);
	assert_int_equal(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dp),
			 CUDA_SUCCESS);
	assert_int_equal(type, CU_MEMORYTYPE_HOST);
	/* Host-to-host through a mapped pointer needs no kernel. */
	fake.nlog = 0;
	assert_int_equal(cuMemsetD8(dp, 0x3C, 100), CUDA_SUCCESS);
	assert_int_equal(((unsigned char *)h)[99], 0x3C);
	assert_int_equal(fake.nlog, 0);
	assert_int_equal(cuMemFreeHost(h), CUDA_SUCCESS);
}

/* What a thread with no current context gets from the calls it makes. */
struct contextless {
	CUdeviceptr free_ptr;
	CUresult current, free_live, free_again, alloc, sync;
	CUcontext seen;
};

static void *contextless_thread(void *arg)
{
	struct contextless *c = arg;
	CUdeviceptr p;

	c->current = cuCtxGetCurrent(&c->seen);
	c->free_live = cuMemFree(c->free_ptr);
	c->free_again = cuMemFree(c->free_ptr);
	c->alloc = cuMemAlloc(&p, 64);
	c->sync = cuCtxSynchronize();
	return NULL;
}

/*
 * The real driver (580, CUDA 13.0, H200) frees a live allocation from a
 * thread with no current context and returns CUDA_SUCCESS: a program that
 * frees from a worker thread must pass here as it does on a GPU.
 */
static void test_free_without_current_context(void **state)
{
	struct contextless c = { .seen = (CUcontext)1 };
	CUdeviceptr keep, other_ctx_ptr;
	CUcontext primary, other;
	pthread_t t;

	(void)state;
	assert_int_equal(cuCtxGetCurrent(&primary), CUDA_SUCCESS);
	assert_int_equal(cuMemAlloc(&keep, 100), CUDA_SUCCESS);
	assert_int_equal(cuMemAlloc(&c.free_ptr, 200000), CUDA_SUCCESS);
	fake.nlog = 0;
	assert_int_equal(pthread_create(&t, NULL, contextless_thread, &c), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(c.current, CUDA_SUCCESS);
	assert_null(c.seen);
	assert_int_equal(c.free_live, CUDA_SUCCESS);
	/* Its pages went back to softgpu; those it shared with `keep` stayed. */
	assert_int_equal(count_calls(SOFTGPU_IOC_MEM_UNMAP), 3);
	/* No allocation there any more: an invalid value, context or not. */
	assert_int_equal(c.free_again, CUDA_ERROR_INVALID_VALUE);
	/* Calls that act in the current context still need one. */
	assert_int_equal(c.alloc, CUDA_ERROR_INVALID_CONTEXT);
	assert_int_equal(c.sync, CUDA_ERROR_INVALID_CONTEXT);

	/* The same on this thread after cuCtxSetCurrent(NULL). */
	assert_int_equal(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
	assert_int_equal(cuMemFree(keep), CUDA_SUCCESS);
	assert_int_equal(cuMemFree(keep), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemFree(0), CUDA_SUCCESS);

	/* An allocation of another context is freed from the primary one. */
	assert_int_equal(cuCtxCreate(&other, NULL, 0, 0), CUDA_SUCCESS);
	assert_int_equal(cuMemAlloc(&other_ctx_ptr, 100), CUDA_SUCCESS);
	assert_int_equal(cuCtxSetCurrent(primary), CUDA_SUCCESS);
	assert_int_equal(cuMemFree(other_ctx_ptr), CUDA_SUCCESS);
	assert_int_equal(cuMemFree(other_ctx_ptr), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuCtxDestroy(other), CUDA_SUCCESS);
	assert_int_equal(cuCtxSetCurrent(primary), CUDA_SUCCESS);
}

static const char probe_ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n\n"
	".visible .entry probe(\n"
	"\t.param .u32 probe_param_0,\n"
	"\t.param .align 8 .b8 probe_param_1[12],\n"
	"\t.param .u64 .ptr .global .align 1 probe_param_2\n"
	")\n{\n\tret;\n}\n"
	".visible .entry failing()\n{\n\tret;\n}\n";

static void test_launch_copies_arguments(void **state)
{
	unsigned char packed[32], expect[32];
	unsigned int a = 0x11223344;
	unsigned char s[12] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };
	uint64_t p = 0x1122334455667788ULL;
	size_t packed_size = sizeof(packed);
	void *params[3] = { &a, s, &p };
	void *extra[5];
	CUfunction fn, bad;
	CUmodule mod;

	(void)state;
	assert_int_equal(cuModuleLoadData(&mod, probe_ptx), CUDA_SUCCESS);
	assert_int_equal(cuModuleGetFunction(&fn, mod, "probe"), CUDA_SUCCESS);
	memset(expect, 0, sizeof(expect));
	memcpy(expect, &a, 4);
	memcpy(expect + 8, s, 12);	/* aligned to 8: offset 8 */
	memcpy(expect + 24, &p, 8);

	memset(probe_args, 0, sizeof(probe_args));
	assert_int_equal(cuLaunchKernel(fn, 2, 3, 4, 32, 2, 1, 128, NULL, params, NULL),
			 CUDA_SUCCESS);
	a = 0;			/* the launch took a copy */
	assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
	assert_memory_equal(probe_args, expect, 32);
	assert_int_equal(probe_config.grid_dim[2], 4);
	assert_int_equal(probe_config.block_dim[1], 2);
	assert_int_equal(probe_config.shared_mem_bytes, 128);

	/* The same through CU_LAUNCH_PARAM_BUFFER_POINTER. */
	memcpy(packed, expect, sizeof(packed));
	extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
	extra[1] = packed;
	extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
	extra[3] = &packed_size;
	extra[4] = CU_LAUNCH_PARAM_END;
	memset(probe_args, 0, sizeof(probe_args));
	assert_int_equal(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra),
			 CUDA_SUCCESS);
	assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
	assert_memory_equal(probe_args, expect, 32);

	/* What an emulated kernel returns is what synchronize reports. */
	assert_int_equal(cuModuleGetFunction(&bad, mod, "failing"), CUDA_SUCCESS);
	assert_int_equal(cuLaunchKernel(bad, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
			 CUDA_SUCCESS);
	assert_int_equal(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
	assert_int_equal(cuModuleUnload(mod), CUDA_SUCCESS);
}

/*
 * tools/probe-contextless.c, run against the fake device, must print what
 * the real driver printed (tools/probe-contextless-on-h200.out, 580 on an
 * H200) line for line: calls from a thread without a current context, or
 * with a destroyed one.  Only the header comments and the driver version
 * may differ, and lines a run marks "skipped".
 */
int probe_contextless_main(void);
#define main probe_contextless_main
#include "tools/probe-contextless.c"
#undef main

#define PROBE_REAL_OUTPUT "tools/probe-contextless-on-h200.out"
#define PROBE_MAX_LINES 128

/* The lines of @f that are compared, without line ends; returns how many. */
static int probe_lines(FILE *f, char lines[][160])
{
	char buf[160];
	int n = 0;

	while (fgets(buf, sizeof(buf), f)) {
		buf[strcspn(buf, "\r\n")] = 0;
		if (buf[0] == '#' || !strncmp(buf, "CUDA driver ", 12) || strstr(buf, " skipped: "))
			continue;
		assert_true(n < PROBE_MAX_LINES);
		strcpy(lines[n++], buf);
	}
	return n;
}

static void test_probe_contextless_matches_real_driver(void **state)
{
	static char ours[PROBE_MAX_LINES][160], real[PROBE_MAX_LINES][160];
	FILE *out = tmpfile(), *expected = fopen(PROBE_REAL_OUTPUT, "r");
	int saved, n_ours, n_real, i, differ = 0;

	(void)state;
	if (!expected)
		fail_msg("cannot read %s (run from tests/softgpu/libcuda): %s", PROBE_REAL_OUTPUT,
			 strerror(errno));
	assert_non_null(out);
	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	assert_true(saved >= 0 && dup2(fileno(out), STDOUT_FILENO) == STDOUT_FILENO);
	probe_contextless_main();
	fflush(stdout);
	assert_int_equal(dup2(saved, STDOUT_FILENO), STDOUT_FILENO);
	close(saved);
	rewind(out);
	n_ours = probe_lines(out, ours);
	n_real = probe_lines(expected, real);
	fclose(out);
	fclose(expected);
	for (i = 0; i < n_ours || i < n_real; i++) {
		const char *a = i < n_ours ? ours[i] : "(no line)";
		const char *b = i < n_real ? real[i] : "(no line)";

		if (strcmp(a, b)) {
			print_error("softgpu: %s\nreal:    %s\n", a, b);
			differ++;
		}
	}
	assert_int_equal(differ, 0);
	assert_int_equal(n_ours, n_real);
	/* The probe retained the primary context once more than setup did. */
	assert_int_equal(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_device),
		cmocka_unit_test(test_abi_mismatch),
		cmocka_unit_test(test_export_tables_are_refused_as_unknown),
		cmocka_unit_test_setup_teardown(test_small_allocs_back_pages, setup, teardown),
		cmocka_unit_test_setup_teardown(test_large_alloc_own_chunk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pointer_attributes_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_alloc_failure_rolls_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_child_reopens, setup, teardown),
		cmocka_unit_test_setup_teardown(test_host_memory_is_uva, setup, teardown),
		cmocka_unit_test_setup_teardown(test_free_without_current_context, setup, teardown),
		cmocka_unit_test_setup_teardown(test_launch_copies_arguments, setup, teardown),
		cmocka_unit_test_setup_teardown(test_probe_contextless_matches_real_driver, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
