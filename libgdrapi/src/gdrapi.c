// SPDX-License-Identifier: MIT
/*
 * The public API: argument checks, the per-instance buffer list, locking and
 * backend selection.  What a call does to the hardware is the backend's job
 * (backend.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "copy_engine.h"
#include "gdrapi_info.h"
#include "internal.h"
#include "node_config.h"
#include "copy_fast.h"
#include "parallel_copy.h"

/* Backends in the order gdr_open() tries them (backend.h lists them). */
static const struct gdr_backend_ops *const backends[] = {
#define GDR_BACKEND_ENTRY(name) &gdr_backend_##name,
	GDR_BACKENDS(GDR_BACKEND_ENTRY)
#undef GDR_BACKEND_ENTRY
};

#define GDR_BACKEND_COUNT (sizeof(backends) / sizeof(backends[0]))

#define GDR_BACKEND_LINE(name) #name "\n"
static const char backend_list[] = GDR_BACKENDS(GDR_BACKEND_LINE);
#undef GDR_BACKEND_LINE

/* Per thread: one failed gdr_open() must not garble another's report. */
static _Thread_local char open_failure[GDR_BACKEND_COUNT * (GDR_BACKEND_WHY_LEN + 32)];

GDR_EXPORT const char *gdr_get_backend_list(void)
{
	return backend_list;
}

GDR_EXPORT const char *gdr_get_open_failure(void)
{
	return open_failure;
}

/*
 * Which backends gdr_open() may try, from the environment, the caller's
 * flags and the node's file.  The implicit order takes only backends that
 * pin any device allocation (gdrdrv, then dma-buf), as GDRCopy 2.6 does:
 * consumers (NCCL, UCX, NVSHMEM, libfabric) take a gdr_open() that
 * succeeds to mean that their cudaMalloc memory can be pinned, and fail
 * the job when a pin then fails.  A backend marked only_when_asked
 * (vulkan) is tried only when the process, the node or the code asks.
 */
struct open_plan {
	const char *only;		/* the one backend allowed, or NULL */
	const char *only_by;		/* which setting chose it */
	const char *asked_by;		/* what allows the only_when_asked backends, or NULL */
	struct gdr_node_config node;
	char asked_by_text[PATH_MAX + 64];
};

/* GDRCOPY_BACKEND's spellings: each backend's name, and the README's "dma-buf". */
static const char *backend_by_name(const char *name)
{
	size_t i;

	if (strcmp(name, "dma-buf") == 0)
		return "dmabuf";
	for (i = 0; i < GDR_BACKEND_COUNT; i++)
		if (strcmp(name, backends[i]->name) == 0)
			return backends[i]->name;
	return NULL;
}

/* 0, or EINVAL with the reason in why (an unknown GDRCOPY_BACKEND). */
static int open_plan_make(struct open_plan *plan, uint32_t flags, char *why, size_t why_len)
{
	const char *wanted = getenv("GDRCOPY_BACKEND");
	const char *dmabuf = getenv("GDRCOPY_USE_DMABUF_MMAP");

	memset(plan, 0, sizeof(*plan));
	if (wanted && *wanted) {
		plan->only = backend_by_name(wanted);
		plan->only_by = "GDRCOPY_BACKEND";
		if (!plan->only) {
			snprintf(why, why_len,
				 "GDRCOPY_BACKEND=%s names no backend: it accepts gdrdrv, dmabuf (or dma-buf) and vulkan; unset it to let gdr_open() choose",
				 wanted);
			return EINVAL;
		}
		/* Naming a backend asks for it, vulkan included. */
		plan->asked_by = "GDRCOPY_BACKEND";
		return 0;
	}
	if (dmabuf && strcmp(dmabuf, "1") == 0) {
		plan->only = "dmabuf";
		plan->only_by = "GDRCOPY_USE_DMABUF_MMAP=1";
		return 0;
	}
	if (flags & GDR_OPEN_FLAG_ALLOW_VULKAN) {
		plan->asked_by = "gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN)";
		return 0;
	}
	gdr_node_config_read(&plan->node);
	if (plan->node.allow_vulkan) {
		snprintf(plan->asked_by_text, sizeof(plan->asked_by_text), "allow_vulkan = yes in %s:%u",
			 plan->node.path, plan->node.allow_vulkan_line);
		plan->asked_by = plan->asked_by_text;
	}
	return 0;
}

/* Should gdr_open() skip this backend, and why (for the log)?  NULL: try it. */
static const char *backend_skip_reason(const struct open_plan *plan, const struct gdr_backend_ops *ops,
				       char *buf, size_t len)
{
	if (plan->only && strcmp(plan->only, ops->name) != 0) {
		snprintf(buf, len, "skipped because %s selects another backend", plan->only_by);
		return buf;
	}
	if (ops->only_when_asked && !plan->asked_by) {
		snprintf(buf, len,
			 "not tried: it pins only cuMemCreate memory exported as a POSIX fd and gdr_alloc_mapped() memory, not cudaMalloc memory, so gdr_open() takes it only when asked: GDRCOPY_BACKEND=%s for a process, allow_vulkan = yes in %.100s for the node (read what it is safe for there first), or gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN) in code that pins only such memory",
			 ops->name, plan->node.path[0] ? plan->node.path : GDR_NODE_CONFIG_FILE);
		return buf;
	}
	return NULL;
}

static void fork_child_hook(void);

static gdr_t open_backends(uint32_t flags)
{
	char why[GDR_BACKEND_COUNT][GDR_BACKEND_WHY_LEN];
	const char *names[GDR_BACKEND_COUNT];
	struct open_plan plan;
	int first_error = 0;
	size_t tried = 0;
	struct gdr *g;
	size_t i;
	int rc;

	open_failure[0] = '\0';
	rc = open_plan_make(&plan, flags, why[0], sizeof(why[0]));
	if (rc) {
		gdr_err("gdr_open: %s", why[0]);
		snprintf(open_failure, sizeof(open_failure), "%s\n", why[0]);
		errno = rc;
		return NULL;
	}
	gdr_host_page();
	gdr_copy_engine_init();

	g = calloc(1, sizeof(*g));
	if (!g) {
		gdr_err("gdr_open: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&g->lock, NULL);
	g->fork_generation = gdr_fork_generation();
	fork_child_hook();

	for (i = 0; i < GDR_BACKEND_COUNT; i++) {
		const struct gdr_backend_ops *ops = backends[i];

		names[tried] = ops->name;
		if (backend_skip_reason(&plan, ops, why[tried], GDR_BACKEND_WHY_LEN)) {
			tried++;
			continue;
		}
		why[tried][0] = '\0';
		rc = ops->open(g, why[tried]);
		if (rc == 0) {
			size_t j;

			for (j = 0; j < tried; j++)
				gdr_info("gdr_open: backend %s not used: %s", names[j], why[j]);
			if (ops->only_when_asked)
				gdr_info("gdr_open: using the %s backend, as %s asks", ops->name, plan.asked_by);
			else
				gdr_info("gdr_open: using the %s backend", ops->name);
			g->ops = ops;
			return g;
		}
		if (!first_error)
			first_error = rc;
		tried++;
	}

	gdr_err("gdr_open: no backend can map GPU memory (the gdrdrv kernel module is the usual one); why each was rejected:");
	for (i = 0; i < tried; i++) {
		size_t used = strlen(open_failure);

		gdr_err("  %s: %s", names[i], why[i]);
		snprintf(open_failure + used, sizeof(open_failure) - used, "%s: %s\n", names[i], why[i]);
	}

	pthread_mutex_destroy(&g->lock);
	free(g);
	errno = first_error ? first_error : ENODEV;
	return NULL;
}

GDR_EXPORT gdr_t gdr_open(void)
{
	return open_backends(0);
}

GDR_EXPORT gdr_t gdr_open_ex(uint32_t flags)
{
	if (flags & ~GDR_OPEN_FLAG_ALLOW_VULKAN) {
		gdr_err("gdr_open_ex: unknown flags %#x (this library knows GDR_OPEN_FLAG_ALLOW_VULKAN = %#x)",
			flags & ~GDR_OPEN_FLAG_ALLOW_VULKAN, GDR_OPEN_FLAG_ALLOW_VULKAN);
		open_failure[0] = '\0';
		errno = EINVAL;
		return NULL;
	}
	return open_backends(flags);
}

/*
 * Handles.  gdr_mh_t.h is (generation << HANDLE_SLOT_BITS) | slot: a
 * slot of one process-wide table of records and how often that slot had been
 * used when the buffer was pinned.  Records are allocated in chunks that are
 * never freed, only reused, so looking up any value a caller passes, one
 * never issued, of a buffer already unpinned, or of a closed gdr_t, reads
 * memory of ours, and the generation tells a live handle from a stale one:
 * such calls fail with EINVAL instead of reading freed memory (GDRCopy 2.6
 * dereferences the value as a pointer).  A slot's generation wraps after
 * 2^40 reuses (2^12 with 32-bit longs).
 *
 * Slot s lives in chunk s / HANDLE_CHUNK_SLOTS, allocated when the first of
 * its slots is handed out: a lookup is a mask, a shift and a load, with no
 * bound to check and no arithmetic on chunk sizes (every copy starts with
 * one).  The table of chunk pointers is static and zero, so only its
 * touched pages cost memory.  Slot 0 is never handed out: its record keeps
 * handle 0 and an empty mapping, so a value with no slot finds nothing.
 */
#if ULONG_MAX > 0xffffffffUL
#define HANDLE_SLOT_BITS 24
#else
#define HANDLE_SLOT_BITS 20
#endif
#define HANDLE_SLOT_MASK ((1UL << HANDLE_SLOT_BITS) - 1)
#define HANDLE_GENERATION_MASK (ULONG_MAX >> HANDLE_SLOT_BITS)
#define HANDLE_CHUNK_SLOTS 256UL
#define HANDLE_CHUNKS ((1UL << HANDLE_SLOT_BITS) / HANDLE_CHUNK_SLOTS)
#define HANDLE_CAPACITY HANDLE_SLOT_MASK	/* slots 1 to HANDLE_SLOT_MASK */

/*
 * Guards slot allocation, the free list, generations and every record's
 * refs and unpinned.  Taken after an instance's lock, never before.
 */
static pthread_mutex_t handle_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gdr_memh *_Atomic handle_chunks[HANDLE_CHUNKS];
static unsigned long handle_slots_used = 1;	/* slots below were handed out at least once (slot 0: never) */
static _Atomic unsigned long map_seq_last;	/* the newest gdr_map's map_seq */
static struct gdr_memh *handle_free_list;

/* The record of a slot handed out at least once (its chunk exists). */
static struct gdr_memh *record_of_slot(unsigned long slot)
{
	return atomic_load_explicit(&handle_chunks[slot / HANDLE_CHUNK_SLOTS], memory_order_acquire) +
	       slot % HANDLE_CHUNK_SLOTS;
}

/*
 * A forked child must not copy through its parent's mappings: the inline
 * path declines them from now on, and the general path's fork check says
 * why.  The child runs one thread, so no lock (another of the parent's may
 * have held handle_lock at the fork).  Chunks are made in slot order.
 */
static void close_fast_windows_in_child(void)
{
	unsigned long k, i;

	for (k = 0; k < HANDLE_CHUNKS; k++) {
		struct gdr_memh *chunk = atomic_load_explicit(&handle_chunks[k], memory_order_relaxed);

		if (!chunk)
			break;
		for (i = 0; i < HANDLE_CHUNK_SLOTS; i++)
			atomic_store_explicit(&chunk[i].fast_len, 0, memory_order_relaxed);
	}
}

static void fork_child_hook_install(void)
{
	pthread_atfork(NULL, NULL, close_fast_windows_in_child);
}

/* At gdr_open, before any buffer can be mapped. */
static void fork_child_hook(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, fork_child_hook_install);
}

/*
 * The record of h's slot, whether h is live or not, or NULL when that slot
 * was never handed out; lock-free.  Inlined: every copy starts here.
 */
static inline __attribute__((always_inline)) struct gdr_memh *memh_slot_record(unsigned long h)
{
	unsigned long slot = h & HANDLE_SLOT_MASK;
	struct gdr_memh *chunk = atomic_load_explicit(&handle_chunks[slot / HANDLE_CHUNK_SLOTS], memory_order_acquire);

	return chunk ? chunk + slot % HANDLE_CHUNK_SLOTS : NULL;
}

/* The record of a live handle, or NULL; lock-free.  The answer may go stale at once unless the caller holds handle_lock. */
static inline struct gdr_memh *memh_lookup(unsigned long h)
{
	struct gdr_memh *mh = memh_slot_record(h);

	/* h 0 would match slot 0's record, which is never live. */
	return h && mh && atomic_load_explicit(&mh->handle, memory_order_acquire) == h ? mh : NULL;
}

/* A record for a new buffer, not yet reachable through any handle; NULL when memory or slots ran out. */
static struct gdr_memh *memh_alloc(void)
{
	struct gdr_memh *mh;

	pthread_mutex_lock(&handle_lock);
	mh = handle_free_list;
	if (mh) {
		handle_free_list = mh->next;
	} else if (handle_slots_used <= HANDLE_CAPACITY) {
		unsigned long k = handle_slots_used / HANDLE_CHUNK_SLOTS;
		struct gdr_memh *chunk = atomic_load_explicit(&handle_chunks[k], memory_order_relaxed);

		if (!chunk) {
			/* Aligned: a copy reads one line of its record (backend.h). */
			chunk = aligned_alloc(_Alignof(struct gdr_memh), HANDLE_CHUNK_SLOTS * sizeof(*chunk));
			if (chunk)
				memset(chunk, 0, HANDLE_CHUNK_SLOTS * sizeof(*chunk));
			if (chunk)
				atomic_store_explicit(&handle_chunks[k], chunk, memory_order_release);
		}
		if (chunk) {
			mh = chunk + handle_slots_used % HANDLE_CHUNK_SLOTS;
			mh->slot = handle_slots_used++;
		}
	}
	if (mh) {
		/*
		 * Field by field, not memset: a stale handle's copy may be
		 * reading the atomics lock-free (it finds handle 0 and gives up).
		 */
		mh->generation = (mh->generation + 1) & HANDLE_GENERATION_MASK;
		mh->owner = NULL;
		mh->prev = mh->next = NULL;
		mh->refs = 0;
		mh->unpinned = false;
		mh->pinned_addr = 0;
		mh->pinned_size = 0;
		mh->pin_flags = 0;
		mh->backend_priv = NULL;
		atomic_store(&mh->fast_len, 0);
		atomic_store(&mh->map_va, NULL);
		mh->map_size = 0;
		atomic_store(&mh->mapping_type, GDR_MAPPING_TYPE_NONE);
		atomic_store(&mh->unmapped_behind, false);
		atomic_store(&mh->map_seq, 0);
	}
	pthread_mutex_unlock(&handle_lock);
	if (!mh)
		gdr_err("gdr_pin_buffer: out of memory for buffer records, or %lu buffers pinned at once",
			HANDLE_CAPACITY);
	return mh;
}

static unsigned long memh_handle_value(const struct gdr_memh *mh)
{
	return (mh->generation << HANDLE_SLOT_BITS) | mh->slot;
}

/* Caller holds handle_lock; nothing refers to mh any more. */
static void memh_free_locked(struct gdr_memh *mh)
{
	atomic_store(&mh->handle, 0);
	pthread_mutex_destroy(&mh->lock);
	mh->next = handle_free_list;
	handle_free_list = mh;
}

static void memh_free(struct gdr_memh *mh)
{
	pthread_mutex_lock(&handle_lock);
	memh_free_locked(mh);
	pthread_mutex_unlock(&handle_lock);
}

/*
 * Take a reference to a live buffer of g, or NULL (EINVAL) when the handle is
 * not one: never issued, of another instance, or already unpinned.  The
 * reference keeps the record from reuse while another thread unpins it.
 */
static struct gdr_memh *memh_get(struct gdr *g, gdr_mh_t handle)
{
	struct gdr_memh *mh;

	pthread_mutex_lock(&handle_lock);
	mh = memh_lookup(handle.h);
	if (!mh || mh->owner != g || mh->unpinned) {
		pthread_mutex_unlock(&handle_lock);
		gdr_err("invalid gdr_mh_t handle %#lx: not a buffer pinned through this gdr_t (never pinned, already unpinned, or of another gdr_t)",
			handle.h);
		return NULL;
	}
	mh->refs++;
	pthread_mutex_unlock(&handle_lock);
	return mh;
}

/*
 * Lock a buffer taken with memh_get() to act on it: 0, or EINVAL with the
 * lock not held when another thread unpinned it between memh_get() and now
 * (its backend state is gone; unlink clears the handle before it locks).
 */
static int memh_lock_live(struct gdr_memh *mh, gdr_mh_t handle)
{
	pthread_mutex_lock(&mh->lock);
	if (atomic_load(&mh->handle) == handle.h)
		return 0;
	pthread_mutex_unlock(&mh->lock);
	gdr_err("gdr_mh_t handle %#lx was unpinned by another thread during the call", handle.h);
	return EINVAL;
}

static void memh_put(struct gdr *g, struct gdr_memh *mh)
{
	(void)g;
	pthread_mutex_lock(&handle_lock);
	if (--mh->refs == 0)
		memh_free_locked(mh);
	pthread_mutex_unlock(&handle_lock);
}

/* Take mh off g's list; false when another thread got there first. Caller holds a reference. */
static bool memh_unlink(struct gdr *g, struct gdr_memh *mh)
{
	pthread_mutex_lock(&g->lock);
	pthread_mutex_lock(&handle_lock);
	if (mh->unpinned) {
		pthread_mutex_unlock(&handle_lock);
		pthread_mutex_unlock(&g->lock);
		return false;
	}
	mh->unpinned = true;
	atomic_store(&mh->handle, 0);	/* from now on no call finds it */
	mh->refs--;	/* the list's reference; the caller's keeps it alive */
	pthread_mutex_unlock(&handle_lock);
	if (mh->prev)
		mh->prev->next = mh->next;
	else
		g->memh_list = mh->next;
	if (mh->next)
		mh->next->prev = mh->prev;
	mh->prev = mh->next = NULL;
	pthread_mutex_unlock(&g->lock);
	return true;
}

/*
 * EPERM when @g was opened by an ancestor of this process (we run in a
 * fork() child): its mappings are not inherited, and whatever sits at their
 * addresses now must be neither written nor unmapped.
 */
static int fork_check(const struct gdr *g, const char *what)
{
	if (g->fork_generation == gdr_fork_generation())
		return 0;
	gdr_err("%s: this process is a fork() child of the one that opened the gdr_t; its pins and mappings belong to the parent and are not usable here: call gdr_open() in the child",
		what);
	return EPERM;
}

/*
 * Whether the buffer's mapping is still in place: the application may have
 * munmapped it behind us, and something else may live there now.  Backends
 * that cannot tell report it mapped.
 */
static bool mapping_still_there(struct gdr *g, struct gdr_memh *mh)
{
	gdr_info_v2_t info;

	if (g->ops->get_info(g, mh, &info))
		return true;	/* cannot tell: the unmap reports what it finds */
	return info.mapping_type != GDR_MAPPING_TYPE_NONE;
}

/*
 * Caller holds mh->lock.  The application unmapped the buffer's mapping
 * itself: from now on copies fail with EFAULT and gdr_unmap leaves the
 * address alone, for whatever is (or will be) mapped there is not ours.
 */
static void mark_unmapped_behind(struct gdr_memh *mh, const char *found_by)
{
	gdr_mapping_type_t type = atomic_load(&mh->mapping_type);

	if (!atomic_load(&mh->map_va) || atomic_load(&mh->unmapped_behind))
		return;
	atomic_store(&mh->fast_len, 0);
	atomic_store(&mh->unmapped_behind, true);
	atomic_store(&mh->mapping_type, GDR_MAPPING_TYPE_NONE);
	gdr_mapping_count_add(type, -1);
	gdr_warn("%s: the mapping of the buffer at %#lx (%p) was unmapped behind the library's back; copies to it now fail with EFAULT",
		 found_by, mh->pinned_addr, atomic_load(&mh->map_va));
}

/* Caller holds mh->lock. */
static int memh_unmap_locked(struct gdr *g, struct gdr_memh *mh)
{
	void *va = atomic_load(&mh->map_va);
	gdr_mapping_type_t type = atomic_load(&mh->mapping_type);
	size_t fast_len;
	int rc;

	if (!va)
		return 0;
	if (atomic_load(&mh->unmapped_behind)) {
		/* Counted out when it was found (mark_unmapped_behind). */
		gdr_err("gdr_unmap: the mapping of the buffer at %#lx (%p) was unmapped behind the library's back (munmap of gdr_map's pointer?) and something else is mapped there now; leaving that address range alone",
			mh->pinned_addr, va);
		atomic_store(&mh->map_va, NULL);
		mh->map_size = 0;
		atomic_store(&mh->unmapped_behind, false);
		return EFAULT;
	}
	/* Copies that start from now on see an unmapped buffer. */
	fast_len = atomic_exchange(&mh->fast_len, 0);
	atomic_store(&mh->mapping_type, GDR_MAPPING_TYPE_NONE);
	if (!mapping_still_there(g, mh)) {
		gdr_err("gdr_unmap: the mapping of the buffer at %#lx (%p) was unmapped behind the library's back (munmap of gdr_map's pointer?); leaving that address range alone",
			mh->pinned_addr, va);
		atomic_store(&mh->map_va, NULL);
		mh->map_size = 0;
		gdr_mapping_count_add(type, -1);
		return EFAULT;
	}
	/*
	 * The record leaves before the mapping does: a gdr_map elsewhere that
	 * gets these addresses back must not find them still recorded here and
	 * take its own new mapping for one unmapped behind our back.
	 */
	atomic_store(&mh->map_va, NULL);
	rc = g->ops->unmap(g, mh, va, mh->map_size);
	if (rc) {
		atomic_store(&mh->map_va, va);
		atomic_store(&mh->mapping_type, type);
		atomic_store(&mh->fast_len, fast_len);
		return rc;
	}
	mh->map_size = 0;
	gdr_mapping_count_add(type, -1);
	return 0;
}

/* Unmap (if needed) and unpin a buffer already taken off the list. */
static int memh_release(struct gdr *g, struct gdr_memh *mh)
{
	int rc, rc_unpin;

	pthread_mutex_lock(&mh->lock);
	rc = memh_unmap_locked(g, mh);
	rc_unpin = g->ops->unpin(g, mh);
	pthread_mutex_unlock(&mh->lock);
	return rc ? rc : rc_unpin;
}

GDR_EXPORT int gdr_close(gdr_t g)
{
	int first_error = 0;

	if (!g)
		return EINVAL;
	/* In a fork child: the parent's buffers are left alone entirely. */
	if (fork_check(g, "gdr_close"))
		return EPERM;

	for (;;) {
		struct gdr_memh *mh;
		int rc;

		pthread_mutex_lock(&g->lock);
		mh = g->memh_list;
		if (mh) {
			pthread_mutex_lock(&handle_lock);
			mh->refs++;
			pthread_mutex_unlock(&handle_lock);
		}
		pthread_mutex_unlock(&g->lock);
		if (!mh)
			break;
		if (memh_unlink(g, mh)) {
			rc = memh_release(g, mh);
			if (rc) {
				gdr_err("gdr_close: releasing buffer at %#lx failed: %s", mh->pinned_addr, strerror(rc));
				if (!first_error)
					first_error = rc;
			}
		}
		memh_put(g, mh);
	}

	g->ops->close(g);
	pthread_mutex_destroy(&g->lock);
	free(g);
	return first_error;
}

static int pin_common(gdr_t g, const struct gdr_pin_request *req, gdr_mh_t *handle)
{
	struct gdr_memh *mh;
	unsigned long value;
	int rc;

	if (!g || !handle)
		return EINVAL;
	if (fork_check(g, "gdr_pin_buffer"))
		return EPERM;
	if (req->size == 0) {
		gdr_err("gdr_pin_buffer: size is 0; pin at least one byte");
		return EINVAL;
	}
	mh = memh_alloc();
	if (!mh)
		return ENOMEM;
	mh->owner = g;
	mh->refs = 1;	/* held by g's list until unpinned */
	pthread_mutex_init(&mh->lock, NULL);

	rc = g->ops->pin(g, mh, req);
	if (rc) {
		memh_free(mh);
		return rc;
	}
	atomic_store(&mh->revocable, -1);	/* asked by the first parallel copy */
	value = memh_handle_value(mh);
	pthread_mutex_lock(&g->lock);
	mh->next = g->memh_list;
	if (mh->next)
		mh->next->prev = mh;
	g->memh_list = mh;
	atomic_store_explicit(&mh->handle, value, memory_order_release);
	pthread_mutex_unlock(&g->lock);
	handle->h = value;
	return 0;
}

GDR_EXPORT int gdr_pin_buffer(gdr_t g, unsigned long addr, size_t size, uint64_t p2p_token,
			      uint32_t va_space, gdr_mh_t *handle)
{
	struct gdr_pin_request req = {
		.addr = addr, .size = size, .p2p_token = p2p_token, .va_space = va_space,
		.flags = GDR_PIN_FLAG_DEFAULT, .legacy = true,
	};

	return pin_common(g, &req, handle);
}

GDR_EXPORT int gdr_pin_buffer_v2(gdr_t g, unsigned long addr, size_t size, uint32_t flags,
				 gdr_mh_t *handle)
{
	struct gdr_pin_request req = { .addr = addr, .size = size, .flags = flags };

	if (flags & ~(uint32_t)GDR_PIN_FLAG_FORCE_PCIE) {
		gdr_err("gdr_pin_buffer_v2: unknown flags %#x; the known ones are GDR_PIN_FLAG_DEFAULT and GDR_PIN_FLAG_FORCE_PCIE",
			flags);
		return EINVAL;
	}
	return pin_common(g, &req, handle);
}

GDR_EXPORT int gdr_unpin_buffer(gdr_t g, gdr_mh_t handle)
{
	struct gdr_memh *mh;
	int rc;

	if (!g)
		return EINVAL;
	if (fork_check(g, "gdr_unpin_buffer"))
		return EPERM;
	mh = memh_get(g, handle);
	if (!mh)
		return EINVAL;
	if (!memh_unlink(g, mh)) {
		memh_put(g, mh);
		gdr_err("gdr_unpin_buffer: handle %#lx is being unpinned by another thread", handle.h);
		return EINVAL;
	}
	rc = memh_release(g, mh);
	memh_put(g, mh);
	return rc;
}

GDR_EXPORT int gdr_get_callback_flag(gdr_t g, gdr_mh_t handle, int *flag)
{
	struct gdr_memh *mh;
	int rc;

	if (!g || !flag)
		return EINVAL;
	mh = memh_get(g, handle);
	if (!mh)
		return EINVAL;
	rc = memh_lock_live(mh, handle);
	if (rc == 0) {
		rc = g->ops->get_cb_flag(g, mh, flag);
		pthread_mutex_unlock(&mh->lock);
	}
	memh_put(g, mh);
	return rc;
}

int gdr_get_info_common(gdr_t g, gdr_mh_t handle, gdr_info_v2_t *info, bool v1)
{
	struct gdr_memh *mh;
	int rc;

	if (!g || !info)
		return EINVAL;
	mh = memh_get(g, handle);
	if (!mh)
		return EINVAL;
	rc = memh_lock_live(mh, handle);
	if (rc == 0) {
		if (v1 && g->ops->get_info_v1)
			rc = g->ops->get_info_v1(g, mh, info);
		else
			rc = g->ops->get_info(g, mh, info);
		/* The driver knows when the last VMA went: a munmap we did not do. */
		if (rc == 0 && info->mapping_type == GDR_MAPPING_TYPE_NONE && atomic_load(&mh->map_va))
			mark_unmapped_behind(mh, "gdr_get_info");
		pthread_mutex_unlock(&mh->lock);
	}
	memh_put(g, mh);
	if (rc == 0) {
		info->mapped = info->mapping_type != GDR_MAPPING_TYPE_NONE;
		info->wc_mapping = info->mapping_type == GDR_MAPPING_TYPE_WC;
	}
	return rc;
}

GDR_EXPORT int gdr_get_info_v2(gdr_t g, gdr_mh_t handle, gdr_info_v2_t *info)
{
	return gdr_get_info_common(g, handle, info, false);
}

/*
 * A new mapping at [va, +size): the kernel hands out only free addresses, so
 * any other buffer whose recorded mapping overlaps it was unmapped behind
 * our back.  Mark those so that their copies fail instead of writing into
 * the new mapping.  One pass over the table per gdr_map, nothing on the
 * copy path; the lock-free look at map_va only picks candidates, each
 * confirmed under its own lock with a reference held.
 *
 * This runs after gdr_map let go of the buffer's lock, so by then another
 * thread may have unmapped it and mapped a second buffer on the same
 * addresses.  Only a record older than this mapping (map_seq), confirmed
 * while this mapping is still recorded (so still live: the record goes
 * before the munmap), is one the application unmapped.
 */
static void forget_mappings_under(const struct gdr_memh *mapped, const void *va, size_t size, unsigned long seq)
{
	const char *start = va, *end = start + size;
	unsigned long slot;

	pthread_mutex_lock(&handle_lock);
	for (slot = 1; slot < handle_slots_used; slot++) {
		struct gdr_memh *mh = record_of_slot(slot);
		unsigned long h = atomic_load(&mh->handle);
		const char *base = atomic_load(&mh->map_va);

		if (mh == mapped || !h || mh->unpinned || !base || base >= end || base + mh->map_size <= start ||
		    !mh->owner->ops->map_makes_own_mapping)
			continue;
		mh->refs++;
		pthread_mutex_unlock(&handle_lock);
		pthread_mutex_lock(&mh->lock);
		base = atomic_load(&mh->map_va);
		if (atomic_load(&mh->handle) == h && base && base < end && base + mh->map_size > start &&
		    atomic_load(&mh->map_seq) < seq && atomic_load(&mapped->map_va) == va &&
		    atomic_load(&mapped->map_seq) == seq)
			mark_unmapped_behind(mh, "gdr_map");
		pthread_mutex_unlock(&mh->lock);
		memh_put(mh->owner, mh);
		pthread_mutex_lock(&handle_lock);
	}
	pthread_mutex_unlock(&handle_lock);
}

GDR_EXPORT int gdr_map_v2(gdr_t g, gdr_mh_t handle, void **ptr_va, size_t size, int flags)
{
	static const gdr_mapping_type_t requested_by_flag[] = {
		[GDR_MAP_FLAG_DEFAULT] = GDR_MAPPING_TYPE_NONE,
		[GDR_MAP_FLAG_REQ_WC_MAPPING] = GDR_MAPPING_TYPE_WC,
		[GDR_MAP_FLAG_REQ_CACHE_MAPPING] = GDR_MAPPING_TYPE_CACHING,
		[GDR_MAP_FLAG_REQ_DEVICE_MAPPING] = GDR_MAPPING_TYPE_DEVICE,
	};
	gdr_mapping_type_t type = GDR_MAPPING_TYPE_NONE;
	struct gdr_memh *mh;
	void *va = NULL;
	unsigned long seq = 0;
	int rc;

	if (!g || !ptr_va)
		return EINVAL;
	if (fork_check(g, "gdr_map"))
		return EPERM;
	if (flags < GDR_MAP_FLAG_DEFAULT || flags > GDR_MAP_FLAG_REQ_DEVICE_MAPPING) {
		gdr_err("gdr_map_v2: unknown flags %d; use one of GDR_MAP_FLAG_*", flags);
		return EINVAL;
	}
	if (size == 0) {
		gdr_err("gdr_map: size is 0; map at least one byte");
		return EINVAL;
	}
	if (gdr_round_up_to_page(size) < size) {
		/* Rounded up it would wrap to 0: a mapping of nothing that munmap could never remove. */
		gdr_err("gdr_map: size %zu is larger than any mapping can be", size);
		return EINVAL;
	}
	mh = memh_get(g, handle);
	if (!mh)
		return EINVAL;
	rc = memh_lock_live(mh, handle);
	if (rc) {
		memh_put(g, mh);
		return rc;
	}
	if (atomic_load(&mh->map_va) && atomic_load(&mh->unmapped_behind)) {
		/* Its old address is not ours any more: forget it and map anew. */
		atomic_store(&mh->map_va, NULL);
		mh->map_size = 0;
		atomic_store(&mh->unmapped_behind, false);
	}
	if (atomic_load(&mh->map_va)) {
		gdr_err("gdr_map: buffer at %#lx is already mapped at %p; a buffer can be mapped once at a time (unmap it first)",
			mh->pinned_addr, atomic_load(&mh->map_va));
		rc = EAGAIN;
		goto out;
	}
	rc = g->ops->map(g, mh, size, requested_by_flag[flags], &va, &type);
	if (rc)
		goto out;
	mh->map_size = gdr_round_up_to_page(size);
	seq = atomic_fetch_add(&map_seq_last, 1) + 1;
	atomic_store(&mh->map_seq, seq);
	atomic_store(&mh->map_va, va);
	atomic_store(&mh->mapping_type, type);
	if (type == GDR_MAPPING_TYPE_WC)
		atomic_store(&mh->fast_len, mh->map_size);	/* last: the inline path may take it now */
	gdr_mapping_count_add(type, 1);
	*ptr_va = va;
out:
	pthread_mutex_unlock(&mh->lock);
	if (rc == 0 && g->ops->map_makes_own_mapping)
		forget_mappings_under(mh, va, gdr_round_up_to_page(size), seq);
	memh_put(g, mh);
	return rc;
}

GDR_EXPORT int gdr_map(gdr_t g, gdr_mh_t handle, void **va, size_t size)
{
	return gdr_map_v2(g, handle, va, size, GDR_MAP_FLAG_DEFAULT);
}

GDR_EXPORT int gdr_unmap(gdr_t g, gdr_mh_t handle, void *va, size_t size)
{
	struct gdr_memh *mh;
	void *mapped;
	int rc;

	if (!g)
		return EINVAL;
	if (fork_check(g, "gdr_unmap"))
		return EPERM;
	mh = memh_get(g, handle);
	if (!mh)
		return EINVAL;
	rc = memh_lock_live(mh, handle);
	if (rc) {
		memh_put(g, mh);
		return rc;
	}
	mapped = atomic_load(&mh->map_va);
	if (!mapped) {
		gdr_err("gdr_unmap: buffer at %#lx is not mapped", mh->pinned_addr);
		rc = EINVAL;
	} else if (va != mapped) {
		gdr_err("gdr_unmap: %p is not where the buffer is mapped (%p); pass the pointer gdr_map returned", va,
			mapped);
		rc = EINVAL;
	} else {
		if (gdr_round_up_to_page(size) != mh->map_size)
			gdr_warn("gdr_unmap: size %zu differs from the mapped size %zu; unmapping the whole mapping",
				 size, mh->map_size);
		rc = memh_unmap_locked(g, mh);
	}
	pthread_mutex_unlock(&mh->lock);
	memh_put(g, mh);
	return rc;
}

/*
 * The copy functions get no gdr_t, so they look at the buffer lock-free: the
 * mapping type is an atomic, and using a handle concurrently with its own
 * unmap is the caller's bug as with any memory.
 */
static int mapped_range_check(const struct gdr_memh *mh, const void *map_ptr, size_t size,
			      gdr_mapping_type_t *type)
{
	const char *base = atomic_load(&((struct gdr_memh *)mh)->map_va);
	const char *p = map_ptr;

	*type = atomic_load(&((struct gdr_memh *)mh)->mapping_type);
	if (!base || *type == GDR_MAPPING_TYPE_NONE) {
		if (base && atomic_load(&((struct gdr_memh *)mh)->unmapped_behind)) {
			gdr_err("gdr_copy: the mapping of the buffer at %#lx (%p) was unmapped behind the library's back and something else may be mapped there; nothing copied: gdr_unmap the buffer (or gdr_map it again)",
				mh->pinned_addr, (const void *)base);
			return EFAULT;
		}
		gdr_err("gdr_copy: buffer at %#lx is not mapped; call gdr_map first", mh->pinned_addr);
		return EINVAL;
	}
	if (p < base || (size_t)(p - base) > mh->map_size || size > mh->map_size - (size_t)(p - base)) {
		gdr_err("gdr_copy: [%p, +%zu) is outside the mapping [%p, +%zu)", map_ptr, size, (const void *)base,
			mh->map_size);
		return EINVAL;
	}
	return 0;
}

/* Whether freeing the memory revokes the mapping (callback-based pins); asked once per buffer. */
static bool buffer_revocable(struct gdr_memh *mh)
{
	int revocable = atomic_load_explicit(&mh->revocable, memory_order_relaxed);

	if (revocable < 0) {
		int persistent = 1;

		revocable = mh->owner->ops->get_attr(mh->owner, GDR_ATTR_USE_PERSISTENT_MAPPING, &persistent) == 0 &&
			    !persistent;
		atomic_store_explicit(&mh->revocable, revocable, memory_order_relaxed);
	}
	return revocable;
}

/*
 * The whole path of a copy, every check with its message; threads > 1
 * splits the copy among worker threads (parallel_copy.c).  Small copies
 * come here only when copy_small declined them.
 */
static __attribute__((noinline)) int copy_mapping(gdr_mh_t handle, void *dst, const void *src, size_t size,
						  bool to_mapping, unsigned int threads)
{
	struct gdr_memh *mh = memh_lookup(handle.h);
	gdr_mapping_type_t type;
	int rc;

	if (!mh) {
		gdr_err("gdr_copy: invalid gdr_mh_t handle %#lx: not a pinned buffer (never pinned, or already unpinned)",
			handle.h);
		return EINVAL;
	}
	rc = fork_check(mh->owner, "gdr_copy");
	if (!rc)
		rc = mapped_range_check(mh, to_mapping ? dst : src, size, &type);
	/* Still the same buffer after reading its mapping (an unpin racing the copy is the caller's bug). */
	if (!rc && atomic_load_explicit(&mh->handle, memory_order_acquire) != handle.h)
		rc = EINVAL;
	if (rc)
		return rc;
	if (gdr_copy_fast(type, to_mapping, dst, src, size))
		return 0;
	if (threads == 0)
		threads = gdr_default_copy_threads(size);
	/*
	 * A revoked legacy pin faults (SIGBUS) on the thread that touches it:
	 * on a worker, the caller's handler never sees it and the copy could
	 * wait forever.  So such copies stay on the calling thread.
	 */
	if (threads > 1 && buffer_revocable(mh))
		threads = 1;
	if (threads > 1)
		return gdr_copy_parallel(type, to_mapping, dst, src, size, threads);
	return to_mapping ? gdr_copy_to_type(type, dst, src, size) : gdr_copy_from_type(type, dst, src, size);
}

/*
 * The polling loop's path: a copy the inline engine takes (copy_fast.h)
 * inside a buffer's fast window (fast_len: mapped write-combined, in this
 * process), and nothing else: no call before the load, no lock, no store,
 * one line of the record read (backend.h).  Each instruction here shortens
 * the run of copies whose transfers overlap (writes, reads of several lines:
 * tools/h200/RESULTS.md), so the window answers the mapping type and fork
 * checks in one compare.
 * Whatever it declines goes to copy_mapping, which checks everything and
 * says what is wrong.  Inlined into each entry point, so the direction is a
 * constant.
 */
static inline __attribute__((always_inline)) int copy_small(gdr_mh_t handle, void *dst, const void *src,
							    size_t size, bool to_mapping)
{
	struct gdr_memh *mh = memh_slot_record(handle.h);

	if (__builtin_expect(mh != NULL, 1)) {
		/*
		 * Acquire: both read before the handle is checked, once, after
		 * them.  A record is never freed, and its window closes before
		 * its handle changes (unmap before unpin), so a window read
		 * before the handle is found live is that handle's.
		 */
		uintptr_t base = (uintptr_t)atomic_load_explicit(&mh->map_va, memory_order_acquire);
		size_t len = atomic_load_explicit(&mh->fast_len, memory_order_acquire);
		size_t offset = (uintptr_t)(to_mapping ? dst : src) - base;	/* huge below base */

		/*
		 * offset < len keeps offset + size from wrapping for any size up
		 * to 2^63; gdr_copy_fast takes no size beyond GDR_FAST_LINES_MAX.
		 */
		if (offset < len && offset + size <= len &&
		    atomic_load_explicit(&mh->handle, memory_order_acquire) == handle.h) {
			enum gdr_fast_verdict verdict = gdr_copy_fast_inline(GDR_MAPPING_TYPE_WC, to_mapping, dst, src, size);

			if (verdict == GDR_FAST_DONE)
				return 0;
			if (verdict != GDR_FAST_DECLINED)	/* a jump: no frame here */
				return gdr_copy_fast_call(dst, src, size, to_mapping, verdict);
		}
	}
	return copy_mapping(handle, dst, src, size, to_mapping, 0);
}

/* threads 0: the default for the size (GDRCOPY_COPY_THREADS); copies of 64 bytes or less never split. */
GDR_EXPORT int gdr_copy_to_mapping(gdr_mh_t handle, void *map_d_ptr, const void *h_ptr, size_t size)
{
	return copy_small(handle, map_d_ptr, h_ptr, size, true);
}

GDR_EXPORT int gdr_copy_from_mapping(gdr_mh_t handle, void *h_ptr, const void *map_d_ptr, size_t size)
{
	return copy_small(handle, h_ptr, map_d_ptr, size, false);
}

GDR_EXPORT int gdr_copy_to_mapping_parallel(gdr_mh_t handle, void *map_d_ptr, const void *h_ptr, size_t size,
					    unsigned int threads)
{
	return copy_mapping(handle, map_d_ptr, h_ptr, size, true, threads ? threads : 1);
}

GDR_EXPORT int gdr_copy_from_mapping_parallel(gdr_mh_t handle, void *h_ptr, const void *map_d_ptr, size_t size,
					      unsigned int threads)
{
	return copy_mapping(handle, h_ptr, map_d_ptr, size, false, threads ? threads : 1);
}

GDR_EXPORT int gdr_copy_to_mapped_memory(gdr_mapping_type_t type, void *dst, const void *src, size_t size)
{
	return gdr_copy_to_type(type, dst, src, size);
}

GDR_EXPORT int gdr_copy_from_mapped_memory(gdr_mapping_type_t type, void *dst, const void *src, size_t size)
{
	return gdr_copy_from_type(type, dst, src, size);
}

GDR_EXPORT void gdr_runtime_get_version(int *major, int *minor)
{
	if (major)
		*major = GDR_API_MAJOR_VERSION;
	if (minor)
		*minor = GDR_API_MINOR_VERSION;
}

GDR_EXPORT int gdr_driver_get_version(gdr_t g, int *major, int *minor)
{
	if (!g || !major || !minor)
		return EINVAL;
	return g->ops->driver_version(g, major, minor);
}

GDR_EXPORT int gdr_get_attribute(gdr_t g, gdr_attr_t attr, int *value)
{
	if (!g || !value)
		return EINVAL;
	if ((int)attr < GDR_ATTR_USE_PERSISTENT_MAPPING || (int)attr >= GDR_ATTR_MAX) {
		gdr_err("gdr_get_attribute: unknown attribute %d", (int)attr);
		return EINVAL;
	}
	return g->ops->get_attr(g, attr, value);
}

GDR_EXPORT const char *gdr_get_backend_name(gdr_t g)
{
	return g ? g->ops->name : NULL;
}

GDR_EXPORT int gdr_alloc_mapped(gdr_t g, size_t size, uint64_t *gpu_ptr, void **cpu_ptr)
{
	if (!g || !gpu_ptr || !cpu_ptr || size == 0)
		return EINVAL;
	if (!g->ops->alloc_mapped) {
		gdr_err("gdr_alloc_mapped: the %s backend this gdr_t uses does not allocate memory (the vulkan backend does: open it with gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN)); pin cuMemAlloc memory instead",
			g->ops->name);
		return ENOTSUP;
	}
	return g->ops->alloc_mapped(g, size, gpu_ptr, cpu_ptr);
}

GDR_EXPORT int gdr_free_mapped(gdr_t g, uint64_t gpu_ptr)
{
	if (!g)
		return EINVAL;
	if (!g->ops->free_mapped) {
		gdr_err("gdr_free_mapped: the %s backend this gdr_t uses allocates no memory (the vulkan backend does); free what you allocated with cuMemFree",
			g->ops->name);
		return ENOTSUP;
	}
	return g->ops->free_mapped(g, gpu_ptr);
}

GDR_EXPORT int gdr_get_mapping_type_string(gdr_mapping_type_t type, const char **type_str)
{
	const char *name = gdr_mapping_type_name(type);

	if (!type_str || !name)
		return EINVAL;
	*type_str = name;
	return 0;
}
