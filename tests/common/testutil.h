/* SPDX-License-Identifier: MIT */
/*
 * testutil.h - helpers shared by gdrcopy_sanity and the benchmarks.
 *
 * Built into libtestutil.a by tests/common/Makefile.  Programs include
 * tests/common/cuda.mk to get the same CUDA header and library choice.
 *
 * Only the CUDA driver API is used (no runtime, no toolkit needed), so the
 * programs run unchanged on a real libcuda.so.1 and on softgpu's.
 *
 * Failure convention: the ASSERT* macros print "file:line: what failed" on
 * stderr and end the process with TEST_EXIT_FAIL; test_waive() ends it
 * with TEST_EXIT_WAIVED.  A test harness that forks one child per test can
 * install a reporter (test_set_reporter) to learn the message as well.
 */
#ifndef GDRCOPY_TESTUTIL_H
#define GDRCOPY_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cuda.h>
#include <gdrapi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Process exit statuses of a test (the reference's convention). */
#define TEST_EXIT_PASSED 0
#define TEST_EXIT_FAILED 1
#define TEST_EXIT_WAIVED 2

enum test_outcome {
	TEST_OUTCOME_FAILED = TEST_EXIT_FAILED,
	TEST_OUTCOME_WAIVED = TEST_EXIT_WAIVED,
};

/* ---- failure reporting ------------------------------------------------- */

/* Called with the one-line reason just before a failing or waived exit. */
typedef void (*test_reporter_fn)(enum test_outcome outcome, const char *message);
void test_set_reporter(test_reporter_fn reporter);

/* Non-zero: test_debug() prints. Set from -v. */
extern int test_verbose;

void test_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

__attribute__((noreturn, format(printf, 3, 4)))
void test_fail_at(const char *file, int line, const char *fmt, ...);

/* End the current test as waived; the reason says what is missing. */
__attribute__((noreturn, format(printf, 1, 2)))
void test_waive(const char *fmt, ...);

#define TEST_FAIL(...) test_fail_at(__FILE__, __LINE__, __VA_ARGS__)

#define ASSERT(cond)                                                   \
	do {                                                           \
		if (!(cond))                                           \
			TEST_FAIL("assertion failed: %s", #cond);      \
	} while (0)

#define ASSERT_MSG(cond, ...)                                          \
	do {                                                           \
		if (!(cond))                                           \
			TEST_FAIL(__VA_ARGS__);                        \
	} while (0)

#define ASSERT_EQ(a, b)                                                          \
	do {                                                                     \
		long long a_ = (long long)(a), b_ = (long long)(b);              \
		if (a_ != b_)                                                    \
			TEST_FAIL("expected %s == %s, got %lld and %lld", #a, #b, \
				  a_, b_);                                       \
	} while (0)

#define ASSERT_NEQ(a, b)                                                         \
	do {                                                                     \
		long long a_ = (long long)(a), b_ = (long long)(b);              \
		if (a_ == b_)                                                    \
			TEST_FAIL("expected %s != %s, both are %lld", #a, #b, a_); \
	} while (0)

/* A CUDA driver call that must succeed: the failure names the CUDA error. */
#define ASSERTDRV(call)                                                        \
	do {                                                                   \
		CUresult res_ = (call);                                        \
		if (res_ != CUDA_SUCCESS)                                      \
			TEST_FAIL("%s failed: %s (%s)", #call,                 \
				  cuda_error_name(res_), cuda_error_string(res_)); \
	} while (0)

/* A libgdrapi call (returns 0 or an errno value) that must succeed. */
#define ASSERT_GDR_OK(call)                                                    \
	do {                                                                   \
		int ret_ = (call);                                             \
		if (ret_ != 0)                                                 \
			TEST_FAIL("%s failed: returned %d (%s)", #call, ret_,  \
				  test_errno_text(ret_));                      \
	} while (0)

/* A libgdrapi call that must fail. */
#define ASSERT_GDR_FAILS(call)                                                 \
	do {                                                                   \
		int ret_ = (call);                                             \
		if (ret_ == 0)                                                 \
			TEST_FAIL("%s succeeded but must fail", #call);        \
	} while (0)

const char *cuda_error_name(CUresult res);
const char *cuda_error_string(CUresult res);
/* What to do about a failed cuInit: one sentence (the driver not loaded, no GPU visible, ...). */
const char *cuda_init_hint(CUresult res);
/* strerror() for positive errno values, "unknown error N" otherwise. */
const char *test_errno_text(int err);

/* ---- CUDA devices ----------------------------------------------------- */

/*
 * cuInit, print the GPU list ("GPU id:N; name: ...; Bus id: DDDD:BB:DD")
 * when print_list, select dev_id ("selecting device N"), make its primary
 * context current.  Fails the test when CUDA or the device is unusable;
 * waives it when require_default_compute_mode and the GPU is not in the
 * DEFAULT compute mode (the test needs two processes on the GPU).
 */
CUdevice gpu_init(int dev_id, bool require_default_compute_mode, bool print_list,
		  CUcontext *ctx);
/* Drop the primary context gpu_init() retained. */
void gpu_finalize(CUdevice dev);
/* Print the GPU list on stdout; returns the number of GPUs or -1 (message on stderr). */
int gpu_print_list(void);
int gpu_attribute(CUdevice dev, CUdevice_attribute attr);
int gpu_driver_version(void);

/* ---- GPU memory ------------------------------------------------------- */

/* GPU page granularity pins and mappings work in. */
#define GPU_ALLOC_ALIGNMENT ((size_t)1 << 16)

enum gpu_alloc_kind {
	GPU_ALLOC_CUMEMALLOC,
	GPU_ALLOC_CUMEMCREATE,
	/*
	 * gdr_alloc_mapped() on a gdr_t: GPU memory the library allocates itself
	 * (libgdrapi's "vulkan" backend, the only one that can pin no other
	 * memory).  Needs the gdr_t at allocation; freed with gdr_free_mapped()
	 * on that gdr_t, so free it after unpinning and before gdr_close().
	 */
	GPU_ALLOC_GDR_MAPPED,
};

/* For usage texts: every name parse_gpu_alloc_kind() accepts. */
#define GPU_ALLOC_KIND_NAMES "cuMemAlloc|cuMemCreate|gdr_alloc_mapped"

struct gpu_mem {
	CUdeviceptr ptr;		/* what the caller uses */
	size_t size;			/* what the caller asked for */
	enum gpu_alloc_kind kind;
	void *cpu_ptr;			/* GPU_ALLOC_GDR_MAPPED: the library's own CPU mapping of ptr; else NULL */
	/* private */
	CUdeviceptr alloc_ptr;
	size_t alloc_size;
	CUmemGenericAllocationHandle vmm_handle;
	gdr_t gdr;			/* GPU_ALLOC_GDR_MAPPED: the gdr_t that allocated it */
};

/*
 * cuMemAlloc.  With aligned, allocate 64 KiB more and round ptr up to a
 * GPU page so the buffer can be mapped; without, ptr is what cuMemAlloc
 * returned.  With sync_memops, set CU_POINTER_ATTRIBUTE_SYNC_MEMOPS so
 * synchronous copies are ordered with gdrcopy accesses.
 */
CUresult gpu_mem_alloc(struct gpu_mem *mem, size_t size, bool aligned, bool sync_memops);
/*
 * cuMemCreate with gpuDirectRDMACapable, size rounded up to the allocation
 * granularity and to 64 KiB, reserved, mapped and made read/write for the
 * current device.  Always GPU-page aligned; sync_memops as above.
 */
CUresult gpu_vmm_alloc(struct gpu_mem *mem, size_t size, bool aligned, bool sync_memops);
/* Free any kind (GPU_ALLOC_GDR_MAPPED: gdr_free_mapped, an error is CUDA_ERROR_INVALID_VALUE; gpu_free() says more). */
CUresult gpu_mem_free(struct gpu_mem *mem);

typedef CUresult (*gpu_alloc_fn)(struct gpu_mem *mem, size_t size, bool aligned,
				 bool sync_memops);

/*
 * Can the current device back gdrcopy with cuMemCreate memory?  Needs
 * driver >= 11.0 and GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED.  On false,
 * why says why (one line).
 */
bool gpu_vmm_rdma_supported(CUdevice dev, char *why, size_t why_len);

/*
 * Allocation of any kind, for programs that let the user choose (-a).
 *
 * gpu_alloc() allocates size bytes of kind on the current device, GPU-page
 * aligned when aligned (GPU_ALLOC_CUMEMCREATE and GPU_ALLOC_GDR_MAPPED always
 * are), with CU_POINTER_ATTRIBUTE_SYNC_MEMOPS when sync_memops (best effort
 * for GPU_ALLOC_GDR_MAPPED: imported memory may not take it).  g is the
 * gdr_t that GPU_ALLOC_GDR_MAPPED allocates on; the other kinds ignore it
 * (pass NULL).  Returns:
 *   GPU_ALLOC_OK
 *   GPU_ALLOC_UNAVAILABLE  the kind cannot be used here, not an error of the
 *                          program: cuMemCreate without GPUDirect RDMA on VMM
 *                          memory, or gdr_alloc_mapped() answering ENOTSUP
 *                          (g's backend is not "vulkan", or this libgdrapi
 *                          has no gdr_alloc_mapped)
 *   GPU_ALLOC_ERROR        the allocation failed
 * and for the last two a one-line reason in why.
 */
enum gpu_alloc_status {
	GPU_ALLOC_OK = 0,
	GPU_ALLOC_UNAVAILABLE,
	GPU_ALLOC_ERROR,
};
enum gpu_alloc_status gpu_alloc(enum gpu_alloc_kind kind, gdr_t g, struct gpu_mem *mem, size_t size,
				bool aligned, bool sync_memops, char *why, size_t why_len);
/* Free what gpu_alloc() (or gpu_mem_alloc/gpu_vmm_alloc) allocated: 0, or -1 with a reason in why. */
int gpu_free(struct gpu_mem *mem, char *why, size_t why_len);
/* "cuMemAlloc", "cuMemCreate", "gdr_alloc_mapped". */
const char *gpu_alloc_kind_name(enum gpu_alloc_kind kind);
/* Does gpu_alloc() of this kind need a gdr_t? */
static inline bool gpu_alloc_kind_needs_gdr(enum gpu_alloc_kind kind)
{
	return kind == GPU_ALLOC_GDR_MAPPED;
}

/*
 * gdr_open() for a program whose every pinned buffer is of this kind.  Where
 * that is memory the vulkan backend can pin (cuMemCreate with a POSIX fd,
 * gdr_alloc_mapped) the program says so: gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN),
 * so that it runs module-free (the GPU machine) as it did before gdr_open()
 * stopped taking vulkan by itself (issue 35).  cuMemAlloc memory, and a
 * library without gdr_open_ex (GDRCopy's), get plain gdr_open().
 */
gdr_t gdr_open_for(enum gpu_alloc_kind kind);

/* ---- host data patterns ------------------------------------------------ */

/* Word w = 0x3F4C5E6A ^ (1 << (w % 32)); a trailing partial word is filled byte-wise. */
void fill_walking_bit(void *buf, size_t size);
/* Word w = w (a ramp); same tail rule. */
void fill_linear_ramp(void *buf, size_t size);
/* Word w = seed * 2654435761 + w, so two fills with different seeds always differ. */
void fill_seeded(void *buf, size_t size, uint32_t seed);
/* Index of the first differing byte, or (size_t)-1 when equal. */
size_t first_difference(const void *a, const void *b, size_t size);

/* ---- timing ------------------------------------------------------------ */

static inline struct timespec time_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts;
}

static inline double time_diff_us(struct timespec start, struct timespec end)
{
	return (double)(end.tv_sec - start.tv_sec) * 1e6 +
	       (double)(end.tv_nsec - start.tv_nsec) / 1e3;
}

/* ---- command-line parsers the benchmarks share ------------------------ */

/* cuMemAlloc, cuMemCreate or gdr_alloc_mapped (GPU_ALLOC_KIND_NAMES, case-insensitive).  0, or -1. */
int parse_gpu_alloc_kind(const char *arg, enum gpu_alloc_kind *kind);
/*
 * "cuMemAlloc" or "cuMemCreate" (case-insensitive) as a gpu_alloc_fn.  0, or
 * -1 on an unknown name -- and on gdr_alloc_mapped, which needs a gdr_t and
 * so is no gpu_alloc_fn: use parse_gpu_alloc_kind() and gpu_alloc() for it.
 */
int parse_gpu_alloc(const char *arg, gpu_alloc_fn *alloc_fn, const char **name);
/* "default", "wc", "cache" or "device" to a GDR_MAP_FLAG_*.  0, or -1. */
int parse_map_flags(const char *arg, int *flags);
const char *map_flags_name(int flags);

#ifdef __cplusplus
}
#endif

#endif /* GDRCOPY_TESTUTIL_H */
