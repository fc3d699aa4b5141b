// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * /dev/softgpu: one GPU virtual address space per open file, and the ioctls
 * of softgpu_uapi.h that allocate, map, fill and read "GPU memory".
 */
#include <linux/fs.h>
#include <linux/log2.h>
#include <linux/miscdevice.h>
#include <linux/pci.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "softgpu.h"

/*
 * GPU virtual addresses come from one counter for all spaces, so an address
 * names at most one allocation device-wide, and they are never reused, so a
 * stale address fails instead of reaching newer memory.  The base keeps them
 * clear of typical user-space mappings; a 64 KiB hole after each reservation
 * keeps separate allocations from looking contiguous.
 */
#define SOFTGPU_VA_BASE 0x10000000000ULL
#define SOFTGPU_VA_GUARD SOFTGPU_CHUNK_SIZE

DEFINE_MUTEX(softgpu_lock);
LIST_HEAD(softgpu_spaces);

static u64 softgpu_next_va = SOFTGPU_VA_BASE;
static u32 softgpu_next_space_id;
static u64 softgpu_next_p2p_token;	/* under softgpu_lock */

static struct softgpu_space *to_softgpu_space(struct file *filp)
{
	return filp->private_data;
}

struct softgpu_mapping *softgpu_find_mapping(struct softgpu_space *space, u64 va)
{
	struct softgpu_mapping *map;

	list_for_each_entry(map, &space->mappings, node)
		if (va >= map->va && va - map->va < map->size)
			return map;
	return NULL;
}

static struct softgpu_reservation *
softgpu_find_reservation(struct softgpu_space *space, u64 va, u64 size)
{
	struct softgpu_reservation *res;

	list_for_each_entry(res, &space->reservations, node)
		if (va >= res->va && va - res->va < res->size &&
		    size <= res->size - (va - res->va))
			return res;
	return NULL;
}

static struct softgpu_mem *softgpu_find_handle(struct softgpu_space *space, u64 handle)
{
	struct softgpu_mem *mem;

	list_for_each_entry(mem, &space->handles, handle_node)
		if (mem->handle == handle)
			return mem;
	return NULL;
}

/* Rounds @size up to whole GPU pages; false if zero or it would overflow. */
static bool softgpu_round_size(u64 *size)
{
	if (!*size || *size > U64_MAX - SOFTGPU_CHUNK_MASK)
		return false;
	*size = (*size + SOFTGPU_CHUNK_MASK) & ~SOFTGPU_CHUNK_MASK;
	return true;
}

static bool softgpu_range_mapped(struct softgpu_space *space, u64 va, u64 size)
{
	while (size) {
		struct softgpu_mapping *map = softgpu_find_mapping(space, va);
		u64 n;

		if (!map)
			return false;
		n = min(size, map->va + map->size - va);
		va += n;
		size -= n;
	}
	return true;
}

static int softgpu_reserve_locked(struct softgpu_space *space, u64 size, u64 align,
				  struct softgpu_mem *alloc_mem, u64 *va)
{
	struct softgpu_reservation *res;
	u64 start;

	start = (softgpu_next_va + align - 1) & ~(align - 1);
	if (start < softgpu_next_va || start + size < start ||
	    start + size + SOFTGPU_VA_GUARD < start)
		return -ENOMEM;
	res = kzalloc(sizeof(*res), GFP_KERNEL);
	if (!res)
		return -ENOMEM;
	res->va = start;
	res->size = size;
	res->alloc_mem = alloc_mem;
	list_add_tail(&res->node, &space->reservations);
	softgpu_next_va = start + size + SOFTGPU_VA_GUARD;
	*va = start;
	return 0;
}

static int softgpu_map_locked(struct softgpu_space *space, u64 va, u64 size,
			      struct softgpu_mem *mem, u64 offset)
{
	struct softgpu_mapping *map;

	map = kzalloc(sizeof(*map), GFP_KERNEL);
	if (!map)
		return -ENOMEM;
	map->va = va;
	map->size = size;
	map->offset = offset;
	map->mem = mem;
	softgpu_mem_get(mem);
	list_add_tail(&map->node, &space->mappings);
	return 0;
}

/*
 * Unmapping is two-phase: under softgpu_lock the mappings in range leave the
 * space and the legacy pins on them are collected; then, unlocked, the pins'
 * free callbacks run (the P2P client zaps its CPU mappings there) and only
 * then is the memory released.
 */
static void softgpu_unmap_locked(struct softgpu_space *space, u64 va, u64 size,
				 struct list_head *maps, struct list_head *pins)
{
	struct softgpu_mapping *map, *tmp;

	list_for_each_entry_safe(map, tmp, &space->mappings, node)
		if (map->va >= va && map->va + map->size <= va + size)
			list_move_tail(&map->node, maps);
	softgpu_p2p_revoke_range(space, va, size, pins);
}

static void softgpu_unmap_finish(struct list_head *maps, struct list_head *pins)
{
	struct softgpu_mapping *map, *tmp;

	softgpu_p2p_run_callbacks(pins);
	list_for_each_entry_safe(map, tmp, maps, node) {
		list_del(&map->node);
		softgpu_mem_put(map->mem);
		kfree(map);
	}
}

/* Copies between @buf and the space's memory at @va; the range is mapped. */
static void softgpu_access_locked(struct softgpu_space *space, u64 va,
				  void *buf, size_t len, bool write)
{
	while (len) {
		struct softgpu_mapping *map = softgpu_find_mapping(space, va);
		u64 off = va - map->va + map->offset;
		struct softgpu_chunk *chunk = &map->mem->chunks[off / SOFTGPU_CHUNK_SIZE];
		size_t within = off & SOFTGPU_CHUNK_MASK;
		size_t n = min_t(size_t, len, SOFTGPU_CHUNK_SIZE - within);

		if (write)
			memcpy(chunk->kaddr + within, buf, n);
		else
			memcpy(buf, chunk->kaddr + within, n);
		va += n;
		buf += n;
		len -= n;
	}
}

static int softgpu_ioc_get_info(struct softgpu_space *space, void __user *arg)
{
	struct softgpu_backing *b = &softgpu_backing;
	struct softgpu_info info = { };

	info.abi_version = SOFTGPU_ABI_VERSION;
	if (b->bar)
		info.flags |= SOFTGPU_INFO_BAR_BACKED;
	if (softgpu_page_tables_cacheable() &&
	    (softgpu_pt_version & NVIDIA_P2P_MAJOR_VERSION_MASK) >=
	    (SOFTGPU_P2P_PAGE_TABLE_VERSION_2_0 & NVIDIA_P2P_MAJOR_VERSION_MASK))
		info.flags |= SOFTGPU_INFO_CPU_CACHEABLE;
	if (softgpu_persistent_api)
		info.flags |= SOFTGPU_INFO_PERSISTENT_API;
	info.memory_size = softgpu_memory_size();
	info.memory_used = atomic64_read(&b->used);
	info.p2p_token = space->p2p_token;
	info.va_space = space->id;
	if (b->pdev) {
		info.pci_domain = pci_domain_nr(b->pdev->bus);
		info.pci_bus = b->pdev->bus->number;
		info.pci_device = PCI_SLOT(b->pdev->devfn);
		info.pci_function = PCI_FUNC(b->pdev->devfn);
	}
	memcpy(info.uuid, softgpu_uuid, sizeof(info.uuid));
	strscpy(info.name, b->bar ? "softgpu (ivshmem BAR)" : "softgpu (RAM, coherent)",
		sizeof(info.name));
	return copy_to_user(arg, &info, sizeof(info)) ? -EFAULT : 0;
}

static int softgpu_ioc_alloc(struct softgpu_space *space, void __user *arg)
{
	struct softgpu_alloc args;
	struct softgpu_mem *mem;
	int ret;

	if (copy_from_user(&args, arg, sizeof(args)))
		return -EFAULT;
	if (!softgpu_round_size(&args.size))
		return -EINVAL;
	mem = softgpu_mem_create(args.size);
	if (IS_ERR(mem))
		return PTR_ERR(mem);

	mutex_lock(&softgpu_lock);
	ret = softgpu_reserve_locked(space, args.size, SOFTGPU_CHUNK_SIZE, mem, &args.va);
	if (!ret) {
		ret = softgpu_map_locked(space, args.va, args.size, mem, 0);
		if (ret) {
			struct softgpu_reservation *res =
				softgpu_find_reservation(space, args.va, args.size);

			list_del(&res->node);
			kfree(res);
		}
	}
	mutex_unlock(&softgpu_lock);
	if (ret) {
		softgpu_mem_put(mem);
		return ret;
	}
	/* The reservation owns the creation reference until FREE. */
	if (copy_to_user(arg, &args, sizeof(args)))
		return -EFAULT;	/* the allocation stays; the file's release frees it */
	return 0;
}

static int softgpu_ioc_free(struct softgpu_space *space, void __user *arg)
{
	struct softgpu_reservation *res;
	struct softgpu_free args;
	LIST_HEAD(maps);
	LIST_HEAD(pins);

	if (copy_from_user(&args, arg, sizeof(args)))
		return -EFAULT;
	mutex_lock(&softgpu_lock);
	res = softgpu_find_reservation(space, args.va, 1);
	if (!res || res->va != args.va || !res->alloc_mem) {
		mutex_unlock(&softgpu_lock);
		return -EINVAL;
	}
	softgpu_unmap_locked(space, res->va, res->size, &maps, &pins);
	list_del(&res->node);
	mutex_unlock(&softgpu_lock);

	softgpu_unmap_finish(&maps, &pins);
	softgpu_mem_put(res->alloc_mem);
	kfree(res);
	return 0;
}

static int softgpu_ioc_copy(struct softgpu_space *space, void __user *arg)
{
	struct softgpu_copy args;
	void __user *host;
	void *bounce;
	u64 done = 0;
	int ret = 0;

	if (copy_from_user(&args, arg, sizeof(args)))
		return -EFAULT;
	if (args.pad || (args.direction != SOFTGPU_COPY_TO_GPU &&
			 args.direction != SOFTGPU_COPY_FROM_GPU))
		return -EINVAL;
	if (args.va + args.size < args.va || args.host + args.size < args.host)
		return -EINVAL;
	if (!args.size)
		return 0;

	mutex_lock(&softgpu_lock);
	if (!softgpu_range_mapped(space, args.va, args.size))
		ret = -EINVAL;
	mutex_unlock(&softgpu_lock);
	if (ret)
		return ret;

	bounce = kvmalloc(SOFTGPU_CHUNK_SIZE, GFP_KERNEL);
	if (!bounce)
		return -ENOMEM;
	host = u64_to_user_ptr(args.host);
	/* User memory is touched only with softgpu_lock dropped. */
	while (done < args.size) {
		size_t n = min_t(u64, args.size - done, SOFTGPU_CHUNK_SIZE);
		bool write = args.direction == SOFTGPU_COPY_TO_GPU;

		if (write && copy_from_user(bounce, host + done, n)) {
			ret = -EFAULT;
			break;
		}
		mutex_lock(&softgpu_lock);
		if (softgpu_range_mapped(space, args.va + done, n))
			softgpu_access_locked(space, args.va + done, bounce, n, write);
		else
			ret = -EINVAL;	/* freed by another thread meanwhile */
		mutex_unlock(&softgpu_lock);
		if (ret)
			break;
		if (!write && copy_to_user(host + done, bounce, n)) {
			ret = -EFAULT;
			break;
		}
		done += n;
	}
	kvfree(bounce);
	return ret;
}

static int softgpu_ioc_copy_d2d(struct softgpu_space *space, void __user *arg)
{
	struct softgpu_copy_d2d args;
	bool backward;
	void *bounce;
	u64 done = 0;
	int ret = 0;

	if (copy_from_user(&args, arg, sizeof(args)))
		return -EFAULT;
	if (args.dst + args.size < args.dst || args.src + args.size < args.src)
		return -EINVAL;
	if (!args.size)
		return 0;
	bounce = kvmalloc(SOFTGPU_CHUNK_SIZE, GFP_KERNEL);
	if (!bounce)
		return -ENOMEM;
	/* memmove: walk backwards when the destination overlaps the source's tail. */
	backward = args.dst > args.src && args.dst < args.src + args.size;

	mutex_lock(&softgpu_lock);
	if (!softgpu_range_mapped(space, args.dst, args.size) ||
	    !softgpu_range_mapped(space, args.src, args.size)) {
		ret = -EINVAL;
		goto out;
	}
	while (done < args.size) {
		u64 n = min_t(u64, args.size - done, SOFTGPU_CHUNK_SIZE);
		u64 at = backward ? args.size - done - n : done;

		softgpu_access_locked(space, args.src + at, bounce, n, false);
		softgpu_access_locked(space, args.dst + at, bounce, n, true);
		done += n;
	}
out:
	mutex_unlock(&softgpu_lock);
	kvfree(bounce);
	return ret;
}

static int softgpu_ioc_memset(struct softgpu_space *space, void __user *arg)
{
	struct softgpu_memset args;
	u64 size, done = 0;
	void *pattern;
	unsigned int i;
	int ret = 0;

	if (copy_from_user(&args, arg, sizeof(args)))
		return -EFAULT;
	if (args.elem_size != 1 && args.elem_size != 2 && args.elem_size != 4)
		return -EINVAL;
	if (args.va % args.elem_size || args.count > U64_MAX / args.elem_size)
		return -EINVAL;
	size = args.count * args.elem_size;
	if (args.va + size < args.va)
		return -EINVAL;
	if (!size)
		return 0;

	pattern = kvmalloc(SOFTGPU_CHUNK_SIZE, GFP_KERNEL);
	if (!pattern)
		return -ENOMEM;
	for (i = 0; i < SOFTGPU_CHUNK_SIZE; i += args.elem_size) {
		if (args.elem_size == 1)
			*(u8 *)(pattern + i) = args.value;
		else if (args.elem_size == 2)
			*(u16 *)(pattern + i) = args.value;
		else
			*(u32 *)(pattern + i) = args.value;
	}
	mutex_lock(&softgpu_lock);
	if (!softgpu_range_mapped(space, args.va, size)) {
		ret = -EINVAL;
		goto out;
	}
	/* Pieces start at multiples of 64 KiB from va: the pattern stays in phase. */
	while (done < size) {
		u64 n = min_t(u64, size - done, SOFTGPU_CHUNK_SIZE);

		softgpu_access_locked(space, args.va + done, pattern, n, true);
		done += n;
	}
out:
	mutex_unlock(&softgpu_lock);
	kvfree(pattern);
	return ret;
}

static int softgpu_ioc_query(struct softgpu_space *space, void __user *arg)
{
	struct softgpu_reservation *res;
	struct softgpu_mapping *map;
	struct softgpu_query args;

	if (copy_from_user(&args, arg, sizeof(args)))
		return -EFAULT;
	mutex_lock(&softgpu_lock);
	map = softgpu_find_mapping(space, args.va);
	if (!map) {
		mutex_unlock(&softgpu_lock);
		return -ENOENT;
	}
	res = softgpu_find_reservation(space, map->va, map->size);
	args.base = map->va;
	args.size = map->size;
	args.alloc_base = res ? res->va : map->va;
	mutex_unlock(&softgpu_lock);
	return copy_to_user(arg, &args, sizeof(args)) ? -EFAULT : 0;
}

static int softgpu_ioc_mem_create(struct softgpu_space *space, void __user *arg)
{
	struct softgpu_mem_create args;
	struct softgpu_mem *mem;

	if (copy_from_user(&args, arg, sizeof(args)))
		return -EFAULT;
	if (!softgpu_round_size(&args.size))
		return -EINVAL;
	mem = softgpu_mem_create(args.size);
	if (IS_ERR(mem))
		return PTR_ERR(mem);
	mutex_lock(&softgpu_lock);
	mem->handle = ++space->next_handle;
	list_add_tail(&mem->handle_node, &space->handles);
	args.handle = mem->handle;
	mutex_unlock(&softgpu_lock);
	return copy_to_user(arg, &args, sizeof(args)) ? -EFAULT : 0;
}

static int softgpu_ioc_mem_release(struct softgpu_space *space, void __user *arg)
{
	struct softgpu_mem_release args;
	struct softgpu_mem *mem;

	if (copy_from_user(&args, arg, sizeof(args)))
		return -EFAULT;
	mutex_lock(&softgpu_lock);
	mem = softgpu_find_handle(space, args.handle);
	if (mem)
		list_del_init(&mem->handle_node);
	mutex_unlock(&softgpu_lock);
	if (!mem)
		return -EINVAL;
	softgpu_mem_put(mem);	/* mappings and pins keep it alive */
	return 0;
}

static int softgpu_ioc_va_reserve(struct softgpu_space *space, void __user *arg)
{
	struct softgpu_va_reserve args;
	int ret;

	if (copy_from_user(&args, arg, sizeof(args)))
		return -EFAULT;
	if (!softgpu_round_size(&args.size))
		return -EINVAL;
	if (!args.align || args.align < SOFTGPU_CHUNK_SIZE)
		args.align = SOFTGPU_CHUNK_SIZE;
	if (!is_power_of_2(args.align))
		return -EINVAL;
	mutex_lock(&softgpu_lock);
	ret = softgpu_reserve_locked(space, args.size, args.align, NULL, &args.va);
	mutex_unlock(&softgpu_lock);
	if (ret)
		return ret;
	return copy_to_user(arg, &args, sizeof(args)) ? -EFAULT : 0;
}

static int softgpu_ioc_va_free(struct softgpu_space *space, void __user *arg)
{
	struct softgpu_reservation *res;
	struct softgpu_mapping *map;
	struct softgpu_va_free args;
	int ret = 0;

	if (copy_from_user(&args, arg, sizeof(args)))
		return -EFAULT;
	if (!softgpu_round_size(&args.size))
		return -EINVAL;
	mutex_lock(&softgpu_lock);
	res = softgpu_find_reservation(space, args.va, args.size);
	if (!res || res->va != args.va || res->size != args.size || res->alloc_mem) {
		ret = -EINVAL;
		goto out;
	}
	list_for_each_entry(map, &space->mappings, node) {
		if (map->va >= res->va && map->va - res->va < res->size) {
			ret = -EBUSY;	/* unmap first, as cuMemAddressFree wants */
			goto out;
		}
	}
	list_del(&res->node);
	kfree(res);
out:
	mutex_unlock(&softgpu_lock);
	return ret;
}

static int softgpu_ioc_mem_map(struct softgpu_space *space, void __user *arg)
{
	struct softgpu_reservation *res;
	struct softgpu_mapping *map;
	struct softgpu_mem_map args;
	struct softgpu_mem *mem;
	int ret;

	if (copy_from_user(&args, arg, sizeof(args)))
		return -EFAULT;
	if (!args.size || (args.va | args.size | args.offset) & SOFTGPU_CHUNK_MASK ||
	    args.va + args.size < args.va || args.offset + args.size < args.offset)
		return -EINVAL;
	mutex_lock(&softgpu_lock);
	ret = -EINVAL;
	mem = softgpu_find_handle(space, args.handle);
	if (!mem || args.offset + args.size > mem->size)
		goto out;
	res = softgpu_find_reservation(space, args.va, args.size);
	if (!res || res->alloc_mem)
		goto out;
	ret = -EBUSY;
	list_for_each_entry(map, &space->mappings, node)
		if (map->va < args.va + args.size && args.va < map->va + map->size)
			goto out;
	ret = softgpu_map_locked(space, args.va, args.size, mem, args.offset);
out:
	mutex_unlock(&softgpu_lock);
	return ret;
}

static int softgpu_ioc_mem_unmap(struct softgpu_space *space, void __user *arg)
{
	struct softgpu_reservation *res;
	struct softgpu_mem_unmap args;
	struct softgpu_mapping *map;
	bool found = false;
	LIST_HEAD(maps);
	LIST_HEAD(pins);

	if (copy_from_user(&args, arg, sizeof(args)))
		return -EFAULT;
	if (!args.size || (args.va | args.size) & SOFTGPU_CHUNK_MASK ||
	    args.va + args.size < args.va)
		return -EINVAL;
	mutex_lock(&softgpu_lock);
	res = softgpu_find_reservation(space, args.va, args.size);
	if (!res || res->alloc_mem)
		goto out_invalid;
	/* Whole mappings only: cuMemUnmap cannot split one. */
	list_for_each_entry(map, &space->mappings, node) {
		if (map->va >= args.va + args.size || args.va >= map->va + map->size)
			continue;
		if (map->va < args.va || map->va + map->size > args.va + args.size)
			goto out_invalid;
		found = true;
	}
	if (!found)
		goto out_invalid;
	softgpu_unmap_locked(space, args.va, args.size, &maps, &pins);
	mutex_unlock(&softgpu_lock);
	softgpu_unmap_finish(&maps, &pins);
	return 0;

out_invalid:
	mutex_unlock(&softgpu_lock);
	return -EINVAL;
}

static int softgpu_ioc_export_dmabuf(struct softgpu_space *space, void __user *arg)
{
	struct softgpu_export_dmabuf args;
	int ret;

	if (copy_from_user(&args, arg, sizeof(args)))
		return -EFAULT;
	ret = softgpu_export_dmabuf(space, &args);
	if (ret)
		return ret;
	/* Past this point the fd is installed; user space owns it. */
	return copy_to_user(arg, &args, sizeof(args)) ? -EFAULT : 0;
}

static int softgpu_ioc_get_stats(void __user *arg)
{
	struct softgpu_stats stats;

	mutex_lock(&softgpu_lock);
	softgpu_p2p_get_stats(&stats);
	mutex_unlock(&softgpu_lock);
	return copy_to_user(arg, &stats, sizeof(stats)) ? -EFAULT : 0;
}

static long softgpu_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct softgpu_space *space = to_softgpu_space(filp);
	void __user *uarg = (void __user *)arg;

	/* A fork child or an SCM_RIGHTS receiver must open its own file. */
	if (space->owner != task_tgid(current))
		return -EACCES;

	switch (cmd) {
	case SOFTGPU_IOC_GET_INFO:
		return softgpu_ioc_get_info(space, uarg);
	case SOFTGPU_IOC_ALLOC:
		return softgpu_ioc_alloc(space, uarg);
	case SOFTGPU_IOC_FREE:
		return softgpu_ioc_free(space, uarg);
	case SOFTGPU_IOC_COPY:
		return softgpu_ioc_copy(space, uarg);
	case SOFTGPU_IOC_COPY_D2D:
		return softgpu_ioc_copy_d2d(space, uarg);
	case SOFTGPU_IOC_MEMSET:
		return softgpu_ioc_memset(space, uarg);
	case SOFTGPU_IOC_QUERY:
		return softgpu_ioc_query(space, uarg);
	case SOFTGPU_IOC_MEM_CREATE:
		return softgpu_ioc_mem_create(space, uarg);
	case SOFTGPU_IOC_MEM_RELEASE:
		return softgpu_ioc_mem_release(space, uarg);
	case SOFTGPU_IOC_VA_RESERVE:
		return softgpu_ioc_va_reserve(space, uarg);
	case SOFTGPU_IOC_VA_FREE:
		return softgpu_ioc_va_free(space, uarg);
	case SOFTGPU_IOC_MEM_MAP:
		return softgpu_ioc_mem_map(space, uarg);
	case SOFTGPU_IOC_MEM_UNMAP:
		return softgpu_ioc_mem_unmap(space, uarg);
	case SOFTGPU_IOC_EXPORT_DMABUF:
		return softgpu_ioc_export_dmabuf(space, uarg);
	case SOFTGPU_IOC_GET_STATS:
		return softgpu_ioc_get_stats(uarg);
	default:
		return -ENOTTY;
	}
}

static int softgpu_open(struct inode *inode, struct file *filp)
{
	struct softgpu_space *space;

	space = kzalloc(sizeof(*space), GFP_KERNEL);
	if (!space)
		return -ENOMEM;
	INIT_LIST_HEAD(&space->reservations);
	INIT_LIST_HEAD(&space->mappings);
	INIT_LIST_HEAD(&space->handles);
	INIT_LIST_HEAD(&space->legacy_pins);
	space->owner = get_pid(task_tgid(current));

	mutex_lock(&softgpu_lock);
	/*
	 * As the real driver: tokens count up from 1 across the machine, so
	 * another process's token is easy to guess.
	 */
	if (!++softgpu_next_p2p_token)
		++softgpu_next_p2p_token;
	space->p2p_token = softgpu_next_p2p_token;
	if (!++softgpu_next_space_id)
		++softgpu_next_space_id;
	space->id = softgpu_next_space_id;
	list_add_tail(&space->node, &softgpu_spaces);
	mutex_unlock(&softgpu_lock);
	filp->private_data = space;
	return 0;
}

/* Last close, in whichever process that happens: free everything. */
static int softgpu_release(struct inode *inode, struct file *filp)
{
	struct softgpu_space *space = to_softgpu_space(filp);
	struct softgpu_reservation *res, *rtmp;
	struct softgpu_mem *mem, *mtmp;
	LIST_HEAD(maps);
	LIST_HEAD(pins);

	mutex_lock(&softgpu_lock);
	list_del(&space->node);
	softgpu_unmap_locked(space, 0, U64_MAX, &maps, &pins);
	mutex_unlock(&softgpu_lock);
	softgpu_unmap_finish(&maps, &pins);

	list_for_each_entry_safe(res, rtmp, &space->reservations, node) {
		if (res->alloc_mem)
			softgpu_mem_put(res->alloc_mem);
		kfree(res);
	}
	list_for_each_entry_safe(mem, mtmp, &space->handles, handle_node)
		softgpu_mem_put(mem);
	put_pid(space->owner);
	kfree(space);
	return 0;
}

static const struct file_operations softgpu_fops = {
	.owner = THIS_MODULE,
	.open = softgpu_open,
	.release = softgpu_release,
	.unlocked_ioctl = softgpu_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

static struct miscdevice softgpu_miscdev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "softgpu",
	.fops = &softgpu_fops,
	.mode = 0666,
};

int softgpu_dev_init(void)
{
	return misc_register(&softgpu_miscdev);
}

void softgpu_dev_exit(void)
{
	misc_deregister(&softgpu_miscdev);
}
