/* SPDX-License-Identifier: MIT */
/* Parallel copies for large transfers (gdr_copy_*_parallel, GDRCOPY_COPY_THREADS). */
#ifndef GDRAPI_PARALLEL_COPY_H
#define GDRAPI_PARALLEL_COPY_H

#include <stdbool.h>
#include <stddef.h>

#include "gdrapi.h"

/* No piece is smaller than this: below it one core is as fast as several. */
#define GDR_PARALLEL_MIN_PIECE ((size_t)256 << 10)
/* Workers never exceed this many. */
#define GDR_PARALLEL_MAX_THREADS 64U

/*
 * Copy size bytes in up to `threads` contiguous pieces at once: the calling
 * thread copies one, pool workers the others.  The range is already checked
 * against the mapping.  Returns 0 or the first error a piece returned.
 */
int gdr_copy_parallel(gdr_mapping_type_t type, bool to_mapping, void *dst, const void *src, size_t size,
		      unsigned int threads);

/*
 * How many threads an ordinary gdr_copy_to/from_mapping() of `size` bytes
 * should use: GDRCOPY_COPY_THREADS (default 1, i.e. no parallelism) when size
 * is at least GDRCOPY_PARALLEL_MIN_SIZE (default 1 MiB), else 1.
 */
unsigned int gdr_default_copy_threads(size_t size);

#endif /* GDRAPI_PARALLEL_COPY_H */
