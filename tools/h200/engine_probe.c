// SPDX-License-Identifier: MIT
/*
 * engine_probe: what makes a copy through a BAR1 mapping fast or slow, one
 * variable at a time.  Each variant is timed back to back (N calls in a loop,
 * nothing between them: a polling loop) and, for reads, as single calls (each
 * call fenced off from the next).  Variants: the library's entry points, and
 * plain loops with and without each kind of fence.  Rounds are interleaved
 * across variants; the output is the median and range per variant and size.
 *
 *   cc -O2 -o engine_probe tools/h200/engine_probe.c libgdrapi/src/{copy,copy_fast,copy_x86,copy_generic,log}.c \
 *      -Iinclude -Ilibgdrapi/src -I/usr/local/cuda/include \
 *      -Llibgdrapi/build -lgdrapi -L/usr/local/nvidia/lib64 -lcuda -lpthread
 * (the engine's sources are linked in as well, to time its layers one by one)
 *   GDRCOPY_BACKEND=vulkan taskset -c 2 ./engine_probe
 *
 * A diagnostic for tools/h200/run.sh, not a benchmark users compare with:
 * gdrcopy_copylat is that.
 */
#include <cuda.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gdrapi.h"
#include "copy.h"
#include "copy_engine.h"
#include "internal.h"

#define ROUNDS 7
#define MAP_SIZE (1UL << 20)

static gdr_mh_t mh;
static char *map;		/* GPU memory through the mapping */
static _Alignas(64) char host[1 << 16];
static size_t ring_offset;
static int ring;		/* advance through the mapping instead of re-reading one spot */

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static char *target(size_t n)
{
	char *p;

	if (!ring)
		return map;
	if (ring_offset + n > MAP_SIZE)
		ring_offset = 0;
	p = map + ring_offset;
	ring_offset += (n + 63) & ~(size_t)63;
	return p;
}

/* ---- reads ---- */

__attribute__((target("sse4.1"))) static void ntload16(char *d, char *s, size_t n)
{
	for (; n >= 16; n -= 16, d += 16, s += 16)
		_mm_storeu_si128((__m128i *)d, _mm_stream_load_si128((__m128i *)s));
}

__attribute__((target("sse4.1"))) static void ntload16x4(char *d, char *s, size_t n)
{
	for (; n >= 64; n -= 64, d += 64, s += 64) {
		__m128i a = _mm_stream_load_si128((__m128i *)s), b = _mm_stream_load_si128((__m128i *)s + 1);
		__m128i c = _mm_stream_load_si128((__m128i *)s + 2), e = _mm_stream_load_si128((__m128i *)s + 3);

		_mm_storeu_si128((__m128i *)d, a);
		_mm_storeu_si128((__m128i *)d + 1, b);
		_mm_storeu_si128((__m128i *)d + 2, c);
		_mm_storeu_si128((__m128i *)d + 3, e);
	}
	ntload16(d, s, n);
}

__attribute__((target("avx512f"))) static void ntload64(char *d, char *s, size_t n)
{
	for (; n >= 64; n -= 64, d += 64, s += 64)
		_mm512_storeu_si512(d, _mm512_stream_load_si512(s));
	ntload16(d, s, n);
}

__attribute__((target("avx2"))) static void ntload32(char *d, char *s, size_t n)
{
	for (; n >= 32; n -= 32, d += 32, s += 32)
		_mm256_storeu_si256((__m256i *)d, _mm256_stream_load_si256((__m256i *)s));
	ntload16(d, s, n);
}

/* Sixteen 16-byte loads issued before the first store: four lines in flight. */
__attribute__((target("sse4.1"))) static void ntload16_deep(char *d, char *s, size_t n)
{
	for (; n >= 256; n -= 256, d += 256, s += 256) {
		__m128i v[16];
		int i;

		for (i = 0; i < 16; i++)
			v[i] = _mm_stream_load_si128((__m128i *)s + i);
		for (i = 0; i < 16; i++)
			_mm_storeu_si128((__m128i *)d + i, v[i]);
	}
	ntload16x4(d, s, n);
}

/* Ordinary (not streaming) 64-byte loads: they bypass the streaming-load buffer. */
__attribute__((target("avx512f"))) static void plainload64(char *d, char *s, size_t n)
{
	for (; n >= 64; n -= 64, d += 64, s += 64) {
		__m512i v;

		__asm__ volatile("vmovdqu64 (%1), %0" : "=v"(v) : "r"(s) : "memory");
		_mm512_storeu_si512(d, v);
	}
	ntload16(d, s, n);
}

/* Evict the lines just read instead of fencing: does that drop the streaming-load buffer? */
__attribute__((target("clflushopt"))) static void flush_lines(char *s, size_t n)
{
	size_t off;

	for (off = 0; off < n; off += 64)
		_mm_clflushopt(s + off);
}

static void r_lib(size_t n) { gdr_copy_from_mapping(mh, host, target(n), n); }
static void r_type(size_t n) { gdr_copy_from_mapped_memory(GDR_MAPPING_TYPE_WC, host, target(n), n); }
static void r_nt(size_t n) { ntload16(host, target(n), n); }
static void r_nt_sfence(size_t n) { ntload16(host, target(n), n); _mm_sfence(); }
static void r_nt_lfence(size_t n) { ntload16(host, target(n), n); _mm_lfence(); }
static void r_nt_mfence(size_t n) { ntload16(host, target(n), n); _mm_mfence(); }
static void r_ntx4_sfence(size_t n) { ntload16x4(host, target(n), n); _mm_sfence(); }
static void r_nt64_sfence(size_t n) { ntload64(host, target(n), n); _mm_sfence(); }
static void r_nt64_nofence(size_t n) { ntload64(host, target(n), n); }
static void r_nt32_sfence(size_t n) { ntload32(host, target(n), n); _mm_sfence(); }
static void r_nt16deep_sfence(size_t n) { ntload16_deep(host, target(n), n); _mm_sfence(); }
static void r_plain64_nofence(size_t n) { plainload64(host, target(n), n); }
static void r_plain64_sfence(size_t n) { plainload64(host, target(n), n); _mm_sfence(); }
static void r_nt64_clflushopt(size_t n)
{
	char *s = target(n);

	ntload64(host, s, n);
	flush_lines(s, n);
}
/* Streaming and ordinary loads by turns: two kinds of buffer, so two reads of a line in flight? */
static void r_nt64_plain64_alternate(size_t n)
{
	static unsigned turn;

	if (turn++ & 1)
		plainload64(host, target(n), n);
	else {
		ntload64(host, target(n), n);
		_mm_sfence();
	}
}
static void r_bounce_sfence(size_t n)
{
	_Alignas(64) char bounce[4096];

	ntload16x4(bounce, target(n), n);
	memcpy(host, bounce, n);
	_mm_sfence();
}
static void r_memcpy(size_t n) { memcpy(host, target(n), n); }

/*
 * The API's handle checks, modelled: a record in ordinary memory read on
 * every call (as gdr_copy_from_mapping reads the buffer's), before the
 * streaming load or after it.  Which of them costs a back-to-back 16-byte
 * read its overlap with the next call's?
 */
static struct {
	_Alignas(64) unsigned long handle;
	char *map_va;
	size_t map_size;
	int type;
	unsigned int fork_generation;
} record;
static unsigned int fork_count;

static void record_fill(void)
{
	if (!record.map_va) {
		record.handle = 0x1000001;
		record.map_va = map;
		record.map_size = MAP_SIZE;
		record.type = GDR_MAPPING_TYPE_WC;
	}
}

static int record_ok(unsigned long h, const char *s, size_t n)
{
	return record.handle == h && record.fork_generation == fork_count && record.map_va && s >= record.map_va &&
	       (size_t)(s - record.map_va) + n <= record.map_size && record.type == GDR_MAPPING_TYPE_WC;
}

__attribute__((noinline, target("sse4.1"))) static void checked_before(unsigned long h, char *d, char *s, size_t n)
{
	if (!record_ok(h, s, n))
		return;
	ntload16(d, s, n);
	_mm_sfence();
}

__attribute__((noinline, target("sse4.1"))) static void handle_only_before(unsigned long h, char *d, char *s, size_t n)
{
	if (record.handle != h)
		return;
	ntload16(d, s, n);
	_mm_sfence();
}

/* The first 16 bytes loaded before the checks (the rest after): a model only, it loads unchecked. */
__attribute__((noinline, target("sse4.1"))) static void checked_after(unsigned long h, char *d, char *s, size_t n)
{
	__m128i first = _mm_stream_load_si128((__m128i *)s);

	if (!record_ok(h, s, n))
		return;
	_mm_storeu_si128((__m128i *)d, first);
	ntload16(d + 16, s + 16, n - 16);
	_mm_sfence();
}

static void r_checked_before(size_t n) { record_fill(); checked_before(0x1000001, host, target(n), n); }
static void r_handle_only_before(size_t n) { record_fill(); handle_only_before(0x1000001, host, target(n), n); }
static void r_checked_after(size_t n) { record_fill(); checked_after(0x1000001, host, target(n), n); }

/* The engine's own layers, linked into this program. */
static struct gdr_copy_routines best;
static void r_engine_core(size_t n) { gdr_wc_copy_from(&best, host, target(n), n); _mm_sfence(); }
static void r_engine_type(size_t n) { gdr_copy_from_type(GDR_MAPPING_TYPE_WC, host, target(n), n); }
static void w_engine_core(size_t n) { gdr_wc_copy_to(&best, target(n), host, n); _mm_sfence(); }

/* ---- writes ---- */

static void ntstore16(char *d, const char *s, size_t n)
{
	for (; n >= 16; n -= 16, d += 16, s += 16)
		_mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
}

__attribute__((target("avx512f"))) static void ntstore64(char *d, const char *s, size_t n)
{
	for (; n >= 64; n -= 64, d += 64, s += 64)
		_mm512_stream_si512((__m512i *)d, _mm512_loadu_si512(s));
	ntstore16(d, s, n);
}

static void small_tail(char *d, const char *s, size_t n)
{
	for (; n >= 8; n -= 8, d += 8, s += 8)
		*(volatile uint64_t *)d = *(const uint64_t *)s;
	for (; n; n--, d++, s++)
		*(volatile char *)d = *s;
}

static void w_lib(size_t n) { gdr_copy_to_mapping(mh, target(n), host, n); }
static void w_type(size_t n) { gdr_copy_to_mapped_memory(GDR_MAPPING_TYPE_WC, target(n), host, n); }
static void w_memcpy_sfence(size_t n) { memcpy(target(n), host, n); _mm_sfence(); }
static void w_nt16_sfence(size_t n)
{
	char *d = target(n);

	ntstore16(d, host, n & ~(size_t)15);
	small_tail(d + (n & ~(size_t)15), host + (n & ~(size_t)15), n & 15);
	_mm_sfence();
}
static void w_nt64_sfence(size_t n)
{
	char *d = target(n);

	ntstore64(d, host, n & ~(size_t)15);
	small_tail(d + (n & ~(size_t)15), host + (n & ~(size_t)15), n & 15);
	_mm_sfence();
}
static void w_nt64_nofence(size_t n)
{
	char *d = target(n);

	ntstore64(d, host, n & ~(size_t)15);
	small_tail(d + (n & ~(size_t)15), host + (n & ~(size_t)15), n & 15);
}

struct variant {
	const char *name;
	void (*fn)(size_t);
	int write;
	size_t min_size;
};

static const struct variant variants[] = {
	{ "read gdr_copy_from_mapping", r_lib, 0, 1 },
	{ "read gdr_copy_from_mapped_memory", r_type, 0, 1 },
	{ "read ntload16 nofence", r_nt, 0, 16 },
	{ "read ntload16 sfence", r_nt_sfence, 0, 16 },
	{ "read ntload16 lfence", r_nt_lfence, 0, 16 },
	{ "read ntload16 mfence", r_nt_mfence, 0, 16 },
	{ "read ntload16x4 sfence", r_ntx4_sfence, 0, 16 },
	{ "read ntload64 sfence", r_nt64_sfence, 0, 16 },
	{ "read ntload64 nofence", r_nt64_nofence, 0, 16 },
	{ "read ntload32 sfence", r_nt32_sfence, 0, 16 },
	{ "read ntload16 deep sfence", r_nt16deep_sfence, 0, 16 },
	{ "read plain64 nofence", r_plain64_nofence, 0, 16 },
	{ "read plain64 sfence", r_plain64_sfence, 0, 16 },
	{ "read ntload64 clflushopt", r_nt64_clflushopt, 0, 16 },
	{ "read ntload64/plain64 by turns", r_nt64_plain64_alternate, 0, 16 },
	{ "read bounce+memcpy sfence", r_bounce_sfence, 0, 16 },
	{ "read memcpy", r_memcpy, 0, 1 },
	{ "read ntload16 sfence, checks before", r_checked_before, 0, 16 },
	{ "read ntload16 sfence, handle before", r_handle_only_before, 0, 16 },
	{ "read ntload16 sfence, checks after", r_checked_after, 0, 16 },
	{ "read engine core (linked in)", r_engine_core, 0, 1 },
	{ "read engine by type (linked in)", r_engine_type, 0, 1 },
	{ "write gdr_copy_to_mapping", w_lib, 1, 1 },
	{ "write gdr_copy_to_mapped_memory", w_type, 1, 1 },
	{ "write memcpy sfence", w_memcpy_sfence, 1, 1 },
	{ "write nt16 sfence", w_nt16_sfence, 1, 1 },
	{ "write nt64 sfence", w_nt64_sfence, 1, 1 },
	{ "write nt64 nofence", w_nt64_nofence, 1, 1 },
	{ "write engine core (linked in)", w_engine_core, 1, 1 },
};
#define NVARIANTS (sizeof(variants) / sizeof(variants[0]))

static const size_t read_sizes[] = { 1, 16, 64, 128, 256, 512, 4096 };
static const size_t write_sizes[] = { 1, 8, 64, 256, 1024, 4096 };
#define NSIZES 7

/* Back to back: calls issued one after another, the loop's mean per call. */
static double time_b2b(const struct variant *v, size_t n, int calls)
{
	double t0 = now_us();
	int i;

	for (i = 0; i < calls; i++)
		v->fn(n);
	return (now_us() - t0) / calls;
}

/* Single calls: each one starts after the last has completed, its data used. */
static double time_single(const struct variant *v, size_t n, int calls)
{
	double sum = 0;
	int i;

	for (i = 0; i < calls; i++) {
		double t0;

		_mm_mfence();
		_mm_lfence();
		t0 = now_us();
		v->fn(n);
		*(volatile char *)&host[n - 1];
		_mm_mfence();
		sum += now_us() - t0;
	}
	return sum / calls;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(void)
{
	static double t[2][NVARIANTS][NSIZES][ROUNDS];
	uint64_t gpu_ptr;
	void *cpu_ptr, *mapped;
	CUdevice dev;
	CUcontext ctx;
	gdr_t g;
	int r, mode, s;
	size_t v;

	if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx))
		return fprintf(stderr, "CUDA init failed\n"), 1;
	g = gdr_open();
	if (!g || gdr_alloc_mapped(g, MAP_SIZE, &gpu_ptr, &cpu_ptr) ||
	    gdr_pin_buffer(g, gpu_ptr, MAP_SIZE, 0, 0, &mh) || gdr_map(g, mh, &mapped, MAP_SIZE))
		return fprintf(stderr, "gdr setup failed (set GDRCOPY_BACKEND=vulkan)\n"), 1;
	map = mapped;
	gdr_copy_routines_best(&best);
	setvbuf(stdout, NULL, _IOLBF, 0);
	memset(host, 0x5a, sizeof(host));
	for (ring = 0; ring < 2; ring++) {
		for (r = 0; r < ROUNDS; r++)
			for (v = 0; v < NVARIANTS; v++)
				for (s = 0; s < NSIZES; s++) {
					const size_t *sizes = variants[v].write ? write_sizes : read_sizes;
					size_t n = s < (variants[v].write ? 6 : 7) ? sizes[s] : 0;
					int calls;

					if (!n || n < variants[v].min_size)
						continue;
					calls = variants[v].write ? 4000 : (n >= 4096 ? 40 : 400);
					t[0][v][s][r] = time_b2b(&variants[v], n, calls);
					if (!variants[v].write)
						t[1][v][s][r] = time_single(&variants[v], n, calls / 4);
				}
		for (mode = 0; mode < 2; mode++)
			for (v = 0; v < NVARIANTS; v++) {
				if (mode == 1 && variants[v].write)
					continue;
				printf("%-7s %-4s %-34s", mode ? "single" : "b2b", ring ? "ring" : "same", variants[v].name);
				for (s = 0; s < (variants[v].write ? 6 : 7); s++) {
					size_t n = variants[v].write ? write_sizes[s] : read_sizes[s];
					double *x = t[mode][v][s];

					if (n < variants[v].min_size) {
						printf("  %5zu: %-19s", n, "-");
						continue;
					}
					qsort(x, ROUNDS, sizeof(double), cmp_double);
					printf("  %5zu: %.3f [%.3f-%.3f]", n, x[ROUNDS / 2], x[0], x[ROUNDS - 1]);
				}
				printf("\n");
			}
	}
	gdr_unmap(g, mh, mapped, MAP_SIZE);
	gdr_unpin_buffer(g, mh);
	gdr_free_mapped(g, gpu_ptr);
	gdr_close(g);
	return 0;
}
