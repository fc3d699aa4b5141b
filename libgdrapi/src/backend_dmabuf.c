// SPDX-License-Identifier: MIT
/*
 * The dma-buf backend: no kernel module of ours.  The CUDA driver exports the
 * pinned range as a dma-buf fd (cuMemGetHandleForAddressRange) and we mmap
 * that fd.  CPU mmap of these fds arrived with the CUDA 13.3 driver; older
 * drivers hand out an fd whose mmap fails (errno 524, ENOTSUPP), so both the
 * driver version and the mmap result are checked and explained.
 *
 * libcuda is dlopen()ed ("libcuda.so.1", the name the driver package always
 * installs), never linked: the library must load on machines without CUDA.
 *
 * Choices (documented in libgdrapi/README.md):
 *  - The mapping type is fixed at pin time: CACHING on a coherent platform
 *    unless FORCE_PCIE, else WC.  A map request for another type is EINVAL.
 *  - Like gdrdrv, a pin that does not start on a page boundary (here the
 *    host page) pins fine but cannot be mapped (EINVAL).
 *  - gdr_driver_get_version has no driver to ask: ENODEV.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "cuda_imports.h"

/* The few CUDA driver API types and constants we need (values from the CUDA driver API). */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;

#define CUDA_SUCCESS 0
#define CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES 100
#define CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 124
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1
#define CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE 0x1
#define CU_GET_PROC_ADDRESS_DEFAULT 0

/* The first driver whose dma-buf fds can be mmapped by the CPU: CUDA 13.3. */
#define DMABUF_MMAP_MIN_DRIVER GDR_CUDA_DMABUF_PROC_VERSION
#define CUDA_LIBRARY "libcuda.so.1"

/* What we call, resolved at load (cuda_imports.h lists it). */
struct cuda_api {
#define CUDA_API_FIELD(name, symbol, params) CUresult (*name) params;
	GDR_CUDA_DMABUF_PROCS(CUDA_API_FIELD)
#undef CUDA_API_FIELD
};

/* What we find with dlsym() first. */
struct cuda_bootstrap {
#define CUDA_BOOT_FIELD(symbol) void *symbol;
	GDR_CUDA_DMABUF_DLSYM(CUDA_BOOT_FIELD)
#undef CUDA_BOOT_FIELD
};

/* One libcuda per process, shared by every gdr_t that uses this backend. */
static pthread_mutex_t cuda_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int cuda_users;
static void *cuda_library;
static struct cuda_api cuda;

struct dmabuf_buffer {
	int fd;
	unsigned long aligned_addr;	/* the pinned range, on host pages */
	size_t aligned_size;
	gdr_mapping_type_t type;	/* decided at pin */
};

static const char *cuda_error(CUresult err)
{
	const char *str = NULL;

	if (cuda.cuGetErrorString && cuda.cuGetErrorString(err, &str) == CUDA_SUCCESS && str)
		return str;
	return "unknown CUDA error";
}

static const char *cuda_error_name(CUresult err)
{
	const char *str = NULL;

	if (cuda.cuGetErrorName && cuda.cuGetErrorName(err, &str) == CUDA_SUCCESS && str)
		return str;
	return "CUDA error";
}

/*
 * cuGetProcAddress has had two signatures: (symbol, pfn, version, flags) and,
 * from CUDA 12, _v2 with an extra status pointer.  We pass all five
 * arguments; the four-argument one ignores the last.
 */
typedef CUresult (*get_proc_address_fn)(const char *symbol, void **pfn, int version, unsigned long long flags,
					 int *status);

/* `name` through cuGetProcAddress, else the exported `symbol` of the signature we call. */
static void *resolve(get_proc_address_fn get_proc, const char *name, const char *symbol)
{
	void *fn = NULL;
	int status = 0;

	if (get_proc && get_proc(name, &fn, GDR_CUDA_DMABUF_PROC_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) ==
			CUDA_SUCCESS && fn)
		return fn;
	return dlsym(cuda_library, symbol);
}

/* Caller holds cuda_lock.  Loads libcuda and checks it can do dma-buf mmap at all. */
static int cuda_load(char *why)
{
	struct cuda_bootstrap boot;
	CUresult (*driver_get_version)(int *version);
	get_proc_address_fn get_proc;
	int version = 0, count = 0, usable = 0, i, rc;
	CUresult cr;

	cuda_library = dlopen(CUDA_LIBRARY, RTLD_NOW | RTLD_LOCAL);
	if (!cuda_library) {
		const char *err = dlerror();

		snprintf(why, GDR_BACKEND_WHY_LEN, "cannot load %s (%s): install the NVIDIA driver's CUDA library",
			 CUDA_LIBRARY, err ? err : "not found");
		return ENOENT;
	}
#define CUDA_BOOT(symbol) boot.symbol = dlsym(cuda_library, #symbol);
	GDR_CUDA_DMABUF_DLSYM(CUDA_BOOT)
#undef CUDA_BOOT
	driver_get_version = (CUresult (*)(int *))boot.cuDriverGetVersion;
	if (!driver_get_version || driver_get_version(&version) != CUDA_SUCCESS) {
		snprintf(why, GDR_BACKEND_WHY_LEN, "%s has no working cuDriverGetVersion", CUDA_LIBRARY);
		rc = ENOSYS;
		goto fail;
	}
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
		rc = ENOTSUP;
		goto fail;
	}

	get_proc = (get_proc_address_fn)(boot.cuGetProcAddress_v2 ? boot.cuGetProcAddress_v2 : boot.cuGetProcAddress);
#define RESOLVE(name, symbol, params)                                                                \
	do {                                                                                         \
		*(void **)&cuda.name = resolve(get_proc, #name, #symbol);                            \
		if (!cuda.name) {                                                                    \
			snprintf(why, GDR_BACKEND_WHY_LEN, "%s has no %s", CUDA_LIBRARY, #symbol);   \
			rc = ENOSYS;                                                                 \
			goto fail;                                                                   \
		}                                                                                    \
	} while (0);
	GDR_CUDA_DMABUF_PROCS(RESOLVE)
#undef RESOLVE

	cr = cuda.cuInit(0);
	if (cr != CUDA_SUCCESS) {
		snprintf(why, GDR_BACKEND_WHY_LEN, "cuInit failed: %s (error %d: %s); %s", cuda_error_name(cr), cr,
			 cuda_error(cr), gdr_cuda_init_hint(cr));
		rc = ENODEV;
		goto fail;
	}
	cr = cuda.cuDeviceGetCount(&count);
	if (cr != CUDA_SUCCESS || count == 0) {
		snprintf(why, GDR_BACKEND_WHY_LEN, "the CUDA driver sees no GPU");
		rc = ENODEV;
		goto fail;
	}
	for (i = 0; i < count; i++) {
		CUdevice dev;
		int supported = 0;

		if (cuda.cuDeviceGet(&dev, i) == CUDA_SUCCESS &&
		    cuda.cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev) == CUDA_SUCCESS &&
		    supported)
			usable++;
	}
	if (!usable) {
		snprintf(why, GDR_BACKEND_WHY_LEN,
			 "none of the %d GPUs supports dma-buf export (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0; it needs the open kernel modules and a kernel with dma-buf support)",
			 count);
		rc = ENOTSUP;
		goto fail;
	}
	gdr_info("dma-buf backend: CUDA driver %d.%d, %d of %d GPUs export dma-buf", version / 1000,
		 version % 1000 / 10, usable, count);
	return 0;
fail:
	dlclose(cuda_library);
	cuda_library = NULL;
	memset(&cuda, 0, sizeof(cuda));
	return rc;
}

static int dmabuf_open(struct gdr *g, char *why)
{
	int rc = 0;

	pthread_mutex_lock(&cuda_lock);
	if (cuda_users == 0)
		rc = cuda_load(why);
	if (rc == 0)
		cuda_users++;
	pthread_mutex_unlock(&cuda_lock);
	g->backend_priv = NULL;
	return rc;
}

static void dmabuf_close(struct gdr *g)
{
	(void)g;
	pthread_mutex_lock(&cuda_lock);
	if (--cuda_users == 0) {
		dlclose(cuda_library);
		cuda_library = NULL;
		memset(&cuda, 0, sizeof(cuda));
	}
	pthread_mutex_unlock(&cuda_lock);
}

static int dmabuf_pin(struct gdr *g, struct gdr_memh *mh, const struct gdr_pin_request *req)
{
	const struct gdr_host_page *page = gdr_host_page();
	unsigned long aligned = req->addr & ~(unsigned long)page->mask;
	size_t size = gdr_round_up_to_page(req->size + (req->addr - aligned));
	struct dmabuf_buffer *buf;
	CUcontext ctx = NULL, primary = NULL;
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

	cr = cuda.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, req->addr);
	if (cr != CUDA_SUCCESS) {
		gdr_err("gdr_pin_buffer: %#lx is not CUDA device memory: %s", req->addr, cuda_error(cr));
		return EINVAL;
	}
	if (cuda.cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS ||
	    cuda.cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev) != CUDA_SUCCESS ||
	    !supported) {
		gdr_err("gdr_pin_buffer: GPU %d cannot export dma-buf; use memory of another GPU or gdrdrv", ordinal);
		return ENOTSUP;
	}
	if (cuda.cuDeviceGetAttribute(&coherent, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES,
				      dev) != CUDA_SUCCESS)
		coherent = 0;

	/* The export needs a context; borrow the primary one when the thread has none. */
	if (cuda.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS)
		ctx = NULL;
	if (!ctx) {
		cr = cuda.cuDevicePrimaryCtxRetain(&primary, dev);
		if (cr != CUDA_SUCCESS) {
			gdr_err("gdr_pin_buffer: cannot retain GPU %d's primary context: %s", ordinal, cuda_error(cr));
			return EINVAL;
		}
		cuda.cuCtxSetCurrent(primary);
	}
	cr = cuda.cuMemGetHandleForAddressRange(&fd, aligned, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
					       (req->flags & GDR_PIN_FLAG_FORCE_PCIE) ?
						       CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE : 0);
	if (primary) {
		cuda.cuCtxSetCurrent(NULL);
		cuda.cuDevicePrimaryCtxRelease(dev);
	}
	if (cr != CUDA_SUCCESS) {
		gdr_err("gdr_pin_buffer: cuMemGetHandleForAddressRange(DMA_BUF_FD%s) on [%#lx, +%zu) failed: %s (error %d)%s",
			(req->flags & GDR_PIN_FLAG_FORCE_PCIE) ? ", PCIE" : "", aligned, size, cuda_error(cr), cr,
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
	const char *want = "?", *have = "?";
	void *addr;

	(void)g;
	if (requested != GDR_MAPPING_TYPE_NONE && requested != buf->type) {
		gdr_get_mapping_type_string(requested, &want);
		gdr_get_mapping_type_string(buf->type, &have);
		gdr_err("gdr_map: the dma-buf backend maps this buffer as %s only, not %s; map with GDR_MAP_FLAG_DEFAULT",
			have, want);
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
	/* Persistent by construction, FORCE_PCIE passed to CUDA, and yes, this is dma-buf. */
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

static int dmabuf_driver_version(struct gdr *g, int *major, int *minor)
{
	(void)g;
	(void)major;
	(void)minor;
	gdr_err("gdr_driver_get_version: the dma-buf backend uses no gdrdrv, so there is no driver version (check gdr_get_attribute(GDR_ATTR_USING_DMA_BUF_MMAP))");
	return ENODEV;
}

const struct gdr_backend_ops gdr_backend_dmabuf = {
	.name = "dmabuf",
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
