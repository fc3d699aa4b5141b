// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness for the public API of libgdrapi, on the in-process fakes
 * (fakes.c, fake_vulkan.c: no kernel, no GPU), built with ASan + UBSan.
 *
 * An input is a 4-byte header and a list of 16-byte operations over a small
 * table of gdr_t instances, handle slots and gdr_alloc_mapped allocations:
 *
 *   header  [0] bits 0-1 backend (0, 1 gdrdrv; 2 dma-buf; 3 vulkan),
 *               bits 2-3 threads (0: one thread, checked against a model;
 *               n: n + 1 threads sharing one gdr_t and its handles)
 *           [1] backend variant (driver version and attributes, coherence,
 *               BAR1 type and heap, injected failures)
 *           [2] threaded mode: how often each thread replays its operations
 *           [3] threaded mode: how many handle slots the threads share (1 + n % 8)
 *   op      code, g, h, flags, size selector, offset selector, aux, aux2, raw (u64 LE)
 *
 * Every entry point is reached with valid, NULL, foreign (other gdr_t),
 * stale (unpinned, or of a closed gdr_t) and never-issued handles, huge and
 * unaligned sizes and offsets, in any order (unmap twice, unpin or close
 * while mapped, free an allocation still pinned...).
 *
 * One thread: a model of what the caller did predicts what the API contract
 * defines (EINVAL for a NULL gdr_t or a handle that is not a live buffer of
 * that gdr_t, EAGAIN for mapping twice, EINVAL for a copy outside the
 * mapping, what get_info says is mapped, bytes written read back the same,
 * every fd and allocation released after gdr_close); a mismatch aborts.
 * Threads: the same operations race on one gdr_t and a few handles (each
 * thread also opens, uses and closes gdr_t instances of its own); a copy
 * only excludes an unmap/unpin/free of memory it is copying (a caller that
 * unmaps under a running copy has a bug of its own), everything else runs
 * concurrently, and every call must return 0 or an errno.  After the
 * threads, gdr_close must release every fd and allocation.
 *
 * Nothing contract-undefined is done: no gdr_t is used after gdr_close,
 * and the caller's buffers are as large as any copy the contract lets
 * through (copies outside a mapping are asked for and must be refused).
 *
 * make -C tests/unit fuzz / fuzz-run / fuzz-merge (Makefile);
 * tests/python/test_api_fuzz.py runs it.  GDRFUZZ_LOG=1 turns the library's
 * logging on (with -close_fd_mask=2 to discard it).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gdrapi.h"
#include "backend_gdrdrv.h"
#include "internal.h"
#include "fakes.h"

/* The GDRCopy <= 2.3 entry point, which gdrapi.h hides behind a macro. */
#include "gdrapi_v1.h"
int gdr_get_info(gdr_t g, gdr_mh_t handle, struct gdr_info_v1 *info);

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define GPU_PAGE_BYTES (64UL << 10)
#define FAKE_GPU_BASE 0x7f0000000000UL		/* fake gdrdrv: any non-zero address pins */
#define DMABUF_BASE 0x7e0000000000UL		/* fake CUDA: device memory for dma-buf */
#define DMABUF_SPAN (256UL << 20)
#define HOST_BUF (2UL << 20)			/* the caller's buffer for copies */
#define SCRATCH (256UL << 10)			/* "other mapped memory" for the copy-engine extension */

#define NG 2		/* gdr_t slots */
#define NH 8		/* handle slots */
#define NORPHAN 32	/* live handles whose slot was reused */
#define NA 4		/* gdr_alloc_mapped allocations */
#define MAX_OPS 256
#define MAX_THREADS 4

enum backend { BACKEND_GDRDRV, BACKEND_DMABUF, BACKEND_VULKAN };
static const char *const backend_names[] = { "gdrdrv", "dmabuf", "vulkan" };

enum opcode {
	OP_OPEN, OP_CLOSE, OP_PIN, OP_PIN_V2, OP_UNPIN, OP_MAP, OP_UNMAP, OP_INFO, OP_INFO_V1, OP_CB_FLAG,
	OP_COPY_TO, OP_COPY_FROM, OP_ROUNDTRIP, OP_COPY_TYPE, OP_DRIVER_VERSION, OP_ATTR, OP_TYPE_STRING,
	OP_RUNTIME_VERSION, OP_BACKEND_NAME, OP_ALLOC, OP_FREE, OP_INVALIDATE, OP_COUNT
};

struct op {
	uint8_t code, g, h, flags, size_sel, off_sel, aux, aux2;
	uint64_t raw;
};

/* ---- failing loudly ---- */

static const struct op *current_op;
static int current_index;
/* Our stderr, kept before libFuzzer's -close_fd_mask=2 silences the library's logging there. */
static int report_fd = STDERR_FILENO;

static void __attribute__((noreturn, format(printf, 1, 2))) fail(const char *fmt, ...)
{
	va_list ap;

	dprintf(report_fd, "\nfuzz_api: contract violated at operation %d (code %d g %u h %u flags %#x raw %#llx): ",
		current_index, current_op ? current_op->code % OP_COUNT : -1, current_op ? current_op->g : 0,
		current_op ? current_op->h : 0, current_op ? current_op->flags : 0,
		current_op ? (unsigned long long)current_op->raw : 0ULL);
	va_start(ap, fmt);
	vdprintf(report_fd, fmt, ap);
	va_end(ap);
	dprintf(report_fd, "\n");
	abort();
}

#define EXPECT_RC(rc, want, what)                                                                      \
	do {                                                                                           \
		int rc_ = (rc), want_ = (want);                                                        \
		if (rc_ != want_)                                                                      \
			fail("%s returned %d, the contract says %d", (what), rc_, want_);              \
	} while (0)

/* Any return is 0 or a positive errno. */
#define EXPECT_ERRNO(rc, what)                                                                         \
	do {                                                                                           \
		int rc_ = (rc);                                                                        \
		if (rc_ < 0 || rc_ > 4095)                                                             \
			fail("%s returned %d, not 0 or an errno", (what), rc_);                        \
	} while (0)

/* ---- deriving values from an operation ---- */

/* Sizes: tiny, page and GPU-page multiples give or take a little, large, huge, anything. */
static size_t derive_size(uint8_t sel, uint64_t raw, size_t hint)
{
	int8_t delta = (int8_t)(sel << 3) >> 3;	/* -16 .. 15 */
	uint64_t k = (raw & 15) + 1;

	switch (sel >> 5) {
	case 0: return sel & 31;
	case 1: return (size_t)(raw & 0xffff);
	case 2: return (size_t)(k * 4096 + (uint64_t)(int64_t)delta);
	case 3: return (size_t)(k * GPU_PAGE_BYTES + (uint64_t)(int64_t)delta);
	case 4: return hint + (size_t)(int64_t)delta;
	case 5: {
		static const size_t huge[] = {
			SIZE_MAX, SIZE_MAX - 4095, SIZE_MAX / 2 + 1, (size_t)1 << 40, (size_t)1 << 32,
			SIZE_MAX - GPU_PAGE_BYTES + 1, SIZE_MAX - 15, (size_t)1 << 63,
		};
		return huge[raw & 7] - (size_t)(sel & 31);
	}
	case 6: return (size_t)(raw & ((1UL << 20) - 1)) + 1;
	default: return (size_t)raw;
	}
}

/* Offsets into a mapping of map_size bytes: inside, at and past the ends, before the start, anywhere. */
static uint64_t derive_offset(uint8_t sel, uint64_t raw, size_t map_size)
{
	uint64_t small = sel & 31;

	switch (sel >> 5) {
	case 0: return small;
	case 1: return map_size - small;
	case 2: return map_size + small;
	case 3: return raw & 0xfffff;
	case 4: return (uint64_t)0 - small - 1;
	case 5: return raw;
	case 6: return (raw & 63) * 4096 + small;
	default: return ((map_size / 2) & ~(uint64_t)15) + small;
	}
}

/* ---- state shared by both modes ---- */

static enum backend backend;
static uint32_t driver_version;
static uint8_t *host_src, *host_dst, *scratch;
static struct gdrdrv_sys_paths fuzz_paths = {
	.device = "/nonexistent/gdrfuzz/gdrdrv",
	.sys_misc_dev = "/nonexistent/gdrfuzz/misc-dev",
	.proc_devices = "/nonexistent/gdrfuzz/devices",
	.sys_module = "/nonexistent/gdrfuzz/module",
	.proc_params = "/nonexistent/gdrfuzz/params",
	.osrelease = "/nonexistent/gdrfuzz/osrelease",
};

static void configure(uint8_t which, uint8_t variant)
{
	static const uint32_t versions[] = {
		FAKE_VERSION(2, 0), FAKE_VERSION(2, 3), FAKE_VERSION(2, 4), FAKE_VERSION(2, 5),
		FAKE_VERSION(2, 6), FAKE_VERSION(2, 6), FAKE_VERSION(2, 6), FAKE_VERSION(2, 6),
	};
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	struct fake_cuda_config cuda = { 0 };
	struct fake_vulkan_config vk = { 0 };

	backend = which == 3 ? BACKEND_VULKAN : which == 2 ? BACKEND_DMABUF : BACKEND_GDRDRV;
	switch (backend) {
	case BACKEND_GDRDRV:
		cfg.version = versions[variant & 7];
		cfg.persistent = variant & 8;
		cfg.force_pcie = variant & 16;
		cfg.default_type = (variant & 32) ? 2 : 1;	/* GDRDRV_MR_CACHING : GDRDRV_MR_WC */
		cfg.unsupported_types = (variant >> 6) == 1 ? 1u << 2 : (variant >> 6) == 2 ? 1u << 1 : 0;
		if ((variant >> 6) == 3)
			cfg.minimum_api = FAKE_VERSION(2, 7);	/* refuses this library: no backend opens */
		break;
	case BACKEND_DMABUF:
		cfg.open_errno = ENOENT;
		cuda.present = true;
		cuda.driver_version = 13030;
		cuda.dmabuf_supported = true;
		cuda.coherent = variant & 1;
		cuda.have_context = variant & 2;
		break;
	case BACKEND_VULKAN:
		cfg.open_errno = ENOENT;
		cuda.present = true;
		cuda.driver_version = 12040;	/* too old for dma-buf mmap: falls through to vulkan */
		cuda.have_context = variant & 2;
		vk.present = true;
		vk.bar1_visible = (variant & 0xe0) != 0xe0;
		vk.host_cached = variant & 1;
		vk.heap_size = (uint64_t)1 << (20 + (variant >> 2 & 7));	/* 1 MiB .. 128 MiB */
		vk.create_device_fails = (variant & 0xe0) == 0xc0;
		vk.export_fails = (variant & 0xe0) == 0xa0;
		vk.import_fails = (variant & 0xe0) == 0x80;
		vk.misaligned_import = (variant & 0xe0) == 0x60;
		break;
	}
	driver_version = cfg.version;
	fake_reset(&cfg);
	fake_cuda_set(&cuda);
	fake_cuda_add_range(DMABUF_BASE, DMABUF_SPAN);
	fake_vulkan_set(&vk);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	gdrdrv_sys_paths = &fuzz_paths;
	report_fd = dup(STDERR_FILENO);
	if (report_fd < 0)
		report_fd = STDERR_FILENO;
	/*
	 * GDRFUZZ_LOG=1: the library logs everything (its messages format the
	 * very values fuzzed here); run with -close_fd_mask=2 to discard them.
	 */
	if (getenv("GDRFUZZ_LOG") && strcmp(getenv("GDRFUZZ_LOG"), "1") == 0) {
		setenv("GDRCOPY_ENABLE_LOGGING", "1", 1);
		setenv("GDRCOPY_LOG_LEVEL", "1", 1);
	}
	unsetenv("GDRCOPY_BACKEND");
	unsetenv("GDRCOPY_USE_DMABUF_MMAP");
	host_src = malloc(HOST_BUF + 64);
	host_dst = malloc(HOST_BUF + 64);
	scratch = mmap(NULL, SCRATCH, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!host_src || !host_dst || scratch == MAP_FAILED) {
		fprintf(stderr, "fuzz_api: out of memory\n");
		exit(1);
	}
	return 0;
}

/* After every gdr_t is closed, nothing the fakes handed out may be left. */
static void check_released(void)
{
	if (fake_live_files())
		fail("%u gdrdrv fds still open after gdr_close", fake_live_files());
	if (fake_cuda_live_fds())
		fail("%u dma-buf fds still open after gdr_close", fake_cuda_live_fds());
	if (fake_vulkan_live_objects())
		fail("%u Vulkan/CUDA objects still live after gdr_close", fake_vulkan_live_objects());
}

static unsigned long pin_address(const struct op *op, uint64_t alloc_gpu, uint64_t alloc_size)
{
	uint64_t page = op->raw & 0xff, small = op->aux2 & 31;

	switch (op->aux >> 5) {
	case 0: case 1:
		if (backend == BACKEND_VULKAN)
			return alloc_gpu + (page % (alloc_size / GPU_PAGE_BYTES ? alloc_size / GPU_PAGE_BYTES : 1)) *
					   GPU_PAGE_BYTES;
		return (backend == BACKEND_DMABUF ? DMABUF_BASE : FAKE_GPU_BASE) + page * GPU_PAGE_BYTES;
	case 2:
		if (backend == BACKEND_VULKAN)
			return alloc_gpu + small * 4096 + (op->aux2 >> 5);
		return (backend == BACKEND_DMABUF ? DMABUF_BASE : FAKE_GPU_BASE) + page * GPU_PAGE_BYTES + small * 4096;
	case 3: return 0;
	case 4: return ULONG_MAX - small;
	case 5: return (unsigned long)op->raw;
	case 6: return alloc_gpu + alloc_size - small;
	default: return (backend == BACKEND_DMABUF ? DMABUF_BASE + DMABUF_SPAN : FAKE_GPU_BASE) - small * 4096;
	}
}

/* =================================================================== */
/* One thread, against a model                                          */
/* =================================================================== */

enum hstate { H_EMPTY, H_LIVE, H_STALE };

struct hslot {
	enum hstate state;
	gdr_mh_t mh;
	int g;
	unsigned long addr;
	size_t size;
	bool mapped;
	uintptr_t va;
	size_t map_size;	/* rounded up to the host page, as much as may be copied */
};

struct aslot {
	bool used;
	int g;
	uint64_t gpu;
	uint8_t *cpu;
	uint64_t size;		/* rounded to 64 KiB */
};

static struct {
	gdr_t g[NG];
	struct hslot h[NH];
	struct hslot orphan[NORPHAN];
	unsigned int orphans;
	struct aslot a[NA];
} m;

static size_t round_page(size_t n)
{
	return gdr_round_up_to_page(n);
}

/* The model's view of a handle value: a live buffer (and whose), or not one. */
static struct hslot *find_live(unsigned long h)
{
	unsigned int i;

	for (i = 0; i < NH; i++)
		if (m.h[i].state == H_LIVE && m.h[i].mh.h == h)
			return &m.h[i];
	for (i = 0; i < m.orphans; i++)
		if (m.orphan[i].state == H_LIVE && m.orphan[i].mh.h == h)
			return &m.orphan[i];
	return NULL;
}

/* The handle an operation names: a slot's (live, stale or never filled), or one never issued. */
static gdr_mh_t pick_handle(const struct op *op, struct hslot **slot)
{
	struct hslot *s = &m.h[op->h % NH];
	gdr_mh_t mh = { 0 };

	*slot = NULL;
	if (op->h < 0xc0) {
		if (s->state == H_EMPTY)
			return mh;	/* 0: never a handle */
		mh = s->mh;
	} else {
		switch (op->h & 7) {
		case 0: mh.h = (unsigned long)op->raw; break;
		case 1: mh.h = s->mh.h + 1; break;
		case 2: mh.h = s->mh.h ^ ((unsigned long)1 << (op->aux2 & 63)); break;
		case 3: mh.h = ULONG_MAX; break;
		case 4: mh.h = (unsigned long)(uintptr_t)host_src; break;	/* the caller's memory */
		case 5: mh.h = (unsigned long)(uintptr_t)&m; break;
		case 6: mh.h = s->mh.h - 8; break;
		default: mh.h = 1; break;
		}
	}
	*slot = find_live(mh.h);
	return mh;
}

static gdr_t pick_g(const struct op *op, int *gi)
{
	*gi = op->g % (NG + 1);
	return *gi < NG ? m.g[*gi] : NULL;	/* NG: NULL */
}

/* Is the handle (as the model sees it) a live buffer of this gdr_t? */
static bool valid_for(gdr_t g, int gi, const struct hslot *s)
{
	return g && s && s->g == gi;
}

static void forget_instance(int gi)
{
	unsigned int i;

	for (i = 0; i < NH; i++)
		if (m.h[i].state == H_LIVE && m.h[i].g == gi)
			m.h[i].state = H_STALE;
	for (i = 0; i < m.orphans; i++)
		if (m.orphan[i].state == H_LIVE && m.orphan[i].g == gi)
			m.orphan[i].state = H_STALE;
	for (i = 0; i < NA; i++)
		if (m.a[i].used && m.a[i].g == gi)
			m.a[i].used = false;
}

static unsigned int pins_in(const struct aslot *a)
{
	unsigned int i, n = 0;

	for (i = 0; i < NH; i++)
		n += m.h[i].state == H_LIVE && m.h[i].g == a->g && m.h[i].addr >= a->gpu &&
		     m.h[i].addr - a->gpu < a->size;
	for (i = 0; i < m.orphans; i++)
		n += m.orphan[i].state == H_LIVE && m.orphan[i].g == a->g && m.orphan[i].addr >= a->gpu &&
		     m.orphan[i].addr - a->gpu < a->size;
	return n;
}

static void seq_open(const struct op *op)
{
	int gi = op->g % NG;
	gdr_t g;

	if (m.g[gi])
		return;
	g = gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN);
	if (!g)
		return;	/* a configuration no backend accepts: the rest runs on NULL */
	if (strcmp(gdr_get_backend_name(g), backend_names[backend]) != 0)
		fail("gdr_open chose %s, expected %s", gdr_get_backend_name(g), backend_names[backend]);
	m.g[gi] = g;
}

static void seq_close(const struct op *op)
{
	int gi;
	gdr_t g = pick_g(op, &gi);

	if (!g) {
		EXPECT_RC(gdr_close(NULL), EINVAL, "gdr_close(NULL)");
		return;
	}
	EXPECT_RC(gdr_close(g), 0, "gdr_close");
	m.g[gi] = NULL;
	forget_instance(gi);
}

static void seq_pin(const struct op *op, bool v2)
{
	int gi;
	gdr_t g = pick_g(op, &gi);
	struct hslot *s = &m.h[op->h % NH];
	const struct aslot *a = &m.a[op->aux2 % NA];
	unsigned long addr = pin_address(op, a->used ? a->gpu : 0, a->used ? a->size : 0);
	size_t size = derive_size(op->size_sel, op->raw >> 8, a->used ? a->size : GPU_PAGE_BYTES);
	uint32_t flags = (op->flags & 0x80) ? (uint32_t)(op->raw >> 32) : (op->flags & 1);
	bool null_handle = (op->flags & 0x70) == 0x70;
	gdr_mh_t mh = { .h = 0x5a5a5a5a };
	bool must_fail;
	int rc;

	if (s->state == H_LIVE) {
		if (m.orphans == NORPHAN)
			return;
		m.orphan[m.orphans++] = *s;	/* still pinned: gdr_close will release it */
	}
	if (v2)
		rc = gdr_pin_buffer_v2(g, addr, size, flags, null_handle ? NULL : &mh);
	else
		rc = gdr_pin_buffer(g, addr, size, (op->flags & 2) ? op->raw : 0, (op->flags & 4) ? op->aux : 0,
				    null_handle ? NULL : &mh);
	EXPECT_ERRNO(rc, "gdr_pin_buffer");
	must_fail = !g || null_handle || size == 0 || (v2 && (flags & ~1u));
	if (must_fail)
		EXPECT_RC(rc, EINVAL, "gdr_pin_buffer with a NULL gdr_t or handle, size 0 or unknown flags");
	if (rc) {
		if (!null_handle && mh.h != 0x5a5a5a5a)
			fail("a failed pin wrote the handle");
		if (s->state == H_LIVE)
			s->state = H_STALE;	/* moved to the orphans; keep its value as a stale-looking handle */
		return;
	}
	if (mh.h == 0 || find_live(mh.h))
		fail("pin returned handle %#lx: zero or the same as a live one", mh.h);
	/* Only GPU memory pins: the range lies inside what the fake CUDA or gdr_alloc_mapped provides. */
	if (backend == BACKEND_DMABUF &&
	    (addr < DMABUF_BASE || size > DMABUF_SPAN || addr - DMABUF_BASE > DMABUF_SPAN - size))
		fail("dma-buf pin of [%#lx, +%zu) succeeded outside the GPU memory [%#lx, +%#lx)", addr, size,
		     DMABUF_BASE, DMABUF_SPAN);
	if (backend == BACKEND_VULKAN) {
		unsigned int i;
		bool inside = false;

		for (i = 0; i < NA; i++)
			inside |= m.a[i].used && m.a[i].g == gi && addr >= m.a[i].gpu && size <= m.a[i].size &&
				  addr - m.a[i].gpu <= m.a[i].size - size;
		if (!inside)
			fail("vulkan pin of [%#lx, +%zu) succeeded outside every allocation", addr, size);
	}
	*s = (struct hslot){ .state = H_LIVE, .mh = mh, .g = gi, .addr = addr, .size = size };
}

static void seq_unpin(const struct op *op)
{
	int gi;
	gdr_t g = pick_g(op, &gi);
	struct hslot *s;
	gdr_mh_t mh = pick_handle(op, &s);
	int rc = gdr_unpin_buffer(g, mh);

	if (!valid_for(g, gi, s)) {
		EXPECT_RC(rc, EINVAL, "gdr_unpin_buffer of a NULL gdr_t or a handle that is no live buffer of it");
		return;
	}
	EXPECT_RC(rc, 0, "gdr_unpin_buffer");
	s->state = H_STALE;
	s->mapped = false;
}

static void seq_map(const struct op *op)
{
	int gi;
	gdr_t g = pick_g(op, &gi);
	struct hslot *s;
	gdr_mh_t mh = pick_handle(op, &s);
	int flags = (op->flags & 0x80) ? (int)(int32_t)(op->raw >> 32) : (op->flags & 3);
	size_t size = derive_size(op->size_sel, op->raw, s ? s->size : GPU_PAGE_BYTES);
	bool null_va = (op->flags & 0x70) == 0x70;
	void *va = NULL;
	int rc;

	rc = (op->flags & 8) && flags == 0 ? gdr_map(g, mh, null_va ? NULL : &va, size)
					     : gdr_map_v2(g, mh, null_va ? NULL : &va, size, flags);
	EXPECT_ERRNO(rc, "gdr_map");
	if (!g || null_va || flags < 0 || flags > 3 || size == 0 || round_page(size) < size || !valid_for(g, gi, s)) {
		EXPECT_RC(rc, EINVAL, "gdr_map with a NULL gdr_t or va, unknown flags, size 0 or past SIZE_MAX in pages, or a handle that is no live buffer of it");
		return;
	}
	if (s->mapped) {
		EXPECT_RC(rc, EAGAIN, "gdr_map of a buffer already mapped");
		return;
	}
	if (rc)
		return;
	if (!va)
		fail("gdr_map succeeded with a NULL mapping");
	s->mapped = true;
	s->va = (uintptr_t)va;
	s->map_size = round_page(size);
}

static void seq_unmap(const struct op *op)
{
	int gi;
	gdr_t g = pick_g(op, &gi);
	struct hslot *s;
	gdr_mh_t mh = pick_handle(op, &s);
	uintptr_t va;
	size_t size;
	int rc;

	if (s && s->mapped && !(op->flags & 0x40))
		va = s->va;
	else if (s && s->mapped)
		va = s->va + derive_offset(op->off_sel, op->raw, s->map_size);	/* not where it is mapped, mostly */
	else
		va = (op->flags & 0x20) ? (uintptr_t)scratch : (uintptr_t)op->raw;
	size = derive_size(op->size_sel, op->raw, s ? s->map_size : 0);
	rc = gdr_unmap(g, mh, (void *)va, size);
	if (!valid_for(g, gi, s) || !s->mapped || va != s->va) {
		EXPECT_RC(rc, EINVAL, "gdr_unmap of a NULL gdr_t, a handle that is no live buffer of it, an unmapped buffer or the wrong address");
		return;
	}
	EXPECT_RC(rc, 0, "gdr_unmap");
	s->mapped = false;
}

static void seq_info(const struct op *op, bool v1)
{
	int gi;
	gdr_t g = pick_g(op, &gi);
	struct hslot *s;
	gdr_mh_t mh = pick_handle(op, &s);
	bool null_info = (op->flags & 0x70) == 0x70;
	gdr_info_v2_t info;
	struct gdr_info_v1 info1;
	bool mapped;
	int rc;

	memset(&info, 0xa5, sizeof(info));
	memset(&info1, 0xa5, sizeof(info1));
	if (v1)
		rc = gdr_get_info(g, mh, null_info ? NULL : &info1);
	else
		rc = gdr_get_info_v2(g, mh, null_info ? NULL : &info);
	if (!valid_for(g, gi, s) || null_info) {
		EXPECT_RC(rc, EINVAL, "gdr_get_info with a NULL gdr_t or info, or a handle that is no live buffer of it");
		return;
	}
	EXPECT_RC(rc, 0, "gdr_get_info");
	mapped = v1 ? info1.mapped : info.mapped;
	if (mapped != s->mapped)
		fail("gdr_get_info says mapped=%d, but the buffer is %s", mapped, s->mapped ? "mapped" : "not mapped");
	if (!v1 && (info.mapping_type != GDR_MAPPING_TYPE_NONE) != s->mapped)
		fail("gdr_get_info_v2: mapping_type %d disagrees with mapped=%d", info.mapping_type, s->mapped);
	if (!v1 && info.wc_mapping != (info.mapping_type == GDR_MAPPING_TYPE_WC))
		fail("gdr_get_info_v2: wc_mapping %d with mapping_type %d", info.wc_mapping, info.mapping_type);
}

static void seq_cb_flag(const struct op *op)
{
	int gi;
	gdr_t g = pick_g(op, &gi);
	struct hslot *s;
	gdr_mh_t mh = pick_handle(op, &s);
	bool null_flag = (op->flags & 0x70) == 0x70;
	int flag = -1, rc;

	rc = gdr_get_callback_flag(g, mh, null_flag ? NULL : &flag);
	if (!valid_for(g, gi, s) || null_flag) {
		EXPECT_RC(rc, EINVAL, "gdr_get_callback_flag with a NULL gdr_t or flag, or a handle that is no live buffer of it");
		return;
	}
	EXPECT_RC(rc, 0, "gdr_get_callback_flag");
	if (flag != 0 && flag != 1)
		fail("gdr_get_callback_flag set the flag to %d", flag);
}

/* Fill n bytes of the source with a pattern that depends on the operation (both ends of large ones). */
static void fill_source(uint8_t *p, size_t n, uint64_t seed)
{
	size_t head = n < 4096 ? n : 4096, i;

	for (i = 0; i < head; i++)
		p[i] = (uint8_t)(seed >> (8 * (i & 7))) ^ (uint8_t)(i * 131);
	if (n > head) {
		memset(p + head, (int)(seed & 0xff), n - head);
		for (i = n > 8192 ? n - 4096 : head; i < n; i++)
			p[i] = (uint8_t)(i * 7 + seed);
	}
}

/* A copy between the caller's buffer and a mapping: to, from, or to then back again. */
static void seq_copy(const struct op *op, int dir)
{
	struct hslot *s;
	gdr_mh_t mh = pick_handle(op, &s);
	size_t map_size = s && s->mapped ? s->map_size : 0;
	uint64_t off = derive_offset(op->off_sel, op->raw, map_size);
	size_t size = derive_size(op->size_sel, op->raw >> 16, map_size);
	uintptr_t base = s && s->mapped ? s->va : (uintptr_t)scratch;
	uintptr_t p = base + (uintptr_t)off;
	unsigned int host_off = op->aux & 63;
	unsigned int threads = (op->flags & 4) ? op->aux2 : 0;
	bool parallel = op->flags & 8;
	bool in_range;
	int rc;

	in_range = s && s->mapped && off <= map_size && size <= map_size - off;
	if (in_range && size > HOST_BUF)
		size = HOST_BUF;	/* the caller's buffer is only so big; still inside the mapping */
	if (!in_range && size <= HOST_BUF && s && s->mapped && (op->flags & 16)) {
		/* Just past the mapping: the library must catch it, not touch the guard page. */
		off = map_size - (size ? size - 1 : 0) + 1;
		p = base + (uintptr_t)off;
	}
	if (dir != 1) {
		fill_source(host_src + host_off, in_range ? size : 0, op->raw);
		rc = parallel ? gdr_copy_to_mapping_parallel(mh, (void *)p, host_src + host_off, size, threads)
			      : gdr_copy_to_mapping(mh, (void *)p, host_src + host_off, size);
		if (!in_range) {
			EXPECT_RC(rc, EINVAL, "gdr_copy_to_mapping of a handle that is no live mapped buffer, or outside its mapping");
			return;
		}
		EXPECT_RC(rc, 0, "gdr_copy_to_mapping");
	}
	if (dir != 0) {
		rc = parallel ? gdr_copy_from_mapping_parallel(mh, host_dst + host_off, (void *)p, size, threads)
			      : gdr_copy_from_mapping(mh, host_dst + host_off, (void *)p, size);
		if (!in_range) {
			EXPECT_RC(rc, EINVAL, "gdr_copy_from_mapping of a handle that is no live mapped buffer, or outside its mapping");
			return;
		}
		EXPECT_RC(rc, 0, "gdr_copy_from_mapping");
	}
	if (dir == 2 && memcmp(host_src + host_off, host_dst + host_off, size) != 0)
		fail("%zu bytes copied to the mapping at offset %llu read back different", size, (unsigned long long)off);
}

/* The copy-engine extension: any type, on the scratch area or an allocation's CPU pointer. */
static void seq_copy_type(const struct op *op)
{
	int type = (op->flags & 0x80) ? (int)(int32_t)(op->raw >> 32) : (op->flags & 3);
	const struct aslot *a = &m.a[op->aux2 % NA];
	uint8_t *area = (op->flags & 4) && a->used ? a->cpu : scratch;
	size_t area_size = (op->flags & 4) && a->used ? (size_t)a->size : SCRATCH;
	uint64_t off = derive_offset(op->off_sel, op->raw, area_size);
	size_t size = derive_size(op->size_sel, op->raw >> 16, area_size);
	unsigned int host_off = op->aux & 63;
	int rc;

	/* The caller owns both sides: keep the range inside the area and the host buffer. */
	if (off > area_size)
		off %= area_size + 1;
	if (size > area_size - off)
		size = area_size - off;
	if (size > HOST_BUF)
		size = HOST_BUF;
	fill_source(host_src + host_off, size, op->raw);
	rc = gdr_copy_to_mapped_memory((gdr_mapping_type_t)type, area + off, host_src + host_off, size);
	if (type <= 0 || type >= GDR_MAPPING_TYPE_MAX) {
		EXPECT_RC(rc, EINVAL, "gdr_copy_to_mapped_memory of an unknown type");
		EXPECT_RC(gdr_copy_from_mapped_memory((gdr_mapping_type_t)type, host_dst, area, size), EINVAL,
			  "gdr_copy_from_mapped_memory of an unknown type");
		return;
	}
	EXPECT_RC(rc, 0, "gdr_copy_to_mapped_memory");
	EXPECT_RC(gdr_copy_from_mapped_memory((gdr_mapping_type_t)type, host_dst + host_off, area + off, size), 0,
		  "gdr_copy_from_mapped_memory");
	if (memcmp(host_src + host_off, host_dst + host_off, size) != 0)
		fail("gdr_copy_*_mapped_memory: %zu bytes read back different", size);
}

static void seq_misc(const struct op *op)
{
	int gi;
	gdr_t g = pick_g(op, &gi);
	bool null_out = (op->flags & 0x70) == 0x70;
	int major = -1, minor = -1, value = -1, rc;
	const char *str = NULL;

	switch (op->code % OP_COUNT) {
	case OP_DRIVER_VERSION:
		rc = gdr_driver_get_version(g, null_out ? NULL : &major, (op->flags & 1) ? NULL : &minor);
		if (!g || null_out || (op->flags & 1)) {
			EXPECT_RC(rc, EINVAL, "gdr_driver_get_version with a NULL argument");
		} else if (backend == BACKEND_GDRDRV) {
			EXPECT_RC(rc, 0, "gdr_driver_get_version");
			if ((uint32_t)major != driver_version >> 16 || (uint32_t)minor != (driver_version & 0xffff))
				fail("gdr_driver_get_version says %d.%d", major, minor);
		} else {
			/* dma-buf, and vulkan where it pins cuMemCreate memory (the fakes let it): gdrdrv 2.6's stand-in. */
			EXPECT_RC(rc, 0, "gdr_driver_get_version without gdrdrv");
			if (major != 2 || minor != 6)
				fail("gdr_driver_get_version without gdrdrv says %d.%d, not 2.6", major, minor);
		}
		break;
	case OP_ATTR: {
		int attr = (op->flags & 0x80) ? (int)(int32_t)op->raw : op->aux % 5;

		rc = gdr_get_attribute(g, (gdr_attr_t)attr, null_out ? NULL : &value);
		if (!g || null_out || attr < GDR_ATTR_USE_PERSISTENT_MAPPING || attr >= GDR_ATTR_MAX) {
			EXPECT_RC(rc, EINVAL, "gdr_get_attribute with a NULL argument or unknown attribute");
		} else {
			EXPECT_RC(rc, 0, "gdr_get_attribute");
			if (value != 0 && value != 1)
				fail("gdr_get_attribute(%d) = %d", attr, value);
		}
		break;
	}
	case OP_TYPE_STRING: {
		int type = (op->flags & 0x80) ? (int)(int32_t)op->raw : op->aux % 6 - 1;

		rc = gdr_get_mapping_type_string((gdr_mapping_type_t)type, null_out ? NULL : &str);
		if (null_out || type < 0 || type >= GDR_MAPPING_TYPE_MAX) {
			EXPECT_RC(rc, EINVAL, "gdr_get_mapping_type_string of an unknown type");
		} else {
			EXPECT_RC(rc, 0, "gdr_get_mapping_type_string");
			if (!str || !*str)
				fail("gdr_get_mapping_type_string(%d) gave no name", type);
		}
		break;
	}
	case OP_RUNTIME_VERSION:
		gdr_runtime_get_version(null_out ? NULL : &major, (op->flags & 1) ? NULL : &minor);
		if ((!null_out && major != GDR_API_MAJOR_VERSION) || (!(op->flags & 1) && minor != GDR_API_MINOR_VERSION))
			fail("gdr_runtime_get_version says %d.%d", major, minor);
		break;
	default:	/* OP_BACKEND_NAME */
		str = gdr_get_backend_name(g);
		if (g ? !str || strcmp(str, backend_names[backend]) != 0 : str != NULL)
			fail("gdr_get_backend_name says %s", str ? str : "(null)");
		break;
	}
}

static void seq_alloc(const struct op *op)
{
	int gi;
	gdr_t g = pick_g(op, &gi);
	struct aslot *a = &m.a[op->aux2 % NA];
	size_t size = derive_size(op->size_sel, op->raw, GPU_PAGE_BYTES);
	bool null_gpu = (op->flags & 0x70) == 0x70, null_cpu = (op->flags & 0x70) == 0x60;
	uint64_t gpu = 0;
	void *cpu = NULL;
	int rc;

	if (a->used)
		return;	/* keep the table's allocations reachable: gdr_close frees the rest */
	rc = gdr_alloc_mapped(g, size, null_gpu ? NULL : &gpu, null_cpu ? NULL : &cpu);
	EXPECT_ERRNO(rc, "gdr_alloc_mapped");
	if (!g || null_gpu || null_cpu || size == 0) {
		EXPECT_RC(rc, EINVAL, "gdr_alloc_mapped with a NULL argument or size 0");
		return;
	}
	if (backend != BACKEND_VULKAN) {
		EXPECT_RC(rc, ENOTSUP, "gdr_alloc_mapped on a backend that does not allocate");
		return;
	}
	if (rc)
		return;
	if (!cpu || (gpu & (GPU_PAGE_BYTES - 1)))
		fail("gdr_alloc_mapped gave GPU %#llx CPU %p", (unsigned long long)gpu, cpu);
	*a = (struct aslot){ .used = true, .g = gi, .gpu = gpu, .cpu = cpu,
			     .size = (size + GPU_PAGE_BYTES - 1) & ~(GPU_PAGE_BYTES - 1) };
	/* All of the rounded size is the caller's. */
	a->cpu[0] = 1;
	a->cpu[a->size - 1] = 2;
}

static void seq_free(const struct op *op)
{
	int gi;
	gdr_t g = pick_g(op, &gi);
	struct aslot *a = &m.a[op->aux2 % NA];
	bool real = a->used && !(op->flags & 0x40);
	uint64_t gpu = real ? a->gpu : (op->flags & 0x20) ? a->gpu + (op->raw & 0xffff) : op->raw;
	struct aslot *owner = NULL;
	unsigned int i;
	int rc;

	for (i = 0; i < NA; i++)
		if (m.a[i].used && m.a[i].gpu == gpu)
			owner = &m.a[i];
	rc = gdr_free_mapped(g, gpu);
	if (!g) {
		EXPECT_RC(rc, EINVAL, "gdr_free_mapped(NULL)");
	} else if (backend != BACKEND_VULKAN) {
		EXPECT_RC(rc, ENOTSUP, "gdr_free_mapped on a backend that does not allocate");
	} else if (!owner || owner->g != gi) {
		EXPECT_RC(rc, EINVAL, "gdr_free_mapped of an address gdr_alloc_mapped did not return to this gdr_t");
	} else if (pins_in(owner)) {
		EXPECT_RC(rc, EBUSY, "gdr_free_mapped of an allocation still pinned");
	} else {
		EXPECT_RC(rc, 0, "gdr_free_mapped");
		owner->used = false;
	}
}

static void seq_invalidate(const struct op *op)
{
	const struct hslot *s = &m.h[op->h % NH];

	if (backend == BACKEND_GDRDRV && s->state == H_LIVE)
		fake_gdrdrv_invalidate(s->addr);
}

static void run_sequential(const struct op *ops, int n)
{
	int i;

	memset(&m, 0, sizeof(m));
	m.g[0] = gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN);
	for (i = 0; i < n; i++) {
		const struct op *op = &ops[i];

		current_op = op;
		current_index = i;
		switch (op->code % OP_COUNT) {
		case OP_OPEN: seq_open(op); break;
		case OP_CLOSE: seq_close(op); break;
		case OP_PIN: seq_pin(op, false); break;
		case OP_PIN_V2: seq_pin(op, true); break;
		case OP_UNPIN: seq_unpin(op); break;
		case OP_MAP: seq_map(op); break;
		case OP_UNMAP: seq_unmap(op); break;
		case OP_INFO: seq_info(op, false); break;
		case OP_INFO_V1: seq_info(op, true); break;
		case OP_CB_FLAG: seq_cb_flag(op); break;
		case OP_COPY_TO: seq_copy(op, 0); break;
		case OP_COPY_FROM: seq_copy(op, 1); break;
		case OP_ROUNDTRIP: seq_copy(op, 2); break;
		case OP_COPY_TYPE: seq_copy_type(op); break;
		case OP_ALLOC: seq_alloc(op); break;
		case OP_FREE: seq_free(op); break;
		case OP_INVALIDATE: seq_invalidate(op); break;
		default: seq_misc(op); break;
		}
	}
	current_op = NULL;
	current_index = n;
	for (i = 0; i < NG; i++)
		if (m.g[i])
			EXPECT_RC(gdr_close(m.g[i]), 0, "gdr_close at the end");
	check_released();
}

/* =================================================================== */
/* Several threads on one gdr_t                                         */
/* =================================================================== */

/* Copies hold it shared; unmap, unpin and free of what a copy may touch hold it exclusively. */
static pthread_rwlock_t memory_lock = PTHREAD_RWLOCK_INITIALIZER;

static struct {
	gdr_t g;
	_Atomic unsigned long h[NH];
	_Atomic uintptr_t va[NH];
	_Atomic size_t map_size[NH];
	_Atomic uint64_t a_gpu[NA];
	_Atomic(uint8_t *) a_cpu[NA];
	_Atomic uint64_t a_size[NA];
	const struct op *ops;
	int n, threads, repeat;
	unsigned int slots;	/* handle slots in use: few, so that threads meet on one handle */
	pthread_barrier_t start;
	atomic_int bad;
} t;

struct worker {
	int id;
	uint8_t *src, *dst;	/* this thread's buffers */
};

static void t_fail(const char *what, int rc)
{
	if (atomic_fetch_add(&t.bad, 1) == 0)
		dprintf(report_fd, "\nfuzz_api (threads): %s returned %d\n", what, rc);
}

#define T_ERRNO(rc, what)                                                                              \
	do {                                                                                           \
		int rc_ = (rc);                                                                        \
		if (rc_ < 0 || rc_ > 4095)                                                             \
			t_fail((what), rc_);	/* not 0 or an errno */                                \
	} while (0)

static gdr_mh_t t_handle(const struct op *op)
{
	gdr_mh_t mh = { .h = atomic_load(&t.h[op->h % t.slots]) };

	if (op->h >= 0xe0)
		mh.h = (op->h & 1) ? (unsigned long)op->raw : mh.h + 1;	/* never issued */
	return mh;
}

/*
 * A gdr_t of this thread's own, opened, used and closed (with or without
 * unpinning first) while the others work on the shared one: the handle
 * table is process-wide.  Its handle must mean nothing to the shared gdr_t.
 */
static void t_private_instance(const struct op *op)
{
	gdr_t own = gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN);
	uint64_t gpu = 0;
	void *cpu, *va;
	gdr_mh_t mine;
	gdr_info_v2_t info;
	unsigned long addr;
	int rc;

	if (gdr_close(NULL) != EINVAL)
		t_fail("gdr_close(NULL)", gdr_close(NULL));
	if (!own)
		return;
	if (backend == BACKEND_VULKAN && gdr_alloc_mapped(own, GPU_PAGE_BYTES, &gpu, &cpu) != 0)
		gpu = 0;
	addr = backend == BACKEND_VULKAN ? (unsigned long)gpu :
	       (backend == BACKEND_DMABUF ? DMABUF_BASE : FAKE_GPU_BASE) + (op->raw & 0xff) * GPU_PAGE_BYTES;
	if (gdr_pin_buffer_v2(own, addr, GPU_PAGE_BYTES, 0, &mine) == 0) {
		if ((rc = gdr_get_info_v2(t.g, mine, &info)) != EINVAL)
			t_fail("gdr_get_info_v2 on the shared gdr_t with another gdr_t's handle", rc);
		if ((rc = gdr_map(own, mine, &va, GPU_PAGE_BYTES)) == 0 && (op->flags & 1))
			T_ERRNO(gdr_unmap(own, mine, va, GPU_PAGE_BYTES), "gdr_unmap");
		if (op->code % OP_COUNT == OP_OPEN)
			T_ERRNO(gdr_unpin_buffer(own, mine), "gdr_unpin_buffer");
	}
	if ((rc = gdr_close(own)) != 0)
		t_fail("gdr_close of a private gdr_t", rc);
}

static void t_op(struct worker *w, const struct op *op, bool replay)
{
	gdr_t g = (op->g % 8) == 7 ? NULL : t.g;
	unsigned int hi = op->h % t.slots, ai = op->aux2 % NA;
	gdr_mh_t mh = t_handle(op);
	int rc, value;

	switch (op->code % OP_COUNT) {
	case OP_OPEN:
	case OP_CLOSE:
		/*
		 * The shared gdr_t is never closed under the others' calls (that
		 * would be their use-after-free).  Once per input: opening is slow.
		 */
		if (!replay)
			t_private_instance(op);
		break;
	case OP_PIN:
	case OP_PIN_V2: {
		uint64_t gpu = atomic_load(&t.a_gpu[ai]), asize = atomic_load(&t.a_size[ai]);
		unsigned long addr = pin_address(op, gpu, asize);
		size_t size = derive_size(op->size_sel, op->raw >> 8, asize ? asize : GPU_PAGE_BYTES);
		gdr_mh_t out = { 0 };

		rc = (op->code % OP_COUNT) == OP_PIN_V2 ? gdr_pin_buffer_v2(g, addr, size, op->flags & 1, &out)
							 : gdr_pin_buffer(g, addr, size, 0, 0, &out);
		T_ERRNO(rc, "gdr_pin_buffer");
		if (rc == 0)
			atomic_store(&t.h[hi], out.h);	/* an older handle here stays pinned until gdr_close */
		break;
	}
	case OP_UNPIN:
		pthread_rwlock_wrlock(&memory_lock);
		T_ERRNO(gdr_unpin_buffer(g, mh), "gdr_unpin_buffer");
		pthread_rwlock_unlock(&memory_lock);
		break;
	case OP_MAP: {
		void *va = NULL;
		size_t size = derive_size(op->size_sel, op->raw, GPU_PAGE_BYTES);

		rc = gdr_map_v2(g, mh, &va, size, op->flags & 3);
		T_ERRNO(rc, "gdr_map");
		if (rc == 0) {
			atomic_store(&t.map_size[hi], round_page(size));
			atomic_store(&t.va[hi], (uintptr_t)va);
		}
		break;
	}
	case OP_UNMAP:
		pthread_rwlock_wrlock(&memory_lock);
		T_ERRNO(gdr_unmap(g, mh, (void *)atomic_load(&t.va[hi]), atomic_load(&t.map_size[hi])), "gdr_unmap");
		pthread_rwlock_unlock(&memory_lock);
		break;
	case OP_INFO: {
		gdr_info_v2_t info;

		T_ERRNO(gdr_get_info_v2(g, mh, &info), "gdr_get_info_v2");
		break;
	}
	case OP_INFO_V1: {
		struct gdr_info_v1 info;

		T_ERRNO(gdr_get_info(g, mh, &info), "gdr_get_info");
		break;
	}
	case OP_CB_FLAG:
		T_ERRNO(gdr_get_callback_flag(g, mh, &value), "gdr_get_callback_flag");
		break;
	case OP_COPY_TO:
	case OP_COPY_FROM:
	case OP_ROUNDTRIP: {
		/*
		 * What this thread believes the mapping is; the library checks it
		 * against the handle's real mapping, which no unmap can take away
		 * while this holds the lock shared.
		 */
		size_t map_size = atomic_load(&t.map_size[hi]);
		uintptr_t p = atomic_load(&t.va[hi]) + derive_offset(op->off_sel, op->raw, map_size);
		size_t size = derive_size(op->size_sel, op->raw >> 16, map_size);
		unsigned int threads = (op->flags & 4) ? op->aux2 : 0;

		if (size > HOST_BUF)
			size = HOST_BUF;
		pthread_rwlock_rdlock(&memory_lock);
		if ((op->code % OP_COUNT) != OP_COPY_FROM)
			T_ERRNO(threads ? gdr_copy_to_mapping_parallel(mh, (void *)p, w->src, size, threads)
					: gdr_copy_to_mapping(mh, (void *)p, w->src, size),
				"gdr_copy_to_mapping");
		if ((op->code % OP_COUNT) != OP_COPY_TO)
			T_ERRNO(threads ? gdr_copy_from_mapping_parallel(mh, w->dst, (void *)p, size, threads)
					: gdr_copy_from_mapping(mh, w->dst, (void *)p, size),
				"gdr_copy_from_mapping");
		pthread_rwlock_unlock(&memory_lock);
		break;
	}
	case OP_COPY_TYPE: {
		size_t size = derive_size(op->size_sel, op->raw, SCRATCH) % (SCRATCH / 4 + 1);
		uint8_t *area;

		pthread_rwlock_rdlock(&memory_lock);
		area = atomic_load(&t.a_cpu[ai]);
		if (area && size > atomic_load(&t.a_size[ai]))
			size = atomic_load(&t.a_size[ai]);
		if (!area)
			area = scratch + (SCRATCH / 4) * (unsigned int)w->id;	/* each thread its own quarter */
		T_ERRNO(gdr_copy_to_mapped_memory((gdr_mapping_type_t)(op->flags & 3), area, w->src, size),
			"gdr_copy_to_mapped_memory");
		T_ERRNO(gdr_copy_from_mapped_memory((gdr_mapping_type_t)(op->flags & 3), w->dst, area, size),
			"gdr_copy_from_mapped_memory");
		pthread_rwlock_unlock(&memory_lock);
		break;
	}
	case OP_DRIVER_VERSION: {
		int major, minor;

		T_ERRNO(gdr_driver_get_version(g, &major, &minor), "gdr_driver_get_version");
		break;
	}
	case OP_ATTR:
		T_ERRNO(gdr_get_attribute(g, (gdr_attr_t)(op->aux % 5), &value), "gdr_get_attribute");
		break;
	case OP_ALLOC: {
		uint64_t gpu;
		void *cpu;

		if (atomic_load(&t.a_gpu[ai]))
			break;
		rc = gdr_alloc_mapped(g, derive_size(op->size_sel, op->raw, GPU_PAGE_BYTES), &gpu, &cpu);
		T_ERRNO(rc, "gdr_alloc_mapped");
		if (rc)
			break;
		pthread_rwlock_wrlock(&memory_lock);
		if (!atomic_load(&t.a_gpu[ai])) {
			/* Size first: a pin that sees the address also sees how far it reaches. */
			atomic_store(&t.a_size[ai], (derive_size(op->size_sel, op->raw, GPU_PAGE_BYTES) + GPU_PAGE_BYTES - 1) &
							    ~(GPU_PAGE_BYTES - 1));
			atomic_store(&t.a_cpu[ai], cpu);
			atomic_store(&t.a_gpu[ai], gpu);
		}	/* else another thread filled the slot first: this one lives until gdr_close */
		pthread_rwlock_unlock(&memory_lock);
		break;
	}
	case OP_FREE: {
		uint64_t gpu;

		pthread_rwlock_wrlock(&memory_lock);
		gpu = atomic_load(&t.a_gpu[ai]);
		rc = gdr_free_mapped(g, gpu ? gpu : op->raw);
		T_ERRNO(rc, "gdr_free_mapped");
		if (rc == 0 && gpu) {
			atomic_store(&t.a_gpu[ai], 0);
			atomic_store(&t.a_cpu[ai], NULL);
			atomic_store(&t.a_size[ai], 0);
		}
		pthread_rwlock_unlock(&memory_lock);
		break;
	}
	case OP_INVALIDATE:
		if (backend == BACKEND_GDRDRV)
			fake_gdrdrv_invalidate(FAKE_GPU_BASE + (op->raw & 0xff) * GPU_PAGE_BYTES);
		break;
	default: {
		const char *str;

		T_ERRNO(gdr_get_mapping_type_string((gdr_mapping_type_t)(op->aux % 5), &str), "gdr_get_mapping_type_string");
		(void)gdr_get_backend_name(g);
		break;
	}
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int r, i;

	pthread_barrier_wait(&t.start);
	for (r = 0; r < t.repeat; r++)
		for (i = w->id; i < t.n; i += t.threads)
			t_op(w, &t.ops[i], r > 0);
	return NULL;
}

static void run_threads(const struct op *ops, int n, int threads, int repeat, unsigned int slots)
{
	static uint8_t buffers[MAX_THREADS][2][HOST_BUF];
	struct worker workers[MAX_THREADS];
	pthread_t tid[MAX_THREADS];
	int i;

	t.g = gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN);
	for (i = 0; i < NH; i++) {
		atomic_store(&t.h[i], 0);
		atomic_store(&t.va[i], 0);
		atomic_store(&t.map_size[i], 0);
	}
	for (i = 0; i < NA; i++) {
		atomic_store(&t.a_gpu[i], 0);
		atomic_store(&t.a_cpu[i], NULL);
		atomic_store(&t.a_size[i], 0);
	}
	t.ops = ops;
	t.n = n;
	t.threads = threads;
	t.repeat = repeat;
	t.slots = slots;
	atomic_store(&t.bad, 0);
	pthread_barrier_init(&t.start, NULL, (unsigned int)threads);
	for (i = 0; i < threads; i++) {
		workers[i] = (struct worker){ .id = i, .src = buffers[i][0], .dst = buffers[i][1] };
		if (pthread_create(&tid[i], NULL, worker_main, &workers[i]) != 0) {
			fprintf(stderr, "fuzz_api: cannot create threads\n");
			abort();
		}
	}
	for (i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	pthread_barrier_destroy(&t.start);
	if (atomic_load(&t.bad))
		abort();
	if (t.g)
		EXPECT_RC(gdr_close(t.g), 0, "gdr_close after the threads");
	check_released();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct op ops[MAX_OPS];
	int n = 0, threads;

	if (size < 4)
		return 0;
	configure(data[0] & 3, data[1]);
	threads = (data[0] >> 2) & 3;
	for (size_t at = 4; at + 16 <= size && n < MAX_OPS; at += 16, n++) {
		memcpy(&ops[n], data + at, 8);
		memcpy(&ops[n].raw, data + at + 8, 8);
	}
	if (threads)
		run_threads(ops, n, threads + 1, 1 + data[2] % 8, 1 + data[3] % NH);
	else
		run_sequential(ops, n);
	return 0;
}
