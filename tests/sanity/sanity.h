/* SPDX-License-Identifier: MIT */
/*
 * sanity.h - what gdrcopy_sanity's tests share: registration, the selected
 * GPU, and helpers for the fork/fault/fd-passing scenarios.
 */
#ifndef GDRCOPY_SANITY_H
#define GDRCOPY_SANITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "testutil.h"

struct sanity_test {
	const char *name;
	void (*run)(void);
	bool extended;		/* only with -e */
};

/*
 * Tests register themselves: each descriptor's address goes into the
 * "sanity_tests" section, which the linker gathers into one array.
 */
#define SANITY_REGISTER(fn, is_extended)                                            \
	static void fn(void);                                                       \
	static const struct sanity_test sanity_desc_##fn = { #fn, fn, is_extended }; \
	static const struct sanity_test *const sanity_ptr_##fn                      \
		__attribute__((used, section("sanity_tests"))) = &sanity_desc_##fn;

#define SANITY_TEST(fn) SANITY_REGISTER(fn, false) static void fn(void)
#define SANITY_EXTENDED_TEST(fn) SANITY_REGISTER(fn, true) static void fn(void)

/*
 * base_cumemalloc and base_vmmalloc, both running base(kind).  With
 * -a gdr_alloc_mapped, _cumemalloc runs on gdr_alloc_mapped memory and
 * _vmmalloc on its cuMemCreate memory, which the vulkan backend pins too.
 */
#define SANITY_TEST_BOTH_ALLOCS(base)                                               \
	static void base(enum gpu_alloc_kind kind);                                 \
	SANITY_TEST(base##_cumemalloc) { base(GPU_ALLOC_CUMEMALLOC); }               \
	SANITY_TEST(base##_vmmalloc) { base(GPU_ALLOC_CUMEMCREATE); }                \
	static void base(enum gpu_alloc_kind kind)

extern const struct sanity_test *const __start_sanity_tests[];
extern const struct sanity_test *const __stop_sanity_tests[];

/* The GPU chosen with -d. */
extern int sanity_gpu_id;

/*
 * -a gdr_alloc_mapped: every test's cuMemAlloc memory comes from
 * gdr_alloc_mapped() on the test's gdr_t (libgdrapi's vulkan backend) instead;
 * cuMemCreate memory stays (the backend pins it); tests that need cuMemAlloc
 * memory or gdrdrv waive.
 */
extern bool sanity_alloc_mapped;
/* Waive under -a gdr_alloc_mapped, saying why the test needs cuMemAlloc/cuMemCreate memory. */
void sanity_require_cuda_allocations(const char *why);

/* gpu_init() of the selected GPU (list not printed: the harness did). */
CUdevice sanity_gpu_init(bool require_default_compute_mode);

/* gdr_open() that fails the test with the errno and what to check. */
gdr_t sanity_gdr_open(void);
int sanity_gdr_attribute(gdr_t g, gdr_attr_t attr);
bool sanity_using_dmabuf(gdr_t g);
bool sanity_persistent(gdr_t g);
/* Is the platform coherent (CPU may cache GPU memory)? */
bool sanity_gpu_coherent(CUdevice dev);

/* Waive unless FORCE_PCIE pins are meaningful here (attribute, coherent, CC >= 10). */
void sanity_require_force_pcie(gdr_t g, CUdevice dev);
/* Waive on the dma-buf backend, saying which protection it does not give. */
void sanity_require_not_dmabuf(gdr_t g, const char *what);

/*
 * Allocate a 64 KiB-aligned GPU buffer of this kind (cuMemAlloc with
 * SYNC_MEMOPS, or cuMemCreate) -- or, under -a gdr_alloc_mapped, with
 * gdr_alloc_mapped() on g whatever the kind.  Waives when the allocator
 * cannot be used here.  g may be NULL for a test that cannot run under
 * -a gdr_alloc_mapped (it must have waived before).
 */
void sanity_alloc(CUdevice dev, gdr_t g, enum gpu_alloc_kind kind, size_t size, struct gpu_mem *mem);
/* Free it; gdr_alloc_mapped memory only after unpinning and before gdr_close() of its gdr_t. */
void sanity_free(struct gpu_mem *mem);
/* gdr_close() freed the buffer's gdr_alloc_mapped memory along with its gdr_t: forget it. */
void sanity_forget_closed(struct gpu_mem *mem);

/* Run fn(arg) with SIGSEGV/SIGBUS caught: 0 if it returned, else the signal. */
int sanity_catch_fault(void (*fn)(void *arg), void *arg);
/* A load/store of one 32-bit word through a mapping, for sanity_catch_fault(). */
struct sanity_word_access {
	volatile uint32_t *addr;
	uint32_t value;		/* stored, or the value loaded */
	bool store;
};
void sanity_access_word(void *access);

/* Fork; the child runs fn(arg) and exits with its status (0 pass, 2 waive). */
pid_t sanity_fork(void (*fn)(void *arg), void *arg);
/* Wait for a child from sanity_fork(); fails the test unless it passed. */
void sanity_expect_child_passed(pid_t pid, const char *what);
/* Wait for a child; returns its exit status or 128 + signal. */
int sanity_wait(pid_t pid);

/* One-word messages over a pipe, for ordering two processes. */
void sanity_send(int fd, uint64_t value);
uint64_t sanity_recv(int fd);

/* Send/receive one file descriptor (plus a word) over an AF_UNIX socket. */
void sanity_send_fd(int sock, int fd, uint64_t word);
int sanity_recv_fd(int sock, uint64_t *word);

/* The fd numbers in this process open on /dev/gdrdrv (-1 if none). */
int sanity_find_gdrdrv_fd(void);

#define GDRDRV_NODE "/dev/gdrdrv"

#endif /* GDRCOPY_SANITY_H */
