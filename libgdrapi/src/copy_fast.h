/* SPDX-License-Identifier: MIT */
/*
 * The shortest path for the commonest small copies through a WC mapping:
 * 16-byte-aligned blocks of up to 64 bytes written or 48 bytes read, and
 * naturally aligned 1/2/4/8-byte writes (flags, doorbells, ring slots).  A
 * whole line is read with one 64-byte load (copy.c), which this path, at the
 * baseline ISA, cannot issue.  Inlined into the API
 * functions so that such a copy is a dozen instructions after the handle is
 * checked: a loop polling GPU memory keeps as many reads in flight as the
 * core's reorder window holds calls, so every instruction on this path
 * lengthens its period (measured on an H200: tools/h200/RESULTS.md).
 * Everything else goes through copy.c.
 */
#ifndef GDRAPI_COPY_FAST_H
#define GDRAPI_COPY_FAST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gdrapi.h"

/* Set once the engine is chosen: the CPU has SSE4.1 and nothing overrides the best set. */
extern atomic_bool gdr_copy_fast_ok;
/* How many mapping types have live mappings (copy.c): above 1, copies end with a full fence. */
extern atomic_int gdr_live_mapping_types;

#if defined(__x86_64__)
#include <emmintrin.h>

/* True when the copy was done here (fence included); false: take the general path. */
static inline bool gdr_copy_fast(gdr_mapping_type_t type, bool to_mapping, void *dst, const void *src, size_t n)
{
	uintptr_t wc = to_mapping ? (uintptr_t)dst : (uintptr_t)src;
	size_t i;

	if (type != GDR_MAPPING_TYPE_WC || n == 0 || n > 64 ||
	    !atomic_load_explicit(&gdr_copy_fast_ok, memory_order_relaxed) ||
	    atomic_load_explicit(&gdr_live_mapping_types, memory_order_relaxed) > 1)
		return false;
	if (to_mapping && n < 16) {
		if ((n & (n - 1)) || (wc & (n - 1)))
			return false;
		switch (n) {
		case 8: { uint64_t v; __builtin_memcpy(&v, src, 8); *(volatile uint64_t *)dst = v; break; }
		case 4: { uint32_t v; __builtin_memcpy(&v, src, 4); *(volatile uint32_t *)dst = v; break; }
		case 2: { uint16_t v; __builtin_memcpy(&v, src, 2); *(volatile uint16_t *)dst = v; break; }
		default: *(volatile uint8_t *)dst = *(const uint8_t *)src; break;
		}
	} else if (((wc | n) & 15) || (!to_mapping && n == 64)) {
		return false;
	} else if (to_mapping) {
		for (i = 0; i < n / 16; i++)
			_mm_stream_si128((__m128i *)dst + i, _mm_loadu_si128((const __m128i *)src + i));
	} else {
		for (i = 0; i < n / 16; i++) {
			__m128i v;

			/* MOVNTDQA (SSE4.1, checked at init) as asm: inlinable at the baseline ISA. */
			__asm__ volatile("movntdqa %1, %0" : "=x"(v) : "m"(((const __m128i *)src)[i]));
			_mm_storeu_si128((__m128i *)dst + i, v);
		}
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
