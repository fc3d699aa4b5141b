// SPDX-License-Identifier: MIT
/*
 * gdrcopy_copybw: bandwidth of gdr_copy_to_mapping (host -> GPU memory) and
 * gdr_copy_from_mapping (GPU memory -> host) through a gdrcopy mapping.
 * With -p it also measures plain memcpy on the same mapping, the thing users
 * would otherwise write.  Every copy is checked against cuMemcpy once, so a
 * broken mapping fails instead of reporting a bandwidth.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

#define DEFAULT_SIZE (128UL * 1024)
#define DEFAULT_WRITE_ITERS 10000
#define DEFAULT_READ_ITERS 100

struct copybw_opts {
	size_t size;
	size_t copy_size;	/* 0: same as size */
	size_t offset;
	bool sweep;
	int dev_id;
	unsigned int write_iters;
	unsigned int read_iters;
	struct bench_alloc alloc;
	int map_flag;
	bool plain_memcpy;
	bool force_pcie;
	struct bench_buckets write_plan, read_plan;
};

static void usage(const char *prog)
{
	printf("Usage: %s [-h] [-s size] [-c copy_size] [-o offset] [-l] [-d gpu] [-w iters]\n"
	       "          [-r iters] [-a fn] [-M type] [-p] [-F] [-j]\n"
	       "\n"
	       "Bandwidth of CPU copies to and from GPU memory through a gdrcopy mapping.\n"
	       "\n"
	       "Options:\n"
	       "  -h          print this help text and exit\n"
	       "  -s size     bytes of GPU memory to allocate, pin and map (default: %lu)\n"
	       "  -c size     bytes per copy; with -l the largest copy (default: the -s size)\n"
	       "  -o offset   offset of every copy into the buffer, a multiple of 4 (default: 0)\n"
	       "  -l          sweep copy sizes 1, 2, 4, ... up to the -c size (default: off)\n"
	       "  -d gpu      GPU id (default: 0)\n"
	       "  -w iters    write iterations per size (default: %d)\n"
	       "  -r iters    read iterations per size (default: %d)\n"
	       "  -a fn       GPU allocation function: " BENCH_ALLOC_CHOICES "\n"
	       "              (default: cuMemAlloc)\n"
	       "  -M type     mapping type to request: default, wc, cache or device (default: default)\n"
	       "  -p          also measure plain memcpy to/from the same mapping (default: off)\n"
	       BENCH_FORCE_PCIE_HELP
	       "  -%c          print one JSON object per measurement on stdout (JSON Lines);\n"
	       "              the human-readable text goes to stderr (default: off)\n"
	       "\n"
	       "Sizes accept K, M and G suffixes (powers of 1024). BW is in MiB/s: the median and\n"
	       "the minimum over up to 100 buckets of iterations (counts above 100 are rounded up\n"
	       "to a multiple of 100).\n",
	       prog, DEFAULT_SIZE, DEFAULT_WRITE_ITERS, DEFAULT_READ_ITERS, BENCH_JSON_OPTION);
}

static void parse_args(int argc, char **argv, struct copybw_opts *o)
{
	int c;

	o->size = DEFAULT_SIZE;
	o->copy_size = 0;
	o->offset = 0;
	o->sweep = false;
	o->dev_id = 0;
	o->write_iters = DEFAULT_WRITE_ITERS;
	o->read_iters = DEFAULT_READ_ITERS;
	o->alloc = bench_parse_alloc("cuMemAlloc");
	o->map_flag = GDR_MAP_FLAG_DEFAULT;
	o->plain_memcpy = false;
	o->force_pcie = false;

	while ((c = getopt(argc, argv, "hs:c:o:ld:w:r:a:M:pFj")) != -1) {
		switch (c) {
		case 'h':
			usage(argv[0]);
			exit(EXIT_SUCCESS);
		case 's':
			o->size = bench_parse_size('s', optarg);
			break;
		case 'c':
			o->copy_size = bench_parse_size('c', optarg);
			break;
		case 'o':
			o->offset = bench_parse_size('o', optarg);
			break;
		case 'l':
			o->sweep = true;
			break;
		case 'w':
			o->write_iters = bench_parse_uint('w', optarg);
			break;
		case 'r':
			o->read_iters = bench_parse_uint('r', optarg);
			break;
		case 'p':
			o->plain_memcpy = true;
			break;
		case 'F':
			o->force_pcie = true;
			break;
		default:
			if (!bench_common_option(c, optarg, &o->dev_id, &o->alloc, &o->map_flag))
				bench_die("unknown option; run %s -h for the list", argv[0]);
		}
	}
	if (optind < argc)
		bench_die("unexpected argument '%s'; run %s -h for the list", argv[optind], argv[0]);
	if (!o->size)
		bench_die("-s 0: the buffer needs at least 1 byte");
	if (!o->copy_size)
		o->copy_size = o->size;
	if (o->offset % 4)
		bench_die("-o %zu: the offset must be a multiple of 4", o->offset);
	if (o->offset >= o->size)
		bench_die("-o %zu: the offset must be smaller than the -s size (%zu)", o->offset,
			  o->size);
	if (!o->sweep && o->copy_size + o->offset > o->size)
		bench_die("-c %zu with -o %zu runs past the end of the %zu-byte buffer; "
			  "raise -s or lower -c/-o", o->copy_size, o->offset, o->size);
	if (!o->write_iters || !o->read_iters)
		bench_die("-w and -r must be at least 1");
	o->write_plan = bench_plan_buckets(o->write_iters, "-w");
	o->read_plan = bench_plan_buckets(o->read_iters, "-r");
}

/* MiB/s for iters copies of size bytes taking elapsed_us. */
static double bandwidth(size_t size, unsigned int iters, double elapsed_us)
{
	if (elapsed_us <= 0.0)
		elapsed_us = 1e-3;
	return (double)size * iters / (1024.0 * 1024.0) / (elapsed_us / 1e6);
}

/* Time of each bucket of a plan, in microseconds, measured by the caller's loop. */
struct bw_sample {
	double total_us;
	double bucket_us[BENCH_MAX_BUCKETS];
};

/*
 * "<label>: median XMB/s, min YMB/s" over the buckets, as NVIDIA's next
 * release prints it; the JSON record keeps bw_mib_s (all iterations
 * together) and adds the two.
 */
static void report(const char *test, const char *label, size_t size, size_t offset,
		   const struct bench_buckets *plan, struct bw_sample *t, const gdr_info_t *info,
		   const struct copybw_opts *o)
{
	double bw = bandwidth(size, plan->iters, t->total_us), bucket_bw[BENCH_MAX_BUCKETS];
	struct bench_record rec;
	struct bench_stats st;
	unsigned int i;

	for (i = 0; i < plan->count; i++)
		bucket_bw[i] = bandwidth(size, plan->per_bucket, t->bucket_us[i]);
	st = bench_stats(bucket_bw, plan->count);
	bench_say("%s: median %gMB/s, min %gMB/s\n", label, st.median, st.min);
	bench_record_begin(&rec, test);
	bench_record_u64(&rec, "size", size);
	bench_record_u64(&rec, "offset", offset);
	bench_record_u64(&rec, "iters", plan->iters);
	bench_record_double(&rec, "time_us", t->total_us);
	bench_record_double(&rec, "bw_mib_s", bw);
	bench_record_double(&rec, "bw_median_mib_s", st.median);
	bench_record_double(&rec, "bw_min_mib_s", st.min);
	bench_record_str(&rec, "mapping_type", bench_mapping_type_name(info->mapping_type));
	bench_record_str(&rec, "alloc_fn", o->alloc.name);
	bench_record_u64(&rec, "force_pcie", o->force_pcie);
	bench_record_u64(&rec, "gpu", (uint64_t)o->dev_id);
	bench_record_end(&rec);
}

/* GPU memory must now hold the first size bytes of src at offset. */
static void check_gpu(CUdeviceptr dptr, const unsigned char *src, unsigned char *scratch,
		      size_t size, const char *what)
{
	size_t i;

	BENCH_CU(cuMemcpyDtoH(scratch, dptr, size));
	for (i = 0; i < size; i++)
		if (scratch[i] != src[i])
			bench_die("%s: GPU memory differs from what was written at byte %zu "
				  "(0x%02x, expected 0x%02x): the mapping does not reach the GPU "
				  "memory it was pinned from", what, i, scratch[i], src[i]);
}

static void check_host(const unsigned char *got, const unsigned char *want, size_t size,
		       const char *what)
{
	size_t i;

	for (i = 0; i < size; i++)
		if (got[i] != want[i])
			bench_die("%s: read back 0x%02x at byte %zu, GPU memory holds 0x%02x",
				  what, got[i], i, want[i]);
}

enum copy_op { OP_COPY_TO, OP_COPY_FROM, OP_MEMCPY_TO, OP_MEMCPY_FROM };

/* One copy; exits on a library error. */
static void copy_once(enum copy_op op, gdr_mh_t mh, unsigned char *map_at, unsigned char *host, size_t size)
{
	int ret = 0;

	switch (op) {
	case OP_COPY_TO:
		ret = gdr_copy_to_mapping(mh, map_at, host, size);
		break;
	case OP_COPY_FROM:
		ret = gdr_copy_from_mapping(mh, host, map_at, size);
		break;
	case OP_MEMCPY_TO:
		memcpy(map_at, host, size);
		bench_store_fence();
		break;
	case OP_MEMCPY_FROM:
		memcpy(host, map_at, size);
		break;
	}
	if (ret)
		bench_die("%s: %s", op == OP_COPY_TO ? "gdr_copy_to_mapping" : "gdr_copy_from_mapping",
			  strerror(ret));
}

/* plan->iters copies, timed per bucket. */
static void time_copies(enum copy_op op, gdr_mh_t mh, unsigned char *map_at, unsigned char *host, size_t size,
			const struct bench_buckets *plan, struct bw_sample *t)
{
	unsigned int b, i;
	double start = bench_now_us(), t0 = start, t1;

	for (b = 0; b < plan->count; b++) {
		for (i = 0; i < plan->per_bucket; i++)
			copy_once(op, mh, map_at, host, size);
		t1 = bench_now_us();
		t->bucket_us[b] = t1 - t0;
		t0 = t1;
	}
	t->total_us = t0 - start;
}

static void run_size(gdr_mh_t mh, void *map_ptr, CUdeviceptr dptr, unsigned char *src,
		     unsigned char *dst, size_t size, const gdr_info_t *info,
		     const struct copybw_opts *o)
{
	unsigned char *map_at = (unsigned char *)map_ptr + o->offset;
	unsigned char *src_at = src + o->offset;
	unsigned char *dst_at = dst + o->offset;
	struct bw_sample t;

	/* Each size writes a new pattern so stale data cannot pass the check. */
	bench_fill_pattern(src, o->size, (uint32_t)size);

	bench_say("writing test, size=%zu offset=%zu num_iters=%u\n", size, o->offset,
		  o->write_plan.iters);
	time_copies(OP_COPY_TO, mh, map_at, src_at, size, &o->write_plan, &t);
	report("gdr_copy_to_mapping", "write BW", size, o->offset, &o->write_plan, &t, info, o);
	check_gpu(dptr + o->offset, src_at, dst, size, "gdr_copy_to_mapping");

	if (o->plain_memcpy) {
		bench_fill_pattern(src, o->size, (uint32_t)size ^ 0x5a5a5a5au);
		time_copies(OP_MEMCPY_TO, mh, map_at, src_at, size, &o->write_plan, &t);
		report("memcpy_to_mapping", "memcpy_to_mapping BW", size, o->offset, &o->write_plan, &t,
		       info, o);
		check_gpu(dptr + o->offset, src_at, dst, size, "memcpy_to_mapping");
	}

	/* GPU memory now holds src_at; every read must return it. */
	bench_say("reading test, size=%zu offset=%zu num_iters=%u\n", size, o->offset,
		  o->read_plan.iters);
	memset(dst_at, 0, size);
	time_copies(OP_COPY_FROM, mh, map_at, dst_at, size, &o->read_plan, &t);
	report("gdr_copy_from_mapping", "read BW", size, o->offset, &o->read_plan, &t, info, o);
	check_host(dst_at, src_at, size, "gdr_copy_from_mapping");

	if (o->plain_memcpy) {
		memset(dst_at, 0, size);
		time_copies(OP_MEMCPY_FROM, mh, map_at, dst_at, size, &o->read_plan, &t);
		report("memcpy_from_mapping", "memcpy_from_mapping BW", size, o->offset, &o->read_plan,
		       &t, info, o);
		check_host(dst_at, src_at, size, "memcpy_from_mapping");
	}
}

int main(int argc, char **argv)
{
	struct bench_locality loc;
	struct copybw_opts o;
	struct bench_gpu_buf gbuf;
	unsigned char *src, *dst;
	size_t rounded, size;
	void *map_ptr = NULL;
	unsigned char *user_ptr;
	gdr_info_t info;
	CUdevice dev;
	gdr_mh_t mh;
	gdr_t g;
	int ret;

	bench_init("gdrcopy_copybw", argc, argv);
	parse_args(argc, argv, &o);

	dev = bench_select_gpu(o.dev_id, true);
	bench_get_locality(dev, &loc);
	bench_print_locality(&loc);

	rounded = (o.size + GPU_PAGE_SIZE - 1) & GPU_PAGE_MASK;
	bench_say("testing size: %zu\n", o.size);
	bench_say("rounded size: %zu\n", rounded);
	bench_say("gpu alloc fn: %s\n", o.alloc.name);
	g = bench_gdr_open(&o.alloc);
	bench_gpu_alloc(&gbuf, dev, rounded, &o.alloc, g);
	bench_say("device ptr: 0x%llx\n", (unsigned long long)gbuf.ptr);

	src = aligned_alloc(64, rounded);
	dst = aligned_alloc(64, rounded);
	if (!src || !dst)
		bench_die("cannot allocate 2 x %zu bytes of host memory", rounded);
	/* Start from known GPU contents. */
	bench_fill_pattern(src, rounded, 0);
	BENCH_CU(cuMemcpyHtoD(gbuf.ptr, src, rounded));
	BENCH_CU(cuCtxSynchronize());

	bench_print_force_pcie(o.force_pcie);
	bench_pin(g, gbuf.ptr, rounded, o.force_pcie, &mh);
	ret = gdr_map_v2(g, mh, &map_ptr, rounded, o.map_flag);
	if (ret)
		bench_die("gdr_map_v2 with -M %s: %s%s", map_flags_name(o.map_flag),
			  strerror(ret),
			  o.map_flag != GDR_MAP_FLAG_DEFAULT ?
			  " (this platform may not offer that mapping type; try -M default)" : "");
	bench_say("map_d_ptr: %p\n", map_ptr);
	ret = gdr_get_info(g, mh, &info);
	if (ret)
		bench_die("gdr_get_info: %s", strerror(ret));
	bench_print_info(&info);
	bench_say("page offset: %lld\n", (long long)(gbuf.ptr - info.va));
	user_ptr = (unsigned char *)map_ptr + (gbuf.ptr - info.va);
	bench_say("user-space pointer: %p\n", (void *)user_ptr);
	bench_print_fences(&info, false);

	if (o.sweep) {
		for (size = 1; size <= o.copy_size && size + o.offset <= o.size; size <<= 1)
			run_size(mh, user_ptr, gbuf.ptr, src, dst, size, &info, &o);
	} else {
		run_size(mh, user_ptr, gbuf.ptr, src, dst, o.copy_size, &info, &o);
	}

	bench_say("unmapping buffer\n");
	ret = gdr_unmap(g, mh, map_ptr, rounded);
	if (ret)
		bench_die("gdr_unmap: %s", strerror(ret));
	bench_say("unpinning buffer\n");
	ret = gdr_unpin_buffer(g, mh);
	if (ret)
		bench_die("gdr_unpin_buffer: %s", strerror(ret));
	bench_gpu_free(&gbuf);
	bench_say("closing gdrdrv\n");
	ret = gdr_close(g);
	if (ret)
		bench_die("gdr_close: %s", strerror(ret));

	free(src);
	free(dst);
	return EXIT_SUCCESS;
}
