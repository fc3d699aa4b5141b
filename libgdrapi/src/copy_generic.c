// SPDX-License-Identifier: MIT
/*
 * Copy routines and fences for architectures without a part of their own
 * (copy_x86.c, copy_arm64.c): portable C with 8-byte volatile accesses (the
 * compiler neither merges nor splits them), and the architecture's barriers.
 */
#if !defined(__x86_64__) && !defined(__i386__) && !defined(__aarch64__)

#include <stdatomic.h>
#include <string.h>

#include "copy.h"

bool gdr_arch_copy_routines_get(const char *name, struct gdr_copy_routines *r)
{
	(void)name;
	(void)r;
	return false;	/* only the portable "generic" set and "memcpy" exist here */
}

void gdr_arch_copy_routines_best(struct gdr_copy_routines *r)
{
	r->name = "generic";
	r->store_desc = r->load_desc = "portable C, 8-byte volatile accesses";
	r->store16 = gdr_generic_store16;
	r->load16 = gdr_generic_load16;
}

bool gdr_arch_fast_path_ok(void)
{
	return false;
}

void gdr_arch_store_fence(void)
{
#if defined(__powerpc64__)
	__asm__ volatile("sync" ::: "memory");
#else
	atomic_thread_fence(memory_order_seq_cst);
#endif
}

void gdr_arch_full_fence(void)
{
#if defined(__powerpc64__)
	__asm__ volatile("sync" ::: "memory");
#else
	atomic_thread_fence(memory_order_seq_cst);
#endif
}

#endif /* neither x86 nor arm64 */
