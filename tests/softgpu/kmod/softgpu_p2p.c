// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The NVIDIA peer-to-peer API, as nvidia.ko exports it, over softgpu memory.
 *
 * Semantics follow the real driver where gdrdrv can tell the difference:
 *  - addresses resolve in the GPU VA spaces of the calling process, or,
 *    given non-zero P2P tokens, in the space they name in any process;
 *  - legacy pins (with a free callback) are revoked when their memory is
 *    unmapped or freed: the callback runs, after which the page table is
 *    dead and nvidia_p2p_put_pages() on it fails with -EINVAL;
 *  - persistent pins (get_pages_persistent, or legacy with no callback) keep
 *    the memory alive until they are put.
 * Where the real driver would silently corrupt memory on a contract
 * violation, softgpu refuses, logs, and counts it (softgpu_stats.api_misuse),
 * so tests can fail on it.
 *
 * The exported definitions spell their types as nv-p2p.h does (uint64_t,
 * not u64): genksyms hashes the spelling, so only then do softgpu's symbol
 * CRCs equal the real nvidia.ko's.
 */
#include <linux/completion.h>
#include <linux/hashtable.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>

#include "softgpu.h"

enum softgpu_pin_state {
	SOFTGPU_PIN_ACTIVE,
	SOFTGPU_PIN_REVOKING,	/* its free callback is running */
	SOFTGPU_PIN_REVOKED,	/* callback done; kept as a tombstone */
};

/*
 * A P2P client cannot close the window between deciding to put a legacy pin
 * and nvidia_p2p_put_pages() running: the free callback may run and finish
 * in between (the client must not hold a lock the callback needs across the
 * put).  The real driver then fails the put.  So softgpu keeps revoked pins
 * as tombstones, their memory released but their page table address still
 * reserved, and fails a put on one with -EINVAL; only a put on a page table
 * it never handed out, or already put, is a contract violation.  The oldest
 * tombstones go once there are more than this many.
 */
#define SOFTGPU_MAX_TOMBSTONES 4096

struct softgpu_pin {
	struct hlist_node hash_node;	/* in softgpu_pins, keyed by &table */
	struct list_head space_node;	/* legacy: in space->legacy_pins,
					 * revoked: in softgpu_tombstones */
	enum softgpu_pin_state state;
	bool persistent;
	bool table_freed;		/* the callback called free_page_table */
	unsigned int waiters;		/* put_pages calls blocked on revocation */
	struct completion revoked;
	u64 va;
	u64 len;
	u64 p2p_token;
	u32 va_space;
	void (*free_callback)(void *data);
	void *data;
	struct softgpu_mem **mems;	/* one reference per entry */
	struct nvidia_p2p_page_table table;
	u8 uuid[NVIDIA_P2P_GPU_UUID_LEN];
	struct nvidia_p2p_page **page_ptrs;
	struct nvidia_p2p_page *pages;
};

int nvidia_p2p_cap_persistent_pages = 1;
EXPORT_SYMBOL_GPL(nvidia_p2p_cap_persistent_pages);

static DEFINE_HASHTABLE(softgpu_pins, 12);
static LIST_HEAD(softgpu_tombstones);
static unsigned int softgpu_nr_tombstones;
static struct softgpu_stats softgpu_p2p_stats;	/* under softgpu_lock */

#define softgpu_misuse(fmt, ...)					\
	do {								\
		softgpu_p2p_stats.api_misuse++;				\
		pr_err_ratelimited("softgpu: P2P API misuse: " fmt "\n", \
				   ##__VA_ARGS__);			\
	} while (0)

static struct softgpu_pin *softgpu_pin_lookup(struct nvidia_p2p_page_table *table)
{
	struct softgpu_pin *pin;

	lockdep_assert_held(&softgpu_lock);
	hash_for_each_possible(softgpu_pins, pin, hash_node, (unsigned long)table)
		if (&pin->table == table)
			return pin;
	return NULL;
}

static struct softgpu_pin *softgpu_pin_alloc(unsigned int entries)
{
	struct softgpu_pin *pin;
	unsigned int i;

	pin = kzalloc(sizeof(*pin), GFP_KERNEL);
	if (!pin)
		return NULL;
	pin->mems = kvcalloc(entries, sizeof(*pin->mems), GFP_KERNEL);
	pin->page_ptrs = kvcalloc(entries, sizeof(*pin->page_ptrs), GFP_KERNEL);
	pin->pages = kvcalloc(entries, sizeof(*pin->pages), GFP_KERNEL);
	if (!pin->mems || !pin->page_ptrs || !pin->pages) {
		kvfree(pin->mems);
		kvfree(pin->page_ptrs);
		kvfree(pin->pages);
		kfree(pin);
		return NULL;
	}
	for (i = 0; i < entries; i++)
		pin->page_ptrs[i] = &pin->pages[i];
	init_completion(&pin->revoked);
	return pin;
}

/* Drops the memory references and frees; the pin must be unlinked. */
static void softgpu_pin_free(struct softgpu_pin *pin)
{
	unsigned int i;

	for (i = 0; i < pin->table.entries; i++)
		if (pin->mems[i])
			softgpu_mem_put(pin->mems[i]);
	kvfree(pin->mems);
	kvfree(pin->page_ptrs);
	kvfree(pin->pages);
	kfree(pin);
}

/* Takes an active or revoking pin out of the books (not out of the hash). */
static void softgpu_pin_retire(struct softgpu_pin *pin)
{
	lockdep_assert_held(&softgpu_lock);
	if (!pin->persistent) {
		list_del(&pin->space_node);
		softgpu_p2p_stats.legacy_pins--;
	}
	softgpu_p2p_stats.active_pins--;
	softgpu_p2p_stats.pinned_bytes -= pin->len;
}

static void softgpu_pin_unlink(struct softgpu_pin *pin)
{
	softgpu_pin_retire(pin);
	hash_del(&pin->hash_node);
}

static void softgpu_tombstone_remove(struct softgpu_pin *pin)
{
	lockdep_assert_held(&softgpu_lock);
	list_del(&pin->space_node);
	hash_del(&pin->hash_node);
	softgpu_nr_tombstones--;
}

/* Files a revoked pin as a tombstone; returns one to free, if any. */
static struct softgpu_pin *softgpu_tombstone_add(struct softgpu_pin *pin)
{
	struct softgpu_pin *old;

	lockdep_assert_held(&softgpu_lock);
	list_add_tail(&pin->space_node, &softgpu_tombstones);
	if (++softgpu_nr_tombstones <= SOFTGPU_MAX_TOMBSTONES)
		return NULL;
	list_for_each_entry(old, &softgpu_tombstones, space_node) {
		if (!old->waiters) {
			softgpu_tombstone_remove(old);
			return old;
		}
	}
	return NULL;
}

/* The calling process's space that maps @va, if any. */
static struct softgpu_space *softgpu_caller_space(u64 va)
{
	struct pid *tgid = task_tgid(current);
	struct softgpu_space *space;

	list_for_each_entry(space, &softgpu_spaces, node)
		if (space->owner == tgid && softgpu_find_mapping(space, va))
			return space;
	return NULL;
}

/*
 * The space that tokens name, in any process: the real driver resolves a
 * non-zero token machine-wide and never checks that the caller owns it.
 */
static struct softgpu_space *softgpu_token_space(u64 p2p_token, u32 va_space,
						 u64 va)
{
	struct softgpu_space *space;

	list_for_each_entry(space, &softgpu_spaces, node)
		if (space->p2p_token == p2p_token && space->id == va_space &&
		    softgpu_find_mapping(space, va))
			return space;
	return NULL;
}

/* Counts the call and says whether failure injection picks it. */
static bool softgpu_inject_failure(void)
{
	softgpu_p2p_stats.get_pages_calls++;
	if (!softgpu_fail_nth)
		return false;
	return --softgpu_fail_nth == 0;
}

static int softgpu_get_pages(u64 va, u64 len, bool legacy, u64 p2p_token,
			     u32 va_space, void (*free_callback)(void *data),
			     void *data, u32 flags,
			     struct nvidia_p2p_page_table **page_table)
{
	unsigned int i, entries;
	struct softgpu_space *space;
	struct softgpu_pin *pin;
	int ret;

	if (!page_table)
		return -EINVAL;
	*page_table = NULL;
	/* No more than all GPU memory: also bounds the allocations below. */
	if (!len || va & SOFTGPU_CHUNK_MASK || len & SOFTGPU_CHUNK_MASK ||
	    va + len < va || len > softgpu_memory_size())
		return -EINVAL;
	if (flags & ~NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING)
		return -EINVAL;
	entries = len / SOFTGPU_CHUNK_SIZE;
	/* Bounded like len: no more entries than all GPU memory has. */
	if (softgpu_pt_extra_entries >
	    softgpu_memory_size() / SOFTGPU_CHUNK_SIZE - entries)
		return -EINVAL;
	entries += softgpu_pt_extra_entries;

	pin = softgpu_pin_alloc(entries);
	if (!pin)
		return -ENOMEM;
	pin->persistent = !free_callback;
	pin->free_callback = free_callback;
	pin->data = data;
	pin->va = va;
	pin->len = len;
	pin->p2p_token = p2p_token;
	pin->va_space = va_space;

	mutex_lock(&softgpu_lock);
	if (softgpu_inject_failure()) {
		/* Never "succeed" without a page table, whatever was written. */
		ret = softgpu_fail_errno && softgpu_fail_errno < MAX_ERRNO ?
		      -(int)softgpu_fail_errno : -ENOMEM;
		goto out_unlock;
	}
	ret = -EINVAL;
	if (legacy && (p2p_token || va_space))
		space = softgpu_token_space(p2p_token, va_space, va);
	else
		space = softgpu_caller_space(va);
	if (!space)
		goto out_unlock;

	for (i = 0; i < entries; i++) {
		u64 addr = va + (u64)i * SOFTGPU_CHUNK_SIZE;
		struct softgpu_mapping *map = softgpu_find_mapping(space, addr);
		unsigned int chunk;

		if (!map)
			goto out_unlock;
		chunk = (addr - map->va + map->offset) / SOFTGPU_CHUNK_SIZE;
		softgpu_mem_get(map->mem);
		pin->mems[i] = map->mem;
		pin->pages[i].physical_address = map->mem->chunks[chunk].phys;
		pin->table.entries = i + 1;
	}

	if (softgpu_bar1_limit &&
	    softgpu_p2p_stats.pinned_bytes + len > softgpu_bar1_limit) {
		ret = -ENOMEM;
		goto out_unlock;
	}

	pin->table.version = softgpu_pt_version;
	pin->table.page_size = softgpu_pt_page_size;
	pin->table.pages = pin->page_ptrs;
	memcpy(pin->uuid, softgpu_uuid, sizeof(pin->uuid));
	pin->table.gpu_uuid = pin->uuid;
	if ((softgpu_pt_version & NVIDIA_P2P_MAJOR_VERSION_MASK) >=
	    (SOFTGPU_P2P_PAGE_TABLE_VERSION_2_0 & NVIDIA_P2P_MAJOR_VERSION_MASK) &&
	    softgpu_page_tables_cacheable() &&
	    !(flags & NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING))
		pin->table.flags = NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE;

	/*
	 * The caller's pointer is set before the pin can be revoked, as the
	 * real driver sets it before registering the pin with RM: a free
	 * callback racing the return must find the table it has to free.
	 */
	*page_table = &pin->table;
	hash_add(softgpu_pins, &pin->hash_node, (unsigned long)&pin->table);
	if (!pin->persistent) {
		list_add_tail(&pin->space_node, &space->legacy_pins);
		softgpu_p2p_stats.legacy_pins++;
	}
	softgpu_p2p_stats.active_pins++;
	softgpu_p2p_stats.pinned_bytes += len;
	mutex_unlock(&softgpu_lock);
	return 0;

out_unlock:
	mutex_unlock(&softgpu_lock);
	softgpu_pin_free(pin);	/* drops the memory references taken so far */
	return ret;
}

int nvidia_p2p_get_pages(uint64_t p2p_token, uint32_t va_space, uint64_t virtual_address,
			 uint64_t length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	/* With no callback this is the old persistent API: no tokens then. */
	if (!free_callback) {
		if (!softgpu_persistent_api)
			return -ENOTSUPP;
		if (p2p_token || va_space)
			return -ENOTSUPP;
	}
	return softgpu_get_pages(virtual_address, length, true, p2p_token,
				 va_space, free_callback, data,
				 NVIDIA_P2P_FLAGS_DEFAULT, page_table);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages);

int nvidia_p2p_get_pages_persistent(uint64_t virtual_address, uint64_t length,
				    struct nvidia_p2p_page_table **page_table,
				    uint32_t flags)
{
	might_sleep();
	if (!softgpu_persistent_api)
		return -ENOTSUPP;	/* as on MIG or vGPU */
	return softgpu_get_pages(virtual_address, length, false, 0, 0, NULL,
				 NULL, flags, page_table);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages_persistent);

int nvidia_p2p_put_pages(uint64_t p2p_token, uint32_t va_space, uint64_t virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	struct softgpu_pin *pin;

	mutex_lock(&softgpu_lock);
	softgpu_p2p_stats.put_pages_calls++;
	pin = softgpu_pin_lookup(page_table);
	if (!pin) {
		softgpu_misuse("nvidia_p2p_put_pages on a page table never handed out or already put (a use-after-free on the real driver)");
		mutex_unlock(&softgpu_lock);
		return -EINVAL;
	}
	if (pin->va != virtual_address ||
	    (!pin->persistent && (pin->p2p_token != p2p_token ||
				  pin->va_space != va_space))) {
		mutex_unlock(&softgpu_lock);
		return -EINVAL;
	}
	if (pin->state != SOFTGPU_PIN_ACTIVE) {
		/*
		 * Its memory was freed under it.  The real driver waits for a
		 * running free callback, then fails: the pin is gone.
		 */
		if (pin->state == SOFTGPU_PIN_REVOKING) {
			pin->waiters++;
			mutex_unlock(&softgpu_lock);
			wait_for_completion(&pin->revoked);
			mutex_lock(&softgpu_lock);
			pin->waiters--;
		}
		if (!pin->waiters)
			softgpu_tombstone_remove(pin);
		else
			pin = NULL;	/* another put of it still waits */
		mutex_unlock(&softgpu_lock);
		if (pin)
			softgpu_pin_free(pin);
		return -EINVAL;
	}
	/*
	 * An injected failure leaves the pin as it was: registered, its free
	 * callback still armed, as when the real driver's RM call fails.
	 */
	if (softgpu_fail_put_nth && !--softgpu_fail_put_nth) {
		mutex_unlock(&softgpu_lock);
		return -EIO;
	}
	softgpu_pin_unlink(pin);
	mutex_unlock(&softgpu_lock);
	softgpu_pin_free(pin);
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages);

int nvidia_p2p_put_pages_persistent(uint64_t virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    uint32_t flags)
{
	struct softgpu_pin *pin;

	mutex_lock(&softgpu_lock);
	softgpu_p2p_stats.put_pages_calls++;
	pin = softgpu_pin_lookup(page_table);
	if (!pin || !pin->persistent) {
		softgpu_misuse("nvidia_p2p_put_pages_persistent on %s page table",
			       pin ? "a legacy" : "an unknown");
		mutex_unlock(&softgpu_lock);
		return -EINVAL;
	}
	if (pin->va != virtual_address || flags) {
		mutex_unlock(&softgpu_lock);
		return -EINVAL;
	}
	softgpu_pin_unlink(pin);
	mutex_unlock(&softgpu_lock);
	softgpu_pin_free(pin);
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages_persistent);

int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	struct softgpu_pin *pin;
	int ret = 0;

	mutex_lock(&softgpu_lock);
	pin = softgpu_pin_lookup(page_table);
	if (!pin || pin->state != SOFTGPU_PIN_REVOKING || pin->table_freed) {
		softgpu_misuse("nvidia_p2p_free_page_table outside the page table's free callback");
		ret = -EINVAL;
	} else {
		/* Freed for real once the callback returns, as RM does. */
		pin->table_freed = true;
	}
	mutex_unlock(&softgpu_lock);
	return ret;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_page_table);

/* Obsolete since the Fermi days; the real driver refuses them too. */
int nvidia_p2p_init_mapping(uint64_t p2p_token, struct nvidia_p2p_params *params,
			    void (*destroy_callback)(void *data), void *data)
{
	return -ENOTSUPP;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_init_mapping);

int nvidia_p2p_destroy_mapping(uint64_t p2p_token)
{
	return -ENOTSUPP;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_destroy_mapping);

/*
 * Moves the legacy pins of @space overlapping [va, va + size) to @revoked;
 * the caller holds softgpu_lock, then drops it and runs
 * softgpu_p2p_run_callbacks() before releasing the memory.
 */
void softgpu_p2p_revoke_range(struct softgpu_space *space, u64 va, u64 size,
			      struct list_head *revoked)
{
	struct softgpu_pin *pin, *tmp;

	lockdep_assert_held(&softgpu_lock);
	list_for_each_entry_safe(pin, tmp, &space->legacy_pins, space_node) {
		if (pin->state != SOFTGPU_PIN_ACTIVE)
			continue;
		if (pin->va >= va + size || va >= pin->va + pin->len)
			continue;
		pin->state = SOFTGPU_PIN_REVOKING;
		list_move_tail(&pin->space_node, revoked);
	}
}

void softgpu_p2p_run_callbacks(struct list_head *revoked)
{
	struct softgpu_pin *pin, *tmp, *evicted;
	unsigned int i;

	list_for_each_entry_safe(pin, tmp, revoked, space_node) {
		pin->free_callback(pin->data);

		mutex_lock(&softgpu_lock);
		softgpu_p2p_stats.callbacks_fired++;
		if (!pin->table_freed)
			softgpu_misuse("free callback %ps returned without calling nvidia_p2p_free_page_table",
				       pin->free_callback);
		softgpu_pin_retire(pin);	/* also leaves @revoked */
		/* The memory goes now; the page table's address stays taken. */
		for (i = 0; i < pin->table.entries; i++) {
			softgpu_mem_put(pin->mems[i]);
			pin->mems[i] = NULL;
		}
		pin->state = SOFTGPU_PIN_REVOKED;
		evicted = softgpu_tombstone_add(pin);
		complete_all(&pin->revoked);
		mutex_unlock(&softgpu_lock);
		if (evicted)
			softgpu_pin_free(evicted);
	}
}

void softgpu_p2p_get_stats(struct softgpu_stats *stats)
{
	lockdep_assert_held(&softgpu_lock);
	*stats = softgpu_p2p_stats;
	stats->memory_used = atomic64_read(&softgpu_backing.used);
}

/* Module exit: our symbols' users are gone, so any pin left was leaked. */
void softgpu_p2p_exit(void)
{
	struct hlist_node *tmp;
	struct softgpu_pin *pin;
	unsigned int bkt, leaked = 0;

	mutex_lock(&softgpu_lock);
	hash_for_each_safe(softgpu_pins, bkt, tmp, pin, hash_node) {
		if (pin->state == SOFTGPU_PIN_REVOKED) {
			softgpu_tombstone_remove(pin);
		} else {
			softgpu_pin_unlink(pin);
			leaked++;
		}
		softgpu_pin_free(pin);
	}
	mutex_unlock(&softgpu_lock);
	if (leaked)
		pr_err("softgpu: %u P2P pins were never released by their owner\n",
		       leaked);
}
