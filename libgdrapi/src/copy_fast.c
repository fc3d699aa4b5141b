// SPDX-License-Identifier: MIT
/*
 * The state of the inline fast path (copy_fast.h): the engine's whole-line
 * routines, set by copy.c once it has chosen; and which loads a loop that
 * re-reads the same GPU lines back to back (a poll) should use, decided on
 * this machine by timing both.
 *
 * A 64-byte streaming load of a line waits for the previous load of that
 * line to complete, so a poll with it costs one PCIe round trip.  Four
 * 16-byte loads of the line overlap with the previous poll's on some
 * machines (0.3 us a poll on an H200, against 1.05) and not on others
 * (1.6 us); they also risk a second round trip for a read that is waited on.
 * So a process starts with 64-byte loads, and the first thread that polls
 * times its polls with each kind in turns (POLL_TURN polls at a time, a few
 * hundred polls in all, well under a millisecond), then keeps 16-byte loads
 * only if they were clearly faster.  GDRCOPY_POLL_READS=lines|blocks|auto
 * overrides this (gdr_poll_setup reads it).
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "copy_fast.h"
#include "internal.h"

atomic_bool gdr_copy_fast_ok;
gdr_block_copy_fn gdr_fast_lines_to, gdr_fast_lines_from;

#if defined(__x86_64__)

atomic_int gdr_poll_method;
gdr_block_copy_fn gdr_fast_poll_from;
__thread struct gdr_poll_watch gdr_poll_watch;

#define POLL_TURN 16		/* polls with one kind of load before switching */
#define POLL_SETTLE 4		/* first polls of a turn still overlap the other kind's */
#define POLL_SAMPLES 96		/* per kind: six turns of twelve */

static atomic_bool calibration_claimed;
static __thread bool calibrating;	/* this thread times the polls */
static struct {
	uint32_t ticks[2][POLL_SAMPLES];	/* [0] 64-byte loads, [1] 16-byte loads */
	unsigned int count[2];
	unsigned int polls;	/* polls since calibration began; poll i used kind (i / POLL_TURN) & 1 */
} cal;

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

static uint32_t median(uint32_t *v, unsigned int n)
{
	qsort(v, n, sizeof(*v), cmp_u32);
	return v[n / 2];
}

int gdr_poll_choose(uint32_t *lines_ticks, unsigned int n_lines, uint32_t *blocks_ticks, unsigned int n_blocks)
{
	uint64_t lines, blocks;

	if (!n_lines || !n_blocks)
		return GDR_POLL_LINES;
	lines = median(lines_ticks, n_lines);
	blocks = median(blocks_ticks, n_blocks);
	/* Clearly faster (by a fifth) or not at all: 64-byte loads are the safer kind for reads waited on. */
	return blocks * 5 < lines * 4 ? GDR_POLL_BLOCKS : GDR_POLL_LINES;
}

/* One timed poll of the calibration: record the previous poll's period, pick this one's kind. */
static int calibration_step(uint64_t since_last)
{
	bool expected = false;
	int kind, method;

	if (!calibrating) {
		if (atomic_load_explicit(&calibration_claimed, memory_order_relaxed) ||
		    !atomic_compare_exchange_strong(&calibration_claimed, &expected, true))
			return GDR_POLL_LINES;	/* another thread is timing; meanwhile, the default */
		calibrating = true;
	}
	/* since_last is the period of the previous poll (number cal.polls - 1), with its turn's kind. */
	if (cal.polls && (cal.polls - 1) % POLL_TURN >= POLL_SETTLE) {
		int previous = ((cal.polls - 1) / POLL_TURN) & 1;

		if (cal.count[previous] < POLL_SAMPLES)
			cal.ticks[previous][cal.count[previous]++] = (uint32_t)since_last;
	}
	if (cal.count[0] == POLL_SAMPLES && cal.count[1] == POLL_SAMPLES) {
		method = gdr_poll_choose(cal.ticks[0], POLL_SAMPLES, cal.ticks[1], POLL_SAMPLES);
		gdr_info("copy engine: polls of whole lines: %s (median period %u TSC ticks with 16-byte loads, %u with 64-byte ones; GDRCOPY_POLL_READS overrides)",
			 method == GDR_POLL_BLOCKS ? "16-byte streaming loads" : "64-byte streaming loads",
			 cal.ticks[1][POLL_SAMPLES / 2], cal.ticks[0][POLL_SAMPLES / 2]);
		atomic_store_explicit(&gdr_poll_method, method, memory_order_relaxed);
		calibrating = false;
		return method;
	}
	kind = (cal.polls++ / POLL_TURN) & 1;
	return kind ? GDR_POLL_BLOCKS : GDR_POLL_LINES;
}

/* The inline path's poll while undecided (it reads the decided kinds itself). */
void gdr_poll_read(void *dst, const void *src, size_t n, uint64_t since_last)
{
	if (calibration_step(since_last) == GDR_POLL_BLOCKS)
		gdr_fast_poll_from(dst, src, n);
	else
		gdr_fast_lines_from(dst, src, n);
}

int gdr_poll_method_from_env(const char *value, bool can_time)
{
	if (!can_time)
		return GDR_POLL_LINES;
	if (!value || !*value || !strcmp(value, "auto"))
		return GDR_POLL_UNDECIDED;
	if (!strcmp(value, "lines"))
		return GDR_POLL_LINES;
	if (!strcmp(value, "blocks"))
		return GDR_POLL_BLOCKS;
	gdr_warn("copy engine: GDRCOPY_POLL_READS=%s is not one of lines, blocks, auto; using auto", value);
	return GDR_POLL_UNDECIDED;
}

void gdr_poll_setup(gdr_block_copy_fn poll16)
{
	gdr_fast_poll_from = poll16;
	atomic_store_explicit(&gdr_poll_method, gdr_poll_method_from_env(getenv("GDRCOPY_POLL_READS"), poll16 != NULL),
			      memory_order_relaxed);
}

#else

void gdr_poll_setup(gdr_block_copy_fn poll16)
{
	(void)poll16;	/* only the x86 inline path tells polls from other reads */
}

#endif /* x86 */
