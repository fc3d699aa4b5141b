/* SPDX-License-Identifier: MIT */
/*
 * Private state of softgpu's libcuda.so.1.
 *
 * One process, one device (ordinal 0), one /dev/softgpu file = one GPU
 * virtual address space.  The library keeps host-side tables of what it
 * allocated so it can answer pointer queries and tell host pointers from GPU
 * addresses (unified addressing) without a system call; the kernel module
 * stays the authority on what memory exists.
 */
#ifndef SOFTGPU_LIBCUDA_INTERNAL_H
#define SOFTGPU_LIBCUDA_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "cuda.h"
#include "softgpu_uapi.h"

#define SG_EXPORT __attribute__((visibility("default")))

/* The driver version we report unless SOFTGPU_CUDA_DRIVER_VERSION says otherwise. */
#define SG_DEFAULT_DRIVER_VERSION 13030

/*
 * cuMemAlloc packing, as measured on a real CUDA 13 driver: allocations are
 * carved at 512-byte granularity out of 2 MiB chunks; sizes up to 1 MiB
 * share chunks, larger ones get a chunk of their own.
 */
#define SG_ALLOC_GRANULE 512ULL
#define SG_SHARED_CHUNK_SIZE (2ULL << 20)
#define SG_SHARED_MAX_SIZE (1ULL << 20)

/* VMM granularity: softgpu's page is the minimum, 2 MiB is recommended. */
#define SG_VMM_RECOMMENDED_GRANULARITY (2ULL << 20)

/* A chunk obtained with SOFTGPU_IOC_ALLOC, holding one or more cuMemAlloc blocks. */
struct sg_chunk {
	struct sg_chunk *next;
	uint64_t va;
	uint64_t size;
	int shared;		/* sub-allocates small blocks, page by page */
	unsigned int blocks;	/* live blocks; the chunk is freed at 0 */
	/* Shared chunks: blocks using each GPU page; a page is backed while > 0. */
	unsigned short page_users[SG_SHARED_CHUNK_SIZE / SOFTGPU_PAGE_SIZE];
};

/* One cuMemAlloc allocation. */
struct sg_block {
	struct sg_block *next;	/* sorted by va within the whole process */
	struct sg_chunk *chunk;
	uint64_t va;
	uint64_t size;		/* as requested */
	uint64_t reserved;	/* size rounded to SG_ALLOC_GRANULE */
	CUcontext ctx;
	unsigned long long buffer_id;
	unsigned int sync_memops;
};

/* One cuMemAllocHost / cuMemHostAlloc allocation (host memory, UVA-mapped). */
struct sg_host_alloc {
	struct sg_host_alloc *next;
	void *ptr;
	size_t size;		/* as requested */
	size_t mapped;		/* page-rounded length of the mmap */
	unsigned int flags;
	CUcontext ctx;
	unsigned long long buffer_id;
};

/* A cuMemCreate physical allocation. */
struct sg_vmm_handle {
	struct sg_vmm_handle *next;
	uint64_t handle;	/* the kernel's handle, also ours */
	uint64_t size;
	CUmemAllocationProp prop;
	int released;		/* cuMemRelease called; lives on while mapped */
	unsigned int mappings;
};

/* A cuMemAddressReserve range. */
struct sg_vmm_reservation {
	struct sg_vmm_reservation *next;
	uint64_t va;
	uint64_t size;
};

/* A cuMemMap mapping. */
struct sg_vmm_mapping {
	struct sg_vmm_mapping *next;
	uint64_t va;
	uint64_t size;
	struct sg_vmm_handle *handle;
	unsigned int access;	/* CUmemAccess_flags, set by cuMemSetAccess */
	unsigned int sync_memops;
	unsigned long long buffer_id;
};

struct CUctx_st {
	uint32_t magic;
	CUdevice device;
	unsigned int flags;
	int primary;
	int alive;		/* 0 once destroyed (or a primary released to 0) */
	unsigned int primary_refs;
	struct CUstream_st *default_stream;
};

struct sg_process {
	pthread_mutex_t lock;
	int fd;			/* /dev/softgpu, -1 when closed */
	pid_t owner;		/* the process fd belongs to */
	int initialized;	/* cuInit succeeded in this process */
	struct softgpu_info info;
	struct sg_chunk *chunks;
	struct sg_block *blocks;
	struct sg_host_alloc *host_allocs;
	struct sg_vmm_handle *handles;
	struct sg_vmm_reservation *reservations;
	struct sg_vmm_mapping *mappings;
	unsigned long long next_buffer_id;
	struct CUctx_st primary_ctx;
};

extern struct sg_process sg;

/* Variants cuda.h (CUDA 13) no longer names; CUDA 12 programs link them. */
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
			unsigned int flags, CUdevice dev);

/* init.c */
void sg_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
CUresult sg_check_init(void);
CUresult sg_check_device(CUdevice dev);
CUresult sg_errno_to_result(int err);
int sg_ioctl(unsigned long request, void *arg);
int sg_driver_version(void);
void sg_lock(void);
void sg_unlock(void);

/* context.c */
CUcontext sg_current_ctx(void);
CUresult sg_require_ctx(CUcontext *ctx_out);
int sg_ctx_valid(CUcontext ctx);
void sg_streams_forget(void);
void sg_ctx_streams_reset(CUcontext ctx);
CUresult sg_ctx_sync(CUcontext ctx);
void sg_ctx_free_memory(CUcontext ctx);

/* memory.c */
void sg_memory_forget_device(void);
struct sg_host_alloc *sg_find_host_locked(uint64_t addr);
struct sg_block *sg_find_block_locked(uint64_t addr);
struct sg_vmm_mapping *sg_find_mapping_locked(uint64_t addr);
void sg_alloc_lock_for_fork(int lock);

/* Where an address lives, for copies. */
enum sg_space { SG_SPACE_HOST, SG_SPACE_DEVICE };
CUresult sg_classify(uint64_t addr, size_t size, enum sg_space *space);
CUresult sg_copy(uint64_t dst, uint64_t src, size_t size);

/* vmm.c */
void sg_vmm_forget(void);

/* module.c */
CUresult sg_stream_wait(struct CUstream_st *stream);

#define SG_CTX_MAGIC 0x43545853U	/* "SXTC" */

#endif /* SOFTGPU_LIBCUDA_INTERNAL_H */
