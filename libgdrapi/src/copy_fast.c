// SPDX-License-Identifier: MIT
/*
 * The state of the inline fast path (copy_fast.h): the engine's whole-line
 * routines and its single-load read of up to a line, set by copy.c once it
 * has chosen; and which loads a loop that re-reads the same GPU lines back to
 * back (a poll of 128..512 bytes) should use, decided on this machine by
 * timing them.
 *
 * A 64-byte streaming load of a line waits for the previous load of that
 * line to complete, so a poll with it costs one PCIe round trip.  Narrower
 * loads of the line (four 16-byte or two 32-byte ones) overlap with the
 * previous poll's on some machines (0.3 us a poll on an H200, against 1.05)
 * and not on others (1.6 us); they also risk a second round trip for a read
 * that is waited on, and a poll made of several loads of a line can see it
 * half-written.  So reads of up to one line always use one load
 * (gdr_single_load_width) and are never timed here; a process starts
 * multi-line polls with 64-byte loads, and the first thread that polls times
 * its polls with each kind in turns (POLL_TURN polls at a time, a few hundred
 * polls in all, well under a millisecond), then keeps a narrower kind only if
 * it was clearly faster.  GDRCOPY_POLL_READS=lines|halves|blocks|auto
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
atomic_uint gdr_copy_fast_blockers = GDR_FAST_BLOCK_ENGINE;
gdr_block_copy_fn gdr_fast_lines_to, gdr_fast_lines_from;
gdr_small_read_fn gdr_fast_line_read;
gdr_block_copy_fn gdr_fast_read32;

#if defined(__x86_64__)

atomic_int gdr_poll_method;
gdr_block_copy_fn gdr_fast_poll_from, gdr_fast_poll32_from;
unsigned char gdr_fast_read_wait_mode = GDR_READ_WAIT_EACH;
__thread struct gdr_poll_watch gdr_poll_watch;
static unsigned int read_wait_every;	/* N of GDR_READ_WAIT_NTH */
static __thread unsigned int reads_unwaited;	/* GDR_READ_WAIT_NTH: this thread's reads since its last wait */
static __thread const void *last_read;	/* GDR_READ_WAIT_REPEAT: this thread's previous read of one line */

#define POLL_TURN 16		/* polls with one kind of load before switching */
#define POLL_SETTLE 4		/* first polls of a turn still overlap the other kind's */
#define POLL_SAMPLES 96		/* per kind: eight turns of twelve */

/* The kinds timed, in turns: index into cal.ticks. */
static const int poll_kinds[GDR_POLL_KINDS] = { GDR_POLL_LINES, GDR_POLL_HALVES, GDR_POLL_BLOCKS };
static unsigned int poll_kinds_timed;	/* 2 without 32-byte poll loads (halves last in turn order: skipped) */

static atomic_bool calibration_claimed;
static __thread bool calibrating;	/* this thread times the polls */
static struct {
	uint32_t ticks[GDR_POLL_KINDS][POLL_SAMPLES];
	unsigned int count[GDR_POLL_KINDS];
	unsigned int polls;	/* polls since calibration began; poll i used kind turn_kind(i) */
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

int gdr_poll_choose(uint32_t *ticks[GDR_POLL_KINDS], const unsigned int count[GDR_POLL_KINDS])
{
	uint64_t lines, best = UINT64_MAX;
	int choice = GDR_POLL_LINES;
	unsigned int k;

	if (!count[0])
		return GDR_POLL_LINES;
	lines = median(ticks[0], count[0]);
	for (k = 1; k < GDR_POLL_KINDS; k++) {
		uint64_t m;

		if (!count[k])
			continue;
		m = median(ticks[k], count[k]);
		if (m < best) {
			best = m;
			choice = poll_kinds[k];
		}
	}
	/* Clearly faster (by a fifth) or not at all: 64-byte loads are the safer kind for reads waited on. */
	return best * 5 < lines * 4 ? choice : GDR_POLL_LINES;
}

/* Which kind poll i of the calibration uses (index into poll_kinds). */
static unsigned int turn_kind(unsigned int i)
{
	unsigned int k = (i / POLL_TURN) % poll_kinds_timed;

	return poll_kinds_timed == GDR_POLL_KINDS ? k : (k ? 2 : 0);	/* without halves: lines, blocks */
}

static bool calibration_done(void)
{
	unsigned int k;

	for (k = 0; k < GDR_POLL_KINDS; k++)
		if ((poll_kinds_timed == GDR_POLL_KINDS || k != 1) && cal.count[k] < POLL_SAMPLES)
			return false;
	return true;
}

/* One timed poll of the calibration: record the previous poll's period, pick this one's kind. */
static int calibration_step(uint64_t since_last)
{
	bool expected = false;
	uint32_t *ticks[GDR_POLL_KINDS] = { cal.ticks[0], cal.ticks[1], cal.ticks[2] };
	int method;

	if (!calibrating) {
		if (atomic_load_explicit(&calibration_claimed, memory_order_relaxed) ||
		    !atomic_compare_exchange_strong(&calibration_claimed, &expected, true))
			return GDR_POLL_LINES;	/* another thread is timing; meanwhile, the default */
		calibrating = true;
	}
	/* since_last is the period of the previous poll (number cal.polls - 1), with its turn's kind. */
	if (cal.polls && (cal.polls - 1) % POLL_TURN >= POLL_SETTLE) {
		unsigned int previous = turn_kind(cal.polls - 1);

		if (cal.count[previous] < POLL_SAMPLES)
			cal.ticks[previous][cal.count[previous]++] = (uint32_t)since_last;
	}
	if (calibration_done()) {
		uint32_t lines = 0, halves = 0, blocks = 0;

		method = gdr_poll_choose(ticks, cal.count);
		/* gdr_poll_choose sorted them: the medians are in the middle. */
		lines = cal.ticks[0][POLL_SAMPLES / 2];
		blocks = cal.ticks[2][POLL_SAMPLES / 2];
		if (cal.count[1])
			halves = cal.ticks[1][POLL_SAMPLES / 2];
		gdr_info("copy engine: polls of 128-512 B of whole lines: %s (median period %u TSC ticks with 64-byte loads, %u with 32-byte ones, %u with 16-byte ones; 0: not timed; GDRCOPY_POLL_READS overrides)",
			 method == GDR_POLL_BLOCKS ? "16-byte streaming loads" :
			 method == GDR_POLL_HALVES ? "32-byte streaming loads" : "64-byte streaming loads",
			 lines, halves, blocks);
		atomic_store_explicit(&gdr_poll_method, method, memory_order_relaxed);
		calibrating = false;
		return method;
	}
	return poll_kinds[turn_kind(cal.polls++)];
}

/* The inline path's copies that call the engine (copy_fast.h). */
int gdr_copy_fast_call(void *dst, const void *src, size_t n, bool to_mapping, enum gdr_fast_verdict verdict)
{
	if (verdict == GDR_FAST_READ_WAIT) {
		gdr_read_wait_after(src);	/* the inline path has read it */
	} else if (verdict == GDR_FAST_LINES) {
		/* One line is one load (never torn); only reads of several lines are polls to time. */
		if (to_mapping) {
			gdr_fast_lines_to(dst, src, n);
		} else if (n == 64) {
			gdr_fast_lines_from(dst, src, n);
			/*
			 * One AVX-512 load of the whole line.  repeat (the
			 * default) lets it overlap: an H100 ping-pong of a
			 * 64 B line took 2.03 us without the wait, as a plain
			 * loop of 64-byte loads, and 2.09 with it, untorn both
			 * ways, with 2.00 polls a round trip (RESULTS.md,
			 * issue 39); at 16-32 B the wait is what keeps a poll
			 * at 2.00.  An explicit 1 or N still waits.
			 */
			if (gdr_fast_read_wait_mode != GDR_READ_WAIT_REPEAT)
				gdr_read_wait_after(src);
		} else {
			gdr_fast_read_lines(dst, src, n);
		}
	} else {
		gdr_fast_line_read(dst, src, n);
		gdr_read_wait_after(src);
	}
	_mm_sfence();	/* as every WC copy ends (copy_fast.h) */
	return 0;
}

/*
 * The wait after a read of one line at src, as GDRCOPY_READ_WAIT says
 * (copy_fast.h).  N: every Nth read of the thread waits, so back to back at
 * most N are in flight and each pays about 1/N of a round trip.  repeat: a
 * read of the address the thread's previous one-line read had waits (a poll
 * keeps one read in flight), a read of another address does not (a loop over
 * distinct entries overlaps them); a read of a whole 64-byte line never
 * waits (gdr_copy_fast_call).
 */
void gdr_read_wait_after(const void *src)
{
	switch (gdr_fast_read_wait_mode) {
	case GDR_READ_WAIT_EACH:
		_mm_lfence();
		break;
	case GDR_READ_WAIT_NTH:
		if (++reads_unwaited >= read_wait_every) {
			reads_unwaited = 0;
			_mm_lfence();
		}
		break;
	case GDR_READ_WAIT_REPEAT:
		if (src == last_read)
			_mm_lfence();
		last_read = src;
		break;
	default:
		break;
	}
}

/* Whole lines from the mapping (copy_fast.h). */
void gdr_fast_read_lines(void *dst, const void *src, size_t n)
{
	int method = atomic_load_explicit(&gdr_poll_method, memory_order_relaxed);
	struct gdr_poll_watch *watch;
	uint64_t now, since_last;
	bool again;

	if (method == GDR_POLL_LINES) {
		gdr_fast_lines_from(dst, src, n);	/* decided: no watch to keep */
		return;
	}
	watch = &gdr_poll_watch;
	now = __builtin_ia32_rdtsc();
	since_last = now - watch->tsc;
	again = watch->src == src;
	watch->src = src;
	watch->tsc = now;
	if (!again || since_last >= GDR_POLL_GAP_TICKS) {
		gdr_fast_lines_from(dst, src, n);
		return;
	}
	switch (method) {
	case GDR_POLL_BLOCKS:
		gdr_fast_poll_from(dst, src, n);
		break;
	case GDR_POLL_HALVES:
		gdr_fast_poll32_from(dst, src, n);
		break;
	case GDR_POLL_LINES_WAIT:
		gdr_fast_lines_from(dst, src, n);
		_mm_lfence();
		break;
	case GDR_POLL_BLOCKS_WAIT:
		gdr_fast_poll_from(dst, src, n);
		_mm_lfence();
		break;
	case GDR_POLL_HALVES_WAIT:
		gdr_fast_poll32_from(dst, src, n);
		_mm_lfence();
		break;
	case GDR_POLL_FIRST_WAIT:
		gdr_fast_lines_from(dst, src, 64);
		_mm_lfence();
		gdr_fast_lines_from((char *)dst + 64, (const char *)src + 64, n - 64);
		break;
	default:
		gdr_poll_read(dst, src, n, since_last);	/* still timing the kinds */
		break;
	}
}

/* The inline path's poll while undecided (it reads the decided kinds itself). */
void gdr_poll_read(void *dst, const void *src, size_t n, uint64_t since_last)
{
	switch (calibration_step(since_last)) {
	case GDR_POLL_BLOCKS:
		gdr_fast_poll_from(dst, src, n);
		break;
	case GDR_POLL_HALVES:
		gdr_fast_poll32_from(dst, src, n);
		break;
	default:
		gdr_fast_lines_from(dst, src, n);
		break;
	}
}

/* GDRCOPY_POLL_READS's values: each kind of poll and its GDR_POLL_*, what it needs. */
static const struct {
	const char *name;
	int method;
	bool halves;	/* needs 32-byte poll loads (AVX2) */
} poll_names[] = {
	{ "auto", GDR_POLL_UNDECIDED, false },	   { "lines", GDR_POLL_LINES, false },
	{ "blocks", GDR_POLL_BLOCKS, false },	   { "halves", GDR_POLL_HALVES, true },
	{ "lines_wait", GDR_POLL_LINES_WAIT, false }, { "blocks_wait", GDR_POLL_BLOCKS_WAIT, false },
	{ "halves_wait", GDR_POLL_HALVES_WAIT, true }, { "first_wait", GDR_POLL_FIRST_WAIT, false },
};

int gdr_poll_method_from_env(const char *value, bool can_time, bool have_halves)
{
	size_t i;

	if (!can_time)
		return GDR_POLL_LINES;
	if (!value || !*value)
		value = GDR_POLL_READS_DEFAULT;
	for (i = 0; i < sizeof(poll_names) / sizeof(poll_names[0]); i++) {
		if (strcmp(value, poll_names[i].name))
			continue;
		if (!poll_names[i].halves || have_halves)
			return poll_names[i].method;
		gdr_warn("copy engine: GDRCOPY_POLL_READS=%s needs AVX2 32-byte streaming loads, which this CPU lacks; using %s",
			 value, GDR_POLL_READS_DEFAULT);
		break;
	}
	if (i == sizeof(poll_names) / sizeof(poll_names[0]))
		gdr_warn("copy engine: GDRCOPY_POLL_READS=%s is not one of lines, halves, blocks, lines_wait, halves_wait, blocks_wait, first_wait, auto; using %s",
			 value, GDR_POLL_READS_DEFAULT);
	/* A typo or a kind this CPU lacks gets the default (auto if the default itself is one). */
	if (!strcmp(value, GDR_POLL_READS_DEFAULT))
		return GDR_POLL_UNDECIDED;
	return gdr_poll_method_from_env(GDR_POLL_READS_DEFAULT, can_time, have_halves);
}

int gdr_read_wait_from_env(const char *value, unsigned int *every)
{
	char *end;
	unsigned long n;

	*every = 1;
	if (!value || !*value)
		value = GDR_READ_WAIT_DEFAULT;
	if (!strcmp(value, "repeat"))
		return GDR_READ_WAIT_REPEAT;
	n = strtoul(value, &end, 10);
	if (end != value && !*end && value[0] >= '0' && value[0] <= '9' && n <= GDR_READ_WAIT_MAX_NTH) {
		if (n == 0)
			return GDR_READ_WAIT_NONE;
		*every = (unsigned int)n;
		return n == 1 ? GDR_READ_WAIT_EACH : GDR_READ_WAIT_NTH;
	}
	gdr_warn("copy engine: GDRCOPY_READ_WAIT=%s is not 0, 1, a number N up to %d (every Nth read waits) or repeat; using %s",
		 value, GDR_READ_WAIT_MAX_NTH, GDR_READ_WAIT_DEFAULT);
	return gdr_read_wait_from_env(GDR_READ_WAIT_DEFAULT, every);
}

void gdr_poll_setup(gdr_block_copy_fn poll16, gdr_block_copy_fn poll32)
{
	const char *wait = getenv("GDRCOPY_READ_WAIT");
	int mode = gdr_read_wait_from_env(wait, &read_wait_every);

	gdr_fast_read_wait_mode = (unsigned char)mode;
	if (mode != GDR_READ_WAIT_EACH)
		gdr_info("copy engine: GDRCOPY_READ_WAIT=%s: reads of one line %s", wait ? wait : GDR_READ_WAIT_DEFAULT,
			 mode == GDR_READ_WAIT_NONE ? "overlap instead of waiting for their data" :
			 mode == GDR_READ_WAIT_NTH ? "wait for their data every Nth read of a thread" :
			 "wait for their data when a thread reads the same address again");
	gdr_fast_poll_from = poll16;
	gdr_fast_poll32_from = poll32;
	poll_kinds_timed = poll32 ? GDR_POLL_KINDS : 2;
	atomic_store_explicit(&gdr_poll_method,
			      gdr_poll_method_from_env(getenv("GDRCOPY_POLL_READS"), poll16 != NULL, poll32 != NULL),
			      memory_order_relaxed);
}

#else

void gdr_poll_setup(gdr_block_copy_fn poll16, gdr_block_copy_fn poll32)
{
	(void)poll16, (void)poll32;	/* only the x86 inline path tells polls from other reads */
}

#endif /* x86 */
