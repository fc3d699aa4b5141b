// SPDX-License-Identifier: MIT
/*
 * gdrdrv_ktest - kernel-level tests of gdrdrv and softgpu, run inside a VM
 * with both modules loaded.  Talks to /dev/gdrdrv (include/uapi/gdrdrv.h)
 * and /dev/softgpu (softgpu_uapi.h) directly.
 *
 * What the tests expect depends on how the modules were loaded, and they
 * read it from the devices: gdrdrv's persistent-mapping attribute (legacy
 * pins get free callbacks, persistent ones keep memory alive) and softgpu's
 * backing (BAR: write-combined mappings; RAM: CPU-cached).  Run it once per
 * configuration; run_ktests.sh does all four.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ktest.h"

static size_t host_page(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

static void fill_pattern(uint32_t *buf, size_t words, uint32_t seed)
{
	for (size_t i = 0; i < words; i++)
		buf[i] = seed ^ (uint32_t)(i * 2654435761u);
}

/* Runs @fn in a child process; returns its exit status (0: it passed). */
static int in_child(void (*fn)(void *), void *arg)
{
	int status;
	pid_t pid = fork();

	KT_ASSERT(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		fn(arg);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

/* ========================= softgpu on its own ============================ */

static void test_softgpu_info(void)
{
	int a = sg_open(), b = sg_open();
	struct softgpu_info ia = sg_info(a), ib = sg_info(b);

	KT_ASSERT(ia.abi_version == SOFTGPU_ABI_VERSION, "abi %u", ia.abi_version);
	KT_ASSERT(ia.memory_size >= KT_GPU_PAGE, "memory_size %llu",
		  (unsigned long long)ia.memory_size);
	KT_ASSERT(ia.p2p_token && ia.va_space, "token/va_space must be non-zero");
	KT_ASSERT(ia.p2p_token != ib.p2p_token && ia.va_space != ib.va_space,
		  "two opens must be two spaces");
	KT_ASSERT(memchr(ia.name, '\0', sizeof(ia.name)) && ia.name[0], "name");
	{
		char knob[16];

		if (knob_get("cpu_cacheable", knob, sizeof(knob)) && !strcmp(knob, "-1"))
			KT_ASSERT(!(ia.flags & SOFTGPU_INFO_BAR_BACKED) ==
				  !!(ia.flags & SOFTGPU_INFO_CPU_CACHEABLE),
				  "by default a BAR is not CPU-cacheable and RAM is (flags %#x)",
				  ia.flags);
	}
	close(a);
	close(b);
}

static void test_softgpu_unknown_ioctl(void)
{
	int sg = sg_open();
	uint64_t arg = 0;

	KT_EXPECT_ERR(sg_ioctl(sg, _IOWR(SOFTGPU_IOCTL, 0x7f, uint64_t), &arg), ENOTTY);
	KT_EXPECT_ERR(sg_ioctl(sg, _IOWR('x', 0x01, uint64_t), &arg), ENOTTY);
}

static void test_softgpu_alloc_free(void)
{
	int sg = sg_open();
	uint64_t used0 = sg_info(sg).memory_used, va, va2;
	struct softgpu_query q = { 0 };
	struct softgpu_free f;

	va = sg_alloc(sg, 1);
	KT_ASSERT(!(va & (KT_GPU_PAGE - 1)), "va %#llx not 64 KiB aligned",
		  (unsigned long long)va);
	KT_ASSERT(sg_info(sg).memory_used == used0 + KT_GPU_PAGE, "1 byte takes one GPU page");
	q.va = va + 100;
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_QUERY, &q));
	KT_ASSERT(q.base == va && q.size == KT_GPU_PAGE && q.alloc_base == va, "query");
	va2 = sg_alloc(sg, 3 * KT_GPU_PAGE + 1);
	KT_ASSERT(va2 >= va + KT_GPU_PAGE, "allocations overlap");

	sg_free(sg, va);
	q.va = va;
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_QUERY, &q), ENOENT);
	f.va = va;
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_FREE, &f), EINVAL);	/* double free */
	f.va = va2 + KT_GPU_PAGE;
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_FREE, &f), EINVAL);	/* not its start */
	f.va = 0;
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_FREE, &f), EINVAL);

	KT_EXPECT_ERR(sg_try_alloc(sg, 0, &va), EINVAL);
	KT_EXPECT_ERR(sg_try_alloc(sg, UINT64_MAX, &va), EINVAL);
	KT_EXPECT_ERR(sg_try_alloc(sg, 1ULL << 62, &va), ENOMEM);
	sg_free(sg, va2);
	KT_ASSERT(sg_info(sg).memory_used == used0, "memory not returned");
}

static void test_softgpu_copy(void)
{
	int sg = sg_open();
	uint64_t size = 3 * KT_GPU_PAGE, va = sg_alloc(sg, size);
	uint8_t *in = malloc(size), *out = malloc(size);
	struct softgpu_copy c;

	fill_pattern((uint32_t *)in, size / 4, 0x5eed);
	sg_write(sg, va, in, size);
	memset(out, 0, size);
	sg_read(sg, va, out, size);
	KT_ASSERT(!memcmp(in, out, size), "round trip");

	/* Unaligned, across a GPU page boundary, both ends. */
	memset(out, 0xee, size);
	sg_write(sg, va + KT_GPU_PAGE - 3, "abcdefg", 7);
	sg_read(sg, va + KT_GPU_PAGE - 5, out, 11);
	KT_ASSERT(out[0] == in[KT_GPU_PAGE - 5] && !memcmp(out + 2, "abcdefg", 7) &&
		  out[9] == in[KT_GPU_PAGE + 4], "unaligned copy");

	c = (struct softgpu_copy){ .va = va, .host = (uintptr_t)out, .size = 16,
				   .direction = 3 };
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_COPY, &c), EINVAL);
	c.direction = SOFTGPU_COPY_FROM_GPU;
	c.pad = 1;
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_COPY, &c), EINVAL);
	c.pad = 0;
	c.va = va + size - 8;	/* past the end */
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_COPY, &c), EINVAL);
	c.va = va - KT_GPU_PAGE;	/* the guard hole before it */
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_COPY, &c), EINVAL);
	c.va = va;
	c.size = UINT64_MAX;	/* wraps */
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_COPY, &c), EINVAL);
	c.size = 16;
	c.host = 8;		/* bad host pointer */
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_COPY, &c), EFAULT);
	c.size = 0;
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_COPY, &c));
	sg_free(sg, va);
	c.size = 16;
	c.host = (uintptr_t)out;
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_COPY, &c), EINVAL);	/* freed */
	free(in);
	free(out);
}

static void test_softgpu_copy_d2d(void)
{
	int sg = sg_open();
	uint64_t size = 4 * KT_GPU_PAGE, va = sg_alloc(sg, size), va2 = sg_alloc(sg, size);
	uint8_t *ref = malloc(size), *got = malloc(size);
	struct softgpu_copy_d2d d;
	const struct { uint64_t dst, src, n; } cases[] = {
		{ 0, KT_GPU_PAGE + 7, 2 * KT_GPU_PAGE },	/* overlap, dst below */
		{ KT_GPU_PAGE + 3, 0, 2 * KT_GPU_PAGE + 5 },	/* overlap, dst above */
		{ 100, 100, 1000 },				/* same */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fill_pattern((uint32_t *)ref, size / 4, (uint32_t)i);
		sg_write(sg, va, ref, size);
		d = (struct softgpu_copy_d2d){ .dst = va + cases[i].dst,
					       .src = va + cases[i].src,
					       .size = cases[i].n };
		KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_COPY_D2D, &d));
		memmove(ref + cases[i].dst, ref + cases[i].src, cases[i].n);
		sg_read(sg, va, got, size);
		KT_ASSERT(!memcmp(ref, got, size), "case %zu differs from memmove", i);
	}
	d = (struct softgpu_copy_d2d){ .dst = va2 + 1, .src = va, .size = KT_GPU_PAGE };
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_COPY_D2D, &d));
	sg_read(sg, va2 + 1, got, KT_GPU_PAGE);
	KT_ASSERT(!memcmp(ref, got, KT_GPU_PAGE), "between allocations");
	d.size = size;		/* runs past va2's end */
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_COPY_D2D, &d), EINVAL);
	d = (struct softgpu_copy_d2d){ .dst = va, .src = va + 1, .size = UINT64_MAX };
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_COPY_D2D, &d), EINVAL);
	free(ref);
	free(got);
}

static void test_softgpu_memset(void)
{
	int sg = sg_open();
	uint64_t va = sg_alloc(sg, 2 * KT_GPU_PAGE);
	struct softgpu_memset m;
	uint8_t buf[64];

	m = (struct softgpu_memset){ .va = va + KT_GPU_PAGE - 8, .count = 4,
				     .value = 0xa1b2c3d4, .elem_size = 4 };
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_MEMSET, &m));
	m = (struct softgpu_memset){ .va = va + KT_GPU_PAGE + 8, .count = 3,
				     .value = 0xbeef, .elem_size = 2 };
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_MEMSET, &m));
	m = (struct softgpu_memset){ .va = va + KT_GPU_PAGE + 14, .count = 2,
				     .value = 0x77, .elem_size = 1 };
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_MEMSET, &m));
	sg_read(sg, va + KT_GPU_PAGE - 8, buf, 24);
	for (int i = 0; i < 4; i++) {
		uint32_t v;

		memcpy(&v, buf + 4 * i, 4);
		KT_ASSERT(v == 0xa1b2c3d4, "u32 %d = %#x", i, v);
	}
	for (int i = 0; i < 3; i++) {
		uint16_t v;

		memcpy(&v, buf + 16 + 2 * i, 2);
		KT_ASSERT(v == 0xbeef || i == 2, "u16 %d = %#x", i, v);
	}
	KT_ASSERT(buf[22] == 0x77 && buf[23] == 0x77, "u8");

	m = (struct softgpu_memset){ .va = va + 2, .count = 1, .elem_size = 4 };
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_MEMSET, &m), EINVAL);	/* misaligned */
	m = (struct softgpu_memset){ .va = va, .count = 1, .elem_size = 3 };
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_MEMSET, &m), EINVAL);
	m = (struct softgpu_memset){ .va = va, .count = 2 * KT_GPU_PAGE + 1, .elem_size = 1 };
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_MEMSET, &m), EINVAL);	/* past the end */
	m = (struct softgpu_memset){ .va = va, .count = UINT64_MAX / 2, .elem_size = 4 };
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_MEMSET, &m), EINVAL);	/* overflows */
}

static void test_softgpu_vmm(void)
{
	int sg = sg_open();
	struct softgpu_mem_create c1 = { .size = 2 * KT_GPU_PAGE }, c2 = { .size = 1 };
	struct softgpu_va_reserve r = { .size = 4 * KT_GPU_PAGE, .align = 1 << 20 };
	struct softgpu_mem_map m;
	struct softgpu_mem_unmap u;
	struct softgpu_mem_release rel;
	struct softgpu_va_free vf;
	struct softgpu_query q = { 0 };
	uint8_t in[256], out[256];

	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_MEM_CREATE, &c1));
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_MEM_CREATE, &c2));
	KT_ASSERT(c1.handle && c2.handle && c1.handle != c2.handle, "handles");
	KT_ASSERT(c2.size == KT_GPU_PAGE, "size rounded up to %llu",
		  (unsigned long long)c2.size);
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_VA_RESERVE, &r));
	KT_ASSERT(!(r.va & ((1 << 20) - 1)), "alignment");

	m = (struct softgpu_mem_map){ .va = r.va, .size = 2 * KT_GPU_PAGE, .handle = c1.handle };
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_MEM_MAP, &m));
	m = (struct softgpu_mem_map){ .va = r.va + 2 * KT_GPU_PAGE, .size = KT_GPU_PAGE,
				      .handle = c2.handle };
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_MEM_MAP, &m));
	m.va = r.va + KT_GPU_PAGE;	/* overlaps the first mapping */
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_MEM_MAP, &m), EBUSY);
	m.va = r.va + 3 * KT_GPU_PAGE;
	m.offset = KT_GPU_PAGE;		/* past c2's end */
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_MEM_MAP, &m), EINVAL);
	m.offset = 0;
	m.handle = 0xdead;
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_MEM_MAP, &m), EINVAL);
	m = (struct softgpu_mem_map){ .va = r.va + 3 * KT_GPU_PAGE + 4096,
				      .size = KT_GPU_PAGE, .handle = c2.handle };
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_MEM_MAP, &m), EINVAL);	/* unaligned */
	m = (struct softgpu_mem_map){ .va = r.va + 3 * KT_GPU_PAGE, .size = 2 * KT_GPU_PAGE,
				      .handle = c1.handle };
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_MEM_MAP, &m), EINVAL);	/* past the range */

	/* One copy across both mappings: they are contiguous in the space. */
	fill_pattern((uint32_t *)in, sizeof(in) / 4, 9);
	sg_write(sg, r.va + 2 * KT_GPU_PAGE - 128, in, sizeof(in));
	sg_read(sg, r.va + 2 * KT_GPU_PAGE - 128, out, sizeof(out));
	KT_ASSERT(!memcmp(in, out, sizeof(in)), "copy across mappings");
	q.va = r.va + 2 * KT_GPU_PAGE + 5;
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_QUERY, &q));
	KT_ASSERT(q.base == r.va + 2 * KT_GPU_PAGE && q.size == KT_GPU_PAGE &&
		  q.alloc_base == r.va, "query in a reservation");

	/* Released handles live on while mapped. */
	rel.handle = c2.handle;
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_MEM_RELEASE, &rel));
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_MEM_RELEASE, &rel), EINVAL);
	sg_read(sg, r.va + 2 * KT_GPU_PAGE - 128, out, sizeof(out));
	KT_ASSERT(!memcmp(in, out, sizeof(in)), "memory lives while mapped");

	vf = (struct softgpu_va_free){ .va = r.va, .size = r.size };
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_VA_FREE, &vf), EBUSY);
	u = (struct softgpu_mem_unmap){ .va = r.va, .size = KT_GPU_PAGE };
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_MEM_UNMAP, &u), EINVAL);	/* splits one */
	u = (struct softgpu_mem_unmap){ .va = r.va, .size = 3 * KT_GPU_PAGE };
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_MEM_UNMAP, &u));
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_MEM_UNMAP, &u), EINVAL);	/* nothing there */
	vf.size = KT_GPU_PAGE;
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_VA_FREE, &vf), EINVAL);	/* wrong size */
	vf.size = r.size;
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_VA_FREE, &vf));
	rel.handle = c1.handle;
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_MEM_RELEASE, &rel));
	r = (struct softgpu_va_reserve){ .size = KT_GPU_PAGE, .align = 3 * KT_GPU_PAGE };
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_VA_RESERVE, &r), EINVAL);
	r = (struct softgpu_va_reserve){ .size = 0 };
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_VA_RESERVE, &r), EINVAL);
}

static void test_softgpu_dmabuf(void)
{
	int sg = sg_open();
	uint64_t size = 2 * KT_GPU_PAGE, va = sg_alloc(sg, size);
	struct softgpu_export_dmabuf e = { .va = va + host_page(), .size = KT_GPU_PAGE };
	uint32_t *pattern = malloc(size), *map, v;
	uint64_t used;

	fill_pattern(pattern, size / 4, 77);
	sg_write(sg, va, pattern, size);
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_EXPORT_DMABUF, &e));
	KT_ASSERT(e.fd >= 0 && (fcntl(e.fd, F_GETFD) & FD_CLOEXEC), "fd %d O_CLOEXEC", e.fd);
	map = mmap(NULL, KT_GPU_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, e.fd, 0);
	KT_ASSERT(map != MAP_FAILED, "mmap dma-buf: %s", strerror(errno));
	KT_ASSERT(!memcmp(map, (uint8_t *)pattern + host_page(), KT_GPU_PAGE),
		  "dma-buf mapping shows the GPU memory (crosses a GPU page)");
	map[10] = 0x12345678;
	sg_read(sg, va + host_page() + 40, &v, 4);
	KT_ASSERT(v == 0x12345678, "store through the dma-buf reached GPU memory");
	KT_ASSERT(mmap(NULL, 2 * KT_GPU_PAGE, PROT_READ, MAP_SHARED, e.fd, 0) == MAP_FAILED,
		  "mapping past the dma-buf's end must fail");

	/* Unmapping part of a mapping (a VMA split) is fine and leaves the rest. */
	{
		uint8_t *three = mmap(NULL, 3 * host_page(), PROT_READ | PROT_WRITE,
				      MAP_SHARED, e.fd, 0);

		KT_ASSERT(three != MAP_FAILED, "mmap: %s", strerror(errno));
		KT_ASSERT(!munmap(three + host_page(), host_page()), "partial munmap: %s",
			  strerror(errno));
		KT_ASSERT(!memcmp(three + 2 * host_page(),
				  (uint8_t *)pattern + 3 * host_page(), host_page()),
			  "the rest of a split dma-buf mapping");
		munmap(three, host_page());
		munmap(three + 2 * host_page(), host_page());
	}

	/* The dma-buf keeps the memory after FREE, like a persistent pin. */
	used = sg_info(sg).memory_used;
	sg_free(sg, va);
	KT_ASSERT(sg_info(sg).memory_used == used, "memory must live while exported");
	KT_ASSERT(map[10] == 0x12345678, "mapping still valid after FREE");
	munmap(map, KT_GPU_PAGE);
	close(e.fd);
	KT_ASSERT(sg_info(sg).memory_used == used - size, "freed with the last reference");

	va = sg_alloc(sg, size);
	e = (struct softgpu_export_dmabuf){ .va = va + 1, .size = host_page() };
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_EXPORT_DMABUF, &e), EINVAL);
	e = (struct softgpu_export_dmabuf){ .va = va, .size = host_page(), .flags = 0x80 };
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_EXPORT_DMABUF, &e), EINVAL);
	e = (struct softgpu_export_dmabuf){ .va = va, .size = size + host_page() };
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_EXPORT_DMABUF, &e), EINVAL);
	e = (struct softgpu_export_dmabuf){ .va = va, .size = 0 };
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_EXPORT_DMABUF, &e), EINVAL);
	e = (struct softgpu_export_dmabuf){ .va = va, .size = host_page(),
					    .flags = SOFTGPU_DMABUF_FLAG_PCIE };
	KT_EXPECT_ERR(sg_ioctl(sg, SOFTGPU_IOC_EXPORT_DMABUF, &e),
		      kt_env.sg_info.flags & SOFTGPU_INFO_BAR_BACKED ? 0 : EOPNOTSUPP);
	free(pattern);
}

static void test_softgpu_out_of_memory(void)
{
	int sg = sg_open();
	struct softgpu_info info = sg_info(sg);
	uint64_t va[2], extra;
	char size[32];

	if (info.flags & SOFTGPU_INFO_BAR_BACKED) {
		/* The whole BAR, then one page more. */
		KT_EXPECT_ERR(sg_try_alloc(sg, info.memory_size + KT_GPU_PAGE, &extra), ENOMEM);
		return;
	}
	/* RAM mode: shrink the GPU to what is used plus two pages. */
	snprintf(size, sizeof(size), "%llu",
		 (unsigned long long)(info.memory_used + 2 * KT_GPU_PAGE));
	knob_set("ram_size", size);
	KT_ASSERT(sg_info(sg).memory_size == info.memory_used + 2 * KT_GPU_PAGE,
		  "memory_size follows ram_size");
	va[0] = sg_alloc(sg, KT_GPU_PAGE);
	va[1] = sg_alloc(sg, KT_GPU_PAGE);
	KT_EXPECT_ERR(sg_try_alloc(sg, KT_GPU_PAGE, &extra), ENOMEM);
	sg_free(sg, va[0]);
	va[0] = sg_alloc(sg, KT_GPU_PAGE);	/* freed memory is usable again */
	sg_free(sg, va[0]);
	sg_free(sg, va[1]);
}

static int fork_sg_fd;

static void child_uses_parent_softgpu(void *arg)
{
	struct softgpu_info info;
	uint64_t va;

	(void)arg;
	if (sg_ioctl(fork_sg_fd, SOFTGPU_IOC_GET_INFO, &info) != EACCES ||
	    sg_try_alloc(fork_sg_fd, KT_GPU_PAGE, &va) != EACCES)
		_exit(1);
}

static void test_softgpu_foreign_process(void)
{
	fork_sg_fd = sg_open();
	KT_ASSERT(in_child(child_uses_parent_softgpu, NULL) == 0,
		  "a fork child must get EACCES on its parent's softgpu file");
	(void)sg_info(fork_sg_fd);	/* the parent still can */
}

static void test_softgpu_space_isolation(void)
{
	int a = sg_open(), b = sg_open();
	uint64_t va = sg_alloc(a, KT_GPU_PAGE);
	struct softgpu_copy c = { .va = va, .size = 4, .direction = SOFTGPU_COPY_FROM_GPU };
	uint32_t v;
	struct softgpu_free f = { .va = va };

	c.host = (uintptr_t)&v;
	KT_EXPECT_ERR(sg_ioctl(b, SOFTGPU_IOC_COPY, &c), EINVAL);
	KT_EXPECT_ERR(sg_ioctl(b, SOFTGPU_IOC_FREE, &f), EINVAL);
	KT_EXPECT_OK(sg_ioctl(a, SOFTGPU_IOC_COPY, &c));
}

/* ============================ gdrdrv ===================================== */

struct fixture {
	int sg, gd;
	uint64_t va, size;
};

static struct fixture fixture(uint64_t size)
{
	struct fixture f;

	f.sg = sg_open();
	f.gd = gd_open();
	f.size = size;
	f.va = sg_alloc(f.sg, size);
	return f;
}

static uint64_t pin_ok(struct fixture *f, uint64_t addr, uint64_t size)
{
	uint64_t h;

	KT_EXPECT_OK(gd_pin(f->gd, addr, size, 0, &h));
	return h;
}

static void test_gdrdrv_get_version(void)
{
	int gd = gd_open();
	struct gdrdrv_get_version v;

	KT_EXPECT_OK(gd_ioctl(gd, GDRDRV_IOC_GET_VERSION, &v));
	KT_ASSERT(v.gdrdrv_version == GDRDRV_VERSION, "version %#x, want %#x",
		  v.gdrdrv_version, GDRDRV_VERSION);
	KT_ASSERT(v.minimum_gdr_api_version == GDRDRV_MINIMUM_GDR_API_VERSION,
		  "minimum api %#x", v.minimum_gdr_api_version);
}

static void test_gdrdrv_get_attr(void)
{
	int gd = gd_open();
	struct gdrdrv_get_attr a = { .attr = GDRDRV_ATTR_USE_PERSISTENT_MAPPING };

	KT_EXPECT_OK(gd_ioctl(gd, GDRDRV_IOC_GET_ATTR, &a));
	KT_ASSERT(a.val <= 1, "persistent attr %u", a.val);
	a = (struct gdrdrv_get_attr){ .attr = GDRDRV_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE };
	KT_EXPECT_OK(gd_ioctl(gd, GDRDRV_IOC_GET_ATTR, &a));
	KT_ASSERT(a.val <= 1 && (!a.val || kt_env.persistent),
		  "force-PCIe needs persistent pins (val %u)", a.val);
	/* Every mapping is VM_DONTCOPY (gdrdrv_fork_isolation checks the child). */
	a = (struct gdrdrv_get_attr){ .attr = GDRDRV_ATTR_VMA_INHERITED_ON_FORK, .val = 0xdead };
	KT_EXPECT_OK(gd_ioctl(gd, GDRDRV_IOC_GET_ATTR, &a));
	KT_ASSERT(a.val == 0, "VMA_INHERITED_ON_FORK %u, but gdrdrv sets VM_DONTCOPY", a.val);
	a = (struct gdrdrv_get_attr){ .attr = 0 };
	KT_EXPECT_ERR(gd_ioctl(gd, GDRDRV_IOC_GET_ATTR, &a), EINVAL);
	a = (struct gdrdrv_get_attr){ .attr = 99 };
	KT_EXPECT_ERR(gd_ioctl(gd, GDRDRV_IOC_GET_ATTR, &a), EINVAL);
}

/*
 * /proc/driver/gdrdrv/params: GDRCopy 2.6's five lines in its spelling and
 * order (scripts read them), then ours, each agreeing with the driver.
 */
static void test_gdrdrv_proc_params(void)
{
	static const char *const keys[] = {
		"Version: ", "Built for NVIDIA driver flavor: ", "Use persistent mapping: ",
		"dbg_enabled: ", "info_enabled: ", "VMA inherited on fork: ",
		"P2P tokens allowed: ", "max_pins_per_file: ", "max_pins_per_user: ",
		"max_pinned_bytes_per_file: ", "max_pinned_bytes_per_user: ",
		"Built for nv-p2p page table: ",
	};
	char lines[14][128], want[64];
	struct stat st;
	unsigned int n = 0, i;
	FILE *fp;

	KT_ASSERT(stat("/proc/driver/gdrdrv", &st) == 0, "/proc/driver/gdrdrv: %s", strerror(errno));
	KT_ASSERT((st.st_mode & 07777) == 0555, "/proc/driver/gdrdrv mode %04o, want 0555",
		  st.st_mode & 07777);
	KT_ASSERT(stat("/proc/driver/gdrdrv/params", &st) == 0, "params: %s", strerror(errno));
	KT_ASSERT((st.st_mode & 07777) == 0444, "params mode %04o, want 0444", st.st_mode & 07777);
	fp = fopen("/proc/driver/gdrdrv/params", "r");
	KT_ASSERT(fp, "open params: %s", strerror(errno));
	while (n < 14 && fgets(lines[n], sizeof(lines[n]), fp))
		n++;
	fclose(fp);
	KT_ASSERT(n == 12, "params has %u lines, want 12", n);
	for (i = 0; i < n; i++)
		KT_ASSERT(!strncmp(lines[i], keys[i], strlen(keys[i])), "params line %u is \"%s\", want \"%s...\"",
			  i + 1, lines[i], keys[i]);
	snprintf(want, sizeof(want), "Version: %d.%d\n", GDRCOPY_VERSION_MAJOR, GDRCOPY_VERSION_MINOR);
	KT_ASSERT(!strcmp(lines[0], want), "%s", lines[0]);
	KT_ASSERT(!strcmp(lines[1] + strlen(keys[1]), "opensource\n") ||
		  !strcmp(lines[1] + strlen(keys[1]), "proprietary\n"), "%s", lines[1]);
	KT_ASSERT(!strcmp(lines[2] + strlen(keys[2]), kt_env.persistent ? "yes\n" : "no\n"),
		  "%s but GET_ATTR says persistent=%d", lines[2], kt_env.persistent);
	KT_ASSERT(!strcmp(lines[5], "VMA inherited on fork: no\n"), "%s", lines[5]);
	/* The build's page-table generation: 2.0 (580 and newer) or 1.2 (515 to 575). */
	KT_ASSERT(!strcmp(lines[11] + strlen(keys[11]), "2.0\n") ||
		  !strcmp(lines[11] + strlen(keys[11]), "1.2\n"), "%s", lines[11]);
}

static void test_gdrdrv_unknown_ioctl(void)
{
	int gd = gd_open();
	uint64_t arg[8] = { 0 };

	KT_EXPECT_ERR(gd_ioctl(gd, _IOWR(GDRDRV_IOCTL, 0x40, uint64_t), arg), ENOTTY);
	KT_EXPECT_ERR(gd_ioctl(gd, _IOWR(SOFTGPU_IOCTL, 0x01, uint64_t), arg), ENOTTY);
}

static void test_gdrdrv_pin_unpin(void)
{
	struct fixture f = fixture(5 * KT_GPU_PAGE);
	struct gdrdrv_get_info_v2 info;
	struct gdrdrv_get_info v1 = { 0 };
	struct softgpu_stats st0 = sg_stats();
	uint64_t h;

	/* 256 KiB + 16 bytes, as the reference's basic test: 320 KiB pinned. */
	h = pin_ok(&f, f.va, 4 * KT_GPU_PAGE + 16);
	KT_ASSERT(sg_stats().active_pins == st0.active_pins + 1, "one P2P pin");
	KT_EXPECT_OK(gd_info(f.gd, h, &info));
	KT_ASSERT(info.va == f.va, "info.va %#llx", (unsigned long long)info.va);
	KT_ASSERT(info.mapped_size == 5 * KT_GPU_PAGE, "mapped_size %llu",
		  (unsigned long long)info.mapped_size);
	KT_ASSERT(info.page_size == KT_GPU_PAGE, "page_size %u", info.page_size);
	KT_ASSERT(info.mapping_type == GDRDRV_MR_NONE, "type %u before mmap", info.mapping_type);
	v1.handle = h;
	KT_EXPECT_OK(gd_ioctl(f.gd, GDRDRV_IOC_GET_INFO, &v1));
	KT_ASSERT(v1.va == f.va && !v1.mapped && !v1.wc_mapping, "v1 info");

	KT_EXPECT_OK(gd_unpin(f.gd, h));
	KT_ASSERT(sg_stats().active_pins == st0.active_pins, "unpin released the P2P pin");
	KT_EXPECT_ERR(gd_unpin(f.gd, h), EINVAL);		/* double unpin */
	KT_EXPECT_ERR(gd_info(f.gd, h, &info), EINVAL);	/* stale handle */

	/* Unaligned start: rounded down, the offset remembered. */
	h = pin_ok(&f, f.va + 100, 200);
	KT_EXPECT_OK(gd_info(f.gd, h, &info));
	KT_ASSERT(info.va == f.va && info.mapped_size == KT_GPU_PAGE, "unaligned pin");
	KT_EXPECT_OK(gd_unpin(f.gd, h));
}

static bool gdrdrv_tokens_allowed(void)
{
	char c = 'N';
	int fd = open("/sys/module/gdrdrv/parameters/allow_p2p_tokens", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (read(fd, &c, 1) != 1)
			c = 'N';
		close(fd);
	}
	return c == 'Y';
}

static void test_gdrdrv_pin_with_tokens(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);
	struct softgpu_info info = sg_info(f.sg);
	uint64_t h;

	if (kt_env.persistent) {
		/* Tokens are deprecated with persistent pins and must be 0. */
		KT_EXPECT_OK(gd_pin_tokens(f.gd, f.va, KT_GPU_PAGE, 0, 0, &h));
		KT_EXPECT_OK(gd_unpin(f.gd, h));
		KT_EXPECT_ERR(gd_pin_tokens(f.gd, f.va, KT_GPU_PAGE, info.p2p_token,
					    info.va_space, &h), EINVAL);
	} else if (!gdrdrv_tokens_allowed()) {
		/* Off by default: NVIDIA resolves tokens in any process. */
		KT_EXPECT_ERR(gd_pin_tokens(f.gd, f.va, KT_GPU_PAGE, info.p2p_token,
					    info.va_space, &h), EPERM);
	} else {
		KT_EXPECT_OK(gd_pin_tokens(f.gd, f.va, KT_GPU_PAGE, info.p2p_token,
					   info.va_space, &h));
		KT_EXPECT_OK(gd_unpin(f.gd, h));
		KT_ASSERT(gd_pin_tokens(f.gd, f.va, KT_GPU_PAGE, info.p2p_token + 1,
					info.va_space, &h) != 0, "wrong token must fail");
		KT_ASSERT(gd_pin_tokens(f.gd, f.va, KT_GPU_PAGE, info.p2p_token,
					info.va_space + 1, &h) != 0, "wrong va_space must fail");
	}
}

/* Turns gdrdrv's byte budgets off (0), or back to what they were. */
static void budgets_off(bool off)
{
	static const char *const names[] = {
		"/sys/module/gdrdrv/parameters/max_pinned_bytes_per_file",
		"/sys/module/gdrdrv/parameters/max_pinned_bytes_per_user",
	};
	static char saved[2][32];

	for (unsigned int i = 0; i < 2; i++) {
		if (off) {
			FILE *fp = fopen(names[i], "r");

			KT_ASSERT(fp && fgets(saved[i], sizeof(saved[i]), fp), "read %s", names[i]);
			fclose(fp);
			saved[i][strcspn(saved[i], "\n")] = 0;
		}
		KT_EXPECT_OK(kt_write_file(names[i], off ? "0" : saved[i]));
	}
}

static void test_gdrdrv_pin_bad_args(void)
{
	struct fixture f = fixture(2 * KT_GPU_PAGE);
	struct gdrdrv_pin_buffer_v2 p;
	void *host = malloc(KT_GPU_PAGE * 2);
	uint64_t h, gone;
	int err;

	KT_EXPECT_ERR(gd_pin(f.gd, 0, KT_GPU_PAGE, 0, &h), EINVAL);
	KT_EXPECT_ERR(gd_pin(f.gd, f.va, 0, 0, &h), EINVAL);
	KT_EXPECT_ERR(gd_pin(f.gd, f.va, UINT64_MAX - f.va + 2, 0, &h), EINVAL);
	KT_EXPECT_ERR(gd_pin(f.gd, f.va, UINT64_MAX, 0, &h), EINVAL);
	/* > all memory: past the 2 TiB byte budget first, before NVIDIA is asked. */
	KT_EXPECT_ERR(gd_pin(f.gd, f.va, 1ULL << 46, 0, &h), ENOSPC);
	budgets_off(true);
	err = gd_pin(f.gd, f.va, 1ULL << 46, 0, &h);
	budgets_off(false);
	KT_EXPECT_ERR(err, EINVAL);	/* without budgets, NVIDIA's answer */
	KT_EXPECT_ERR(gd_pin(f.gd, f.va, 3 * KT_GPU_PAGE, 0, &h), EINVAL);	/* past the end */
	KT_EXPECT_ERR(gd_pin(f.gd, f.va - KT_GPU_PAGE, KT_GPU_PAGE, 0, &h), EINVAL);
	KT_EXPECT_ERR(gd_pin(f.gd, (uintptr_t)host, KT_GPU_PAGE, 0, &h), EINVAL);	/* host memory */
	gone = sg_alloc(f.sg, KT_GPU_PAGE);
	sg_free(f.sg, gone);
	KT_EXPECT_ERR(gd_pin(f.gd, gone, KT_GPU_PAGE, 0, &h), EINVAL);	/* freed */
	KT_EXPECT_ERR(gd_pin(f.gd, f.va, KT_GPU_PAGE, 0x2, &h), EINVAL);	/* unknown flag */
	KT_EXPECT_ERR(gd_pin(f.gd, f.va, KT_GPU_PAGE, 0x80000000u, &h), EINVAL);
	KT_ASSERT(ioctl(f.gd, GDRDRV_IOC_PIN_BUFFER_V2, (void *)8) == -1 && errno == EFAULT,
		  "bad argument pointer: want EFAULT, got %s", kt_errname(errno));
	/* include/uapi/gdrdrv.h: "pad: must be 0". */
	p = (struct gdrdrv_pin_buffer_v2){ .addr = f.va, .size = KT_GPU_PAGE, .pad = 1 };
	KT_EXPECT_ERR(gd_ioctl(f.gd, GDRDRV_IOC_PIN_BUFFER_V2, &p), EINVAL);
	free(host);
}

static bool ram_pages_cacheable_anyway(void);

static void test_gdrdrv_pin_force_pcie(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);
	struct gdrdrv_get_info_v2 info;
	uint64_t h;
	void *map;
	int err;

	if (!kt_env.force_pcie_attr) {
		KT_EXPECT_ERR(gd_pin(f.gd, f.va, KT_GPU_PAGE, GDRDRV_PIN_BUFFER_FLAG_FORCE_PCIE, &h),
			      EINVAL);
		return;
	}
	KT_EXPECT_OK(gd_pin(f.gd, f.va, KT_GPU_PAGE, GDRDRV_PIN_BUFFER_FLAG_FORCE_PCIE, &h));
	KT_EXPECT_ERR(gd_req_type(f.gd, h, GDRDRV_MR_CACHING),
		      !(kt_env.sg_info.flags & SOFTGPU_INFO_BAR_BACKED) && ram_pages_cacheable_anyway() ?
		      0 : EOPNOTSUPP);
	if (!(kt_env.sg_info.flags & SOFTGPU_INFO_BAR_BACKED))
		return;	/* a forced-WC mapping of RAM would alias the cached direct map */
	map = gd_map(f.gd, h, KT_GPU_PAGE, &err);
	KT_ASSERT(map, "mmap: %s", kt_errname(err));
	KT_EXPECT_OK(gd_info(f.gd, h, &info));
	KT_ASSERT(info.mapping_type == GDRDRV_MR_WC, "force-PCIe pin mapped as %u",
		  info.mapping_type);
}

static void test_gdrdrv_bad_handles(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);
	int gd2 = gd_open(), err;
	struct gdrdrv_get_info_v2 info;
	struct gdrdrv_get_info v1 = { .handle = 12345 };
	uint32_t flag;
	uint64_t h = pin_ok(&f, f.va, KT_GPU_PAGE);

	KT_EXPECT_ERR(gd_unpin(f.gd, 12345), EINVAL);
	KT_EXPECT_ERR(gd_info(f.gd, 12345, &info), EINVAL);
	KT_EXPECT_ERR(gd_ioctl(f.gd, GDRDRV_IOC_GET_INFO, &v1), EINVAL);
	KT_EXPECT_ERR(gd_cb_flag(f.gd, 12345, &flag), EINVAL);
	KT_EXPECT_ERR(gd_req_type(f.gd, 12345, GDRDRV_MR_WC), EINVAL);
	KT_ASSERT(!gd_map(f.gd, 12345, KT_GPU_PAGE, &err) && err == EINVAL,
		  "mmap of an unknown handle: %s", kt_errname(err));
	/* Handles belong to their file. */
	KT_EXPECT_ERR(gd_unpin(gd2, h), EINVAL);
	KT_EXPECT_ERR(gd_info(gd2, h, &info), EINVAL);
	KT_ASSERT(!gd_map(gd2, h, KT_GPU_PAGE, &err) && err == EINVAL,
		  "mmap of another file's handle: %s", kt_errname(err));
	KT_EXPECT_OK(gd_cb_flag(f.gd, h, &flag));
	KT_ASSERT(flag == 0, "callback flag of a live pin");
}

static void check_mapping_data(struct fixture *f, uint32_t *map, uint64_t size)
{
	uint32_t *pattern = malloc(size), *back = malloc(size);

	/* CPU stores through the mapping reach GPU memory ... */
	fill_pattern(pattern, size / 4, 0xc0ffee);
	memcpy(map, pattern, size);
	__sync_synchronize();
	sg_read(f->sg, f->va, back, size);
	KT_ASSERT(!memcmp(pattern, back, size), "store through the mapping not in GPU memory");
	/* ... and GPU memory shows through it. */
	fill_pattern(pattern, size / 4, 0xfeed);
	sg_write(f->sg, f->va, pattern, size);
	memcpy(back, map, size);
	KT_ASSERT(!memcmp(pattern, back, size), "GPU memory not seen through the mapping");
	free(pattern);
	free(back);
}

static void test_gdrdrv_map(void)
{
	struct fixture f = fixture(3 * KT_GPU_PAGE);
	uint64_t h = pin_ok(&f, f.va, f.size);
	struct gdrdrv_get_info_v2 info;
	struct gdrdrv_get_info v1 = { .handle = h };
	uint32_t *map;
	int err;

	map = gd_map(f.gd, h, f.size, &err);
	KT_ASSERT(map, "mmap: %s", kt_errname(err));
	KT_EXPECT_OK(gd_info(f.gd, h, &info));
	KT_ASSERT(info.mapping_type == gd_expected_type(), "mapping type %u, want %u (%s)",
		  info.mapping_type, gd_expected_type(), kt_env.sg_info.name);
	KT_EXPECT_OK(gd_ioctl(f.gd, GDRDRV_IOC_GET_INFO, &v1));
	KT_ASSERT(v1.mapped == 1 && v1.wc_mapping == (gd_expected_type() == GDRDRV_MR_WC),
		  "v1 info mapped %u wc %u", v1.mapped, v1.wc_mapping);
	check_mapping_data(&f, map, f.size);

	KT_ASSERT(!gd_map(f.gd, h, f.size, &err) && err == EINVAL,
		  "second mmap of one handle: %s", kt_errname(err));
	KT_EXPECT_ERR(gd_req_type(f.gd, h, GDRDRV_MR_WC), EBUSY);
	munmap(map, f.size);
	KT_EXPECT_OK(gd_info(f.gd, h, &info));
	KT_ASSERT(info.mapping_type == GDRDRV_MR_NONE, "type %u after munmap", info.mapping_type);

	/* Mapping again after munmap, and part of it only. */
	map = gd_map(f.gd, h, KT_GPU_PAGE, &err);
	KT_ASSERT(map, "re-mmap: %s", kt_errname(err));
	munmap(map, KT_GPU_PAGE);
	KT_EXPECT_OK(gd_unpin(f.gd, h));
}

static void test_gdrdrv_map_errors(void)
{
	struct fixture f = fixture(2 * KT_GPU_PAGE);
	uint64_t h = pin_ok(&f, f.va, KT_GPU_PAGE), hu;
	long page = sysconf(_SC_PAGESIZE);
	void *map;
	int err;

	KT_ASSERT(!gd_map(f.gd, h, 2 * KT_GPU_PAGE, &err) && err == EINVAL,
		  "mmap larger than the pin: %s", kt_errname(err));
	map = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, f.gd,
		   (off_t)((h + 1) * page));
	KT_ASSERT(map == MAP_FAILED && errno == EINVAL,
		  "mmap at an offset inside a handle's range: %s", kt_errname(errno));
	map = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE, f.gd, (off_t)(h * page));
	if (map != MAP_FAILED)
		KT_FAIL("MAP_PRIVATE mapping of BAR memory must fail");

	/* A pin that does not start on a GPU page cannot be mapped. */
	hu = pin_ok(&f, f.va + KT_GPU_PAGE + 16, 64);
	KT_ASSERT(!gd_map(f.gd, hu, 64, &err) && err == EINVAL,
		  "mmap of an unaligned pin: %s", kt_errname(err));
	KT_EXPECT_ERR(gd_req_type(f.gd, h, GDRDRV_MR_TYPE_COUNT), EINVAL);
	KT_EXPECT_ERR(gd_req_type(f.gd, h, 0x80000000u), EINVAL);
	KT_EXPECT_ERR(gd_req_type(f.gd, h, GDRDRV_MR_DEVICE), EOPNOTSUPP);	/* no BlueField-3 */
}

/*
 * The page sizes gdrdrv's arithmetic rests on, checked rather than assumed:
 * GPU pages are 64 KiB and CPU pages 4, 16 or 64 KiB (arm64 kernels come in
 * all three), so a GPU page is a whole number of CPU pages, and a mapping of
 * one is that many CPU pages, each faulting in its own part of GPU memory.
 */
static void test_gdrdrv_cpu_page_size(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);
	size_t page = host_page(), pages = KT_GPU_PAGE / page, i;
	uint64_t h = pin_ok(&f, f.va, KT_GPU_PAGE);
	volatile uint32_t *map;
	uint32_t v;
	int err;

	KT_ASSERT(page == 4096 || page == 16384 || page == 65536, "CPU page size %zu", page);
	KT_ASSERT(KT_GPU_PAGE % page == 0, "GPU page %u is not a multiple of the CPU page %zu",
		  (unsigned int)KT_GPU_PAGE, page);
	map = gd_map(f.gd, h, KT_GPU_PAGE, &err);
	KT_ASSERT(map, "mmap: %s", kt_errname(err));
	for (i = 0; i < pages; i++)
		map[i * page / 4 + 1] = 0x5a000000u | (uint32_t)i;
	for (i = 0; i < pages; i++) {
		sg_read(f.sg, f.va + i * page + 4, &v, 4);
		KT_ASSERT(v == (0x5a000000u | (uint32_t)i),
			  "CPU page %zu of %zu (%zu bytes) landed elsewhere: read %#x", i, pages, page, v);
	}
	munmap((void *)map, KT_GPU_PAGE);
	KT_EXPECT_OK(gd_unpin(f.gd, h));
}

/*
 * gdrdrv refuses to split its mappings (the PAT memtype covers the whole
 * VMA): a partial munmap or mprotect fails and leaves the mapping whole.
 */
static void test_gdrdrv_map_no_split(void)
{
	struct fixture f = fixture(2 * KT_GPU_PAGE);
	uint64_t h = pin_ok(&f, f.va, f.size);
	uint32_t *map, v;
	int err;

	map = gd_map(f.gd, h, f.size, &err);
	KT_ASSERT(map, "mmap: %s", kt_errname(err));
	KT_ASSERT(munmap((char *)map + KT_GPU_PAGE, KT_GPU_PAGE) == -1 && errno == EINVAL,
		  "partial munmap: %s", kt_errname(errno));
	KT_ASSERT(mprotect(map, KT_GPU_PAGE, PROT_READ) == -1 && errno == EINVAL,
		  "partial mprotect: %s", kt_errname(errno));
	map[KT_GPU_PAGE / 4] = 0x5151;
	KT_ASSERT(!kt_try_read32(&map[KT_GPU_PAGE / 4], &v) && v == 0x5151,
		  "second half after a refused split");
	KT_ASSERT(!munmap(map, f.size), "whole munmap: %s", strerror(errno));
	KT_EXPECT_OK(gd_unpin(f.gd, h));
}

static void test_gdrdrv_req_mapping_type(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);
	uint64_t h = pin_ok(&f, f.va, KT_GPU_PAGE);
	struct gdrdrv_get_info_v2 info;
	void *map;
	int err;

	if (gd_expected_type() == GDRDRV_MR_WC) {
		KT_EXPECT_ERR(gd_req_type(f.gd, h, GDRDRV_MR_CACHING), EOPNOTSUPP);
		KT_EXPECT_OK(gd_req_type(f.gd, h, GDRDRV_MR_WC));
	} else {
		KT_EXPECT_OK(gd_req_type(f.gd, h, GDRDRV_MR_CACHING));
	}
	map = gd_map(f.gd, h, KT_GPU_PAGE, &err);
	KT_ASSERT(map, "mmap: %s", kt_errname(err));
	KT_EXPECT_OK(gd_info(f.gd, h, &info));
	KT_ASSERT(info.mapping_type == gd_expected_type(), "type %u", info.mapping_type);
	KT_EXPECT_ERR(gd_req_type(f.gd, h, GDRDRV_MR_NONE), EBUSY);
	munmap(map, KT_GPU_PAGE);
	KT_EXPECT_OK(gd_req_type(f.gd, h, GDRDRV_MR_NONE));
}

static void expect_fault(void *addr, const char *what)
{
	uint32_t v;
	int sig = kt_try_read32(addr, &v);

	KT_ASSERT(sig == SIGBUS || sig == SIGSEGV,
		  "%s: reading the old mapping %s (value %#x), want SIGBUS/SIGSEGV",
		  what, sig ? strsignal(sig) : "worked", v);
}

static void test_gdrdrv_unpin_zaps_mapping(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);
	uint64_t h = pin_ok(&f, f.va, KT_GPU_PAGE);
	int err;
	uint32_t *map = gd_map(f.gd, h, KT_GPU_PAGE, &err);

	KT_ASSERT(map, "mmap: %s", kt_errname(err));
	map[0] = 1;
	KT_EXPECT_OK(gd_unpin(f.gd, h));
	expect_fault(map, "after unpin");
}

static void test_gdrdrv_close_while_mapped(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);
	uint64_t h = pin_ok(&f, f.va, KT_GPU_PAGE);
	int err;
	uint32_t *map = gd_map(f.gd, h, KT_GPU_PAGE, &err);

	KT_ASSERT(map, "mmap: %s", kt_errname(err));
	/* The mapping holds the file: close alone must not release the pin. */
	close(f.gd);
	map[0] = 2;
	KT_ASSERT(sg_stats().active_pins >= 1, "pin released while still mapped");
	munmap(map, KT_GPU_PAGE);
	KT_ASSERT(sg_stats().active_pins == 0, "pin not released on the last reference");
}

/* Memory freed under a pin: legacy pins are revoked, persistent ones live on. */
static void check_free_under_pin(struct fixture *f, void (*do_free)(struct fixture *))
{
	struct softgpu_stats st0 = sg_stats();
	uint64_t h = pin_ok(f, f->va, KT_GPU_PAGE);
	uint32_t *map, flag, v;
	int err;

	map = gd_map(f->gd, h, KT_GPU_PAGE, &err);
	KT_ASSERT(map, "mmap: %s", kt_errname(err));
	map[3] = 0xabcd0123;
	do_free(f);
	KT_EXPECT_OK(gd_cb_flag(f->gd, h, &flag));
	if (kt_env.persistent) {
		KT_ASSERT(flag == 0, "callback flag set on a persistent pin");
		KT_ASSERT(!kt_try_read32(&map[3], &v) && v == 0xabcd0123,
			  "persistent pin: old memory must stay readable (got %#x)", v);
		KT_ASSERT(sg_stats().memory_used == st0.memory_used,
			  "persistent pin must keep the memory");
	} else {
		KT_ASSERT(flag == 1, "callback flag not set after the memory was freed");
		KT_ASSERT(sg_stats().callbacks_fired == st0.callbacks_fired + 1,
			  "free callback did not run");
		expect_fault(&map[3], "legacy pin after free");
		munmap(map, KT_GPU_PAGE);
		KT_ASSERT(!gd_map(f->gd, h, KT_GPU_PAGE, &err) && err == EINVAL,
			  "mmap after invalidation: %s", kt_errname(err));
	}
	KT_EXPECT_OK(gd_unpin(f->gd, h));
	KT_ASSERT(sg_stats().active_pins == st0.active_pins, "pins left after unpin");
	KT_ASSERT(sg_stats().memory_used == st0.memory_used - f->size,
		  "memory not released after unpin");
}

static void do_sg_free(struct fixture *f)
{
	sg_free(f->sg, f->va);
}

static void do_sg_close(struct fixture *f)
{
	close(f->sg);
}

static void test_gdrdrv_free_under_pin(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);

	check_free_under_pin(&f, do_sg_free);
}

static void test_gdrdrv_softgpu_close_under_pin(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);

	check_free_under_pin(&f, do_sg_close);
}

static void test_gdrdrv_vmm_unmap_under_pin(void)
{
	int sg = sg_open(), gd = gd_open(), err;
	struct softgpu_mem_create c = { .size = 2 * KT_GPU_PAGE };
	struct softgpu_va_reserve r = { .size = 2 * KT_GPU_PAGE };
	struct softgpu_mem_map m;
	struct softgpu_mem_unmap u;
	struct softgpu_mem_release rel;
	struct softgpu_stats st0 = sg_stats();
	uint64_t h;
	uint32_t flag, v, *map;

	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_MEM_CREATE, &c));
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_VA_RESERVE, &r));
	m = (struct softgpu_mem_map){ .va = r.va, .size = c.size, .handle = c.handle };
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_MEM_MAP, &m));
	rel.handle = c.handle;
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_MEM_RELEASE, &rel));
	KT_EXPECT_OK(gd_pin(gd, r.va, c.size, 0, &h));
	map = gd_map(gd, h, c.size, &err);
	KT_ASSERT(map, "mmap: %s", kt_errname(err));
	map[KT_GPU_PAGE / 4] = 0x600dcafe;
	u = (struct softgpu_mem_unmap){ .va = r.va, .size = c.size };
	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_MEM_UNMAP, &u));
	KT_EXPECT_OK(gd_cb_flag(gd, h, &flag));
	if (kt_env.persistent) {
		KT_ASSERT(!flag && !kt_try_read32(&map[KT_GPU_PAGE / 4], &v) && v == 0x600dcafe,
			  "persistent pin must survive cuMemUnmap (flag %u value %#x)", flag, v);
	} else {
		KT_ASSERT(flag == 1, "callback flag after cuMemUnmap");
		expect_fault(&map[KT_GPU_PAGE / 4], "legacy pin after cuMemUnmap");
	}
	KT_EXPECT_OK(gd_unpin(gd, h));
	KT_ASSERT(sg_stats().memory_used == st0.memory_used, "VMM memory leaked");
}

/* Pins of cuMemMap'ed memory mapped at an offset into its handle. */
static void test_gdrdrv_vmm_offset(void)
{
	struct fixture f = { .sg = sg_open(), .gd = gd_open(), .size = 2 * KT_GPU_PAGE };
	struct softgpu_mem_create c = { .size = 3 * KT_GPU_PAGE };
	struct softgpu_va_reserve r = { .size = f.size };
	struct softgpu_mem_map m;
	uint32_t *map;
	uint64_t h;
	int err;

	KT_EXPECT_OK(sg_ioctl(f.sg, SOFTGPU_IOC_MEM_CREATE, &c));
	KT_EXPECT_OK(sg_ioctl(f.sg, SOFTGPU_IOC_VA_RESERVE, &r));
	m = (struct softgpu_mem_map){ .va = r.va, .size = f.size, .handle = c.handle,
				      .offset = KT_GPU_PAGE };
	KT_EXPECT_OK(sg_ioctl(f.sg, SOFTGPU_IOC_MEM_MAP, &m));
	f.va = r.va;
	KT_EXPECT_OK(gd_pin(f.gd, f.va, f.size, 0, &h));
	map = gd_map(f.gd, h, f.size, &err);
	KT_ASSERT(map, "mmap: %s", kt_errname(err));
	check_mapping_data(&f, map, f.size);

	/* The same handle mapped whole elsewhere: its pages 1-2 are ours. */
	{
		struct softgpu_va_reserve r2 = { .size = c.size };
		uint32_t *pattern = malloc(f.size);

		KT_EXPECT_OK(sg_ioctl(f.sg, SOFTGPU_IOC_VA_RESERVE, &r2));
		m = (struct softgpu_mem_map){ .va = r2.va, .size = c.size, .handle = c.handle };
		KT_EXPECT_OK(sg_ioctl(f.sg, SOFTGPU_IOC_MEM_MAP, &m));
		fill_pattern(pattern, f.size / 4, 0x0ff5e7);
		sg_write(f.sg, r2.va + KT_GPU_PAGE, pattern, f.size);
		KT_ASSERT(!memcmp(map, pattern, f.size),
			  "pin of a mapping at offset 64 KiB shows the wrong pages");
		free(pattern);
	}
}

static struct fixture fork_fixture;
static uint64_t fork_handle;
static uint32_t *fork_map;

static void child_uses_parent_gdrdrv(void *arg)
{
	struct fixture *f = &fork_fixture;
	struct gdrdrv_get_info_v2 info;
	struct gdrdrv_get_version ver;
	uint64_t h;
	uint32_t flag, v;
	int err, gd;

	(void)arg;
	KT_EXPECT_ERR(gd_pin(f->gd, f->va, KT_GPU_PAGE, 0, &h), EACCES);
	KT_EXPECT_ERR(gd_pin_tokens(f->gd, f->va, KT_GPU_PAGE, 0, 0, &h), EACCES);
	KT_EXPECT_ERR(gd_unpin(f->gd, fork_handle), EACCES);
	KT_EXPECT_ERR(gd_info(f->gd, fork_handle, &info), EACCES);
	KT_EXPECT_ERR(gd_cb_flag(f->gd, fork_handle, &flag), EACCES);
	KT_EXPECT_ERR(gd_req_type(f->gd, fork_handle, GDRDRV_MR_NONE), EACCES);
	KT_EXPECT_ERR(gd_ioctl(f->gd, GDRDRV_IOC_GET_VERSION, &ver), EACCES);
	KT_ASSERT(!gd_map(f->gd, fork_handle, KT_GPU_PAGE, &err) && err == EACCES,
		  "child mmap of the parent's handle: %s", kt_errname(err));
	/* VM_DONTCOPY: the parent's mapping is not in the child. */
	KT_ASSERT(kt_try_read32(fork_map, &v), "child reads the parent's mapping: %#x", v);
	/* Its own gdrdrv file cannot reach the parent's GPU memory either. */
	gd = gd_open();
	KT_ASSERT(gd_pin(gd, f->va, KT_GPU_PAGE, 0, &h) != 0,
		  "child pinned its parent's GPU memory");
	/* But its own memory, yes. */
	{
		int sg = sg_open();
		uint64_t va = sg_alloc(sg, KT_GPU_PAGE);

		KT_EXPECT_OK(gd_pin(gd, va, KT_GPU_PAGE, 0, &h));
		KT_ASSERT(gd_map(gd, h, KT_GPU_PAGE, &err), "child's own mmap: %s",
			  kt_errname(err));
	}
}

static void test_gdrdrv_fork_isolation(void)
{
	struct fixture *f = &fork_fixture;
	int err;

	*f = fixture(KT_GPU_PAGE);
	fork_handle = pin_ok(f, f->va, KT_GPU_PAGE);
	fork_map = gd_map(f->gd, fork_handle, KT_GPU_PAGE, &err);
	KT_ASSERT(fork_map, "mmap: %s", kt_errname(err));
	fork_map[0] = 0x1234;
	err = in_child(child_uses_parent_gdrdrv, NULL);
	if (err)
		kt_fail_child(err);
	KT_ASSERT(fork_map[0] == 0x1234, "parent's mapping changed");
	KT_EXPECT_OK(gd_unpin(f->gd, fork_handle));
}

static int send_fd(int sock, int fd, uint64_t handle)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = &handle, .iov_len = sizeof(handle) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);

	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
	return sendmsg(sock, &msg, 0) < 0 ? errno : 0;
}

static int recv_fd(int sock, uint64_t *handle)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = handle, .iov_len = sizeof(*handle) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cmsg;
	int fd;

	if (recvmsg(sock, &msg, 0) < 0)
		return -1;
	cmsg = CMSG_FIRSTHDR(&msg);
	if (!cmsg || cmsg->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
	return fd;
}

static void test_gdrdrv_scm_rights_isolation(void)
{
	int sv[2], status;
	pid_t pid;

	KT_ASSERT(!socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), "socketpair: %s", strerror(errno));
	pid = fork();
	KT_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		uint64_t handle, h;
		int gd = recv_fd(sv[1], &handle), err;

		if (gd < 0)
			_exit(2);
		/* The receiver did not open the file: nothing works. */
		if (gd_pin(gd, 0x10000000000ULL, KT_GPU_PAGE, 0, &h) != EACCES)
			_exit(3);
		if (gd_map(gd, handle, KT_GPU_PAGE, &err) || err != EACCES)
			_exit(4);
		if (gd_unpin(gd, handle) != EACCES)
			_exit(5);
		_exit(0);
	}
	/* Opened after the fork, so the child only has it through the socket. */
	{
		struct fixture f = fixture(KT_GPU_PAGE);
		uint64_t h = pin_ok(&f, f.va, KT_GPU_PAGE);
		struct gdrdrv_get_info_v2 info;

		KT_EXPECT_OK(send_fd(sv[0], f.gd, h));
		waitpid(pid, &status, 0);
		KT_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			  "receiver of the fd could use it (child status %#x)", status);
		KT_EXPECT_OK(gd_info(f.gd, h, &info));	/* still the owner's */
		KT_EXPECT_OK(gd_unpin(f.gd, h));
	}
}

struct thread_arg {
	struct fixture *f;
	uint64_t handle;
	int err;
	void *map;
};

static void *thread_pin(void *p)
{
	struct thread_arg *a = p;

	a->err = gd_pin(a->f->gd, a->f->va, a->f->size, 0, &a->handle);
	return NULL;
}

static void *thread_map(void *p)
{
	struct thread_arg *a = p;

	a->map = gd_map(a->f->gd, a->handle, a->f->size, &a->err);
	return NULL;
}

static void test_gdrdrv_threads(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);
	struct thread_arg a = { .f = &f };
	pthread_t t;

	/* Threads share the thread group: all allowed. */
	pthread_create(&t, NULL, thread_pin, &a);
	pthread_join(t, NULL);
	KT_EXPECT_OK(a.err);
	pthread_create(&t, NULL, thread_map, &a);
	pthread_join(t, NULL);
	KT_ASSERT(a.map, "mmap from a thread: %s", kt_errname(a.err));
	((uint32_t *)a.map)[0] = 7;
	munmap(a.map, KT_GPU_PAGE);
	KT_EXPECT_OK(gd_unpin(f.gd, a.handle));
}

struct race_arg {
	pthread_barrier_t *start;
	struct fixture *f;
	uint64_t handle;
	int err;
};

static void *race_free(void *p)
{
	struct race_arg *a = p;
	struct softgpu_free fr = { .va = a->f->va };

	pthread_barrier_wait(a->start);
	a->err = sg_ioctl(a->f->sg, SOFTGPU_IOC_FREE, &fr);
	return NULL;
}

static void *race_unpin(void *p)
{
	struct race_arg *a = p;

	pthread_barrier_wait(a->start);
	a->err = gd_unpin(a->f->gd, a->handle);
	return NULL;
}

/*
 * Freeing GPU memory while gdrdrv unpins it: with legacy pins the free
 * callback and nvidia_p2p_put_pages() race, the path where a driver can
 * deadlock or double-free.  Both calls must succeed, every time.
 */
static void test_gdrdrv_race_free_unpin(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);
	pthread_barrier_t start;
	struct race_arg fa, ua;
	pthread_t tf, tu;
	uint32_t *map;
	int err;

	pthread_barrier_init(&start, NULL, 2);
	sg_free(f.sg, f.va);
	for (int i = 0; i < 1000; i++) {
		f.va = sg_alloc(f.sg, KT_GPU_PAGE);
		fa = (struct race_arg){ .start = &start, .f = &f };
		ua = fa;
		ua.handle = pin_ok(&f, f.va, KT_GPU_PAGE);
		map = gd_map(f.gd, ua.handle, KT_GPU_PAGE, &err);
		KT_ASSERT(map, "mmap: %s", kt_errname(err));
		pthread_create(&tf, NULL, race_free, &fa);
		pthread_create(&tu, NULL, race_unpin, &ua);
		pthread_join(tf, NULL);
		pthread_join(tu, NULL);
		if (fa.err || ua.err)
			KT_FAIL("round %d: free %s, unpin %s", i, kt_errname(fa.err),
				kt_errname(ua.err));
		munmap(map, KT_GPU_PAGE);
	}
	KT_ASSERT(sg_stats().active_pins == 0, "pins left");
}

static void test_gdrdrv_bar1_exhaustion(void)
{
	struct fixture f = fixture(16 * KT_GPU_PAGE);
	uint64_t h[16], extra;
	char limit[32];

	snprintf(limit, sizeof(limit), "%llu", (unsigned long long)(8 * KT_GPU_PAGE));
	knob_set("bar1_limit", limit);
	for (int i = 0; i < 8; i++)
		h[i] = pin_ok(&f, f.va + i * KT_GPU_PAGE, KT_GPU_PAGE);
	KT_EXPECT_ERR(gd_pin(f.gd, f.va + 8 * KT_GPU_PAGE, KT_GPU_PAGE, 0, &extra), ENOMEM);
	KT_EXPECT_ERR(gd_pin(f.gd, f.va, 16 * KT_GPU_PAGE, 0, &extra), ENOMEM);
	KT_EXPECT_OK(gd_unpin(f.gd, h[3]));
	h[3] = pin_ok(&f, f.va + 8 * KT_GPU_PAGE, KT_GPU_PAGE);	/* room again */
	for (int i = 0; i < 8; i++)
		KT_EXPECT_OK(gd_unpin(f.gd, h[i]));
}

static void test_gdrdrv_pt_version(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);
	uint64_t h;

	/* Same major, newer minor: compatible. */
	knob_set("pt_version", "0x00020001");
	KT_EXPECT_OK(gd_pin(f.gd, f.va, KT_GPU_PAGE, 0, &h));
	KT_EXPECT_OK(gd_unpin(f.gd, h));
	/* Another major: gdrdrv must refuse it, and put the pages back. */
	knob_set("pt_version", "0x00030000");
	KT_ASSERT(gd_pin(f.gd, f.va, KT_GPU_PAGE, 0, &h) != 0,
		  "pin accepted a major-3 page table");
	KT_ASSERT(sg_stats().active_pins == 0, "refused pin was not put back");
	knob_set("pt_version", "0x00010002");
	KT_ASSERT(gd_pin(f.gd, f.va, KT_GPU_PAGE, 0, &h) != 0,
		  "gdrdrv built for 2.x pages accepted a 1.2 page table");
	KT_ASSERT(sg_stats().active_pins == 0, "refused pin was not put back");
}

static void test_gdrdrv_pt_page_size(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);
	uint64_t h;

	knob_set("pt_page_size", "0");	/* 4 KiB */
	KT_EXPECT_ERR(gd_pin(f.gd, f.va, KT_GPU_PAGE, 0, &h), EINVAL);
	knob_set("pt_page_size", "2");	/* 128 KiB */
	KT_EXPECT_ERR(gd_pin(f.gd, f.va, KT_GPU_PAGE, 0, &h), EINVAL);
	KT_ASSERT(sg_stats().active_pins == 0, "refused pins were not put back");
}

static void test_gdrdrv_injected_failure(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);
	uint64_t h1, h2;
	int err;

	knob_set("fail_errno", "5");	/* EIO */
	knob_set("fail_nth", "1");
	err = gd_pin(f.gd, f.va, KT_GPU_PAGE, 0, &h1);
	KT_ASSERT(err != 0, "pin succeeded although nvidia_p2p_get_pages* failed");
	h1 = pin_ok(&f, f.va, KT_GPU_PAGE);	/* one-shot */
	knob_set("fail_errno", "12");
	knob_set("fail_nth", "2");
	h2 = pin_ok(&f, f.va, KT_GPU_PAGE);
	KT_EXPECT_ERR(gd_pin(f.gd, f.va, KT_GPU_PAGE, 0, &h2), ENOMEM);
	KT_EXPECT_OK(gd_unpin(f.gd, h1));
}

/*
 * Whether gdrdrv takes pages the kernel sees as RAM for cacheable whatever the
 * page table's flag says: its open flavour on arm64 (page_is_ram(), as the
 * reference does there; Grace Hopper's GPU memory is such RAM) and on x86
 * (PAT maps RAM write-back anyway; WC over RAM is refused).
 */
static bool ram_pages_cacheable_anyway(void)
{
#if defined(__aarch64__) || defined(__x86_64__)
	char line[128];
	bool open_flavour = false;
	FILE *fp = fopen("/proc/driver/gdrdrv/params", "r");

	if (!fp)
		return false;
	while (fgets(line, sizeof(line), fp))
		if (strstr(line, "flavor: opensource"))
			open_flavour = true;
	fclose(fp);
	return open_flavour;
#else
	return false;
#endif
}

static void test_gdrdrv_cpu_cacheable_knob(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);
	bool bar = kt_env.sg_info.flags & SOFTGPU_INFO_BAR_BACKED;
	bool cached = bar || ram_pages_cacheable_anyway();
	uint64_t h;

	/* The flag decides (x86: alone; arm64: RAM pages stay cacheable): flip it. */
	knob_set("cpu_cacheable", bar ? "1" : "0");
	h = pin_ok(&f, f.va, KT_GPU_PAGE);
	KT_EXPECT_ERR(gd_req_type(f.gd, h, GDRDRV_MR_CACHING), cached ? 0 : EOPNOTSUPP);
	KT_EXPECT_OK(gd_req_type(f.gd, h, GDRDRV_MR_NONE));
	KT_EXPECT_OK(gd_unpin(f.gd, h));
}

static void test_gdrdrv_persistent_api_off(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);
	uint64_t h;

	/* As on MIG or vGPU: no persistent pins. */
	knob_set("persistent_api", "0");
	if (kt_env.persistent) {
		KT_ASSERT(gd_pin(f.gd, f.va, KT_GPU_PAGE, 0, &h) != 0,
			  "persistent pin worked with the API off");
	} else {
		KT_EXPECT_OK(gd_pin(f.gd, f.va, KT_GPU_PAGE, 0, &h));	/* legacy: unaffected */
		KT_EXPECT_OK(gd_unpin(f.gd, h));
	}
}

#define MANY_PINS 10000

static void test_gdrdrv_many_pins(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);
	uint64_t *h = calloc(MANY_PINS, sizeof(*h));
	struct gdrdrv_get_info_v2 info;
	uint32_t *map;
	int err;

	for (int i = 0; i < MANY_PINS; i++) {
		err = gd_pin(f.gd, f.va, KT_GPU_PAGE, 0, &h[i]);
		if (err)
			KT_FAIL("pin %d of %d: %s", i + 1, MANY_PINS, kt_errname(err));
		if (i && h[i] == h[i - 1])
			KT_FAIL("pin %d reused handle %llu", i + 1, (unsigned long long)h[i]);
	}
	KT_ASSERT(sg_stats().active_pins == MANY_PINS, "P2P pins %llu",
		  (unsigned long long)sg_stats().active_pins);
	KT_EXPECT_OK(gd_info(f.gd, h[0], &info));
	KT_EXPECT_OK(gd_info(f.gd, h[MANY_PINS - 1], &info));
	map = gd_map(f.gd, h[MANY_PINS / 2], KT_GPU_PAGE, &err);
	KT_ASSERT(map, "mmap of pin %d: %s", MANY_PINS / 2, kt_errname(err));
	map[0] = 42;
	munmap(map, KT_GPU_PAGE);
	for (int i = 0; i < MANY_PINS / 2; i++)
		KT_EXPECT_OK(gd_unpin(f.gd, h[i]));
	/* The other half goes with the file. */
	close(f.gd);
	KT_ASSERT(sg_stats().active_pins == 0, "%llu pins left after close",
		  (unsigned long long)sg_stats().active_pins);
	free(h);
}

static void test_gdrdrv_unload_with_pins(void)
{
	int to_child[2], to_parent[2], status, err;
	char params[256], c;
	pid_t pid;

	if (!kt_env.gdrdrv_ko && system("modprobe -n -q gdrdrv >/dev/null 2>&1"))
		kt_skip("cannot load gdrdrv again: modprobe does not find it; pass -k GDRDRV_KO");
	kt_gdrdrv_params(params, sizeof(params), kt_env.persistent);
	KT_ASSERT(!pipe(to_child) && !pipe(to_parent), "pipe");
	pid = fork();
	KT_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		struct fixture f = fixture(KT_GPU_PAGE);
		uint64_t h = pin_ok(&f, f.va, KT_GPU_PAGE);
		uint32_t *map = gd_map(f.gd, h, KT_GPU_PAGE, &err);

		if (!map)
			_exit(2);
		map[0] = 1;
		c = 'p';
		if (write(to_parent[1], &c, 1) != 1 || read(to_child[0], &c, 1) != 1)
			_exit(3);
		_exit(0);	/* pins, mapping and files go with the process */
	}
	KT_ASSERT(read(to_parent[0], &c, 1) == 1, "child did not pin");
	KT_ASSERT(sg_stats().active_pins == 1, "child's pin");

	err = kt_unload_module("gdrdrv");
	if (!err) {
		/* Unloaded under a live file: the pins must be gone already. */
		c = 'x';
		(void)write(to_child[1], &c, 1);
		waitpid(pid, &status, 0);
		KT_FAIL("gdrdrv unloaded while a process held it open");
	}
	KT_ASSERT(err == EWOULDBLOCK || err == EBUSY, "rmmod with an open file: %s",
		  kt_errname(err));
	KT_ASSERT(sg_stats().active_pins == 1, "refused unload dropped the pin");

	c = 'x';
	KT_ASSERT(write(to_child[1], &c, 1) == 1, "pipe");
	waitpid(pid, &status, 0);
	KT_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	KT_ASSERT(sg_stats().active_pins == 0, "pins outlived the process");

	KT_EXPECT_OK(kt_unload_module("gdrdrv"));
	err = kt_load_gdrdrv(params);
	if (err)
		KT_FAIL("loading gdrdrv again (%s): %s; later tests will skip", params,
			kt_errname(err));
	/* Back in business. */
	{
		struct fixture f = fixture(KT_GPU_PAGE);
		uint64_t h = pin_ok(&f, f.va, KT_GPU_PAGE);

		KT_EXPECT_OK(gd_unpin(f.gd, h));
	}
}

/*
 * Executable mappings of GPU memory are refused: mmap(PROT_EXEC) with
 * EPERM (as on a noexec mount), and a later mprotect(PROT_EXEC) with EACCES
 * (VM_MAYEXEC is off).  Before the fix both worked.
 */
static void test_gdrdrv_map_refuses_exec(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);
	uint64_t h = pin_ok(&f, f.va, KT_GPU_PAGE);
	off_t off = (off_t)(h * host_page());
	void *map;
	int err;

	map = mmap(NULL, KT_GPU_PAGE, PROT_READ | PROT_EXEC, MAP_SHARED, f.gd, off);
	err = map == MAP_FAILED ? errno : 0;
	if (map != MAP_FAILED)
		munmap(map, KT_GPU_PAGE);
	KT_EXPECT_ERR(err, EPERM);
	map = gd_map(f.gd, h, KT_GPU_PAGE, &err);
	KT_ASSERT(map, "mmap: %s", kt_errname(err));
	err = mprotect(map, KT_GPU_PAGE, PROT_READ | PROT_EXEC) ? errno : 0;
	KT_EXPECT_ERR(err, EACCES);
	*(volatile uint32_t *)map = 5;	/* still a working mapping */
	munmap(map, KT_GPU_PAGE);
	KT_EXPECT_OK(gd_unpin(f.gd, h));
}

/*
 * A page table may list more GPU pages than the pin covers (softgpu's
 * pt_extra_entries, as a driver rounding a pin up would).  mmap must stop at
 * the pinned length: unpin zaps that length only, and the next handle's
 * file offsets start right after it.  Before the fix mmap went by the page
 * table and the extra page stayed mapped after the unpin.
 */
static void test_gdrdrv_map_within_pinned_length(void)
{
	struct fixture f = fixture(2 * KT_GPU_PAGE);
	struct gdrdrv_get_info_v2 info;
	volatile uint32_t *map;
	uint64_t h;
	uint32_t v;
	int err, sig;

	knob_set("pt_extra_entries", "1");
	h = pin_ok(&f, f.va, KT_GPU_PAGE);
	KT_EXPECT_OK(gd_info(f.gd, h, &info));
	KT_ASSERT(info.mapped_size == KT_GPU_PAGE, "mapped_size %llu, want one GPU page",
		  (unsigned long long)info.mapped_size);
	map = gd_map(f.gd, h, 2 * KT_GPU_PAGE, &err);
	if (map) {
		map[0] = 1;
		map[KT_GPU_PAGE / 4] = 2;
		KT_EXPECT_OK(gd_unpin(f.gd, h));
		sig = kt_try_read32(&map[KT_GPU_PAGE / 4], &v);
		KT_FAIL("mmap of 2 GPU pages over a 1-page pin worked; after the unpin the page past the pin %s",
			sig ? "faulted" : "still read back (a mapping that outlived its pin)");
	}
	KT_EXPECT_ERR(err, EINVAL);
	map = gd_map(f.gd, h, KT_GPU_PAGE, &err);
	KT_ASSERT(map, "mmap of the pinned length: %s", kt_errname(err));
	map[0] = 3;
	munmap((void *)map, KT_GPU_PAGE);
	KT_EXPECT_OK(gd_unpin(f.gd, h));
}

/* Runs a program (no shell) and waits: its exit status, or -1. */
static int run_prog(char *const argv[])
{
	int status;
	pid_t pid = fork();

	KT_ASSERT(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		if (null >= 0)
			dup2(null, 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

#define DISK_FS_DIR "/tmp/kt-gdrdrv-ext4"

/*
 * An ext4 filesystem on a RAM block device (brd), mounted on DISK_FS_DIR:
 * a filesystem with a real backing device, unlike devtmpfs and tmpfs (whose
 * no-op one makes the page cache skip readahead) and unlike the VM's 9p
 * root (where qemu refuses to create device nodes).
 */
static void disk_fs_mount(void)
{
	char *modprobe[] = { "modprobe", "brd", "rd_nr=1", "rd_size=8192", NULL };
	char *ext4[] = { "modprobe", "ext4", NULL };
	char *mkfs[] = { "mke2fs", "-q", "-F", "-t", "ext4", "-O", "^has_journal",
			 "/dev/ram0", NULL };
	struct statfs sfs;
	int ret;

	ret = run_prog(modprobe);
	if (ret)
		kt_skip("modprobe brd exited %d: no RAM block device to make a filesystem on", ret);
	ret = run_prog(ext4);
	if (ret)
		kt_skip("modprobe ext4 exited %d: no disk filesystem to mount", ret);
	ret = run_prog(mkfs);
	if (ret == 127)
		kt_skip("no mke2fs in this root (e2fsprogs): cannot make a disk filesystem");
	KT_ASSERT(!ret, "mke2fs /dev/ram0 exited %d", ret);
	mkdir(DISK_FS_DIR, 0700);
	KT_ASSERT(!mount("/dev/ram0", DISK_FS_DIR, "ext4", 0, NULL), "mount /dev/ram0 on %s: %s",
		  DISK_FS_DIR, strerror(errno));
	KT_ASSERT(!statfs(DISK_FS_DIR, &sfs) && sfs.f_type == 0xef53, "%s is not ext4",
		  DISK_FS_DIR);
}

static void disk_fs_unmount(void)
{
	char *rmmod[] = { "modprobe", "-r", "brd", NULL };

	KT_ASSERT(!umount(DISK_FS_DIR), "umount %s: %s", DISK_FS_DIR, strerror(errno));
	rmdir(DISK_FS_DIR);
	KT_ASSERT(!run_prog(rmmod), "modprobe -r brd failed");
}

/*
 * A device node made with mknod on a disk filesystem reaches the page
 * cache's readahead on POSIX_FADV_WILLNEED and MADV_WILLNEED, which reads
 * the file's address_space operations.  gdrdrv's per-file address_space
 * must have some (empty ones): before the fix they were NULL and both calls
 * oopsed (on devtmpfs the no-op backing device returns early).
 */
static void test_gdrdrv_fadvise_on_disk_node(void)
{
	static const int advice[] = {
		POSIX_FADV_NORMAL, POSIX_FADV_SEQUENTIAL, POSIX_FADV_RANDOM,
		POSIX_FADV_NOREUSE, POSIX_FADV_DONTNEED, POSIX_FADV_WILLNEED,
	};
	struct fixture f = fixture(KT_GPU_PAGE);
	const char *node = DISK_FS_DIR "/gdrdrv";
	struct stat st;
	unsigned int i;
	uint64_t h;
	void *map;
	int fd, err;

	KT_ASSERT(fstat(f.gd, &st) == 0 && S_ISCHR(st.st_mode), "fstat /dev/gdrdrv");
	disk_fs_mount();
	KT_ASSERT(mknod(node, S_IFCHR | 0600, st.st_rdev) == 0, "mknod %s %u:%u: %s", node,
		  major(st.st_rdev), minor(st.st_rdev), strerror(errno));
	fd = open(node, O_RDWR | O_CLOEXEC);
	KT_ASSERT(fd >= 0, "open %s: %s", node, strerror(errno));
	for (i = 0; i < sizeof(advice) / sizeof(advice[0]); i++) {
		err = posix_fadvise(fd, 0, 0, advice[i]);
		KT_ASSERT(!err, "posix_fadvise(advice %d) through %s: %s", advice[i], node,
			  kt_errname(err));
	}
	KT_EXPECT_OK(gd_pin(fd, f.va, KT_GPU_PAGE, 0, &h));
	map = gd_map(fd, h, KT_GPU_PAGE, &err);
	KT_ASSERT(map, "mmap through %s: %s", node, kt_errname(err));
	*(volatile uint32_t *)map = 9;
	err = madvise(map, KT_GPU_PAGE, MADV_WILLNEED) ? errno : 0;
	KT_EXPECT_OK(err);
	munmap(map, KT_GPU_PAGE);
	KT_EXPECT_OK(gd_unpin(fd, h));
	close(fd);
	unlink(node);
	disk_fs_unmount();
}

/* Shared by the pinning thread and the unpinning one. */
static struct {
	int gd;
	uint64_t next;		/* the handle the coming pin will get */
	unsigned int running, stop;
	unsigned long hits;	/* UNPINs of the coming handle that worked */
} handle_race;

static void *unpin_next_handle(void *arg)
{
	(void)arg;
	__atomic_store_n(&handle_race.running, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&handle_race.stop, __ATOMIC_ACQUIRE)) {
		uint64_t h = __atomic_load_n(&handle_race.next, __ATOMIC_ACQUIRE);

		if (!gd_unpin(handle_race.gd, h))
			handle_race.hits++;
	}
	return NULL;
}

/* Whether freed slab objects are poisoned (slub_debug=P, init_on_free=1). */
static bool slab_poisoned(void)
{
	char cmdline[1024] = "";
	FILE *fp = fopen("/proc/cmdline", "r");

	if (fp) {
		if (!fgets(cmdline, sizeof(cmdline), fp))
			cmdline[0] = 0;
		fclose(fp);
	}
	return strstr(cmdline, "slub_debug") || strstr(cmdline, "init_on_free=1");
}

/*
 * Handles are predictable (0 for a file's first pin, then the previous one
 * plus its pages), so another thread can UNPIN a pin before its PIN ioctl
 * has returned.  PIN must not read the region after publishing it: before
 * the fix it read the handle (and, for its log line, the address) from the
 * freed region, which slab poisoning turns into a handle of
 * 0x6b6b6b6b6b6b6b6b (slub_debug=P) or 0 (init_on_free=1).  Every handle
 * PIN returns must be the one due.  The window is widest while gdrdrv's
 * ratelimited debug line is printed (10 every 5 s): with poisoning on, the
 * race runs for 6 s to span two of those bursts; otherwise 1 s.
 */
static void test_gdrdrv_pin_vs_unpin_of_its_handle(void)
{
	struct fixture f = fixture(KT_GPU_PAGE);
	uint64_t step = KT_GPU_PAGE / host_page(), h, bad = 0, want = 0;
	double seconds = slab_poisoned() ? 6.0 : 1.0, t0;
	unsigned int wrong = 0, rounds = 0;
	struct timespec ts;
	pthread_t thread;

	handle_race.gd = f.gd;
	handle_race.next = 0;
	handle_race.running = 0;
	handle_race.stop = 0;
	handle_race.hits = 0;
	KT_ASSERT(!pthread_create(&thread, NULL, unpin_next_handle, NULL), "pthread_create");
	while (!__atomic_load_n(&handle_race.running, __ATOMIC_ACQUIRE))
		sched_yield();
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = ts.tv_sec + ts.tv_nsec * 1e-9;
	do {
		int err;

		__atomic_store_n(&handle_race.next, want, __ATOMIC_RELEASE);
		err = gd_pin(f.gd, f.va, KT_GPU_PAGE, 0, &h);
		if (err) {
			__atomic_store_n(&handle_race.stop, 1, __ATOMIC_RELEASE);
			pthread_join(thread, NULL);
			KT_FAIL("pin %u: %s", rounds, kt_errname(err));
		}
		if (h != want && !wrong++)
			bad = h;
		gd_unpin(f.gd, want);	/* unless the other thread did */
		want += step;
		rounds++;
		clock_gettime(CLOCK_MONOTONIC, &ts);
	} while (ts.tv_sec + ts.tv_nsec * 1e-9 - t0 < seconds);
	__atomic_store_n(&handle_race.stop, 1, __ATOMIC_RELEASE);
	pthread_join(thread, NULL);
	kt_note("%lu of %u pins unpinned by the other thread in %.0f s (slab poisoning %s)",
		handle_race.hits, rounds, seconds, slab_poisoned() ? "on" : "off");
	KT_ASSERT(!wrong, "%u of %u PINs returned a handle other than the one due (first: %#llx), read from a region already unpinned and freed",
		  wrong, rounds, (unsigned long long)bad);
}

#define T(name, gdr) { #name, test_##name, gdr }

static const struct kt_test tests[] = {
	T(softgpu_info, false),
	T(softgpu_unknown_ioctl, false),
	T(softgpu_alloc_free, false),
	T(softgpu_copy, false),
	T(softgpu_copy_d2d, false),
	T(softgpu_memset, false),
	T(softgpu_vmm, false),
	T(softgpu_dmabuf, false),
	T(softgpu_out_of_memory, false),
	T(softgpu_foreign_process, false),
	T(softgpu_space_isolation, false),
	T(gdrdrv_get_version, true),
	T(gdrdrv_get_attr, true),
	T(gdrdrv_proc_params, true),
	T(gdrdrv_unknown_ioctl, true),
	T(gdrdrv_pin_unpin, true),
	T(gdrdrv_pin_with_tokens, true),
	T(gdrdrv_pin_bad_args, true),
	T(gdrdrv_pin_force_pcie, true),
	T(gdrdrv_bad_handles, true),
	T(gdrdrv_map, true),
	T(gdrdrv_map_errors, true),
	T(gdrdrv_cpu_page_size, true),
	T(gdrdrv_map_no_split, true),
	T(gdrdrv_req_mapping_type, true),
	T(gdrdrv_unpin_zaps_mapping, true),
	T(gdrdrv_close_while_mapped, true),
	T(gdrdrv_free_under_pin, true),
	T(gdrdrv_softgpu_close_under_pin, true),
	T(gdrdrv_vmm_unmap_under_pin, true),
	T(gdrdrv_vmm_offset, true),
	T(gdrdrv_fork_isolation, true),
	T(gdrdrv_scm_rights_isolation, true),
	T(gdrdrv_threads, true),
	T(gdrdrv_race_free_unpin, true),
	T(gdrdrv_bar1_exhaustion, true),
	T(gdrdrv_pt_version, true),
	T(gdrdrv_pt_page_size, true),
	T(gdrdrv_injected_failure, true),
	T(gdrdrv_cpu_cacheable_knob, true),
	T(gdrdrv_persistent_api_off, true),
	T(gdrdrv_many_pins, true),
	T(gdrdrv_map_refuses_exec, true),
	T(gdrdrv_map_within_pinned_length, true),
	T(gdrdrv_pin_vs_unpin_of_its_handle, true),
	T(gdrdrv_fadvise_on_disk_node, true),	/* an oops before the fix: late */
	T(gdrdrv_unload_with_pins, true),	/* last: it reloads gdrdrv */
};

int main(int argc, char **argv)
{
	return kt_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
