/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The NVIDIA peer-to-peer kernel API as softgpu exports it.
 *
 * These are our own declarations of the ABI that nvidia.ko exports (see
 * nv-p2p-abi.md in the project's reference notes).  The layouts must match
 * the real driver byte for byte: gdrdrv, built against its own copy of the
 * same ABI, reads these structures directly.
 */
#ifndef SOFTGPU_P2P_H
#define SOFTGPU_P2P_H

#include <linux/types.h>
#include <linux/build_bug.h>
#include <linux/stddef.h>

#define NVIDIA_P2P_MAJOR_VERSION_MASK 0xffff0000U
#define NVIDIA_P2P_MINOR_VERSION_MASK 0x0000ffffU
#define NVIDIA_P2P_VERSION(major, minor) (((major) << 16) | (minor))

/* Page-table versions of the drivers softgpu can pretend to be. */
#define SOFTGPU_P2P_PAGE_TABLE_VERSION_1_2 NVIDIA_P2P_VERSION(1U, 2U)
#define SOFTGPU_P2P_PAGE_TABLE_VERSION_2_0 NVIDIA_P2P_VERSION(2U, 0U)

/* Only a 2.x page table has the flags field. */
#define NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE 0x1U

#define NVIDIA_P2P_FLAGS_DEFAULT 0U
#define NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING 1U

#define NVIDIA_P2P_GPU_UUID_LEN 16

enum nvidia_p2p_page_size_type {
	NVIDIA_P2P_PAGE_SIZE_4KB = 0,
	NVIDIA_P2P_PAGE_SIZE_64KB,
	NVIDIA_P2P_PAGE_SIZE_128KB,
	NVIDIA_P2P_PAGE_SIZE_COUNT
};

/*
 * Spelled as NVIDIA's nv-p2p.h spells them (uint64_t, not u64; the union's
 * tag): genksyms hashes the spelling, so softgpu exports the nvidia_p2p_*
 * symbol versions of the real 2.x-page-table drivers, and a gdrdrv built for
 * those (a prebuilt module, gdrdrv's own declarations) loads next to it.
 */
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
	uint32_t version;
	uint32_t page_size;
	struct nvidia_p2p_page **pages;
	uint32_t entries;
	uint8_t *gpu_uuid;
	uint32_t flags;	/* page-table version 2.0 and later only */
};

/* Obsolete; only its name appears in the API. */
struct nvidia_p2p_params;

static_assert(sizeof(struct nvidia_p2p_page) == 32, "nvidia_p2p_page");
static_assert(offsetof(struct nvidia_p2p_page_table, page_size) == 4, "page_size");
static_assert(offsetof(struct nvidia_p2p_page_table, pages) == 8, "pages");
static_assert(offsetof(struct nvidia_p2p_page_table, entries) == 16, "entries");
static_assert(offsetof(struct nvidia_p2p_page_table, gpu_uuid) == 24, "gpu_uuid");
static_assert(offsetof(struct nvidia_p2p_page_table, flags) == 32, "flags");

extern int nvidia_p2p_cap_persistent_pages;

int nvidia_p2p_init_mapping(uint64_t p2p_token, struct nvidia_p2p_params *params,
			    void (*destroy_callback)(void *data), void *data);
int nvidia_p2p_destroy_mapping(uint64_t p2p_token);
int nvidia_p2p_get_pages(uint64_t p2p_token, uint32_t va_space, uint64_t virtual_address,
			 uint64_t length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data);
int nvidia_p2p_put_pages(uint64_t p2p_token, uint32_t va_space, uint64_t virtual_address,
			 struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_get_pages_persistent(uint64_t virtual_address, uint64_t length,
				    struct nvidia_p2p_page_table **page_table,
				    uint32_t flags);
int nvidia_p2p_put_pages_persistent(uint64_t virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    uint32_t flags);

#endif /* SOFTGPU_P2P_H */
