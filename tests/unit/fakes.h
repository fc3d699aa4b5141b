/* SPDX-License-Identifier: MIT */
/*
 * In-process stand-ins for what libgdrapi talks to, reached through the
 * linker's --wrap: a gdrdrv behind open/close/ioctl/mmap/munmap of the
 * device path, and a CUDA driver behind dlopen/dlsym/dlclose.  They follow
 * the documented driver semantics (include/uapi/gdrdrv.h) closely enough
 * that the library cannot tell, and count what the library asked for.
 * Thread-safe: the thread tests hammer them.
 */
#ifndef UNIT_FAKES_H
#define UNIT_FAKES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_VERSION(major, minor) (((uint32_t)(major) << 16) | (minor))

struct fake_gdrdrv_config {
	int open_errno;			/* open() fails with this */
	int version_errno;		/* GET_VERSION fails with this */
	uint32_t version;		/* driver version (major << 16 | minor) */
	uint32_t minimum_api;		/* minimum_gdr_api_version it reports */
	uint32_t default_type;		/* GDRDRV_MR_* when no type is requested */
	uint32_t unsupported_types;	/* bit mask: REQ_MAPPING_TYPE -> EOPNOTSUPP */
	int pin_errno;			/* every pin fails with this */
	int attr_errno;			/* GET_ATTR fails with this */
	bool persistent;		/* GDRDRV_ATTR_USE_PERSISTENT_MAPPING */
	bool force_pcie;		/* FORCE_PCIE supported */
	int force_pcie_refused_errno;	/* the NVIDIA driver refuses FORCE_PCIE pins with this */
	bool knows_vma_attr;		/* answers GDRDRV_ATTR_VMA_INHERITED_ON_FORK (else EINVAL) */
	bool vma_inherited;		/* ... with this */
	bool refuse_p2p_tokens;		/* legacy PIN_BUFFER with tokens -> EPERM (our gdrdrv without allow_p2p_tokens) */
	uint32_t tsc_khz;
};

/* A 2.6 driver, WC mappings, persistent. */
struct fake_gdrdrv_config fake_gdrdrv_default(void);

/*
 * Reset both fakes and install cfg.  device is the path the library opens
 * (the fake answers open() of exactly that path).
 */
void fake_reset(const struct fake_gdrdrv_config *cfg);

/* Counters and state the tests check. */
unsigned int fake_ioctl_count(unsigned int nr);	/* by ioctl number (1..8, 0xff) */
unsigned int fake_open_count(void);
int fake_last_open_flags(void);
unsigned int fake_live_files(void);
unsigned int fake_live_pins(void);
unsigned int fake_live_mappings(void);
uint64_t fake_last_pin_token(void);
uint32_t fake_last_pin_va_space(void);
uint32_t fake_last_pin_flags(void);
/* How often GET_ATTR was asked for attr. */
unsigned int fake_attr_queries(uint32_t attr);
/*
 * The next gdrdrv mmap lands at addr (MAP_FIXED_NOREPLACE), as the kernel
 * may put a new mapping where the application unmapped an old one.
 */
void fake_gdrdrv_next_map_at(void *addr);
/* Fire the "GPU memory freed" callback for the pin covering addr. */
void fake_gdrdrv_invalidate(unsigned long addr);

struct fake_cuda_config {
	bool present;			/* dlopen("libcuda.so.1") works */
	int driver_version;		/* e.g. 13030 */
	bool dmabuf_supported;		/* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */
	bool coherent;			/* PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES */
	int mmap_errno;			/* mmap of an exported fd fails with this */
	bool have_context;		/* the calling thread has a current context */
};

void fake_cuda_set(const struct fake_cuda_config *cfg);
/* GPU memory the fake CUDA recognises: [base, base + size). */
void fake_cuda_add_range(unsigned long base, size_t size);
unsigned int fake_cuda_live_fds(void);
unsigned long long fake_cuda_last_export_flags(void);
unsigned int fake_cuda_primary_retains(void);
unsigned int fake_cuda_primary_releases(void);
bool fake_cuda_loaded(void);

/*
 * A Vulkan loader (libvulkan.so.1) with one GPU whose BAR1 shows as a
 * device-local host-visible memory type, and the CUDA external-memory calls
 * the vulkan backend uses (fake_vulkan.c).  Absent until configured;
 * fake_reset() makes it absent again.  CUDA itself must be present too
 * (fake_cuda_set).
 */
struct fake_vulkan_config {
	bool present;			/* dlopen("libvulkan.so.1") works */
	bool bar1_visible;		/* a DEVICE_LOCAL | HOST_VISIBLE memory type exists */
	bool host_cached;		/* ... and it is HOST_CACHED (a coherent platform) */
	uint64_t heap_size;		/* bytes vkAllocateMemory hands out in all */
	bool create_device_fails;
	bool export_fails;		/* vkGetMemoryFdKHR */
	bool import_fails;		/* cuImportExternalMemory */
	bool misaligned_import;		/* CUDA maps imports off a 64 KiB boundary */
	bool no_vmm_calls;		/* libcuda lacks cuMemRetainAllocationHandle & co. */
	bool no_opaque_fd_import;	/* the device reports opaque fds not importable */
};

void fake_vulkan_set(const struct fake_vulkan_config *cfg);
void fake_vulkan_reset(void);
/* Instances, devices, allocations and CUDA imports not yet released. */
unsigned int fake_vulkan_live_objects(void);
/*
 * cuMemCreate allocations of the fake CUDA (fake_vulkan.c), as the real
 * driver (580, measured on the H200) treats them: backed by a memfd and
 * mapped at a host address, which is their "GPU" address, so that a Vulkan
 * import of their exported fd and that address name the same bytes.
 * handle_types is CUmemAllocationProp.requestedHandleTypes (1: POSIX fd);
 * device the CUDA ordinal (the fake Vulkan sees only device 0).
 */
unsigned long fake_cuda_vmm_create(size_t size, int handle_types, int device);
/* The caller's cuMemUnmap + cuMemRelease + cuMemAddressFree of what create returned. */
void fake_cuda_vmm_free(unsigned long addr);
/* Physical allocations alive (referenced by a handle or a Vulkan import). */
unsigned int fake_cuda_vmm_live(void);
/* Vulkan memory objects that import a CUDA allocation. */
unsigned int fake_cuda_vmm_imports(void);
/* Handle references (creation + retains) on the allocation mapped at addr; 0 if none. */
unsigned int fake_cuda_vmm_refs(unsigned long addr);

/* For fakes.c. */
void *fake_vulkan_dlopen(void);
bool fake_vulkan_is_handle(const void *handle);
void *fake_vulkan_dlsym(const char *name);
void *fake_vulkan_cuda_symbol(const char *name);

/* Capture what the library logs to stderr between begin and end. */
void log_capture_begin(void);
/* Returns the captured text (static buffer, NUL-terminated). */
const char *log_capture_end(void);

#endif /* UNIT_FAKES_H */
