/* SPDX-License-Identifier: MIT */
/*
 * The library's leaf helpers, usable from every file: the export marker,
 * logging (log.c), the host page and mapping-type names (internal.c).  This
 * header depends on nothing of the library but the public gdrapi.h, so
 * including it never pulls in the API, a backend or the copy engine.
 * Nothing here is ABI.
 */
#ifndef GDRAPI_INTERNAL_H
#define GDRAPI_INTERNAL_H

#include <stdbool.h>
#include <stdatomic.h>
#include <stddef.h>

#include "gdrapi.h"

/* Marks the functions that form the ABI; everything else is hidden (-fvisibility=hidden). */
#define GDR_EXPORT __attribute__((visibility("default")))

#define GDR_LOG_DEBUG 1
#define GDR_LOG_INFO 2
#define GDR_LOG_WARN 3
#define GDR_LOG_ERROR 4

/*
 * Print to stderr when GDRCOPY_ENABLE_LOGGING is set and level is at least
 * GDRCOPY_LOG_LEVEL (default GDR_LOG_ERROR).  Silent otherwise.
 */
void gdr_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool gdr_log_enabled(int level);

#define gdr_dbg(...) gdr_log(GDR_LOG_DEBUG, __VA_ARGS__)
#define gdr_info(...) gdr_log(GDR_LOG_INFO, __VA_ARGS__)
#define gdr_warn(...) gdr_log(GDR_LOG_WARN, __VA_ARGS__)
#define gdr_err(...) gdr_log(GDR_LOG_ERROR, __VA_ARGS__)

/* The host page, read once with sysconf(): never a compile-time PAGE_SIZE. */
struct gdr_host_page {
	size_t size;
	size_t mask;	/* size - 1 */
	unsigned int shift;
};
const struct gdr_host_page *gdr_host_page(void);

/*
 * Counts the fork()s that made this process: a gdr_t opened under another
 * count belongs to an ancestor, whose mappings and pins are not ours.
 */
unsigned int gdr_fork_generation(void);

static inline size_t gdr_round_up_to_page(size_t len)
{
	const struct gdr_host_page *page = gdr_host_page();

	return (len + page->mask) & ~page->mask;
}

/* "Write Combining" and the like, as gdr_get_mapping_type_string() names them; NULL for no known type. */
const char *gdr_mapping_type_name(gdr_mapping_type_t type);

#endif /* GDRAPI_INTERNAL_H */
