/* SPDX-License-Identifier: MIT */
/* gdrcopy_pplat's line modes (-L, -W): pplat_line.c. */
#ifndef GDRCOPY_PPLAT_LINE_H
#define GDRCOPY_PPLAT_LINE_H

#include <stdbool.h>

#include "bench_common.h"

/* Line sizes, as bits of a mask: bit k is 16 << k bytes (16, 32, 64, 128). */
#define PPLAT_LINE_SIZES 4

struct pplat_line_opts {
	unsigned int pingpong_sizes;	/* -L: mask of sizes to ping-pong through */
	unsigned int torn_sizes;	/* -W: mask of sizes to read under the GPU writer */
	unsigned int rounds;		/* -R */
	unsigned int period_ns;		/* -w */
	unsigned int reads;		/* -r: reads per torn test */
};

#define PPLAT_LINE_DEFAULT_ROUNDS 5
#define PPLAT_LINE_DEFAULT_PERIOD_NS 1000
#define PPLAT_LINE_DEFAULT_READS 20000

/* -L/-W's argument ("16,32,64,128" or "all") to a mask of sizes; exits saying why on bad input. */
unsigned int pplat_line_parse_sizes(char opt, const char *arg);

/* What the line modes share with the flag ping-pong's options. */
struct pplat_line_setup {
	CUdevice dev;
	int dev_id;
	const struct bench_alloc *alloc;
	int map_flag;
	bool force_pcie;
	unsigned int timeout_s;
	struct bench_buckets plan;	/* -t: round trips per round and size */
};

/* Run the line modes; returns the exit status. */
int pplat_line_main(const struct pplat_line_opts *lo, const struct pplat_line_setup *setup);

/* The PTX of the line kernels (-K with -L or -W). */
const char *pplat_line_ptx_text(void);

#endif /* GDRCOPY_PPLAT_LINE_H */
