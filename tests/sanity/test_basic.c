// SPDX-License-Identifier: MIT
/*
 * Basic tests: attributes, pin/unpin with each API, unaligned buffers,
 * pins from other threads.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sanity.h"

/* 256 KiB + 16 bytes: pins round it to 320 KiB of GPU pages. */
#define BASIC_SIZE ((size_t)256 * 1024 + 16)

SANITY_TEST(attributes_sanity)
{
	static const gdr_attr_t attrs[] = {
		GDR_ATTR_USE_PERSISTENT_MAPPING,
		GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE,
		GDR_ATTR_USING_DMA_BUF_MMAP,
		GDR_ATTR_VMA_INHERITED_ON_FORK,
	};
	gdr_t g;
	int value;

	sanity_gpu_init(false);
	g = sanity_gdr_open();
	for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
		value = -1;
		ASSERT_GDR_OK(gdr_get_attribute(g, attrs[i], &value));
		ASSERT_MSG(value == 0 || value == 1, "attribute %d has value %d, expected 0 or 1",
			   attrs[i], value);
		test_debug("attribute %d = %d", attrs[i], value);
	}
	/* The dma-buf backend is always persistent and can force PCIe. */
	if (sanity_using_dmabuf(g)) {
		ASSERT_EQ(sanity_gdr_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING), 1);
		ASSERT_EQ(sanity_gdr_attribute(g, GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE), 1);
	}
	ASSERT_EQ(gdr_get_attribute(g, (gdr_attr_t)0, &value), EINVAL);
	ASSERT_EQ(gdr_get_attribute(g, GDR_ATTR_MAX, &value), EINVAL);
	ASSERT_GDR_OK(gdr_close(g));
}

enum pin_api { PIN_LEGACY, PIN_V2, PIN_V2_FORCE_PCIE };

static void check_pinned_info(gdr_t g, gdr_mh_t mh, const struct gpu_mem *mem, size_t size)
{
	gdr_info_t info;

	memset(&info, 0xa5, sizeof(info));
	ASSERT_GDR_OK(gdr_get_info(g, mh, &info));
	ASSERT_MSG(info.va <= mem->ptr && info.va + info.mapped_size >= mem->ptr + size,
		   "gdr_get_info range [0x%llx, +%llu) does not cover the pinned [0x%llx, +%zu)",
		   (unsigned long long)info.va, (unsigned long long)info.mapped_size,
		   (unsigned long long)mem->ptr, size);
	ASSERT_MSG(info.page_size && info.mapped_size % info.page_size == 0,
		   "mapped_size %llu is not a multiple of page_size %u",
		   (unsigned long long)info.mapped_size, info.page_size);
	ASSERT_EQ(info.mapped, 0);
	ASSERT_EQ(info.mapping_type, GDR_MAPPING_TYPE_NONE);
}

static void basic_pin(enum gpu_alloc_kind kind, enum pin_api api)
{
	struct gpu_mem mem;
	CUdevice dev;
	gdr_mh_t mh;
	gdr_t g;

	dev = sanity_gpu_init(false);
	g = sanity_gdr_open();
	if (api == PIN_V2_FORCE_PCIE)
		sanity_require_force_pcie(g, dev);
	sanity_alloc(dev, g, kind, BASIC_SIZE, &mem);

	switch (api) {
	case PIN_LEGACY:
		ASSERT_GDR_OK(gdr_pin_buffer(g, mem.ptr, BASIC_SIZE, 0, 0, &mh));
		break;
	case PIN_V2:
		ASSERT_GDR_OK(gdr_pin_buffer_v2(g, mem.ptr, BASIC_SIZE, GDR_PIN_FLAG_DEFAULT, &mh));
		break;
	case PIN_V2_FORCE_PCIE:
		ASSERT_GDR_OK(gdr_pin_buffer_v2(g, mem.ptr, BASIC_SIZE, GDR_PIN_FLAG_FORCE_PCIE, &mh));
		break;
	}
	check_pinned_info(g, mh, &mem, BASIC_SIZE);
	ASSERT_GDR_OK(gdr_unpin_buffer(g, mh));
	sanity_free(&mem);
	ASSERT_GDR_OK(gdr_close(g));
}

SANITY_TEST_BOTH_ALLOCS(basic)
{
	basic_pin(kind, PIN_LEGACY);
}

SANITY_TEST_BOTH_ALLOCS(basic_v2)
{
	basic_pin(kind, PIN_V2);
}

SANITY_TEST_BOTH_ALLOCS(basic_v2_forcepci)
{
	basic_pin(kind, PIN_V2_FORCE_PCIE);
}

SANITY_TEST(basic_with_tokens)
{
	CUDA_POINTER_ATTRIBUTE_P2P_TOKENS tokens;
	struct gpu_mem mem;
	CUdevice dev;
	gdr_mh_t mh;
	gdr_t g;

	sanity_require_cuda_allocations("P2P tokens belong to cuMemAlloc memory pinned by gdrdrv");
	dev = sanity_gpu_init(false);
	g = sanity_gdr_open();
	sanity_require_not_dmabuf(g, "take P2P tokens");
	if (sanity_persistent(g))
		test_waive("persistent mapping is in use, which rejects P2P tokens (load gdrdrv with use_persistent_mapping=0 to run this)");
	sanity_alloc(dev, NULL, GPU_ALLOC_CUMEMALLOC, BASIC_SIZE, &mem);
	memset(&tokens, 0, sizeof(tokens));
	ASSERTDRV(cuPointerGetAttribute(&tokens, CU_POINTER_ATTRIBUTE_P2P_TOKENS, mem.ptr));
	test_debug("p2p token 0x%llx, va space %u", (unsigned long long)tokens.p2pToken,
		   tokens.vaSpaceToken);
	ASSERT_GDR_OK(gdr_pin_buffer(g, mem.ptr, BASIC_SIZE, tokens.p2pToken, tokens.vaSpaceToken,
				     &mh));
	check_pinned_info(g, mh, &mem, BASIC_SIZE);
	ASSERT_GDR_OK(gdr_unpin_buffer(g, mh));
	ASSERT_GDR_OK(gdr_close(g));
	sanity_free(&mem);
}

/* Store then load one word through a mapping, verified against cuMemcpyDtoH. */
static void check_mapping_word(void *map, CUdeviceptr gpu_addr, uint32_t value)
{
	uint32_t readback = 0;

	*(volatile uint32_t *)map = value;
	__sync_synchronize();
	ASSERT_EQ(*(volatile uint32_t *)map, value);
	ASSERTDRV(cuMemcpyDtoH(&readback, gpu_addr, sizeof(readback)));
	ASSERT_EQ(readback, value);
}

/*
 * -a gdr_alloc_mapped: that memory is always GPU-page aligned, so the
 * unaligned buffer starts 16 bytes into an allocation of three GPU pages.
 */
static void unaligned_mapping_in_alloc_mapped(CUdevice dev, gdr_t g)
{
	const size_t size = 2 * GPU_ALLOC_ALIGNMENT;
	CUdeviceptr buf, aligned;
	struct gpu_mem mem;
	void *map = NULL;
	gdr_mh_t mh;

	sanity_alloc(dev, g, GPU_ALLOC_CUMEMALLOC, size + GPU_ALLOC_ALIGNMENT, &mem);
	buf = mem.ptr + 16;

	/* Pinning an unaligned buffer works, mapping it must not. */
	ASSERT_GDR_OK(gdr_pin_buffer(g, buf, size, 0, 0, &mh));
	ASSERT_GDR_FAILS(gdr_map(g, mh, &map, size));
	ASSERT_GDR_OK(gdr_unpin_buffer(g, mh));

	/* From the next GPU page on, it maps. */
	aligned = mem.ptr + GPU_ALLOC_ALIGNMENT;
	ASSERT_GDR_OK(gdr_pin_buffer(g, aligned, buf + size - aligned, 0, 0, &mh));
	ASSERT_GDR_OK(gdr_map(g, mh, &map, buf + size - aligned));
	check_mapping_word(map, aligned, 0xc0ffee01);
	ASSERT_GDR_OK(gdr_unmap(g, mh, map, buf + size - aligned));
	ASSERT_GDR_OK(gdr_unpin_buffer(g, mh));
	sanity_free(&mem);
	ASSERT_GDR_OK(gdr_close(g));
}

SANITY_TEST(basic_unaligned_mapping)
{
	const size_t size = 2 * GPU_ALLOC_ALIGNMENT;
	CUdeviceptr fillers[10] = { 0 }, buf = 0, aligned;
	size_t n_fillers = 0;
	gdr_mh_t mh;
	void *map;
	CUdevice dev;
	gdr_t g;

	dev = sanity_gpu_init(false);
	g = sanity_gdr_open();
	if (sanity_alloc_mapped) {
		unaligned_mapping_in_alloc_mapped(dev, g);
		return;
	}

	/* Small allocations in front push the next one off a GPU page boundary. */
	while (n_fillers < sizeof(fillers) / sizeof(fillers[0])) {
		ASSERTDRV(cuMemAlloc(&fillers[n_fillers++], 16));
		ASSERTDRV(cuMemAlloc(&buf, size));
		if (buf & (GPU_ALLOC_ALIGNMENT - 1))
			break;
		ASSERTDRV(cuMemFree(buf));
		buf = 0;
	}
	if (!buf) {
		for (size_t i = 0; i < n_fillers; i++)
			ASSERTDRV(cuMemFree(fillers[i]));
		test_waive("cuMemAlloc returned only 64 KiB-aligned buffers in %zu tries; cannot make an unaligned one",
			   n_fillers);
	}
	test_debug("unaligned buffer at 0x%llx", (unsigned long long)buf);

	/* Pinning an unaligned buffer works, mapping it must not. */
	ASSERT_GDR_OK(gdr_pin_buffer(g, buf, size, 0, 0, &mh));
	map = NULL;
	ASSERT_GDR_FAILS(gdr_map(g, mh, &map, size));
	ASSERT_GDR_OK(gdr_unpin_buffer(g, mh));

	/* From the next GPU page on, it maps. */
	aligned = (buf + GPU_ALLOC_ALIGNMENT - 1) & ~(CUdeviceptr)(GPU_ALLOC_ALIGNMENT - 1);
	ASSERT_GDR_OK(gdr_pin_buffer(g, aligned, buf + size - aligned, 0, 0, &mh));
	ASSERT_GDR_OK(gdr_map(g, mh, &map, buf + size - aligned));
	check_mapping_word(map, aligned, 0xc0ffee01);

	/* Freeing small neighbours (possibly in the same GPU page) must not disturb the mapping. */
	for (size_t i = 0; i < n_fillers; i++)
		ASSERTDRV(cuMemFree(fillers[i]));
	check_mapping_word(map, aligned, 0xc0ffee02);

	ASSERT_GDR_OK(gdr_unmap(g, mh, map, buf + size - aligned));
	ASSERT_GDR_OK(gdr_unpin_buffer(g, mh));
	ASSERT_GDR_OK(gdr_close(g));
	ASSERTDRV(cuMemFree(buf));
}

SANITY_TEST(basic_small_buffers_mapping)
{
	const size_t small = 8;
	struct gpu_mem mem;
	gdr_mh_t first, second;
	void *map_first = NULL, *map_second = NULL;
	CUdevice dev;
	gdr_t g;

	dev = sanity_gpu_init(false);
	g = sanity_gdr_open();
	sanity_alloc(dev, g, GPU_ALLOC_CUMEMALLOC, GPU_ALLOC_ALIGNMENT, &mem);

	/* Two 8-byte buffers in one GPU page: the first starts the page. */
	ASSERT_GDR_OK(gdr_pin_buffer(g, mem.ptr, small, 0, 0, &first));
	ASSERT_GDR_OK(gdr_map(g, first, &map_first, small));
	check_mapping_word(map_first, mem.ptr, 0x5eed0001);

	ASSERT_GDR_OK(gdr_pin_buffer(g, mem.ptr + small, small, 0, 0, &second));
	ASSERT_MSG(second.h != first.h, "two pins in one GPU page got the same handle");
	ASSERT_GDR_FAILS(gdr_map(g, second, &map_second, small));

	/* The failed map and the second unpin leave the first mapping alone. */
	ASSERT_GDR_OK(gdr_unpin_buffer(g, second));
	check_mapping_word(map_first, mem.ptr, 0x5eed0002);

	ASSERT_GDR_OK(gdr_unmap(g, first, map_first, small));
	ASSERT_GDR_OK(gdr_unpin_buffer(g, first));
	sanity_free(&mem);
	ASSERT_GDR_OK(gdr_close(g));
}

/* ---- pins from other threads ------------------------------------------- */

struct thread_pin {
	gdr_t g;
	CUdeviceptr addr;
	size_t size;
	uint32_t value;
	gdr_mh_t mh;
	void *map;
	pthread_barrier_t *barrier;
};

static void *pin_map_write_unmap_unpin(void *arg)
{
	struct thread_pin *t = arg;

	ASSERT_GDR_OK(gdr_pin_buffer(t->g, t->addr, t->size, 0, 0, &t->mh));
	ASSERT_GDR_OK(gdr_map(t->g, t->mh, &t->map, t->size));
	ASSERT_GDR_OK(gdr_copy_to_mapping(t->mh, t->map, &t->value, sizeof(t->value)));
	ASSERT_GDR_OK(gdr_unmap(t->g, t->mh, t->map, t->size));
	ASSERT_GDR_OK(gdr_unpin_buffer(t->g, t->mh));
	return NULL;
}

static void *pin_and_map(void *arg)
{
	struct thread_pin *t = arg;

	if (t->barrier)
		pthread_barrier_wait(t->barrier);
	ASSERT_GDR_OK(gdr_pin_buffer(t->g, t->addr, t->size, 0, 0, &t->mh));
	ASSERT_GDR_OK(gdr_map(t->g, t->mh, &t->map, t->size));
	return NULL;
}

static void *unmap_and_unpin(void *arg)
{
	struct thread_pin *t = arg;

	ASSERT_GDR_OK(gdr_unmap(t->g, t->mh, t->map, t->size));
	ASSERT_GDR_OK(gdr_unpin_buffer(t->g, t->mh));
	return NULL;
}

static void *close_gdr(void *arg)
{
	ASSERT_GDR_OK(gdr_close(arg));
	return NULL;
}

static void run_thread(void *(*fn)(void *), void *arg)
{
	pthread_t thread;

	ASSERT_EQ(pthread_create(&thread, NULL, fn, arg), 0);
	ASSERT_EQ(pthread_join(thread, NULL), 0);
}

static uint32_t gpu_word(CUdeviceptr addr)
{
	uint32_t value = 0;

	ASSERTDRV(cuMemcpyDtoH(&value, addr, sizeof(value)));
	return value;
}

SANITY_TEST_BOTH_ALLOCS(basic_child_thread_pins_buffer)
{
	const size_t size = GPU_ALLOC_ALIGNMENT;
	struct thread_pin a, b;
	pthread_barrier_t barrier;
	pthread_t ta, tb;
	struct gpu_mem mem;
	CUdevice dev;
	gdr_t g;

	dev = sanity_gpu_init(false);
	g = sanity_gdr_open();
	sanity_alloc(dev, g, kind, size, &mem);

	/* 1. The whole pin/map/copy/unmap/unpin cycle in a thread. */
	a = (struct thread_pin){ .g = g, .addr = mem.ptr, .size = size, .value = 0xa11ce001 };
	run_thread(pin_map_write_unmap_unpin, &a);
	ASSERT_EQ(gpu_word(mem.ptr), 0xa11ce001);

	/* 2. Set up in one thread, used here, torn down in another. */
	a = (struct thread_pin){ .g = g, .addr = mem.ptr, .size = size };
	run_thread(pin_and_map, &a);
	check_mapping_word(a.map, mem.ptr, 0xa11ce002);
	run_thread(unmap_and_unpin, &a);

	/* 3. Two threads pin and map the same buffer at once; both mappings see each other's stores. */
	ASSERT_EQ(pthread_barrier_init(&barrier, NULL, 2), 0);
	a = (struct thread_pin){ .g = g, .addr = mem.ptr, .size = size, .barrier = &barrier };
	b = a;
	ASSERT_EQ(pthread_create(&ta, NULL, pin_and_map, &a), 0);
	ASSERT_EQ(pthread_create(&tb, NULL, pin_and_map, &b), 0);
	ASSERT_EQ(pthread_join(ta, NULL), 0);
	ASSERT_EQ(pthread_join(tb, NULL), 0);
	pthread_barrier_destroy(&barrier);
	ASSERT_MSG(a.mh.h != b.mh.h, "two concurrent pins got the same handle");
	check_mapping_word(a.map, mem.ptr, 0xa11ce003);
	ASSERT_EQ(*(volatile uint32_t *)b.map, 0xa11ce003);
	check_mapping_word(b.map, mem.ptr, 0xa11ce004);
	ASSERT_EQ(*(volatile uint32_t *)a.map, 0xa11ce004);
	run_thread(unmap_and_unpin, &a);
	run_thread(unmap_and_unpin, &b);

	/* 4. gdr_close from another thread, with a buffer still pinned (close unpins it). */
	a = (struct thread_pin){ .g = g, .addr = mem.ptr, .size = size };
	run_thread(pin_and_map, &a);
	ASSERT_GDR_OK(gdr_unmap(g, a.mh, a.map, size));
	run_thread(close_gdr, g);
	sanity_forget_closed(&mem);	/* gdr_alloc_mapped memory went with g */
	sanity_free(&mem);
}
