// SPDX-License-Identifier: MIT
/*
 * gdrdrv_pinbench - does gdrdrv slow down as one file holds more pins?
 *
 * Measures GDRDRV_IOC_GET_INFO_V2 and mmap+munmap latency on a file holding
 * one pinned buffer, then on the same file holding many (default 10,000),
 * for the oldest and the newest handle, and prints the ratios.  Each figure
 * is the median of several rounds.  A driver that
 * finds handles by walking a list shows a ratio that grows with the pin count.
 * Runs against /dev/gdrdrv and /dev/softgpu directly (inside the test VM).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../../include/uapi/gdrdrv.h"
#include "../softgpu/include/softgpu_uapi.h"

struct options {
	unsigned int pins;
	unsigned int info_iters;
	unsigned int map_iters;
	bool yaml;
};

struct sample {
	const char *label;
	unsigned int pins;
	double info_us;
	double map_us;
};

static void die(const char *what)
{
	fprintf(stderr, "gdrdrv_pinbench: %s: %m\n", what);
	exit(1);
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static uint64_t pin(int gd, uint64_t va)
{
	struct gdrdrv_pin_buffer_v2 p = { .addr = va, .size = GDRDRV_GPU_PAGE_SIZE };

	if (ioctl(gd, GDRDRV_IOC_PIN_BUFFER_V2, &p))
		die("GDRDRV_IOC_PIN_BUFFER_V2");
	return p.handle;
}

static double time_info(int gd, uint64_t handle, unsigned int iters)
{
	struct gdrdrv_get_info_v2 info = { .handle = handle };
	double t0 = now_us();

	for (unsigned int i = 0; i < iters; i++) {
		info.handle = handle;
		if (ioctl(gd, GDRDRV_IOC_GET_INFO_V2, &info))
			die("GDRDRV_IOC_GET_INFO_V2");
	}
	return (now_us() - t0) / iters;
}

static double time_map(int gd, uint64_t handle, unsigned int iters)
{
	long page = sysconf(_SC_PAGESIZE);
	double t0 = now_us();

	for (unsigned int i = 0; i < iters; i++) {
		void *p = mmap(NULL, GDRDRV_GPU_PAGE_SIZE, PROT_READ | PROT_WRITE,
			       MAP_SHARED, gd, (off_t)(handle * page));

		if (p == MAP_FAILED)
			die("mmap of a pinned buffer");
		munmap(p, GDRDRV_GPU_PAGE_SIZE);
	}
	return (now_us() - t0) / iters;
}

#define ROUNDS 7

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * Median over ROUNDS rounds of per-call latency: one slow round (a timer
 * tick, TCG translating code for the first time) does not move it.
 */
static double measure(double (*fn)(int, uint64_t, unsigned int), int gd,
		      uint64_t handle, unsigned int iters)
{
	double r[ROUNDS];
	unsigned int per_round = (iters + ROUNDS - 1) / ROUNDS;

	fn(gd, handle, per_round);	/* warm-up */
	for (int i = 0; i < ROUNDS; i++)
		r[i] = fn(gd, handle, per_round);
	qsort(r, ROUNDS, sizeof(r[0]), cmp_double);
	return r[ROUNDS / 2];
}

static void usage(const char *prog, const struct options *d)
{
	printf("usage: %s [-n PINS] [-i ITERS] [-I ITERS] [-m]\n"
	       "  -n PINS   pins held in the second round (default %u)\n"
	       "  -i ITERS  GET_INFO_V2 calls per measurement (default %u)\n"
	       "  -I ITERS  mmap+munmap pairs per measurement (default %u)\n"
	       "  -m        machine-readable output (YAML)\n",
	       prog, d->pins, d->info_iters, d->map_iters);
}

int main(int argc, char **argv)
{
	const struct options defaults = { .pins = 10000, .info_iters = 10000, .map_iters = 1000 };
	struct options o = defaults;
	struct softgpu_alloc alloc = { .size = GDRDRV_GPU_PAGE_SIZE };
	struct sample s[4], base;
	uint64_t first, last = 0, *extra;
	int opt, sg, gd;

	while ((opt = getopt(argc, argv, "n:i:I:mh")) != -1) {
		switch (opt) {
		case 'n': o.pins = strtoul(optarg, NULL, 0); break;
		case 'i': o.info_iters = strtoul(optarg, NULL, 0); break;
		case 'I': o.map_iters = strtoul(optarg, NULL, 0); break;
		case 'm': o.yaml = true; break;
		case 'h': usage(argv[0], &defaults); return 0;
		default: usage(argv[0], &defaults); return 2;
		}
	}
	if (o.pins < 2 || !o.info_iters || !o.map_iters) {
		fprintf(stderr, "gdrdrv_pinbench: -n must be >= 2, -i and -I >= 1\n");
		return 2;
	}

	sg = open(SOFTGPU_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (sg < 0)
		die("open " SOFTGPU_DEVICE_PATH " (load softgpu.ko)");
	gd = open("/dev/gdrdrv", O_RDWR | O_CLOEXEC);
	if (gd < 0)
		die("open /dev/gdrdrv (load gdrdrv.ko)");
	if (ioctl(sg, SOFTGPU_IOC_ALLOC, &alloc))
		die("SOFTGPU_IOC_ALLOC");

	first = pin(gd, alloc.va);
	s[0] = (struct sample){ "one pin", 1,
				measure(time_info, gd, first, o.info_iters),
				measure(time_map, gd, first, o.map_iters) };

	extra = calloc(o.pins, sizeof(*extra));
	if (!extra)
		die("calloc");
	for (unsigned int i = 1; i < o.pins; i++)
		extra[i] = last = pin(gd, alloc.va);
	s[1] = (struct sample){ "oldest of many", o.pins,
				measure(time_info, gd, first, o.info_iters),
				measure(time_map, gd, first, o.map_iters) };
	s[2] = (struct sample){ "newest of many", o.pins,
				measure(time_info, gd, last, o.info_iters),
				measure(time_map, gd, last, o.map_iters) };

	/* One pin again: the first round can be slowed by the machine warming up. */
	for (unsigned int i = 1; i < o.pins; i++) {
		struct gdrdrv_unpin_buffer u = { .handle = extra[i] };

		if (ioctl(gd, GDRDRV_IOC_UNPIN_BUFFER, &u))
			die("GDRDRV_IOC_UNPIN_BUFFER");
	}
	free(extra);
	s[3] = (struct sample){ "one pin, again", 1,
				measure(time_info, gd, first, o.info_iters),
				measure(time_map, gd, first, o.map_iters) };
	/* Ratios against the faster baseline: they can only err on the high side. */
	base = s[0];
	if (s[3].info_us < base.info_us)
		base.info_us = s[3].info_us;
	if (s[3].map_us < base.map_us)
		base.map_us = s[3].map_us;

	if (o.yaml) {
		printf("gdrdrv_pinbench:\n  pins: %u\n  info_iters: %u\n  map_iters: %u\n",
		       o.pins, o.info_iters, o.map_iters);
		for (int i = 0; i < 4; i++)
			printf("  - {handle: \"%s\", pins: %u, get_info_us: %.3f, mmap_munmap_us: %.3f}\n",
			       s[i].label, s[i].pins, s[i].info_us, s[i].map_us);
		printf("  get_info_ratio_oldest: %.2f\n  mmap_ratio_oldest: %.2f\n",
		       s[1].info_us / base.info_us, s[1].map_us / base.map_us);
		printf("  get_info_ratio_newest: %.2f\n  mmap_ratio_newest: %.2f\n",
		       s[2].info_us / base.info_us, s[2].map_us / base.map_us);
	} else {
		printf("%-16s %8s %16s %20s\n", "handle", "pins", "get_info(us)", "mmap+munmap(us)");
		for (int i = 0; i < 4; i++)
			printf("%-16s %8u %16.3f %20.3f\n", s[i].label, s[i].pins,
			       s[i].info_us, s[i].map_us);
		printf("ratios use the faster of the two one-pin rounds\n");
		printf("ratio %u pins / 1 pin (oldest handle): get_info %.2fx, mmap+munmap %.2fx\n",
		       o.pins, s[1].info_us / base.info_us, s[1].map_us / base.map_us);
		printf("ratio %u pins / 1 pin (newest handle): get_info %.2fx, mmap+munmap %.2fx\n",
		       o.pins, s[2].info_us / base.info_us, s[2].map_us / base.map_us);
	}
	/* Closing the file releases every pin. */
	close(gd);
	close(sg);
	return 0;
}
