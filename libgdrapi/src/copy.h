/* SPDX-License-Identifier: MIT */
/*
 * The copy engine's private interface: sets of block-copy routines for
 * write-combined (WC) memory, one set chosen at run time from the CPU's
 * features, and the driver that splits a copy among them.  The unit tests
 * run every set this CPU can execute.
 */
#ifndef GDRAPI_COPY_H
#define GDRAPI_COPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * store<W> copies n bytes from host memory to WC memory; load<W> the other
 * way.  n is a multiple of W and the WC-side pointer is W-aligned; the host
 * pointer may have any alignment.  Loads from WC memory must be streaming
 * loads (MOVNTDQA and friends): ordinary loads from WC are uncached and
 * many times slower.  A NULL routine is simply not used.
 */
typedef void (*gdr_block_copy_fn)(void *dst, const void *src, size_t n);

/*
 * Copy bytes [offset, offset + len) of the 16-byte WC block at block (16-byte
 * aligned) to dst, with one streaming load and no bounce buffer (a masked
 * store); 0 < len, offset + len <= 16.
 */
typedef void (*gdr_part_load_fn)(void *dst, const void *block, unsigned int offset, unsigned int len);

/*
 * Read 1..64 bytes at any alignment from WC memory, in as few instructions as
 * the CPU allows (copy.c uses it below 64); a read that gdr_single_load_width
 * gives a width is done with that one load.
 */
typedef void (*gdr_small_read_fn)(void *dst, const void *wc_src, size_t n);

struct gdr_copy_routines {
	const char *name;	/* as GDRCOPY_COPY_ROUTINE names it */
	const char *store_desc;	/* for the log: which instructions */
	const char *load_desc;
	bool use_memcpy;	/* libc memcpy for everything (benchmark baseline) */
	gdr_block_copy_fn store16, store32, store64;
	gdr_block_copy_fn load16, load32, load64;
	gdr_part_load_fn load16_part;	/* NULL: a bounce buffer does the job */
	gdr_small_read_fn small_read;	/* NULL: the general path */
	gdr_block_copy_fn poll16;	/* whole lines, 16-byte loads each stored at once (copy_fast.c); NULL: none */
	gdr_block_copy_fn poll32;	/* the same with 32-byte loads; NULL: none */
	gdr_block_copy_fn read32;	/* one 32-byte load of an aligned 32-byte block (never torn); NULL: none */
};

/*
 * Reads that never tear.  A read of [src, src + n) that lies inside one
 * aligned 16-, 32- or 64-byte block can be done with one streaming load of
 * that block; this is the block's width (the smallest that holds the read),
 * or 0 when no single load holds it (n == 0, n > 64, or the read crosses a
 * 64-byte line).  small_read does such reads with that one load where the CPU
 * has the width (x86: AVX-512BW/VL), and so does the inline path.
 */
static inline unsigned int gdr_single_load_width(uintptr_t src, size_t n)
{
	uintptr_t last = src + n - 1;
	unsigned int width;

	if (n == 0 || n > 64)
		return 0;
	for (width = 16; width <= 64; width <<= 1)
		if ((src & ~(uintptr_t)(width - 1)) == (last & ~(uintptr_t)(width - 1)))
			return width;
	return 0;
}

/* Names GDRCOPY_COPY_ROUTINE accepts, NULL-terminated; "auto" is the default. */
extern const char *const gdr_copy_routine_names[];

/* Fill r with the named set; false when this CPU (or build) cannot run it. */
bool gdr_copy_routines_get(const char *name, struct gdr_copy_routines *r);

/* The best set for this CPU. */
void gdr_copy_routines_best(struct gdr_copy_routines *r);

/* Copy any size with any alignment, using r for the aligned middle. */
void gdr_wc_copy_to(const struct gdr_copy_routines *r, void *wc_dst, const void *src, size_t n);
void gdr_wc_copy_from(const struct gdr_copy_routines *r, void *dst, const void *wc_src, size_t n);

/* Architecture part (copy_x86.c or copy_generic.c). */
bool gdr_arch_copy_routines_get(const char *name, struct gdr_copy_routines *r);
void gdr_arch_copy_routines_best(struct gdr_copy_routines *r);
void gdr_arch_store_fence(void);
/* Whether copy_fast.h's inline path may run (x86: SSE4.1). */
bool gdr_arch_fast_path_ok(void);
void gdr_arch_full_fence(void);

/* Polls of whole lines (copy_fast.c): the engine's 16- and 32-byte poll routines (NULL: none), GDRCOPY_POLL_READS. */
void gdr_poll_setup(gdr_block_copy_fn poll16, gdr_block_copy_fn poll32);

/* Portable 16-byte routines (two 8-byte volatile accesses), usable on every arch. */
void gdr_generic_store16(void *dst, const void *src, size_t n);
void gdr_generic_load16(void *dst, const void *src, size_t n);

#endif /* GDRAPI_COPY_H */
