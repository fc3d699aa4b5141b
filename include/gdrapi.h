/* SPDX-License-Identifier: MIT */
/*
 * gdrapi.h - low-latency CPU access to GPU memory.
 *
 * Source and binary compatible with GDRCopy 2.6's gdrapi.h / libgdrapi.so.2:
 * programs and libraries built against either run against either.
 *
 * Functions return 0 on success or a positive errno value, except where
 * noted.  Set GDRCOPY_ENABLE_LOGGING=1 (and GDRCOPY_LOG_LEVEL=1..4) to have
 * the library explain failures on stderr.
 *
 * Unlike GDRCopy 2.6, every call is thread-safe: one gdr_t may be used from
 * many threads at once.
 */
#ifndef GDRAPI_H
#define GDRAPI_H

#include <stdint.h>
#include <stddef.h>

#include "gdrcopy_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MAJOR_VERSION_SHIFT 16
#define MINOR_VERSION_MASK (((uint32_t)1 << MAJOR_VERSION_SHIFT) - 1)

/*
 * Literal numbers, not GDRCOPY_VERSION_*: build scripts written for GDRCopy
 * read them from this file with awk.  The check below keeps them equal to
 * gdrcopy_version.h, the one version source.
 */
#define GDR_API_MAJOR_VERSION 2
#define GDR_API_MINOR_VERSION 6
#if GDR_API_MAJOR_VERSION != GDRCOPY_VERSION_MAJOR || GDR_API_MINOR_VERSION != GDRCOPY_VERSION_MINOR
#error "gdrapi.h: GDR_API_MAJOR_VERSION/GDR_API_MINOR_VERSION differ from gdrcopy_version.h"
#endif
#define GDR_API_VERSION \
	((GDR_API_MAJOR_VERSION << MAJOR_VERSION_SHIFT) | GDR_API_MINOR_VERSION)

#define MINIMUM_GDRDRV_MAJOR_VERSION 2
#define MINIMUM_GDRDRV_MINOR_VERSION 0
#define MINIMUM_GDRDRV_VERSION \
	((MINIMUM_GDRDRV_MAJOR_VERSION << MAJOR_VERSION_SHIFT) | MINIMUM_GDRDRV_MINOR_VERSION)

#define GPU_PAGE_SHIFT 16
#define GPU_PAGE_SIZE (1UL << GPU_PAGE_SHIFT)
#define GPU_PAGE_OFFSET (GPU_PAGE_SIZE - 1)
#define GPU_PAGE_MASK (~GPU_PAGE_OFFSET)

/* An open library instance (one per process is typical). */
struct gdr;
typedef struct gdr *gdr_t;

/*
 * A pinned GPU buffer.  A value that is not a live buffer of the gdr_t (never
 * issued, unpinned, or of a closed gdr_t) makes every call return EINVAL.
 */
typedef struct gdr_mh_s {
	unsigned long h;
} gdr_mh_t;

typedef enum gdr_pin_flags {
	GDR_PIN_FLAG_DEFAULT = 0,
	/* Map through PCIe BAR1 even on coherent platforms. */
	GDR_PIN_FLAG_FORCE_PCIE = 1
} gdr_pin_flags_t;

typedef enum gdr_mapping_type {
	GDR_MAPPING_TYPE_NONE = 0,
	GDR_MAPPING_TYPE_WC = 1,
	GDR_MAPPING_TYPE_CACHING = 2,
	GDR_MAPPING_TYPE_DEVICE = 3,
	GDR_MAPPING_TYPE_MAX
} gdr_mapping_type_t;

typedef enum gdr_map_flags {
	GDR_MAP_FLAG_DEFAULT = 0,
	GDR_MAP_FLAG_REQ_WC_MAPPING = 1,
	GDR_MAP_FLAG_REQ_CACHE_MAPPING = 2,
	GDR_MAP_FLAG_REQ_DEVICE_MAPPING = 3
} gdr_map_flags_t;

typedef enum gdr_attr {
	GDR_ATTR_USE_PERSISTENT_MAPPING = 1,
	GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE = 2,
	GDR_ATTR_USING_DMA_BUF_MMAP = 3,
	/*
	 * 1 when a child of fork() inherits the CPU mappings of gdr_map()
	 * (as in NVIDIA's next GDRCopy release).  0 on our gdrdrv: it marks every
	 * mapping VM_DONTCOPY, also when built for the proprietary NVIDIA driver
	 * on Linux 6.15 and newer, where NVIDIA's gdrdrv cannot (so with
	 * NVIDIA's gdrdrv it is 1 there).  1 on the dma-buf and vulkan
	 * backends: the NVIDIA driver's mappings are copied into the child,
	 * which then reaches the same GPU memory.  Libraries older than this
	 * value return EINVAL for it.
	 */
	GDR_ATTR_VMA_INHERITED_ON_FORK = 4,
	GDR_ATTR_MAX
} gdr_attr_t;

typedef struct gdr_info_v2 {
	uint64_t va;
	uint64_t mapped_size;
	uint32_t page_size;
	uint64_t tm_cycles;	/* deprecated */
	uint32_t cycles_per_ms;	/* deprecated */
	unsigned mapped:1;
	unsigned wc_mapping:1;
	gdr_mapping_type_t mapping_type;
} gdr_info_v2_t;
typedef gdr_info_v2_t gdr_info_t;

/* Open the library: picks the gdrdrv backend, else dma-buf mmap.  NULL on failure, errno says why. */
gdr_t gdr_open(void);
/* Unpin every buffer still pinned through g, then release g. */
int gdr_close(gdr_t g);

/* Pin [addr, addr + size) of GPU memory.  Tokens are ignored by drivers using persistent mapping. */
int gdr_pin_buffer(gdr_t g, unsigned long addr, size_t size, uint64_t p2p_token, uint32_t va_space,
		   gdr_mh_t *handle);
/*
 * As gdr_pin_buffer(), with GDR_PIN_FLAG_* flags.  A GDR_PIN_FLAG_FORCE_PCIE
 * pin that fails says why in its errno (libgdrapi/README.md; the log says
 * what to do), so that a caller can fall back to flags 0 knowingly:
 *   EPROTONOSUPPORT  gdrdrv is older than 2.5: it takes no pin flags;
 *   ENOPROTOOPT      gdrdrv does not use persistent mappings (module
 *                    parameter use_persistent_mapping=0, or an NVIDIA driver
 *                    without persistent pins), which forced PCIe needs;
 *   EOPNOTSUPP       gdrdrv was built against NVIDIA driver sources without
 *                    NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING (older than 570);
 *   ENXIO            the NVIDIA driver refused a forced BAR1 mapping of a
 *                    range it pins without the flag;
 *   anything else    the range cannot be pinned at all (as with flags 0).
 * A platform that is not coherent is no reason to fail: every mapping goes
 * through PCIe BAR1 there anyway.
 */
int gdr_pin_buffer_v2(gdr_t g, unsigned long addr, size_t size, uint32_t flags, gdr_mh_t *handle);
int gdr_unpin_buffer(gdr_t g, gdr_mh_t handle);

/* *flag becomes 1 once the GPU memory behind a (legacy-mode) pin was freed. */
int gdr_get_callback_flag(gdr_t g, gdr_mh_t handle, int *flag);

int gdr_get_info_v2(gdr_t g, gdr_mh_t handle, gdr_info_v2_t *info);
#define gdr_get_info gdr_get_info_v2

/* Map a pinned buffer into the process.  The buffer must start on a GPU page. */
int gdr_map(gdr_t g, gdr_mh_t handle, void **va, size_t size);
int gdr_map_v2(gdr_t g, gdr_mh_t handle, void **va, size_t size, int flags);
int gdr_unmap(gdr_t g, gdr_mh_t handle, void *va, size_t size);

/* Copy between host memory and a mapping, with the copy routine and fences its mapping type needs. */
int gdr_copy_to_mapping(gdr_mh_t handle, void *map_d_ptr, const void *h_ptr, size_t size);
int gdr_copy_from_mapping(gdr_mh_t handle, void *h_ptr, const void *map_d_ptr, size_t size);

void gdr_runtime_get_version(int *major, int *minor);
int gdr_driver_get_version(gdr_t g, int *major, int *minor);

int gdr_get_attribute(gdr_t g, gdr_attr_t attr, int *value);
int gdr_get_mapping_type_string(gdr_mapping_type_t type, const char **type_str);

/*
 * Extensions (not in GDRCopy 2.6; test for them with GDRAPI_HAVE_COPY_ENGINE).
 *
 * The copy engine on its own: copy to or from any memory mapped with the
 * given type (for example other write-combined BAR memory), exactly as
 * gdr_copy_to_mapping()/gdr_copy_from_mapping() do for a gdrcopy mapping.
 * Returns 0, or EINVAL for an unknown type.
 */
#define GDRAPI_HAVE_COPY_ENGINE 1
int gdr_copy_to_mapped_memory(gdr_mapping_type_t type, void *dst, const void *src, size_t size);
int gdr_copy_from_mapped_memory(gdr_mapping_type_t type, void *dst, const void *src, size_t size);

/*
 * Extension: the name of the backend g uses: "gdrdrv", "dmabuf" or "vulkan"
 * (never NULL for an open g).
 */
#define GDRAPI_HAVE_BACKEND_NAME 1
const char *gdr_get_backend_name(gdr_t g);

/*
 * Extension: the backends this library has, one name a line (each ending in
 * "\n"), in the order gdr_open() tries them (vulkan only when asked:
 * gdr_open_ex()): what GDRCOPY_BACKEND accepts, which also takes "dma-buf".
 * A static string, never NULL.
 */
#define GDRAPI_HAVE_BACKEND_LIST 1
const char *gdr_get_backend_list(void);

/*
 * Extension: why each backend declined in the calling thread's last
 * gdr_open() that returned NULL, one "name: reason" a line; "" after a
 * gdr_open() that succeeded, or before any.  The same lines gdr_open() logs
 * with GDRCOPY_ENABLE_LOGGING, but there without logging, for callers that
 * report errors themselves (the Python bindings).  Valid until the thread's
 * next gdr_open().
 */
const char *gdr_get_open_failure(void);

/*
 * Extension: parallel copies for large transfers (off unless asked for).
 *
 * One core drives roughly 15 GB/s into GPU memory and well under 1 GB/s out
 * of it; several cores together move more.  These copy like
 * gdr_copy_to_mapping()/gdr_copy_from_mapping(), split into at most
 * `threads` contiguous pieces that worker threads copy at once (pieces are
 * never smaller than 256 KiB).  threads <= 1 copies on the calling thread.
 * The workers are created on the first call that needs them and live until
 * the process exits.  The environment variable GDRCOPY_COPY_THREADS=N makes
 * the ordinary gdr_copy_to_mapping()/gdr_copy_from_mapping() do the same for
 * copies of at least GDRCOPY_PARALLEL_MIN_SIZE bytes (default 1 MiB).
 */
#define GDRAPI_HAVE_PARALLEL_COPY 1
int gdr_copy_to_mapping_parallel(gdr_mh_t handle, void *map_d_ptr, const void *h_ptr, size_t size,
				 unsigned int threads);
int gdr_copy_from_mapping_parallel(gdr_mh_t handle, void *h_ptr, const void *map_d_ptr, size_t size,
				   unsigned int threads);

/*
 * Extension: GPU memory that needs no kernel module (the "vulkan" backend).
 *
 * Where neither gdrdrv nor dma-buf mmap is usable but the GPU exposes
 * device-local, host-visible memory through Vulkan (its BAR1), the "vulkan"
 * backend maps GPU memory without a module.  gdr_open() never takes it by
 * itself (gdr_open_ex() below says when it does).  It cannot pin cudaMalloc
 * memory: allocate the GPU memory with gdr_alloc_mapped() instead.  It returns a CUDA device pointer
 * (*gpu_ptr, a CUdeviceptr usable with any CUDA call in the current context's
 * device) and a CPU pointer (*cpu_ptr, a write-combined mapping of the same
 * bytes through BAR1).  gdr_pin_buffer(), gdr_map(), gdr_get_info() and the
 * copy calls then work on addresses inside such allocations; any other
 * address fails with EINVAL (logged).  Sizes are rounded up to 64 KiB and
 * *gpu_ptr is 64 KiB aligned.  Free with gdr_free_mapped() after unpinning.
 * Both return ENOTSUP on the other backends.
 */
#define GDRAPI_HAVE_ALLOC_MAPPED 1
int gdr_alloc_mapped(gdr_t g, size_t size, uint64_t *gpu_ptr, void **cpu_ptr);
int gdr_free_mapped(gdr_t g, uint64_t gpu_ptr);

/*
 * Extension: gdr_open() for code that says what it will pin.
 *
 * gdr_open() tries only backends that pin any GPU allocation (gdrdrv, then
 * dma-buf), as GDRCopy 2.6 does: programs written for it take a gdr_open()
 * that succeeds to mean that their own cudaMalloc memory can be pinned.
 * The vulkan backend cannot pin that memory, so it is used only when asked:
 *   - by a process: GDRCOPY_BACKEND=vulkan;
 *   - by a node: allow_vulkan = yes in /etc/gdrcopy.conf (or the file
 *     GDRCOPY_CONFIG_FILE names), for every process there;
 *   - by code: gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN), which declares that
 *     every buffer the caller pins is gdr_alloc_mapped() memory or
 *     cuMemCreate memory that requested CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.
 * gdr_open_ex(0) is gdr_open().  Unknown flags: NULL with errno EINVAL.
 */
#define GDRAPI_HAVE_OPEN_EX 1
#define GDR_OPEN_FLAG_ALLOW_VULKAN (1u << 0)
gdr_t gdr_open_ex(uint32_t flags);

#ifdef __cplusplus
}
#endif

#endif /* GDRAPI_H */
