// SPDX-License-Identifier: MIT
/*
 * Throughput of each copy routine set on ordinary (write-back) memory:
 * a smoke test that every set runs on this CPU, not a measure of BAR
 * performance (WC memory behaves very differently).
 * Usage: copy_bench [size in bytes, default 16 MiB] [iterations, default 20]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "copy.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)16 << 20;
	int iters = argc > 2 ? atoi(argv[2]) : 20;
	const char *const *name;
	char *a, *b;

	if (posix_memalign((void **)&a, 4096, size) || posix_memalign((void **)&b, 4096, size))
		return 1;
	memset(a, 1, size);
	memset(b, 2, size);
	printf("%-10s %12s %12s   (%zu bytes, %d iterations, write-back memory)\n", "set", "to GB/s", "from GB/s",
	       size, iters);
	for (name = gdr_copy_routine_names; *name; name++) {
		struct gdr_copy_routines r;
		double t0, t_to, t_from;
		int i;

		if (!gdr_copy_routines_get(*name, &r)) {
			printf("%-10s %12s %12s\n", *name, "n/a", "n/a");
			continue;
		}
		gdr_wc_copy_to(&r, b, a, size);
		t0 = now();
		for (i = 0; i < iters; i++)
			gdr_wc_copy_to(&r, b, a, size);
		gdr_arch_store_fence();
		t_to = now() - t0;
		t0 = now();
		for (i = 0; i < iters; i++)
			gdr_wc_copy_from(&r, a, b, size);
		t_from = now() - t0;
		printf("%-10s %12.2f %12.2f\n", *name, size * (double)iters / t_to / 1e9,
		       size * (double)iters / t_from / 1e9);
	}
	free(a);
	free(b);
	return 0;
}
