// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * gdrdrv: CPU mappings of pinned GPU memory.
 *
 * A process pins a range of its CUDA memory through /dev/gdrdrv (the NVIDIA
 * P2P API hands us the bus addresses of the GPU pages behind it) and then
 * mmap()s the pinned range, so that the CPU reads and writes GPU memory
 * directly.  This is a drop-in for GDRCopy 2.6's driver: the ioctl ABI in
 * include/uapi/gdrdrv.h is binary compatible with it.
 *
 * Objects:
 *  - struct gdrdrv_file: one per open file.  Owned by the opener's address
 *    space and program image; every ioctl and mmap from another process, or
 *    after an execve(), fails with EACCES.
 *    Its pinned buffers live in an xarray indexed by handle, and handles
 *    double as mmap page offsets.  ->lock serialises handle allocation.
 *  - struct gdrdrv_mr: one pinned range ("memory region").  Refcounted: the
 *    handle table, each VMA mapping it, a running free callback and ioctls in
 *    flight each hold a reference.
 *
 * The life of a region, and what guards each part of it:
 *  - mr->sem guards the page table pointer, the state (unpinning, cb_fired),
 *    the mapping count and type, and the WC memtype reservations.
 *  - A region is mappable while it has a page table and neither unpin nor
 *    the free callback has begun (gdrdrv_mr_mappable()).  Both end that
 *    under mr->sem held for write, and zap every PTE of the region before
 *    dropping it; only then are the pages given back.
 *  - PTEs are inserted only by the fault handler, under mr->sem held for
 *    read, after checking that the region is mappable.  A fault runs only on
 *    a VMA already in the file's mapping tree, so a zap always finds what a
 *    fault inserted: no PTE outlives the pin.  ->mmap only sets the VMA up.
 *  - The memtype reservations of a WC mapping are taken by ->mmap and given
 *    back when the pin ends (unpin, close or the free callback: after the
 *    zap, under mr->sem) or when the last VMA closes, whichever is first: a
 *    revoked mapping holds no reservation until its munmap.  Mappings of
 *    the same BAR pages share them (struct gdrdrv_wc_span).
 *  - The NVIDIA free callback takes only mr->sem, and sleeps (NVIDIA calls
 *    it from process context; gdrdrv_free_callback() asserts that).  Under
 *    mr->sem gdrdrv calls into the NVIDIA driver only for
 *    nvidia_p2p_free_page_table(), from that callback, which takes no lock
 *    of NVIDIA's that a callback waits for.  nvidia_p2p_get_pages*() and
 *    nvidia_p2p_put_pages*() are never called with mr->sem held:
 *    put_pages() waits for a running callback (AB-BA otherwise).
 *  - Lock order: mmap_lock (or the VMA lock), then mr->sem, then the file's
 *    i_mmap lock (taken by unmap_mapping_range()), then page table locks;
 *    gdrdrv_wc_lock (the shared WC spans) is taken under mr->sem alone.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/compat.h>
#include <linux/cred.h>
#include <linux/delay.h>
#include <linux/fs.h>
#include <linux/hashtable.h>
#include <linux/io.h>
#include <linux/kref.h>
#include <linux/mem_encrypt.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/proc_fs.h>
#include <linux/rbtree.h>
#include <linux/rwsem.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/stringify.h>
#include <linux/timex.h>
#include <linux/uaccess.h>
#include <linux/user_namespace.h>
#include <linux/xarray.h>
#ifdef CONFIG_PPC64
#include <asm/reg.h>
#endif

#include <uapi/gdrdrv.h>
#include <gdrcopy_version.h>

#include "conftest.h"
#include "gdrdrv_p2p.h"

/* The uapi header's literal interface version stands alone: keep them equal. */
#if GDRDRV_MAKE_VERSION(GDRCOPY_VERSION_MAJOR, GDRCOPY_VERSION_MINOR) != GDRDRV_VERSION
#error "uapi/gdrdrv.h: GDRDRV_VERSION differs from gdrcopy_version.h"
#endif

#define GDRDRV_VERSION_STRING \
	__stringify(GDRCOPY_VERSION_MAJOR) "." __stringify(GDRCOPY_VERSION_MINOR)

#ifdef GDRDRV_OPENSOURCE_NVIDIA
#define GDRDRV_FLAVOR "opensource"
#else
#define GDRDRV_FLAVOR "proprietary"
#endif

/*
 * The proprietary NVIDIA driver is not GPL, and the kernel refuses a module
 * that takes symbols from it while also using GPL-only exports.  So, in that
 * flavour, helpers that the probes found GPL-only are avoided.
 */
#if defined(GDRDRV_OPENSOURCE_NVIDIA)
#define GDRDRV_MAY_USE_GPL_ONLY 1
#endif

static int dbg_enabled;
module_param(dbg_enabled, int, 0644);
MODULE_PARM_DESC(dbg_enabled,
		 "debug tracing (ratelimited); at load time also creates /proc/driver/gdrdrv/nv_get_pages_refcount (default 0)");

static int info_enabled;
module_param(info_enabled, int, 0644);
MODULE_PARM_DESC(info_enabled, "informational tracing (default 0)");

static int use_persistent_mapping = 1;
module_param(use_persistent_mapping, int, 0444);
MODULE_PARM_DESC(use_persistent_mapping,
		 "pin with nvidia_p2p_get_pages_persistent() when the NVIDIA driver supports it; 0 selects callback-based pins (default 1)");

/* Permission bits read and shown in octal, as chmod writes them. */
static int gdrdrv_param_get_mode(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%04o\n",
			 *(unsigned int *)kp->arg & 0777);
}

static const struct kernel_param_ops gdrdrv_param_ops_mode = {
	.set = param_set_uint,
	.get = gdrdrv_param_get_mode,
};

static unsigned int node_mode = 0666;
module_param_cb(node_mode, &gdrdrv_param_ops_mode, &node_mode, 0444);
MODULE_PARM_DESC(node_mode,
		 "permission bits of /dev/gdrdrv (default 0666; 0660 with node_gid to restrict access to a group)");

static unsigned int node_gid;
module_param(node_gid, uint, 0444);
MODULE_PARM_DESC(node_gid,
		 "group id of /dev/gdrdrv, applied by the udev rule shipped with gdrdrv (default 0, root)");

/*
 * NVIDIA's driver resolves a non-zero P2P token in every process, with no
 * check that the caller owns it: honouring tokens lets any user of
 * /dev/gdrdrv pin another process's GPU memory.  Off unless an administrator
 * trusts every user of the node.
 */
static bool allow_p2p_tokens;
module_param(allow_p2p_tokens, bool, 0444);
MODULE_PARM_DESC(allow_p2p_tokens,
		 "honour non-zero p2p_token/va_space in PIN_BUFFER (legacy pins); the NVIDIA driver does not check who owns a token, so any user of /dev/gdrdrv could pin another process's GPU memory (default N)");

/* Pins hold kernel memory: bound what one file and one user may hold. */
static unsigned int max_pins_per_file = 65536;
module_param(max_pins_per_file, uint, 0644);
MODULE_PARM_DESC(max_pins_per_file,
		 "pins one open /dev/gdrdrv file may hold; more fail with ENOSPC (0: no limit; default 65536)");

static unsigned int max_pins_per_user = 262144;
module_param(max_pins_per_user, uint, 0644);
MODULE_PARM_DESC(max_pins_per_user,
		 "pins all files opened by one user may hold together, the users of a user namespace counting also as its creator; more fail with EDQUOT (0: no limit; default 262144)");

/*
 * And bytes: the NVIDIA driver keeps about 40 bytes of memory no cgroup is
 * charged for per 64 KiB pinned, and pinning one range again costs that
 * again, so pin counts alone do not bound it.  The defaults cover every
 * GPU of an 8 x 192 GB node twice over for one user, and bound that memory
 * to about 1.3 GiB per file and 2.5 GiB per user.
 */
static unsigned long long max_pinned_bytes_per_file = 2ULL << 40;
module_param(max_pinned_bytes_per_file, ullong, 0644);
MODULE_PARM_DESC(max_pinned_bytes_per_file,
		 "bytes one open /dev/gdrdrv file may hold pinned (64 KiB-rounded ranges, a range pinned twice counting twice); more fail with ENOSPC (0: no limit; default 2 TiB)");

static unsigned long long max_pinned_bytes_per_user = 4ULL << 40;
module_param(max_pinned_bytes_per_user, ullong, 0644);
MODULE_PARM_DESC(max_pinned_bytes_per_user,
		 "bytes all files opened by one user may hold pinned, counted as max_pins_per_user counts pins; more fail with EDQUOT (0: no limit; default 4 TiB)");

#define gdrdrv_dbg(fmt, ...)						\
	do {								\
		if (READ_ONCE(dbg_enabled))				\
			pr_info_ratelimited("%s: " fmt, __func__,	\
					    ##__VA_ARGS__);		\
		else							\
			pr_debug_ratelimited("%s: " fmt, __func__,	\
					     ##__VA_ARGS__);		\
	} while (0)

#define gdrdrv_info(fmt, ...)						\
	do {								\
		if (READ_ONCE(info_enabled) || READ_ONCE(dbg_enabled))	\
			pr_info_ratelimited("%s: " fmt, __func__,	\
					    ##__VA_ARGS__);		\
	} while (0)

/* Outstanding successful nvidia_p2p_get_pages*() calls, all files. */
static atomic64_t gdrdrv_pin_count = ATOMIC64_INIT(0);

/*
 * Free callbacks running gdrdrv code.  A callback's last steps need not be
 * ordered before the module's unload by anything else (a file closed after
 * the callback ended its pin calls nothing that waits for it), so
 * gdrdrv_exit() waits for this to drop to 0.
 */
static atomic_t gdrdrv_callbacks_running = ATOMIC_INIT(0);

/* Decided once at init: see gdrdrv_detect_platform(). */
static bool gdrdrv_persistent;		/* persistent pins in use */
static bool gdrdrv_cpu_could_cache;	/* CPU may map GPU memory cached */
static bool gdrdrv_must_use_device;	/* DEVICE mappings instead of WC */

/* A handle is a page offset: keep [handle, handle + pages) a valid offset. */
#define GDRDRV_HANDLE_LIMIT ((unsigned long)(MAX_LFS_FILESIZE >> PAGE_SHIFT))

/*
 * Who may use a file: the address space that opened it.  The mm pointer
 * alone could be reused by a later process, so the thread group and its
 * start time pin down the process, and the exec count the program image:
 * after execve() the new image holds no access through inherited files.
 */
struct gdrdrv_owner {
	const struct mm_struct *mm;	/* compared, never dereferenced */
	pid_t tgid;
	u64 start_time;
	u64 exec_id;
};

struct gdrdrv_file {
	struct gdrdrv_owner owner;
	const struct cred *cred;	/* the opener's (filp->f_cred), charged */
	atomic_t nr_pins;		/* regions charged to this file */
	atomic64_t pinned_bytes;	/* and their bytes */
	struct xarray mrs;		/* handle -> struct gdrdrv_mr */
	struct mutex lock;		/* handle allocation */
	unsigned long next_handle;
	/* This file's own mappings, so that zapping one touches no other. */
	struct address_space mapping;
};

struct gdrdrv_mr {
	struct kref ref;
	struct rw_semaphore sem;
	struct gdrdrv_file *file;
	unsigned long handle;
	u64 va;				/* start, 64 KiB aligned */
	u64 len;			/* multiple of 64 KiB */
	u32 offset;			/* of the pinned address in its GPU page */
	bool persistent;
	bool force_pcie;
	u64 p2p_token;
	u32 va_space;
	u64 tm_cycles;
	const struct cred *cred;	/* charged to; held until the pin ends */

	/* Guarded by sem. */
	struct nvidia_p2p_page_table *page_table;	/* NULL once released */
	bool unpinning;			/* unpin or close has begun */
	bool cb_fired;			/* the NVIDIA free callback has run */
	bool put_failed;		/* put_pages failed: the callback may still come */
	bool can_cache;
	bool ram_backed;		/* x86: the pages are system RAM */
	u32 req_type;			/* GDRDRV_MR_*, from REQ_MAPPING_TYPE */
	u32 map_type;			/* GDRDRV_MR_*, while mapped */
	unsigned int map_count;		/* VMAs mapping this region */
	struct gdrdrv_memtype_run {	/* x86: WC spans held by the mapping */
		u64 phys;
		unsigned long len;
	} *wc_runs;
	unsigned int nr_wc_runs;
};

/* Whether new PTEs may map the region; mr->sem held. */
static bool gdrdrv_mr_mappable(const struct gdrdrv_mr *mr)
{
	return mr->page_table && !mr->unpinning && !mr->cb_fired;
}

static void gdrdrv_mr_free(struct kref *ref)
{
	kfree(container_of(ref, struct gdrdrv_mr, ref));
}

static void gdrdrv_mr_put(struct gdrdrv_mr *mr)
{
	kref_put(&mr->ref, gdrdrv_mr_free);
}

static loff_t gdrdrv_mr_file_offset(const struct gdrdrv_mr *mr)
{
	return (loff_t)mr->handle << PAGE_SHIFT;
}

/* Removes the CPU's view of the region: later accesses raise SIGBUS. */
static void gdrdrv_mr_zap(struct gdrdrv_mr *mr)
{
	unmap_mapping_range(&mr->file->mapping, gdrdrv_mr_file_offset(mr),
			    mr->len, 1);
}

static void gdrdrv_mr_free_memtypes(struct gdrdrv_mr *mr);
static void gdrdrv_mr_uncharge_user(struct gdrdrv_mr *mr);

static void gdrdrv_owner_set(struct gdrdrv_owner *owner)
{
	owner->mm = current->mm;
	owner->tgid = current->tgid;
	owner->start_time = current->group_leader->start_time;
	owner->exec_id = current->self_exec_id;
}

/*
 * Thread group identity without holding a reference (put_pid() is GPL-only):
 * a tgid is reused only by a process that started later.
 */
static bool gdrdrv_owner_is_current(const struct gdrdrv_owner *owner)
{
	return owner->mm && owner->mm == current->mm &&
	       owner->tgid == current->tgid &&
	       owner->start_time == current->group_leader->start_time &&
	       owner->exec_id == current->self_exec_id;
}

/* Looks a handle up and takes a reference; NULL if there is none. */
static struct gdrdrv_mr *gdrdrv_mr_get(struct gdrdrv_file *file, u64 handle)
{
	struct gdrdrv_mr *mr;

	if (handle > ULONG_MAX)
		return NULL;
	xa_lock(&file->mrs);
	mr = xa_load(&file->mrs, (unsigned long)handle);
	if (mr)
		kref_get(&mr->ref);
	xa_unlock(&file->mrs);
	return mr;
}

/*
 * The flags of every gdrdrv VMA.  VM_DONTCOPY keeps mappings out of fork
 * children (which could not use the handle anyway, see gdrdrv_mmap()), in
 * every flavour: where vm_flags_set() is GPL-only (Linux 6.15+) the
 * proprietary build sets them with vm_flags_init() instead, which NVIDIA's
 * gdrdrv does not, so there its mappings are inherited.
 * GDRDRV_ATTR_VMA_INHERITED_ON_FORK and /proc/driver/gdrdrv/params report
 * what these flags say.
 */
#define GDRDRV_VMA_FLAGS (VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP | VM_IO | \
			  VM_PFNMAP)

static bool gdrdrv_vma_inherited_on_fork(void)
{
	return !(GDRDRV_VMA_FLAGS & VM_DONTCOPY);
}

static bool gdrdrv_persistent_supported(void)
{
#if defined(GDRDRV_P2P_PERSISTENT_API)
	return true;
#elif defined(GDRDRV_P2P_PERSISTENT_CAP_VAR)
	return nvidia_p2p_cap_persistent_pages;
#else
	return false;
#endif
}

static bool gdrdrv_force_pcie_supported(void)
{
#if defined(NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING) && defined(GDRDRV_P2P_PERSISTENT_API)
	return gdrdrv_persistent;
#else
	return false;
#endif
}

/**
 * gdrdrv_free_callback() - End a legacy pin whose GPU memory is being freed.
 * @data: the region (struct gdrdrv_mr) given to nvidia_p2p_get_pages().
 *
 * The NVIDIA driver calls this when the CUDA allocation under a legacy pin
 * is freed.  It revokes every mapping of the region, frees the page table
 * (freed, not put: the pin is over) and gives back the WC reservations.  If
 * an earlier nvidia_p2p_put_pages() failed, it also ends what that kept:
 * the region's reference, the user's charge and the module reference.
 *
 * Context: process context; may sleep.  Takes only mr->sem (the NVIDIA
 * driver holds its own locks around the call).
 */
static void gdrdrv_free_callback(void *data)
{
	struct gdrdrv_mr *mr = data;
	struct nvidia_p2p_page_table *page_table;
	bool put_failed;

	atomic_inc(&gdrdrv_callbacks_running);
	/* It takes a sleeping lock: NVIDIA must call it where that may sleep. */
	might_sleep();
	/* The pin holds a reference until put_pages() or this callback. */
	kref_get(&mr->ref);
	down_write(&mr->sem);
	mr->cb_fired = true;
	put_failed = mr->put_failed;
	mr->put_failed = false;
	page_table = mr->page_table;
	mr->page_table = NULL;
	if (page_table) {
		nvidia_p2p_free_page_table(page_table);
		atomic64_dec(&gdrdrv_pin_count);
	}
	if (mr->map_count)
		gdrdrv_mr_zap(mr);
	/* No PTE is left nor can come: the reservation ends with the pin. */
	gdrdrv_mr_free_memtypes(mr);
	up_write(&mr->sem);
	gdrdrv_info("GPU memory at 0x%llx freed while pinned; mapping revoked\n",
		    mr->va);
	gdrdrv_mr_put(mr);
	if (put_failed) {
		/* What gdrdrv_mr_unpin() kept for this call; the module last. */
		gdrdrv_mr_uncharge_user(mr);
		gdrdrv_mr_put(mr);
		module_put(THIS_MODULE);
	}
	/* Last: only the return is left to run (see gdrdrv_exit()). */
	atomic_dec(&gdrdrv_callbacks_running);
}

static int gdrdrv_get_pages(struct gdrdrv_mr *mr, u32 nv_flags)
{
	if (!mr->persistent)
		return nvidia_p2p_get_pages(mr->p2p_token, mr->va_space, mr->va,
					    mr->len, &mr->page_table,
					    gdrdrv_free_callback, mr);
#if defined(GDRDRV_P2P_PERSISTENT_API)
	return nvidia_p2p_get_pages_persistent(mr->va, mr->len,
					       &mr->page_table, nv_flags);
#else
	/* Older drivers: a legacy pin without callback is persistent. */
	return nvidia_p2p_get_pages(0, 0, mr->va, mr->len, &mr->page_table,
				    NULL, NULL);
#endif
}

/**
 * gdrdrv_mr_unpin() - Give a region's pin back to the NVIDIA driver.
 * @mr: the region, out of the handle table or never in it.
 *
 * Releases the pin with nvidia_p2p_put_pages*(), unless the free callback
 * already ended it.
 *
 * Context: process context; takes mr->sem, not held across the NVIDIA call
 * (put_pages waits for a running free callback, which takes mr->sem).
 * Return: true when the pin is over; false when the NVIDIA driver refused
 * to release a legacy pin, which then stands until its free callback ends
 * it and what it holds (gdrdrv_free_callback()).
 */
static bool gdrdrv_mr_unpin(struct gdrdrv_mr *mr)
{
	struct nvidia_p2p_page_table *page_table;
	bool ended = true;
	int ret;

	down_read(&mr->sem);
	page_table = mr->page_table;
	up_read(&mr->sem);
	if (!page_table)
		return true;

	/* Without mr->sem: put_pages() waits for a running free callback. */
	if (!mr->persistent)
		ret = nvidia_p2p_put_pages(mr->p2p_token, mr->va_space, mr->va,
					   page_table);
#if defined(GDRDRV_P2P_PERSISTENT_API)
	else
		ret = nvidia_p2p_put_pages_persistent(mr->va, page_table, 0);
#else
	else
		ret = nvidia_p2p_put_pages(0, 0, mr->va, page_table);
#endif

	down_write(&mr->sem);
	if (mr->page_table == page_table) {
		/* Not released by a callback that raced with us. */
		if (!ret) {
			mr->page_table = NULL;
			atomic64_dec(&gdrdrv_pin_count);
		} else if (!mr->persistent) {
			/*
			 * The pin stands and its free callback may still come
			 * with this region as its argument: keep the region,
			 * the page table for the callback to free, and the
			 * module, until then.
			 */
			mr->put_failed = true;
			ended = false;
			kref_get(&mr->ref);
			__module_get(THIS_MODULE);
			pr_err_ratelimited("releasing the pin of 0x%llx+0x%llx failed (%d); it stays until the CUDA memory is freed, and gdrdrv cannot be unloaded until then\n",
					   mr->va, mr->len, ret);
		} else {
			mr->page_table = NULL;
			pr_err_ratelimited("releasing the pin of 0x%llx+0x%llx failed (%d); the GPU memory stays pinned\n",
					   mr->va, mr->len, ret);
		}
	}
	up_write(&mr->sem);
	return ended;
}

static const char *gdrdrv_page_size_name(u32 page_size)
{
	switch (page_size) {
	case NVIDIA_P2P_PAGE_SIZE_4KB:
		return "4 KiB";
	case NVIDIA_P2P_PAGE_SIZE_64KB:
		return "64 KiB";
	case NVIDIA_P2P_PAGE_SIZE_128KB:
		return "128 KiB";
	default:
		return "unknown";
	}
}

/* Whether the CPU may map these pages cached (coherent platforms). */
static bool gdrdrv_page_table_cacheable(struct nvidia_p2p_page_table *pt)
{
#if defined(NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE)
	u32 major = pt->version >> 16, minor = pt->version & 0xffff;

	/* The flags field exists from page-table version 1.3 and 2.0 on. */
	if ((major == 1 && minor >= 3) || major >= 2) {
		if (pt->flags & NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE)
			return true;
	}
#endif
#if defined(GDRDRV_MAY_USE_GPL_ONLY) && !defined(CONFIG_X86)
	/* GPU memory that the kernel sees as RAM is coherent (Grace Hopper). */
	if (gdrdrv_cpu_could_cache &&
	    page_is_ram(pt->pages[0]->physical_address >> PAGE_SHIFT))
		return true;
#endif
	return false;
}

/*
 * Whether any page is system RAM, on x86 (softgpu's RAM mode; no GPU's
 * BAR is).  page_is_ram() is GPL-only: the proprietary flavour, which only
 * serves real GPUs, assumes MMIO.
 */
static bool gdrdrv_page_table_has_ram(struct nvidia_p2p_page_table *pt)
{
#if defined(CONFIG_X86) && defined(GDRDRV_MAY_USE_GPL_ONLY)
	u32 i;

	for (i = 0; i < pt->entries; i++) {
		if (page_is_ram(pt->pages[i]->physical_address >> PAGE_SHIFT))
			return true;
		/* Millions of entries for a whole-GPU pin: let others run. */
		if (!(i % 1024))
			cond_resched();
	}
#endif
	return false;
}

/* Checks a fresh page table; called with mr->sem held. */
static int gdrdrv_mr_check_page_table(struct gdrdrv_mr *mr)
{
	struct nvidia_p2p_page_table *pt = mr->page_table;
	u32 built = NVIDIA_P2P_PAGE_TABLE_VERSION;

	if ((pt->version >> 16) != (built >> 16) ||
	    (pt->version & 0xffff) < (built & 0xffff)) {
		pr_err_ratelimited("the NVIDIA driver returned a page table of version %u.%u; this gdrdrv was built for %u.%u and cannot read it: rebuild gdrdrv against the running NVIDIA driver's sources\n",
				   pt->version >> 16, pt->version & 0xffff,
				   built >> 16, built & 0xffff);
		return -EFAULT;
	}
	if (pt->page_size != NVIDIA_P2P_PAGE_SIZE_64KB) {
		gdrdrv_dbg("GPU page size %s (%u) is not supported: gdrdrv maps 64 KiB GPU pages only\n",
			   gdrdrv_page_size_name(pt->page_size), pt->page_size);
		return -EINVAL;
	}
	if (!pt->entries ||
	    (u64)pt->entries << GDRDRV_GPU_PAGE_SHIFT < mr->len) {
		gdrdrv_dbg("page table has %u entries for 0x%llx bytes\n",
			   pt->entries, mr->len);
		return -EINVAL;
	}
	mr->ram_backed = gdrdrv_page_table_has_ram(pt);
	/*
	 * x86 keeps RAM coherent and PAT maps RAM pages write-back whatever a
	 * PFN mapping asks for; a WC reservation over RAM is refused and
	 * logged.  So RAM is mapped cached there, never WC.
	 */
	mr->can_cache = mr->ram_backed ||
			(!mr->force_pcie && gdrdrv_page_table_cacheable(pt));
	return 0;
}

/*
 * What one user holds, for max_pins_per_user and max_pinned_bytes_per_user.
 *
 * A user is a uid as one user namespace sees it, and a pin is charged at
 * every level from the opener's namespace up to the initial one, as the
 * kernel's ucounts charge: at the opener's own (namespace, uid), then at
 * each parent to the uid that created the namespace below it.  So the uids
 * of a user namespace, whatever they map to (a rootless container's
 * subordinate range: 65,536 of them), hold together no more than the
 * namespace's creator may, and each uid inside holds no more than its own
 * share.  Processes of the initial namespace have one level: their uid.
 */
struct gdrdrv_user {
	struct hlist_node node;
	const struct user_namespace *ns;	/* compared, never dereferenced */
	kuid_t uid;
	unsigned long pins;
	u64 bytes;
};

static DEFINE_HASHTABLE(gdrdrv_users, 6);
/* Guards gdrdrv_users; a mutex, since a charge allocates. */
static DEFINE_MUTEX(gdrdrv_users_lock);

static unsigned long gdrdrv_user_key(const struct user_namespace *ns,
				     kuid_t uid)
{
	return (unsigned long)ns ^ __kuid_val(uid);
}

/* The entry of (@ns, @uid), created if @create; gdrdrv_users_lock held. */
static struct gdrdrv_user *gdrdrv_user_get(const struct user_namespace *ns,
					   kuid_t uid, bool create)
{
	struct gdrdrv_user *user;

	hash_for_each_possible(gdrdrv_users, user, node,
			       gdrdrv_user_key(ns, uid))
		if (user->ns == ns && uid_eq(user->uid, uid))
			return user;
	if (!create)
		return NULL;
	user = kzalloc(sizeof(*user), GFP_KERNEL_ACCOUNT);
	if (!user)
		return NULL;
	user->ns = ns;
	user->uid = uid;
	hash_add(gdrdrv_users, &user->node, gdrdrv_user_key(ns, uid));
	return user;
}

/*
 * Takes one pin of @bytes off the first @levels levels of @cred's chain;
 * gdrdrv_users_lock held.
 */
static void gdrdrv_user_undo(const struct cred *cred, u64 bytes,
			     unsigned int levels)
{
	const struct user_namespace *ns = cred->user_ns;
	kuid_t uid = cred->uid;

	for (; levels; levels--) {
		struct gdrdrv_user *user = gdrdrv_user_get(ns, uid, false);

		if (!WARN_ON_ONCE(!user || !user->pins || user->bytes < bytes)) {
			user->pins--;
			user->bytes -= bytes;
			if (!user->pins) {
				hash_del(&user->node);
				kfree(user);
			}
		}
		if (!ns->parent)
			break;
		uid = ns->owner;
		ns = ns->parent;
	}
}

/**
 * gdrdrv_user_charge() - Charge one pin to a user at every namespace level.
 * @cred: the opener's credentials: its user namespace and uid.
 * @bytes: the pin's length.
 *
 * Charges one pin of @bytes at every level of @cred's chain (see struct
 * gdrdrv_user), within max_pins_per_user and max_pinned_bytes_per_user at
 * each level: all levels or none.
 *
 * Context: process context; takes gdrdrv_users_lock.
 * Return: 0, -EDQUOT when a level is full, or -ENOMEM.
 */
static int gdrdrv_user_charge(const struct cred *cred, u64 bytes)
{
	unsigned int max_pins = READ_ONCE(max_pins_per_user);
	u64 max_bytes = READ_ONCE(max_pinned_bytes_per_user);
	const struct user_namespace *ns = cred->user_ns;
	kuid_t uid = cred->uid;
	struct gdrdrv_user *user;
	unsigned int levels = 0;
	unsigned long held_pins = 0;
	u64 held_bytes = 0;
	int ret = 0;

	mutex_lock(&gdrdrv_users_lock);
	for (;;) {
		user = gdrdrv_user_get(ns, uid, true);
		if (!user) {
			ret = -ENOMEM;
			break;
		}
		if ((max_pins && user->pins >= max_pins) ||
		    (max_bytes && (user->bytes > max_bytes ||
				   bytes > max_bytes - user->bytes))) {
			held_pins = user->pins;
			held_bytes = user->bytes;
			ret = -EDQUOT;
			break;
		}
		user->pins++;
		user->bytes += bytes;
		levels++;
		if (!ns->parent)
			break;
		uid = ns->owner;
		ns = ns->parent;
	}
	if (ret) {
		if (user && !user->pins) {
			hash_del(&user->node);
			kfree(user);
		}
		gdrdrv_user_undo(cred, bytes, levels);
	}
	mutex_unlock(&gdrdrv_users_lock);
	if (ret == -EDQUOT)
		gdrdrv_dbg("uid %u%s holds %lu pins of 0x%llx bytes; one more of 0x%llx exceeds max_pins_per_user (%u) or max_pinned_bytes_per_user (0x%llx): unpin some or ask an administrator to raise them\n",
			   __kuid_val(uid),
			   levels ? " (who made the caller's user namespace)" : "",
			   held_pins, held_bytes, bytes, max_pins, max_bytes);
	return ret;
}

static void gdrdrv_user_uncharge(const struct cred *cred, u64 bytes)
{
	mutex_lock(&gdrdrv_users_lock);
	gdrdrv_user_undo(cred, bytes, UINT_MAX);
	mutex_unlock(&gdrdrv_users_lock);
}

/**
 * gdrdrv_mr_charge() - Charge a new region to its file and its user.
 * @file: the file the region is pinned on.
 * @mr: the region, with its length set and no pin yet.
 *
 * Charges pins and bytes, before the NVIDIA driver is asked for anything:
 * a refused pin costs nothing, and racing pins cannot overshoot.  On
 * success the region holds a reference to the credentials it charged.
 *
 * Context: process context.
 * Return: 0, -ENOSPC when the file is full (max_pins_per_file,
 * max_pinned_bytes_per_file), -EDQUOT when the user is (struct
 * gdrdrv_user), or -ENOMEM.
 */
static int gdrdrv_mr_charge(struct gdrdrv_file *file, struct gdrdrv_mr *mr)
{
	unsigned int max_pins = READ_ONCE(max_pins_per_file);
	u64 max_bytes = READ_ONCE(max_pinned_bytes_per_file);
	int ret;

	if (atomic_inc_return(&file->nr_pins) > max_pins && max_pins) {
		gdrdrv_dbg("this file holds %u pins, the limit (max_pins_per_file); unpin some or open /dev/gdrdrv again\n",
			   max_pins);
		ret = -ENOSPC;
		goto out_pins;
	}
	if ((u64)atomic64_add_return(mr->len, &file->pinned_bytes) > max_bytes &&
	    max_bytes) {
		gdrdrv_dbg("this file holds 0x%llx pinned bytes; 0x%llx more exceed max_pinned_bytes_per_file (0x%llx): unpin some or open /dev/gdrdrv again\n",
			   (u64)atomic64_read(&file->pinned_bytes) - mr->len,
			   mr->len, max_bytes);
		ret = -ENOSPC;
		goto out_bytes;
	}
	ret = gdrdrv_user_charge(file->cred, mr->len);
	if (ret)
		goto out_bytes;
	mr->cred = get_cred(file->cred);
	return 0;

out_bytes:
	atomic64_sub(mr->len, &file->pinned_bytes);
out_pins:
	atomic_dec(&file->nr_pins);
	return ret;
}

static void gdrdrv_mr_uncharge_file(struct gdrdrv_mr *mr)
{
	atomic64_sub(mr->len, &mr->file->pinned_bytes);
	atomic_dec(&mr->file->nr_pins);
}

/* The user's charge ends when the pin does (not when the handle goes). */
static void gdrdrv_mr_uncharge_user(struct gdrdrv_mr *mr)
{
	gdrdrv_user_uncharge(mr->cred, mr->len);
	put_cred(mr->cred);
	mr->cred = NULL;
}

/**
 * gdrdrv_mr_publish() - Give a pinned region its handle and publish it.
 * @file: the file to publish it on.
 * @mr: the region, pinned and checked.
 * @handle: out: its handle (= mmap page offset).
 *
 * From the moment the region is in the table another thread may unpin and
 * free it (handles are predictable): on success the caller must not touch
 * @mr again, which is why @handle is written before the region is published.
 *
 * Context: process context; takes file->lock.
 * Return: 0, or -ENOMEM when the file has no mmap offsets left or the table
 * cannot grow.
 */
static int gdrdrv_mr_publish(struct gdrdrv_file *file, struct gdrdrv_mr *mr,
			     u64 *handle)
{
	unsigned long pages = max_t(unsigned long, 1, mr->len >> PAGE_SHIFT);
	int ret;

	mutex_lock(&file->lock);
	/* Handles advance by the region size so file ranges never overlap. */
	if (file->next_handle > GDRDRV_HANDLE_LIMIT ||
	    GDRDRV_HANDLE_LIMIT - file->next_handle < pages) {
		gdrdrv_dbg("no mmap offsets left on this file; open /dev/gdrdrv again\n");
		ret = -ENOMEM;
		goto out;
	}
	mr->handle = file->next_handle;
	*handle = mr->handle;
	ret = xa_insert(&file->mrs, mr->handle, mr, GFP_KERNEL_ACCOUNT);
	if (!ret)
		file->next_handle += pages;
out:
	mutex_unlock(&file->lock);
	return ret;
}

/**
 * gdrdrv_pin() - Pin a range of GPU memory and publish it as a region.
 * @file: the caller's file.
 * @addr: GPU virtual address; rounded down to 64 KiB.
 * @size: bytes; the end is rounded up to 64 KiB.
 * @p2p_token: CUDA P2P token (legacy pins with allow_p2p_tokens only).
 * @va_space: CUDA VA-space id (likewise).
 * @flags: GDRDRV_PIN_BUFFER_FLAG_*.
 * @handle: out: the new region's handle.
 *
 * Checks the arguments, charges the budgets (gdrdrv_mr_charge()), pins with
 * the NVIDIA driver, checks its page table and publishes the region.
 *
 * Context: process context.
 * Return: 0; -EINVAL for bad arguments, -EPERM for refused P2P tokens,
 * -ENOSPC or -EDQUOT for a full budget, in that order; else what the NVIDIA
 * driver or the page-table check returned, or -ENOMEM.
 */
static int gdrdrv_pin(struct gdrdrv_file *file, u64 addr, u64 size,
		      u64 p2p_token, u32 va_space, u32 flags, u64 *handle)
{
	struct gdrdrv_mr *mr;
	u64 start, end;
	u32 nv_flags = 0;
	cycles_t t0;
	bool persistent;
	int ret;

	if (!addr || !size || addr + size < addr ||
	    addr + size > U64_MAX - GDRDRV_GPU_PAGE_OFFSET) {
		gdrdrv_dbg("invalid range 0x%llx+0x%llx\n", addr, size);
		return -EINVAL;
	}
	if (flags & ~GDRDRV_PIN_BUFFER_FLAGS_ALL) {
		gdrdrv_dbg("unknown pin flags 0x%x\n", flags);
		return -EINVAL;
	}
	if (gdrdrv_persistent) {
		if (p2p_token || va_space) {
			gdrdrv_dbg("P2P tokens are deprecated with persistent mappings and must be 0\n");
			return -EINVAL;
		}
		if (flags & GDRDRV_PIN_BUFFER_FLAG_FORCE_PCIE) {
#if defined(NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING)
			nv_flags |= NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING;
#else
			gdrdrv_dbg("FORCE_PCIE needs an NVIDIA driver (570+) that gdrdrv was built against\n");
			return -EINVAL;
#endif
		}
	} else if (flags) {
		gdrdrv_dbg("pin flags need persistent mappings (use_persistent_mapping=1)\n");
		return -EINVAL;
	} else if ((p2p_token || va_space) && !allow_p2p_tokens) {
		gdrdrv_dbg("non-zero P2P tokens are refused: the NVIDIA driver resolves them in any process, so they could pin another process's memory; pass 0, or load gdrdrv with allow_p2p_tokens=1 on a node whose users all trust each other\n");
		return -EPERM;
	}

	start = addr & GDRDRV_GPU_PAGE_MASK;
	end = (addr + size + GDRDRV_GPU_PAGE_OFFSET) & GDRDRV_GPU_PAGE_MASK;

	/* Charged to the caller's memory cgroup, as all per-pin memory. */
	mr = kzalloc(sizeof(*mr), GFP_KERNEL_ACCOUNT);
	if (!mr)
		return -ENOMEM;
	kref_init(&mr->ref);
	init_rwsem(&mr->sem);
	mr->file = file;
	mr->va = start;
	mr->len = end - start;
	mr->offset = addr & GDRDRV_GPU_PAGE_OFFSET;
	mr->persistent = gdrdrv_persistent;
	mr->force_pcie = flags & GDRDRV_PIN_BUFFER_FLAG_FORCE_PCIE;
	mr->p2p_token = p2p_token;
	mr->va_space = va_space;
	ret = gdrdrv_mr_charge(file, mr);
	if (ret) {
		kfree(mr);
		return ret;
	}

	t0 = get_cycles();
	ret = gdrdrv_get_pages(mr, nv_flags);
	mr->tm_cycles = get_cycles() - t0;
	if (ret) {
		gdrdrv_dbg("nvidia_p2p_get_pages%s(0x%llx, 0x%llx) failed: %d\n",
			   mr->persistent ? "_persistent" : "", mr->va,
			   mr->len, ret);
		gdrdrv_mr_uncharge_file(mr);
		gdrdrv_mr_uncharge_user(mr);
		kfree(mr);
		return ret;
	}
	atomic64_inc(&gdrdrv_pin_count);

	down_write(&mr->sem);
	/* A free callback may already have run: then there is no table. */
	ret = mr->page_table ? gdrdrv_mr_check_page_table(mr) : 0;
	up_write(&mr->sem);
	persistent = mr->persistent;
	if (!ret)
		ret = gdrdrv_mr_publish(file, mr, handle);
	if (ret) {
		gdrdrv_mr_uncharge_file(mr);
		if (gdrdrv_mr_unpin(mr))
			gdrdrv_mr_uncharge_user(mr);
		gdrdrv_mr_put(mr);
		return ret;
	}
	/* @mr may be gone already (an UNPIN of the new handle): locals only. */
	gdrdrv_info("pinned 0x%llx+0x%llx as handle 0x%llx (%s)\n", start,
		    end - start, *handle, persistent ? "persistent" : "legacy");
	return 0;
}

/**
 * gdrdrv_mr_destroy() - End a region taken out of the handle table.
 * @mr: the region; the table's reference passes to this call.
 *
 * From here on no mmap or fault can use the region; every PTE is zapped and
 * the WC reservations given back, then the pin is released and the budgets
 * uncharged (the user's only once the pin is over, see gdrdrv_mr_unpin()).
 * The page table stays readable until gdrdrv_mr_unpin() releases it, but
 * nothing reads it any more.
 *
 * Context: process context; takes mr->sem.
 */
static void gdrdrv_mr_destroy(struct gdrdrv_mr *mr)
{
	gdrdrv_mr_uncharge_file(mr);
	down_write(&mr->sem);
	mr->unpinning = true;
	if (mr->map_count)
		gdrdrv_mr_zap(mr);
	gdrdrv_mr_free_memtypes(mr);
	up_write(&mr->sem);
	/* A pin NVIDIA would not release stays charged to its user. */
	if (gdrdrv_mr_unpin(mr))
		gdrdrv_mr_uncharge_user(mr);
	gdrdrv_mr_put(mr);
}

/**
 * gdrdrv_unpin() - UNPIN_BUFFER: end the region of a handle.
 * @file: the caller's file.
 * @handle: the handle.
 *
 * Context: process context.
 * Return: 0, or -EINVAL when @file has no such handle.
 */
static int gdrdrv_unpin(struct gdrdrv_file *file, u64 handle)
{
	struct gdrdrv_mr *mr;

	if (handle > ULONG_MAX)
		return -EINVAL;
	mr = xa_erase(&file->mrs, (unsigned long)handle);
	if (!mr) {
		gdrdrv_dbg("unknown handle 0x%llx\n", handle);
		return -EINVAL;
	}
	gdrdrv_mr_destroy(mr);
	return 0;
}

static int gdrdrv_ioc_pin_buffer(struct gdrdrv_file *file, void __user *arg)
{
	struct gdrdrv_pin_buffer params;
	u64 handle;
	int ret;

	if (copy_from_user(&params, arg, sizeof(params)))
		return -EFAULT;
	/* 'pad' is not checked: libraries leave this one uninitialised. */
	ret = gdrdrv_pin(file, params.addr, params.size, params.p2p_token,
			 params.va_space, 0, &handle);
	if (ret)
		return ret;
	params.handle = handle;
	if (copy_to_user(arg, &params, sizeof(params))) {
		gdrdrv_unpin(file, handle);
		return -EFAULT;
	}
	return 0;
}

static int gdrdrv_ioc_pin_buffer_v2(struct gdrdrv_file *file, void __user *arg)
{
	struct gdrdrv_pin_buffer_v2 params;
	u64 handle;
	int ret;

	if (copy_from_user(&params, arg, sizeof(params)))
		return -EFAULT;
	/* Every library using this command zeroes 'pad': keep it reserved. */
	if (params.pad) {
		gdrdrv_dbg("reserved field 'pad' must be 0\n");
		return -EINVAL;
	}
	ret = gdrdrv_pin(file, params.addr, params.size, 0, 0, params.flags,
			 &handle);
	if (ret)
		return ret;
	params.handle = handle;
	if (copy_to_user(arg, &params, sizeof(params))) {
		gdrdrv_unpin(file, handle);
		return -EFAULT;
	}
	return 0;
}

static int gdrdrv_ioc_unpin_buffer(struct gdrdrv_file *file, void __user *arg)
{
	struct gdrdrv_unpin_buffer params;

	if (copy_from_user(&params, arg, sizeof(params)))
		return -EFAULT;
	return gdrdrv_unpin(file, params.handle);
}

static int gdrdrv_ioc_get_cb_flag(struct gdrdrv_file *file, void __user *arg)
{
	struct gdrdrv_get_cb_flag params;
	struct gdrdrv_mr *mr;

	if (copy_from_user(&params, arg, sizeof(params)))
		return -EFAULT;
	mr = gdrdrv_mr_get(file, params.handle);
	if (!mr)
		return -EINVAL;
	down_read(&mr->sem);
	params.flag = mr->cb_fired;
	up_read(&mr->sem);
	gdrdrv_mr_put(mr);
	return copy_to_user(arg, &params, sizeof(params)) ? -EFAULT : 0;
}

static u32 gdrdrv_tsc_khz(void)
{
#ifdef CONFIG_X86
	return tsc_khz;
#else
	return 0;	/* the cycle counter's rate is not known here */
#endif
}

struct gdrdrv_mr_info {
	u64 va;
	u64 mapped_size;
	u64 tm_cycles;
	u32 map_type;
};

static int gdrdrv_mr_info(struct gdrdrv_file *file, u64 handle,
			  struct gdrdrv_mr_info *info)
{
	struct gdrdrv_mr *mr = gdrdrv_mr_get(file, handle);

	if (!mr)
		return -EINVAL;
	down_read(&mr->sem);
	info->va = mr->va;
	info->mapped_size = mr->len;
	info->tm_cycles = mr->tm_cycles;
	info->map_type = mr->map_type;
	up_read(&mr->sem);
	gdrdrv_mr_put(mr);
	return 0;
}

static int gdrdrv_ioc_get_info(struct gdrdrv_file *file, void __user *arg)
{
	struct gdrdrv_get_info params;
	struct gdrdrv_mr_info info;
	int ret;

	if (copy_from_user(&params, arg, sizeof(params)))
		return -EFAULT;
	ret = gdrdrv_mr_info(file, params.handle, &info);
	if (ret)
		return ret;
	params.va = info.va;
	params.mapped_size = info.mapped_size;
	params.page_size = GDRDRV_GPU_PAGE_SIZE;
	params.tsc_khz = gdrdrv_tsc_khz();
	params.tm_cycles = info.tm_cycles;
	params.mapped = info.map_type != GDRDRV_MR_NONE;
	params.wc_mapping = info.map_type == GDRDRV_MR_WC;
	return copy_to_user(arg, &params, sizeof(params)) ? -EFAULT : 0;
}

static int gdrdrv_ioc_get_info_v2(struct gdrdrv_file *file, void __user *arg)
{
	struct gdrdrv_get_info_v2 params;
	struct gdrdrv_mr_info info;
	int ret;

	if (copy_from_user(&params, arg, sizeof(params)))
		return -EFAULT;
	ret = gdrdrv_mr_info(file, params.handle, &info);
	if (ret)
		return ret;
	params.va = info.va;
	params.mapped_size = info.mapped_size;
	params.page_size = GDRDRV_GPU_PAGE_SIZE;
	params.tsc_khz = gdrdrv_tsc_khz();
	params.tm_cycles = info.tm_cycles;
	params.mapping_type = info.map_type;
	params.pad = 0;
	return copy_to_user(arg, &params, sizeof(params)) ? -EFAULT : 0;
}

static int gdrdrv_ioc_get_attr(struct gdrdrv_file *file, void __user *arg)
{
	struct gdrdrv_get_attr params;

	if (copy_from_user(&params, arg, sizeof(params)))
		return -EFAULT;
	switch (params.attr) {
	case GDRDRV_ATTR_USE_PERSISTENT_MAPPING:
		params.val = gdrdrv_persistent;
		break;
	case GDRDRV_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE:
		params.val = gdrdrv_force_pcie_supported();
		break;
	case GDRDRV_ATTR_VMA_INHERITED_ON_FORK:
		params.val = gdrdrv_vma_inherited_on_fork();
		break;
	default:
		return -EINVAL;
	}
	return copy_to_user(arg, &params, sizeof(params)) ? -EFAULT : 0;
}

/* Whether a region may be mapped with a given type; mr->sem held. */
static int gdrdrv_mr_type_allowed(struct gdrdrv_mr *mr, u32 type)
{
	switch (type) {
	case GDRDRV_MR_NONE:
		return 0;
	case GDRDRV_MR_WC:
		return gdrdrv_must_use_device || mr->ram_backed ? -EOPNOTSUPP : 0;
	case GDRDRV_MR_CACHING:
		return mr->can_cache ? 0 : -EOPNOTSUPP;
	case GDRDRV_MR_DEVICE:
		return gdrdrv_must_use_device ? 0 : -EOPNOTSUPP;
	default:
		return -EINVAL;
	}
}

static int gdrdrv_ioc_req_mapping_type(struct gdrdrv_file *file,
				       void __user *arg)
{
	struct gdrdrv_req_mapping_type params;
	struct gdrdrv_mr *mr;
	int ret;

	if (copy_from_user(&params, arg, sizeof(params)))
		return -EFAULT;
	if (params.mapping_type >= GDRDRV_MR_TYPE_COUNT)
		return -EINVAL;
	mr = gdrdrv_mr_get(file, params.handle);
	if (!mr)
		return -EINVAL;
	down_write(&mr->sem);
	if (mr->map_count)
		ret = -EBUSY;
	else
		ret = gdrdrv_mr_type_allowed(mr, params.mapping_type);
	if (!ret)
		mr->req_type = params.mapping_type;
	up_write(&mr->sem);
	gdrdrv_mr_put(mr);
	return ret;
}

static int gdrdrv_ioc_get_version(void __user *arg)
{
	struct gdrdrv_get_version params = {
		.gdrdrv_version = GDRDRV_VERSION,
		.minimum_gdr_api_version = GDRDRV_MINIMUM_GDR_API_VERSION,
	};

	return copy_to_user(arg, &params, sizeof(params)) ? -EFAULT : 0;
}

static long gdrdrv_ioctl(struct file *filp, unsigned int cmd,
			 unsigned long arg)
{
	struct gdrdrv_file *file = filp->private_data;
	void __user *uarg = (void __user *)arg;

	if (_IOC_TYPE(cmd) != GDRDRV_IOCTL)
		return -ENOTTY;
	if (!gdrdrv_owner_is_current(&file->owner)) {
		gdrdrv_dbg("process %d did not open this file; open /dev/gdrdrv in each process\n",
			   current->tgid);
		return -EACCES;
	}

	switch (cmd) {
	case GDRDRV_IOC_PIN_BUFFER:
		return gdrdrv_ioc_pin_buffer(file, uarg);
	case GDRDRV_IOC_PIN_BUFFER_V2:
		return gdrdrv_ioc_pin_buffer_v2(file, uarg);
	case GDRDRV_IOC_UNPIN_BUFFER:
		return gdrdrv_ioc_unpin_buffer(file, uarg);
	case GDRDRV_IOC_GET_CB_FLAG:
		return gdrdrv_ioc_get_cb_flag(file, uarg);
	case GDRDRV_IOC_GET_INFO:
		return gdrdrv_ioc_get_info(file, uarg);
	case GDRDRV_IOC_GET_INFO_V2:
		return gdrdrv_ioc_get_info_v2(file, uarg);
	case GDRDRV_IOC_GET_ATTR:
		return gdrdrv_ioc_get_attr(file, uarg);
	case GDRDRV_IOC_REQ_MAPPING_TYPE:
		return gdrdrv_ioc_req_mapping_type(file, uarg);
	case GDRDRV_IOC_GET_VERSION:
		return gdrdrv_ioc_get_version(uarg);
	default:
		return -ENOTTY;
	}
}

#ifdef CONFIG_COMPAT
/*
 * 32-bit processes.  The argument layouts are the same in both ABIs (no
 * implicit padding, no pointers), but seven command numbers encode
 * sizeof(void *) (see the uapi header): accept their 4-byte spellings.
 */
static long gdrdrv_compat_ioctl(struct file *filp, unsigned int cmd,
				unsigned long arg)
{
	if (_IOC_TYPE(cmd) == GDRDRV_IOCTL &&
	    _IOC_SIZE(cmd) == sizeof(compat_uptr_t)) {
		unsigned int native = _IOC(_IOC_DIR(cmd), GDRDRV_IOCTL,
					   _IOC_NR(cmd), sizeof(void *));

		switch (native) {
		case GDRDRV_IOC_UNPIN_BUFFER:
		case GDRDRV_IOC_GET_CB_FLAG:
		case GDRDRV_IOC_GET_INFO:
		case GDRDRV_IOC_GET_INFO_V2:
		case GDRDRV_IOC_GET_ATTR:
		case GDRDRV_IOC_REQ_MAPPING_TYPE:
		case GDRDRV_IOC_GET_VERSION:
			cmd = native;
			break;
		}
	}
	return gdrdrv_ioctl(filp, cmd, (unsigned long)compat_ptr(arg));
}
#endif

/*
 * x86 PAT records one memtype entry per reservation, and each reservation
 * walks every entry overlapping it under the host-wide memtype_lock.  Pins
 * share BAR pages (RM gives a range pinned again the BAR1 extent it already
 * has), so one reservation per mapping made N mappings of one buffer cost
 * O(N^2) there, and N uncharged entries.  Instead gdrdrv's WC reservations
 * ("spans") never overlap one another: the runs of all live WC mappings
 * cut the BAR into spans, each reserved once and counting the runs that
 * cover it.  A run's ends split the spans they fall in (the pieces are
 * reserved before the whole is freed, so the range never goes without);
 * a span is freed when its last run goes, so what is reserved is always
 * exactly what live mappings cover.
 */
struct gdrdrv_wc_span {
	struct rb_node node;		/* in gdrdrv_wc_spans, by phys */
	u64 phys;
	u64 len;
	unsigned long users;		/* runs of live mappings covering it */
};

static struct rb_root gdrdrv_wc_spans = RB_ROOT;
static DEFINE_MUTEX(gdrdrv_wc_lock);	/* guards the spans; under mr->sem */

static u64 gdrdrv_wc_span_end(const struct gdrdrv_wc_span *span)
{
	return span->phys + span->len;
}

/* The span holding @phys; else NULL, and *@next the first span after it. */
static struct gdrdrv_wc_span *gdrdrv_wc_span_find(u64 phys,
						  struct gdrdrv_wc_span **next)
{
	struct rb_node *node = gdrdrv_wc_spans.rb_node;

	*next = NULL;
	while (node) {
		struct gdrdrv_wc_span *span = rb_entry(node, struct gdrdrv_wc_span,
						       node);

		if (phys < span->phys) {
			*next = span;
			node = node->rb_left;
		} else if (phys >= gdrdrv_wc_span_end(span)) {
			node = node->rb_right;
		} else {
			return span;
		}
	}
	return NULL;
}

static void gdrdrv_wc_span_insert(struct gdrdrv_wc_span *span)
{
	struct rb_node **link = &gdrdrv_wc_spans.rb_node, *parent = NULL;

	while (*link) {
		struct gdrdrv_wc_span *at = rb_entry(*link, struct gdrdrv_wc_span,
						     node);

		parent = *link;
		link = span->phys < at->phys ? &parent->rb_left :
					       &parent->rb_right;
	}
	rb_link_node(&span->node, parent, link);
	rb_insert_color(&span->node, &gdrdrv_wc_spans);
}

/* A new span of @len bytes at @phys, reserved WC; NULL if refused. */
static struct gdrdrv_wc_span *gdrdrv_wc_span_new(u64 phys, u64 len,
						 unsigned long users, int *err)
{
	struct gdrdrv_wc_span *span = kzalloc(sizeof(*span), GFP_KERNEL_ACCOUNT);

	*err = -ENOMEM;
	if (!span)
		return NULL;
	*err = arch_io_reserve_memtype_wc(phys, len);
	if (*err) {
		kfree(span);
		return NULL;
	}
	span->phys = phys;
	span->len = len;
	span->users = users;
	return span;
}

static void gdrdrv_wc_span_free(struct gdrdrv_wc_span *span)
{
	rb_erase(&span->node, &gdrdrv_wc_spans);
	arch_io_free_memtype_wc(span->phys, span->len);
	kfree(span);
}

/* Makes @phys a span boundary; 0 or an errno.  gdrdrv_wc_lock held. */
static int gdrdrv_wc_split_at(u64 phys)
{
	struct gdrdrv_wc_span *next, *lo, *hi;
	struct gdrdrv_wc_span *span = gdrdrv_wc_span_find(phys, &next);
	int err;

	if (!span || span->phys == phys)
		return 0;
	/* WC over WC: the pieces may overlap the whole while it stands. */
	lo = gdrdrv_wc_span_new(span->phys, phys - span->phys, span->users,
				&err);
	if (!lo)
		return err;
	hi = gdrdrv_wc_span_new(phys, gdrdrv_wc_span_end(span) - phys,
				span->users, &err);
	if (!hi) {
		arch_io_free_memtype_wc(lo->phys, lo->len);
		kfree(lo);
		return err;
	}
	gdrdrv_wc_span_free(span);
	gdrdrv_wc_span_insert(lo);
	gdrdrv_wc_span_insert(hi);
	return 0;
}

/* Drops a run's hold on the spans of [@phys, @end); gdrdrv_wc_lock held. */
static void gdrdrv_wc_put_range(u64 phys, u64 end)
{
	struct gdrdrv_wc_span *next, *span = gdrdrv_wc_span_find(phys, &next);

	if (!span)
		span = next;
	while (span && span->phys < end) {
		struct rb_node *after = rb_next(&span->node);

		if (!--span->users)
			gdrdrv_wc_span_free(span);
		span = after ? rb_entry(after, struct gdrdrv_wc_span, node) :
			       NULL;
	}
}

/*
 * Covers the run [@phys, @phys + @len) with spans, each counting it once.
 * 0; 1 if PAT refused WC somewhere in it (another type is recorded there:
 * the run holds nothing and maps as that type); or -ENOMEM.
 * gdrdrv_wc_lock held.
 */
static int gdrdrv_wc_get_range(u64 phys, u64 len)
{
	u64 at = phys, end = phys + len;
	int err;

	err = gdrdrv_wc_split_at(phys);
	if (!err)
		err = gdrdrv_wc_split_at(end);
	if (err)
		return err == -ENOMEM ? err : 1;
	while (at < end) {
		struct gdrdrv_wc_span *next;
		struct gdrdrv_wc_span *span = gdrdrv_wc_span_find(at, &next);

		if (!span) {
			u64 gap_end = next ? min(next->phys, end) : end;

			span = gdrdrv_wc_span_new(at, gap_end - at, 0, &err);
			if (!span) {
				gdrdrv_wc_put_range(phys, at);
				return err == -ENOMEM ? err : 1;
			}
			gdrdrv_wc_span_insert(span);
		}
		span->users++;
		at = gdrdrv_wc_span_end(span);
	}
	return 0;
}

/* Drops the WC memtype reservations of a mapping; mr->sem held for write. */
static void gdrdrv_mr_free_memtypes(struct gdrdrv_mr *mr)
{
	unsigned int i;

	mutex_lock(&gdrdrv_wc_lock);
	for (i = 0; i < mr->nr_wc_runs; i++) {
		gdrdrv_wc_put_range(mr->wc_runs[i].phys,
				    mr->wc_runs[i].phys + mr->wc_runs[i].len);
		cond_resched();
	}
	mutex_unlock(&gdrdrv_wc_lock);
	kvfree(mr->wc_runs);
	mr->wc_runs = NULL;
	mr->nr_wc_runs = 0;
}

/* Physical address of the host page at byte @off of the region. */
static u64 gdrdrv_mr_phys(struct nvidia_p2p_page_table *pt, u64 off)
{
	return pt->pages[off >> GDRDRV_GPU_PAGE_SHIFT]->physical_address +
	       (off & GDRDRV_GPU_PAGE_OFFSET);
}

/*
 * x86 PAT: a PFN inserted by a fault takes the cache type recorded for its
 * physical range (UC- for MMIO nobody reserved), not the one in the VMA.  So
 * a WC mapping holds WC spans (above) for each physically contiguous run of
 * GPU pages it covers, and lets them go when its last VMA closes or when
 * the pin ends, after the zap (see the top of this file).  A run whose
 * reservation is refused (another type is recorded there) is mapped as
 * that type, which is never less safe.  mr->sem held for write.
 * -ENOMEM when the list of runs or a span cannot be allocated: then
 * nothing is held, and the caller must not map, since a PFN without a
 * reservation would be UC- while GET_INFO said WC.
 */
static int gdrdrv_mr_reserve_memtypes(struct gdrdrv_mr *mr, u64 size)
{
	struct nvidia_p2p_page_table *pt = mr->page_table;
	u32 pages = DIV_ROUND_UP(size, GDRDRV_GPU_PAGE_SIZE);
	unsigned int runs = 1;
	u32 i, first;

	if (!IS_ENABLED(CONFIG_X86))
		return 0;
	for (i = 1; i < pages; i++)
		if (pt->pages[i]->physical_address !=
		    pt->pages[i - 1]->physical_address + GDRDRV_GPU_PAGE_SIZE)
			runs++;
	mr->wc_runs = kvmalloc_array(runs, sizeof(*mr->wc_runs),
				     GFP_KERNEL_ACCOUNT);
	if (!mr->wc_runs)
		return -ENOMEM;
	mutex_lock(&gdrdrv_wc_lock);
	for (first = 0, i = 1; i <= pages; i++) {
		u64 phys = pt->pages[first]->physical_address;
		u64 len;
		int ret;

		if (i < pages && pt->pages[i]->physical_address ==
		    phys + ((u64)(i - first) << GDRDRV_GPU_PAGE_SHIFT))
			continue;
		len = min_t(u64, (u64)(i - first) << GDRDRV_GPU_PAGE_SHIFT,
			    size - ((u64)first << GDRDRV_GPU_PAGE_SHIFT));
		ret = gdrdrv_wc_get_range(phys, len);
		if (!ret) {
			mr->wc_runs[mr->nr_wc_runs].phys = phys;
			mr->wc_runs[mr->nr_wc_runs].len = len;
			mr->nr_wc_runs++;
		} else if (ret > 0) {
			gdrdrv_dbg("handle 0x%lx: WC refused for 0x%llx+0x%llx (another cache type is recorded there)\n",
				   mr->handle, phys, len);
		} else {
			mutex_unlock(&gdrdrv_wc_lock);
			gdrdrv_mr_free_memtypes(mr);
			return ret;
		}
		first = i;
		cond_resched();
	}
	mutex_unlock(&gdrdrv_wc_lock);
	return 0;
}

/**
 * gdrdrv_vma_open() - A VMA copied from one of ours (mremap()).
 * @vma: the new VMA.
 *
 * Context: process context, mmap_lock held for write.
 */
static void gdrdrv_vma_open(struct vm_area_struct *vma)
{
	struct gdrdrv_mr *mr = vma->vm_private_data;

	/* A VMA copied by mremap(): one more VMA maps the region for now. */
	kref_get(&mr->ref);
	down_write(&mr->sem);
	mr->map_count++;
	up_write(&mr->sem);
}

/**
 * gdrdrv_vma_close() - A VMA of ours goes away.
 * @vma: the VMA; the core has already removed its page table entries.
 *
 * The last one gives back the WC reservations and the mapping type.
 *
 * Context: process context; takes mr->sem.
 */
static void gdrdrv_vma_close(struct vm_area_struct *vma)
{
	struct gdrdrv_mr *mr = vma->vm_private_data;

	down_write(&mr->sem);
	if (!--mr->map_count) {
		mr->map_type = GDRDRV_MR_NONE;
		/* The core has removed the VMA's page table entries already. */
		gdrdrv_mr_free_memtypes(mr);
	}
	up_write(&mr->sem);
	gdrdrv_mr_put(mr);
}

/* The protection of MMIO pages: never encrypted (AMD SME). */
static pgprot_t gdrdrv_pgprot_mmio(pgprot_t prot)
{
#if defined(GDRDRV_MAY_USE_GPL_ONLY) || !defined(GDRDRV_PGPROT_DECRYPTED_GPL_ONLY)
	return pgprot_decrypted(prot);
#else
	/*
	 * pgprot_decrypted() is GPL-only here (confidential computing).
	 * Clear the AMD SME bit ourselves; Intel TDX guests are not served by
	 * this flavour.
	 */
	return __pgprot(__sme_clr(pgprot_val(prot)));
#endif
}

/* How much one fault maps ahead: one fault per 2 MiB of first touches. */
#define GDRDRV_FAULT_AROUND (2UL << 20)

/**
 * gdrdrv_vma_fault() - Map the GPU pages around a first touch.
 * @vmf: the fault.
 *
 * Mappings are populated here, on first touch, never in ->mmap: a fault runs
 * only on a VMA that the core has already linked into the file's mapping
 * tree, and it inserts PTEs under mr->sem (read) after checking that the
 * region is still mappable.  Unpin and the free callback mark the region
 * dead and zap under mr->sem (write), so every PTE is either inserted before
 * the zap (and removed by it) or refused afterwards: none can outlive a pin.
 *
 * Context: process context, mmap_lock or the VMA lock held; takes mr->sem.
 * Return: VM_FAULT_NOPAGE once the faulting page is mapped, VM_FAULT_SIGBUS
 * for a region no longer mappable, or the insertion's error.
 */
static vm_fault_t gdrdrv_vma_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct gdrdrv_mr *mr = vma->vm_private_data;
	unsigned long addr, end;
	vm_fault_t ret = VM_FAULT_SIGBUS;
	pgprot_t prot;

	down_read(&mr->sem);
	if (!gdrdrv_mr_mappable(mr))
		goto out;
	prot = gdrdrv_pgprot_mmio(vma->vm_page_prot);
	/* From the GPU page of the fault, a window clipped to the VMA. */
	addr = vma->vm_start + round_down(vmf->address - vma->vm_start,
					  GDRDRV_GPU_PAGE_SIZE);
	end = addr + min(vma->vm_end - addr, GDRDRV_FAULT_AROUND);
	for (; addr < end; addr += PAGE_SIZE) {
		u64 off = ((vma->vm_pgoff - mr->handle) << PAGE_SHIFT) +
			  (addr - vma->vm_start);
		vm_fault_t r = vmf_insert_pfn_prot(vma, addr,
				gdrdrv_mr_phys(mr->page_table, off) >> PAGE_SHIFT,
				prot);

		if (addr == (vmf->address & PAGE_MASK))
			ret = r;
		if (r & VM_FAULT_ERROR) {
			/* Only the faulting page's own insertion must work. */
			if (addr > (vmf->address & PAGE_MASK))
				break;
			if (addr == (vmf->address & PAGE_MASK))
				goto out;
		}
	}
out:
	up_read(&mr->sem);
	return ret;
}

/*
 * No partial munmap/mprotect: a pin is mapped, revoked and reported
 * (GET_INFO's mapped) as one whole, and libraries unmap what they mapped.
 */
static int gdrdrv_vma_may_split(struct vm_area_struct *vma, unsigned long addr)
{
	return -EINVAL;
}

static const struct vm_operations_struct gdrdrv_vm_ops = {
	.open = gdrdrv_vma_open,
	.close = gdrdrv_vma_close,
	.fault = gdrdrv_vma_fault,
#ifdef GDRDRV_HAVE_VM_OPS_MAY_SPLIT
	.may_split = gdrdrv_vma_may_split,
#else
	.split = gdrdrv_vma_may_split,
#endif
};

/* Sets @set and clears @clear in a VMA's flags, from ->mmap. */
static void gdrdrv_vma_mod_flags(struct vm_area_struct *vma, vm_flags_t set,
				 vm_flags_t clear)
{
#if defined(GDRDRV_HAVE_VM_FLAGS_SET) && \
	(defined(GDRDRV_MAY_USE_GPL_ONLY) || !defined(GDRDRV_VM_FLAGS_SET_GPL_ONLY))
	/* vm_flags_clear() is vm_flags_set()'s twin: same lock, same export. */
	vm_flags_set(vma, set);
	vm_flags_clear(vma, clear);
#elif defined(GDRDRV_HAVE_VM_FLAGS_INIT) && \
	(defined(GDRDRV_MAY_USE_GPL_ONLY) || !defined(GDRDRV_VM_FLAGS_INIT_GPL_ONLY))
	/*
	 * vm_flags_set() is GPL-only here (it takes the VMA lock).  During
	 * ->mmap the VMA is not yet visible to anyone else, which is the case
	 * vm_flags_init() exists for.
	 */
	vm_flags_init(vma, (vma->vm_flags | set) & ~clear);
#elif !defined(GDRDRV_HAVE_VM_FLAGS_SET)
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
#else
#error "no way to set VMA flags without GPL-only symbols on this kernel;" \
	"build for the open-source NVIDIA driver (NVIDIA_IS_OPENSOURCE=y)"
#endif
}

static pgprot_t gdrdrv_pgprot_wc(pgprot_t prot)
{
#if defined(CONFIG_X86)
	/*
	 * What pgprot_writecombine() does, which is GPL-only on x86; the cache
	 * mode table also knows what WC becomes when PAT is off.
	 */
	return __pgprot((pgprot_val(prot) & ~_PAGE_CACHE_MASK) |
			cachemode2protval(_PAGE_CACHE_MODE_WC));
#else
	return pgprot_writecombine(prot);
#endif
}

/* The page protection of each mapping type, in one place. */
static int gdrdrv_pgprot(u32 type, pgprot_t *prot)
{
	switch (type) {
	case GDRDRV_MR_CACHING:
		return 0;
	case GDRDRV_MR_WC:
		*prot = gdrdrv_pgprot_wc(*prot);
		return 0;
	case GDRDRV_MR_DEVICE:
#if defined(CONFIG_ARM64)
		*prot = pgprot_device(*prot);
		return 0;
#else
		return -EINVAL;	/* gdrdrv_must_use_device is never set */
#endif
	default:
		return -EINVAL;
	}
}

/**
 * gdrdrv_mmap() - Set a VMA up to map a pinned region.
 * @filp: the caller's file.
 * @vma: the new VMA; its page offset is the region's handle.
 *
 * The pages come in on fault (see gdrdrv_vma_fault()).  Nothing here
 * touches a page table entry: the VMA is not yet in the file's mapping
 * tree, where a zap would look for it.  One VMA per region, MAP_SHARED, at
 * most the pinned length, never executable.
 *
 * Context: process context, mmap_lock held for write; takes mr->sem.
 * Return: 0; -EACCES for another process's file, -EPERM for PROT_EXEC,
 * -EINVAL for a private mapping, an unknown handle, a second mapping, a
 * freed or unaligned region or a size past the pin, -EOPNOTSUPP for a
 * mapping type the region cannot have, or -ENOMEM.
 */
static int gdrdrv_mmap(struct file *filp, struct vm_area_struct *vma)
{
	struct gdrdrv_file *file = filp->private_data;
	unsigned long size = vma->vm_end - vma->vm_start;
	struct gdrdrv_mr *mr;
	u32 type;
	int ret;

	if (!gdrdrv_owner_is_current(&file->owner))
		return -EACCES;
	/*
	 * A private mapping of PFNs is a COW mapping whose pgoff the core
	 * rewrites: it could not be revoked by offset.  MAP_SHARED only.
	 */
	if (!(vma->vm_flags & VM_SHARED)) {
		gdrdrv_dbg("mappings must be MAP_SHARED\n");
		return -EINVAL;
	}
	/* Nothing runs from GPU memory; mprotect() cannot add it later. */
	if (vma->vm_flags & VM_EXEC) {
		gdrdrv_dbg("GPU memory cannot be mapped executable (PROT_EXEC)\n");
		return -EPERM;
	}

	mr = gdrdrv_mr_get(file, vma->vm_pgoff);
	if (!mr) {
		gdrdrv_dbg("no pinned buffer at offset 0x%lx\n", vma->vm_pgoff);
		return -EINVAL;
	}

	down_write(&mr->sem);
	if (mr->map_count) {
		gdrdrv_dbg("handle 0x%lx is already mapped (one mapping per pin)\n",
			   mr->handle);
		ret = -EINVAL;
		goto out;
	}
	if (!gdrdrv_mr_mappable(mr)) {
		gdrdrv_dbg("handle 0x%lx: the GPU memory was freed or is being unpinned\n",
			   mr->handle);
		ret = -EINVAL;
		goto out;
	}
	if (mr->offset) {
		gdrdrv_dbg("handle 0x%lx: pinned address is not 64 KiB aligned (offset 0x%x); pin from a 64 KiB boundary to map\n",
			   mr->handle, mr->offset);
		ret = -EINVAL;
		goto out;
	}
	/*
	 * The pinned length, not the page table's size (which may be larger):
	 * unpin zaps that length, and the next handle's offsets follow it.
	 */
	if (size > mr->len) {
		gdrdrv_dbg("handle 0x%lx: mapping 0x%lx bytes exceeds the pinned 0x%llx\n",
			   mr->handle, size, mr->len);
		ret = -EINVAL;
		goto out;
	}

	type = mr->req_type;
	if (type == GDRDRV_MR_NONE) {
		if (mr->can_cache)
			type = GDRDRV_MR_CACHING;
		else if (gdrdrv_must_use_device)
			type = GDRDRV_MR_DEVICE;
		else
			type = GDRDRV_MR_WC;
	}
	ret = gdrdrv_mr_type_allowed(mr, type);
	if (!ret)
		ret = gdrdrv_pgprot(type, &vma->vm_page_prot);
	if (ret)
		goto out;

	if (type == GDRDRV_MR_WC) {
		ret = gdrdrv_mr_reserve_memtypes(mr, size);
		if (ret)
			goto out;
	}
	gdrdrv_vma_mod_flags(vma, GDRDRV_VMA_FLAGS, VM_MAYEXEC);
	/* The VMA now holds the reference; ->close drops it. */
	vma->vm_ops = &gdrdrv_vm_ops;
	vma->vm_private_data = mr;
	mr->map_count = 1;
	mr->map_type = type;
	up_write(&mr->sem);
	gdrdrv_info("handle 0x%lx mapped at 0x%lx (type %u)\n", mr->handle,
		    vma->vm_start, type);
	return 0;

out:
	up_write(&mr->sem);
	gdrdrv_mr_put(mr);
	return ret;
}

/*
 * The per-file address_space caches no pages, but the page cache still
 * reads its operations: readahead (POSIX_FADV_WILLNEED, MADV_WILLNEED) on a
 * node outside devtmpfs, whose filesystem has a real backing device, checks
 * them for a read method.  Empty ones say "nothing to read"; NULL oopsed.
 */
static const struct address_space_operations gdrdrv_aops = {};

/**
 * gdrdrv_open() - Open /dev/gdrdrv: a file with its own handles and mappings.
 * @inode: the device node's inode, whichever filesystem it is on.
 * @filp: the new file.
 *
 * The file belongs to the calling process's address space and program
 * image (struct gdrdrv_owner), and charges its pins to the opener's
 * credentials.  It has an address_space of its own, so that revoking one
 * of its mappings touches no other file's.
 *
 * Context: process context.
 * Return: 0 or -ENOMEM.
 */
static int gdrdrv_open(struct inode *inode, struct file *filp)
{
	struct gdrdrv_file *file;

	file = kzalloc(sizeof(*file), GFP_KERNEL_ACCOUNT);
	if (!file)
		return -ENOMEM;
	gdrdrv_owner_set(&file->owner);
	file->cred = filp->f_cred;
	atomic_set(&file->nr_pins, 0);
	atomic64_set(&file->pinned_bytes, 0);
	xa_init(&file->mrs);
	mutex_init(&file->lock);
	address_space_init_once(&file->mapping);
	file->mapping.a_ops = &gdrdrv_aops;
	file->mapping.host = inode;
	filp->f_mapping = &file->mapping;
	filp->private_data = file;
	return 0;
}

/**
 * gdrdrv_release() - The last reference to a file is gone: end its regions.
 * @inode: the device node's inode.
 * @filp: the file.
 *
 * No VMA can remain (each holds the file), so every region is ended
 * (gdrdrv_mr_destroy()), whichever process closes.
 *
 * Context: process context.
 * Return: 0.
 */
static int gdrdrv_release(struct inode *inode, struct file *filp)
{
	struct gdrdrv_file *file = filp->private_data;
	struct gdrdrv_mr *mr;
	unsigned long handle;

	xa_for_each(&file->mrs, handle, mr) {
		xa_erase(&file->mrs, handle);
		gdrdrv_mr_destroy(mr);
	}
	xa_destroy(&file->mrs);
	mutex_destroy(&file->lock);
	kfree(file);
	return 0;
}

static const struct file_operations gdrdrv_fops = {
	.owner = THIS_MODULE,
	.open = gdrdrv_open,
	.release = gdrdrv_release,
	.unlocked_ioctl = gdrdrv_ioctl,
#ifdef CONFIG_COMPAT
	.compat_ioctl = gdrdrv_compat_ioctl,
#endif
	.mmap = gdrdrv_mmap,
	.llseek = noop_llseek,
};

/*
 * The node's intended mode and group, as attributes of the device, so a udev
 * rule can apply the group (devtmpfs alone only honours the mode).
 */
/* sysfs_emit() is GPL-only: plain scnprintf() within the page. */
static ssize_t node_mode_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return scnprintf(buf, PAGE_SIZE, "%04o\n", node_mode & 0777);
}
static DEVICE_ATTR_RO(node_mode);

static ssize_t node_gid_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return scnprintf(buf, PAGE_SIZE, "%u\n", node_gid);
}
static DEVICE_ATTR_RO(node_gid);

static struct attribute *gdrdrv_dev_attrs[] = {
	&dev_attr_node_mode.attr,
	&dev_attr_node_gid.attr,
	NULL,
};
ATTRIBUTE_GROUPS(gdrdrv_dev);

static struct miscdevice gdrdrv_miscdev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = GDRDRV_DEVICE_NAME,
	.fops = &gdrdrv_fops,
	.groups = gdrdrv_dev_groups,
};

static struct proc_dir_entry *gdrdrv_proc_dir;

static int gdrdrv_params_show(struct seq_file *m, void *v)
{
	seq_puts(m, "Version: " GDRDRV_VERSION_STRING "\n");
	seq_puts(m, "Built for NVIDIA driver flavor: " GDRDRV_FLAVOR "\n");
	seq_printf(m, "Use persistent mapping: %s\n",
		   gdrdrv_persistent ? "yes" : "no");
	seq_printf(m, "dbg_enabled: %d\n", READ_ONCE(dbg_enabled));
	seq_printf(m, "info_enabled: %d\n", READ_ONCE(info_enabled));
	/* After GDRCopy 2.6's five lines, so that readers of those still work. */
	seq_printf(m, "VMA inherited on fork: %s\n",
		   gdrdrv_vma_inherited_on_fork() ? "yes" : "no");
	seq_printf(m, "P2P tokens allowed: %s\n",
		   allow_p2p_tokens ? "yes" : "no");
	seq_printf(m, "max_pins_per_file: %u\n", READ_ONCE(max_pins_per_file));
	seq_printf(m, "max_pins_per_user: %u\n", READ_ONCE(max_pins_per_user));
	seq_printf(m, "max_pinned_bytes_per_file: %llu\n",
		   READ_ONCE(max_pinned_bytes_per_file));
	seq_printf(m, "max_pinned_bytes_per_user: %llu\n",
		   READ_ONCE(max_pinned_bytes_per_user));
	/* gdrcopy_doctor compares it with the running NVIDIA driver's. */
	seq_printf(m, "Built for nv-p2p page table: %u.%u\n",
		   NVIDIA_P2P_PAGE_TABLE_VERSION >> 16,
		   NVIDIA_P2P_PAGE_TABLE_VERSION & 0xffff);
	return 0;
}

static int gdrdrv_refcount_show(struct seq_file *m, void *v)
{
	seq_printf(m, "%lld\n", (long long)atomic64_read(&gdrdrv_pin_count));
	return 0;
}

static int gdrdrv_proc_init(void)
{
	gdrdrv_proc_dir = proc_mkdir_mode("driver/" GDRDRV_DEVICE_NAME, 0555,
					  NULL);
	if (!gdrdrv_proc_dir)
		return -ENOMEM;
	if (!proc_create_single("params", 0444, gdrdrv_proc_dir,
				gdrdrv_params_show))
		goto fail;
	if (dbg_enabled &&
	    !proc_create_single("nv_get_pages_refcount", 0440, gdrdrv_proc_dir,
				gdrdrv_refcount_show))
		goto fail;
	return 0;
fail:
	proc_remove(gdrdrv_proc_dir);
	return -ENOMEM;
}

#ifdef CONFIG_ARM64
/* BlueField-3 DPUs need device mappings of GPU memory instead of WC. */
static const struct pci_device_id gdrdrv_bf3_ids[] = {
	{ PCI_DEVICE(0x15b3, 0xa2da) },
	{ PCI_DEVICE(0x15b3, 0xa2db) },
	{ }
};
#endif

static void gdrdrv_detect_platform(void)
{
#if defined(CONFIG_ARM64)
	gdrdrv_cpu_could_cache = true;
	gdrdrv_must_use_device = pci_dev_present(gdrdrv_bf3_ids);
#elif defined(CONFIG_PPC64)
	gdrdrv_cpu_could_cache = pvr_version_is(PVR_POWER9);
#endif
	gdrdrv_persistent = use_persistent_mapping &&
			    gdrdrv_persistent_supported();
}

/**
 * gdrdrv_init() - Load: detect the platform, register /dev/gdrdrv and /proc.
 *
 * Return: 0, or the error of misc_register() or of creating
 * /proc/driver/gdrdrv.
 */
static int __init gdrdrv_init(void)
{
	int ret;

	gdrdrv_detect_platform();

	gdrdrv_miscdev.mode = node_mode & 0777;
	ret = misc_register(&gdrdrv_miscdev);
	if (ret) {
		pr_err("cannot register /dev/%s: %d\n", GDRDRV_DEVICE_NAME, ret);
		return ret;
	}
	ret = gdrdrv_proc_init();
	if (ret) {
		pr_err("cannot create /proc/driver/%s: %d\n",
		       GDRDRV_DEVICE_NAME, ret);
		misc_deregister(&gdrdrv_miscdev);
		return ret;
	}

	pr_info("version %s, built for the %s NVIDIA driver (nv-p2p page table %u.%u)\n",
		GDRDRV_VERSION_STRING, GDRDRV_FLAVOR,
		NVIDIA_P2P_PAGE_TABLE_VERSION >> 16,
		NVIDIA_P2P_PAGE_TABLE_VERSION & 0xffff);
	pr_info("/dev/%s mode %04o, %s pins%s%s%s\n", GDRDRV_DEVICE_NAME,
		node_mode & 0777,
		gdrdrv_persistent ? "persistent" : "callback-based",
		gdrdrv_cpu_could_cache ? ", CPU-cached mappings possible" : "",
		gdrdrv_must_use_device ? ", device mappings (BlueField-3)" : "",
		dbg_enabled ? ", debug tracing on" : "");
	return 0;
}

/**
 * gdrdrv_exit() - Unload: every file is closed; report pins never released.
 *
 * A legacy pin whose release the NVIDIA driver refused holds a module
 * reference until its free callback, so the module cannot be unloaded
 * under it; and unloading waits for free callbacks still on their way out.
 * What is left is the callback's return to the NVIDIA driver after its
 * last store: a window the NVIDIA API leaves (gdrdrv/README.md, "What the
 * NVIDIA API leaves open").
 *
 * Context: process context (delete_module); may sleep.
 */
static void __exit gdrdrv_exit(void)
{
	s64 leaked;

	proc_remove(gdrdrv_proc_dir);
	misc_deregister(&gdrdrv_miscdev);
	/* A free callback may still be on its way out (see its counter). */
	while (atomic_read(&gdrdrv_callbacks_running))
		msleep(20);
	/*
	 * Every file is closed by now (each holds the module), and closing
	 * releases all its pins; what is left are pins the NVIDIA driver
	 * refused to release.  Report them; never crash the machine over it.
	 */
	/* Every region gave its WC spans back before its pin ended. */
	WARN_ON(!RB_EMPTY_ROOT(&gdrdrv_wc_spans));
	leaked = atomic64_read(&gdrdrv_pin_count);
	if (leaked)
		pr_warn("%lld GPU memory pin(s) were never released (the NVIDIA driver refused); that GPU memory stays pinned until the NVIDIA driver is reloaded\n",
			(long long)leaked);
}

module_init(gdrdrv_init);
module_exit(gdrdrv_exit);

MODULE_AUTHOR("GDRCopy-compatible gdrdrv authors");
MODULE_DESCRIPTION("CPU mappings of pinned GPU memory (GDRCopy gdrdrv "
		   GDRDRV_VERSION_STRING " ABI)");
MODULE_LICENSE("Dual MIT/GPL");
MODULE_VERSION(__stringify(GDRCOPY_VERSION_MAJOR) "."
	       __stringify(GDRCOPY_VERSION_MINOR) "."
	       __stringify(GDRCOPY_VERSION_PATCH));
MODULE_INFO(nvidia_flavor, GDRDRV_FLAVOR);
/* By the major version alone: some headers spell the version as an expression. */
#if (NVIDIA_P2P_PAGE_TABLE_VERSION >> 16) == 2
MODULE_INFO(nvidia_p2p_page_table, "2.x");
#else
MODULE_INFO(nvidia_p2p_page_table, "1.x");
#endif
