/* SPDX-License-Identifier: MIT */
/* Private declarations shared by the files of libgdrapi.  Nothing here is ABI. */
#ifndef GDRAPI_INTERNAL_H
#define GDRAPI_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gdrapi.h"
#include "backend.h"

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

/* What to do about a failed cuInit (cuda_diag.c): one sentence, never NULL. */
const char *gdr_cuda_init_hint(int cuda_error);

static inline size_t gdr_round_up_to_page(size_t len)
{
	const struct gdr_host_page *page = gdr_host_page();

	return (len + page->mask) & ~page->mask;
}

/*
 * One pinned buffer: a record of the process-wide handle table (gdrapi.c),
 * which gdr_mh_t.h names by slot and generation.  Records are never freed,
 * only reused, so any handle value can be looked up safely.  The copy
 * functions get only the gdr_mh_t, so handle/mapping_type/map_va are atomics
 * they read lock-free.
 */
struct gdr_memh {
	_Atomic unsigned long handle;	/* the live gdr_mh_t.h naming this record, 0 when none */
	unsigned long slot;		/* fixed: where it sits in the table */
	unsigned long generation;	/* bumped on every reuse, under the table lock */
	struct gdr *owner;
	struct gdr_memh *prev, *next;	/* owner's list, under owner->lock; next also links free records */
	unsigned int refs;		/* under the table lock; see memh_get() */
	bool unpinned;			/* under the table lock */

	pthread_mutex_t lock;		/* serialises state changes of this buffer */

	/* Filled by the backend's pin(). */
	unsigned long pinned_addr;	/* as the caller passed it */
	size_t pinned_size;
	uint32_t pin_flags;
	void *backend_priv;

	/* Mapping state, under lock; also read lock-free by the copy path. */
	_Atomic(void *) map_va;
	size_t map_size;
	_Atomic int mapping_type;	/* gdr_mapping_type_t; NONE when unmapped */
};

struct gdr {
	const struct gdr_backend_ops *ops;
	void *backend_priv;

	pthread_mutex_t lock;		/* protects the buffer list */
	struct gdr_memh *memh_list;
};

/* Copy engine (copy.c). */
int gdr_copy_to_type(gdr_mapping_type_t type, void *dst, const void *src, size_t size);
int gdr_copy_from_type(gdr_mapping_type_t type, void *dst, const void *src, size_t size);
/* Bookkeeping of live mappings per type, for the "mixed mappings" fence. */
void gdr_mapping_count_add(gdr_mapping_type_t type, int delta);
/* Detect CPU features and choose routines now (gdr_open calls it; otherwise first copy does). */
void gdr_copy_engine_init(void);

/* Where the gdrdrv backend looks for its device; the unit tests point this at fixtures. */
struct gdrdrv_sys_paths {
	const char *device;		/* /dev/gdrdrv */
	const char *sys_misc_dev;	/* /sys/class/misc/gdrdrv/dev: "major:minor" of our misc device */
	const char *proc_devices;	/* /proc/devices: the major GDRCopy's gdrdrv (register_chrdev) has */
	const char *sys_module;		/* /sys/module/gdrdrv: exists while loaded */
};
extern const struct gdrdrv_sys_paths *gdrdrv_sys_paths;

/* Shared by the v1 gdr_get_info symbol (gdrapi_v1.c) and gdrapi.c. */
int gdr_get_info_common(gdr_t g, gdr_mh_t handle, gdr_info_v2_t *info, bool v1);

#endif /* GDRAPI_INTERNAL_H */
