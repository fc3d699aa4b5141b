// SPDX-License-Identifier: MIT
/*
 * cuMemAlloc and friends, host allocations, copies, memset and pointer
 * attributes.
 *
 * cuMemAlloc packs blocks into chunks the way the real driver does (see
 * SG_SHARED_* in internal.h), so small allocations share 64 KiB GPU pages and
 * come back at addresses that are not 64 KiB aligned, which GDRCopy's tests
 * rely on.  A chunk goes back to the kernel (SOFTGPU_IOC_FREE, which fires
 * the free callbacks of legacy pins) when its last block is freed.
 *
 * Host allocations are anonymous mappings; with unified addressing their
 * device pointer is the host pointer itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

static uint64_t sg_round_up(uint64_t v, uint64_t to)
{
	return (v + to - 1) / to * to;
}

struct sg_host_alloc *sg_find_host_locked(uint64_t addr)
{
	struct sg_host_alloc *h;

	for (h = sg.host_allocs; h; h = h->next)
		if (addr >= (uint64_t)(uintptr_t)h->ptr &&
		    addr < (uint64_t)(uintptr_t)h->ptr + h->size)
			return h;
	return NULL;
}

struct sg_block *sg_find_block_locked(uint64_t addr)
{
	struct sg_block *b;

	for (b = sg.blocks; b && b->va <= addr; b = b->next)
		if (addr < b->va + (b->size ? b->size : 1))
			return b;
	return NULL;
}

/*
 * The allocator lock serializes cuMemAlloc/cuMemFree, which call into the
 * kernel several times per operation; sg.lock only guards table updates.
 */
static pthread_mutex_t sg_alloc_lock = PTHREAD_MUTEX_INITIALIZER;

void sg_alloc_lock_for_fork(int lock)
{
	if (lock)
		pthread_mutex_lock(&sg_alloc_lock);
	else
		pthread_mutex_unlock(&sg_alloc_lock);
}

/* First-fit: the lowest gap in chunk @c that holds @need bytes. */
static int sg_chunk_find_gap(struct sg_chunk *c, uint64_t need, uint64_t *va_out)
{
	uint64_t cursor = c->va;
	struct sg_block *b;

	for (b = sg.blocks; b; b = b->next) {
		if (b->chunk != c)
			continue;
		if (b->va - cursor >= need) {
			*va_out = cursor;
			return 0;
		}
		cursor = b->va + b->reserved;
	}
	if (c->va + c->size - cursor >= need) {
		*va_out = cursor;
		return 0;
	}
	return -1;
}

static void sg_insert_block_locked(struct sg_block *nb)
{
	struct sg_block **pp = &sg.blocks;

	while (*pp && (*pp)->va < nb->va)
		pp = &(*pp)->next;
	nb->next = *pp;
	*pp = nb;
}

static void sg_unlink_chunk(struct sg_chunk *c)
{
	struct sg_chunk **pp;

	sg_lock();
	for (pp = &sg.chunks; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	sg_unlock();
}

/* A chunk of its own for a large allocation: create, reserve and map at once. */
static CUresult sg_new_private_chunk(uint64_t size, struct sg_chunk **out)
{
	struct softgpu_alloc req = { .size = size };
	struct sg_chunk *c = calloc(1, sizeof(*c));
	int err;

	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	err = sg_ioctl(SOFTGPU_IOC_ALLOC, &req);
	if (err) {
		free(c);
		sg_debug("SOFTGPU_IOC_ALLOC of %llu bytes failed: %s",
			 (unsigned long long)size, strerror(err));
		return sg_errno_to_result(err);
	}
	c->va = req.va;
	c->size = sg_round_up(size, SOFTGPU_PAGE_SIZE);
	sg_lock();
	c->next = sg.chunks;
	sg.chunks = c;
	sg_unlock();
	*out = c;
	return CUDA_SUCCESS;
}

/*
 * A shared chunk is only an address range at first; each 64 KiB GPU page in
 * it is backed (created and mapped) when a block first uses it and unmapped
 * when its last block is freed.  So freeing an allocation revokes the pages
 * it used alone -- legacy pins on them get their free callback -- while
 * pages it shares with live neighbours stay.
 */
static CUresult sg_new_shared_chunk(struct sg_chunk **out)
{
	struct softgpu_va_reserve req = { .size = SG_SHARED_CHUNK_SIZE };
	struct sg_chunk *c = calloc(1, sizeof(*c));
	int err;

	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	err = sg_ioctl(SOFTGPU_IOC_VA_RESERVE, &req);
	if (err) {
		free(c);
		sg_debug("SOFTGPU_IOC_VA_RESERVE of a %llu-byte chunk failed: %s",
			 SG_SHARED_CHUNK_SIZE, strerror(err));
		return sg_errno_to_result(err);
	}
	c->va = req.va;
	c->size = SG_SHARED_CHUNK_SIZE;
	c->shared = 1;
	sg_lock();
	c->next = sg.chunks;
	sg.chunks = c;
	sg_unlock();
	*out = c;
	return CUDA_SUCCESS;
}

static int sg_back_page(uint64_t va)
{
	struct softgpu_mem_create create = { .size = SOFTGPU_PAGE_SIZE };
	struct softgpu_mem_release release;
	struct softgpu_mem_map map = { .va = va, .size = SOFTGPU_PAGE_SIZE };
	int err;

	err = sg_ioctl(SOFTGPU_IOC_MEM_CREATE, &create);
	if (err)
		return err;
	map.handle = create.handle;
	err = sg_ioctl(SOFTGPU_IOC_MEM_MAP, &map);
	/* The mapping keeps the memory; the handle is not needed any more. */
	release.handle = create.handle;
	sg_ioctl(SOFTGPU_IOC_MEM_RELEASE, &release);
	return err;
}

static void sg_unback_page(uint64_t va)
{
	struct softgpu_mem_unmap req = { .va = va, .size = SOFTGPU_PAGE_SIZE };
	int err = sg_ioctl(SOFTGPU_IOC_MEM_UNMAP, &req);

	if (err)
		sg_debug("SOFTGPU_IOC_MEM_UNMAP of GPU page 0x%llx failed: %s",
			 (unsigned long long)va, strerror(err));
}

static unsigned int sg_first_page(struct sg_chunk *c, uint64_t va)
{
	return (unsigned int)((va - c->va) / SOFTGPU_PAGE_SIZE);
}

static unsigned int sg_last_page(struct sg_chunk *c, uint64_t va, uint64_t len)
{
	return (unsigned int)((va + len - 1 - c->va) / SOFTGPU_PAGE_SIZE);
}

/* Drop one user from pages [first, last]; unback pages left unused. */
static void sg_put_page_range(struct sg_chunk *c, unsigned int first, unsigned int last)
{
	unsigned int p;

	for (p = first; p <= last; p++)
		if (--c->page_users[p] == 0)
			sg_unback_page(c->va + (uint64_t)p * SOFTGPU_PAGE_SIZE);
}

static void sg_put_pages(struct sg_chunk *c, uint64_t va, uint64_t len)
{
	sg_put_page_range(c, sg_first_page(c, va), sg_last_page(c, va, len));
}

/* Add a user to each page of [va, va + len), backing pages that had none. */
static CUresult sg_get_pages(struct sg_chunk *c, uint64_t va, uint64_t len)
{
	unsigned int p, first = sg_first_page(c, va), last = sg_last_page(c, va, len);
	int err;

	for (p = first; p <= last; p++) {
		if (c->page_users[p] == 0) {
			err = sg_back_page(c->va + (uint64_t)p * SOFTGPU_PAGE_SIZE);
			if (err) {
				sg_debug("backing GPU page 0x%llx failed: %s",
					 (unsigned long long)(c->va + (uint64_t)p * SOFTGPU_PAGE_SIZE),
					 strerror(err));
				if (p > first)
					sg_put_page_range(c, first, p - 1);
				return sg_errno_to_result(err);
			}
		}
		c->page_users[p]++;
	}
	return CUDA_SUCCESS;
}

/* Give a chunk without blocks back to the kernel. */
static void sg_release_chunk(struct sg_chunk *c)
{
	int err;

	sg_unlink_chunk(c);
	if (c->shared) {
		struct softgpu_va_free req = { .va = c->va, .size = c->size };

		err = sg_ioctl(SOFTGPU_IOC_VA_FREE, &req);
	} else {
		struct softgpu_free req = { .va = c->va };

		err = sg_ioctl(SOFTGPU_IOC_FREE, &req);
	}
	if (err)
		sg_debug("returning chunk 0x%llx to softgpu failed: %s",
			 (unsigned long long)c->va, strerror(err));
	free(c);
}

SG_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	uint64_t reserved = sg_round_up(bytesize, SG_ALLOC_GRANULE);
	struct sg_chunk *c = NULL;
	struct sg_block *nb;
	CUcontext ctx;
	uint64_t va = 0;
	CUresult rc;

	rc = sg_require_ctx(&ctx);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (!dptr || bytesize == 0)
		return CUDA_ERROR_INVALID_VALUE;
	nb = calloc(1, sizeof(*nb));
	if (!nb)
		return CUDA_ERROR_OUT_OF_MEMORY;

	pthread_mutex_lock(&sg_alloc_lock);
	if (reserved <= SG_SHARED_MAX_SIZE) {
		for (c = sg.chunks; c; c = c->next)
			if (c->shared && !sg_chunk_find_gap(c, reserved, &va))
				break;
		if (!c) {
			rc = sg_new_shared_chunk(&c);
			va = c ? c->va : 0;
		}
		if (rc == CUDA_SUCCESS) {
			rc = sg_get_pages(c, va, reserved);
			if (rc != CUDA_SUCCESS && !c->blocks)
				sg_release_chunk(c);
		}
	} else {
		rc = sg_new_private_chunk(reserved, &c);
		va = c ? c->va : 0;
	}
	if (rc != CUDA_SUCCESS) {
		pthread_mutex_unlock(&sg_alloc_lock);
		free(nb);
		return rc;
	}
	c->blocks++;
	nb->chunk = c;
	nb->va = va;
	nb->size = bytesize;
	nb->reserved = reserved;
	nb->ctx = ctx;
	nb->sync_memops = 1;
	sg_lock();
	nb->buffer_id = sg.next_buffer_id++;
	sg_insert_block_locked(nb);
	sg_unlock();
	pthread_mutex_unlock(&sg_alloc_lock);
	*dptr = va;
	return CUDA_SUCCESS;
}

/* Free one block; the allocator lock is held. */
static void sg_free_block(struct sg_block *block)
{
	struct sg_chunk *c = block->chunk;
	struct sg_block **pp;

	sg_lock();
	for (pp = &sg.blocks; *pp; pp = &(*pp)->next) {
		if (*pp == block) {
			*pp = block->next;
			break;
		}
	}
	sg_unlock();
	if (c->shared)
		sg_put_pages(c, block->va, block->reserved);
	free(block);
	if (--c->blocks == 0)
		sg_release_chunk(c);
}

/*
 * The allocation is found by its address (unified addressing), so the
 * calling thread needs no current context.  What the real driver (580,
 * CUDA 13.0, H200) answers, by tools/probe-contextless-on-h200.out: a live
 * allocation is freed from a thread with no current context (CUDA_SUCCESS),
 * 0 is CUDA_SUCCESS, an address that is no allocation (freed already, a
 * host address) is CUDA_ERROR_INVALID_VALUE; but a thread whose current
 * context was destroyed gets CUDA_ERROR_CONTEXT_IS_DESTROYED and frees
 * nothing, even an allocation of a live context.
 */
SG_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	struct sg_block *b;
	CUcontext cur;
	CUresult rc = sg_check_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	cur = sg_current_ctx();
	if (cur && !sg_ctx_valid(cur)) {
		sg_debug("cuMemFree: the current context was destroyed");
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	}
	if (!dptr)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&sg_alloc_lock);
	sg_lock();
	b = sg_find_block_locked(dptr);
	sg_unlock();
	if (!b || b->va != dptr) {
		pthread_mutex_unlock(&sg_alloc_lock);
		sg_debug("cuMemFree(0x%llx): not the start of a cuMemAlloc allocation",
			 (unsigned long long)dptr);
		return CUDA_ERROR_INVALID_VALUE;
	}
	sg_free_block(b);
	pthread_mutex_unlock(&sg_alloc_lock);
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	struct sg_vmm_mapping *m;
	struct sg_block *b;
	CUresult rc = sg_require_ctx(NULL);

	if (rc != CUDA_SUCCESS)
		return rc;
	sg_lock();
	b = sg_find_block_locked(dptr);
	m = b ? NULL : sg_find_mapping_locked(dptr);
	if (b || m) {
		if (pbase)
			*pbase = b ? b->va : m->va;
		if (psize)
			*psize = b ? b->size : m->size;
	}
	sg_unlock();
	return b || m ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

SG_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
	struct softgpu_info info;
	CUresult rc = sg_require_ctx(NULL);
	int err;

	if (rc != CUDA_SUCCESS)
		return rc;
	memset(&info, 0, sizeof(info));
	err = sg_ioctl(SOFTGPU_IOC_GET_INFO, &info);
	if (err)
		return sg_errno_to_result(err);
	if (free_bytes)
		*free_bytes = info.memory_size - info.memory_used;
	if (total)
		*total = info.memory_size;
	return CUDA_SUCCESS;
}

/* Free every cuMemAlloc block and host allocation made in a dying context. */
void sg_ctx_free_memory(CUcontext ctx)
{
	struct sg_host_alloc **hp;
	struct sg_block *b;

	pthread_mutex_lock(&sg_alloc_lock);
	do {
		sg_lock();
		for (b = sg.blocks; b && b->ctx != ctx; b = b->next)
			;
		sg_unlock();
		if (b)
			sg_free_block(b);
	} while (b);
	pthread_mutex_unlock(&sg_alloc_lock);

	sg_lock();
	for (hp = &sg.host_allocs; *hp;) {
		struct sg_host_alloc *h = *hp;

		if (h->ctx == ctx) {
			*hp = h->next;
			munmap(h->ptr, h->mapped);
			free(h);
		} else {
			hp = &h->next;
		}
	}
	sg_unlock();
}

/* After fork: the parent's GPU allocations do not exist in the child's space. */
void sg_memory_forget_device(void)
{
	while (sg.blocks) {
		struct sg_block *b = sg.blocks;

		sg.blocks = b->next;
		free(b);
	}
	while (sg.chunks) {
		struct sg_chunk *c = sg.chunks;

		sg.chunks = c->next;
		free(c);
	}
}

/* ---- Host memory ---- */

static CUresult sg_host_alloc(void **pp, size_t bytesize, unsigned int flags)
{
	long page = sysconf(_SC_PAGESIZE);
	struct sg_host_alloc *h;
	CUcontext ctx;
	CUresult rc = sg_require_ctx(&ctx);
	void *p;

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!pp || bytesize == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (flags & ~(unsigned int)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
				    CU_MEMHOSTALLOC_WRITECOMBINED))
		return CUDA_ERROR_INVALID_VALUE;
	h = calloc(1, sizeof(*h));
	if (!h)
		return CUDA_ERROR_OUT_OF_MEMORY;
	h->mapped = sg_round_up(bytesize, (uint64_t)page);
	p = mmap(NULL, h->mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		free(h);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	/* Page-locked, as the name promises; failure (RLIMIT_MEMLOCK) is not fatal. */
	if (mlock(p, h->mapped))
		sg_debug("mlock of %zu host bytes failed: %s", h->mapped, strerror(errno));
	h->ptr = p;
	h->size = bytesize;
	h->flags = flags;
	h->ctx = ctx;
	sg_lock();
	h->buffer_id = sg.next_buffer_id++;
	h->next = sg.host_allocs;
	sg.host_allocs = h;
	sg_unlock();
	*pp = p;
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	return sg_host_alloc(pp, bytesize, 0);
}

SG_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	return sg_host_alloc(pp, bytesize, Flags);
}

SG_EXPORT CUresult cuMemFreeHost(void *p)
{
	struct sg_host_alloc **hp, *h = NULL;
	CUresult rc = sg_check_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	sg_lock();
	for (hp = &sg.host_allocs; *hp; hp = &(*hp)->next) {
		if ((*hp)->ptr == p) {
			h = *hp;
			*hp = h->next;
			break;
		}
	}
	sg_unlock();
	if (!h) {
		sg_debug("cuMemFreeHost(%p): not a cuMemAllocHost/cuMemHostAlloc pointer", p);
		return CUDA_ERROR_INVALID_VALUE;
	}
	munmap(h->ptr, h->mapped);
	free(h);
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	struct sg_host_alloc *h;
	CUresult rc = sg_require_ctx(NULL);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!pdptr || Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	sg_lock();
	h = sg_find_host_locked((uint64_t)(uintptr_t)p);
	sg_unlock();
	if (!h)
		return CUDA_ERROR_INVALID_VALUE;
	/* Unified addressing: the device names host memory by its host address. */
	*pdptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

/* ---- Copies and memset ---- */

/*
 * Host or device?  GPU addresses are those of our cuMemAlloc blocks and VMM
 * mappings; everything else (pinned or pageable) is host memory.  A range
 * must not straddle the two.
 */
CUresult sg_classify(uint64_t addr, size_t size, enum sg_space *space)
{
	struct sg_vmm_mapping *m;
	struct sg_block *b;
	CUresult rc = CUDA_SUCCESS;

	sg_lock();
	b = sg_find_block_locked(addr);
	m = b ? NULL : sg_find_mapping_locked(addr);
	if (m && !(m->access & CU_MEM_ACCESS_FLAGS_PROT_READ)) {
		sg_debug("0x%llx is mapped without access: call cuMemSetAccess first",
			 (unsigned long long)addr);
		rc = CUDA_ERROR_INVALID_VALUE;
	}
	*space = b || m ? SG_SPACE_DEVICE : SG_SPACE_HOST;
	if (*space == SG_SPACE_HOST && size &&
	    (sg_find_block_locked(addr + size - 1) || sg_find_mapping_locked(addr + size - 1)))
		rc = CUDA_ERROR_INVALID_VALUE;
	sg_unlock();
	return rc;
}

static CUresult sg_copy_ioctl(uint64_t va, uint64_t host, size_t size, unsigned int dir)
{
	struct softgpu_copy req = {
		.va = va, .host = host, .size = size, .direction = dir,
	};
	int err = sg_ioctl(SOFTGPU_IOC_COPY, &req);

	if (err) {
		sg_debug("SOFTGPU_IOC_COPY %s 0x%llx (%zu bytes) failed: %s",
			 dir == SOFTGPU_COPY_TO_GPU ? "to" : "from", (unsigned long long)va,
			 size, strerror(err));
		return sg_errno_to_result(err);
	}
	return CUDA_SUCCESS;
}

CUresult sg_copy(uint64_t dst, uint64_t src, size_t size)
{
	enum sg_space ds, ss;
	CUresult rc;
	int err;

	if (size == 0)
		return CUDA_SUCCESS;
	rc = sg_classify(dst, size, &ds);
	if (rc == CUDA_SUCCESS)
		rc = sg_classify(src, size, &ss);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (ds == SG_SPACE_HOST && ss == SG_SPACE_HOST) {
		memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, size);
		return CUDA_SUCCESS;
	}
	if (ds == SG_SPACE_DEVICE && ss == SG_SPACE_HOST)
		return sg_copy_ioctl(dst, src, size, SOFTGPU_COPY_TO_GPU);
	if (ds == SG_SPACE_HOST)
		return sg_copy_ioctl(src, dst, size, SOFTGPU_COPY_FROM_GPU);
	{
		struct softgpu_copy_d2d req = { .dst = dst, .src = src, .size = size };

		err = sg_ioctl(SOFTGPU_IOC_COPY_D2D, &req);
		if (err)
			sg_debug("SOFTGPU_IOC_COPY_D2D 0x%llx <- 0x%llx (%zu bytes) failed: %s",
				 (unsigned long long)dst, (unsigned long long)src, size,
				 strerror(err));
		return sg_errno_to_result(err);
	}
}

/*
 * With unified addressing the real driver works out each side itself, also
 * for the typed copies: cuMemcpyDtoH into device memory succeeds there
 * (probed on CUDA 13.0).  A side a typed copy calls "device" must still be
 * memory the device can address: GPU memory or mapped host memory.
 */
static CUresult sg_copy_typed(uint64_t dst, int dst_device, uint64_t src, int src_device,
			      size_t size)
{
	CUresult rc = sg_require_ctx(NULL);
	enum sg_space space;
	int i;

	if (rc != CUDA_SUCCESS)
		return rc;
	for (i = 0; i < 2; i++) {
		uint64_t addr = i ? src : dst;
		int mapped_host;

		if (!(i ? src_device : dst_device) || !size)
			continue;
		rc = sg_classify(addr, size, &space);
		if (rc != CUDA_SUCCESS)
			return rc;
		if (space == SG_SPACE_DEVICE)
			continue;
		sg_lock();
		mapped_host = sg_find_host_locked(addr) != NULL;
		sg_unlock();
		if (!mapped_host) {
			sg_debug("0x%llx is not a device address (cuMemAlloc, cuMemMap or mapped "
				 "host memory of this process)", (unsigned long long)addr);
			return CUDA_ERROR_INVALID_VALUE;
		}
	}
	return sg_copy(dst, src, size);
}

SG_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	CUresult rc = sg_require_ctx(NULL);

	if (rc != CUDA_SUCCESS)
		return rc;
	return sg_copy(dst, src, ByteCount);
}

SG_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	return sg_copy_typed(dstDevice, 1, (uint64_t)(uintptr_t)srcHost, 0, ByteCount);
}

SG_EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	return sg_copy_typed((uint64_t)(uintptr_t)dstHost, 0, srcDevice, 1, ByteCount);
}

SG_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	return sg_copy_typed(dstDevice, 1, srcDevice, 1, ByteCount);
}

/* Asynchronous copies complete before returning: the stream only orders them. */
SG_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
				 CUstream hStream)
{
	(void)hStream;
	return cuMemcpy(dst, src, ByteCount);
}

SG_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
					size_t ByteCount, CUstream hStream)
{
	(void)hStream;
	return cuMemcpyHtoD_v2(dstDevice, srcHost, ByteCount);
}

SG_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
					CUstream hStream)
{
	(void)hStream;
	return cuMemcpyDtoH_v2(dstHost, srcDevice, ByteCount);
}

static CUresult sg_memset(CUdeviceptr dst, uint32_t value, size_t count, unsigned int elem)
{
	enum sg_space space;
	CUresult rc = sg_require_ctx(NULL);
	size_t i;

	if (rc != CUDA_SUCCESS)
		return rc;
	if (dst % elem)
		return CUDA_ERROR_INVALID_VALUE;
	if (count == 0)
		return CUDA_SUCCESS;
	rc = sg_classify(dst, count * elem, &space);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (space == SG_SPACE_HOST) {
		int mapped;

		sg_lock();
		mapped = sg_find_host_locked(dst) != NULL;
		sg_unlock();
		if (!mapped)
			return CUDA_ERROR_INVALID_VALUE;
		for (i = 0; i < count; i++) {
			char *p = (char *)(uintptr_t)dst + i * elem;

			if (elem == 1)
				*(uint8_t *)p = (uint8_t)value;
			else if (elem == 2)
				*(uint16_t *)p = (uint16_t)value;
			else
				*(uint32_t *)p = value;
		}
		return CUDA_SUCCESS;
	}
	{
		struct softgpu_memset req = {
			.va = dst, .count = count, .value = value, .elem_size = elem,
		};
		int err = sg_ioctl(SOFTGPU_IOC_MEMSET, &req);

		if (err)
			sg_debug("SOFTGPU_IOC_MEMSET at 0x%llx failed: %s",
				 (unsigned long long)dst, strerror(err));
		return sg_errno_to_result(err);
	}
}

SG_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	return sg_memset(dstDevice, uc, N, 1);
}

SG_EXPORT CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
	return sg_memset(dstDevice, us, N, 2);
}

SG_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
	return sg_memset(dstDevice, ui, N, 4);
}

/* ---- Pointer attributes ---- */

/* What an address belongs to, copied out under the lock. */
struct sg_pointer_info {
	int kind;		/* 0 none, 1 cuMemAlloc, 2 VMM, 3 host */
	CUcontext ctx;
	uint64_t base, size;	/* the allocation (RANGE_*) */
	uint64_t map_base, map_size; /* what backs it (MAPPING_*) */
	unsigned long long buffer_id;
	unsigned int sync_memops;
	unsigned int access;
	unsigned int rdma_capable;
	unsigned long long handle_types;
	unsigned int *sync_memops_slot;
};

static void sg_pointer_info_locked(uint64_t ptr, struct sg_pointer_info *pi)
{
	struct sg_host_alloc *h;
	struct sg_vmm_mapping *m;
	struct sg_block *b;

	memset(pi, 0, sizeof(*pi));
	b = sg_find_block_locked(ptr);
	if (b) {
		pi->kind = 1;
		pi->ctx = b->ctx;
		pi->base = b->va;
		pi->size = b->size;
		pi->map_base = b->chunk->va;
		pi->map_size = b->chunk->size;
		pi->buffer_id = b->buffer_id;
		pi->sync_memops = b->sync_memops;
		pi->sync_memops_slot = &b->sync_memops;
		pi->access = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		pi->rdma_capable = 1;
		return;
	}
	m = sg_find_mapping_locked(ptr);
	if (m) {
		pi->kind = 2;
		pi->ctx = sg_current_ctx();
		pi->base = pi->map_base = m->va;
		pi->size = pi->map_size = m->size;
		pi->buffer_id = m->buffer_id;
		pi->sync_memops = m->sync_memops;
		pi->sync_memops_slot = &m->sync_memops;
		pi->access = m->access;
		pi->rdma_capable = m->handle->prop.allocFlags.gpuDirectRDMACapable;
		pi->handle_types = m->handle->prop.requestedHandleTypes;
		return;
	}
	h = sg_find_host_locked(ptr);
	if (h) {
		pi->kind = 3;
		pi->ctx = h->ctx;
		pi->base = pi->map_base = (uint64_t)(uintptr_t)h->ptr;
		pi->size = h->size;
		pi->map_size = h->mapped;
		pi->buffer_id = h->buffer_id;
		pi->access = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	}
}

#define SG_PUT(type, value) do { *(type *)data = (type)(value); } while (0)

SG_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute,
					 CUdeviceptr ptr)
{
	struct sg_pointer_info pi;
	CUresult rc = sg_check_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	sg_lock();
	sg_pointer_info_locked(ptr, &pi);
	sg_unlock();
	if (!pi.kind) {
		sg_debug("cuPointerGetAttribute(0x%llx): not memory this library allocated",
			 (unsigned long long)ptr);
		return CUDA_ERROR_INVALID_VALUE;
	}

	switch (attribute) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		SG_PUT(CUcontext, pi.ctx);
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		SG_PUT(unsigned int, pi.kind == 3 ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE);
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		SG_PUT(CUdeviceptr, ptr);
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (pi.kind != 3) {
			SG_PUT(void *, NULL);
			return CUDA_ERROR_INVALID_VALUE;
		}
		SG_PUT(void *, (void *)(uintptr_t)ptr);
		break;
	case CU_POINTER_ATTRIBUTE_P2P_TOKENS: {
		/* The real driver writes 12 bytes: the token and the va space. */
		CUDA_POINTER_ATTRIBUTE_P2P_TOKENS tokens = { 0, 0 };

		if (pi.kind != 3) {
			tokens.p2pToken = sg.info.p2p_token;
			tokens.vaSpaceToken = sg.info.va_space;
		}
		memcpy(data, &tokens, sizeof(tokens.p2pToken) + sizeof(tokens.vaSpaceToken));
		if (pi.kind == 3)
			return CUDA_ERROR_INVALID_VALUE;
		break;
	}
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
		SG_PUT(unsigned int, pi.sync_memops);
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		SG_PUT(unsigned long long, pi.buffer_id);
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		SG_PUT(unsigned int, 0);
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		SG_PUT(int, 0);
		break;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		SG_PUT(unsigned int, pi.kind == 1);
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		SG_PUT(CUdeviceptr, pi.base);
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		SG_PUT(size_t, pi.size);
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		SG_PUT(unsigned int, 1);
		break;
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
		SG_PUT(unsigned long long, pi.handle_types);
		break;
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
		SG_PUT(unsigned int, pi.rdma_capable);
		break;
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		SG_PUT(unsigned int, pi.access);
		break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		SG_PUT(void *, NULL);
		break;
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		SG_PUT(size_t, pi.map_size);
		break;
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		SG_PUT(void *, (void *)(uintptr_t)pi.map_base);
		break;
	default:
		sg_debug("pointer attribute %d is not emulated by softgpu", (int)attribute);
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

/*
 * Several attributes at once, as the real driver (580, H200) answers them
 * (tools/probe-pointer-attributes.c, its output beside it): memory it knows
 * gets each attribute as cuPointerGetAttribute gives it, except that an
 * attribute which does not apply (the host pointer of device memory) is
 * written as 0 without failing the call; memory it does not know is no
 * error either: no context, type 0, device pointer 0, host pointer = ptr,
 * ordinal -2, 0 for the flags and buffer id, the range left untouched.
 */
SG_EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
					  void **data, CUdeviceptr ptr)
{
	struct sg_pointer_info pi;
	CUresult rc = sg_check_init();
	unsigned int i;

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!numAttributes || !attributes || !data)
		return CUDA_ERROR_INVALID_VALUE;
	sg_lock();
	sg_pointer_info_locked(ptr, &pi);
	sg_unlock();
	for (i = 0; i < numAttributes; i++) {
		void *out = data[i];

		if (!out)
			return CUDA_ERROR_INVALID_VALUE;
		if (pi.kind) {
			if (cuPointerGetAttribute(out, attributes[i], ptr) == CUDA_SUCCESS)
				continue;
			/* Not applicable here: the real driver writes 0 and goes on. */
			switch (attributes[i]) {
			case CU_POINTER_ATTRIBUTE_HOST_POINTER:
			case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
				*(void **)out = NULL;
				continue;
			default:
				return CUDA_ERROR_INVALID_VALUE;
			}
		}
		switch (attributes[i]) {
		case CU_POINTER_ATTRIBUTE_CONTEXT:
			*(CUcontext *)out = NULL;
			break;
		case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
		case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		case CU_POINTER_ATTRIBUTE_MAPPED:
			*(unsigned int *)out = 0;
			break;
		case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
			*(CUdeviceptr *)out = 0;
			break;
		case CU_POINTER_ATTRIBUTE_HOST_POINTER:
			*(void **)out = (void *)(uintptr_t)ptr;
			break;
		case CU_POINTER_ATTRIBUTE_BUFFER_ID:
			*(unsigned long long *)out = 0;
			break;
		case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
			*(int *)out = -2;
			break;
		default:
			/* The range (and what was not probed) stays as the caller left it. */
			break;
		}
	}
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuPointerSetAttribute(const void *value, CUpointer_attribute attribute,
					 CUdeviceptr ptr)
{
	struct sg_pointer_info pi;
	CUresult rc = sg_check_init();

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	if (attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS) {
		sg_debug("cuPointerSetAttribute: only CU_POINTER_ATTRIBUTE_SYNC_MEMOPS can be set");
		return CUDA_ERROR_INVALID_VALUE;
	}
	sg_lock();
	sg_pointer_info_locked(ptr, &pi);
	/* As driver 580 on the H200 answers for cuMemCreate memory (tools/h200/vmm_pin.c prints it). */
	if (pi.kind == 2) {
		sg_unlock();
		sg_debug("cuPointerSetAttribute: SYNC_MEMOPS cannot be set on cuMemCreate memory");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (pi.sync_memops_slot)
		*pi.sync_memops_slot = *(const unsigned int *)value ? 1 : 0;
	sg_unlock();
	return pi.sync_memops_slot ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
