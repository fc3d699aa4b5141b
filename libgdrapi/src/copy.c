// SPDX-License-Identifier: MIT
/*
 * The copy engine: gdr_copy_{to,from}_mapping and the type-driven
 * extensions land here.  What each mapping type needs:
 *
 *  WC       memory behind a PCI BAR, write-combined: stores must fill whole
 *           64-byte lines (vector streaming stores or MOVDIR64B) and loads
 *           must be streaming loads; the ends of an unaligned range are done
 *           with naturally aligned 1/2/4/8-byte accesses.
 *  DEVICE   Arm device memory: no unaligned accesses at all.
 *  CACHING  ordinary coherent memory: memcpy.
 *
 * Afterwards a fence makes the copy visible/ordered: a store fence after a
 * WC copy, and a full fence when mappings of several types exist in the
 * process at once (a WC store could otherwise pass a cached one).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "copy_engine.h"
#include "copy_fast.h"
#include "internal.h"

const char *const gdr_copy_routine_names[] = {
	"auto", "generic", "sse", "avx2", "avx512", "movdir64b", "neon", "ldp", "memcpy", NULL,
};

/* Live mappings per type, and how many types have any: the mixed-mapping fence. */
static atomic_int live_mappings[GDR_MAPPING_TYPE_MAX];
static atomic_int gdr_live_mapping_types;

void gdr_mapping_count_add(gdr_mapping_type_t type, int delta)
{
	int before;

	if ((int)type <= GDR_MAPPING_TYPE_NONE || (int)type >= GDR_MAPPING_TYPE_MAX)
		return;
	before = atomic_fetch_add(&live_mappings[type], delta);
	/* Each crossing between one type and two is seen by exactly one thread. */
	if (before == 0 && delta > 0) {
		if (atomic_fetch_add(&gdr_live_mapping_types, 1) == 1)
			atomic_fetch_add(&gdr_copy_fast_blockers, GDR_FAST_BLOCK_MIXED);
	} else if (before + delta == 0 && delta < 0) {
		if (atomic_fetch_sub(&gdr_live_mapping_types, 1) == 2)
			atomic_fetch_sub(&gdr_copy_fast_blockers, GDR_FAST_BLOCK_MIXED);
	}
}

/* One load on every copy's path. */
static bool mixed_mappings(void)
{
	return atomic_load_explicit(&gdr_live_mapping_types, memory_order_relaxed) > 1;
}

void gdr_generic_store16(void *dst, const void *src, size_t n)
{
	volatile uint64_t *d = dst;
	const char *s = src;
	uint64_t a, b;

	for (; n; n -= 16, s += 16, d += 2) {
		memcpy(&a, s, 8);
		memcpy(&b, s + 8, 8);
		d[0] = a;
		d[1] = b;
	}
}

void gdr_generic_load16(void *dst, const void *src, size_t n)
{
	const volatile uint64_t *s = src;
	char *d = dst;
	uint64_t a, b;

	for (; n; n -= 16, d += 16, s += 2) {
		a = s[0];
		b = s[1];
		memcpy(d, &a, 8);
		memcpy(d + 8, &b, 8);
	}
}

/* The widest naturally aligned access (1, 2, 4 or 8 bytes) at addr that fits in n. */
static size_t aligned_width(uintptr_t addr, size_t n)
{
	size_t w = 8;

	while (w > 1 && ((addr & (w - 1)) || w > n))
		w >>= 1;
	return w;
}

/* dev is the side that must only see naturally aligned accesses. */
static void scalar_copy_to(char *dev, const char *src, size_t n)
{
	while (n) {
		size_t w = aligned_width((uintptr_t)dev, n);

		switch (w) {
		case 8: { uint64_t v; memcpy(&v, src, 8); *(volatile uint64_t *)dev = v; break; }
		case 4: { uint32_t v; memcpy(&v, src, 4); *(volatile uint32_t *)dev = v; break; }
		case 2: { uint16_t v; memcpy(&v, src, 2); *(volatile uint16_t *)dev = v; break; }
		default: *(volatile uint8_t *)dev = *(const uint8_t *)src; break;
		}
		dev += w;
		src += w;
		n -= w;
	}
}

static void scalar_copy_from(char *dst, const char *dev, size_t n)
{
	while (n) {
		size_t w = aligned_width((uintptr_t)dev, n);

		switch (w) {
		case 8: { uint64_t v = *(const volatile uint64_t *)dev; memcpy(dst, &v, 8); break; }
		case 4: { uint32_t v = *(const volatile uint32_t *)dev; memcpy(dst, &v, 4); break; }
		case 2: { uint16_t v = *(const volatile uint16_t *)dev; memcpy(dst, &v, 2); break; }
		default: *(uint8_t *)dst = *(const volatile uint8_t *)dev; break;
		}
		dev += w;
		dst += w;
		n -= w;
	}
}

/*
 * How many bytes the next vector step copies at WC address a with n left
 * (n >= 16, a 16-aligned), and with which width.  The widest routine takes
 * the bulk; narrower ones take single steps to reach its alignment, or the
 * rest when a wider one cannot go on.
 */
static size_t vector_step(gdr_block_copy_fn fn16, gdr_block_copy_fn fn32, gdr_block_copy_fn fn64, uintptr_t a,
			  size_t n, gdr_block_copy_fn *fn)
{
	if (fn64 && n >= 64 && !(a & 63)) {
		*fn = fn64;
		return n & ~(size_t)63;
	}
	if (fn32 && n >= 32 && !(a & 31)) {
		*fn = fn32;
		return fn64 && n >= 96 ? 32 : n & ~(size_t)31;
	}
	*fn = fn16;
	return (fn32 && n >= 48) || (fn64 && n >= 80) ? 16 : n & ~(size_t)15;
}

void gdr_wc_copy_to(const struct gdr_copy_routines *r, void *wc_dst, const void *src, size_t n)
{
	char *d = wc_dst;
	const char *s = src;
	size_t head;

	if (r->use_memcpy) {
		memcpy(wc_dst, src, n);
		return;
	}
	head = (-(uintptr_t)d) & 15;
	if (n < 16 || head >= n) {
		scalar_copy_to(d, s, n);
		return;
	}
	scalar_copy_to(d, s, head);
	d += head;
	s += head;
	n -= head;
	while (n >= 16) {
		gdr_block_copy_fn fn;
		size_t step = vector_step(r->store16, r->store32, r->store64, (uintptr_t)d, n, &fn);

		fn(d, s, step);
		d += step;
		s += step;
		n -= step;
	}
	scalar_copy_to(d, s, n);
}

/*
 * Reads.  What was measured on an H200's BAR1 (Sapphire Rapids, in a VM; see
 * tools/h200/RESULTS.md), and what it decides here:
 *  - One 64-byte streaming load (AVX-512) fetches a line in one PCIe round
 *    trip; four 16-byte ones often take two.  Reads of distinct lines issued
 *    back to back overlap best with 64-byte loads too.  So whole lines are
 *    read with the 64-byte routine.
 *  - A 64-byte load of a line whose previous load is still in flight waits
 *    for it, so a loop polling the same 64..512 bytes pays about one round
 *    trip per call.  16-byte loads of one line overlapped on some machines of
 *    the same kind and not on others (0.3 to 1.6 us), and can cost a single
 *    read a second round trip.  So polls (the inline path tells them apart)
 *    use whichever the process measured faster (copy_fast.c); every other
 *    read of whole lines uses 64-byte loads.
 *  - Staging bytes in a bounce buffer costs about 0.2 us per call (the copy
 *    out of it waits for the load); a masked store of the loaded register
 *    does not.
 *  - Back to back, a core keeps reads of about 16 lines in flight, but only
 *    as many calls as its reorder window holds: every instruction on the
 *    path of a small read lengthens a polling loop's period.  So reads of
 *    less than a line take one short routine (small_read) where the CPU has
 *    one, and aligned ones are inlined into the API (copy_fast.h).
 */

/* Part of one 16-byte block: the masked-store routine, or a bounce buffer. */
static void part_copy_from(const struct gdr_copy_routines *r, char *d, const char *block, unsigned int offset,
			   unsigned int len)
{
	_Alignas(16) char bounce[16];

	if (r->load16_part) {
		r->load16_part(d, block, offset, len);
		return;
	}
	r->load16(bounce, block, 16);
	memcpy(d, bounce + offset, len);
}

/*
 * Any range with 16-byte streaming loads only: the reading side never sees
 * anything but whole aligned blocks (the extra bytes lie in the same blocks,
 * hence in the same page, and reading GPU memory has no side effects).
 */
static void load16_range(const struct gdr_copy_routines *r, char *d, const char *s, size_t n)
{
	unsigned int offset = (unsigned int)((uintptr_t)s & 15);
	size_t whole;

	if (offset) {
		unsigned int len = n < 16 - offset ? (unsigned int)n : 16 - offset;

		part_copy_from(r, d, s - offset, offset, len);
		d += len;
		s += len;
		n -= len;
	}
	whole = n & ~(size_t)15;
	if (whole) {
		r->load16(d, s, whole);
		d += whole;
		s += whole;
		n -= whole;
	}
	if (n)
		part_copy_from(r, d, s, 0, (unsigned int)n);
}

void gdr_wc_copy_from(const struct gdr_copy_routines *r, void *dst, const void *wc_src, size_t n)
{
	const char *s = wc_src;
	char *d = dst;
	size_t head;

	if (r->use_memcpy) {
		memcpy(dst, wc_src, n);
		return;
	}
	if (n == 32 && r->read32 && !((uintptr_t)s & 31)) {
		r->read32(d, s, 32);	/* one load, unmasked: the inline path's way */
		return;
	}
	if (n < 64 && r->small_read) {
		if (n)
			r->small_read(d, s, n);
		return;
	}
	if (!r->load16) {
		scalar_copy_from(d, s, n);
		return;
	}
	if (n < 64 || (!r->load64 && !r->load32)) {
		load16_range(r, d, s, n);
		return;
	}
	head = (-(uintptr_t)s) & 63;
	if (head) {
		load16_range(r, d, s, head);
		d += head;
		s += head;
		n -= head;
	}
	while (n >= 16) {
		gdr_block_copy_fn fn;
		size_t step = vector_step(r->load16, r->load32, r->load64, (uintptr_t)s, n, &fn);

		fn(d, s, step);
		d += step;
		s += step;
		n -= step;
	}
	if (n)
		load16_range(r, d, s, n);
}

bool gdr_copy_routines_get(const char *name, struct gdr_copy_routines *r)
{
	memset(r, 0, sizeof(*r));
	if (strcmp(name, "auto") == 0) {
		gdr_copy_routines_best(r);
		return true;
	}
	if (strcmp(name, "memcpy") == 0) {
		r->name = "memcpy";
		r->store_desc = r->load_desc = "libc memcpy (plain loads and stores)";
		r->use_memcpy = true;
		return true;
	}
	if (strcmp(name, "generic") == 0) {
		r->name = "generic";
		r->store_desc = r->load_desc = "portable C, 8-byte volatile accesses";
		r->store16 = gdr_generic_store16;
		r->load16 = gdr_generic_load16;
		return true;
	}
	return gdr_arch_copy_routines_get(name, r);
}

void gdr_copy_routines_best(struct gdr_copy_routines *r)
{
	memset(r, 0, sizeof(*r));
	gdr_arch_copy_routines_best(r);
}

static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static atomic_bool engine_ready;	/* the fast check on every copy; pthread_once behind it */
static struct gdr_copy_routines engine;

static void engine_choose(void)
{
	const char *wanted = getenv("GDRCOPY_COPY_ROUTINE");
	bool fast_ok;

	if (wanted && *wanted && strcmp(wanted, "auto") != 0) {
		if (gdr_copy_routines_get(wanted, &engine)) {
			gdr_info("copy engine: GDRCOPY_COPY_ROUTINE=%s: stores to WC memory with %s, loads with %s",
				 wanted, engine.store_desc, engine.load_desc);
			return;
		}
		gdr_warn("copy engine: GDRCOPY_COPY_ROUTINE=%s is unknown or this CPU cannot run it (choose from generic, sse, avx2, avx512, movdir64b on x86; neon, ldp on arm64; memcpy, auto); using the best available",
			 wanted);
	}
	gdr_copy_routines_best(&engine);
	gdr_fast_lines_to = engine.store64;
	gdr_fast_lines_from = engine.load64;
	gdr_fast_line_read = engine.small_read;
	gdr_fast_read32 = engine.read32;
	gdr_poll_setup(engine.poll16, engine.poll32);
	fast_ok = gdr_arch_fast_path_ok();
	atomic_store_explicit(&gdr_copy_fast_ok, fast_ok, memory_order_release);
	if (fast_ok)
		atomic_fetch_and_explicit(&gdr_copy_fast_blockers, ~GDR_FAST_BLOCK_ENGINE, memory_order_release);
	else
		atomic_fetch_or(&gdr_copy_fast_blockers, GDR_FAST_BLOCK_ENGINE);
	gdr_info("copy engine: %s: stores to WC memory with %s, loads with %s", engine.name, engine.store_desc,
		 engine.load_desc);
}

static void engine_choose_once(void)
{
	engine_choose();
	atomic_store_explicit(&engine_ready, true, memory_order_release);
}

void gdr_copy_engine_init(void)
{
	if (!atomic_load_explicit(&engine_ready, memory_order_acquire))
		pthread_once(&engine_once, engine_choose_once);
}

static void copy_fence(gdr_mapping_type_t type)
{
	if (mixed_mappings())
		gdr_arch_full_fence();
	else if (type == GDR_MAPPING_TYPE_WC)
		gdr_arch_store_fence();
}

/* DEVICE memory: memcpy only when it is sure to make aligned 8-byte accesses. */
static bool all_8_aligned(const void *a, const void *b, size_t n)
{
	return (((uintptr_t)a | (uintptr_t)b | n) & 7) == 0;
}

/* Both directions: the routine each mapping type needs, then the fence copies end with. */
static int copy_for_type(gdr_mapping_type_t type, bool to_mapping, void *dst, const void *src, size_t size)
{
	if ((int)type <= GDR_MAPPING_TYPE_NONE || (int)type >= GDR_MAPPING_TYPE_MAX) {
		gdr_err("gdr_copy: unknown mapping type %d", (int)type);
		return EINVAL;
	}
	if (size == 0)
		return 0;
	gdr_copy_engine_init();
	switch (type) {
	case GDR_MAPPING_TYPE_WC:
		if (to_mapping)
			gdr_wc_copy_to(&engine, dst, src, size);
		else
			gdr_wc_copy_from(&engine, dst, src, size);
		break;
	case GDR_MAPPING_TYPE_DEVICE:
		if (all_8_aligned(dst, src, size))
			memcpy(dst, src, size);
		else if (to_mapping)
			scalar_copy_to(dst, src, size);
		else
			scalar_copy_from(dst, src, size);
		break;
	default:
		memcpy(dst, src, size);
		break;
	}
	copy_fence(type);
	return 0;
}

/*
 * The exported gdr_copy_{to,from}_mapped_memory land here too, so they try
 * the inline path first, as gdr_copy_{to,from}_mapping do (for those this is
 * a second look after a decline: a few compares on a path of >64 bytes or odd
 * alignment).  Before, they went straight to copy_for_type, the general
 * path: with it forced, a 64-byte ping-pong round trip took 2.09-2.16 us
 * against 2.08-2.19 inline (tools/h200/RESULTS.md, issue 26).
 */
int gdr_copy_to_type(gdr_mapping_type_t type, void *dst, const void *src, size_t size)
{
	if (gdr_copy_fast(type, true, dst, src, size))
		return 0;
	return copy_for_type(type, true, dst, src, size);
}

int gdr_copy_from_type(gdr_mapping_type_t type, void *dst, const void *src, size_t size)
{
	if (gdr_copy_fast(type, false, dst, src, size))
		return 0;
	return copy_for_type(type, false, dst, src, size);
}
