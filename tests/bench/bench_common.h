/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the gdrcopy benchmark programs (copybw, copylat,
 * apiperf, pplat): GPU selection and allocation, option parsing, timing,
 * bucketed statistics, and the two output forms -- human-readable text, or
 * with -j one JSON object per measurement on stdout (JSON Lines), keyed by
 * the program's command line so results from many runs can be merged.
 */
#ifndef GDRCOPY_BENCH_COMMON_H
#define GDRCOPY_BENCH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <cuda.h>

#include "gdrapi.h"
#include "testutil.h"

/* The command-line letter every benchmark uses for machine-readable output. */
#define BENCH_JSON_OPTION 'j'

/* Iterations of a timed loop are split into at most this many buckets. */
#define BENCH_MAX_BUCKETS 100

/* --- Output ---------------------------------------------------------- */

/* Remember the program name and command line; call first in main(). */
void bench_init(const char *tool, int argc, char **argv);

/* Switch to JSON Lines: records go to stdout, all human text to stderr. */
void bench_set_json(bool on);
bool bench_json(void);

/* Human-readable text (stdout, or stderr in JSON mode). */
void bench_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "WARNING: ..." on stderr. */
void bench_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "ERROR: ..." on stderr, then exit(EXIT_FAILURE). */
void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/*
 * One JSON record: {"tool": ..., "argv": ..., "test": ..., <fields>}.
 * Nothing is printed unless JSON mode is on.
 */
struct bench_record {
	char buf[4096];
	size_t len;
};

void bench_record_begin(struct bench_record *rec, const char *test);
void bench_record_str(struct bench_record *rec, const char *key, const char *value);
void bench_record_u64(struct bench_record *rec, const char *key, uint64_t value);
void bench_record_i64(struct bench_record *rec, const char *key, int64_t value);
void bench_record_double(struct bench_record *rec, const char *key, double value);
void bench_record_u64_array(struct bench_record *rec, const char *key, const uint64_t *values,
			    unsigned int n);
void bench_record_end(struct bench_record *rec);

/* --- Option parsing -------------------------------------------------- */

/* A byte count: decimal, 0x hex, or with a K/M/G suffix (powers of 1024). */
size_t bench_parse_size(char opt, const char *arg);
/* A non-negative integer that fits in unsigned int. */
unsigned int bench_parse_uint(char opt, const char *arg);

/*
 * -a cuMemAlloc|cuMemCreate|gdr_alloc_mapped and -M default|wc|cache|device:
 * the parsers of tests/common (testutil.h) plus gdr_alloc_mapped (memory
 * libgdrapi allocates itself, for backends that cannot pin cuMemAlloc
 * memory, such as the Vulkan BAR1 one), exiting with a message on bad input.
 */
struct bench_alloc {
	gpu_alloc_fn fn;	/* NULL for gdr_alloc_mapped */
	const char *name;
};
struct bench_alloc bench_parse_alloc(const char *arg);
int bench_parse_map_flag(const char *arg);
#define BENCH_ALLOC_CHOICES "cuMemAlloc, cuMemCreate or gdr_alloc_mapped"

/*
 * The options every benchmark takes: -d gpu, -a allocator, -M mapping type
 * and -j.  Returns false when c is none of them (the tool's own, or unknown).
 */
bool bench_common_option(int c, const char *arg, int *dev_id, struct bench_alloc *alloc, int *map_flag);

/* Short mapping-type name used in records: none, wc, cache, device. */
const char *bench_mapping_type_name(gdr_mapping_type_t type);

/* --- CUDA ------------------------------------------------------------ */

/* Exit with the CUDA error's name and text, naming the failing call. */
void bench_cu_check(CUresult res, const char *call, const char *file, int line);
#define BENCH_CU(call) bench_cu_check((call), #call, __FILE__, __LINE__)

/*
 * cuInit, print every GPU as "GPU id:N; name: X; Bus id: DDDD:BB:DD",
 * select dev_id, make its primary context current.  When require_gdr, exit
 * with an explanation if the GPU reports no GPUDirect RDMA support.
 */
CUdevice bench_select_gpu(int dev_id, bool require_gdr);

/* Where the GPU and this thread sit in NUMA terms (printed as text, -1 = unknown). */
struct bench_locality {
	int gpu_numa_node;
	int cpu;
	int cpu_numa_node;
};
void bench_get_locality(CUdevice dev, struct bench_locality *loc);
void bench_print_locality(const struct bench_locality *loc);

/*
 * GPU memory whose start is 64 KiB aligned (gdr_map needs that), with
 * CU_POINTER_ATTRIBUTE_SYNC_MEMOPS set (cuMemAlloc/cuMemCreate) so that
 * cuMemcpy/cuMemset on it are complete when they return.  g is needed for
 * gdr_alloc_mapped only.  Exits explaining why on failure.
 */
struct bench_gpu_buf {
	CUdeviceptr ptr;
	size_t size;
	struct gpu_mem mem;	/* cuMemAlloc / cuMemCreate */
	gdr_t g;		/* gdr_alloc_mapped: the gdr_t that owns it */
};
void bench_gpu_alloc(struct bench_gpu_buf *buf, CUdevice dev, size_t size,
		     const struct bench_alloc *alloc, gdr_t g);
void bench_gpu_free(struct bench_gpu_buf *buf);

/* --- gdrcopy --------------------------------------------------------- */

/*
 * gdr_open for a program that pins memory of alloc (gdr_open_for: the
 * vulkan backend allowed for cuMemCreate and gdr_alloc_mapped), or exit
 * explaining what to check.
 */
gdr_t bench_gdr_open(const struct bench_alloc *alloc);

/* Print the info.* lines the reference tools print, plus the mapping type. */
void bench_print_info(const gdr_info_t *info);

/*
 * -F: pin with GDR_PIN_FLAG_FORCE_PCIE.  bench_pin() pins [ptr, +size) with
 * it when force_pcie, else as gdr_pin_buffer() does, and exits saying why
 * on failure (the errno names the reason, libgdrapi/README.md).
 * bench_print_force_pcie() prints "use force pcie: yes|no", where NVIDIA's
 * next release prints it.
 */
#define BENCH_FORCE_PCIE_HELP "  -F          pin with GDR_PIN_FLAG_FORCE_PCIE (PCIe BAR1 even on coherent platforms;\n" \
			      "              default: off)\n"
void bench_pin(gdr_t g, CUdeviceptr ptr, size_t size, bool force_pcie, gdr_mh_t *mh);
void bench_print_force_pcie(bool force_pcie);

/*
 * "store fences: enabled|disabled" and, with loads, "load fences
 * (gdr_copy_from_mapping): enabled|disabled": whether libgdrapi ends each
 * copy through this mapping with a fence.  It does after WC copies, in both
 * directions (a store fence; a full one while mappings of several types
 * exist), and not after CACHING or DEVICE ones.
 */
void bench_print_fences(const gdr_info_t *info, bool loads);

/* --- Timing and statistics ------------------------------------------- */

static inline double bench_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/*
 * Iterations split into buckets: iters <= 100 gives one iteration per
 * bucket; larger counts are rounded up to a multiple of 100 (with a
 * warning naming the option) so every bucket holds the same number.
 */
struct bench_buckets {
	unsigned int iters;		/* after rounding */
	unsigned int count;		/* number of buckets */
	unsigned int per_bucket;	/* iterations per bucket */
};
struct bench_buckets bench_plan_buckets(unsigned int iters, const char *what);

/* Median, minimum and maximum of n values (the array is sorted in place). */
struct bench_stats {
	double median;
	double min;
	double max;
};
struct bench_stats bench_stats(double *values, unsigned int n);

/* A full fence: every earlier load and store completes before any later one starts. */
static inline void bench_full_fence(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("mfence; lfence" ::: "memory");
#else
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

/* Store fence after plain stores to a write-combined mapping. */
static inline void bench_store_fence(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("sfence" ::: "memory");
#else
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

/* Fill a host buffer with a pattern that differs per 32-bit word and per seed. */
void bench_fill_pattern(void *buf, size_t size, uint32_t seed);
/* Index of the first byte that differs from the pattern, or -1. */
long bench_check_pattern(const void *buf, size_t size, uint32_t seed);

#endif /* GDRCOPY_BENCH_COMMON_H */
