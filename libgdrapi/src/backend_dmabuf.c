// SPDX-License-Identifier: MIT
/*
 * The dma-buf backend: no kernel module of ours.  The CUDA driver exports the
 * pinned range as a dma-buf fd (cuMemGetHandleForAddressRange) and we mmap
 * that fd.  CPU mmap of these fds arrived with the CUDA 13.3 driver; older
 * drivers hand out an fd whose mmap fails (errno 524, ENOTSUPP), so both the
 * driver version and the mmap result are checked and explained.
 *
 * libcuda comes from the shared loader (cuda_loader.h), never linked: the
 * library must load on machines without CUDA.
 *
 * Choices (documented in libgdrapi/README.md):
 *  - The mapping type is fixed at pin time: CACHING on a coherent platform
 *    unless FORCE_PCIE, else WC.  A map request for another type is EINVAL.
 *  - Like gdrdrv, a pin that does not start on a page boundary (here the
 *    host page) pins fine but cannot be mapped (EINVAL).
 *  - gdr_driver_get_version has no gdrdrv to ask; it answers the version of
 *    the gdrdrv interface it stands in for (the library's own 2.6), since it
 *    pins whatever CUDA memory consumers gated on that version pin.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend.h"
#include "cuda_loader.h"
#include "internal.h"

#define CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES 100
#define CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 124
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1
#define CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE 0x1

/* The first driver whose dma-buf fds can be mmapped by the CPU: CUDA 13.3. */
#define DMABUF_MMAP_MIN_DRIVER 13030

struct dmabuf_buffer {
	int fd;
	unsigned long aligned_addr;	/* the pinned range, on host pages */
	size_t aligned_size;
	gdr_mapping_type_t type;	/* decided at pin */
};

/* With a libcuda reference held: can this driver and some GPU do dma-buf mmap at all? */
static int dmabuf_usable(char *why)
{
	int version = gdr_cuda_driver_version(), count = 0, usable = 0, i, rc;
	CUresult cr;

	if (version < DMABUF_MMAP_MIN_DRIVER && getenv("GDRCOPY_DMABUF_SKIP_VERSION_CHECK")) {
		/* Diagnostics only: lets the mmap itself say what an older driver does. */
		gdr_warn("dma-buf backend: CUDA driver %d.%d is older than %d.%d; trying anyway because GDRCOPY_DMABUF_SKIP_VERSION_CHECK is set",
			 version / 1000, version % 1000 / 10, DMABUF_MMAP_MIN_DRIVER / 1000,
			 DMABUF_MMAP_MIN_DRIVER % 1000 / 10);
	} else if (version < DMABUF_MMAP_MIN_DRIVER) {
		snprintf(why, GDR_BACKEND_WHY_LEN,
			 "the CUDA driver is %d.%d but mapping dma-buf fds needs %d.%d or newer (older drivers refuse the mmap with errno 524, ENOTSUPP): upgrade the NVIDIA driver or use gdrdrv",
			 version / 1000, version % 1000 / 10, DMABUF_MMAP_MIN_DRIVER / 1000,
			 DMABUF_MMAP_MIN_DRIVER % 1000 / 10);
		return ENOTSUP;
	}
	rc = gdr_cuda_require(GDR_CUDA_USER_DMABUF, why);
	if (rc)
		return rc;
	cr = gdr_cuda.cuDeviceGetCount(&count);
	if (cr != CUDA_SUCCESS || count == 0) {
		snprintf(why, GDR_BACKEND_WHY_LEN, "the CUDA driver sees no GPU");
		return ENODEV;
	}
	for (i = 0; i < count; i++) {
		CUdevice dev;
		int supported = 0;

		if (gdr_cuda.cuDeviceGet(&dev, i) == CUDA_SUCCESS &&
		    gdr_cuda.cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev) ==
			    CUDA_SUCCESS &&
		    supported)
			usable++;
	}
	if (!usable) {
		snprintf(why, GDR_BACKEND_WHY_LEN,
			 "none of the %d GPUs supports dma-buf export (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0; it needs the open kernel modules and a kernel with dma-buf support)",
			 count);
		return ENOTSUP;
	}
	gdr_info("dma-buf backend: CUDA driver %d.%d, %d of %d GPUs export dma-buf", version / 1000,
		 version % 1000 / 10, usable, count);
	return 0;
}

static int dmabuf_open(struct gdr *g, char *why)
{
	int rc = gdr_cuda_acquire(why);

	if (rc)
		return rc;
	rc = dmabuf_usable(why);
	if (rc) {
		gdr_cuda_release();
		return rc;
	}
	g->backend_priv = NULL;
	return 0;
}

static void dmabuf_close(struct gdr *g)
{
	(void)g;
	gdr_cuda_release();
}

static int dmabuf_pin(struct gdr *g, struct gdr_memh *mh, const struct gdr_pin_request *req)
{
	const struct gdr_host_page *page = gdr_host_page();
	unsigned long aligned = req->addr & ~(unsigned long)page->mask;
	size_t size = gdr_round_up_to_page(req->size + (req->addr - aligned));
	struct dmabuf_buffer *buf;
	struct gdr_cuda_ctx ctx;
	int ordinal = -1, supported = 0, coherent = 0, fd = -1;
	CUdevice dev;
	CUresult cr;

	(void)g;
	if (req->size > SIZE_MAX - (req->addr - aligned) - page->mask || req->addr + req->size < req->addr) {
		/* Rounded to whole pages the size would wrap and export far less than asked. */
		gdr_err("gdr_pin_buffer: [%#lx, +%zu) runs past the end of the address space", req->addr, req->size);
		return EINVAL;
	}
	if (req->legacy && (req->p2p_token || req->va_space))
		gdr_dbg("dma-buf backend: P2P tokens are ignored");

	cr = gdr_cuda.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, req->addr);
	if (cr != CUDA_SUCCESS) {
		gdr_err("gdr_pin_buffer: %#lx is not CUDA device memory: %s", req->addr, gdr_cuda_strerror(cr));
		return EINVAL;
	}
	if (gdr_cuda.cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS ||
	    gdr_cuda.cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev) != CUDA_SUCCESS ||
	    !supported) {
		gdr_err("gdr_pin_buffer: GPU %d cannot export dma-buf; use memory of another GPU or gdrdrv", ordinal);
		return ENOTSUP;
	}
	if (gdr_cuda.cuDeviceGetAttribute(&coherent, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES,
				      dev) != CUDA_SUCCESS)
		coherent = 0;

	/* The export needs a context; borrow the primary one when the thread has none. */
	cr = gdr_cuda_ctx_borrow(&ctx, dev);
	if (cr != CUDA_SUCCESS) {
		gdr_err("gdr_pin_buffer: cannot retain GPU %d's primary context: %s", ordinal, gdr_cuda_strerror(cr));
		return EINVAL;
	}
	cr = gdr_cuda.cuMemGetHandleForAddressRange(&fd, aligned, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
					       (req->flags & GDR_PIN_FLAG_FORCE_PCIE) ?
						       CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE : 0);
	gdr_cuda_ctx_detach(&ctx);
	gdr_cuda_ctx_release(&ctx);
	if (cr != CUDA_SUCCESS) {
		gdr_err("gdr_pin_buffer: cuMemGetHandleForAddressRange(DMA_BUF_FD%s) on [%#lx, +%zu) failed: %s (error %d)%s",
			(req->flags & GDR_PIN_FLAG_FORCE_PCIE) ? ", PCIE" : "", aligned, size, gdr_cuda_strerror(cr), cr,
			(req->flags & GDR_PIN_FLAG_FORCE_PCIE) ? "; this driver or platform may not support FORCE_PCIE" : "");
		return EINVAL;
	}

	buf = calloc(1, sizeof(*buf));
	if (!buf) {
		close(fd);
		return ENOMEM;
	}
	buf->fd = fd;
	buf->aligned_addr = aligned;
	buf->aligned_size = size;
	buf->type = coherent && !(req->flags & GDR_PIN_FLAG_FORCE_PCIE) ? GDR_MAPPING_TYPE_CACHING : GDR_MAPPING_TYPE_WC;
	mh->backend_priv = buf;
	mh->pinned_addr = req->addr;
	mh->pinned_size = req->size;
	mh->pin_flags = req->flags;
	return 0;
}

static int dmabuf_unpin(struct gdr *g, struct gdr_memh *mh)
{
	struct dmabuf_buffer *buf = mh->backend_priv;

	(void)g;
	close(buf->fd);
	free(buf);
	mh->backend_priv = NULL;
	return 0;
}

static int dmabuf_map(struct gdr *g, struct gdr_memh *mh, size_t size, gdr_mapping_type_t requested, void **va,
		      gdr_mapping_type_t *type)
{
	struct dmabuf_buffer *buf = mh->backend_priv;
	void *addr;

	(void)g;
	if (requested != GDR_MAPPING_TYPE_NONE && requested != buf->type) {
		gdr_err("gdr_map: the dma-buf backend maps this buffer as %s only, not %s; map with GDR_MAP_FLAG_DEFAULT",
			gdr_mapping_type_name(buf->type), gdr_mapping_type_name(requested));
		return EINVAL;
	}
	if (mh->pinned_addr != buf->aligned_addr) {
		gdr_err("gdr_map: buffer %#lx does not start on a page boundary and cannot be mapped (as with gdrdrv); pin from an aligned address and add the offset to the mapped pointer",
			mh->pinned_addr);
		return EINVAL;
	}
	addr = mmap(NULL, gdr_round_up_to_page(size), PROT_READ | PROT_WRITE, MAP_SHARED, buf->fd, 0);
	if (addr == MAP_FAILED) {
		int err = errno;

		if (err == 524)	/* ENOTSUPP, kernel-internal: the exporter has no mmap */
			gdr_err("gdr_map: mmap of the dma-buf fd failed with errno 524 (ENOTSUPP): this CUDA driver exports GPU memory as dma-buf but does not let the CPU map it (that needs the CUDA 13.3 driver or newer); use gdrdrv");
		else
			gdr_err("gdr_map: mmap of the dma-buf fd for [%#lx, +%zu) failed: %s", buf->aligned_addr, size,
				strerror(err));
		return err;
	}
	*va = addr;
	*type = buf->type;
	return 0;
}

static int dmabuf_unmap(struct gdr *g, struct gdr_memh *mh, void *va, size_t size)
{
	(void)g;
	(void)mh;
	if (munmap(va, gdr_round_up_to_page(size)) < 0) {
		int err = errno;

		gdr_err("gdr_unmap: munmap(%p, %zu) failed: %s", va, size, strerror(err));
		return err;
	}
	return 0;
}

static int dmabuf_get_info(struct gdr *g, struct gdr_memh *mh, gdr_info_v2_t *info)
{
	struct dmabuf_buffer *buf = mh->backend_priv;

	(void)g;
	memset(info, 0, sizeof(*info));
	info->va = buf->aligned_addr;
	info->mapped_size = buf->aligned_size;
	info->page_size = (uint32_t)gdr_host_page()->size;
	info->mapping_type = atomic_load(&mh->map_va) ? buf->type : GDR_MAPPING_TYPE_NONE;
	return 0;
}

static int dmabuf_get_attr(struct gdr *g, gdr_attr_t attr, int *value)
{
	(void)g;
	(void)attr;
	/*
	 * Persistent by construction, FORCE_PCIE passed to CUDA, yes this is
	 * dma-buf, and a fork child inherits the mapping: the NVIDIA driver's
	 * dma-buf mmap sets no VM_DONTCOPY.
	 */
	*value = 1;
	return 0;
}

static int dmabuf_get_cb_flag(struct gdr *g, struct gdr_memh *mh, int *flag)
{
	(void)g;
	(void)mh;
	*flag = 0;	/* no invalidation callback: the pin keeps the memory */
	return 0;
}

/*
 * No gdrdrv to ask: this backend stands in for the gdrdrv interface this
 * library implements, and pins any CUDA memory (cuMemAlloc and cuMemCreate
 * alike), so it passes the consumers' version gates as gdrdrv 2.6 would
 * (libgdrapi/README.md, "gdr_driver_get_version without gdrdrv").
 */
static int dmabuf_driver_version(struct gdr *g, int *major, int *minor)
{
	(void)g;
	*major = GDR_API_MAJOR_VERSION;
	*minor = GDR_API_MINOR_VERSION;
	return 0;
}

const struct gdr_backend_ops gdr_backend_dmabuf = {
	.name = "dmabuf",
	.map_makes_own_mapping = true,
	.open = dmabuf_open,
	.close = dmabuf_close,
	.pin = dmabuf_pin,
	.unpin = dmabuf_unpin,
	.map = dmabuf_map,
	.unmap = dmabuf_unmap,
	.get_info = dmabuf_get_info,
	.get_attr = dmabuf_get_attr,
	.get_cb_flag = dmabuf_get_cb_flag,
	.driver_version = dmabuf_driver_version,
};
