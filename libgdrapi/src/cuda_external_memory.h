/* SPDX-License-Identifier: MIT */
/*
 * The CUDA driver structs the vulkan backend passes to
 * cuImportExternalMemory, cuExternalMemoryGetMappedBuffer and
 * cuMemGetAllocationPropertiesFromHandle, laid out as
 * the CUDA driver ABI has them (64-bit).  libcuda is dlopen()ed, so no
 * cuda.h is included; the unit tests' fake libcuda uses the same layouts.
 */
#ifndef GDR_CUDA_EXTERNAL_MEMORY_H
#define GDR_CUDA_EXTERNAL_MEMORY_H

#define CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD 1

struct cuda_external_memory_handle_desc {
	int type;
	union {
		int fd;
		struct {
			void *handle;
			const void *name;
		} win32;
		const void *nv_sci_buf_object;
	} handle;
	unsigned long long size;
	unsigned int flags;
	unsigned int reserved[16];
};
_Static_assert(sizeof(struct cuda_external_memory_handle_desc) == 104, "CUDA_EXTERNAL_MEMORY_HANDLE_DESC");

struct cuda_external_memory_buffer_desc {
	unsigned long long offset;
	unsigned long long size;
	unsigned int flags;
	unsigned int reserved[16];
};
_Static_assert(sizeof(struct cuda_external_memory_buffer_desc) == 88, "CUDA_EXTERNAL_MEMORY_BUFFER_DESC");

/*
 * CUmemAllocationProp, which cuMemGetAllocationPropertiesFromHandle fills:
 * how a cuMemCreate allocation was asked for.  The vulkan backend reads where
 * it lives and whether a POSIX fd may be exported from it.
 */
#define CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR 0x1
#define CU_MEM_LOCATION_TYPE_DEVICE 0x1

struct cuda_mem_allocation_prop {
	int type;			/* CU_MEM_ALLOCATION_TYPE_PINNED (1) */
	int requested_handle_types;	/* CU_MEM_HANDLE_TYPE_* bits */
	struct {
		int type;		/* CU_MEM_LOCATION_TYPE_* */
		int id;			/* the device ordinal when type is DEVICE */
	} location;
	void *win32_handle_meta_data;
	struct {
		unsigned char compression_type;
		unsigned char gpu_direct_rdma_capable;
		unsigned short usage;
		unsigned char reserved[4];
	} alloc_flags;
};
_Static_assert(sizeof(struct cuda_mem_allocation_prop) == 32, "CUmemAllocationProp");

#endif /* GDR_CUDA_EXTERNAL_MEMORY_H */
