/* SPDX-License-Identifier: MIT */
/*
 * The shortest path for the commonest small copies through a WC mapping:
 * naturally aligned 1/2/4/8-byte accesses (flags, doorbells), 16-byte-aligned
 * blocks of up to 64 bytes, and whole 64-byte lines up to 512 bytes either
 * way.  A read that lies inside one 64-byte line is one load (copy.h,
 * gdr_single_load_width), so it never sees a line half-written, and waits for
 * its data (gdr_fast_read_wait), so a polling loop has one read in flight.
 * Inlined into the API functions so that such a copy is a dozen instructions
 * after the handle is checked, with no call and no stack frame: copies that
 * overlap (writes, reads of several lines) keep as many in flight as the
 * core's reorder window holds calls, so every instruction on this path
 * lengthens their period (measured on an H200: tools/h200/RESULTS.md).
 * Everything else goes through copy.c.
 */
#ifndef GDRAPI_COPY_FAST_H
#define GDRAPI_COPY_FAST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "copy.h"
#include "gdrapi.h"

/*
 * Hidden, as -fvisibility=hidden makes them where they are defined: said
 * here too, each is one load on the copy path instead of a GOT address and
 * a load.
 */
#pragma GCC visibility push(hidden)

/* Set (release) once the engine is chosen: the CPU has SSE4.1 and nothing overrides the best set. */
extern atomic_bool gdr_copy_fast_ok;
/* The engine's whole-line routines (64-byte streaming stores and loads), or NULL; valid once fast_ok. */
extern gdr_block_copy_fn gdr_fast_lines_to, gdr_fast_lines_from;
/* The engine's small_read (one load for a read inside a line), or NULL; valid once fast_ok. */
extern gdr_small_read_fn gdr_fast_line_read;
/* One 32-byte streaming load of an aligned 32-byte block, stored unmasked (AVX2), or NULL; non-NULL: the CPU has AVX2. */
extern gdr_block_copy_fn gdr_fast_read32;
/*
 * 0 when the inline path may take WC copies: both reasons it may not, in the
 * one word a copy reads.  GDR_FAST_BLOCK_ENGINE while the engine is not
 * chosen or not fit (gdr_copy_fast_ok false); GDR_FAST_BLOCK_MIXED added
 * while mappings of more than one type live (their copies need the general
 * path's full fence).
 */
extern atomic_uint gdr_copy_fast_blockers;
#pragma GCC visibility pop
#define GDR_FAST_BLOCK_ENGINE 1u
#define GDR_FAST_BLOCK_MIXED 2u

/* At most this many bytes of whole lines take the inline path (above: the general one, same routines). */
#define GDR_FAST_LINES_MAX 512

/* What gdr_copy_fast_inline did with a copy. */
enum gdr_fast_verdict {
	GDR_FAST_DECLINED,	/* take the general path */
	GDR_FAST_DONE,		/* copied and fenced */
	GDR_FAST_LINES,		/* whole lines either way: gdr_copy_fast_call takes them */
	GDR_FAST_IN_LINE,	/* a 17-48 B read inside one line: gdr_copy_fast_call takes it */
	GDR_FAST_READ_WAIT,	/* a read of one line, loaded: gdr_copy_fast_call waits as GDRCOPY_READ_WAIT says */
};

/*
 * What GDRCOPY_READ_WAIT and GDRCOPY_POLL_READS mean when unset: the one
 * place to change them once a GPU run has measured a better choice
 * (tools/h200/pingpong_shapes.sh times every value in the same rounds).
 */
#define GDR_READ_WAIT_DEFAULT "repeat"
#define GDR_POLL_READS_DEFAULT "lines"

/* How a read of at most one line waits for its data (GDRCOPY_READ_WAIT). */
enum gdr_read_wait {
	GDR_READ_WAIT_EACH,	/* "1": after every such read, so a polling loop has one read in flight */
	GDR_READ_WAIT_NONE,	/* "0": never: they overlap like any other reads */
	GDR_READ_WAIT_NTH,	/* "2".."16": after every Nth such read of a thread: at most N in flight */
	GDR_READ_WAIT_REPEAT,	/* "repeat": after a read of the address the thread's previous such read had */
};
#define GDR_READ_WAIT_MAX_NTH 16

#if defined(__x86_64__)
#include <emmintrin.h>

/*
 * Polls (copy_fast.c): a read of the same whole lines as this thread's
 * previous one, begun within GDR_POLL_GAP_TICKS of it (a few microseconds at
 * any TSC rate: a few PCIe round trips).  Which loads they use is timed once
 * per process; until then, and for every other read, 64-byte loads.
 */
#define GDR_POLL_GAP_TICKS 10000
enum {
	GDR_POLL_UNDECIDED, GDR_POLL_LINES, GDR_POLL_BLOCKS, GDR_POLL_HALVES,
	/* The same loads, then an lfence: one poll in flight (as GDRCOPY_READ_WAIT=1 does for one line). */
	GDR_POLL_LINES_WAIT, GDR_POLL_BLOCKS_WAIT, GDR_POLL_HALVES_WAIT,
	/* 64-byte loads: the first line, an lfence, then the other lines (no wait). */
	GDR_POLL_FIRST_WAIT,
};
#define GDR_POLL_KINDS 3	/* lines (64-byte loads), halves (32), blocks (16) */
struct gdr_poll_watch {
	const void *src;
	uint64_t tsc;
};
#pragma GCC visibility push(hidden)
/* How a read of one line waits for its data: an enum gdr_read_wait (GDRCOPY_READ_WAIT; set once, before the engine is fit). */
extern unsigned char gdr_fast_read_wait_mode;
extern __thread struct gdr_poll_watch gdr_poll_watch;
extern atomic_int gdr_poll_method;
/* 16- and 32-byte streaming loads of whole lines, each stored at once: the other kinds of poll (NULL: none). */
extern gdr_block_copy_fn gdr_fast_poll_from, gdr_fast_poll32_from;
#pragma GCC visibility pop
/* A poll while undecided: one step of the timing, then the read with the kind it picked. */
void gdr_poll_read(void *dst, const void *src, size_t n, uint64_t since_last);
/*
 * GDRCOPY_READ_WAIT's value (NULL or empty: GDR_READ_WAIT_DEFAULT) to an enum
 * gdr_read_wait; *every is N for GDR_READ_WAIT_NTH.  Anything else: a warning
 * and the default.
 */
int gdr_read_wait_from_env(const char *value, unsigned int *every);
/* The out-of-line waits of GDRCOPY_READ_WAIT's other values, after the load of a read of one line at src. */
void gdr_read_wait_after(const void *src);
/*
 * GDRCOPY_POLL_READS's value (NULL or empty: GDR_POLL_READS_DEFAULT) to a
 * GDR_POLL_*; can_time false (no 16-byte poll loads): always lines;
 * have_halves false: no halves.
 */
int gdr_poll_method_from_env(const char *value, bool can_time, bool have_halves);
/*
 * The decision from the kinds' poll periods, [0] lines, [1] halves, [2]
 * blocks (medians; sorts the arrays; a count of 0: not timed).
 */
int gdr_poll_choose(uint32_t *ticks[GDR_POLL_KINDS], const unsigned int count[GDR_POLL_KINDS]);

/* MOVNTDQA (SSE4.1, checked at init) as asm: inlinable at the baseline ISA. */
static inline __m128i gdr_fast_stream_load16(const void *block)
{
	__m128i v;

	__asm__ volatile("movntdqa %1, %0" : "=x"(v) : "m"(*(const __m128i *)block));
	return v;
}

/*
 * One VMOVNTDQA ymm of an aligned 32-byte block, stored unmasked: the
 * engine's read32 without the indirect call.  Only where read32 is set (the
 * CPU has AVX2).  Every vector register is clobbered, so whatever the
 * compiler was keeping in one is not there, and VZEROUPPER cannot cost
 * anything it holds.
 */
static inline void gdr_fast_stream_read32(void *dst, const void *src)
{
	__asm__ volatile("vmovntdqa %1, %%ymm0\n\tvmovdqu %%ymm0, %0\n\tvzeroupper"
			 : "=m"(*(unsigned char (*)[32])dst)
			 : "m"(*(const unsigned char (*)[32])src)
			 : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
			   "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

/*
 * Whole lines from the mapping: a poll goes the way copy_fast.c decided,
 * anything else with 64-byte loads.  Not inline: its clock and per-thread
 * watch would make every path of gdr_copy_fast save registers first.
 */
void gdr_fast_read_lines(void *dst, const void *src, size_t n);

/*
 * A read of one line (at most 64 B, not crossing it) waits for its data
 * before the call returns, so that a loop polling a flag or a slot has one
 * read in flight, not several.  Measured on an H200 (tools/h200/RESULTS.md),
 * a ping-pong through a 16 or 32 B line took 2.13 us per round trip this way
 * against 2.55-2.85 us with back-to-back reads overlapping, although the
 * overlapping reads came 2-3 times as often: the reads still in flight when
 * the GPU's write is seen delay what follows.  Copies of several lines keep
 * overlapping (their polls are timed, copy_fast.c).  GDRCOPY_READ_WAIT=0
 * lets one-line reads overlap too, for loops that read many distinct small
 * entries one call at a time; its other values (N, repeat) are candidates
 * that pay less than a round trip per read back to back, timed beside it.
 *
 * Called after the load: true when the read is done waiting (the default
 * waits here, with no call); false when gdr_copy_fast_call must do the
 * wait of another value (verdict GDR_FAST_READ_WAIT).
 */
static inline __attribute__((always_inline)) bool gdr_fast_read_wait(void)
{
	unsigned char mode = gdr_fast_read_wait_mode;

	if (__builtin_expect(mode == GDR_READ_WAIT_EACH, 1)) {
		_mm_lfence();
		return true;
	}
	return mode == GDR_READ_WAIT_NONE;
}

/*
 * The copies gdr_copy_fast_inline leaves to the engine's routines, as its
 * verdict says (GDR_FAST_LINES or GDR_FAST_IN_LINE), or the wait of a read
 * it did (GDR_FAST_READ_WAIT).  Fenced; returns 0, so
 * that an API entry point can end with a jump here.  Not inline: a call on
 * the inline path would make every path of its caller set up a stack frame
 * first.
 */
int gdr_copy_fast_call(void *dst, const void *src, size_t n, bool to_mapping, enum gdr_fast_verdict verdict);

/*
 * The inline path, making no call.  Always inlined: with the direction a
 * constant at each caller, half of it goes.
 */
static inline __attribute__((always_inline)) enum gdr_fast_verdict
gdr_copy_fast_inline(gdr_mapping_type_t type, bool to_mapping, void *dst, const void *src, size_t n)
{
	uintptr_t wc = to_mapping ? (uintptr_t)dst : (uintptr_t)src;
	size_t i;

	/* Acquire: the engine's pointers below are set. */
	if (type != GDR_MAPPING_TYPE_WC || atomic_load_explicit(&gdr_copy_fast_blockers, memory_order_acquire))
		return GDR_FAST_DECLINED;
	/*
	 * A 16- or 32-byte slot first, before even the size bound: the commonest
	 * poll, in the fewest instructions.  The same loads as the cases below
	 * would pick.
	 */
	if (!to_mapping && n == 32 && !(wc & 31) && gdr_fast_read32) {
		/* One ymm load, no mask: a masked store made a 32-byte poll 0.8 us against 0.5 (H200). */
		gdr_fast_stream_read32(dst, src);
		if (!gdr_fast_read_wait())
			return GDR_FAST_READ_WAIT;
	} else if (!to_mapping && n == 16 && !(wc & 15)) {
		_mm_storeu_si128((__m128i *)dst, gdr_fast_stream_load16(src));
		if (!gdr_fast_read_wait())
			return GDR_FAST_READ_WAIT;
	} else if (n - 1 >= GDR_FAST_LINES_MAX) {	/* n - 1 wraps for 0: one compare for both ends */
		return GDR_FAST_DECLINED;
	} else if (n < 16) {
		if ((n & (n - 1)) || (wc & (n - 1)))
			return GDR_FAST_DECLINED;
		if (to_mapping) {
			switch (n) {
			case 8: { uint64_t v; __builtin_memcpy(&v, src, 8); *(volatile uint64_t *)dst = v; break; }
			case 4: { uint32_t v; __builtin_memcpy(&v, src, 4); *(volatile uint32_t *)dst = v; break; }
			case 2: { uint16_t v; __builtin_memcpy(&v, src, 2); *(volatile uint16_t *)dst = v; break; }
			default: *(volatile uint8_t *)dst = *(const uint8_t *)src; break;
			}
		} else {
			/*
			 * One streaming load of the block holding it (no uncached
			 * scalar read), taken apart in registers: no stack frame
			 * on the path (a poll loop pays for each instruction).
			 */
			__m128i block = gdr_fast_stream_load16((const void *)(wc & ~(uintptr_t)15));
			uint64_t v = (uint64_t)_mm_cvtsi128_si64((wc & 8) ? _mm_unpackhi_epi64(block, block) : block);

			v >>= (wc & 7) * 8;
			switch (n) {
			case 8: __builtin_memcpy(dst, &v, 8); break;
			case 4: { uint32_t w = (uint32_t)v; __builtin_memcpy(dst, &w, 4); break; }
			case 2: { uint16_t w = (uint16_t)v; __builtin_memcpy(dst, &w, 2); break; }
			default: *(unsigned char *)dst = (unsigned char)v; break;
			}
			if (!gdr_fast_read_wait())
				return GDR_FAST_READ_WAIT;
		}
	} else if (n >= 64 && !((wc | n) & 63) && (to_mapping ? gdr_fast_lines_to : gdr_fast_lines_from)) {
		return GDR_FAST_LINES;
	} else if (n > 64 || ((wc | n) & 15)) {
		return GDR_FAST_DECLINED;
	} else if (!to_mapping && n > 16 && gdr_fast_line_read && gdr_single_load_width(wc, n)) {
		return GDR_FAST_IN_LINE;	/* 32 or 48 B inside a line: one load */
	} else if (to_mapping) {
		for (i = 0; i < n / 16; i++)
			_mm_stream_si128((__m128i *)dst + i, _mm_loadu_si128((const __m128i *)src + i));
	} else {
		for (i = 0; i < n / 16; i++)
			_mm_storeu_si128((__m128i *)dst + i, gdr_fast_stream_load16((const __m128i *)src + i));
		if (gdr_single_load_width(wc, n) && !gdr_fast_read_wait())
			return GDR_FAST_READ_WAIT;	/* a read of one line (no small_read: no AVX-512) */
	}
	/*
	 * The fence every WC copy ends with.  For reads it also matters: without
	 * it, back-to-back streaming loads of one line are served from the
	 * streaming-load buffer (stale data, measured); after it, the next read
	 * fetches the line again.
	 */
	_mm_sfence();
	return GDR_FAST_DONE;
}

/* True when the copy was done here (fence included); false: take the general path. */
static inline __attribute__((always_inline)) bool gdr_copy_fast(gdr_mapping_type_t type, bool to_mapping, void *dst, const void *src, size_t n)
{
	enum gdr_fast_verdict verdict = gdr_copy_fast_inline(type, to_mapping, dst, src, n);

	if (verdict == GDR_FAST_DECLINED)
		return false;
	if (verdict != GDR_FAST_DONE)
		gdr_copy_fast_call(dst, src, n, to_mapping, verdict);
	return true;
}
#else
#include <errno.h>

/* No inline path here: every copy takes the general one. */
static inline enum gdr_fast_verdict gdr_copy_fast_inline(gdr_mapping_type_t type, bool to_mapping, void *dst,
							 const void *src, size_t n)
{
	(void)type, (void)to_mapping, (void)dst, (void)src, (void)n;
	return GDR_FAST_DECLINED;
}

static inline int gdr_copy_fast_call(void *dst, const void *src, size_t n, bool to_mapping,
				     enum gdr_fast_verdict verdict)
{
	(void)dst, (void)src, (void)n, (void)to_mapping, (void)verdict;
	return EINVAL;	/* never reached: the inline path declines everything here */
}

static inline bool gdr_copy_fast(gdr_mapping_type_t type, bool to_mapping, void *dst, const void *src, size_t n)
{
	(void)type, (void)to_mapping, (void)dst, (void)src, (void)n;
	return false;
}
#endif

#endif /* GDRAPI_COPY_FAST_H */
