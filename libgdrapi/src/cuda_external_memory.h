/* SPDX-License-Identifier: MIT */
/*
 * The two CUDA driver structs the vulkan backend passes to
 * cuImportExternalMemory and cuExternalMemoryGetMappedBuffer, laid out as
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

#endif /* GDR_CUDA_EXTERNAL_MEMORY_H */
