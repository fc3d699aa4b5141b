// SPDX-License-Identifier: MIT
/*
 * Virtual memory management (cuMemCreate, cuMemAddressReserve, cuMemMap,
 * cuMemSetAccess, ...) and dma-buf export.
 *
 * The kernel module implements handles, reservations and mappings; this file
 * checks the arguments the way CUDA does, forwards them, and mirrors the
 * mappings so pointer queries and copies know the addresses.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

struct sg_vmm_mapping *sg_find_mapping_locked(uint64_t addr)
{
	struct sg_vmm_mapping *m;

	for (m = sg.mappings; m; m = m->next)
		if (addr >= m->va && addr < m->va + m->size)
			return m;
	return NULL;
}

static struct sg_vmm_handle *sg_find_handle_locked(uint64_t handle)
{
	struct sg_vmm_handle *h;

	for (h = sg.handles; h; h = h->next)
		if (h->handle == handle && !h->released)
			return h;
	return NULL;
}

static void sg_drop_handle_if_unused_locked(struct sg_vmm_handle *h)
{
	struct sg_vmm_handle **pp;

	if (!h->released || h->mappings)
		return;
	for (pp = &sg.handles; *pp; pp = &(*pp)->next) {
		if (*pp == h) {
			*pp = h->next;
			free(h);
			return;
		}
	}
}

/* After fork: the parent's handles and mappings are not in the child's space. */
void sg_vmm_forget(void)
{
	while (sg.mappings) {
		struct sg_vmm_mapping *m = sg.mappings;

		sg.mappings = m->next;
		free(m);
	}
	while (sg.handles) {
		struct sg_vmm_handle *h = sg.handles;

		sg.handles = h->next;
		free(h);
	}
	while (sg.reservations) {
		struct sg_vmm_reservation *r = sg.reservations;

		sg.reservations = r->next;
		free(r);
	}
}

/* Only pinned device memory on device 0 exists here. */
static CUresult sg_check_prop(const CUmemAllocationProp *prop)
{
	if (!prop)
		return CUDA_ERROR_INVALID_VALUE;
	if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
		sg_debug("softgpu has pinned device memory only (type PINNED, location DEVICE)");
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (prop->location.id != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE) {
		sg_debug("softgpu cannot export VMM handles (requestedHandleTypes must be NONE)");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (prop->allocFlags.compressionType != CU_MEM_ALLOCATION_COMP_NONE)
		return CUDA_ERROR_NOT_SUPPORTED;
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity,
						 const CUmemAllocationProp *prop,
						 CUmemAllocationGranularity_flags option)
{
	CUresult rc = sg_check_init();

	if (rc == CUDA_SUCCESS)
		rc = sg_check_prop(prop);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (!granularity)
		return CUDA_ERROR_INVALID_VALUE;
	switch (option) {
	case CU_MEM_ALLOC_GRANULARITY_MINIMUM:
		*granularity = SOFTGPU_PAGE_SIZE;
		return CUDA_SUCCESS;
	case CU_MEM_ALLOC_GRANULARITY_RECOMMENDED:
		*granularity = SG_VMM_RECOMMENDED_GRANULARITY;
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_INVALID_VALUE;
}

SG_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
			       const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct softgpu_mem_create req = { .size = size };
	struct sg_vmm_handle *h;
	CUresult rc = sg_check_init();
	int err;

	if (rc == CUDA_SUCCESS)
		rc = sg_check_prop(prop);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (!handle || flags || size == 0 || size % SOFTGPU_PAGE_SIZE) {
		sg_debug("cuMemCreate: size must be a non-zero multiple of the granularity "
			 "(%llu) and flags 0", SOFTGPU_PAGE_SIZE);
		return CUDA_ERROR_INVALID_VALUE;
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		return CUDA_ERROR_OUT_OF_MEMORY;
	err = sg_ioctl(SOFTGPU_IOC_MEM_CREATE, &req);
	if (err) {
		free(h);
		sg_debug("SOFTGPU_IOC_MEM_CREATE of %zu bytes failed: %s", size, strerror(err));
		return sg_errno_to_result(err);
	}
	h->handle = req.handle;
	h->size = size;
	h->prop = *prop;
	sg_lock();
	h->next = sg.handles;
	sg.handles = h;
	sg_unlock();
	*handle = req.handle;
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct softgpu_mem_release req = { .handle = handle };
	struct sg_vmm_handle *h;
	CUresult rc = sg_check_init();
	int err;

	if (rc != CUDA_SUCCESS)
		return rc;
	sg_lock();
	h = sg_find_handle_locked(handle);
	sg_unlock();
	if (!h)
		return CUDA_ERROR_INVALID_VALUE;
	err = sg_ioctl(SOFTGPU_IOC_MEM_RELEASE, &req);
	if (err)
		return sg_errno_to_result(err);
	sg_lock();
	h->released = 1;
	sg_drop_handle_if_unused_locked(h);
	sg_unlock();
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
				       CUdeviceptr addr, unsigned long long flags)
{
	struct softgpu_va_reserve req = { .size = size, .align = alignment };
	struct sg_vmm_reservation *r;
	CUresult rc = sg_check_init();
	int err;

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!ptr || flags || size == 0 || size % SOFTGPU_PAGE_SIZE ||
	    (alignment & (alignment - 1))) {
		sg_debug("cuMemAddressReserve: size must be a multiple of %llu, alignment 0 "
			 "or a power of two, flags 0", SOFTGPU_PAGE_SIZE);
		return CUDA_ERROR_INVALID_VALUE;
	}
	/* @addr is only a hint; softgpu picks addresses itself, as CUDA may. */
	(void)addr;
	r = calloc(1, sizeof(*r));
	if (!r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	err = sg_ioctl(SOFTGPU_IOC_VA_RESERVE, &req);
	if (err) {
		free(r);
		return sg_errno_to_result(err);
	}
	r->va = req.va;
	r->size = size;
	sg_lock();
	r->next = sg.reservations;
	sg.reservations = r;
	sg_unlock();
	*ptr = req.va;
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	struct softgpu_va_free req = { .va = ptr, .size = size };
	struct sg_vmm_reservation **pp, *r = NULL;
	CUresult rc = sg_check_init();
	int err;

	if (rc != CUDA_SUCCESS)
		return rc;
	err = sg_ioctl(SOFTGPU_IOC_VA_FREE, &req);
	if (err) {
		sg_debug("cuMemAddressFree(0x%llx, %zu): %s%s", (unsigned long long)ptr, size,
			 strerror(err), err == EBUSY ? " (unmap it first)" : "");
		return sg_errno_to_result(err == EBUSY ? EINVAL : err);
	}
	sg_lock();
	for (pp = &sg.reservations; *pp; pp = &(*pp)->next) {
		if ((*pp)->va == ptr) {
			r = *pp;
			*pp = r->next;
			break;
		}
	}
	sg_unlock();
	free(r);
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			    CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	struct softgpu_mem_map req = {
		.va = ptr, .size = size, .handle = handle, .offset = offset,
	};
	struct sg_vmm_mapping *m;
	struct sg_vmm_handle *h;
	CUresult rc = sg_check_init();
	int err;

	if (rc != CUDA_SUCCESS)
		return rc;
	if (flags || size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	sg_lock();
	h = sg_find_handle_locked(handle);
	sg_unlock();
	if (!h)
		return CUDA_ERROR_INVALID_HANDLE;
	m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	err = sg_ioctl(SOFTGPU_IOC_MEM_MAP, &req);
	if (err) {
		free(m);
		sg_debug("cuMemMap(0x%llx, %zu, offset %zu): %s; the range must lie in a "
			 "reservation, be free, and be granularity-aligned",
			 (unsigned long long)ptr, size, offset, strerror(err));
		return sg_errno_to_result(err == EBUSY ? EINVAL : err);
	}
	m->va = ptr;
	m->size = size;
	m->handle = h;
	m->sync_memops = 1;
	sg_lock();
	m->buffer_id = sg.next_buffer_id++;
	h->mappings++;
	m->next = sg.mappings;
	sg.mappings = m;
	sg_unlock();
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	struct softgpu_mem_unmap req = { .va = ptr, .size = size };
	struct sg_vmm_mapping **pp;
	CUresult rc = sg_check_init();
	int err;

	if (rc != CUDA_SUCCESS)
		return rc;
	err = sg_ioctl(SOFTGPU_IOC_MEM_UNMAP, &req);
	if (err) {
		sg_debug("cuMemUnmap(0x%llx, %zu): %s; unmap whole mappings only",
			 (unsigned long long)ptr, size, strerror(err));
		return sg_errno_to_result(err);
	}
	sg_lock();
	for (pp = &sg.mappings; *pp;) {
		struct sg_vmm_mapping *m = *pp;

		if (m->va >= ptr && m->va + m->size <= ptr + size) {
			*pp = m->next;
			m->handle->mappings--;
			sg_drop_handle_if_unused_locked(m->handle);
			free(m);
		} else {
			pp = &m->next;
		}
	}
	sg_unlock();
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
				  size_t count)
{
	unsigned int access = CU_MEM_ACCESS_FLAGS_PROT_NONE;
	struct sg_vmm_mapping *m;
	uint64_t covered = 0;
	CUresult rc = sg_check_init();
	size_t i;

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!desc || count == 0 || size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < count; i++) {
		if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
			return CUDA_ERROR_INVALID_VALUE;
		if (desc[i].location.id != 0)
			return CUDA_ERROR_INVALID_DEVICE;
		if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
		    desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
		    desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			return CUDA_ERROR_INVALID_VALUE;
		access = desc[i].flags;
	}
	sg_lock();
	/* The whole range must be mapped. */
	for (m = sg.mappings; m; m = m->next)
		if (m->va >= ptr && m->va + m->size <= ptr + size)
			covered += m->size;
	if (covered != size) {
		sg_unlock();
		sg_debug("cuMemSetAccess(0x%llx, %zu): the range is not entirely mapped",
			 (unsigned long long)ptr, size);
		return CUDA_ERROR_INVALID_VALUE;
	}
	for (m = sg.mappings; m; m = m->next)
		if (m->va >= ptr && m->va + m->size <= ptr + size)
			m->access = access;
	sg_unlock();
	return CUDA_SUCCESS;
}

SG_EXPORT CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
						 CUmemRangeHandleType handleType,
						 unsigned long long flags)
{
	struct softgpu_export_dmabuf req = { .va = dptr, .size = size };
	long page = sysconf(_SC_PAGESIZE);
	enum sg_space space;
	CUresult rc = sg_require_ctx(NULL);
	int err;

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!handle || handleType != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || size == 0 ||
	    (dptr | size) % (uint64_t)page) {
		sg_debug("cuMemGetHandleForAddressRange: need a DMA_BUF_FD handle type and a "
			 "host-page-aligned address and size");
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (flags & ~(unsigned long long)CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE)
		return CUDA_ERROR_INVALID_VALUE;
	/* The PCIe mapping type arrived with driver 13.3; emulate older drivers. */
	if ((flags & CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE) &&
	    sg_driver_version() < SG_DEFAULT_DRIVER_VERSION) {
		sg_debug("CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE needs driver 13030, "
			 "this one reports %d", sg_driver_version());
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	rc = sg_classify(dptr, size, &space);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (space != SG_SPACE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	if (flags & CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE)
		req.flags |= SOFTGPU_DMABUF_FLAG_PCIE;
	err = sg_ioctl(SOFTGPU_IOC_EXPORT_DMABUF, &req);
	if (err) {
		sg_debug("SOFTGPU_IOC_EXPORT_DMABUF(0x%llx, %zu) failed: %s",
			 (unsigned long long)dptr, size, strerror(err));
		return sg_errno_to_result(err);
	}
	*(int *)handle = req.fd;
	return CUDA_SUCCESS;
}
