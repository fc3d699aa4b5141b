/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * softgpu internals shared by the module's source files.
 *
 * Objects and their lifetimes:
 *  - struct softgpu_mem: a physical memory object (cuMemCreate), an array of
 *    64 KiB chunks, reference counted.  Its handle, every mapping of it,
 *    every pin of it and every dma-buf of it hold one reference, so pinned
 *    memory outlives FREE exactly as on the real driver.
 *  - struct softgpu_space: one open file of /dev/softgpu, a GPU VA space with
 *    its reservations, mappings, handles and legacy pins.
 *  - struct softgpu_pin: one successful nvidia_p2p_get_pages*() call; the
 *    page table handed out is embedded in it.
 *
 * softgpu_lock (a mutex) protects every list and counter below.  It is never
 * held while a P2P client's free callback runs, since the client's callback
 * takes its own locks and the client may hold those locks while calling into
 * us.
 */
#ifndef SOFTGPU_H
#define SOFTGPU_H

#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/types.h>

#include "softgpu_p2p.h"
#include "../include/softgpu_uapi.h"

#define SOFTGPU_CHUNK_SIZE ((u64)SOFTGPU_PAGE_SIZE)
#define SOFTGPU_CHUNK_MASK (SOFTGPU_CHUNK_SIZE - 1)

struct pci_dev;

/* One 64 KiB GPU page. */
struct softgpu_chunk {
	phys_addr_t phys;	/* bus address reported in page tables */
	void *kaddr;		/* kernel mapping (WC for the BAR) */
	struct page *page;	/* RAM mode only: the order-4 allocation */
};

struct softgpu_mem {
	struct kref ref;
	struct list_head handle_node;	/* in space->handles while the handle lives */
	u64 handle;
	u64 size;
	unsigned int nr_chunks;
	struct softgpu_chunk chunks[];
};

struct softgpu_reservation {
	struct list_head node;
	u64 va;
	u64 size;
	struct softgpu_mem *alloc_mem;	/* set when made by SOFTGPU_IOC_ALLOC */
};

struct softgpu_mapping {
	struct list_head node;
	u64 va;
	u64 size;
	u64 offset;			/* into mem */
	struct softgpu_mem *mem;	/* holds a reference */
};

struct softgpu_space {
	struct list_head node;		/* in softgpu_spaces */
	struct pid *owner;		/* thread group of the opener */
	u32 id;
	u64 p2p_token;
	u64 next_handle;
	struct list_head reservations;
	struct list_head mappings;
	struct list_head handles;
	struct list_head legacy_pins;
};

/* Where the "GPU memory" lives. */
struct softgpu_backing {
	bool bar;			/* ivshmem BAR2, else RAM */
	struct pci_dev *pdev;
	phys_addr_t bar_start;
	u64 size;			/* BAR mode: bytes of GPU memory */
	void *bar_kaddr;
	unsigned long *bar_bitmap;	/* one bit per 64 KiB chunk of the BAR */
	unsigned int bar_chunks;
	atomic64_t used;
	spinlock_t lock;		/* bar_bitmap */
};

extern struct mutex softgpu_lock;
extern struct list_head softgpu_spaces;
extern struct softgpu_backing softgpu_backing;
extern u8 softgpu_uuid[SOFTGPU_UUID_LEN];

/* Module parameters (knobs). */
extern unsigned int softgpu_pt_version;
extern unsigned int softgpu_pt_page_size;
extern int softgpu_cpu_cacheable;
extern unsigned long softgpu_bar1_limit;
extern unsigned int softgpu_fail_nth;
extern unsigned int softgpu_fail_errno;
extern unsigned int softgpu_fail_put_nth;
extern unsigned int softgpu_pt_extra_entries;
extern bool softgpu_persistent_api;

/* softgpu_mem.c */
int softgpu_backing_init(void);
void softgpu_backing_exit(void);
struct softgpu_mem *softgpu_mem_create(u64 size);
void softgpu_mem_put(struct softgpu_mem *mem);
static inline void softgpu_mem_get(struct softgpu_mem *mem)
{
	kref_get(&mem->ref);
}
bool softgpu_page_tables_cacheable(void);
u64 softgpu_memory_size(void);

/* softgpu_dev.c */
int softgpu_dev_init(void);
void softgpu_dev_exit(void);
struct softgpu_mapping *softgpu_find_mapping(struct softgpu_space *space,
					     u64 va);

/* softgpu_p2p.c */
void softgpu_p2p_revoke_range(struct softgpu_space *space, u64 va, u64 size,
			      struct list_head *revoked);
void softgpu_p2p_run_callbacks(struct list_head *revoked);
void softgpu_p2p_get_stats(struct softgpu_stats *stats);
void softgpu_p2p_exit(void);

/* softgpu_dmabuf.c */
int softgpu_export_dmabuf(struct softgpu_space *space,
			  struct softgpu_export_dmabuf *args);

#endif /* SOFTGPU_H */
