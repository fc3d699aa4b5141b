/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Our own declarations of the NVIDIA peer-to-peer kernel API (the ABI that
 * nvidia.ko exports), used when the NVIDIA driver sources, and with them the
 * real nv-p2p.h, are not available: builds against softgpu, compile tests,
 * packaging without a driver.  With NVIDIA sources present the Makefile
 * builds against their nv-p2p.h instead and this file is not used.
 *
 * The names are the API's own so that gdrdrv.c compiles unchanged against
 * either header.  The layouts are exact (64-bit): a wrong field here
 * corrupts memory on a real host, so the offsets are asserted below.
 *
 * The spelling matters too: with CONFIG_MODVERSIONS, genksyms hashes the
 * type NAMES of an exported function's declaration (and of the structs it
 * reaches), so 'u64' where nv-p2p.h says 'uint64_t' gives every nvidia_p2p_*
 * import a CRC that the real nvidia.ko does not export, and the kernel
 * refuses to load gdrdrv next to it.  Types, field names and field order
 * are therefore spelled exactly as in nv-p2p.h; scripts/p2p_crcs.sh checks
 * the CRCs against a real header.
 *
 * GDRDRV_P2P_PT_MAJOR (make variable of the same name) selects the page-table
 * generation to declare:
 *   2 (default) -- version 2.0, drivers 580 and newer: the page table has a
 *                  flags field carrying NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE;
 *   1           -- version 1.2, drivers 515 to 575: no flags field.
 *
 * GDRDRV_P2P_PERSISTENT_API (make variable, y or n; default y) declares the
 * persistent pin API, which drivers before 535 do not export: a gdrdrv that
 * imports it cannot load there.  Build with GDRDRV_P2P_PERSISTENT_API=n (and
 * GDRDRV_P2P_PT_MAJOR=1) for 515 to 530; gdrdrv then uses callback pins.
 */
#ifndef GDRDRV_NV_P2P_ABI_H
#define GDRDRV_NV_P2P_ABI_H

#include <linux/types.h>
#include <linux/stddef.h>
#include <linux/build_bug.h>

#ifndef GDRDRV_P2P_PT_MAJOR
#define GDRDRV_P2P_PT_MAJOR 2
#endif

#define NVIDIA_P2P_MAJOR_VERSION_MASK 0xffff0000
#define NVIDIA_P2P_MINOR_VERSION_MASK 0x0000ffff

#if GDRDRV_P2P_PT_MAJOR == 2
#define NVIDIA_P2P_PAGE_TABLE_VERSION 0x00020000
/* The CPU may map the pages cached (coherent platforms, CDMM). */
#define NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE 0x1
#elif GDRDRV_P2P_PT_MAJOR == 1
#define NVIDIA_P2P_PAGE_TABLE_VERSION 0x00010002
#else
#error "GDRDRV_P2P_PT_MAJOR must be 1 or 2"
#endif

#define NVIDIA_P2P_DMA_MAPPING_VERSION 0x00020003
#define NVIDIA_P2P_GPU_UUID_LEN 16

#ifndef GDRDRV_P2P_NO_PERSISTENT_API
/* The persistent pin API (nvidia_p2p_get_pages_persistent) is declared. */
#define NVIDIA_P2P_CAP_GET_PAGES_PERSISTENT_API
#endif

/* Flags of nvidia_p2p_get_pages_persistent(). */
#define NVIDIA_P2P_FLAGS_DEFAULT 0
/* Map through BAR1 even on coherent platforms (drivers 570 and newer). */
#define NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING 1

enum nvidia_p2p_page_size_type {
	NVIDIA_P2P_PAGE_SIZE_4KB = 0,
	NVIDIA_P2P_PAGE_SIZE_64KB = 1,
	NVIDIA_P2P_PAGE_SIZE_128KB = 2,
	NVIDIA_P2P_PAGE_SIZE_COUNT
};

/* One GPU page: its bus address, and registers only Fermi GPUs used. */
struct nvidia_p2p_page {
	uint64_t physical_address;
	union nvidia_p2p_request_registers {
		struct {
			uint32_t wreqmb_h;
			uint32_t rreqmb_h;
			uint32_t rreqmb_0;
			uint32_t reserved[3];
		} fermi;
	} registers;
};

struct nvidia_p2p_page_table {
	uint32_t version;			/* NVIDIA_P2P_PAGE_TABLE_VERSION */
	uint32_t page_size;			/* enum nvidia_p2p_page_size_type */
	struct nvidia_p2p_page **pages;	/* 'entries' pointers */
	uint32_t entries;
	uint8_t *gpu_uuid;			/* NVIDIA_P2P_GPU_UUID_LEN bytes */
#if GDRDRV_P2P_PT_MAJOR >= 2
	uint32_t flags;			/* NVIDIA_P2P_PAGE_TABLE_FLAGS_* */
#endif
};

#ifdef CONFIG_64BIT
static_assert(sizeof(struct nvidia_p2p_page) == 32);
static_assert(offsetof(struct nvidia_p2p_page_table, version) == 0);
static_assert(offsetof(struct nvidia_p2p_page_table, page_size) == 4);
static_assert(offsetof(struct nvidia_p2p_page_table, pages) == 8);
static_assert(offsetof(struct nvidia_p2p_page_table, entries) == 16);
static_assert(offsetof(struct nvidia_p2p_page_table, gpu_uuid) == 24);
#if GDRDRV_P2P_PT_MAJOR >= 2
static_assert(offsetof(struct nvidia_p2p_page_table, flags) == 32);
#endif
#endif

/*
 * Legacy pin: the pages stay pinned until nvidia_p2p_put_pages(), or until
 * the CUDA allocation is freed, in which case free_callback(data) runs; the
 * callback may only call nvidia_p2p_free_page_table().
 */
int nvidia_p2p_get_pages(uint64_t p2p_token, uint32_t va_space, uint64_t virtual_address,
			 uint64_t length,
			 struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data);
/* Blocks while a free callback for this pin is running. */
int nvidia_p2p_put_pages(uint64_t p2p_token, uint32_t va_space, uint64_t virtual_address,
			 struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table);

#ifdef NVIDIA_P2P_CAP_GET_PAGES_PERSISTENT_API
/*
 * Persistent pin: no callback; the pages outlive the CUDA allocation until
 * nvidia_p2p_put_pages_persistent().  Address and length 64 KiB aligned.
 */
int nvidia_p2p_get_pages_persistent(uint64_t virtual_address, uint64_t length,
				    struct nvidia_p2p_page_table **page_table,
				    uint32_t flags);
int nvidia_p2p_put_pages_persistent(uint64_t virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    uint32_t flags);
#endif

#endif /* GDRDRV_NV_P2P_ABI_H */
