// SPDX-License-Identifier: MIT
/*
 * Copy-engine throughput on real write-combined BAR memory: GPU memory that
 * the library's Vulkan backend maps through BAR1.  Per routine set and size,
 * it prints the time per call and the bandwidth in each direction.  A store
 * fence follows each copy, as it does in gdr_copy_to_mapping.
 * Needs a GPU with a DEVICE_LOCAL|HOST_VISIBLE Vulkan memory type.  Not
 * part of `make check`.
 * Usage: wc_bench [max size in bytes, default 16 MiB] [routine set...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "copy.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds per call, best of 5 rounds of iters calls each. */
static double time_copy(const struct gdr_copy_routines *r, bool to, char *wc, char *host, size_t size, int iters)
{
	double best = 1e9;
	int round, i;

	for (round = 0; round < 5; round++) {
		double t0 = now(), t;

		for (i = 0; i < iters; i++) {
			if (to)
				gdr_wc_copy_to(r, wc, host, size);
			else
				gdr_wc_copy_from(r, host, wc, size);
			gdr_arch_store_fence();
		}
		t = (now() - t0) / iters;
		if (t < best)
			best = t;
	}
	return best;
}

int main(int argc, char **argv)
{
	size_t max = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)16 << 20;
	const char *const *name;
	uint64_t gpu_ptr;
	char *wc, *host;
	gdr_t g;
	size_t size;

	setenv("GDRCOPY_BACKEND", "vulkan", 0);
	g = gdr_open();
	if (!g) {
		perror("gdr_open (set GDRCOPY_ENABLE_LOGGING=1 to see why)");
		return 2;
	}
	if (gdr_alloc_mapped(g, max, &gpu_ptr, (void **)&wc) != 0 || posix_memalign((void **)&host, 4096, max)) {
		fprintf(stderr, "cannot allocate %zu bytes of BAR-mapped GPU memory\n", max);
		return 2;
	}
	memset(host, 0x5a, max);
	printf("%-10s %10s %12s %10s %12s %10s\n", "set", "size", "to us/call", "to GB/s", "from us/call",
	       "from GB/s");
	for (name = gdr_copy_routine_names; *name; name++) {
		struct gdr_copy_routines r;

		bool wanted = argc <= 2;
		int a;

		for (a = 2; a < argc; a++)
			wanted |= strcmp(argv[a], *name) == 0;
		if (!wanted || !gdr_copy_routines_get(*name, &r))
			continue;
		for (size = 64; size <= max; size *= (size < 4096 ? 64 : 16)) {
			int iters = size <= 65536 ? 2000 : size <= (1 << 20) ? 50 : 5;
			double to = time_copy(&r, true, wc, host, size, iters);
			double from = time_copy(&r, false, wc, host, size, iters > 100 ? iters / 10 : iters);

			printf("%-10s %10zu %12.3f %10.2f %12.3f %10.2f\n", *name, size, to * 1e6, size / to / 1e9,
			       from * 1e6, size / from / 1e9);
		}
	}
	gdr_free_mapped(g, gpu_ptr);
	gdr_close(g);
	return 0;
}
