// SPDX-License-Identifier: MIT
/*
 * gdrcopy_pplat: round-trip latency of a ping-pong between the CPU and a
 * persistent GPU kernel through a pair of flags (and optionally data), each
 * either in GPU memory (reached by the CPU through a gdrcopy mapping) or in
 * mapped host memory (cuMemHostAlloc + cuMemHostGetDevicePointer).
 *
 * The kernel is PTX embedded in this program (pplat_kernel_ptx.h) and JIT-
 * compiled by the driver, so no CUDA toolkit is needed to build it.  The
 * protocol is in pplat_protocol.h.
 *
 * Mode 0: the CPU produces (data, then the GPU's flag), the GPU consumes and
 * answers through the CPU's flag; the CPU times each round trip.
 * Mode 1: the GPU produces, the CPU consumes and answers; the GPU times the
 * round trips with %globaltimer.
 * Both report the minimum and the median of up to 100 bucket means.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "pplat_kernel_ptx.h"
#include "pplat_line.h"
#include "pplat_protocol.h"

#define DEFAULT_ITERS 1000
#define DEFAULT_TIMEOUT_S 10
#define DEFAULT_BLOCKS 8
#define DEFAULT_THREADS 1024
/* Polls between two clock reads while waiting for a flag. */
#define TIMEOUT_CHECK_POLLS 1024

enum location { LOC_GPUMEM, LOC_HOSTMEM };

struct pplat_opts {
	int dev_id;
	unsigned int iters;
	unsigned int timeout_s;
	struct bench_alloc alloc;
	size_t data_size;
	unsigned int blocks;
	unsigned int threads;
	unsigned int mode;
	enum location gpu_flag_loc;
	enum location cpu_flag_loc;
	enum location data_loc;
	int map_flag;
	bool relaxed_poll;
	bool force_pcie;	/* -P relaxed */
	const char *ptx_file;	/* -k: the kernel's PTX from this file */
	bool blocks_set, threads_set;
	struct pplat_line_opts line;	/* -L, -W, -R, -w, -r */
	char flag_only_opt;		/* the first option given that only the flag ping-pong takes */
};

/* Where the CPU reaches each object, and how. */
struct pplat_ctx {
	const struct pplat_opts *o;
	gdr_mh_t mh;
	bool mapped;
	unsigned char *gpu_map;		/* user-space pointer of the GPU buffer */
	unsigned char *host_buf;	/* cuMemHostAlloc'd buffer */
	volatile uint32_t *gpu_flag;
	volatile uint32_t *cpu_flag;
	unsigned char *data;
	uint32_t *stage;		/* host copy of one iteration's data */
	uint32_t data_words;
	double start_us;
	double timeout_us;
	CUstream stream;
};

static const char *loc_name(enum location loc)
{
	return loc == LOC_GPUMEM ? "gpumem" : "hostmem";
}

static enum location parse_location(char opt, const char *arg)
{
	if (!strcmp(arg, "gpumem"))
		return LOC_GPUMEM;
	if (!strcmp(arg, "hostmem"))
		return LOC_HOSTMEM;
	bench_die("-%c %s: expected gpumem or hostmem", opt, arg);
}

static void usage(const char *prog)
{
	printf("Usage: %s [-h] [-d gpu] [-t iters] [-u seconds] [-a fn] [-s size] [-B blocks]\n"
	       "          [-T threads] [-m mode] [-G loc] [-C loc] [-D loc] [-M type] [-P poll]\n"
	       "          [-k file] [-F] [-j] [-K]\n"
	       "       %s [-L sizes] [-W sizes] [-R rounds] [-w ns] [-r reads] [-d gpu] [-t iters]\n"
	       "          [-u seconds] [-a fn] [-M type] [-F] [-j] [-K]\n"
	       "\n"
	       "Round-trip latency of a CPU <-> GPU ping-pong through flags (and data), with\n"
	       "the CPU reaching GPU memory through a gdrcopy mapping.\n"
	       "\n"
	       "Options:\n"
	       "  -h          print this help text and exit\n"
	       "  -d gpu      GPU id (default: 0)\n"
	       "  -t iters    round trips (default: %d)\n"
	       "  -u seconds  give up with ERROR: TIMEOUT!!! after this long, 0 = never (default: %d)\n"
	       "  -a fn       GPU allocation function: " BENCH_ALLOC_CHOICES "\n"
	       "              (default: cuMemAlloc)\n"
	       "  -s size     bytes of data per round trip, a multiple of 4; 0 = flags only,\n"
	       "              which runs the kernel as 1 block x 1 thread (default: 0)\n"
	       "  -B blocks   kernel blocks when there is data (default: %d)\n"
	       "  -T threads  threads per block when there is data, at most the GPU's limit\n"
	       "              (default: %d)\n"
	       "  -m mode     0: CPU produces, GPU consumes, CPU times;\n"
	       "              1: GPU produces, CPU consumes, GPU times (default: 0)\n"
	       "  -G loc      where the flag the GPU polls lives: gpumem or hostmem (default: gpumem)\n"
	       "  -C loc      where the flag the CPU polls lives: gpumem or hostmem (default: hostmem)\n"
	       "  -D loc      where the data lives: gpumem or hostmem (default: gpumem)\n"
	       "  -M type     mapping type to request for GPU memory: default, wc, cache or device\n"
	       "              (default: default)\n"
	       "  -P poll     how the GPU polls its flag: relaxed (ld.relaxed.sys, then one acquire\n"
	       "              fence when there is data to order) or acquire (ld.acquire.sys each\n"
	       "              poll) (default: relaxed)\n"
	       BENCH_FORCE_PCIE_HELP
	       "  -%c          print one JSON object per measurement on stdout (JSON Lines);\n"
	       "              the human-readable text goes to stderr (default: off)\n"
	       "  -K          print the PTX of the GPU kernel and exit\n"
	       "  -k file     load the kernel's PTX from this file instead (experiments: start from\n"
	       "              the output of -K; the protocol of pplat_protocol.h must hold)\n"
	       "\n"
	       "Line modes (-L, -W; not in NVIDIA's pplat): polling a line of GPU memory with\n"
	       "gdr_copy_from_mapping, as pollers of flags and rings do. One GPU warp, its PTX in\n"
	       "the program; -d, -t, -u, -a, -M, -F, -j and -K apply, the flag options do not.\n"
	       "  -L sizes    ping-pong through a line: the CPU writes a sequence number into GPU\n"
	       "              memory, the GPU stores it into every word of a line of this many\n"
	       "              bytes, the CPU polls the line until it holds the number; prints the\n"
	       "              round trip per call and polls per round trip. sizes: 16, 32, 64,\n"
	       "              128 and/or 256, or an entry's shape: 128/first, 128/last, 256/first\n"
	       "              or 256/last (the GPU answers in the first or last 64-byte line of a\n"
	       "              128 or 256 B entry, the CPU polls the whole entry), comma-separated;\n"
	       "              or all (16-128) or shapes (every one)\n"
	       "  -W sizes    torn reads: the GPU rewrites the line every -w ns while the CPU reads\n"
	       "              it back to back; prints the fraction of reads that saw two writes\n"
	       "              in one 64-byte line and the distinct values seen per us\n"
	       "  -R rounds   rounds, each running every size of -L and -W once; figures are the\n"
	       "              median over rounds with the lowest and highest (default: %d)\n"
	       "  -w ns       the GPU writer's period for -W, by %%globaltimer (default: %d)\n"
	       "  -r reads    reads per round and size for -W (default: %d)\n"
	       "  -t iters    with -L: round trips per round and size (default: %d)\n"
	       "Exit status 77 (skipped, with the reason on stderr) where the CUDA driver\n"
	       "cannot run the line kernels.\n"
	       "\n"
	       "Iteration counts above 100 are rounded up to a multiple of 100 (100 buckets).\n",
	       prog, prog, DEFAULT_ITERS, DEFAULT_TIMEOUT_S, DEFAULT_BLOCKS, DEFAULT_THREADS,
	       BENCH_JSON_OPTION, PPLAT_LINE_DEFAULT_ROUNDS, PPLAT_LINE_DEFAULT_PERIOD_NS,
	       PPLAT_LINE_DEFAULT_READS, DEFAULT_ITERS);
}

/* The kernel's PTX with the poll flavour of -P filled in (pplat_kernel_ptx.h); the caller frees it. */
static char *kernel_ptx(bool relaxed_poll)
{
	const char *poll = relaxed_poll ? "ld.relaxed.sys.global.u32" : "ld.acquire.sys.global.u32";
	/* %p3 is free once the poll loop is left; no data, nothing to order. */
	const char *fence = relaxed_poll ? "	setp.ne.u32 %p3, %r1, 0;\n	@%p3 fence.acq_rel.sys;" : "";
	const char *t = pplat_kernel_ptx_template;
	size_t size = sizeof(pplat_kernel_ptx_template) + 8 * (strlen(poll) + strlen(fence));
	char *ptx = malloc(size), *out = ptx;

	if (!ptx)
		bench_die("out of memory");
	while (*t) {
		if (!strncmp(t, PPLAT_POLL_MARK, strlen(PPLAT_POLL_MARK))) {
			out += sprintf(out, "%s", poll);
			t += strlen(PPLAT_POLL_MARK);
		} else if (!strncmp(t, PPLAT_FENCE_MARK, strlen(PPLAT_FENCE_MARK))) {
			out += sprintf(out, "%s", fence);
			t += strlen(PPLAT_FENCE_MARK);
		} else {
			*out++ = *t++;
		}
	}
	*out = '\0';
	return ptx;
}

static char *read_ptx_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *text;
	long size;

	if (!f)
		bench_die("-k %s: %s", path, strerror(errno));
	if (fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		bench_die("-k %s: cannot tell its size", path);
	text = malloc((size_t)size + 1);
	if (!text || fread(text, 1, (size_t)size, f) != (size_t)size)
		bench_die("-k %s: cannot read it", path);
	text[size] = '\0';
	fclose(f);
	return text;
}

static void parse_args(int argc, char **argv, struct pplat_opts *o)
{
	bool print_ptx = false;
	int c;

	memset(o, 0, sizeof(*o));
	o->iters = DEFAULT_ITERS;
	o->timeout_s = DEFAULT_TIMEOUT_S;
	o->alloc = bench_parse_alloc("cuMemAlloc");
	o->blocks = DEFAULT_BLOCKS;
	o->threads = DEFAULT_THREADS;
	o->mode = PPLAT_MODE_CPU_PRODUCES;
	o->gpu_flag_loc = LOC_GPUMEM;
	o->cpu_flag_loc = LOC_HOSTMEM;
	o->data_loc = LOC_GPUMEM;
	o->map_flag = GDR_MAP_FLAG_DEFAULT;
	o->relaxed_poll = true;
	o->line.rounds = PPLAT_LINE_DEFAULT_ROUNDS;
	o->line.period_ns = PPLAT_LINE_DEFAULT_PERIOD_NS;
	o->line.reads = PPLAT_LINE_DEFAULT_READS;

	while ((c = getopt(argc, argv, "hd:t:u:a:s:B:T:m:G:C:D:M:P:k:jKFL:W:R:w:r:")) != -1) {
		if (strchr("sBTmGCDPk", c) && !o->flag_only_opt)
			o->flag_only_opt = (char)c;
		switch (c) {
		case 'L':
			o->line.pingpong_sizes = pplat_line_parse_sizes('L', optarg);
			break;
		case 'W':
			o->line.torn_sizes = pplat_line_parse_sizes('W', optarg);
			break;
		case 'R':
			o->line.rounds = bench_parse_uint('R', optarg);
			if (!o->line.rounds)
				bench_die("-R 0: at least one round");
			break;
		case 'w':
			o->line.period_ns = bench_parse_uint('w', optarg);
			if (!o->line.period_ns)
				bench_die("-w 0: the writer's period must be at least 1 ns");
			break;
		case 'r':
			o->line.reads = bench_parse_uint('r', optarg);
			if (!o->line.reads)
				bench_die("-r 0: at least one read");
			break;
		case 'h':
			usage(argv[0]);
			exit(EXIT_SUCCESS);
		case 't':
			o->iters = bench_parse_uint('t', optarg);
			break;
		case 'u':
			o->timeout_s = bench_parse_uint('u', optarg);
			break;
		case 's':
			o->data_size = bench_parse_size('s', optarg);
			break;
		case 'B':
			o->blocks = bench_parse_uint('B', optarg);
			o->blocks_set = true;
			break;
		case 'T':
			o->threads = bench_parse_uint('T', optarg);
			o->threads_set = true;
			break;
		case 'm':
			o->mode = bench_parse_uint('m', optarg);
			break;
		case 'G':
			o->gpu_flag_loc = parse_location('G', optarg);
			break;
		case 'C':
			o->cpu_flag_loc = parse_location('C', optarg);
			break;
		case 'D':
			o->data_loc = parse_location('D', optarg);
			break;
		case 'P':
			if (strcmp(optarg, "relaxed") && strcmp(optarg, "acquire"))
				bench_die("-P %s: expected relaxed or acquire", optarg);
			o->relaxed_poll = !strcmp(optarg, "relaxed");
			break;
		case 'K':
			print_ptx = true;
			break;
		case 'F':
			o->force_pcie = true;
			break;
		case 'k':
			o->ptx_file = optarg;
			break;
		default:
			if (!bench_common_option(c, optarg, &o->dev_id, &o->alloc, &o->map_flag))
				bench_die("unknown option; run %s -h for the list", argv[0]);
		}
	}
	if (optind < argc)
		bench_die("unexpected argument '%s'; run %s -h for the list", argv[optind], argv[0]);
	if (o->line.pingpong_sizes || o->line.torn_sizes) {
		if (o->flag_only_opt)
			bench_die("-%c belongs to the flag ping-pong, not to the line modes (-L, -W); "
				  "run %s -h for which options each takes", o->flag_only_opt, argv[0]);
		if (print_ptx) {
			fputs(pplat_line_ptx_text(), stdout);
			exit(EXIT_SUCCESS);
		}
	} else if (o->line.rounds != PPLAT_LINE_DEFAULT_ROUNDS ||
		   o->line.period_ns != PPLAT_LINE_DEFAULT_PERIOD_NS ||
		   o->line.reads != PPLAT_LINE_DEFAULT_READS) {
		bench_die("-R, -w and -r belong to the line modes: give -L and/or -W too");
	}
	if (print_ptx) {
		char *ptx = kernel_ptx(o->relaxed_poll);

		fputs(ptx, stdout);
		free(ptx);
		exit(EXIT_SUCCESS);
	}
	if (o->mode != PPLAT_MODE_CPU_PRODUCES && o->mode != PPLAT_MODE_GPU_PRODUCES)
		bench_die("-m %u: expected 0 (CPU produces) or 1 (GPU produces)", o->mode);
	if (o->data_size % 4)
		bench_die("-s %zu: the data size must be a multiple of 4", o->data_size);
	if (o->data_size / 4 > UINT32_MAX / 2)
		bench_die("-s %zu: too large", o->data_size);
	if (!o->iters || o->iters > (1U << 30))
		bench_die("-t %u: expected 1 .. %u iterations", o->iters, 1U << 30);
	if (!o->blocks || !o->threads)
		bench_die("-B and -T must be at least 1");
	if (!o->data_size) {
		if ((o->blocks_set && o->blocks != 1) || (o->threads_set && o->threads != 1))
			bench_warn("no data (-s 0): the kernel runs as 1 block x 1 thread, "
				   "ignoring -B/-T");
		o->blocks = 1;
		o->threads = 1;
	}
}

static void check_timeout(const struct pplat_ctx *ctx, unsigned int iter, const char *waiting)
{
	const char *name = "unknown";
	CUresult res;

	if (ctx->timeout_us <= 0.0 || bench_now_us() - ctx->start_us < ctx->timeout_us)
		return;
	res = cuStreamQuery(ctx->stream);
	cuGetErrorName(res, &name);
	fflush(stdout);
	fprintf(stderr, "ERROR: TIMEOUT!!!\n");
	fprintf(stderr, "Gave up after %u s at iteration %u waiting for %s; the kernel's "
		"stream reports %s. Raise -u if the GPU is just slow.\n",
		ctx->o->timeout_s, iter, waiting, name);
	exit(EXIT_FAILURE);
}

/* Spin until the CPU's flag holds value. */
static void wait_cpu_flag(const struct pplat_ctx *ctx, uint32_t value, unsigned int iter)
{
	unsigned int polls = 0;

	while (__atomic_load_n(ctx->cpu_flag, __ATOMIC_ACQUIRE) != value) {
		if (++polls == TIMEOUT_CHECK_POLLS) {
			polls = 0;
			check_timeout(ctx, iter, "the cpu flag");
		}
	}
}

/*
 * Spin until the kernel reports that all its blocks run (cpu_flag != 0).
 * Not "== 1": in mode 1 the GPU goes on to produce iteration 1 at once and
 * may already have raised the flag to 2.
 */
static void wait_kernel_ready(const struct pplat_ctx *ctx)
{
	unsigned int polls = 0;

	while (!__atomic_load_n(ctx->cpu_flag, __ATOMIC_ACQUIRE)) {
		if (++polls == TIMEOUT_CHECK_POLLS) {
			polls = 0;
			check_timeout(ctx, 0, "the kernel to start (cpu flag != 0)");
		}
	}
}

static void write_gpu_flag(const struct pplat_ctx *ctx, uint32_t value)
{
	if (ctx->o->gpu_flag_loc == LOC_GPUMEM) {
		/* 4 bytes: the flag's size (the reference copied sizeof(size_t)). */
		int ret = gdr_copy_to_mapping(ctx->mh, (void *)ctx->gpu_flag, &value,
					      sizeof(value));

		if (ret)
			bench_die("gdr_copy_to_mapping of the gpu flag: %s", strerror(ret));
	} else {
		__atomic_store_n(ctx->gpu_flag, value, __ATOMIC_RELEASE);
	}
}

static void produce_data(const struct pplat_ctx *ctx, uint32_t iter)
{
	uint32_t w;
	int ret;

	for (w = 0; w < ctx->data_words; w++)
		ctx->stage[w] = pplat_data_word(iter, w);
	if (ctx->o->data_loc == LOC_GPUMEM) {
		ret = gdr_copy_to_mapping(ctx->mh, ctx->data, ctx->stage, ctx->data_words * 4);
		if (ret)
			bench_die("gdr_copy_to_mapping of the data: %s", strerror(ret));
	} else {
		memcpy(ctx->data, ctx->stage, ctx->data_words * 4);
	}
	/* The data is visible before the flag that announces it. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static void consume_data(const struct pplat_ctx *ctx, uint32_t iter)
{
	uint32_t w;
	int ret;

	if (ctx->o->data_loc == LOC_GPUMEM) {
		ret = gdr_copy_from_mapping(ctx->mh, ctx->stage, ctx->data, ctx->data_words * 4);
		if (ret)
			bench_die("gdr_copy_from_mapping of the data: %s", strerror(ret));
	} else {
		memcpy(ctx->stage, ctx->data, ctx->data_words * 4);
	}
	for (w = 0; w < ctx->data_words; w++)
		if (ctx->stage[w] != pplat_data_word(iter, w))
			bench_die("iteration %u: data word %u is 0x%08x, the GPU wrote 0x%08x",
				  iter, w, ctx->stage[w], pplat_data_word(iter, w));
}

/* Mode 0: the CPU times every round trip; bucket_us gets per-bucket means. */
static void run_cpu_produces(struct pplat_ctx *ctx, const struct bench_buckets *plan,
			     double *bucket_us)
{
	unsigned int b, k, i = 1;
	double t0;

	for (b = 0; b < plan->count; b++) {
		t0 = bench_now_us();
		for (k = 0; k < plan->per_bucket; k++, i++) {
			if (ctx->data_words)
				produce_data(ctx, i);
			write_gpu_flag(ctx, i);
			wait_cpu_flag(ctx, i + 1, i);
		}
		bucket_us[b] = (bench_now_us() - t0) / plan->per_bucket;
	}
}

/* Mode 1: the CPU answers; the GPU's timestamps give the bucket means. */
static void run_gpu_produces(struct pplat_ctx *ctx, const struct bench_buckets *plan)
{
	unsigned int i;

	for (i = 1; i <= plan->iters; i++) {
		wait_cpu_flag(ctx, i + 1, i);
		if (ctx->data_words) {
			/*
			 * Data read after the flag must not be served from before it
			 * (WC reads).  Only here: a fence on every round trip of the
			 * flag-only protocol was a fixed cost against the floor.
			 */
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			consume_data(ctx, i);
		}
		write_gpu_flag(ctx, i);
	}
}

static void wait_kernel(const struct pplat_ctx *ctx)
{
	CUresult res;

	while ((res = cuStreamQuery(ctx->stream)) == CUDA_ERROR_NOT_READY)
		check_timeout(ctx, ctx->o->iters, "the kernel to finish");
	BENCH_CU(res);
}

static void explain(const struct pplat_opts *o)
{
	const char *gpu_flag_how = o->gpu_flag_loc == LOC_GPUMEM ?
		"with gdr_copy_to_mapping into GPU memory" : "into mapped host memory";
	const char *cpu_flag_how = o->cpu_flag_loc == LOC_GPUMEM ?
		"in GPU memory through the gdrcopy mapping" : "in mapped host memory";

	if (o->mode == PPLAT_MODE_CPU_PRODUCES) {
		bench_say("Benchmark mode: 0 (CPU produces, GPU consumes)\n");
		if (o->data_size)
			bench_say("CPU writes %zu bytes of data (%s) and then the gpu flag %s;\n",
				  o->data_size, loc_name(o->data_loc), gpu_flag_how);
		else
			bench_say("CPU writes the gpu flag %s;\n", gpu_flag_how);
		bench_say("the GPU waits for the flag, %sanswers through the cpu flag, which the\n"
			  "CPU polls %s. The CPU times each round trip.\n",
			  o->data_size ? "reads and checks the data, " : "", cpu_flag_how);
	} else {
		bench_say("Benchmark mode: 1 (GPU produces, CPU consumes)\n");
		bench_say("The GPU writes %s%sthe cpu flag, which the CPU polls %s;\n",
			  o->data_size ? "data " : "",
			  o->data_size ? (o->data_loc == LOC_GPUMEM ? "(gpumem), then " :
					  "(hostmem), then ") : "",
			  cpu_flag_how);
		bench_say("the CPU %sanswers with the gpu flag, written %s.\n"
			  "The GPU times the round trips with %%globaltimer.\n",
			  o->data_size ? "reads and checks the data and " : "", gpu_flag_how);
	}
}

/* One run: the options, the GPU, the buffers the CPU and the kernel share, and the kernel. */
struct pplat_run {
	struct pplat_opts o;
	struct bench_buckets plan;
	struct pplat_ctx ctx;
	struct bench_gpu_buf gbuf;
	struct pplat_kernel_args args;
	CUdevice dev;
	CUdeviceptr host_dev;	/* the mapped host buffer, as the GPU sees it */
	size_t buf_size;
	bool need_gdr;		/* something the CPU touches is in GPU memory */
	gdr_t g;
	gdr_info_t info;
	void *map_ptr;
	CUmodule module;
	CUfunction kernel;
};

/* -L or -W: the line modes (pplat_line.c) run instead of the flag ping-pong. */
static bool line_modes(const struct pplat_opts *o)
{
	return o->line.pingpong_sizes || o->line.torn_sizes;
}

/* The GPU, and whether the launch -B x -T fits it: a persistent kernel deadlocks unless every block is resident. */
static void select_gpu(struct pplat_run *r)
{
	const struct pplat_opts *o = &r->o;
	int max_threads = 0, sm_count = 0, sm_threads = 0;
	struct bench_locality loc;

	r->dev = bench_select_gpu(o->dev_id, false);
	bench_print_force_pcie(o->force_pcie);
	bench_get_locality(r->dev, &loc);
	bench_print_locality(&loc);
	if (line_modes(o))
		return;	/* their one-warp kernels fit any GPU */

	BENCH_CU(cuDeviceGetAttribute(&max_threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
				      r->dev));
	if (o->threads > (unsigned int)max_threads)
		bench_die("-T %u: GPU %d allows at most %d threads per block", o->threads, o->dev_id,
			  max_threads);
	if (cuDeviceGetAttribute(&sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, r->dev) ==
	    CUDA_SUCCESS &&
	    cuDeviceGetAttribute(&sm_threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
				 r->dev) == CUDA_SUCCESS && sm_count > 0 && sm_threads > 0) {
		unsigned long resident = (unsigned long)sm_count *
			(sm_threads / o->threads ? sm_threads / o->threads : 1);

		if (o->blocks > resident)
			bench_die("-B %u: with -T %u at most %lu blocks are resident at once on "
				  "GPU %d, and the kernel needs all of them running", o->blocks,
				  o->threads, resident, o->dev_id);
	}
}

/* The gdrcopy mapping of the GPU buffer: ctx.gpu_map, the buffer's start as the CPU sees it. */
static void map_gpu_buffer(struct pplat_run *r)
{
	int ret;

	bench_pin(r->g, r->gbuf.ptr, r->buf_size, r->o.force_pcie, &r->ctx.mh);
	ret = gdr_map_v2(r->g, r->ctx.mh, &r->map_ptr, r->buf_size, r->o.map_flag);
	if (ret)
		bench_die("gdr_map_v2 with -M %s: %s", map_flags_name(r->o.map_flag), strerror(ret));
	r->ctx.mapped = true;
	bench_say("map_d_ptr: %p\n", r->map_ptr);
	ret = gdr_get_info(r->g, r->ctx.mh, &r->info);
	if (ret)
		bench_die("gdr_get_info: %s", strerror(ret));
	bench_print_info(&r->info);
	bench_say("page offset: %lld\n", (long long)(r->gbuf.ptr - r->info.va));
	r->ctx.gpu_map = (unsigned char *)r->map_ptr + (r->gbuf.ptr - r->info.va);
	bench_say("user-space pointer: %p\n", (void *)r->ctx.gpu_map);
}

/* One GPU buffer (flags, data, kernel bookkeeping) and one mapped host buffer; each object where -G, -C and -D put it. */
static void setup_buffers(struct pplat_run *r)
{
	const struct pplat_opts *o = &r->o;
	struct pplat_ctx *ctx = &r->ctx;
	struct pplat_kernel_args *args = &r->args;

	r->need_gdr = o->gpu_flag_loc == LOC_GPUMEM || o->cpu_flag_loc == LOC_GPUMEM ||
		      (o->data_size && o->data_loc == LOC_GPUMEM);
	/* gdr_alloc_mapped memory comes from libgdrapi itself. */
	if (r->need_gdr || !o->alloc.fn)
		r->g = bench_gdr_open(&o->alloc);
	bench_say("gpu flag: %s; cpu flag: %s; data: %s, %zu bytes; %u block(s) x %u thread(s)\n",
		  loc_name(o->gpu_flag_loc), loc_name(o->cpu_flag_loc), loc_name(o->data_loc),
		  o->data_size, o->blocks, o->threads);

	r->buf_size = (PPLAT_DATA_OFFSET + o->data_size + GPU_PAGE_SIZE - 1) & GPU_PAGE_MASK;
	bench_gpu_alloc(&r->gbuf, r->dev, r->buf_size, &r->o.alloc, r->g);
	bench_say("device ptr: 0x%llx\n", (unsigned long long)r->gbuf.ptr);
	bench_say("gpu alloc fn: %s\n", o->alloc.name);
	BENCH_CU(cuMemsetD8(r->gbuf.ptr, 0, r->buf_size));
	BENCH_CU(cuCtxSynchronize());

	ctx->o = o;
	BENCH_CU(cuMemHostAlloc((void **)&ctx->host_buf, r->buf_size,
				CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
	memset(ctx->host_buf, 0, r->buf_size);
	BENCH_CU(cuMemHostGetDevicePointer(&r->host_dev, ctx->host_buf, 0));

	if (r->need_gdr)
		map_gpu_buffer(r);
	else
		bench_say("every object the CPU touches is in host memory: no gdrcopy mapping\n");

	ctx->gpu_flag = (volatile uint32_t *)((o->gpu_flag_loc == LOC_GPUMEM ? ctx->gpu_map :
					       ctx->host_buf) + PPLAT_GPU_FLAG_OFFSET);
	ctx->cpu_flag = (volatile uint32_t *)((o->cpu_flag_loc == LOC_GPUMEM ? ctx->gpu_map :
					       ctx->host_buf) + PPLAT_CPU_FLAG_OFFSET);
	ctx->data = (o->data_loc == LOC_GPUMEM ? ctx->gpu_map : ctx->host_buf) + PPLAT_DATA_OFFSET;
	ctx->data_words = (uint32_t)(o->data_size / 4);
	ctx->stage = calloc(ctx->data_words + 1, sizeof(uint32_t));
	if (!ctx->stage)
		bench_die("cannot allocate %zu bytes of host memory", o->data_size);
	ctx->timeout_us = o->timeout_s * 1e6;

	args->gpu_flag = (o->gpu_flag_loc == LOC_GPUMEM ? r->gbuf.ptr : r->host_dev) +
			 PPLAT_GPU_FLAG_OFFSET;
	args->cpu_flag = (o->cpu_flag_loc == LOC_GPUMEM ? r->gbuf.ptr : r->host_dev) +
			 PPLAT_CPU_FLAG_OFFSET;
	args->data = (o->data_loc == LOC_GPUMEM ? r->gbuf.ptr : r->host_dev) + PPLAT_DATA_OFFSET;
	args->arrive = r->gbuf.ptr + PPLAT_ARRIVE_OFFSET;
	args->errors = r->gbuf.ptr + PPLAT_ERRORS_OFFSET;
	args->timestamps = r->gbuf.ptr + PPLAT_TIMESTAMPS_OFFSET;
	args->data_words = ctx->data_words;
	args->iters = r->plan.iters;
	args->mode = o->mode;
	args->bucket_iters = r->plan.per_bucket;
}

/* The kernel JIT-compiled from its PTX (-k's file, or the embedded one), and its own stream. */
static void load_kernel(struct pplat_run *r)
{
	const struct pplat_opts *o = &r->o;
	int fn_max_threads = 0;
	char *ptx;

	ptx = o->ptx_file ? read_ptx_file(o->ptx_file) : kernel_ptx(o->relaxed_poll);
	BENCH_CU(cuModuleLoadData(&r->module, ptx));
	free(ptx);
	BENCH_CU(cuModuleGetFunction(&r->kernel, r->module, PPLAT_KERNEL_NAME));
	if (cuFuncGetAttribute(&fn_max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
			       r->kernel) == CUDA_SUCCESS && fn_max_threads > 0 &&
	    o->threads > (unsigned int)fn_max_threads)
		bench_die("-T %u: the kernel can run at most %d threads per block on this GPU",
			  o->threads, fn_max_threads);
	/* Its own stream: the legacy default stream would wait on other work. */
	BENCH_CU(cuStreamCreate(&r->ctx.stream, CU_STREAM_NON_BLOCKING));
}

/* Launch the kernel, play the ping-pong, check the data; bucket_us gets the per-bucket means. */
static void run_pingpong(struct pplat_run *r, double *bucket_us)
{
	const struct pplat_opts *o = &r->o;
	struct pplat_kernel_args *args = &r->args;
	uint64_t timestamps[PPLAT_MAX_BUCKETS + 1];
	void *params[PPLAT_KERNEL_PARAMS] = {
		&args->gpu_flag, &args->cpu_flag, &args->data, &args->arrive, &args->errors,
		&args->timestamps, &args->data_words, &args->iters, &args->mode, &args->bucket_iters,
	};
	uint32_t errors = 0;
	unsigned int b;

	explain(o);
	bench_say("Running %u iterations with data size %zu bytes.\n", r->plan.iters, o->data_size);

	BENCH_CU(cuLaunchKernel(r->kernel, o->blocks, 1, 1, o->threads, 1, 1, 0, r->ctx.stream,
				params, NULL));
	/* Not timed: the launch and the wait until every block runs. */
	r->ctx.start_us = bench_now_us();
	wait_kernel_ready(&r->ctx);

	r->ctx.start_us = bench_now_us();
	if (o->mode == PPLAT_MODE_CPU_PRODUCES)
		run_cpu_produces(&r->ctx, &r->plan, bucket_us);
	else
		run_gpu_produces(&r->ctx, &r->plan);
	wait_kernel(&r->ctx);

	BENCH_CU(cuMemcpyDtoH(&errors, args->errors, sizeof(errors)));
	if (errors)
		bench_die("the GPU read %u data words that differ from what the CPU wrote: the "
			  "data did not reach the GPU before the flag did", errors);
	if (o->mode == PPLAT_MODE_GPU_PRODUCES) {
		BENCH_CU(cuMemcpyDtoH(timestamps, args->timestamps,
				      (r->plan.count + 1) * sizeof(timestamps[0])));
		for (b = 0; b < r->plan.count; b++) {
			if (timestamps[b + 1] < timestamps[b])
				bench_die("GPU timestamps went backwards (bucket %u)", b);
			bucket_us[b] = (double)(timestamps[b + 1] - timestamps[b]) / 1e3 /
				       r->plan.per_bucket;
		}
	}
}

/* The latency line and the measurement's record (-j: JSON). */
static void report(const struct pplat_run *r, double *bucket_us)
{
	const struct pplat_opts *o = &r->o;
	struct bench_stats st = bench_stats(bucket_us, r->plan.count);
	struct bench_record rec;

	bench_say("Round-trip latency per iteration is (min) %g, (median) %g us\n", st.min,
		  st.median);

	bench_record_begin(&rec, "pplat");
	bench_record_u64(&rec, "mode", o->mode);
	bench_record_str(&rec, "timed_by", o->mode == PPLAT_MODE_CPU_PRODUCES ? "cpu" : "gpu");
	bench_record_str(&rec, "gpu_flag", loc_name(o->gpu_flag_loc));
	bench_record_str(&rec, "cpu_flag", loc_name(o->cpu_flag_loc));
	bench_record_str(&rec, "data", loc_name(o->data_loc));
	bench_record_str(&rec, "poll", o->ptx_file ? o->ptx_file : o->relaxed_poll ? "relaxed" : "acquire");
	bench_record_u64(&rec, "size", o->data_size);
	bench_record_u64(&rec, "blocks", o->blocks);
	bench_record_u64(&rec, "threads", o->threads);
	bench_record_u64(&rec, "iters", r->plan.iters);
	bench_record_u64(&rec, "buckets", r->plan.count);
	bench_record_double(&rec, "min_us", st.min);
	bench_record_double(&rec, "median_us", st.median);
	bench_record_str(&rec, "mapping_type",
			 r->need_gdr ? bench_mapping_type_name(r->info.mapping_type) : "none");
	bench_record_str(&rec, "alloc_fn", o->alloc.name);
	bench_record_u64(&rec, "gpu", (uint64_t)o->dev_id);
	bench_record_end(&rec);
}

static void teardown(struct pplat_run *r)
{
	int ret;

	BENCH_CU(cuStreamDestroy(r->ctx.stream));
	BENCH_CU(cuModuleUnload(r->module));
	if (r->need_gdr) {
		bench_say("unmapping buffer\n");
		ret = gdr_unmap(r->g, r->ctx.mh, r->map_ptr, r->buf_size);
		if (ret)
			bench_die("gdr_unmap: %s", strerror(ret));
		bench_say("unpinning buffer\n");
		ret = gdr_unpin_buffer(r->g, r->ctx.mh);
		if (ret)
			bench_die("gdr_unpin_buffer: %s", strerror(ret));
	}
	BENCH_CU(cuMemFreeHost(r->ctx.host_buf));
	bench_gpu_free(&r->gbuf);
	if (r->g) {
		bench_say("closing gdrdrv\n");
		ret = gdr_close(r->g);
		if (ret)
			bench_die("gdr_close: %s", strerror(ret));
	}
	free(r->ctx.stage);
}

int main(int argc, char **argv)
{
	struct pplat_run run;
	double bucket_us[BENCH_MAX_BUCKETS];

	memset(&run, 0, sizeof(run));
	bench_init("gdrcopy_pplat", argc, argv);
	parse_args(argc, argv, &run.o);
	run.plan = bench_plan_buckets(run.o.iters, "-t");
	select_gpu(&run);
	if (line_modes(&run.o)) {
		struct pplat_line_setup setup = {
			.dev = run.dev, .dev_id = run.o.dev_id, .alloc = &run.o.alloc,
			.map_flag = run.o.map_flag, .force_pcie = run.o.force_pcie,
			.timeout_s = run.o.timeout_s, .plan = run.plan,
		};

		return pplat_line_main(&run.o.line, &setup);
	}
	setup_buffers(&run);
	load_kernel(&run);
	run_pingpong(&run, bucket_us);
	report(&run, bucket_us);
	teardown(&run);
	return EXIT_SUCCESS;
}
