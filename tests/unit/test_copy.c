// SPDX-License-Identifier: MIT
/*
 * The copy engine against plain memory: every routine set this CPU can run,
 * both directions, every size 0..4096 and some large ones, device- and
 * host-side misalignment 0..63.  Each copy must produce exactly the source
 * bytes and touch nothing outside the destination range.
 */
#include <errno.h>

#include "test_common.h"
#include "copy.h"
#include "copy_engine.h"
#include "copy_fast.h"

#define GUARD 128		/* bytes checked on each side of the destination */
#define GUARD_BYTE 0xa5
#define MAX_SMALL 4096
#define LARGE ((size_t)4 << 20)

static unsigned char *src_buf, *dst_buf;
static unsigned char guard_bytes[GUARD + 64];
static size_t buf_len;

static int setup_buffers(void **state)
{
	size_t i;

	(void)state;
	buf_len = LARGE + 4 * GUARD + 128;
	assert_int_equal(posix_memalign((void **)&src_buf, 4096, buf_len), 0);
	assert_int_equal(posix_memalign((void **)&dst_buf, 4096, buf_len), 0);
	/* A pattern with no period that divides a vector width. */
	for (i = 0; i < buf_len; i++)
		src_buf[i] = (unsigned char)((i * 131 + (i >> 8) * 7 + 3) & 0xff);
	memset(dst_buf, GUARD_BYTE, buf_len);
	memset(guard_bytes, GUARD_BYTE, sizeof(guard_bytes));
	return 0;
}

static int teardown_buffers(void **state)
{
	(void)state;
	free(src_buf);
	free(dst_buf);
	return 0;
}

enum direction { TO_WC, FROM_WC };

static unsigned long failures;

/* Check one copy and restore the destination. */
static void check_and_restore(const struct gdr_copy_routines *r, enum direction dir, const char *path,
			      unsigned char *dst, const unsigned char *src, size_t size, size_t dst_align,
			      size_t src_align)
{
	const char *dir_name = dir == TO_WC ? "to" : "from";

	if (memcmp(dst, src, size) != 0) {
		if (failures++ < 5)
			print_error("%s %s%s: size %zu dst+%zu src+%zu: wrong bytes\n", r->name, dir_name, path, size,
				    dst_align, src_align);
	}
	if (memcmp(dst_buf, guard_bytes, GUARD + dst_align) != 0) {
		if (failures++ < 5)
			print_error("%s %s%s: size %zu dst+%zu src+%zu: wrote before the range\n", r->name, dir_name,
				    path, size, dst_align, src_align);
	}
	if (memcmp(dst + size, guard_bytes, GUARD) != 0) {
		if (failures++ < 5)
			print_error("%s %s%s: size %zu dst+%zu src+%zu: wrote after the range\n", r->name, dir_name,
				    path, size, dst_align, src_align);
	}
	memset(dst_buf + GUARD, GUARD_BYTE, dst_align + size);
}

/*
 * One copy, checked.  Reads run twice: first after a read of another line,
 * then again at once, so that both of the engine's read paths (whole lines,
 * and the one for a loop polling the same bytes) see every case.
 */
static void copy_and_check(const struct gdr_copy_routines *r, enum direction dir, size_t size, size_t dst_align,
			   size_t src_align)
{
	unsigned char *dst = dst_buf + GUARD + dst_align;
	const unsigned char *src = src_buf + GUARD + src_align;
	unsigned char elsewhere;

	if (dir == TO_WC) {
		gdr_wc_copy_to(r, dst, src, size);
		check_and_restore(r, dir, "", dst, src, size, dst_align, src_align);
		return;
	}
	gdr_wc_copy_from(r, &elsewhere, src_buf + buf_len - 64, 1);
	gdr_wc_copy_from(r, dst, src, size);
	check_and_restore(r, dir, "", dst, src, size, dst_align, src_align);
	gdr_wc_copy_from(r, dst, src, size);
	check_and_restore(r, dir, " (polled again)", dst, src, size, dst_align, src_align);
}

static void exercise(const struct gdr_copy_routines *r, enum direction dir)
{
	static const size_t large[] = { 65536, 65536 + 13, 262144 - 1, (1 << 20) + 7, LARGE - 64 };
	static const size_t large_align[][2] = { { 0, 0 }, { 1, 0 }, { 0, 17 }, { 63, 5 }, { 32, 33 }, { 16, 48 } };
	size_t size, d, s, i, j;

	failures = 0;
	static const size_t host_aligns[] = { 0, 1, 7, 8, 15, 16, 33, 63 };

	/* Small sizes: every pair of alignments. */
	for (size = 0; size <= 72; size++)
		for (d = 0; d < 64; d++)
			for (s = 0; s < 64; s++)
				copy_and_check(r, dir, size, d, s);
	/* Up to the longest head + 16 + 32 + one 64-byte block + tail: every device alignment. */
	for (size = 73; size <= 160; size++)
		for (d = 0; d < 64; d++)
			for (i = 0; i < sizeof(host_aligns) / sizeof(host_aligns[0]); i++)
				copy_and_check(r, dir, size, d, host_aligns[i]);
	/* Up to a page: every size, every device-side alignment, host alignment varied with it. */
	for (size = 161; size <= MAX_SMALL; size++)
		for (d = 0; d < 64; d += (size % 7) + 1)
			copy_and_check(r, dir, size, d, (size * 7 + d * 13) % 64);
	for (i = 0; i < sizeof(large) / sizeof(large[0]); i++)
		for (j = 0; j < sizeof(large_align) / sizeof(large_align[0]); j++)
			copy_and_check(r, dir, large[i], large_align[j][0], large_align[j][1]);
	if (failures)
		fail_msg("routine set %s, %s WC memory: %lu bad copies", r->name, dir == TO_WC ? "to" : "from",
			 failures);
}

static void run_set(void **state)
{
	const char *name = *state;
	struct gdr_copy_routines r;

	if (!gdr_copy_routines_get(name, &r)) {
		print_message("routine set %s: not runnable on this CPU, skipped\n", name);
		skip();
	}
	print_message("routine set %s: stores %s; loads %s\n", name, r.store_desc, r.load_desc);
	exercise(&r, TO_WC);
	exercise(&r, FROM_WC);
}

/* The public type-driven entry points, with the engine the environment picks. */
static void test_copy_by_type(void **state)
{
	static const gdr_mapping_type_t types[] = {
		GDR_MAPPING_TYPE_WC, GDR_MAPPING_TYPE_CACHING, GDR_MAPPING_TYPE_DEVICE,
	};
	unsigned char out[777];
	size_t t, off;

	(void)state;
	for (t = 0; t < 3; t++)
		for (off = 0; off < 9; off++) {
			memset(out, 0, sizeof(out));
			assert_int_equal(gdr_copy_to_mapped_memory(types[t], out + off, src_buf + 3, 700), 0);
			assert_memory_equal(out + off, src_buf + 3, 700);
			assert_int_equal(out[off + 700], 0);
			memset(out, 0, sizeof(out));
			assert_int_equal(gdr_copy_from_mapped_memory(types[t], out + off, src_buf + off, 701), 0);
			assert_memory_equal(out + off, src_buf + off, 701);
		}
	assert_int_equal(gdr_copy_to_mapped_memory(GDR_MAPPING_TYPE_NONE, out, src_buf, 1), EINVAL);
	assert_int_equal(gdr_copy_from_mapped_memory(GDR_MAPPING_TYPE_MAX, out, src_buf, 1), EINVAL);
	assert_int_equal(gdr_copy_to_mapped_memory((gdr_mapping_type_t)-3, out, src_buf, 1), EINVAL);
	assert_int_equal(gdr_copy_to_mapped_memory(GDR_MAPPING_TYPE_WC, out, src_buf, 0), 0);
}

static void test_unknown_routine_name(void **state)
{
	struct gdr_copy_routines r;

	(void)state;
	assert_false(gdr_copy_routines_get("avx1024", &r));
	assert_true(gdr_copy_routines_get("auto", &r));
	assert_non_null(r.store16);
	assert_non_null(r.load16);
}

/* One test per routine set, named after it. */
#define ROUTINE_SET_TEST(set) \
	{ .name = "copy_routines_" #set, .test_func = run_set, .initial_state = (void *)#set }

/*
 * The inline path of copy_fast.h: every size 0..72 at every alignment, both
 * directions; where it declines, nothing may have been written, and where it
 * copies, exactly the bytes asked for.  Flags and 16-byte blocks must take it.
 * Reads with each way GDRCOPY_READ_WAIT can make them wait.
 */
static void inline_fast_path(size_t *taken);

static void test_inline_fast_path(void **state)
{
	size_t taken = 0;

	(void)state;
	gdr_copy_engine_init();
#if defined(__x86_64__)
	static const char *const waits[] = { "1", "0", "2", "repeat" };

	for (unsigned int w = 0; w < sizeof(waits) / sizeof(waits[0]); w++) {
		setenv("GDRCOPY_READ_WAIT", waits[w], 1);
		gdr_poll_setup(gdr_fast_poll_from, gdr_fast_poll32_from);
		inline_fast_path(&taken);
	}
	unsetenv("GDRCOPY_READ_WAIT");
	gdr_poll_setup(gdr_fast_poll_from, gdr_fast_poll32_from);
#else
	inline_fast_path(&taken);	/* no inline path, hence no waits: every copy declined */
#endif
	print_message("inline path taken for %zu of the copies tried\n", taken);
}

static void inline_fast_path(size_t *taken)
{
	unsigned char *dst = dst_buf + GUARD, *src = src_buf + GUARD;
	size_t n, a;
	int to;

	for (to = 0; to < 2; to++)
		for (n = 0; n <= 72; n++)
			for (a = 0; a < 64; a++) {
				bool done = gdr_copy_fast(GDR_MAPPING_TYPE_WC, to, dst + a, src + a, n);
				bool flag = n && n <= 8 && !(n & (n - 1)) && !(a & (n - 1));
				bool blocks = n && n <= 64 && !(n & 15) && !(a & 15);

				if (done) {
					++*taken;
					assert_memory_equal(dst + a, src + a, n);
				}
				assert_memory_equal(dst_buf, guard_bytes, GUARD + (done ? a : 0));
				assert_memory_equal(dst + a + (done ? n : 0), guard_bytes, GUARD);
#if defined(__x86_64__)
				if (atomic_load(&gdr_copy_fast_ok) && (blocks || flag))
					assert_true(done);
#endif
				assert_false(done && !(blocks || flag));
				assert_false(done && n > 64);
				memset(dst_buf + GUARD, GUARD_BYTE, a + n);
			}
	/* Whole lines, up to GDR_FAST_LINES_MAX, with the engine's line routines. */
	for (to = 0; to < 2; to++)
		for (n = 64; n <= GDR_FAST_LINES_MAX + 64; n += 64)
			for (a = 0; a < 128; a += 32) {
				bool done = gdr_copy_fast(GDR_MAPPING_TYPE_WC, to, dst + a, src + a, n);

				if (done)
					assert_memory_equal(dst + a, src + a, n);
				assert_memory_equal(dst + a + (done ? n : 0), guard_bytes, GUARD);
				assert_false(done && n > GDR_FAST_LINES_MAX);
				assert_false(done && n > 64 && (a & 63));
				if (atomic_load(&gdr_copy_fast_ok) && (to ? gdr_fast_lines_to : gdr_fast_lines_from) &&
				    n <= GDR_FAST_LINES_MAX && !(a & 63))
					assert_true(done);
				memset(dst_buf + GUARD, GUARD_BYTE, a + n);
			}
	/* Never for other mapping types: their fences and access rules differ. */
	assert_false(gdr_copy_fast(GDR_MAPPING_TYPE_CACHING, true, dst, src, 16));
	assert_false(gdr_copy_fast(GDR_MAPPING_TYPE_DEVICE, false, dst, src, 16));
}

#if defined(__x86_64__)
/*
 * Polls (copy_fast.c): re-reading the same lines back to back must return
 * what the source holds at each call, whichever kind of load the poll uses
 * and while the first polls of the process time both kinds; and the timing
 * must end in a decision.
 */
static void poll_and_check(unsigned char *dst, unsigned char *src, size_t n, unsigned int polls)
{
	unsigned int i;

	for (i = 0; i < polls; i++) {
		memset(src, (int)(i & 0xff), n);
		assert_true(gdr_copy_fast(GDR_MAPPING_TYPE_WC, false, dst, src, n));
		assert_memory_equal(dst, src, n);
	}
}

static void test_polls(void **state)
{
	unsigned char *dst = dst_buf + GUARD, *src = src_buf + 64 * 8;
	static const int methods[] = { GDR_POLL_LINES,	    GDR_POLL_BLOCKS,	  GDR_POLL_HALVES,
				       GDR_POLL_LINES_WAIT, GDR_POLL_BLOCKS_WAIT, GDR_POLL_HALVES_WAIT,
				       GDR_POLL_FIRST_WAIT, GDR_POLL_UNDECIDED };
#define NMETHODS (sizeof(methods) / sizeof(methods[0]))
	unsigned char pattern[GDR_FAST_LINES_MAX];
	size_t n;
	unsigned int m;

	(void)state;
	memcpy(pattern, src, sizeof(pattern));	/* the other tests' source bytes, put back at the end */
	gdr_copy_engine_init();
	if (!atomic_load(&gdr_copy_fast_ok) || !gdr_fast_lines_from || !gdr_fast_poll_from || !gdr_fast_poll32_from) {
		print_message("skipped: this CPU has no inline path with every kind of polling load (SSE4.1, AVX2 and AVX-512)\n");
		skip();
	}
	for (m = 0; m < NMETHODS; m++) {
		atomic_store(&gdr_poll_method, methods[m]);
		for (n = 64; n <= GDR_FAST_LINES_MAX; n += 64) {
			poll_and_check(dst, src, n, 400);
			assert_memory_equal(dst + n, guard_bytes, GUARD);
			memset(dst, GUARD_BYTE, n);
		}
	}
	/* The UNDECIDED rounds above ran the whole calibration (a few hundred polls). */
	assert_int_not_equal(atomic_load(&gdr_poll_method), GDR_POLL_UNDECIDED);
	print_message("polls: the calibration chose %s loads\n",
		      atomic_load(&gdr_poll_method) == GDR_POLL_BLOCKS ? "16-byte" :
		      atomic_load(&gdr_poll_method) == GDR_POLL_HALVES ? "32-byte" : "64-byte");
	memcpy(src, pattern, sizeof(pattern));
}

static void test_poll_choice(void **state)
{
	uint32_t lines[5] = { 1000, 1100, 900, 5000, 1000 }, blocks[5] = { 300, 320, 9000, 310, 330 };
	uint32_t close[3] = { 950, 900, 1000 }, halves[5] = { 200, 210, 190, 7000, 205 };
	uint32_t *ticks[GDR_POLL_KINDS];
	unsigned int count[GDR_POLL_KINDS];

	(void)state;
	/* [0] lines, [1] halves, [2] blocks; a count of 0 is a kind not timed. */
	ticks[0] = lines, ticks[1] = halves, ticks[2] = blocks;
	count[0] = 5, count[1] = 0, count[2] = 5;
	assert_int_equal(gdr_poll_choose(ticks, count), GDR_POLL_BLOCKS);
	count[1] = 5;
	assert_int_equal(gdr_poll_choose(ticks, count), GDR_POLL_HALVES);
	ticks[0] = blocks, ticks[1] = lines, ticks[2] = lines;
	assert_int_equal(gdr_poll_choose(ticks, count), GDR_POLL_LINES);
	/* Not a fifth faster: 64-byte loads stay. */
	ticks[0] = lines, ticks[1] = close, ticks[2] = close;
	count[1] = 3, count[2] = 3;
	assert_int_equal(gdr_poll_choose(ticks, count), GDR_POLL_LINES);
	ticks[2] = blocks, count[0] = 0, count[2] = 5;
	assert_int_equal(gdr_poll_choose(ticks, count), GDR_POLL_LINES);
	assert_int_equal(gdr_poll_method_from_env("auto", true, true), GDR_POLL_UNDECIDED);
	assert_int_equal(gdr_poll_method_from_env("lines", true, true), GDR_POLL_LINES);
	assert_int_equal(gdr_poll_method_from_env("blocks", true, true), GDR_POLL_BLOCKS);
	assert_int_equal(gdr_poll_method_from_env("halves", true, true), GDR_POLL_HALVES);
	/* Halves on a CPU without AVX2, or a typo: the default's kind. */
	assert_int_equal(gdr_poll_method_from_env("halves", true, false),
			 gdr_poll_method_from_env(GDR_POLL_READS_DEFAULT, true, false));
	assert_int_equal(gdr_poll_method_from_env("blocks", false, true), GDR_POLL_LINES);
	assert_int_equal(gdr_poll_method_from_env("sideways", true, true),
			 gdr_poll_method_from_env(GDR_POLL_READS_DEFAULT, true, true));
	assert_int_equal(gdr_poll_method_from_env("lines_wait", true, true), GDR_POLL_LINES_WAIT);
	assert_int_equal(gdr_poll_method_from_env("blocks_wait", true, true), GDR_POLL_BLOCKS_WAIT);
	assert_int_equal(gdr_poll_method_from_env("halves_wait", true, true), GDR_POLL_HALVES_WAIT);
	assert_int_equal(gdr_poll_method_from_env("halves_wait", true, false),
			 gdr_poll_method_from_env(GDR_POLL_READS_DEFAULT, true, false));
	assert_int_equal(gdr_poll_method_from_env("first_wait", true, true), GDR_POLL_FIRST_WAIT);
	/* Unset or empty: what the default's name says. */
	assert_int_equal(gdr_poll_method_from_env(NULL, true, true),
			 gdr_poll_method_from_env(GDR_POLL_READS_DEFAULT, true, true));
	assert_int_equal(gdr_poll_method_from_env("", true, true),
			 gdr_poll_method_from_env(GDR_POLL_READS_DEFAULT, true, true));
}

/* GDRCOPY_READ_WAIT's values: 0, 1, every Nth read, repeat; a typo keeps the default. */
static void test_read_wait_values(void **state)
{
	unsigned int every = 0, default_every = 0;
	int fallback;

	(void)state;
	assert_int_equal(gdr_read_wait_from_env("1", &every), GDR_READ_WAIT_EACH);
	assert_int_equal(every, 1);
	assert_int_equal(gdr_read_wait_from_env("0", &every), GDR_READ_WAIT_NONE);
	assert_int_equal(gdr_read_wait_from_env("2", &every), GDR_READ_WAIT_NTH);
	assert_int_equal(every, 2);
	assert_int_equal(gdr_read_wait_from_env("16", &every), GDR_READ_WAIT_NTH);
	assert_int_equal(every, 16);
	assert_int_equal(gdr_read_wait_from_env("repeat", &every), GDR_READ_WAIT_REPEAT);
	fallback = gdr_read_wait_from_env(GDR_READ_WAIT_DEFAULT, &default_every);
	assert_int_equal(gdr_read_wait_from_env(NULL, &every), fallback);
	assert_int_equal(every, default_every);
	assert_int_equal(gdr_read_wait_from_env("", &every), fallback);
	for (const char *const *bad = (const char *const[]){ "no", "17", "-1", "2x", " 2", "+2", NULL }; *bad; bad++) {
		every = 99;
		assert_int_equal(gdr_read_wait_from_env(*bad, &every), fallback);
		assert_int_equal(every, default_every);
	}
}

/*
 * Reads that never tear (copy.h): the one load's width is the smallest
 * aligned block of 16, 32 or 64 bytes holding the read; none for a read
 * across a line or longer than one.
 */
static void test_single_load_width(void **state)
{
	const uintptr_t line = 0x10000;

	(void)state;
	assert_int_equal(gdr_single_load_width(line, 0), 0);
	assert_int_equal(gdr_single_load_width(line, 1), 16);
	assert_int_equal(gdr_single_load_width(line + 8, 8), 16);
	assert_int_equal(gdr_single_load_width(line, 16), 16);
	assert_int_equal(gdr_single_load_width(line + 8, 16), 32);	/* crosses a 16-byte block */
	assert_int_equal(gdr_single_load_width(line, 32), 32);
	assert_int_equal(gdr_single_load_width(line + 32, 32), 32);
	assert_int_equal(gdr_single_load_width(line + 16, 32), 64);	/* crosses the 32-byte halves */
	assert_int_equal(gdr_single_load_width(line + 16, 48), 64);
	assert_int_equal(gdr_single_load_width(line, 64), 64);
	assert_int_equal(gdr_single_load_width(line + 32, 33), 0);	/* crosses into the next line */
	assert_int_equal(gdr_single_load_width(line + 1, 64), 0);
	assert_int_equal(gdr_single_load_width(line, 65), 0);
	assert_int_equal(gdr_single_load_width(line + 63, 1), 16);
	assert_int_equal(gdr_single_load_width(line + 63, 2), 0);
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		ROUTINE_SET_TEST(generic),
		ROUTINE_SET_TEST(memcpy),
		ROUTINE_SET_TEST(sse),
		ROUTINE_SET_TEST(avx2),
		ROUTINE_SET_TEST(avx512),
		ROUTINE_SET_TEST(movdir64b),
		ROUTINE_SET_TEST(neon),
		ROUTINE_SET_TEST(ldp),
		ROUTINE_SET_TEST(auto),
		cmocka_unit_test(test_copy_by_type),
		cmocka_unit_test(test_inline_fast_path),
		cmocka_unit_test(test_unknown_routine_name),
#if defined(__x86_64__)
		cmocka_unit_test(test_poll_choice),
		cmocka_unit_test(test_read_wait_values),
		cmocka_unit_test(test_single_load_width),
		cmocka_unit_test(test_polls),
#endif
	};

	enable_library_logging();
	return cmocka_run_group_tests_name("copy", tests, setup_buffers, teardown_buffers);
}
