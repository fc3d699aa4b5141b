// SPDX-License-Identifier: MIT
/*
 * gdrcopy_pplat's line modes: polling GPU memory as a poller lives it.
 *
 * -L (ping-pong through a line): the CPU writes a sequence number into GPU
 * memory with gdr_copy_to_mapping; a one-warp GPU kernel answers by storing
 * it into every 4-byte word of the shape's answer: a whole line of 16, 32,
 * 64 or 128 bytes or a 256 B entry, or the first or last 64-byte line of a
 * 128 or 256 B entry (one warp-wide store per 128 bytes); the CPU polls the
 * whole entry with gdr_copy_from_mapping until every word of the answer
 * holds the number.  Per round and shape: the round trip per call (median
 * and minimum of the bucket means), polls per round trip, and polls that
 * saw a 64-byte line of the answer half-written.
 *
 * -W (torn reads): a one-warp GPU kernel rewrites the answer every -w ns of
 * %globaltimer (every word the same counter) while the CPU reads the entry
 * back to back with gdr_copy_from_mapping; a read with a 64-byte line whose
 * words differ saw two writes in one line (torn).  Per round and shape: the
 * torn fraction and the distinct values seen per microsecond.
 *
 * Every size of both modes runs once per round, the rounds one after the
 * other (-R), so a disturbance of the machine lands in one round, not one
 * size; then the median over rounds with the lowest and highest round.
 * Protocol and layout: pplat_protocol.h; kernels: pplat_line_ptx.h.
 */
#include <stdlib.h>
#include <string.h>

#include "pplat_line.h"
#include "pplat_line_ptx.h"

#define TIMEOUT_CHECK_POLLS 1024
#define WARM_TRIPS 200	/* untimed round trips before each measurement (at most -t) */

struct line_ctx {
	const struct pplat_line_opts *o;
	const struct pplat_line_setup *s;
	gdr_mh_t mh;
	unsigned char *map;	/* the CPU's pointer to the buffer */
	CUdeviceptr dev;	/* the GPU's */
	CUfunction responder, writer;
	CUstream stream;
	const char *mapping_type;
};

/* Per size, the rounds' figures (rounds are at most PPLAT_LINE_MAX_ROUNDS). */
#define PPLAT_LINE_MAX_ROUNDS 100
struct line_figures {
	double median_us[PPLAT_LINE_MAX_ROUNDS];
	double polls_per_trip[PPLAT_LINE_MAX_ROUNDS];
	double torn_fraction[PPLAT_LINE_MAX_ROUNDS];
	double values_per_us[PPLAT_LINE_MAX_ROUNDS];
	double us_per_read[PPLAT_LINE_MAX_ROUNDS];
};

const struct pplat_line_shape pplat_line_shapes[PPLAT_LINE_SIZES] = {
	{ "16", 16, 0, 16 },	      { "32", 32, 0, 32 },	   { "64", 64, 0, 64 },
	{ "128", 128, 0, 128 },	      { "128/first", 128, 0, 64 }, { "128/last", 128, 64, 64 },
	{ "256", 256, 0, 256 },	      { "256/first", 256, 0, 64 }, { "256/last", 256, 192, 64 },
};

static const struct pplat_line_shape *shape_of(unsigned int k)
{
	return &pplat_line_shapes[k];
}

unsigned int pplat_line_parse_sizes(char opt, const char *arg)
{
	unsigned int mask = 0, k;
	const char *p = arg;

	if (!strcmp(arg, "all"))
		return PPLAT_LINE_WHOLE_MASK;
	if (!strcmp(arg, "shapes"))
		return (1U << PPLAT_LINE_SIZES) - 1;
	while (*p) {
		size_t len = strcspn(p, ",");

		for (k = 0; k < PPLAT_LINE_SIZES; k++)
			if (len == strlen(shape_of(k)->name) && !strncmp(p, shape_of(k)->name, len))
				break;
		if (k == PPLAT_LINE_SIZES)
			bench_die("-%c %s: expected shapes among 16, 32, 64, 128, 256, 128/first, 128/last, "
				  "256/first and 256/last, separated by commas (e.g. -%c 16,128/first), or all "
				  "(16-128) or shapes (every one)", opt, arg, opt);
		mask |= 1U << k;
		p += len;
		if (*p)
			p++;
	}
	if (!mask)
		bench_die("-%c: no shape given; e.g. -%c 16,32,64,128", opt, opt);
	return mask;
}

const char *pplat_line_ptx_text(void)
{
	return pplat_line_ptx;
}

static void store_word(const struct line_ctx *c, size_t offset, uint32_t value)
{
	int ret = gdr_copy_to_mapping(c->mh, c->map + offset, &value, sizeof(value));

	if (ret)
		bench_die("gdr_copy_to_mapping of the word at offset %zu: %s", offset, strerror(ret));
}

static void fill_line(const struct line_ctx *c, unsigned char byte)
{
	unsigned char line[PPLAT_LINE_MAX];
	int ret;

	memset(line, byte, sizeof(line));
	ret = gdr_copy_to_mapping(c->mh, c->map + PPLAT_LINE_OFFSET, line, sizeof(line));
	if (ret)
		bench_die("gdr_copy_to_mapping of the line: %s", strerror(ret));
}

static void read_line(const struct line_ctx *c, uint32_t *words, size_t n)
{
	int ret = gdr_copy_from_mapping(c->mh, words, c->map + PPLAT_LINE_OFFSET, n);

	if (ret)
		bench_die("gdr_copy_from_mapping of the line: %s", strerror(ret));
}

/*
 * Whether all words of the shape's answer in the entry read are equal;
 * *value is then that value.  *torn: a 64-byte line of the answer (or the
 * whole answer, when shorter) holds two values, i.e. the read saw it
 * half-written (not: its lines hold different values, each line one).
 */
static bool line_whole(const struct pplat_line_shape *sh, const uint32_t *entry, uint32_t *value, bool *torn)
{
	const uint32_t *w = entry + sh->answer / 4;
	size_t i, words = sh->answer_len / 4, line_words = words < 16 ? words : 16;
	bool whole = true;

	*torn = false;
	for (i = 0; i < words; i++) {
		if (w[i] != w[i - i % line_words]) {
			*torn = true;
			return false;
		}
	}
	for (i = line_words; i < words; i += line_words)
		whole = whole && w[i] == w[0];
	*value = w[0];
	return whole;
}

static void timed_out(const struct line_ctx *c, const char *waiting)
{
	const char *name = "unknown";

	cuGetErrorName(cuStreamQuery(c->stream), &name);
	fflush(stdout);
	fprintf(stderr, "ERROR: TIMEOUT!!!\n");
	fprintf(stderr, "Gave up after %u s waiting for %s; the kernel's stream reports %s. Raise -u "
		"if the GPU is just slow.\n", c->s->timeout_s, waiting, name);
	exit(EXIT_FAILURE);
}

static void check_time(const struct line_ctx *c, double since_us, const char *waiting)
{
	if (c->s->timeout_s && bench_now_us() - since_us > c->s->timeout_s * 1e6)
		timed_out(c, waiting);
}

static void wait_kernel(const struct line_ctx *c, const char *which)
{
	double t0 = bench_now_us();
	CUresult res;

	while ((res = cuStreamQuery(c->stream)) == CUDA_ERROR_NOT_READY)
		check_time(c, t0, which);
	if (res != CUDA_SUCCESS) {
		const char *name = "unknown";

		cuGetErrorName(res, &name);
		bench_die("%s failed: %s", which, name);
	}
}

/* One round trip: write seq, poll the entry until every word of the answer holds it. Counts polls and torn ones. */
static void round_trip(const struct line_ctx *c, const struct pplat_line_shape *sh, uint32_t seq, uint64_t *polls,
		       uint64_t *torn)
{
	uint32_t words[PPLAT_LINE_MAX / 4], value;
	unsigned int spins = 0;
	double started = 0;
	bool half;

	store_word(c, PPLAT_LINE_SEQ_OFFSET, seq);
	for (;;) {
		read_line(c, words, sh->size);
		++*polls;
		if (!line_whole(sh, words, &value, &half))
			*torn += half;
		else if (value == seq)
			return;
		if (++spins == TIMEOUT_CHECK_POLLS) {
			/* The clock is read only in slow round trips, never in the timed fast ones. */
			if (started == 0)
				started = bench_now_us();
			check_time(c, started, "the GPU's answer in the line");
			spins = 0;
		}
	}
}

static void run_pingpong(const struct line_ctx *c, unsigned int k, unsigned int round,
			 struct line_figures *fig)
{
	const struct bench_buckets *plan = &c->s->plan;
	const struct pplat_line_shape *sh = shape_of(k);
	double bucket_us[BENCH_MAX_BUCKETS];
	uint64_t polls = 0, torn = 0, warm_polls = 0, warm_torn = 0;
	uint32_t words = sh->answer_len / 4, seq = 0;
	CUdeviceptr seq_dev = c->dev + PPLAT_LINE_SEQ_OFFSET, line_dev = c->dev + PPLAT_LINE_OFFSET + sh->answer;
	void *params[] = { &seq_dev, &line_dev, &words };
	struct bench_record rec;
	struct bench_stats st;
	unsigned int b, t;

	store_word(c, PPLAT_LINE_SEQ_OFFSET, 0);
	fill_line(c, 0xff);	/* 0xffffffff: never a sequence number the CPU waits for */
	BENCH_CU(cuLaunchKernel(c->responder, 1, 1, 1, PPLAT_LINE_WARP, 1, 1, 0, c->stream, params, NULL));
	for (t = 0; t < WARM_TRIPS && t < plan->iters; t++)
		round_trip(c, sh, ++seq, &warm_polls, &warm_torn);
	for (b = 0; b < plan->count; b++) {
		double t0 = bench_now_us();

		for (t = 0; t < plan->per_bucket; t++)
			round_trip(c, sh, ++seq, &polls, &torn);
		bucket_us[b] = (bench_now_us() - t0) / plan->per_bucket;
	}
	store_word(c, PPLAT_LINE_SEQ_OFFSET, PPLAT_LINE_STOP_SEQ);
	wait_kernel(c, "the line responder kernel");

	st = bench_stats(bucket_us, plan->count);
	fig->median_us[round - 1] = st.median;
	fig->polls_per_trip[round - 1] = (double)polls / plan->iters;
	bench_record_begin(&rec, "line_pingpong");
	bench_record_u64(&rec, "round", round);
	bench_record_u64(&rec, "size", sh->size);
	bench_record_str(&rec, "shape", sh->name);
	bench_record_str(&rec, "poll", "gdr_copy_from_mapping");
	bench_record_u64(&rec, "iters", plan->iters);
	bench_record_u64(&rec, "buckets", plan->count);
	bench_record_double(&rec, "median_us", st.median);
	bench_record_double(&rec, "min_us", st.min);
	bench_record_double(&rec, "polls_per_trip", (double)polls / plan->iters);
	bench_record_u64(&rec, "torn_polls", torn);
	bench_record_str(&rec, "mapping_type", c->mapping_type);
	bench_record_str(&rec, "alloc_fn", c->s->alloc->name);
	bench_record_u64(&rec, "gpu", (uint64_t)c->s->dev_id);
	bench_record_end(&rec);
}

static void run_torn(const struct line_ctx *c, unsigned int k, unsigned int round, struct line_figures *fig)
{
	const struct pplat_line_shape *sh = shape_of(k);
	uint32_t got[PPLAT_LINE_MAX / 4], value, last, words = sh->answer_len / 4;
	uint64_t torn = 0, changes = 0, writes = 0, period = c->o->period_ns;
	CUdeviceptr stop_dev = c->dev + PPLAT_LINE_STOP_OFFSET, line_dev = c->dev + PPLAT_LINE_OFFSET + sh->answer;
	CUdeviceptr writes_dev = c->dev + PPLAT_LINE_WRITES_OFFSET;
	void *params[] = { &stop_dev, &line_dev, &words, &period, &writes_dev };
	struct bench_record rec;
	double t0, elapsed;
	unsigned int r;
	bool half;

	store_word(c, PPLAT_LINE_STOP_OFFSET, 0);
	fill_line(c, 0);
	BENCH_CU(cuLaunchKernel(c->writer, 1, 1, 1, PPLAT_LINE_WARP, 1, 1, 0, c->stream, params, NULL));
	/* Count from the writer's first whole write on. */
	t0 = bench_now_us();
	do {
		read_line(c, got, sh->size);
		check_time(c, t0, "the GPU writer's first write");
	} while (!line_whole(sh, got, &value, &half) || value == 0);
	last = value;
	t0 = bench_now_us();
	for (r = 0; r < c->o->reads; r++) {
		read_line(c, got, sh->size);
		if (!line_whole(sh, got, &value, &half))
			torn += half;
		else if (value != last)
			changes++, last = value;
	}
	elapsed = bench_now_us() - t0;
	store_word(c, PPLAT_LINE_STOP_OFFSET, 1);
	wait_kernel(c, "the line writer kernel");
	BENCH_CU(cuMemcpyDtoH(&writes, writes_dev, sizeof(writes)));
	if (!writes)
		bench_die("the GPU writer reports no writes, yet the CPU saw some: the kernel did not run as written");

	fig->torn_fraction[round - 1] = (double)torn / c->o->reads;
	fig->values_per_us[round - 1] = changes / elapsed;
	fig->us_per_read[round - 1] = elapsed / c->o->reads;
	bench_record_begin(&rec, "line_torn");
	bench_record_u64(&rec, "round", round);
	bench_record_u64(&rec, "size", sh->size);
	bench_record_str(&rec, "shape", sh->name);
	bench_record_str(&rec, "poll", "gdr_copy_from_mapping");
	bench_record_u64(&rec, "reads", c->o->reads);
	bench_record_u64(&rec, "torn", torn);
	bench_record_double(&rec, "torn_fraction", (double)torn / c->o->reads);
	bench_record_double(&rec, "values_per_us", changes / elapsed);
	bench_record_double(&rec, "us_per_read", elapsed / c->o->reads);
	bench_record_u64(&rec, "writer_period_ns", period);
	bench_record_u64(&rec, "writes", writes);
	bench_record_str(&rec, "mapping_type", c->mapping_type);
	bench_record_str(&rec, "alloc_fn", c->s->alloc->name);
	bench_record_u64(&rec, "gpu", (uint64_t)c->s->dev_id);
	bench_record_end(&rec);
}

/* Median and range over the rounds (values left unsorted). */
static struct bench_stats over_rounds(const double *values, unsigned int rounds)
{
	double sorted[PPLAT_LINE_MAX_ROUNDS];

	memcpy(sorted, values, rounds * sizeof(sorted[0]));
	return bench_stats(sorted, rounds);
}

static void summarize(const struct line_ctx *c, const struct line_figures *fig)
{
	unsigned int k, rounds = c->o->rounds;
	struct bench_record rec;
	struct bench_stats rt, polls, tf, vals, per_read;

	for (k = 0; k < PPLAT_LINE_SIZES; k++) {
		if (!(c->o->pingpong_sizes & (1U << k)))
			continue;
		rt = over_rounds(fig[k].median_us, rounds);
		polls = over_rounds(fig[k].polls_per_trip, rounds);
		bench_say("line ping-pong, %9s B: round trip %.3f [%.3f-%.3f] us per call, %.2f polls per "
			  "round trip (median [range] of %u rounds)\n", shape_of(k)->name, rt.median, rt.min,
			  rt.max, polls.median, rounds);
		bench_record_begin(&rec, "line_pingpong_rounds");
		bench_record_u64(&rec, "size", shape_of(k)->size);
		bench_record_str(&rec, "shape", shape_of(k)->name);
		bench_record_u64(&rec, "rounds", rounds);
		bench_record_double(&rec, "median_us", rt.median);
		bench_record_double(&rec, "min_us", rt.min);
		bench_record_double(&rec, "max_us", rt.max);
		bench_record_double(&rec, "polls_per_trip", polls.median);
		bench_record_str(&rec, "mapping_type", c->mapping_type);
		bench_record_u64(&rec, "gpu", (uint64_t)c->s->dev_id);
		bench_record_end(&rec);
	}
	for (k = 0; k < PPLAT_LINE_SIZES; k++) {
		if (!(c->o->torn_sizes & (1U << k)))
			continue;
		tf = over_rounds(fig[k].torn_fraction, rounds);
		vals = over_rounds(fig[k].values_per_us, rounds);
		per_read = over_rounds(fig[k].us_per_read, rounds);
		bench_say("torn reads, %9s B: %.5f [%.5f-%.5f] of reads torn, %.3f [%.3f-%.3f] distinct "
			  "values per us, %.3f us per read (writer every %u ns)\n", shape_of(k)->name, tf.median,
			  tf.min, tf.max, vals.median, vals.min, vals.max, per_read.median, c->o->period_ns);
		bench_record_begin(&rec, "line_torn_rounds");
		bench_record_u64(&rec, "size", shape_of(k)->size);
		bench_record_str(&rec, "shape", shape_of(k)->name);
		bench_record_u64(&rec, "rounds", rounds);
		bench_record_double(&rec, "torn_fraction", tf.median);
		bench_record_double(&rec, "torn_fraction_min", tf.min);
		bench_record_double(&rec, "torn_fraction_max", tf.max);
		bench_record_double(&rec, "values_per_us", vals.median);
		bench_record_double(&rec, "values_per_us_min", vals.min);
		bench_record_double(&rec, "values_per_us_max", vals.max);
		bench_record_double(&rec, "us_per_read", per_read.median);
		bench_record_u64(&rec, "writer_period_ns", c->o->period_ns);
		bench_record_str(&rec, "mapping_type", c->mapping_type);
		bench_record_u64(&rec, "gpu", (uint64_t)c->s->dev_id);
		bench_record_end(&rec);
	}
}

/* The line kernels, or exit 77 (skipped) saying why when this driver cannot run them. */
static void load_kernels(struct line_ctx *c, CUmodule *module)
{
	const char *name = "unknown";
	CUresult res = cuModuleLoadData(module, pplat_line_ptx);

	if (res == CUDA_SUCCESS) {
		res = cuModuleGetFunction(&c->responder, *module, PPLAT_LINE_RESPONDER_NAME);
		if (res == CUDA_SUCCESS)
			res = cuModuleGetFunction(&c->writer, *module, PPLAT_LINE_WRITER_NAME);
	}
	if (res == CUDA_SUCCESS)
		return;
	cuGetErrorName(res, &name);
	if (res == CUDA_ERROR_NOT_SUPPORTED) {
		/* softgpu's libcuda without an emulation of these kernels (a driver that cannot run GPU code). */
		fprintf(stderr, "SKIPPED: this CUDA driver cannot run the line kernels (%s): %s\n", name,
			"it loads the PTX but has no way to execute it");
		exit(77);
	}
	bench_die("loading the line kernels (pplat_line_ptx.h): %s", name);
}

int pplat_line_main(const struct pplat_line_opts *lo, const struct pplat_line_setup *setup)
{
	struct line_figures *fig;
	struct bench_gpu_buf gbuf;
	struct line_ctx c;
	CUmodule module;
	void *map_ptr = NULL;
	gdr_info_t info;
	unsigned int round, k;
	gdr_t g;
	int ret;

	if (lo->rounds > PPLAT_LINE_MAX_ROUNDS)
		bench_die("-R %u: at most %u rounds", lo->rounds, PPLAT_LINE_MAX_ROUNDS);
	memset(&c, 0, sizeof(c));
	c.o = lo;
	c.s = setup;
	fig = calloc(PPLAT_LINE_SIZES, sizeof(*fig));
	if (!fig)
		bench_die("out of memory");

	g = bench_gdr_open(setup->alloc);
	bench_gpu_alloc(&gbuf, setup->dev, GPU_PAGE_SIZE, setup->alloc, g);
	BENCH_CU(cuMemsetD8(gbuf.ptr, 0, GPU_PAGE_SIZE));
	BENCH_CU(cuCtxSynchronize());
	bench_pin(g, gbuf.ptr, GPU_PAGE_SIZE, setup->force_pcie, &c.mh);
	ret = gdr_map_v2(g, c.mh, &map_ptr, GPU_PAGE_SIZE, setup->map_flag);
	if (ret)
		bench_die("gdr_map_v2 with -M %s: %s", map_flags_name(setup->map_flag), strerror(ret));
	ret = gdr_get_info(g, c.mh, &info);
	if (ret)
		bench_die("gdr_get_info: %s", strerror(ret));
	bench_print_info(&info);
	c.map = (unsigned char *)map_ptr + (gbuf.ptr - info.va);
	c.dev = gbuf.ptr;
	c.mapping_type = bench_mapping_type_name(info.mapping_type);
	load_kernels(&c, &module);
	BENCH_CU(cuStreamCreate(&c.stream, CU_STREAM_NON_BLOCKING));

	bench_say("Line modes: %u rounds; in each, every size once%s%s.\n", lo->rounds,
		  lo->pingpong_sizes ? "; ping-pong: the CPU writes a sequence number with "
		  "gdr_copy_to_mapping, a GPU warp stores it into every word of the line, the CPU polls "
		  "the line with gdr_copy_from_mapping" : "",
		  lo->torn_sizes ? "; torn reads: a GPU warp rewrites the line on a timer while the CPU "
		  "reads it with gdr_copy_from_mapping" : "");
	for (round = 1; round <= lo->rounds; round++) {
		for (k = 0; k < PPLAT_LINE_SIZES; k++)
			if (lo->pingpong_sizes & (1U << k))
				run_pingpong(&c, k, round, &fig[k]);
		for (k = 0; k < PPLAT_LINE_SIZES; k++)
			if (lo->torn_sizes & (1U << k))
				run_torn(&c, k, round, &fig[k]);
	}
	summarize(&c, fig);

	BENCH_CU(cuStreamDestroy(c.stream));
	BENCH_CU(cuModuleUnload(module));
	ret = gdr_unmap(g, c.mh, map_ptr, GPU_PAGE_SIZE);
	if (ret)
		bench_die("gdr_unmap: %s", strerror(ret));
	ret = gdr_unpin_buffer(g, c.mh);
	if (ret)
		bench_die("gdr_unpin_buffer: %s", strerror(ret));
	bench_gpu_free(&gbuf);
	ret = gdr_close(g);
	if (ret)
		bench_die("gdr_close: %s", strerror(ret));
	free(fig);
	return EXIT_SUCCESS;
}
