/* SPDX-License-Identifier: MIT */
/*
 * The interface between the public API (gdrapi.c) and the ways of getting a
 * CPU mapping of GPU memory ("backends"): the gdrdrv kernel module, a CUDA
 * dma-buf fd, Vulkan.  A backend is one file that defines a const struct
 * gdr_backend_ops gdr_backend_<name> and one line of GDR_BACKENDS below.
 * The core reaches a backend only through its ops; a backend reaches the
 * core only through what this header declares (struct gdr, struct gdr_memh)
 * and the leaf helpers of internal.h, never the public API functions.
 *
 * Locking contract: the core serialises calls per buffer (gdr_memh.lock is
 * held around pin/map/unmap/unpin/get_info/get_cb_flag of that buffer) but
 * calls for different buffers of one gdr_t run concurrently, so a backend
 * keeps per-instance state either immutable after open() or under its own
 * lock.  open() and close() are never concurrent with anything else on the
 * same instance.
 *
 * Return values: 0 or a positive errno, as the public API.  Backends log the
 * reason for a failure themselves (gdr_log), with what to do about it.
 */
#ifndef GDRAPI_BACKEND_H
#define GDRAPI_BACKEND_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gdrapi.h"

/*
 * One pinned buffer: a record of the process-wide handle table (gdrapi.c),
 * which gdr_mh_t.h names by slot and generation.  Records are never freed,
 * only reused, so any handle value can be looked up safely.  The copy
 * functions get only the gdr_mh_t, so handle/mapping_type/map_va are atomics
 * they read lock-free.
 */
struct gdr_memh {
	/*
	 * What every copy reads, lock-free, first and in one cache line (the
	 * records are 64-byte aligned): a polling loop pays for each line it
	 * touches per call.  Mapping state changes under lock.
	 */
	_Atomic unsigned long handle;	/* the live gdr_mh_t.h naming this record, 0 when none */
	_Atomic(void *) map_va;
	/*
	 * The bytes from map_va that the inline copy path may take: map_size
	 * while the mapping is write-combined and of this process, else 0.  One
	 * field answers what the path would otherwise ask of the mapping type
	 * and the fork generation; set last at map, cleared first at unmap and
	 * in a forked child (gdrapi.c).
	 */
	_Atomic size_t fast_len;
	size_t map_size;
	_Atomic int mapping_type;	/* gdr_mapping_type_t; NONE when unmapped */

	unsigned long slot;		/* fixed: where it sits in the table */
	unsigned long generation;	/* bumped on every reuse, under the table lock */
	struct gdr *owner;
	struct gdr_memh *prev, *next;	/* owner's list, under owner->lock; next also links free records */
	unsigned int refs;		/* under the table lock; see memh_get() */
	bool unpinned;			/* under the table lock */
	_Atomic int revocable;		/* a legacy pin (freeing the memory revokes the mapping); -1 not asked yet */
	/*
	 * The application munmapped map_va itself: seen when another mapping
	 * landed on it, or when the backend reported it gone.  map_va stays
	 * set (the caller still holds that pointer) but mapping_type is NONE,
	 * so no copy goes there, and gdr_unmap leaves the address alone.
	 */
	_Atomic bool unmapped_behind;
	/*
	 * Which gdr_map made map_va, from one process-wide count: of two
	 * records that overlap, the newer mapping is the live one (the kernel
	 * gave it free addresses).  Set before map_va, under lock.
	 */
	_Atomic unsigned long map_seq;

	pthread_mutex_t lock;		/* serialises state changes of this buffer */

	/* Filled by the backend's pin(). */
	unsigned long pinned_addr;	/* as the caller passed it */
	size_t pinned_size;
	uint32_t pin_flags;
	void *backend_priv;
} __attribute__((aligned(256)));	/* a power of two: a handle's record is one shift from its chunk */

struct gdr {
	const struct gdr_backend_ops *ops;
	void *backend_priv;

	pthread_mutex_t lock;		/* protects the buffer list */
	struct gdr_memh *memh_list;
	unsigned int fork_generation;	/* gdr_fork_generation() at gdr_open() */
};

/* Why a backend declined to open, for the message gdr_open() prints when none opens. */
#define GDR_BACKEND_WHY_LEN 512

/* Everything a pin request carries; which fields matter depends on the call. */
struct gdr_pin_request {
	unsigned long addr;
	size_t size;
	uint64_t p2p_token;	/* legacy gdr_pin_buffer() only */
	uint32_t va_space;	/* legacy gdr_pin_buffer() only */
	uint32_t flags;		/* GDR_PIN_FLAG_*, already validated */
	bool legacy;		/* came through gdr_pin_buffer() */
};

struct gdr_backend_ops {
	/* Short name used in logs and in GDRCOPY_BACKEND, e.g. "gdrdrv". */
	const char *name;
	/*
	 * map() makes a mapping of its own (an mmap), so the address it returns
	 * was free: an older buffer's mapping there was unmapped behind the
	 * library.  Not so where map() hands out pointers into one mapping that
	 * several buffers share (vulkan maps each allocation once).
	 */
	bool map_makes_own_mapping;
	/*
	 * gdr_open() takes this backend only when asked (GDRCOPY_BACKEND,
	 * gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN), the node's configuration
	 * file), never in its implicit order: it cannot pin every device
	 * allocation (cudaMalloc memory), and consumers take a gdr_open() that
	 * succeeds to mean that they can pin their own (GDRCopy 2.6's does).
	 */
	bool only_when_asked;

	/*
	 * Try to set up this backend for g; on success store state in
	 * g->backend_priv.  On failure return an errno and write one
	 * sentence into why[GDR_BACKEND_WHY_LEN] saying what was found
	 * and what to do.
	 */
	int (*open)(struct gdr *g, char *why);
	/* Release what open() set up.  Every buffer is already unpinned. */
	void (*close)(struct gdr *g);

	/* Pin req; on success fill mh->backend_priv and mh->pinned_*. */
	int (*pin)(struct gdr *g, struct gdr_memh *mh, const struct gdr_pin_request *req);
	/* Undo pin().  The buffer is no longer mapped. */
	int (*unpin)(struct gdr *g, struct gdr_memh *mh);

	/*
	 * Map size bytes of the pinned buffer; requested is GDR_MAPPING_TYPE_NONE
	 * for "driver's choice" or the type the caller insists on.  On success
	 * set *va and *type (never NONE).  A type the backend cannot honour is
	 * EINVAL (or EOPNOTSUPP when the driver said so), with nothing left mapped.
	 */
	int (*map)(struct gdr *g, struct gdr_memh *mh, size_t size, gdr_mapping_type_t requested,
		   void **va, gdr_mapping_type_t *type);
	int (*unmap)(struct gdr *g, struct gdr_memh *mh, void *va, size_t size);

	int (*get_info)(struct gdr *g, struct gdr_memh *mh, gdr_info_v2_t *info);
	/*
	 * Optional: the GDRCopy <= 2.3 view (GET_INFO ioctl), used by the old
	 * gdr_get_info symbol.  NULL means "derive it from get_info".
	 */
	int (*get_info_v1)(struct gdr *g, struct gdr_memh *mh, gdr_info_v2_t *info);
	/* attr is already known to be valid (1 .. GDR_ATTR_MAX - 1). */
	int (*get_attr)(struct gdr *g, gdr_attr_t attr, int *value);
	int (*get_cb_flag)(struct gdr *g, struct gdr_memh *mh, int *flag);
	int (*driver_version)(struct gdr *g, int *major, int *minor);

	/*
	 * Optional: allocate size bytes of GPU memory that is mapped for the
	 * CPU already (gdr_alloc_mapped), and free it (gdr_free_mapped).  NULL
	 * for backends that only pin memory someone else allocated.
	 */
	int (*alloc_mapped)(struct gdr *g, size_t size, uint64_t *gpu_ptr, void **cpu_ptr);
	int (*free_mapped)(struct gdr *g, uint64_t gpu_ptr);
};

/*
 * Every backend, in the order gdr_open() tries them (those with
 * only_when_asked only when asked): adding one is one X(name).
 */
#define GDR_BACKENDS(X) \
	X(gdrdrv)       \
	X(dmabuf)       \
	X(vulkan)

#define GDR_BACKEND_DECLARE(name) extern const struct gdr_backend_ops gdr_backend_##name;
GDR_BACKENDS(GDR_BACKEND_DECLARE)
#undef GDR_BACKEND_DECLARE

#endif /* GDRAPI_BACKEND_H */
