// SPDX-License-Identifier: MIT
/*
 * Data validation: bytes written through a mapping are the bytes the GPU
 * holds, for every alignment of both pointers, and the reverse.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sanity.h"

#define DATA_SIZE ((size_t)256 * 1024 + 16)

static const size_t offsets[] = { 1, 2, 3, 4, 5, 6, 7, 11, 129, 1023 };

struct data_ctx {
	gdr_t g;
	gdr_mh_t mh;
	void *map;
	CUdeviceptr gpu;
	size_t size;
	unsigned char *expected;	/* what the GPU should hold */
	unsigned char *host;		/* host source/destination, size + 8 KiB of slack */
	unsigned char *readback;
};

static void *xmalloc(size_t size)
{
	void *p = aligned_alloc(64, (size + 63) / 64 * 64);

	ASSERT_MSG(p, "out of host memory");
	return p;
}

/* The GPU's bytes must equal ctx->expected. */
static void verify_gpu(struct data_ctx *ctx, const char *step)
{
	size_t diff;

	ASSERTDRV(cuMemcpyDtoH(ctx->readback, ctx->gpu, ctx->size));
	diff = first_difference(ctx->expected, ctx->readback, ctx->size);
	ASSERT_MSG(diff == (size_t)-1,
		   "%s: GPU memory differs at byte %zu: expected 0x%02x, found 0x%02x", step, diff,
		   ctx->expected[diff], ctx->readback[diff]);
}

static void set_gpu(struct data_ctx *ctx, uint32_t seed)
{
	fill_seeded(ctx->expected, ctx->size, seed);
	ASSERTDRV(cuMemcpyHtoD(ctx->gpu, ctx->expected, ctx->size));
	/*
	 * From pageable memory cuMemcpyHtoD may return before the DMA lands;
	 * SYNC_MEMOPS closes that gap for cuMemAlloc memory, but gdr_alloc_mapped
	 * (imported) memory may not take the attribute.
	 */
	ASSERTDRV(cuCtxSynchronize());
}

/*
 * Copy size - off_map bytes to the mapping at off_map from the host at
 * off_host, and the same range back, checking both against the GPU.
 */
static void check_offsets(struct data_ctx *ctx, size_t off_map, size_t off_host, uint32_t seed,
			  const char *step)
{
	size_t len = ctx->size - off_map;
	size_t diff;

	/* Host -> mapping. */
	set_gpu(ctx, seed);
	fill_seeded(ctx->host, off_host + len, seed + 1);
	ASSERT_GDR_OK(gdr_copy_to_mapping(ctx->mh, (char *)ctx->map + off_map, ctx->host + off_host, len));
	memcpy(ctx->expected + off_map, ctx->host + off_host, len);
	verify_gpu(ctx, step);

	/* Mapping -> host: the GPU's bytes land at off_host, nothing around them changes. */
	set_gpu(ctx, seed + 2);
	memset(ctx->host, 0x5a, off_host + len + 64);
	ASSERT_GDR_OK(gdr_copy_from_mapping(ctx->mh, ctx->host + off_host, (char *)ctx->map + off_map, len));
	diff = first_difference(ctx->expected + off_map, ctx->host + off_host, len);
	ASSERT_MSG(diff == (size_t)-1, "%s: read back byte %zu wrong: expected 0x%02x, got 0x%02x",
		   step, diff, ctx->expected[off_map + diff], ctx->host[off_host + diff]);
	for (size_t i = 0; i < off_host; i++)
		ASSERT_MSG(ctx->host[i] == 0x5a, "%s: gdr_copy_from_mapping wrote before its destination", step);
	for (size_t i = off_host + len; i < off_host + len + 64; i++)
		ASSERT_MSG(ctx->host[i] == 0x5a, "%s: gdr_copy_from_mapping wrote past its destination", step);
}

enum data_pin { DATA_PIN_LEGACY, DATA_PIN_V2, DATA_PIN_V2_FORCE_PCIE };

static void data_validation_run(enum gpu_alloc_kind kind, enum data_pin pin)
{
	struct data_ctx ctx = { .size = DATA_SIZE };
	volatile uint32_t *words;
	size_t n_words = DATA_SIZE / sizeof(uint32_t);
	gdr_info_t info;
	struct gpu_mem mem;
	char step[96];
	CUdevice dev;

	dev = sanity_gpu_init(false);
	ctx.g = sanity_gdr_open();
	if (pin == DATA_PIN_V2_FORCE_PCIE)
		sanity_require_force_pcie(ctx.g, dev);
	sanity_alloc(dev, ctx.g, kind, DATA_SIZE, &mem);
	ctx.gpu = mem.ptr;
	ctx.expected = xmalloc(DATA_SIZE);
	ctx.readback = xmalloc(DATA_SIZE);
	ctx.host = xmalloc(DATA_SIZE + 8192);

	if (pin == DATA_PIN_LEGACY)
		ASSERT_GDR_OK(gdr_pin_buffer(ctx.g, mem.ptr, DATA_SIZE, 0, 0, &ctx.mh));
	else
		ASSERT_GDR_OK(gdr_pin_buffer_v2(ctx.g, mem.ptr, DATA_SIZE,
						pin == DATA_PIN_V2_FORCE_PCIE ? GDR_PIN_FLAG_FORCE_PCIE :
										GDR_PIN_FLAG_DEFAULT,
						&ctx.mh));

	/* 1. Mapped is reported false before gdr_map and true after. */
	ASSERT_GDR_OK(gdr_get_info(ctx.g, ctx.mh, &info));
	ASSERT_EQ(info.mapped, 0);
	ASSERT_GDR_OK(gdr_map(ctx.g, ctx.mh, &ctx.map, DATA_SIZE));
	ASSERT_GDR_OK(gdr_get_info(ctx.g, ctx.mh, &info));
	ASSERT_EQ(info.mapped, 1);
	ASSERT_MSG(info.mapping_type > GDR_MAPPING_TYPE_NONE && info.mapping_type < GDR_MAPPING_TYPE_MAX,
		   "mapped buffer reports mapping type %d", info.mapping_type);
	ASSERT_EQ(info.wc_mapping, info.mapping_type == GDR_MAPPING_TYPE_WC);
	if (pin == DATA_PIN_V2_FORCE_PCIE)
		ASSERT_MSG(info.mapping_type != GDR_MAPPING_TYPE_CACHING,
			   "a FORCE_PCIE pin was mapped CPU-cached");
	test_debug("mapping type %d, page size %u", info.mapping_type, info.page_size);

	/* 2. Plain CPU stores through the mapping: the whole buffer, then 1000 random words. */
	words = ctx.map;
	fill_walking_bit(ctx.expected, DATA_SIZE);
	for (size_t w = 0; w < n_words; w++)
		words[w] = ((const uint32_t *)ctx.expected)[w];
	memcpy((char *)ctx.map + n_words * 4, ctx.expected + n_words * 4, DATA_SIZE % 4);
	srand(12345);
	for (int i = 0; i < 1000; i++) {
		size_t w = (size_t)rand() % n_words;
		uint32_t value = (uint32_t)rand();

		words[w] = value;
		memcpy(ctx.expected + w * 4, &value, sizeof(value));
	}
	__sync_synchronize();
	verify_gpu(&ctx, "CPU stores through the mapping");

	/* 3. gdr_copy_to_mapping of the whole buffer. */
	fill_linear_ramp(ctx.expected, DATA_SIZE);
	ASSERT_GDR_OK(gdr_copy_to_mapping(ctx.mh, ctx.map, ctx.expected, DATA_SIZE));
	verify_gpu(&ctx, "gdr_copy_to_mapping");

	/* 4. Round trip: to the mapping and back. */
	fill_seeded(ctx.host, DATA_SIZE, 77);
	ASSERT_GDR_OK(gdr_copy_to_mapping(ctx.mh, ctx.map, ctx.host, DATA_SIZE));
	memset(ctx.readback, 0, DATA_SIZE);
	ASSERT_GDR_OK(gdr_copy_from_mapping(ctx.mh, ctx.readback, ctx.map, DATA_SIZE));
	ASSERT_MSG(first_difference(ctx.host, ctx.readback, DATA_SIZE) == (size_t)-1,
		   "round trip through the mapping changed the data");

	/* 5-10. Unaligned offsets, in dwords and in bytes, on the mapping side, the host side, both. */
	for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
		size_t o = offsets[i];
		uint32_t seed = (uint32_t)(1000 + 10 * i);

		snprintf(step, sizeof(step), "mapping offset %zu dwords", o);
		check_offsets(&ctx, o * 4, 0, seed, step);
		snprintf(step, sizeof(step), "mapping offset %zu bytes", o);
		check_offsets(&ctx, o, 0, seed + 3, step);
		snprintf(step, sizeof(step), "host offset %zu dwords", o);
		check_offsets(&ctx, 0, o * 4, seed + 5, step);
		snprintf(step, sizeof(step), "host offset %zu bytes", o);
		check_offsets(&ctx, 0, o, seed + 7, step);
		snprintf(step, sizeof(step), "both offset %zu dwords", o);
		check_offsets(&ctx, o * 4, o * 4, seed + 9, step);
		snprintf(step, sizeof(step), "both offset %zu bytes", o);
		check_offsets(&ctx, o, o, seed + 11, step);
	}

	/* Zero-length copies are no-ops. */
	ASSERT_GDR_OK(gdr_copy_to_mapping(ctx.mh, ctx.map, ctx.host, 0));
	ASSERT_GDR_OK(gdr_copy_from_mapping(ctx.mh, ctx.host, ctx.map, 0));

	ASSERT_GDR_OK(gdr_unmap(ctx.g, ctx.mh, ctx.map, DATA_SIZE));
	ASSERT_GDR_OK(gdr_get_info(ctx.g, ctx.mh, &info));
	ASSERT_EQ(info.mapped, 0);
	ASSERT_GDR_OK(gdr_unpin_buffer(ctx.g, ctx.mh));
	sanity_free(&mem);
	ASSERT_GDR_OK(gdr_close(ctx.g));
	free(ctx.expected);
	free(ctx.readback);
	free(ctx.host);
}

SANITY_TEST_BOTH_ALLOCS(data_validation)
{
	data_validation_run(kind, DATA_PIN_LEGACY);
}

SANITY_TEST(data_validation_v2_cumemalloc)
{
	data_validation_run(GPU_ALLOC_CUMEMALLOC, DATA_PIN_V2);
}

SANITY_TEST(data_validation_v2_forcepci_cumemalloc)
{
	data_validation_run(GPU_ALLOC_CUMEMALLOC, DATA_PIN_V2_FORCE_PCIE);
}

/* Write through one mapping of a buffer, read through another of a different type. */
static void check_cross(gdr_mh_t wmh, void *wmap, gdr_mh_t rmh, void *rmap, CUdeviceptr gpu,
			size_t size, uint32_t seed, const char *what)
{
	unsigned char *src = xmalloc(size), *dst = xmalloc(size), *gpu_copy = xmalloc(size);

	fill_seeded(src, size, seed);
	memset(dst, 0, size);
	ASSERT_GDR_OK(gdr_copy_to_mapping(wmh, wmap, src, size));
	ASSERT_GDR_OK(gdr_copy_from_mapping(rmh, dst, rmap, size));
	ASSERT_MSG(first_difference(src, dst, size) == (size_t)-1, "%s: data read differs", what);
	ASSERTDRV(cuMemcpyDtoH(gpu_copy, gpu, size));
	ASSERT_MSG(first_difference(src, gpu_copy, size) == (size_t)-1, "%s: GPU memory differs", what);
	free(src);
	free(dst);
	free(gpu_copy);
}

SANITY_TEST(data_validation_mix_mappings_cumemalloc)
{
	const size_t size = DATA_SIZE;
	gdr_mh_t wc_mh, cache_mh;
	void *wc_map = NULL, *cache_map = NULL;
	gdr_info_t info;
	struct gpu_mem mem;
	CUdevice dev;
	gdr_t g;
	int ret;

	sanity_require_cuda_allocations("gdr_alloc_mapped memory maps with one type only (its memory type's), so there is no mix to test");
	dev = sanity_gpu_init(false);
	g = sanity_gdr_open();
	sanity_require_not_dmabuf(g, "let the caller choose mapping types, so there is no mix to test");
	if (!sanity_gpu_coherent(dev))
		test_waive("the platform is not coherent, so GPU memory cannot be mapped CPU-cached");
	sanity_alloc(dev, g, GPU_ALLOC_CUMEMALLOC, size, &mem);

	ASSERT_GDR_OK(gdr_pin_buffer(g, mem.ptr, size, 0, 0, &wc_mh));
	ASSERT_GDR_OK(gdr_pin_buffer(g, mem.ptr, size, 0, 0, &cache_mh));
	ret = gdr_map_v2(g, wc_mh, &wc_map, size, GDR_MAP_FLAG_REQ_WC_MAPPING);
	if (ret == EOPNOTSUPP)
		test_waive("gdrdrv refuses write-combined mappings of this RAM-backed memory (on x86 a WC view of RAM beside its cached one is undefined), so there is no mix to test");
	ASSERT_GDR_OK(ret);
	ASSERT_GDR_OK(gdr_map_v2(g, cache_mh, &cache_map, size, GDR_MAP_FLAG_REQ_CACHE_MAPPING));
	ASSERT_GDR_OK(gdr_get_info(g, wc_mh, &info));
	ASSERT_EQ(info.mapping_type, GDR_MAPPING_TYPE_WC);
	ASSERT_GDR_OK(gdr_get_info(g, cache_mh, &info));
	ASSERT_EQ(info.mapping_type, GDR_MAPPING_TYPE_CACHING);

	check_cross(wc_mh, wc_map, cache_mh, cache_map, mem.ptr, size, 501, "write WC, read cached");
	check_cross(cache_mh, cache_map, wc_mh, wc_map, mem.ptr, size, 502, "write cached, read WC");

	ASSERT_GDR_OK(gdr_unmap(g, wc_mh, wc_map, size));
	ASSERT_GDR_OK(gdr_unmap(g, cache_mh, cache_map, size));
	ASSERT_GDR_OK(gdr_unpin_buffer(g, wc_mh));
	ASSERT_GDR_OK(gdr_unpin_buffer(g, cache_mh));
	sanity_free(&mem);
	ASSERT_GDR_OK(gdr_close(g));
}
