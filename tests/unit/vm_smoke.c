// SPDX-License-Identifier: MIT
/*
 * libgdrapi against the real gdrdrv, with softgpu as the GPU: pin, map,
 * copy both ways (checked through softgpu's own copy ioctl), mapping types,
 * an unaligned pin, threads, and close with buffers still mapped.  Runs
 * inside a VM that has loaded softgpu.ko and gdrdrv.ko (see vm_smoke.sh);
 * built statically so an initramfs needs nothing else.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "gdrapi.h"
#include "softgpu_uapi.h"

#undef gdr_get_info
struct gdr_info_v1 {
	uint64_t va, mapped_size;
	uint32_t page_size;
	uint64_t tm_cycles;
	uint32_t cycles_per_ms;
	unsigned mapped:1, wc_mapping:1;
};
int gdr_get_info(gdr_t g, gdr_mh_t handle, struct gdr_info_v1 *info);

#define GPU_PAGE (64UL << 10)
#define BUF_SIZE (16 * GPU_PAGE)

static int passed, failed, softgpu;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (cond) {                                                \
			passed++;                                          \
		} else {                                                   \
			failed++;                                          \
			printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			printf(__VA_ARGS__);                               \
			printf("\n");                                      \
		}                                                          \
	} while (0)

static int gpu_copy(uint64_t va, void *host, size_t size, unsigned int dir)
{
	struct softgpu_copy c = { .va = va, .host = (uintptr_t)host, .size = size, .direction = dir };

	return ioctl(softgpu, SOFTGPU_IOC_COPY, &c);
}

static void fill(unsigned char *p, size_t n, unsigned int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 13 + seed + (i >> 9));
}

static void test_copy_both_ways(gdr_t g, uint64_t gpu, int flags, const char *what)
{
	static unsigned char in[BUF_SIZE], out[BUF_SIZE];
	static const size_t cases[][2] = { { 0, 1 }, { 3, 61 }, { 64, 4096 }, { 17, 70000 }, { 0, BUF_SIZE } };
	gdr_info_t info;
	gdr_mh_t mh;
	char *map;
	size_t i;
	int rc;

	rc = gdr_pin_buffer(g, gpu, BUF_SIZE, 0, 0, &mh);
	CHECK(rc == 0, "%s: pin: %d", what, rc);
	if (rc)
		return;
	rc = gdr_map_v2(g, mh, (void **)&map, BUF_SIZE, flags);
	if (rc == EOPNOTSUPP || (rc == EINVAL && flags)) {
		printf("note: %s: mapping type not available here (%d)\n", what, rc);
		gdr_unpin_buffer(g, mh);
		return;
	}
	CHECK(rc == 0, "%s: map: %d", what, rc);
	if (rc)
		return;
	CHECK(gdr_get_info_v2(g, mh, &info) == 0 && info.mapped && info.va == gpu && info.mapped_size == BUF_SIZE,
	      "%s: info va %#llx size %llu mapped %d", what, (unsigned long long)info.va,
	      (unsigned long long)info.mapped_size, info.mapped);
	printf("%s: mapping type %d, page size %u\n", what, info.mapping_type, info.page_size);

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t off = cases[i][0], len = cases[i][1];

		fill(in, len, (unsigned int)i);
		CHECK(gdr_copy_to_mapping(mh, map + off, in, len) == 0, "%s: copy to", what);
		memset(out, 0, len);
		CHECK(gpu_copy(gpu + off, out, len, SOFTGPU_COPY_FROM_GPU) == 0, "softgpu copy");
		CHECK(memcmp(in, out, len) == 0, "%s: GPU does not see what was written at +%zu len %zu", what, off,
		      len);

		fill(in, len, (unsigned int)i + 100);
		CHECK(gpu_copy(gpu + off, in, len, SOFTGPU_COPY_TO_GPU) == 0, "softgpu copy");
		memset(out, 0, len);
		CHECK(gdr_copy_from_mapping(mh, out, map + off, len) == 0, "%s: copy from", what);
		CHECK(memcmp(in, out, len) == 0, "%s: CPU does not read what the GPU holds at +%zu len %zu", what,
		      off, len);
	}
	CHECK(gdr_unmap(g, mh, map, BUF_SIZE) == 0, "%s: unmap", what);
	CHECK(gdr_unpin_buffer(g, mh) == 0, "%s: unpin", what);
}

struct worker {
	gdr_t g;
	uint64_t gpu;
	int errors;
};

static void *worker(void *arg)
{
	struct worker *w = arg;
	unsigned char in[4096], out[4096];
	int round;

	for (round = 0; round < 50; round++) {
		gdr_mh_t mh;
		char *map;

		if (gdr_pin_buffer_v2(w->g, w->gpu, GPU_PAGE, 0, &mh)) {
			w->errors++;
			continue;
		}
		if (gdr_map(w->g, mh, (void **)&map, GPU_PAGE) == 0) {
			fill(in, sizeof(in), (unsigned int)round);
			gdr_copy_to_mapping(mh, map + 100, in, sizeof(in));
			gdr_copy_from_mapping(mh, out, map + 100, sizeof(out));
			w->errors += memcmp(in, out, sizeof(in)) != 0;
			w->errors += gdr_unmap(w->g, mh, map, GPU_PAGE) != 0;
		} else {
			w->errors++;
		}
		w->errors += gdr_unpin_buffer(w->g, mh) != 0;
	}
	return NULL;
}

int main(void)
{
	struct softgpu_alloc alloc = { .size = 4 * BUF_SIZE };
	struct worker workers[4];
	pthread_t threads[4];
	struct gdr_info_v1 v1;
	int major = -1, minor = -1, value = -1, i;
	gdr_mh_t mh, unaligned;
	void *map;
	FILE *f;
	gdr_t g;

	softgpu = open(SOFTGPU_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (softgpu < 0 || ioctl(softgpu, SOFTGPU_IOC_ALLOC, &alloc) < 0) {
		perror("softgpu");
		return 2;
	}
	g = gdr_open();
	CHECK(g != NULL, "gdr_open: %s", strerror(errno));
	if (!g)
		goto out;
	CHECK(gdr_driver_get_version(g, &major, &minor) == 0 && major == 2 && minor >= 6, "driver %d.%d", major,
	      minor);
	CHECK(gdr_get_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING, &value) == 0 && value == 1, "persistent %d",
	      value);
	CHECK(gdr_get_attribute(g, GDR_ATTR_USING_DMA_BUF_MMAP, &value) == 0 && value == 0, "dma-buf %d", value);

	test_copy_both_ways(g, alloc.va, GDR_MAP_FLAG_DEFAULT, "default");
	test_copy_both_ways(g, alloc.va + BUF_SIZE, GDR_MAP_FLAG_REQ_WC_MAPPING, "wc");
	test_copy_both_ways(g, alloc.va + 2 * BUF_SIZE, GDR_MAP_FLAG_REQ_CACHE_MAPPING, "cache");

	/* gdrdrv maps only pins that start on a GPU page. */
	CHECK(gdr_pin_buffer_v2(g, alloc.va + 3 * BUF_SIZE + 8, 64, 0, &unaligned) == 0, "unaligned pin");
	CHECK(gdr_map(g, unaligned, &map, 64) == EINVAL, "unaligned map must fail");
	CHECK(gdr_get_info(g, unaligned, &v1) == 0 && v1.page_size == GPU_PAGE && !v1.mapped, "v1 info");

	for (i = 0; i < 4; i++) {
		workers[i] = (struct worker){ .g = g, .gpu = alloc.va + 3 * BUF_SIZE + (i + 1) * GPU_PAGE };
		pthread_create(&threads[i], NULL, worker, &workers[i]);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(threads[i], NULL);
		CHECK(workers[i].errors == 0, "thread %d: %d errors", i, workers[i].errors);
	}

	/* Close with a buffer still pinned and mapped. */
	CHECK(gdr_pin_buffer_v2(g, alloc.va, GPU_PAGE, 0, &mh) == 0, "pin");
	CHECK(gdr_map(g, mh, &map, GPU_PAGE) == 0, "map");
	CHECK(gdr_close(g) == 0, "close");
	f = fopen("/proc/driver/gdrdrv/nv_get_pages_refcount", "r");
	if (f) {
		long refs = -1;

		CHECK(fscanf(f, "%ld", &refs) == 1 && refs == 0, "pin refcount after close: %ld", refs);
		fclose(f);
	}
out:
	printf("VM SMOKE: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
