/* SPDX-License-Identifier: MIT */
/* gdrcopy_pplat's line modes (-L, -W): pplat_line.c. */
#ifndef GDRCOPY_PPLAT_LINE_H
#define GDRCOPY_PPLAT_LINE_H

#include <stdbool.h>

#include "bench_common.h"

/*
 * Shapes, as bits of a mask (bit k: pplat_line_shapes[k]): the entry the CPU
 * polls and where in it the GPU's answer lies.  The first four are the whole
 * line of 16, 32, 64 or 128 bytes ("all"); then the answer in the first or
 * last 64-byte line of a 128 or 256 B entry, and the whole 256 B ("shapes":
 * every one).
 */
struct pplat_line_shape {
	const char *name;	/* as -L and -W take it: 16, 128/first, ... */
	unsigned int size;	/* bytes the CPU polls */
	unsigned int answer;	/* offset of the GPU's answer in them */
	unsigned int answer_len;
};
#define PPLAT_LINE_SIZES 9
#define PPLAT_LINE_WHOLE_MASK 0xfu	/* "all": 16, 32, 64, 128 */
extern const struct pplat_line_shape pplat_line_shapes[PPLAT_LINE_SIZES];

struct pplat_line_opts {
	unsigned int pingpong_sizes;	/* -L: mask of shapes to ping-pong through */
	unsigned int torn_sizes;	/* -W: mask of shapes to read under the GPU writer */
	unsigned int rounds;		/* -R */
	unsigned int period_ns;		/* -w */
	unsigned int reads;		/* -r: reads per torn test */
};

#define PPLAT_LINE_DEFAULT_ROUNDS 5
#define PPLAT_LINE_DEFAULT_PERIOD_NS 1000
#define PPLAT_LINE_DEFAULT_READS 20000

/* -L/-W's argument ("16,32,64,128,128/first,...", "all" or "shapes") to a mask of shapes; exits saying why on bad input. */
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
