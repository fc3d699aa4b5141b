/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * gdrdrv ioctl ABI: the contract between the gdrdrv kernel module and every
 * user of /dev/gdrdrv (libgdrapi, the kernel-level tests).  It is binary
 * compatible with GDRCopy 2.6's driver, so either library works with either
 * driver.  The kernel module, the library and the tests all include this one
 * file; nobody keeps a copy.
 *
 * Conventions: every ioctl is _IOWR on magic 0xDA and returns 0 or -1 with
 * errno set.  A process may only use the file it (its thread group) opened:
 * any ioctl or mmap from another process -- a fork child, or a receiver of
 * the fd over SCM_RIGHTS -- fails with EACCES.  Unknown commands fail with
 * ENOTTY.  Handles are per open file.
 *
 * Mapping a pinned buffer: mmap(NULL, size rounded up to the host page,
 * PROT_READ | PROT_WRITE, MAP_SHARED, fd, handle << host page shift).
 */
#ifndef _UAPI_GDRDRV_H
#define _UAPI_GDRDRV_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/ioctl.h>
#include <linux/build_bug.h>
#define GDRDRV_STATIC_ASSERT(expr, msg) static_assert(expr, msg)
#else
#include <linux/types.h>
#include <sys/ioctl.h>
#include <stddef.h>
#ifdef __cplusplus
#define GDRDRV_STATIC_ASSERT(expr, msg) static_assert(expr, msg)
#else
#define GDRDRV_STATIC_ASSERT(expr, msg) _Static_assert(expr, msg)
#endif
#endif

#define GDRDRV_DEVICE_NAME "gdrdrv"

/* Versions are (major << 16) | minor. */
#define GDRDRV_MAJOR_VERSION_SHIFT 16
#define GDRDRV_MINOR_VERSION_MASK 0xffffU
#define GDRDRV_MAKE_VERSION(major, minor) \
	(((major) << GDRDRV_MAJOR_VERSION_SHIFT) | (minor))
/*
 * The interface version GDRDRV_IOC_GET_VERSION reports: GDRCopy 2.6's.  A
 * literal, so that this header stands alone; the driver and the library
 * fail to build if it differs from the product version they are built with
 * (include/gdrcopy_version.h, which they include themselves).
 */
#define GDRDRV_VERSION GDRDRV_MAKE_VERSION(2, 6)
/* The oldest libgdrapi this driver serves. */
#define GDRDRV_MINIMUM_GDR_API_VERSION GDRDRV_MAKE_VERSION(2, 0)

/* Driver versions from which the library may use each feature. */
#define GDRDRV_VERSION_WITH_GET_INFO_V2 GDRDRV_MAKE_VERSION(2, 4)
#define GDRDRV_VERSION_WITH_PIN_V2 GDRDRV_MAKE_VERSION(2, 5)

/* GPU pages are 64 KiB: pins are rounded out to them. */
#define GDRDRV_GPU_PAGE_SHIFT 16
#define GDRDRV_GPU_PAGE_SIZE (1ULL << GDRDRV_GPU_PAGE_SHIFT)
#define GDRDRV_GPU_PAGE_OFFSET (GDRDRV_GPU_PAGE_SIZE - 1)
#define GDRDRV_GPU_PAGE_MASK (~GDRDRV_GPU_PAGE_OFFSET)

/* enum gdr_mr_type values: how a pinned buffer is (or is to be) mapped. */
#define GDRDRV_MR_NONE 0U	/* not mapped / no preference */
#define GDRDRV_MR_WC 1U		/* write-combined */
#define GDRDRV_MR_CACHING 2U	/* CPU-cached (coherent platforms) */
#define GDRDRV_MR_DEVICE 3U	/* device memory (Arm64 with BlueField-3) */
#define GDRDRV_MR_TYPE_COUNT 4U

/* GDRDRV_IOC_GET_ATTR attributes. */
#define GDRDRV_ATTR_USE_PERSISTENT_MAPPING 1U
#define GDRDRV_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE 2U
/*
 * 1 when a fork child inherits the mappings of this driver's buffers (no
 * VM_DONTCOPY).  Ours only (since 2.6.1): GDRCopy's drivers fail it with
 * EINVAL, and the library asks it only of our driver (a misc device), since
 * NVIDIA's number for the same question is not known.
 */
#define GDRDRV_ATTR_VMA_INHERITED_ON_FORK 3U

/* GDRDRV_IOC_PIN_BUFFER_V2 flags. */
#define GDRDRV_PIN_BUFFER_FLAG_DEFAULT 0x0U
#define GDRDRV_PIN_BUFFER_FLAG_FORCE_PCIE 0x1U
#define GDRDRV_PIN_BUFFER_FLAGS_ALL GDRDRV_PIN_BUFFER_FLAG_FORCE_PCIE

#define GDRDRV_IOCTL 0xDA

/**
 * struct gdrdrv_pin_buffer - GDRDRV_IOC_PIN_BUFFER argument (legacy pin).
 * @addr:      in: GPU virtual address; rounded down to 64 KiB.
 * @size:      in: bytes; the end is rounded up to 64 KiB.
 * @p2p_token: in: CUDA P2P token; must be 0 when persistent mapping is in use.
 * @va_space:  in: CUDA VA-space id; must be 0 when persistent mapping is in use.
 * @pad:       ignored: GDRCopy 2.6's library leaves it uninitialised.
 * @handle:    out: the handle of the pinned buffer.
 */
struct gdrdrv_pin_buffer {
	__u64 addr;
	__u64 size;
	__u64 p2p_token;
	__u32 va_space;
	__u32 pad;
	__u64 handle;
};

/**
 * struct gdrdrv_pin_buffer_v2 - GDRDRV_IOC_PIN_BUFFER_V2 argument.
 * @addr:   in: GPU virtual address; rounded down to 64 KiB.
 * @size:   in: bytes; the end is rounded up to 64 KiB.
 * @flags:  in: GDRDRV_PIN_BUFFER_FLAG_*; unknown bits fail with EINVAL.
 * @pad:    must be 0.
 * @handle: out: the handle of the pinned buffer.
 */
struct gdrdrv_pin_buffer_v2 {
	__u64 addr;
	__u64 size;
	__u32 flags;
	__u32 pad;
	__u64 handle;
};

/**
 * struct gdrdrv_unpin_buffer - GDRDRV_IOC_UNPIN_BUFFER argument.
 * @handle: in: a handle PIN_BUFFER or PIN_BUFFER_V2 returned on this file;
 *          unknown ones fail with EINVAL.
 */
struct gdrdrv_unpin_buffer {
	__u64 handle;
};

/**
 * struct gdrdrv_get_cb_flag - GDRDRV_IOC_GET_CB_FLAG argument.
 * @handle: in.
 * @flag:   out: 1 once the GPU memory was freed under a legacy pin
 *          (the buffer is invalidated and any mapping zapped), else 0.
 * @pad:    not read; written back as the caller passed it.
 */
struct gdrdrv_get_cb_flag {
	__u64 handle;
	__u32 flag;
	__u32 pad;
};

/**
 * struct gdrdrv_get_info - GDRDRV_IOC_GET_INFO argument (drivers < 2.4 style).
 * @handle:      in.
 * @va:          out: the pinned range's start (64 KiB aligned).
 * @mapped_size: out: the pinned range's length (multiple of 64 KiB).
 * @page_size:   out: GPU page size (65536).
 * @tsc_khz:     out: CPU timestamp counter frequency, 0 if unknown.
 * @tm_cycles:   out: TSC cycles the pin took.
 * @mapped:      out: 1 while mapped.
 * @wc_mapping:  out: 1 while mapped write-combined.
 */
struct gdrdrv_get_info {
	__u64 handle;
	__u64 va;
	__u64 mapped_size;
	__u32 page_size;
	__u32 tsc_khz;
	__u64 tm_cycles;
	__u32 mapped;
	__u32 wc_mapping;
};

/**
 * struct gdrdrv_get_info_v2 - GDRDRV_IOC_GET_INFO_V2 argument.
 * @handle:       in.
 * @va:           out: the pinned range's start (64 KiB aligned).
 * @mapped_size:  out: the pinned range's length (multiple of 64 KiB).
 * @page_size:    out: GPU page size (65536).
 * @tsc_khz:      out: CPU timestamp counter frequency, 0 if unknown.
 * @tm_cycles:    out: TSC cycles the pin took.
 * @mapping_type: out: GDRDRV_MR_* of the current mapping, GDRDRV_MR_NONE
 *                while unmapped.
 * @pad:          out: 0.
 *
 * As struct gdrdrv_get_info, with @mapping_type in place of the two
 * booleans.
 */
struct gdrdrv_get_info_v2 {
	__u64 handle;
	__u64 va;
	__u64 mapped_size;
	__u32 page_size;
	__u32 tsc_khz;
	__u64 tm_cycles;
	__u32 mapping_type;
	__u32 pad;
};

/**
 * struct gdrdrv_get_attr - GDRDRV_IOC_GET_ATTR argument.
 * @attr: in: GDRDRV_ATTR_*; unknown ones fail with EINVAL.
 * @val:  out.
 */
struct gdrdrv_get_attr {
	__u32 attr;
	__u32 val;
};

/**
 * struct gdrdrv_req_mapping_type - GDRDRV_IOC_REQ_MAPPING_TYPE argument.
 * @handle:       in.
 * @mapping_type: in: GDRDRV_MR_* the next mmap must use; GDRDRV_MR_NONE
 *                clears the request.  EBUSY while mapped, EOPNOTSUPP when
 *                the buffer or platform cannot be mapped that way.
 * @pad:          not read.
 */
struct gdrdrv_req_mapping_type {
	__u64 handle;
	__u32 mapping_type;
	__u32 pad;
};

/**
 * struct gdrdrv_get_version - GDRDRV_IOC_GET_VERSION argument.
 * @gdrdrv_version:          out: GDRDRV_VERSION.
 * @minimum_gdr_api_version: out: GDRDRV_MINIMUM_GDR_API_VERSION.
 */
struct gdrdrv_get_version {
	__u32 gdrdrv_version;
	__u32 minimum_gdr_api_version;
};

/*
 * The ioctl numbers.  Compatibility note: GDRCopy's driver declared all but
 * the two PIN commands with a pointer type, so their size field is
 * sizeof(void *) instead of the struct size.  We must accept exactly those
 * numbers, hence the explicit size below; the driver's compat_ioctl also
 * accepts the 32-bit (size 4) spellings.
 */
#define GDRDRV_IOC_PTRSIZE_QUIRK(nr) \
	_IOC(_IOC_READ | _IOC_WRITE, GDRDRV_IOCTL, (nr), sizeof(void *))

#define GDRDRV_IOC_PIN_BUFFER _IOWR(GDRDRV_IOCTL, 1, struct gdrdrv_pin_buffer)
#define GDRDRV_IOC_UNPIN_BUFFER GDRDRV_IOC_PTRSIZE_QUIRK(2)
#define GDRDRV_IOC_GET_CB_FLAG GDRDRV_IOC_PTRSIZE_QUIRK(3)
#define GDRDRV_IOC_GET_INFO GDRDRV_IOC_PTRSIZE_QUIRK(4)
#define GDRDRV_IOC_GET_INFO_V2 GDRDRV_IOC_PTRSIZE_QUIRK(5)
#define GDRDRV_IOC_GET_ATTR GDRDRV_IOC_PTRSIZE_QUIRK(6)
#define GDRDRV_IOC_PIN_BUFFER_V2 _IOWR(GDRDRV_IOCTL, 7, struct gdrdrv_pin_buffer_v2)
#define GDRDRV_IOC_REQ_MAPPING_TYPE GDRDRV_IOC_PTRSIZE_QUIRK(8)
#define GDRDRV_IOC_GET_VERSION GDRDRV_IOC_PTRSIZE_QUIRK(0xff)

/* The layouts are ABI: any change here breaks every deployed library. */
GDRDRV_STATIC_ASSERT(sizeof(struct gdrdrv_pin_buffer) == 40, "PIN_BUFFER size");
GDRDRV_STATIC_ASSERT(offsetof(struct gdrdrv_pin_buffer, va_space) == 24, "va_space");
GDRDRV_STATIC_ASSERT(offsetof(struct gdrdrv_pin_buffer, handle) == 32, "PIN handle");
GDRDRV_STATIC_ASSERT(sizeof(struct gdrdrv_pin_buffer_v2) == 32, "PIN_BUFFER_V2 size");
GDRDRV_STATIC_ASSERT(offsetof(struct gdrdrv_pin_buffer_v2, flags) == 16, "v2 flags");
GDRDRV_STATIC_ASSERT(offsetof(struct gdrdrv_pin_buffer_v2, handle) == 24, "v2 handle");
GDRDRV_STATIC_ASSERT(sizeof(struct gdrdrv_unpin_buffer) == 8, "UNPIN size");
GDRDRV_STATIC_ASSERT(sizeof(struct gdrdrv_get_cb_flag) == 16, "GET_CB_FLAG size");
GDRDRV_STATIC_ASSERT(offsetof(struct gdrdrv_get_cb_flag, flag) == 8, "cb flag");
GDRDRV_STATIC_ASSERT(sizeof(struct gdrdrv_get_info) == 48, "GET_INFO size");
GDRDRV_STATIC_ASSERT(offsetof(struct gdrdrv_get_info, page_size) == 24, "page_size");
GDRDRV_STATIC_ASSERT(offsetof(struct gdrdrv_get_info, tm_cycles) == 32, "tm_cycles");
GDRDRV_STATIC_ASSERT(offsetof(struct gdrdrv_get_info, mapped) == 40, "mapped");
GDRDRV_STATIC_ASSERT(offsetof(struct gdrdrv_get_info, wc_mapping) == 44, "wc_mapping");
GDRDRV_STATIC_ASSERT(sizeof(struct gdrdrv_get_info_v2) == 48, "GET_INFO_V2 size");
GDRDRV_STATIC_ASSERT(offsetof(struct gdrdrv_get_info_v2, mapping_type) == 40, "mapping_type");
GDRDRV_STATIC_ASSERT(sizeof(struct gdrdrv_get_attr) == 8, "GET_ATTR size");
GDRDRV_STATIC_ASSERT(sizeof(struct gdrdrv_req_mapping_type) == 16, "REQ_MAPPING_TYPE size");
GDRDRV_STATIC_ASSERT(sizeof(struct gdrdrv_get_version) == 8, "GET_VERSION size");

#endif /* _UAPI_GDRDRV_H */
