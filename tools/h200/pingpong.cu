// SPDX-License-Identifier: MIT
/*
 * pingpong: polling GPU memory as a poller lives it (issue 26), one round of
 * every configuration per run; tools/h200/pingpong.sh interleaves the rounds
 * and summarize.py draws the medians.
 *
 *   Shapes (issue 39): the entry the CPU polls and where in it the GPU's
 *     answer lies: the whole entry of 16/32/64/128/256 B ("16" .. "256": at
 *     128 and 256 B, every line), or only the first or the last 64-byte line
 *     of a 128 or 256 B entry ("128/first", "256/last", ...: a ring slot or
 *     mailbox with its flag at the front or the back; the other lines keep
 *     what they held).  -s picks shapes.
 *   pingpong: the CPU stores a sequence number into GPU memory (an 8-byte
 *     store through the BAR1 mapping, then sfence), a GPU kernel answers by
 *     writing it into every 4-byte word of the shape's answer (one warp-wide
 *     store per 128 B, then __threadfence_system), and the CPU polls the
 *     whole entry with one read routine until every word of the answer holds
 *     the number.  Figures: round trip per call (median of bucket means),
 *     polls per round trip, polls that saw a line of the answer half-written.
 *   torn: a GPU kernel rewrites the answer once per period (every word the
 *     same counter) while the CPU reads the entry back to back with the
 *     routine; a read with a line whose words differ saw two writes in one
 *     line (torn); one whose lines hold different values but each line one
 *     (at 128/256 B, every line) saw the lines of two writes (apart).
 *     Figures: the torn and apart fractions, the distinct values seen per us.
 *   reads: the same reads of each entry size with nothing writing, back to
 *     back and single (each fenced off from the next, its data used), and
 *     back to back over 8 distinct entries in turn (ring), per call.
 *   floor: the simplest ping-pong there is, for gdrcopy_pplat to be held
 *     against: an 8-byte flag each way, the CPU's into GPU memory through the
 *     mapping, the GPU's into pinned host memory the CPU polls in its cache.
 *
 * Read routines: ours (gdr_copy_from_mapping), exported
 * (gdr_copy_from_mapped_memory), reference (NVIDIA's GDRCopy read routines,
 * built at run time from the checkout -R names: its memcpy_uncached_load_avx2
 * for multiples of 32 bytes and memcpy_uncached_load_sse41 otherwise, as its
 * gdr_copy_from_mapping picks them on an AVX2 CPU; never shipped), loop16/32/64
 * (the plainest loop of 16-, 32- or 64-byte streaming loads, each stored at
 * once, then sfence), loop64plain and loop64back (ordinary 64-byte loads;
 * streaming ones from the last line back) and memcpy.
 *
 *   nvcc -O2 -arch=sm_90 -o pingpong tools/h200/pingpong.cu -Iinclude \
 *        -Llibgdrapi/build -lgdrapi -lcuda -ldl
 *   GDRCOPY_BACKEND=vulkan taskset -c 2 ./pingpong [-R CHECKOUT] [-n ROUND] [-l LABEL] [-o ROUTINES] [-s SHAPES]
 *
 * Output: JSON lines on stdout; what went wrong on stderr, exit status 1.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>

#include "gdrapi.h"

#define MAP_SIZE (1UL << 20)
#define SEQ_OFFSET 0	 /* the CPU's sequence number (8 B) */
#define STOP_OFFSET 64	 /* the writer kernel's stop flag (8 B) */
#define LINE_OFFSET 256	 /* the entry answered into / rewritten: 256-byte aligned */
#define ENTRY_MAX 256
#define RING_OFFSET 4096 /* the reads test's distinct entries, RING_STRIDE apart */
#define RING_ENTRIES 8
#define RING_STRIDE 512
#define BUCKETS 20
#define TRIPS_PER_BUCKET 100
#define WARM_TRIPS 200
#define TORN_READS 20000
#define WRITER_PERIOD_NS 1000

/* The entry polled and where the answer lies in it (bytes). */
struct shape {
	const char *name;
	size_t size;
	size_t answer;		/* offset of the answer in the entry */
	size_t answer_len;
	const char *where;	/* whole, first (line), last (line) */
};

static const struct shape shapes[] = {
	{ "16", 16, 0, 16, "whole" },		{ "32", 32, 0, 32, "whole" },
	{ "64", 64, 0, 64, "whole" },		{ "128", 128, 0, 128, "whole" },
	{ "128/first", 128, 0, 64, "first" },	{ "128/last", 128, 64, 64, "last" },
	{ "256", 256, 0, 256, "whole" },	{ "256/first", 256, 0, 64, "first" },
	{ "256/last", 256, 192, 64, "last" },
};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))
static const size_t read_sizes[] = { 16, 32, 64, 128, 256 };	/* the reads test: each entry size once */

/* ---- GPU side ---- */

__device__ static unsigned long long globaltimer(void)
{
	unsigned long long t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/*
 * One warp: lane 0 polls the sequence number, the warp writes it into words
 * [0, words) of answer, one warp-wide store per 32 words (128 B: each 64-byte
 * line in one store).
 */
__global__ void responder(volatile unsigned long long *seq, volatile unsigned int *answer, int words)
{
	unsigned long long last = 0, s = 0;
	int lane = threadIdx.x;

	for (;;) {
		if (lane == 0)
			do
				s = *seq;
			while (s == last);
		s = __shfl_sync(0xffffffffu, s, 0);
		if (s == ~0ULL)
			return;
		for (int w = lane; w < words; w += 32)
			answer[w] = (unsigned int)s;
		__threadfence_system();
		last = s;
	}
}

/* One warp rewriting the answer with a counter every period_ns, until *stop. */
__global__ void writer(volatile unsigned long long *stop, volatile unsigned int *answer, int words,
		       unsigned long long period_ns, unsigned long long *writes)
{
	unsigned long long next = globaltimer(), halt = 0;
	unsigned int value = 0;
	int lane = threadIdx.x;

	for (;;) {
		if (lane == 0)
			halt = *stop;
		halt = __shfl_sync(0xffffffffu, halt, 0);
		if (halt)
			break;
		while (globaltimer() < next)
			;
		__syncwarp();	/* the lanes may have left the wait apart: one store of the warp */
		next += period_ns;
		value++;
		for (int w = lane; w < words; w += 32)
			answer[w] = value;
		__threadfence_system();
	}
	if (lane == 0)
		*writes = value;
}

/* The floor: an 8-byte flag each way. */
__global__ void flag_responder(volatile unsigned long long *seq, volatile unsigned long long *host_flag)
{
	unsigned long long last = 0, s;

	for (;;) {
		do
			s = *seq;
		while (s == last);
		*host_flag = s;
		__threadfence_system();
		if (s == ~0ULL)
			return;
		last = s;
	}
}

/* ---- CPU side ---- */

static gdr_mh_t mh;
static char *map;
typedef int (*ref_fn)(void *, const void *, size_t);
static ref_fn ref_avx2, ref_sse41;
static char ref_missing[256];

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/*
 * For the timeout checks of the round-trip loops: 0 at the first call (which
 * starts the clock at *since), then the microseconds since.  The loops call it
 * only every 4096 polls, never in a round trip that answers in time: the
 * clock read (clock_gettime, whose RDTSCP/LFENCE waits for every load in
 * flight) at the start of each round trip both added its cost to the round
 * trip and kept the polls of one round trip from being issued while the
 * previous one's were in flight, which no poller does and gdrcopy_pplat -L
 * (tests/bench/pplat_line.c) does not.
 */
static double slow_for(double *since)
{
	double now = now_us();

	if (*since == 0) {
		*since = now;
		return 0;
	}
	return now - *since;
}

static void die(const char *what)
{
	fprintf(stderr, "pingpong: %s\n", what);
	exit(1);
}

static void check_cuda(cudaError_t e, const char *what)
{
	if (e != cudaSuccess) {
		fprintf(stderr, "pingpong: %s: %s\n", what, cudaGetErrorString(e));
		exit(1);
	}
}

static void bar_store64(size_t offset, uint64_t value)
{
	*(volatile uint64_t *)(map + offset) = value;
	_mm_sfence();
}

__attribute__((target("sse4.1"))) static void loop16(void *d, const void *s, size_t n)
{
	for (size_t i = 0; i < n; i += 16)
		_mm_storeu_si128((__m128i *)((char *)d + i), _mm_stream_load_si128((__m128i *)((char *)s + i)));
	_mm_sfence();
}

__attribute__((target("avx2"))) static void loop32(void *d, const void *s, size_t n)
{
	for (size_t i = 0; i < n; i += 32)
		_mm256_storeu_si256((__m256i *)((char *)d + i), _mm256_stream_load_si256((__m256i *)((char *)s + i)));
	_mm_sfence();
}

__attribute__((target("avx512f"))) static void loop64(void *d, const void *s, size_t n)
{
	for (size_t i = 0; i < n; i += 64)
		_mm512_storeu_si512((char *)d + i, _mm512_stream_load_si512((void *)((char *)s + i)));
	_mm_sfence();
}

/*
 * Two other ways to read whole lines with 64-byte loads (issue 39's 256 B
 * shape, where the 32-byte loads that tear were faster): ordinary aligned
 * loads instead of streaming ones, and streaming loads of the last line first.
 */
__attribute__((target("avx512f"))) static void loop64plain(void *d, const void *s, size_t n)
{
	for (size_t i = 0; i < n; i += 64)
		_mm512_storeu_si512((char *)d + i, _mm512_load_si512((const void *)((const char *)s + i)));
	_mm_sfence();
}

__attribute__((target("avx512f"))) static void loop64back(void *d, const void *s, size_t n)
{
	for (size_t i = n; i >= 64; i -= 64)
		_mm512_storeu_si512((char *)d + i - 64, _mm512_stream_load_si512((void *)((char *)s + i - 64)));
	_mm_sfence();
}

static void read_ours(void *d, const void *s, size_t n) { gdr_copy_from_mapping(mh, d, s, n); }
static void read_exported(void *d, const void *s, size_t n) { gdr_copy_from_mapped_memory(GDR_MAPPING_TYPE_WC, d, s, n); }
static void read_memcpy(void *d, const void *s, size_t n) { memcpy(d, s, n); }
static void read_reference(void *d, const void *s, size_t n)
{
	if (n % 32 == 0)
		ref_avx2(d, s, n);
	else
		ref_sse41(d, s, n);
	_mm_sfence();
}

struct routine {
	const char *name;
	void (*read)(void *, const void *, size_t);
	size_t min_size;	/* loops of wide loads need a whole load's bytes */
};

static const struct routine routines[] = {
	{ "ours", read_ours, 1 },	    { "exported", read_exported, 1 }, { "reference", read_reference, 1 },
	{ "loop16", loop16, 16 },	    { "loop32", loop32, 32 },	      { "loop64", loop64, 64 },
	{ "loop64plain", loop64plain, 64 }, { "loop64back", loop64back, 64 }, { "memcpy", read_memcpy, 1 },
};
#define NROUTINES (sizeof(routines) / sizeof(routines[0]))

/* Build NVIDIA's read routines from the checkout into a temporary library and load them. */
static void load_reference(const char *checkout)
{
	char lib[] = "/tmp/pingpong-reference-XXXXXX", cmd[2048];
	int fd;
	void *h;

	if (!checkout) {
		snprintf(ref_missing, sizeof(ref_missing), "no checkout named (-R)");
		return;
	}
	snprintf(cmd, sizeof(cmd), "%s/src/memcpy_avx2.c", checkout);
	if (access(cmd, R_OK)) {
		snprintf(ref_missing, sizeof(ref_missing), "%.200s has no src/memcpy_avx2.c", checkout);
		return;
	}
	fd = mkstemp(lib);
	if (fd < 0)
		die("mkstemp failed");
	close(fd);
	snprintf(cmd, sizeof(cmd),
		 "cc -O2 -mavx2 -msse4.1 -shared -fPIC -o %s %s/src/memcpy_avx2.c %s/src/memcpy_sse41.c", lib,
		 checkout, checkout);
	if (system(cmd)) {
		snprintf(ref_missing, sizeof(ref_missing), "building %.200s/src/memcpy_{avx2,sse41}.c failed", checkout);
		return;
	}
	h = dlopen(lib, RTLD_NOW);
	unlink(lib);
	if (!h) {
		snprintf(ref_missing, sizeof(ref_missing), "dlopen: %.200s", dlerror());
		return;
	}
	ref_avx2 = (ref_fn)dlsym(h, "memcpy_uncached_load_avx2");
	ref_sse41 = (ref_fn)dlsym(h, "memcpy_uncached_load_sse41");
	if (!ref_avx2 || !ref_sse41)
		snprintf(ref_missing, sizeof(ref_missing), "the checkout's library lacks memcpy_uncached_load_{avx2,sse41}");
}

static bool usable(const struct routine *r, size_t n, const char **why)
{
	*why = NULL;
	if (n < r->min_size)
		*why = "narrower than one load";
	else if (r->read == read_reference && ref_missing[0])
		*why = ref_missing;
	return !*why;
}

/* Whether name is in the comma-separated list (NULL: everything is). */
static bool listed(const char *list, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = list; p; p = strchr(p, ',')) {
		if (*p == ',')
			p++;
		if (!strncmp(p, name, len) && (p[len] == ',' || !p[len]))
			return true;
	}
	return !list;
}

static void print_not_run(const char *test, const char *label, int round, const char *name, const struct shape *sh,
			  size_t n, const char *why)
{
	printf("{\"tool\":\"pingpong\",\"test\":\"%s\",\"variant\":\"%s\",\"round\":%d,\"routine\":\"%s\",\"size\":%zu,"
	       "\"shape\":\"%s\",\"not_run\":\"%s\"}\n",
	       test, label, round, name, n, sh ? sh->name : "", why);
}

/* The shape's fields of a record: ,"size":..,"shape":..,"answer":.. */
static void print_shape(const struct shape *sh)
{
	printf("\"size\":%zu,\"shape\":\"%s\",\"answer\":\"%s\",\"answer_bytes\":%zu", sh->size, sh->name, sh->where,
	       sh->answer_len);
}

/*
 * The answer's words as read: whether every one holds the same value
 * (*value, then), and whether a 64-byte line of it (or the whole answer,
 * when shorter) mixed two writes (*torn: words of one line differ).
 */
static bool answer_whole(const struct shape *sh, const uint32_t *entry, uint32_t *value, bool *torn)
{
	const uint32_t *w = entry + sh->answer / 4;
	size_t words = sh->answer_len / 4, line_words = words < 16 ? words : 16;
	bool whole = true;

	*torn = false;
	for (size_t i = 0; i < words; i++) {
		if (w[i] == w[i - i % line_words])
			continue;
		*torn = true;
		return false;
	}
	for (size_t i = line_words; i < words; i += line_words)
		whole &= w[i] == w[0];
	*value = w[0];
	return whole;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The entry as the responder and writer kernels start: the answer 0xff..., the other lines a filler. */
static void reset_entry(void)
{
	memset(map + LINE_OFFSET, 0xff, ENTRY_MAX);
	_mm_sfence();
}

/* Round trips with one routine; the responder is running.  Prints the median bucket mean. */
static void pingpong_routine(const struct routine *r, const struct shape *sh, uint64_t *seq, const char *label,
			     int round)
{
	alignas(64) uint32_t got[ENTRY_MAX / 4];
	double bucket[BUCKETS];
	uint64_t polls = 0, torn = 0;
	int b, t;

	for (b = -1; b < BUCKETS; b++) {
		int trips = b < 0 ? WARM_TRIPS : TRIPS_PER_BUCKET;
		double t0 = now_us();

		for (t = 0; t < trips; t++) {
			uint32_t want = (uint32_t)++*seq, value;
			double started = 0;	/* the clock only in slow round trips (see slow_for) */
			unsigned long spins = 0;
			bool half;

			bar_store64(SEQ_OFFSET, *seq);
			for (;;) {
				r->read(got, map + LINE_OFFSET, sh->size);
				polls += b >= 0;
				if (answer_whole(sh, got, &value, &half)) {
					if (value == want)
						break;
				} else if (half) {
					torn += b >= 0;
				}
				if (!(++spins & 4095) && slow_for(&started) > 1e6)
					die("no answer from the GPU within a second: is the responder running on this memory?");
			}
		}
		if (b >= 0)
			bucket[b] = (now_us() - t0) / trips;
	}
	qsort(bucket, BUCKETS, sizeof(double), cmp_double);
	printf("{\"tool\":\"pingpong\",\"test\":\"pingpong\",\"variant\":\"%s\",\"round\":%d,\"routine\":\"%s\",", label,
	       round, r->name);
	print_shape(sh);
	printf(",\"median_us\":%.4f,\"min_us\":%.4f,\"polls_per_trip\":%.3f,\"torn_polls\":%llu}\n", bucket[BUCKETS / 2],
	       bucket[0], (double)polls / (BUCKETS * TRIPS_PER_BUCKET), (unsigned long long)torn);
}

static void run_pingpong(uint64_t dev, const char *label, int round, const char *only, const char *which)
{
	static uint64_t seq;

	for (size_t s = 0; s < NSHAPES; s++) {
		const struct shape *sh = &shapes[s];

		if (!listed(which, sh->name))
			continue;
		seq = 0;
		bar_store64(SEQ_OFFSET, 0);
		reset_entry();
		responder<<<1, 32>>>((unsigned long long *)(dev + SEQ_OFFSET),
				     (unsigned int *)(dev + LINE_OFFSET + sh->answer), (int)(sh->answer_len / 4));
		check_cuda(cudaGetLastError(), "launching the responder");
		for (size_t i = 0; i < NROUTINES; i++) {
			const char *why;

			if (!listed(only, routines[i].name))
				continue;
			if (!usable(&routines[i], sh->size, &why)) {
				print_not_run("pingpong", label, round, routines[i].name, sh, sh->size, why);
				continue;
			}
			pingpong_routine(&routines[i], sh, &seq, label, round);
		}
		bar_store64(SEQ_OFFSET, ~0ULL);
		check_cuda(cudaDeviceSynchronize(), "the responder");
	}
}

static void run_torn(uint64_t dev, const char *label, int round, const char *only, const char *which)
{
	unsigned long long *writes;

	check_cuda(cudaMalloc(&writes, sizeof(*writes)), "cudaMalloc");
	for (size_t s = 0; s < NSHAPES; s++) {
		const struct shape *sh = &shapes[s];

		if (!listed(which, sh->name))
			continue;
		for (size_t i = 0; i < NROUTINES; i++) {
			const struct routine *r = &routines[i];
			alignas(64) uint32_t got[ENTRY_MAX / 4];
			uint64_t torn = 0, apart = 0, changes = 0;
			uint32_t last = 0, value;
			const char *why;
			double t0, elapsed;
			bool half;

			if (!listed(only, r->name))
				continue;
			if (!usable(r, sh->size, &why)) {
				print_not_run("torn", label, round, r->name, sh, sh->size, why);
				continue;
			}
			bar_store64(STOP_OFFSET, 0);
			reset_entry();
			writer<<<1, 32>>>((unsigned long long *)(dev + STOP_OFFSET),
					  (unsigned int *)(dev + LINE_OFFSET + sh->answer), (int)(sh->answer_len / 4),
					  WRITER_PERIOD_NS, writes);
			check_cuda(cudaGetLastError(), "launching the writer");
			/* Wait for the writer's first writes before counting. */
			t0 = now_us();
			/*
			 * Any untorn read of a written value will do: a routine slower than the
			 * writer's period (memcpy of 256 B) may never see every line equal.
			 */
			for (;;) {
				r->read(got, map + LINE_OFFSET, sh->size);
				if ((answer_whole(sh, got, &value, &half) || !half) && value != 0 &&
				    value <= 0xfff00000u)
					break;
				if (now_us() - t0 > 1e6)
					die("the writer kernel wrote nothing within a second");
			}
			last = value;
			t0 = now_us();
			for (int k = 0; k < TORN_READS; k++) {
				r->read(got, map + LINE_OFFSET, sh->size);
				if (!answer_whole(sh, got, &value, &half))
					half ? torn++ : apart++;
				else if (value != last)
					changes++, last = value;
			}
			elapsed = now_us() - t0;
			bar_store64(STOP_OFFSET, 1);
			check_cuda(cudaDeviceSynchronize(), "the writer");
			printf("{\"tool\":\"pingpong\",\"test\":\"torn\",\"variant\":\"%s\",\"round\":%d,\"routine\":\"%s\",",
			       label, round, r->name);
			print_shape(sh);
			printf(",\"reads\":%d,\"torn\":%llu,\"torn_fraction\":%.5f,\"apart_fraction\":%.5f,"
			       "\"values_per_us\":%.4f,\"us_per_read\":%.4f,\"writer_period_ns\":%d}\n",
			       TORN_READS, (unsigned long long)torn, (double)torn / TORN_READS, (double)apart / TORN_READS,
			       changes / elapsed, elapsed / TORN_READS, WRITER_PERIOD_NS);
		}
	}
	cudaFree(writes);
}

/*
 * Reads with nothing writing: back to back (the next read issued at once, as
 * a polling loop issues them), single (each read fenced off from the next
 * and its data used), and back to back over RING_ENTRIES distinct entries in
 * turn (a loop draining a ring), per call, median of bucket means.  The
 * routines take turns bucket by bucket, so that a slow spell of this shared
 * machine falls on all of them alike rather than on whichever ran through it.
 */
static void time_reads(const struct routine *r, size_t n, double *b2b, double *single, double *ring)
{
	alignas(64) uint32_t got[ENTRY_MAX / 4];
	double t0 = now_us();

	for (int k = 0; k < 500; k++)
		r->read(got, map + LINE_OFFSET, n);
	*b2b = (now_us() - t0) / 500;
	t0 = now_us();
	for (int k = 0; k < 100; k++) {
		_mm_mfence();
		_mm_lfence();
		r->read(got, map + LINE_OFFSET, n);
		*(volatile uint32_t *)&got[n / 4 - 1];
		_mm_mfence();
	}
	*single = (now_us() - t0) / 100;
	t0 = now_us();
	for (int k = 0; k < 512; k++)
		r->read(got, map + RING_OFFSET + (size_t)(k % RING_ENTRIES) * RING_STRIDE, n);
	*ring = (now_us() - t0) / 512;
}

/* Whether a shape of this size is among the shapes asked for (NULL: all are). */
static bool size_listed(const char *which, size_t n)
{
	for (size_t s = 0; s < NSHAPES; s++)
		if (shapes[s].size == n && listed(which, shapes[s].name))
			return true;
	return false;
}

static void run_reads(const char *label, int round, const char *only, const char *which)
{
	for (size_t s = 0; s < sizeof(read_sizes) / sizeof(read_sizes[0]); s++) {
		size_t n = read_sizes[s];
		static double b2b[NROUTINES][BUCKETS], single[NROUTINES][BUCKETS], ring[NROUTINES][BUCKETS];
		bool timed[NROUTINES] = { false };
		double ignored_b2b, ignored_single, ignored_ring;
		const char *why;

		if (!size_listed(which, n))
			continue;

		for (size_t i = 0; i < NROUTINES; i++) {
			if (!listed(only, routines[i].name))
				continue;
			if (!usable(&routines[i], n, &why)) {
				print_not_run("reads", label, round, routines[i].name, NULL, n, why);
				continue;
			}
			timed[i] = true;
			time_reads(&routines[i], n, &ignored_b2b, &ignored_single, &ignored_ring);	/* warm-up */
		}
		for (int b = 0; b < BUCKETS; b++)
			for (size_t i = 0; i < NROUTINES; i++)
				if (timed[i])
					time_reads(&routines[i], n, &b2b[i][b], &single[i][b], &ring[i][b]);
		for (size_t i = 0; i < NROUTINES; i++) {
			if (!timed[i])
				continue;
			qsort(b2b[i], BUCKETS, sizeof(double), cmp_double);
			qsort(single[i], BUCKETS, sizeof(double), cmp_double);
			qsort(ring[i], BUCKETS, sizeof(double), cmp_double);
			printf("{\"tool\":\"pingpong\",\"test\":\"reads\",\"variant\":\"%s\",\"round\":%d,\"routine\":\"%s\",\"size\":%zu,"
			       "\"b2b_us\":%.4f,\"single_us\":%.4f,\"ring_us\":%.4f}\n",
			       label, round, routines[i].name, n, b2b[i][BUCKETS / 2], single[i][BUCKETS / 2],
			       ring[i][BUCKETS / 2]);
		}
	}
}

static void run_floor(uint64_t dev, const char *label, int round)
{
	volatile unsigned long long *flag;
	unsigned long long *flag_dev;
	double bucket[BUCKETS];
	uint64_t seq = 0;
	int b, t;

	check_cuda(cudaHostAlloc((void **)&flag, 64, cudaHostAllocMapped), "cudaHostAlloc");
	check_cuda(cudaHostGetDevicePointer((void **)&flag_dev, (void *)flag, 0), "cudaHostGetDevicePointer");
	*flag = 0;
	bar_store64(SEQ_OFFSET, 0);
	flag_responder<<<1, 1>>>((unsigned long long *)(dev + SEQ_OFFSET), flag_dev);
	check_cuda(cudaGetLastError(), "launching the flag responder");
	for (b = -1; b < BUCKETS; b++) {
		int trips = b < 0 ? WARM_TRIPS : TRIPS_PER_BUCKET;
		double t0 = now_us();

		for (t = 0; t < trips; t++) {
			double started = 0;
			unsigned long spins = 0;

			bar_store64(SEQ_OFFSET, ++seq);
			while (*flag != seq)
				if (!(++spins & 4095) && slow_for(&started) > 1e6)
					die("no answer from the flag responder within a second");
		}
		if (b >= 0)
			bucket[b] = (now_us() - t0) / trips;
	}
	bar_store64(SEQ_OFFSET, ~0ULL);
	check_cuda(cudaDeviceSynchronize(), "the flag responder");
	qsort(bucket, BUCKETS, sizeof(double), cmp_double);
	printf("{\"tool\":\"pingpong\",\"test\":\"floor\",\"variant\":\"%s\",\"round\":%d,\"median_us\":%.4f,\"min_us\":%.4f}\n",
	       label, round, bucket[BUCKETS / 2], bucket[0]);
	cudaFreeHost((void *)flag);
}

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [-R gdrcopy-checkout] [-n round] [-l label] [-o routines] [-s shapes] [-t pingpong,torn,floor,reads]\n"
		"  -R  a checkout of NVIDIA's GDRCopy: its read routines are built from it and timed beside ours\n"
		"  -n  the round number to print; -l a label for this run's records (default: default)\n"
		"  -o  time only these routines, comma-separated (ours, exported, reference, loop16, loop32, loop64,\n"
		"      loop64plain, loop64back, memcpy)\n"
		"  -s  only these shapes, comma-separated (16, 32, 64, 128, 128/first, 128/last, 256, 256/first, 256/last);\n"
		"      the reads test takes the sizes of the shapes named\n"
		"  -t  which tests (default: all four)\n"
		"Needs GPU memory mapped by libgdrapi: GDRCOPY_BACKEND=vulkan where gdrdrv cannot load.\n",
		prog);
}

int main(int argc, char **argv)
{
	const char *checkout = NULL, *label = "default", *only = NULL, *which = NULL, *tests = "pingpong,torn,floor,reads";
	uint64_t gpu_ptr;
	void *cpu_ptr, *mapped;
	int round = 1, c, driver = 0;
	gdr_t g;

	while ((c = getopt(argc, argv, "R:n:l:o:s:t:h")) != -1) {
		switch (c) {
		case 'R': checkout = optarg; break;
		case 'n': round = atoi(optarg); break;
		case 'l': label = optarg; break;
		case 'o': only = optarg; break;
		case 's': which = optarg; break;
		case 't': tests = optarg; break;
		default: usage(argv[0]); return c == 'h' ? 0 : 2;
		}
	}
	for (const char *p = which; p; p = strchr(p + 1, ',')) {
		size_t s;

		for (s = 0; s < NSHAPES; s++) {
			size_t len = strlen(shapes[s].name), at = *p == ',' ? 1 : 0;

			if (!strncmp(p + at, shapes[s].name, len) && (p[at + len] == ',' || !p[at + len]))
				break;
		}
		if (s == NSHAPES) {
			fprintf(stderr, "pingpong: -s %s: not a list of shapes\n", which);
			usage(argv[0]);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	check_cuda(cudaSetDevice(0), "cudaSetDevice");
	check_cuda(cudaFree(0), "creating the CUDA context");
	cudaDriverGetVersion(&driver);
	g = gdr_open();
	if (!g)
		die("gdr_open failed (set GDRCOPY_BACKEND=vulkan where gdrdrv cannot load)");
	if (gdr_alloc_mapped(g, MAP_SIZE, &gpu_ptr, &cpu_ptr) || gdr_pin_buffer(g, gpu_ptr, MAP_SIZE, 0, 0, &mh) ||
	    gdr_map(g, mh, &mapped, MAP_SIZE))
		die("gdr_alloc_mapped/gdr_pin_buffer/gdr_map failed");
	map = (char *)mapped;
	load_reference(checkout);
	printf("{\"tool\":\"pingpong\",\"test\":\"setup\",\"variant\":\"%s\",\"round\":%d,\"cuda_driver\":%d,\"reference\":\"%s\","
	       "\"read_wait\":\"%s\",\"poll_reads\":\"%s\"}\n",
	       label, round, driver, ref_missing[0] ? ref_missing : "built",
	       getenv("GDRCOPY_READ_WAIT") ? getenv("GDRCOPY_READ_WAIT") : "",
	       getenv("GDRCOPY_POLL_READS") ? getenv("GDRCOPY_POLL_READS") : "");
	if (strstr(tests, "pingpong"))
		run_pingpong(gpu_ptr, label, round, only, which);
	if (strstr(tests, "torn"))
		run_torn(gpu_ptr, label, round, only, which);
	if (strstr(tests, "floor"))
		run_floor(gpu_ptr, label, round);
	if (strstr(tests, "reads"))
		run_reads(label, round, only, which);
	gdr_unmap(g, mh, mapped, MAP_SIZE);
	gdr_unpin_buffer(g, mh);
	gdr_free_mapped(g, gpu_ptr);
	gdr_close(g);
	return 0;
}
