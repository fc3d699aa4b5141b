// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * SOFTGPU_IOC_EXPORT_DMABUF: a dma-buf of a range of GPU memory whose mmap
 * gives the CPU a mapping of that memory, as cuMemGetHandleForAddressRange's
 * dma-buf does on a driver with dma-buf mmap support.  BAR memory is mapped
 * write-combined (PCIe BAR1), RAM memory cached (coherent platform).
 *
 * Device DMA through the dma-buf (map_dma_buf) is out of scope: nothing in
 * this project imports one into a device driver, so it fails cleanly.
 */
#include <linux/dma-buf.h>
#include <linux/fcntl.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>

#include "softgpu.h"

#ifdef SOFTGPU_MODULE_IMPORT_NS_STRING
MODULE_IMPORT_NS("DMA_BUF");
#else
MODULE_IMPORT_NS(DMA_BUF);
#endif

struct softgpu_dmabuf_page {
	struct softgpu_mem *mem;	/* holds a reference */
	unsigned int chunk;
};

struct softgpu_dmabuf {
	u64 first_offset;	/* of the buffer's start within the first GPU page */
	bool write_combined;
	unsigned int nr_pages;
	struct softgpu_dmabuf_page pages[];
};

static struct sg_table *softgpu_dmabuf_map(struct dma_buf_attachment *attach,
					   enum dma_data_direction dir)
{
	return ERR_PTR(-EOPNOTSUPP);
}

static void softgpu_dmabuf_unmap(struct dma_buf_attachment *attach,
				 struct sg_table *sgt, enum dma_data_direction dir)
{
}

static void softgpu_dmabuf_free(struct softgpu_dmabuf *buf)
{
	unsigned int i;

	for (i = 0; i < buf->nr_pages; i++)
		softgpu_mem_put(buf->pages[i].mem);
	kvfree(buf);
}

static void softgpu_dmabuf_release(struct dma_buf *dmabuf)
{
	softgpu_dmabuf_free(dmabuf->priv);
}

static int softgpu_dmabuf_mmap(struct dma_buf *dmabuf, struct vm_area_struct *vma)
{
	struct softgpu_dmabuf *buf = dmabuf->priv;
	unsigned long addr = vma->vm_start;
	u64 offset = buf->first_offset + ((u64)vma->vm_pgoff << PAGE_SHIFT);
	pgprot_t prot = vma->vm_page_prot;
	int ret;

	/* dma_buf_mmap_internal() checked that the vma fits in the buffer. */
	if (buf->write_combined)
		prot = pgprot_writecombine(prot);
	vma->vm_page_prot = prot;

	/*
	 * One remap per GPU page: the pages need not be contiguous.  BAR
	 * pages go one host page at a time: a remap of the whole VMA makes
	 * x86 PAT reserve a memtype for it, which kernels before 6.16 free
	 * wrongly when the VMA is split ("freeing invalid memtype"); piece by
	 * piece, PAT takes the WC type softgpu's own BAR mapping reserved.
	 */
	while (addr < vma->vm_end) {
		struct softgpu_dmabuf_page *page = &buf->pages[offset / SOFTGPU_CHUNK_SIZE];
		u64 within = offset & SOFTGPU_CHUNK_MASK;
		unsigned long len = min_t(u64, vma->vm_end - addr,
					  buf->write_combined ? PAGE_SIZE :
					  SOFTGPU_CHUNK_SIZE - within);
		phys_addr_t phys = page->mem->chunks[page->chunk].phys + within;

		if (buf->write_combined)
			ret = io_remap_pfn_range(vma, addr, phys >> PAGE_SHIFT, len, prot);
		else
			ret = remap_pfn_range(vma, addr, phys >> PAGE_SHIFT, len, prot);
		if (ret)
			return ret;
		addr += len;
		offset += len;
	}
	return 0;
}

static const struct dma_buf_ops softgpu_dmabuf_ops = {
	.map_dma_buf = softgpu_dmabuf_map,
	.unmap_dma_buf = softgpu_dmabuf_unmap,
	.release = softgpu_dmabuf_release,
	.mmap = softgpu_dmabuf_mmap,
};

int softgpu_export_dmabuf(struct softgpu_space *space,
			  struct softgpu_export_dmabuf *args)
{
	DEFINE_DMA_BUF_EXPORT_INFO(exp_info);
	struct softgpu_dmabuf *buf;
	struct dma_buf *dmabuf;
	u64 first, last;
	unsigned int i;
	int fd;

	if (args->flags & ~SOFTGPU_DMABUF_FLAG_PCIE || args->fd)
		return -EINVAL;
	if (!args->size || (args->va | args->size) & ~PAGE_MASK ||
	    args->va + args->size < args->va)
		return -EINVAL;
	/*
	 * Forcing a PCIe (BAR) mapping of RAM-backed memory would map RAM
	 * write-combined behind the kernel's cached direct map: there is no
	 * BAR to force here, as on a coherent GPU without BAR access.
	 */
	if (args->flags & SOFTGPU_DMABUF_FLAG_PCIE && !softgpu_backing.bar)
		return -EOPNOTSUPP;

	first = args->va & ~SOFTGPU_CHUNK_MASK;
	last = (args->va + args->size - 1) & ~SOFTGPU_CHUNK_MASK;
	buf = kvzalloc(struct_size(buf, pages, (last - first) / SOFTGPU_CHUNK_SIZE + 1),
		       GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	buf->first_offset = args->va - first;
	buf->write_combined = softgpu_backing.bar;

	mutex_lock(&softgpu_lock);
	for (i = 0; first + (u64)i * SOFTGPU_CHUNK_SIZE <= last; i++) {
		u64 va = first + (u64)i * SOFTGPU_CHUNK_SIZE;
		/* Mappings are whole GPU pages: one lookup per page will do. */
		struct softgpu_mapping *map = softgpu_find_mapping(space, va);

		if (!map) {
			mutex_unlock(&softgpu_lock);
			softgpu_dmabuf_free(buf);
			return -EINVAL;
		}
		buf->pages[i].mem = map->mem;
		buf->pages[i].chunk = (va - map->va + map->offset) / SOFTGPU_CHUNK_SIZE;
		softgpu_mem_get(map->mem);
		buf->nr_pages = i + 1;
	}
	mutex_unlock(&softgpu_lock);

	exp_info.ops = &softgpu_dmabuf_ops;
	exp_info.size = args->size;
	exp_info.flags = O_RDWR;
	exp_info.priv = buf;
	dmabuf = dma_buf_export(&exp_info);
	if (IS_ERR(dmabuf)) {
		softgpu_dmabuf_free(buf);
		return PTR_ERR(dmabuf);
	}
	fd = dma_buf_fd(dmabuf, O_CLOEXEC);
	if (fd < 0) {
		dma_buf_put(dmabuf);	/* releases buf */
		return fd;
	}
	args->fd = fd;
	return 0;
}
