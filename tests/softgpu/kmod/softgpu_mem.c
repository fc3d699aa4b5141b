// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * softgpu's "GPU memory": 64 KiB chunks of the BAR2 of a qemu ivshmem-plain
 * device (what a GPU's BAR1 looks like to gdrdrv: PCI memory, mapped
 * write-combined, not RAM), or, when there is no such device, 64 KiB
 * physically contiguous runs of ordinary RAM (what a coherent platform
 * looks like: page tables flagged CPU-cacheable).
 */
#include <linux/io.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include "softgpu.h"

#define SOFTGPU_IVSHMEM_VENDOR 0x1af4
#define SOFTGPU_IVSHMEM_DEVICE 0x1110
#define SOFTGPU_IVSHMEM_BAR 2

/* Read-only: the backing is chosen once, at load. */
static bool force_ram;
module_param(force_ram, bool, 0444);
MODULE_PARM_DESC(force_ram,
		 "Back GPU memory with RAM even when an ivshmem-plain device exists (default: no)");

static unsigned long ram_size = 256UL << 20;
module_param(ram_size, ulong, 0644);
MODULE_PARM_DESC(ram_size,
		 "Bytes of GPU memory in RAM mode; lowering it at run time makes later allocations fail like a full GPU (default: 256 MiB)");

struct softgpu_backing softgpu_backing;

static unsigned int softgpu_ram_order(void)
{
	return get_order(SOFTGPU_CHUNK_SIZE);
}

/* Bytes of GPU memory now: the BAR's size, or the ram_size knob. */
u64 softgpu_memory_size(void)
{
	if (softgpu_backing.bar)
		return softgpu_backing.size;
	return READ_ONCE(ram_size) & ~SOFTGPU_CHUNK_MASK;
}

bool softgpu_page_tables_cacheable(void)
{
	if (softgpu_cpu_cacheable >= 0)
		return softgpu_cpu_cacheable;
	return !softgpu_backing.bar;
}

static int softgpu_chunk_alloc(struct softgpu_chunk *chunk)
{
	struct softgpu_backing *b = &softgpu_backing;
	unsigned long idx;

	if (b->bar) {
		spin_lock(&b->lock);
		idx = find_first_zero_bit(b->bar_bitmap, b->bar_chunks);
		if (idx < b->bar_chunks)
			__set_bit(idx, b->bar_bitmap);
		spin_unlock(&b->lock);
		if (idx >= b->bar_chunks)
			return -ENOMEM;
		chunk->phys = b->bar_start + idx * SOFTGPU_CHUNK_SIZE;
		chunk->kaddr = b->bar_kaddr + idx * SOFTGPU_CHUNK_SIZE;
		chunk->page = NULL;
		/* Like cudaMalloc, contents are unspecified; zero them anyway
		 * so one test never reads another's data by accident. */
		memset(chunk->kaddr, 0, SOFTGPU_CHUNK_SIZE);
	} else {
		if (atomic64_add_return(SOFTGPU_CHUNK_SIZE, &b->used) > softgpu_memory_size()) {
			atomic64_sub(SOFTGPU_CHUNK_SIZE, &b->used);
			return -ENOMEM;
		}
		chunk->page = alloc_pages(GFP_KERNEL | __GFP_ZERO | __GFP_NOWARN,
					  softgpu_ram_order());
		if (!chunk->page) {
			atomic64_sub(SOFTGPU_CHUNK_SIZE, &b->used);
			return -ENOMEM;
		}
		chunk->phys = page_to_phys(chunk->page);
		chunk->kaddr = page_address(chunk->page);
		return 0;
	}
	atomic64_add(SOFTGPU_CHUNK_SIZE, &b->used);
	return 0;
}

static void softgpu_chunk_free(struct softgpu_chunk *chunk)
{
	struct softgpu_backing *b = &softgpu_backing;

	if (b->bar) {
		unsigned long idx = (chunk->phys - b->bar_start) / SOFTGPU_CHUNK_SIZE;

		spin_lock(&b->lock);
		__clear_bit(idx, b->bar_bitmap);
		spin_unlock(&b->lock);
	} else {
		__free_pages(chunk->page, softgpu_ram_order());
	}
	atomic64_sub(SOFTGPU_CHUNK_SIZE, &b->used);
}

struct softgpu_mem *softgpu_mem_create(u64 size)
{
	struct softgpu_mem *mem;
	unsigned int i, nr;

	if (!size || size & SOFTGPU_CHUNK_MASK)
		return ERR_PTR(-EINVAL);
	if (size > softgpu_memory_size())
		return ERR_PTR(-ENOMEM);
	nr = size / SOFTGPU_CHUNK_SIZE;
	mem = kvzalloc(struct_size(mem, chunks, nr), GFP_KERNEL);
	if (!mem)
		return ERR_PTR(-ENOMEM);
	kref_init(&mem->ref);
	INIT_LIST_HEAD(&mem->handle_node);
	mem->size = size;
	for (i = 0; i < nr; i++) {
		if (softgpu_chunk_alloc(&mem->chunks[i]))
			goto out_free;
		mem->nr_chunks++;
	}
	return mem;

out_free:
	while (i--)
		softgpu_chunk_free(&mem->chunks[i]);
	kvfree(mem);
	return ERR_PTR(-ENOMEM);
}

static void softgpu_mem_release(struct kref *ref)
{
	struct softgpu_mem *mem = container_of(ref, struct softgpu_mem, ref);
	unsigned int i;

	for (i = 0; i < mem->nr_chunks; i++)
		softgpu_chunk_free(&mem->chunks[i]);
	kvfree(mem);
}

void softgpu_mem_put(struct softgpu_mem *mem)
{
	kref_put(&mem->ref, softgpu_mem_release);
}

static int softgpu_pci_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct softgpu_backing *b = &softgpu_backing;
	resource_size_t start, len;
	int ret;

	if (b->pdev)
		return -EBUSY;	/* one GPU is all the tests need */

	ret = pci_enable_device_mem(pdev);
	if (ret)
		return ret;
	ret = pci_request_region(pdev, SOFTGPU_IVSHMEM_BAR, "softgpu");
	if (ret)
		goto out_disable;

	start = pci_resource_start(pdev, SOFTGPU_IVSHMEM_BAR);
	len = pci_resource_len(pdev, SOFTGPU_IVSHMEM_BAR);
	if (len < SOFTGPU_CHUNK_SIZE || start & SOFTGPU_CHUNK_MASK) {
		dev_err(&pdev->dev, "BAR%d (%pa, %llu bytes) is not usable as GPU memory\n",
			SOFTGPU_IVSHMEM_BAR, &start, (u64)len);
		ret = -ENODEV;
		goto out_release;
	}
	len &= ~(resource_size_t)SOFTGPU_CHUNK_MASK;

	/* WC like BAR1, and so that PAT sees WC when gdrdrv maps pieces of it. */
	b->bar_kaddr = memremap(start, len, MEMREMAP_WC);
	if (!b->bar_kaddr) {
		ret = -ENOMEM;
		goto out_release;
	}
	b->bar_chunks = len / SOFTGPU_CHUNK_SIZE;
	b->bar_bitmap = bitmap_zalloc(b->bar_chunks, GFP_KERNEL);
	if (!b->bar_bitmap) {
		ret = -ENOMEM;
		goto out_unmap;
	}
	b->bar_start = start;
	b->size = len;
	b->pdev = pdev;
	b->bar = true;
	dev_info(&pdev->dev, "softgpu: %llu MiB of GPU memory in BAR%d at %pa\n",
		 (u64)len >> 20, SOFTGPU_IVSHMEM_BAR, &start);
	return 0;

out_unmap:
	memunmap(b->bar_kaddr);
	b->bar_kaddr = NULL;
out_release:
	pci_release_region(pdev, SOFTGPU_IVSHMEM_BAR);
out_disable:
	pci_disable_device(pdev);
	return ret;
}

static void softgpu_pci_remove(struct pci_dev *pdev)
{
	struct softgpu_backing *b = &softgpu_backing;

	if (b->pdev != pdev)
		return;
	/* Module exit only: every file and pin is gone by then. */
	bitmap_free(b->bar_bitmap);
	memunmap(b->bar_kaddr);
	pci_release_region(pdev, SOFTGPU_IVSHMEM_BAR);
	pci_disable_device(pdev);
	b->pdev = NULL;
}

static const struct pci_device_id softgpu_pci_ids[] = {
	{ PCI_DEVICE(SOFTGPU_IVSHMEM_VENDOR, SOFTGPU_IVSHMEM_DEVICE) },
	{ }
};

/* No MODULE_DEVICE_TABLE: softgpu must never autoload for a stray ivshmem. */
static struct pci_driver softgpu_pci_driver = {
	.name = "softgpu",
	.id_table = softgpu_pci_ids,
	.probe = softgpu_pci_probe,
	.remove = softgpu_pci_remove,
};

static bool softgpu_pci_registered;

int softgpu_backing_init(void)
{
	struct softgpu_backing *b = &softgpu_backing;
	int ret;

	spin_lock_init(&b->lock);
	atomic64_set(&b->used, 0);
	if (!force_ram) {
		/* Probing is synchronous: b->bar is settled on return. */
		ret = pci_register_driver(&softgpu_pci_driver);
		if (ret)
			return ret;
		softgpu_pci_registered = true;
	}
	if (b->bar)
		return 0;

	if (ram_size < SOFTGPU_CHUNK_SIZE) {
		pr_err("softgpu: ram_size=%lu is below one 64 KiB GPU page\n", ram_size);
		softgpu_backing_exit();
		return -EINVAL;
	}
	pr_info("softgpu: %llu MiB of GPU memory in RAM (CPU-cacheable page tables)%s\n",
		softgpu_memory_size() >> 20, force_ram ? "" : "; no ivshmem-plain device found");
	return 0;
}

void softgpu_backing_exit(void)
{
	if (softgpu_pci_registered)
		pci_unregister_driver(&softgpu_pci_driver);
	softgpu_pci_registered = false;
}
