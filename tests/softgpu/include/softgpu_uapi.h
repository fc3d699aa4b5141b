/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * softgpu: the test-only stand-in for an NVIDIA GPU.
 *
 * The softgpu kernel module exports the NVIDIA peer-to-peer kernel API
 * (nvidia_p2p_*) backed by host memory -- either the BAR of a qemu
 * ivshmem-plain PCI device (1af4:1110), which behaves like GPU BAR1, or plain
 * RAM reported as CPU-cacheable (a coherent platform).  /dev/softgpu is how
 * user space (our libcuda.so.1 and the kernel-level tests) allocates "GPU
 * memory" and moves bytes in and out of it.  This header is shared by the
 * module, libcuda.so.1 and the tests.
 *
 * Model:
 *  - Each open file of /dev/softgpu is one GPU virtual address space, owned
 *    by the opener's thread group.  Every ioctl from another thread group
 *    fails with EACCES (a fork child must open its own file).
 *  - GPU virtual addresses are unique across all spaces and 64 KiB aligned;
 *    sizes are rounded up to 64 KiB.  They are not host addresses.
 *  - nvidia_p2p_get_pages*() called by another module (gdrdrv) from a
 *    process resolve the address in that process's spaces only.  A legacy
 *    pin's p2p_token/va_space must name the caller's own space.
 *  - Freeing memory under a legacy pin fires the pin's free callback;
 *    persistent pins keep the pages alive until they are released.
 *  - Physical memory objects and address ranges are separate (as with CUDA's
 *    virtual memory management); SOFTGPU_IOC_ALLOC is create+reserve+map.
 *
 * Module parameters (read/write in /sys/module/softgpu/parameters) are the
 * test knobs; see the module for the list (page-table version, CPU-cacheable
 * flag, BAR1 limit, failure injection).
 */
#ifndef _UAPI_SOFTGPU_H
#define _UAPI_SOFTGPU_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/ioctl.h>
#include <linux/build_bug.h>
#define SOFTGPU_STATIC_ASSERT(expr, msg) static_assert(expr, msg)
#else
#include <linux/types.h>
#include <sys/ioctl.h>
#ifdef __cplusplus
#define SOFTGPU_STATIC_ASSERT(expr, msg) static_assert(expr, msg)
#else
#define SOFTGPU_STATIC_ASSERT(expr, msg) _Static_assert(expr, msg)
#endif
#endif

#define SOFTGPU_DEVICE_PATH "/dev/softgpu"
#define SOFTGPU_ABI_VERSION 1U
#define SOFTGPU_PAGE_SHIFT 16
#define SOFTGPU_PAGE_SIZE (1ULL << SOFTGPU_PAGE_SHIFT)
#define SOFTGPU_UUID_LEN 16

/* struct softgpu_info.flags */
#define SOFTGPU_INFO_BAR_BACKED 0x1U	/* memory is a PCI BAR (WC path) */
#define SOFTGPU_INFO_CPU_CACHEABLE 0x2U	/* page tables carry the CPU-cacheable flag */
#define SOFTGPU_INFO_PERSISTENT_API 0x4U /* nvidia_p2p_get_pages_persistent works */

/**
 * struct softgpu_info - SOFTGPU_IOC_GET_INFO: the device and the caller's space.
 * @abi_version:    SOFTGPU_ABI_VERSION.
 * @flags:          SOFTGPU_INFO_*.
 * @memory_size:    bytes of "GPU memory" in total.
 * @memory_used:    bytes allocated now (all spaces).
 * @p2p_token:      this file's space's P2P token (CU_POINTER_ATTRIBUTE_P2P_TOKENS).
 * @va_space:       this file's space's id.
 * @pci_domain, @pci_bus, @pci_device, @pci_function: where the device sits
 *                  (all 0 in RAM-backed mode).
 * @uuid:           the GPU UUID reported in page tables.
 * @name:           NUL-terminated device name.
 */
struct softgpu_info {
	__u32 abi_version;
	__u32 flags;
	__u64 memory_size;
	__u64 memory_used;
	__u64 p2p_token;
	__u32 va_space;
	__u32 pci_domain;
	__u32 pci_bus;
	__u32 pci_device;
	__u32 pci_function;
	__u32 pad;
	__u8 uuid[SOFTGPU_UUID_LEN];
	char name[64];
};

/** struct softgpu_alloc - SOFTGPU_IOC_ALLOC: @size in (rounded up to 64 KiB), @va out. */
struct softgpu_alloc {
	__u64 size;
	__u64 va;
};

/** struct softgpu_free - SOFTGPU_IOC_FREE: @va of an allocation made with ALLOC. */
struct softgpu_free {
	__u64 va;
};

#define SOFTGPU_COPY_TO_GPU 1U
#define SOFTGPU_COPY_FROM_GPU 2U

/**
 * struct softgpu_copy - SOFTGPU_IOC_COPY: move @size bytes between GPU
 * address @va and host pointer @host (either may be unaligned, may span
 * allocations that are contiguous in the space) in @direction.
 */
struct softgpu_copy {
	__u64 va;
	__u64 host;
	__u64 size;
	__u32 direction;
	__u32 pad;
};

/** struct softgpu_copy_d2d - SOFTGPU_IOC_COPY_D2D: GPU to GPU, ranges may overlap. */
struct softgpu_copy_d2d {
	__u64 dst;
	__u64 src;
	__u64 size;
};

/**
 * struct softgpu_memset - SOFTGPU_IOC_MEMSET: store @count elements of
 * @elem_size bytes (1, 2 or 4; @va aligned to it) of @value at @va.
 */
struct softgpu_memset {
	__u64 va;
	__u64 count;
	__u32 value;
	__u32 elem_size;
};

/**
 * struct softgpu_query - SOFTGPU_IOC_QUERY: which mapped range of the
 * caller's space holds @va.  ENOENT if none.
 * @base, @size:   out: the mapped range.
 * @alloc_base:    out: the start of the range it was reserved/allocated as.
 */
struct softgpu_query {
	__u64 va;
	__u64 base;
	__u64 size;
	__u64 alloc_base;
};

/* Virtual memory management (cuMemCreate and friends). */

/** struct softgpu_mem_create - SOFTGPU_IOC_MEM_CREATE: @size in, @handle out. */
struct softgpu_mem_create {
	__u64 size;
	__u64 handle;
};

/** struct softgpu_mem_release - SOFTGPU_IOC_MEM_RELEASE: drop @handle (memory lives while mapped). */
struct softgpu_mem_release {
	__u64 handle;
};

/** struct softgpu_va_reserve - SOFTGPU_IOC_VA_RESERVE: @size, @align (0 = 64 KiB) in; @va out. */
struct softgpu_va_reserve {
	__u64 size;
	__u64 align;
	__u64 va;
};

/** struct softgpu_va_free - SOFTGPU_IOC_VA_FREE: release a reservation (must be unmapped). */
struct softgpu_va_free {
	__u64 va;
	__u64 size;
};

/** struct softgpu_mem_map - SOFTGPU_IOC_MEM_MAP: map @size bytes of @handle from @offset at @va. */
struct softgpu_mem_map {
	__u64 va;
	__u64 size;
	__u64 handle;
	__u64 offset;
};

/** struct softgpu_mem_unmap - SOFTGPU_IOC_MEM_UNMAP: fires free callbacks of legacy pins in range. */
struct softgpu_mem_unmap {
	__u64 va;
	__u64 size;
};

#define SOFTGPU_DMABUF_FLAG_PCIE 0x1U /* CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE */

/**
 * struct softgpu_export_dmabuf - SOFTGPU_IOC_EXPORT_DMABUF: export
 * [@va, @va + @size) (host-page aligned) as a dma-buf whose mmap maps that
 * memory; @fd out (O_CLOEXEC).
 */
struct softgpu_export_dmabuf {
	__u64 va;
	__u64 size;
	__u32 flags;
	__s32 fd;
};

/**
 * struct softgpu_stats - SOFTGPU_IOC_GET_STATS: device-wide P2P counters, so
 * tests can check that a P2P client (gdrdrv) released everything it pinned.
 * @active_pins:     pins not yet released (legacy and persistent).
 * @pinned_bytes:    bytes under those pins (what the bar1_limit knob caps).
 * @legacy_pins:     of @active_pins, those pinned with a free callback.
 * @get_pages_calls: nvidia_p2p_get_pages*() calls, failed ones included.
 * @put_pages_calls: nvidia_p2p_put_pages*() calls, failed ones included.
 * @callbacks_fired: free callbacks run (memory freed under a legacy pin).
 * @memory_used:     bytes of "GPU memory" allocated, pinned-after-free included.
 * @api_misuse:      calls that broke the P2P API contract: put_pages on an
 *                   unknown or already revoked page table, free_page_table
 *                   outside a free callback, a callback that did not free its
 *                   page table.  Each one is also logged.
 */
struct softgpu_stats {
	__u64 active_pins;
	__u64 pinned_bytes;
	__u64 legacy_pins;
	__u64 get_pages_calls;
	__u64 put_pages_calls;
	__u64 callbacks_fired;
	__u64 memory_used;
	__u64 api_misuse;
};

#define SOFTGPU_IOCTL 0xB7
#define SOFTGPU_IOC_GET_INFO _IOR(SOFTGPU_IOCTL, 0x00, struct softgpu_info)
#define SOFTGPU_IOC_ALLOC _IOWR(SOFTGPU_IOCTL, 0x01, struct softgpu_alloc)
#define SOFTGPU_IOC_FREE _IOW(SOFTGPU_IOCTL, 0x02, struct softgpu_free)
#define SOFTGPU_IOC_COPY _IOW(SOFTGPU_IOCTL, 0x03, struct softgpu_copy)
#define SOFTGPU_IOC_COPY_D2D _IOW(SOFTGPU_IOCTL, 0x04, struct softgpu_copy_d2d)
#define SOFTGPU_IOC_MEMSET _IOW(SOFTGPU_IOCTL, 0x05, struct softgpu_memset)
#define SOFTGPU_IOC_QUERY _IOWR(SOFTGPU_IOCTL, 0x06, struct softgpu_query)
#define SOFTGPU_IOC_MEM_CREATE _IOWR(SOFTGPU_IOCTL, 0x07, struct softgpu_mem_create)
#define SOFTGPU_IOC_MEM_RELEASE _IOW(SOFTGPU_IOCTL, 0x08, struct softgpu_mem_release)
#define SOFTGPU_IOC_VA_RESERVE _IOWR(SOFTGPU_IOCTL, 0x09, struct softgpu_va_reserve)
#define SOFTGPU_IOC_VA_FREE _IOW(SOFTGPU_IOCTL, 0x0a, struct softgpu_va_free)
#define SOFTGPU_IOC_MEM_MAP _IOW(SOFTGPU_IOCTL, 0x0b, struct softgpu_mem_map)
#define SOFTGPU_IOC_MEM_UNMAP _IOW(SOFTGPU_IOCTL, 0x0c, struct softgpu_mem_unmap)
#define SOFTGPU_IOC_EXPORT_DMABUF _IOWR(SOFTGPU_IOCTL, 0x0d, struct softgpu_export_dmabuf)
#define SOFTGPU_IOC_GET_STATS _IOR(SOFTGPU_IOCTL, 0x0e, struct softgpu_stats)

SOFTGPU_STATIC_ASSERT(sizeof(struct softgpu_info) == 136, "softgpu_info");
SOFTGPU_STATIC_ASSERT(sizeof(struct softgpu_copy) == 32, "softgpu_copy");
SOFTGPU_STATIC_ASSERT(sizeof(struct softgpu_memset) == 24, "softgpu_memset");
SOFTGPU_STATIC_ASSERT(sizeof(struct softgpu_export_dmabuf) == 24, "softgpu_export_dmabuf");
SOFTGPU_STATIC_ASSERT(sizeof(struct softgpu_stats) == 64, "softgpu_stats");

#endif /* _UAPI_SOFTGPU_H */
