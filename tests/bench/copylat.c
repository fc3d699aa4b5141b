// SPDX-License-Identifier: MIT
/*
 * gdrcopy_copylat: per-call latency of gdr_copy_to_mapping and
 * gdr_copy_from_mapping for sizes 1 B, 2 B, 4 B, ... up to -s.  The
 * iterations of each size are split into up to 100 buckets; the table shows
 * the median, minimum and maximum of the per-bucket mean times.  -c adds
 * cuMemcpy (H2D and D2H) rows and -p rows for plain memcpy and for the
 * simplest streaming-instruction loop on the same mapping: what users would
 * use instead.
 *
 * Two ways to time a call (-m):
 *   b2b     calls issued back to back with nothing between them, as a loop
 *           polling a flag in GPU memory issues them; successive reads may
 *           overlap in the CPU (the reference's only way).  Copies of up to
 *           B2B_BURST_MAX bytes repeat each bucket's calls until it holds at
 *           least B2B_BUCKET_CALLS (b2b_bucket_calls says why).
 *   single  each call starts after the previous one has completed (a full
 *           fence), and a read's data is used before the clock stops.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#define DEFAULT_SIZE (16UL * 1024 * 1024)
#define B2B_BURST_MAX 4096
#define B2B_BUCKET_CALLS 64
#define DEFAULT_WRITE_ITERS 10000
#define DEFAULT_READ_ITERS 100
#define COLD_FILL 0xa5

enum copy_kind {
	COPY_GDR_TO,
	COPY_MEMCPY_TO,
	COPY_LOOP_TO,
	COPY_CUMEMCPY_H2D,
	COPY_GDR_FROM,
	COPY_MEMCPY_FROM,
	COPY_LOOP_FROM,
	COPY_CUMEMCPY_D2H,
};

static const char *const copy_names[] = {
	[COPY_GDR_TO] = "gdr_copy_to_mapping",
	[COPY_MEMCPY_TO] = "memcpy_to_mapping",
	[COPY_LOOP_TO] = "stream_loop_to_mapping",
	[COPY_CUMEMCPY_H2D] = "cuMemcpy_H2D",
	[COPY_GDR_FROM] = "gdr_copy_from_mapping",
	[COPY_MEMCPY_FROM] = "memcpy_from_mapping",
	[COPY_LOOP_FROM] = "stream_loop_from_mapping",
	[COPY_CUMEMCPY_D2H] = "cuMemcpy_D2H",
};

enum time_mode { MODE_B2B = 1, MODE_SINGLE = 2, MODE_BOTH = 3 };

struct copylat_opts {
	size_t size;
	int dev_id;
	unsigned int write_iters;
	unsigned int read_iters;
	struct bench_alloc alloc;
	int map_flag;
	bool cumemcpy;
	bool cold;
	bool plain_memcpy;
	bool force_pcie;
	enum time_mode modes;
};

struct copylat_ctx {
	const struct copylat_opts *o;
	gdr_mh_t mh;
	unsigned char *map;	/* user-space pointer of the GPU buffer */
	CUdeviceptr dptr;
	unsigned char *src;	/* pinned host memory */
	unsigned char *dst;	/* pinned host memory */
	unsigned char *scratch;
	const gdr_info_t *info;
	double *bucket_us;
};

static void usage(const char *prog)
{
	printf("Usage: %s [-h] [-s size] [-d gpu] [-w iters] [-r iters] [-a fn] [-M type]\n"
	       "          [-m mode] [-c] [-C] [-p] [-F] [-j]\n"
	       "\n"
	       "Per-call latency of CPU copies to and from GPU memory through a gdrcopy mapping,\n"
	       "for sizes 1 B, 2 B, 4 B, ... up to the -s size.\n"
	       "\n"
	       "Options:\n"
	       "  -h          print this help text and exit\n"
	       "  -s size     largest copy, also the buffer size (default: %lu)\n"
	       "  -d gpu      GPU id (default: 0)\n"
	       "  -w iters    iterations per size towards the GPU (default: %d)\n"
	       "  -r iters    iterations per size from the GPU (default: %d)\n"
	       "  -a fn       GPU allocation function: " BENCH_ALLOC_CHOICES "\n"
	       "              (default: cuMemAlloc)\n"
	       "  -M type     mapping type to request: default, wc, cache or device (default: default)\n"
	       "  -m mode     b2b: calls back to back, as a polling loop issues them; single: each\n"
	       "              call after the previous one completed, a read's data used before\n"
	       "              the clock stops; both (default: b2b)\n"
	       "  -c          also time cuMemcpy H2D and D2H from pinned host memory (default: off)\n"
	       "  -C          cold cache: cuMemsetD8 the buffer before every copy, outside the\n"
	       "              timed region; needs a caching mapping (default: off)\n"
	       "  -p          also time plain memcpy and the simplest streaming-instruction loop\n"
	       "              (AVX-512 where the CPU has it) to/from the same mapping (default: off)\n"
	       BENCH_FORCE_PCIE_HELP
	       "  -%c          print one JSON object per measurement on stdout (JSON Lines);\n"
	       "              the human-readable text goes to stderr (default: off)\n"
	       "\n"
	       "Iteration counts above 100 are rounded up to a multiple of 100 (100 buckets).\n"
	       "Sizes accept K, M and G suffixes (powers of 1024).\n",
	       prog, DEFAULT_SIZE, DEFAULT_WRITE_ITERS, DEFAULT_READ_ITERS, BENCH_JSON_OPTION);
}

static void parse_args(int argc, char **argv, struct copylat_opts *o)
{
	int c;

	memset(o, 0, sizeof(*o));
	o->size = DEFAULT_SIZE;
	o->write_iters = DEFAULT_WRITE_ITERS;
	o->read_iters = DEFAULT_READ_ITERS;
	o->alloc = bench_parse_alloc("cuMemAlloc");
	o->map_flag = GDR_MAP_FLAG_DEFAULT;
	o->modes = MODE_B2B;

	while ((c = getopt(argc, argv, "hs:d:w:r:a:M:m:cCpFj")) != -1) {
		switch (c) {
		case 'h':
			usage(argv[0]);
			exit(EXIT_SUCCESS);
		case 's':
			o->size = bench_parse_size('s', optarg);
			break;
		case 'w':
			o->write_iters = bench_parse_uint('w', optarg);
			break;
		case 'r':
			o->read_iters = bench_parse_uint('r', optarg);
			break;
		case 'c':
			o->cumemcpy = true;
			break;
		case 'C':
			o->cold = true;
			break;
		case 'p':
			o->plain_memcpy = true;
			break;
		case 'F':
			o->force_pcie = true;
			break;
		case 'm':
			if (!strcmp(optarg, "b2b"))
				o->modes = MODE_B2B;
			else if (!strcmp(optarg, "single"))
				o->modes = MODE_SINGLE;
			else if (!strcmp(optarg, "both"))
				o->modes = MODE_BOTH;
			else
				bench_die("-m %s: expected b2b, single or both", optarg);
			break;
		default:
			if (!bench_common_option(c, optarg, &o->dev_id, &o->alloc, &o->map_flag))
				bench_die("unknown option; run %s -h for the list", argv[0]);
		}
	}
	if (optind < argc)
		bench_die("unexpected argument '%s'; run %s -h for the list", argv[optind], argv[0]);
	if (!o->size)
		bench_die("-s 0: the largest copy must be at least 1 byte");
}

/*
 * The simplest loop of streaming instructions a user would write: the widest
 * the CPU has for the 64-byte-aligned bulk (the mapping is), plain memcpy for
 * the rest, a store fence after writes.  The baseline the engine must match.
 */
#if defined(__x86_64__)
__attribute__((target("avx512f"))) static void loop_to_avx512(unsigned char *d, const unsigned char *s,
								size_t bulk)
{
	size_t i;

	for (i = 0; i < bulk; i += 64)
		_mm512_stream_si512((__m512i *)(d + i), _mm512_loadu_si512(s + i));
}

__attribute__((target("avx512f"))) static void loop_from_avx512(unsigned char *d, unsigned char *s,
								  size_t bulk)
{
	size_t i;

	for (i = 0; i < bulk; i += 64)
		_mm512_storeu_si512(d + i, _mm512_stream_load_si512(s + i));
}

__attribute__((target("sse4.1"))) static void loop_from_sse41(unsigned char *d, unsigned char *s, size_t bulk)
{
	size_t i;

	for (i = 0; i < bulk; i += 16)
		_mm_storeu_si128((__m128i *)(d + i), _mm_stream_load_si128((__m128i *)(s + i)));
}

static void loop_to_sse2(unsigned char *d, const unsigned char *s, size_t bulk)
{
	size_t i;

	for (i = 0; i < bulk; i += 16)
		_mm_stream_si128((__m128i *)(d + i), _mm_loadu_si128((const __m128i *)(s + i)));
}

/* CPUID says AVX-512F and the OS saves the ZMM state (XCR0); both, or SIGILL (seen under qemu TCG). */
static bool have_avx512(void)
{
	static int have = -1;

	if (have < 0) {
		unsigned int eax, ebx, ecx, edx;

		have = 0;
		if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_OSXSAVE) &&
		    __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ebx & bit_AVX512F)) {
			uint32_t lo, hi;

			__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
			have = (lo & 0xe6) == 0xe6;
		}
	}
	return have;
}

/* Cached: CPUID inside a timed loop would exit to the hypervisor in a VM. */
static bool have_sse41(void)
{
	static int have = -1;

	if (have < 0) {
		unsigned int eax, ebx, ecx, edx;

		have = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_SSE4_1);
	}
	return have;
}

static const char *stream_loop_desc(void)
{
	if (have_avx512())
		return "AVX-512 VMOVNTDQ / VMOVNTDQA, 64 B";
	return have_sse41() ? "SSE2 MOVNTDQ / SSE4.1 MOVNTDQA, 16 B" : "SSE2 MOVNTDQ, 16 B / memcpy (no SSE4.1)";
}

static void stream_loop_to(unsigned char *map, const unsigned char *src, size_t size)
{
	size_t bulk = size & ~(size_t)(have_avx512() ? 63 : 15);

	if (have_avx512())
		loop_to_avx512(map, src, bulk);
	else
		loop_to_sse2(map, src, bulk);
	memcpy(map + bulk, src + bulk, size - bulk);
	bench_store_fence();
}

static void stream_loop_from(unsigned char *dst, unsigned char *map, size_t size)
{
	size_t bulk = size & ~(size_t)(have_avx512() ? 63 : 15);

	if (have_avx512())
		loop_from_avx512(dst, map, bulk);
	else if (have_sse41())
		loop_from_sse41(dst, map, bulk);
	else
		bulk = 0;
	memcpy(dst + bulk, map + bulk, size - bulk);
}
#else
static const char *stream_loop_desc(void)
{
	return "memcpy (no streaming loop written for this architecture)";
}

static void stream_loop_to(unsigned char *map, const unsigned char *src, size_t size)
{
	memcpy(map, src, size);
	bench_store_fence();
}

static void stream_loop_from(unsigned char *dst, unsigned char *map, size_t size)
{
	memcpy(dst, map, size);
}
#endif

static void do_copy(const struct copylat_ctx *ctx, enum copy_kind kind, size_t size)
{
	int ret = 0;

	switch (kind) {
	case COPY_GDR_TO:
		ret = gdr_copy_to_mapping(ctx->mh, ctx->map, ctx->src, size);
		break;
	case COPY_MEMCPY_TO:
		memcpy(ctx->map, ctx->src, size);
		bench_store_fence();
		break;
	case COPY_LOOP_TO:
		stream_loop_to(ctx->map, ctx->src, size);
		break;
	case COPY_CUMEMCPY_H2D:
		BENCH_CU(cuMemcpyHtoD(ctx->dptr, ctx->src, size));
		break;
	case COPY_GDR_FROM:
		ret = gdr_copy_from_mapping(ctx->mh, ctx->dst, ctx->map, size);
		break;
	case COPY_MEMCPY_FROM:
		memcpy(ctx->dst, ctx->map, size);
		break;
	case COPY_LOOP_FROM:
		stream_loop_from(ctx->dst, ctx->map, size);
		break;
	case COPY_CUMEMCPY_D2H:
		BENCH_CU(cuMemcpyDtoH(ctx->dst, ctx->dptr, size));
		break;
	}
	if (ret)
		bench_die("%s of %zu bytes: %s", copy_names[kind], size, strerror(ret));
}

static bool is_to_gpu(enum copy_kind kind)
{
	return kind <= COPY_CUMEMCPY_H2D;
}

/*
 * Calls per bucket in b2b mode.  A bucket of a few small reads times a burst:
 * they all go out at once and the clock that ends the bucket (clock_gettime,
 * RDTSCP/LFENCE) waits for the last, so its mean is one round trip divided by
 * the calls, whatever rate a polling loop keeps (-r 400 made 4 calls a bucket,
 * hence 16/32 B reads "at 0.269 us", a 1.07 us round trip / 4, on an H200 where
 * a 500-call loop took 0.40-0.95: tools/h200/RESULTS.md).  So small copies
 * repeat the bucket's calls up to at least B2B_BUCKET_CALLS; large ones, each
 * many loads, are their own steady state.
 */
static unsigned int b2b_bucket_calls(const struct bench_buckets *plan, size_t size)
{
	unsigned int calls = plan->per_bucket;

	if (size > B2B_BURST_MAX)
		return calls;
	while (calls < B2B_BUCKET_CALLS)
		calls += plan->per_bucket;
	return calls;
}

/* Fill the per-bucket mean latencies for one size; returns the statistics. */
static struct bench_stats time_size(const struct copylat_ctx *ctx, enum copy_kind kind,
				    size_t size, const struct bench_buckets *plan, enum time_mode mode)
{
	bool cold = ctx->o->cold && kind != COPY_CUMEMCPY_H2D && kind != COPY_CUMEMCPY_D2H;
	unsigned int b, i;
	double t0;

	for (b = 0; b < plan->count; b++) {
		if (mode == MODE_SINGLE && !cold) {
			double sum = 0.0;

			for (i = 0; i < plan->per_bucket; i++) {
				bench_full_fence();
				t0 = bench_now_us();
				do_copy(ctx, kind, size);
				/* A read is done when its data can be used. */
				if (!is_to_gpu(kind))
					(void)*(volatile unsigned char *)&ctx->dst[size - 1];
				bench_full_fence();
				sum += bench_now_us() - t0;
			}
			ctx->bucket_us[b] = sum / plan->per_bucket;
		} else if (cold) {
			double sum = 0.0;

			for (i = 0; i < plan->per_bucket; i++) {
				/* Evict the CPU's cached copy; SYNC_MEMOPS makes it complete. */
				BENCH_CU(cuMemsetD8(ctx->dptr, COLD_FILL, size));
				BENCH_CU(cuCtxSynchronize());
				t0 = bench_now_us();
				do_copy(ctx, kind, size);
				sum += bench_now_us() - t0;
			}
			ctx->bucket_us[b] = sum / plan->per_bucket;
		} else {
			unsigned int calls = b2b_bucket_calls(plan, size);

			t0 = bench_now_us();
			for (i = 0; i < calls; i++)
				do_copy(ctx, kind, size);
			ctx->bucket_us[b] = (bench_now_us() - t0) / calls;
		}
	}
	return bench_stats(ctx->bucket_us, plan->count);
}

/* Check that the timed copies moved the right bytes. */
static void verify(const struct copylat_ctx *ctx, enum copy_kind kind, size_t size,
		   uint32_t gpu_seed)
{
	long bad;

	if (is_to_gpu(kind)) {
		BENCH_CU(cuMemcpyDtoH(ctx->scratch, ctx->dptr, size));
		if (memcmp(ctx->scratch, ctx->src, size))
			bench_die("%s, size %zu: GPU memory does not hold the bytes written "
				  "through the mapping; the mapping does not reach the pinned GPU "
				  "memory", copy_names[kind], size);
		return;
	}
	if (ctx->o->cold && kind != COPY_CUMEMCPY_D2H) {
		size_t i;

		for (i = 0; i < size; i++)
			if (ctx->dst[i] != COLD_FILL)
				bench_die("%s, size %zu: byte %zu read 0x%02x after cuMemsetD8 "
					  "stored 0x%02x: the CPU saw stale data", copy_names[kind],
					  size, i, ctx->dst[i], COLD_FILL);
		return;
	}
	bad = bench_check_pattern(ctx->dst, size, gpu_seed);
	if (bad >= 0)
		bench_die("%s, size %zu: byte %ld read back differs from GPU memory",
			  copy_names[kind], size, bad);
}

static void run_test(struct copylat_ctx *ctx, enum copy_kind kind,
		     const struct bench_buckets *planned, enum time_mode mode)
{
	const char *name = copy_names[kind];
	const char *mode_name = mode == MODE_SINGLE ? "single" : "b2b";
	const struct bench_buckets plan = *planned;
	const uint32_t gpu_seed = 0xc0ffee;
	size_t size;

	bench_say("\n%s num iters for each size: %u (%s)\n", name, plan.iters,
		  mode == MODE_SINGLE ? "single calls, each fenced off" : "calls back to back");
	bench_say("%-24s %12s %18s %18s %18s\n", "Test", "Size(B)", "Median Time(us)",
		  "Min. Time(us)", "Max. Time(us)");
	if (!is_to_gpu(kind)) {
		/* Known GPU contents for the reads to return. */
		bench_fill_pattern(ctx->scratch, ctx->o->size, gpu_seed);
		BENCH_CU(cuMemcpyHtoD(ctx->dptr, ctx->scratch, ctx->o->size));
		BENCH_CU(cuCtxSynchronize());
	}
	for (size = 1; size <= ctx->o->size; size <<= 1) {
		struct bench_record rec;
		struct bench_stats st;

		if (is_to_gpu(kind))
			bench_fill_pattern(ctx->src, size, (uint32_t)(size * 31 + kind));
		else
			memset(ctx->dst, 0, size);
		st = time_size(ctx, kind, size, &plan, mode);
		verify(ctx, kind, size, gpu_seed);

		bench_say("%-24s %12zu %18.4f %18.4f %18.4f\n", name, size, st.median, st.min, st.max);
		bench_record_begin(&rec, name);
		bench_record_str(&rec, "mode", mode_name);
		bench_record_u64(&rec, "size", size);
		bench_record_u64(&rec, "iters", plan.iters);
		bench_record_u64(&rec, "buckets", plan.count);
		/* As time_size: cold-cache calls are timed one by one, b2b ones in bursts of at least 64. */
		bench_record_u64(&rec, "calls_per_bucket",
				 mode == MODE_SINGLE || (ctx->o->cold && kind != COPY_CUMEMCPY_H2D &&
							 kind != COPY_CUMEMCPY_D2H)
				 ? plan.per_bucket : b2b_bucket_calls(&plan, size));
		bench_record_double(&rec, "median_us", st.median);
		bench_record_double(&rec, "min_us", st.min);
		bench_record_double(&rec, "max_us", st.max);
		bench_record_str(&rec, "mapping_type",
				 bench_mapping_type_name(ctx->info->mapping_type));
		bench_record_str(&rec, "alloc_fn", ctx->o->alloc.name);
		bench_record_u64(&rec, "cold_cache", ctx->o->cold &&
				 kind != COPY_CUMEMCPY_H2D && kind != COPY_CUMEMCPY_D2H);
		bench_record_u64(&rec, "force_pcie", ctx->o->force_pcie);
		bench_record_u64(&rec, "gpu", (uint64_t)ctx->o->dev_id);
		bench_record_end(&rec);
	}
}

int main(int argc, char **argv)
{
	struct bench_locality loc;
	struct bench_buckets write_plan, read_plan;
	struct copylat_opts o;
	struct copylat_ctx ctx;
	struct bench_gpu_buf gbuf;
	void *map_ptr = NULL;
	void *src = NULL, *dst = NULL;
	size_t rounded;
	gdr_info_t info;
	enum time_mode mode;
	CUdevice dev;
	gdr_t g;
	int ret;

	bench_init("gdrcopy_copylat", argc, argv);
	parse_args(argc, argv, &o);
	write_plan = bench_plan_buckets(o.write_iters, "-w");
	read_plan = bench_plan_buckets(o.read_iters, "-r");

	dev = bench_select_gpu(o.dev_id, true);
	bench_get_locality(dev, &loc);
	bench_print_locality(&loc);

	rounded = (o.size + GPU_PAGE_SIZE - 1) & GPU_PAGE_MASK;
	g = bench_gdr_open(&o.alloc);
	bench_gpu_alloc(&gbuf, dev, rounded, &o.alloc, g);
	bench_say("device ptr: 0x%llx\n", (unsigned long long)gbuf.ptr);
	bench_say("allocated size: %zu\n", rounded);
	bench_say("gpu alloc fn: %s\n", o.alloc.name);
	bench_print_force_pcie(o.force_pcie);
	bench_say("\n");

	/* Pinned, so the cuMemcpy rows show cuMemcpy at its best. */
	BENCH_CU(cuMemAllocHost(&src, rounded));
	BENCH_CU(cuMemAllocHost(&dst, rounded));
	memset(&ctx, 0, sizeof(ctx));
	ctx.scratch = malloc(rounded);
	ctx.bucket_us = calloc(BENCH_MAX_BUCKETS, sizeof(double));
	if (!ctx.scratch || !ctx.bucket_us)
		bench_die("cannot allocate %zu bytes of host memory", rounded);
	bench_fill_pattern(ctx.scratch, rounded, 0);
	BENCH_CU(cuMemcpyHtoD(gbuf.ptr, ctx.scratch, rounded));
	BENCH_CU(cuCtxSynchronize());

	bench_pin(g, gbuf.ptr, rounded, o.force_pcie, &ctx.mh);
	ret = gdr_map_v2(g, ctx.mh, &map_ptr, rounded, o.map_flag);
	if (ret)
		bench_die("gdr_map_v2 with -M %s: %s%s", map_flags_name(o.map_flag),
			  strerror(ret),
			  o.map_flag != GDR_MAP_FLAG_DEFAULT ?
			  " (this platform may not offer that mapping type; try -M default)" : "");
	bench_say("map_d_ptr: %p\n", map_ptr);
	ret = gdr_get_info(g, ctx.mh, &info);
	if (ret)
		bench_die("gdr_get_info: %s", strerror(ret));
	bench_print_info(&info);
	bench_say("page offset: %lld\n", (long long)(gbuf.ptr - info.va));
	ctx.map = (unsigned char *)map_ptr + (gbuf.ptr - info.va);
	bench_say("user-space pointer: %p\n", (void *)ctx.map);
	bench_say("use cold cache: %s\n", o.cold ? "yes" : "no");
	bench_print_fences(&info, true);
	bench_say("\n");

	if (o.cold && info.mapping_type != GDR_MAPPING_TYPE_CACHING)
		bench_die("-C needs a caching mapping, but this one is %s; cold-cache numbers "
			  "only mean something where the CPU caches GPU memory (coherent "
			  "platforms, -M cache)", bench_mapping_type_name(info.mapping_type));

	ctx.o = &o;
	ctx.dptr = gbuf.ptr;
	ctx.src = src;
	ctx.dst = dst;
	ctx.info = &info;

	bench_warn("Measuring the API invocation overhead as observed by the CPU. Data might "
		   "not be ordered all the way to the GPU internal visibility.");

	if (o.plain_memcpy)
		bench_say("stream loop: %s\n", stream_loop_desc());
	for (mode = MODE_B2B; mode <= MODE_SINGLE; mode <<= 1) {
		if (!(o.modes & mode))
			continue;
		run_test(&ctx, COPY_GDR_TO, &write_plan, mode);
		if (o.plain_memcpy) {
			run_test(&ctx, COPY_MEMCPY_TO, &write_plan, mode);
			run_test(&ctx, COPY_LOOP_TO, &write_plan, mode);
		}
		if (o.cumemcpy)
			run_test(&ctx, COPY_CUMEMCPY_H2D, &write_plan, mode);
		run_test(&ctx, COPY_GDR_FROM, &read_plan, mode);
		if (o.plain_memcpy) {
			run_test(&ctx, COPY_MEMCPY_FROM, &read_plan, mode);
			run_test(&ctx, COPY_LOOP_FROM, &read_plan, mode);
		}
		if (o.cumemcpy)
			run_test(&ctx, COPY_CUMEMCPY_D2H, &read_plan, mode);
	}

	bench_say("\nunmapping buffer\n");
	ret = gdr_unmap(g, ctx.mh, map_ptr, rounded);
	if (ret)
		bench_die("gdr_unmap: %s", strerror(ret));
	bench_say("unpinning buffer\n");
	ret = gdr_unpin_buffer(g, ctx.mh);
	if (ret)
		bench_die("gdr_unpin_buffer: %s", strerror(ret));
	bench_gpu_free(&gbuf);
	bench_say("closing gdrdrv\n");
	ret = gdr_close(g);
	if (ret)
		bench_die("gdr_close: %s", strerror(ret));

	BENCH_CU(cuMemFreeHost(src));
	BENCH_CU(cuMemFreeHost(dst));
	free(ctx.scratch);
	free(ctx.bucket_us);
	return EXIT_SUCCESS;
}
