/* SPDX-License-Identifier: MIT */
/*
 * The shortest path for the commonest small copies through a WC mapping:
 * naturally aligned 1/2/4/8-byte accesses (flags, doorbells), 16-byte-aligned
 * blocks of up to 64 bytes, and whole 64-byte lines up to 512 bytes either
 * way.  Inlined into the API functions so that such a copy is a dozen
 * instructions after the handle is checked: a loop polling GPU memory keeps
 * as many reads in flight as the core's reorder window holds calls, so every
 * instruction on this path lengthens its period (measured on an H200:
 * tools/h200/RESULTS.md).  Everything else goes through copy.c.
 */
#ifndef GDRAPI_COPY_FAST_H
#define GDRAPI_COPY_FAST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "copy.h"
#include "gdrapi.h"

/* Set (release) once the engine is chosen: the CPU has SSE4.1 and nothing overrides the best set. */
extern atomic_bool gdr_copy_fast_ok;
/* The engine's whole-line routines (64-byte streaming stores and loads), or NULL; valid once fast_ok. */
extern gdr_block_copy_fn gdr_fast_lines_to, gdr_fast_lines_from;
/* How many mapping types have live mappings (copy.c): above 1, copies end with a full fence. */
extern atomic_int gdr_live_mapping_types;

/* At most this many bytes of whole lines take the inline path (above: the general one, same routines). */
#define GDR_FAST_LINES_MAX 512

#if defined(__x86_64__)
#include <emmintrin.h>

/* MOVNTDQA (SSE4.1, checked at init) as asm: inlinable at the baseline ISA. */
static inline __m128i gdr_fast_stream_load16(const void *block)
{
	__m128i v;

	__asm__ volatile("movntdqa %1, %0" : "=x"(v) : "m"(*(const __m128i *)block));
	return v;
}

/* True when the copy was done here (fence included); false: take the general path. */
static inline bool gdr_copy_fast(gdr_mapping_type_t type, bool to_mapping, void *dst, const void *src, size_t n)
{
	uintptr_t wc = to_mapping ? (uintptr_t)dst : (uintptr_t)src;
	gdr_block_copy_fn lines;
	size_t i;

	if (type != GDR_MAPPING_TYPE_WC || n == 0 || n > GDR_FAST_LINES_MAX ||
	    !atomic_load_explicit(&gdr_copy_fast_ok, memory_order_acquire) ||
	    atomic_load_explicit(&gdr_live_mapping_types, memory_order_relaxed) > 1)
		return false;
	lines = to_mapping ? gdr_fast_lines_to : gdr_fast_lines_from;
	if (n < 16) {
		if ((n & (n - 1)) || (wc & (n - 1)))
			return false;
		if (to_mapping) {
			switch (n) {
			case 8: { uint64_t v; __builtin_memcpy(&v, src, 8); *(volatile uint64_t *)dst = v; break; }
			case 4: { uint32_t v; __builtin_memcpy(&v, src, 4); *(volatile uint32_t *)dst = v; break; }
			case 2: { uint16_t v; __builtin_memcpy(&v, src, 2); *(volatile uint16_t *)dst = v; break; }
			default: *(volatile uint8_t *)dst = *(const uint8_t *)src; break;
			}
		} else {
			/* One streaming load of the block holding it (no uncached scalar read). */
			_Alignas(16) unsigned char block[16];
			const unsigned char *at = block + (wc & 15);

			_mm_store_si128((__m128i *)block, gdr_fast_stream_load16((const void *)(wc & ~(uintptr_t)15)));
			switch (n) {
			case 8: __builtin_memcpy(dst, at, 8); break;
			case 4: __builtin_memcpy(dst, at, 4); break;
			case 2: __builtin_memcpy(dst, at, 2); break;
			default: *(unsigned char *)dst = *at; break;
			}
		}
	} else if (n >= 64 && !((wc | n) & 63) && lines) {
		lines(dst, src, n);
	} else if (n > 64 || ((wc | n) & 15)) {
		return false;
	} else if (to_mapping) {
		for (i = 0; i < n / 16; i++)
			_mm_stream_si128((__m128i *)dst + i, _mm_loadu_si128((const __m128i *)src + i));
	} else {
		for (i = 0; i < n / 16; i++)
			_mm_storeu_si128((__m128i *)dst + i, gdr_fast_stream_load16((const __m128i *)src + i));
	}
	/*
	 * The fence every WC copy ends with.  For reads it also matters: without
	 * it, back-to-back streaming loads of one line are served from the
	 * streaming-load buffer (stale data, measured); after it, the next read
	 * fetches the line again.
	 */
	_mm_sfence();
	return true;
}
#else
static inline bool gdr_copy_fast(gdr_mapping_type_t type, bool to_mapping, void *dst, const void *src, size_t n)
{
	(void)type, (void)to_mapping, (void)dst, (void)src, (void)n;
	return false;
}
#endif

#endif /* GDRAPI_COPY_FAST_H */
