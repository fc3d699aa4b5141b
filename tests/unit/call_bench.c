// SPDX-License-Identifier: MIT
/*
 * The cost of one small gdr_copy_from_mapping call on the CPU: the fake
 * gdrdrv maps ordinary RAM as "WC", so every call takes the library's real
 * path (handle lookup, fork check, range check, inline copy) and only the
 * memory is fast.  What is left after subtracting the load itself is what a
 * polling loop pays per call on top of the read (issue 26: 16 and 32 B reads
 * back to back trailed NVIDIA's routine on the H200).
 *
 * Usage: call_bench [calls per sample, default 20000]
 * Prints ns per call for gdr_copy_from_mapping, gdr_copy_from_mapped_memory
 * (no handle) and one bare streaming load, at 8..64 B: the least of 201
 * samples (the fastest is the one least disturbed by other processes).
 */
#include <immintrin.h>
#include <time.h>

#include "test_common.h"

#define SAMPLES 201

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

enum way { API, EXPORTED, BARE };

static gdr_mh_t mh;

__attribute__((noinline, target("sse4.1"))) static void bare_read(void *dst, const void *src, size_t n)
{
	size_t i;

	for (i = 0; i < n; i += 16)
		_mm_storeu_si128((__m128i *)((char *)dst + i), _mm_stream_load_si128((__m128i *)((char *)src + i)));
	_mm_sfence();
}

static double ns_per_call(enum way way, const char *src, size_t n, long calls)
{
	_Alignas(64) unsigned char got[64];
	double samples[SAMPLES];
	int s;

	for (s = 0; s < SAMPLES; s++) {
		double t0 = now_ns();
		long k;

		for (k = 0; k < calls; k++) {
			if (way == API)
				gdr_copy_from_mapping(mh, got, src, n);
			else if (way == EXPORTED)
				gdr_copy_from_mapped_memory(GDR_MAPPING_TYPE_WC, got, src, n);
			else
				bare_read(got, src, n);
		}
		samples[s] = (now_ns() - t0) / calls;
	}
	qsort(samples, SAMPLES, sizeof(samples[0]), cmp_double);
	return samples[0];
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 8, 16, 32, 64 };
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	long calls = argc > 1 ? atol(argv[1]) : 20000;
	struct sandbox box;
	char *va;
	size_t i;
	gdr_t g;

	if (calls <= 0) {
		fprintf(stderr, "usage: %s [calls per sample > 0]\n", argv[0]);
		return 2;
	}
	sandbox_init(&box);
	fake_reset(&cfg);
	unsetenv("GDRCOPY_BACKEND");
	g = gdr_open();
	if (!g || gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, 0, &mh) || gdr_map(g, mh, (void **)&va, GPU_PAGE)) {
		fprintf(stderr, "call_bench: cannot open/pin/map through the fake gdrdrv\n");
		return 1;
	}
	memset(va, 0x5a, GPU_PAGE);
	printf("%6s %12s %12s %12s   (ns per call, RAM behind a fake WC mapping, least of %d x %ld calls)\n",
	       "size", "api", "exported", "bare load", SAMPLES, calls);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];

		printf("%6zu %12.2f %12.2f %12.2f\n", n, ns_per_call(API, va + 128, n, calls),
		       ns_per_call(EXPORTED, va + 128, n, calls), ns_per_call(BARE, va + 128, n, calls));
	}
	gdr_unmap(g, mh, va, GPU_PAGE);
	gdr_unpin_buffer(g, mh);
	gdr_close(g);
	sandbox_cleanup(&box);
	return 0;
}
