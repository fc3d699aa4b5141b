// SPDX-License-Identifier: MIT
/*
 * The vulkan backend against the fake Vulkan loader and fake CUDA
 * (fake_vulkan.c): what gdr_driver_get_version answers and why, and pinning
 * memory the caller allocated with cuMemCreate (a POSIX fd handle
 * requested): pins at offsets, several pins of one allocation sharing one
 * import, the allocation freed under a pin, and the exact reason for memory
 * it cannot pin.  Also the old gdr_get_info entry point's v1 layout.
 */
#include <errno.h>

#include "gdrapi_v1.h"
#include "test_common.h"

/* The old entry point, which gdrapi_v1.h stops gdrapi.h from renaming to gdr_get_info_v2. */
int gdr_get_info(gdr_t g, gdr_mh_t handle, struct gdr_info_v1 *info);

#define GPU_PAGE_BYTES (64UL * 1024)
#define ALLOC_SIZE (2UL * 1024 * 1024)	/* the H200's cuMemCreate granularity */
#define POSIX_FD 1			/* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR */

static struct sandbox sandbox;

static struct fake_vulkan_config good_vulkan(void)
{
	struct fake_vulkan_config vk = {
		.present = true,
		.bar1_visible = true,
		.heap_size = 64UL << 20,
	};
	return vk;
}

static void configure(const struct fake_vulkan_config *vk, bool have_context)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	struct fake_cuda_config cuda = {
		.present = true,
		.driver_version = 13000,	/* the H200's 580: too old for dma-buf mmap, so vulkan it is */
		.dmabuf_supported = true,
		.have_context = have_context,
	};

	cfg.open_errno = ENOENT;
	sandbox_set_major(&sandbox, -1);
	fake_reset(&cfg);
	fake_cuda_set(&cuda);
	fake_vulkan_set(vk);
}

static int setup(void **state)
{
	struct fake_vulkan_config vk = good_vulkan();

	(void)state;
	sandbox_init(&sandbox);
	configure(&vk, true);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	assert_false(fake_cuda_loaded());
	assert_int_equal(fake_cuda_vmm_imports(), 0);
	assert_int_equal(fake_vulkan_live_objects(), 0);
	sandbox_cleanup(&sandbox);
	return 0;
}

/* Code that pins only what the vulkan backend can pin says so (issue 35): the tests below do. */
static gdr_t open_vulkan(void)
{
	gdr_t g = gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN);

	assert_non_null(g);
	assert_string_equal(gdr_get_backend_name(g), "vulkan");
	return g;
}

/* gdr_open() that must fail with errno expected; the log it wrote. */
static const char *open_must_fail(int expected)
{
	const char *log;
	gdr_t g;

	log_capture_begin();
	errno = 0;
	g = gdr_open();
	log = log_capture_end();
	assert_null(g);
	assert_int_equal(errno, expected);
	return log;
}

/*
 * The invariant of issue 35: where gdrdrv is not loaded and dma-buf cannot
 * be mapped, a process that did not ask for the vulkan backend does not get
 * it.  gdr_open() fails, as GDRCopy 2.6's does there, so consumers (NCCL,
 * UCX, NVSHMEM) run without GDRCopy instead of failing their first pin of
 * cudaMalloc memory; the failure says how to ask.
 */
static void test_implicit_open_never_takes_vulkan(void **state)
{
	const char *log, *report;

	(void)state;
	log = open_must_fail(ENOENT);	/* gdrdrv's reason, the first */
	assert_contains(log, "vulkan: not tried: it pins only cuMemCreate memory exported as a POSIX fd");
	assert_contains(log, "GDRCOPY_BACKEND=vulkan");
	assert_contains(log, "allow_vulkan = yes in ");
	assert_contains(log, sandbox.node_config);
	assert_contains(log, "gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN)");
	report = gdr_get_open_failure();
	assert_contains(report, "\nvulkan: not tried");
	/* No Vulkan object was made: the backend was not even opened. */
	assert_int_equal(fake_vulkan_live_objects(), 0);
	/* gdr_open_ex(0) is gdr_open(). */
	assert_null(gdr_open_ex(0));
	assert_int_equal(errno, ENOENT);
}

/* Asking never outranks gdrdrv: where it is usable, every way of opening takes it. */
static void test_asking_for_vulkan_keeps_gdrdrv_first(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	gdr_t g;

	(void)state;
	sandbox_set_major(&sandbox, 1);
	fake_reset(&cfg);
	sandbox_write(sandbox.device, "");
	sandbox_write(sandbox.node_config, "allow_vulkan = yes\n");
	g = gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN);
	assert_non_null(g);
	assert_string_equal(gdr_get_backend_name(g), "gdrdrv");
	assert_int_equal(gdr_close(g), 0);
	g = gdr_open();
	assert_non_null(g);
	assert_string_equal(gdr_get_backend_name(g), "gdrdrv");
	assert_int_equal(gdr_close(g), 0);
}

/* The node's file: allow_vulkan = yes opens it for every process; anything else does not. */
static void test_node_opt_in(void **state)
{
	static const char *const refused[] = {
		"allow_vulkan = no\n",
		"# allow_vulkan = yes\n",
		"allow_vulkan = maybe\n",
		"allow_vulkan = yes\nallow_vulkan = off\n",
		"allow_vulkan: yes\n",
		"allow_vulkans = yes\n",
	};
	char expected[256];
	const char *log;
	size_t i;
	gdr_t g;

	(void)state;
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		sandbox_write(sandbox.node_config, refused[i]);
		log = open_must_fail(ENOENT);
		assert_contains(log, "vulkan: not tried");
	}
	/* What it did not understand, it says, with the line and what it accepts. */
	sandbox_write(sandbox.node_config, "allow_vulkan = maybe\n");
	assert_contains(open_must_fail(ENOENT), ":1: allow_vulkan = \"maybe\" is neither yes nor no; taken as no");
	sandbox_write(sandbox.node_config, "allow_vulkans = yes\n");
	assert_contains(open_must_fail(ENOENT), ":1: unknown setting \"allow_vulkans\"");

	sandbox_write(sandbox.node_config, "# the packages' file, edited\n\n  allow_vulkan   =   Yes   # for UCX with cuMem buffers\n");
	log_capture_begin();
	g = gdr_open();
	log = log_capture_end();
	assert_non_null(g);
	assert_string_equal(gdr_get_backend_name(g), "vulkan");
	snprintf(expected, sizeof(expected), "using the vulkan backend, as allow_vulkan = yes in %s:3 asks",
		 sandbox.node_config);
	assert_contains(log, expected);
	assert_int_equal(gdr_close(g), 0);
}

/* A process asks with GDRCOPY_BACKEND=vulkan; a name that is no backend is an error naming those that are. */
static void test_process_opt_in_and_unknown_names(void **state)
{
	static const char *const unknown[] = { "vulcan", "Vulkan", "auto", "gdrdrv,vulkan" };
	const char *log;
	size_t i;
	gdr_t g;

	(void)state;
	setenv("GDRCOPY_BACKEND", "vulkan", 1);
	g = gdr_open();
	unsetenv("GDRCOPY_BACKEND");
	assert_non_null(g);
	assert_string_equal(gdr_get_backend_name(g), "vulkan");
	assert_int_equal(gdr_close(g), 0);

	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		setenv("GDRCOPY_BACKEND", unknown[i], 1);
		log = open_must_fail(EINVAL);
		assert_contains(log, "names no backend: it accepts gdrdrv, dmabuf (or dma-buf) and vulkan");
		assert_contains(gdr_get_open_failure(), unknown[i]);
		/* Also when the code asks for vulkan: the variable is wrong whoever opens. */
		assert_null(gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN));
		assert_int_equal(errno, EINVAL);
		unsetenv("GDRCOPY_BACKEND");
	}
	/* Empty is unset. */
	setenv("GDRCOPY_BACKEND", "", 1);
	open_must_fail(ENOENT);
	unsetenv("GDRCOPY_BACKEND");
}

/* Code asks with gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN); an unknown flag is EINVAL, with nothing opened. */
static void test_code_opt_in_and_unknown_flags(void **state)
{
	const char *log;
	gdr_t g;

	(void)state;
	log_capture_begin();
	g = gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN);
	log = log_capture_end();
	assert_non_null(g);
	assert_contains(log, "as gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN) asks");
	assert_int_equal(gdr_close(g), 0);

	log_capture_begin();
	errno = 0;
	g = gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN | 0x80);
	log = log_capture_end();
	assert_null(g);
	assert_int_equal(errno, EINVAL);
	assert_contains(log, "gdr_open_ex: unknown flags 0x80");
	assert_int_equal(fake_vulkan_live_objects(), 0);
}

/* gdr_driver_get_version means the same whichever way vulkan was asked for: 2.6 where CUDA's memory pins. */
static void test_driver_version_under_each_opt_in(void **state)
{
	int major, minor, way;
	gdr_t g = NULL;

	(void)state;
	for (way = 0; way < 3; way++) {
		if (way == 0)
			g = gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN);
		if (way == 1) {
			setenv("GDRCOPY_BACKEND", "vulkan", 1);
			g = gdr_open();
			unsetenv("GDRCOPY_BACKEND");
		}
		if (way == 2) {
			sandbox_write(sandbox.node_config, "allow_vulkan = yes\n");
			g = gdr_open();
		}
		assert_non_null(g);
		assert_string_equal(gdr_get_backend_name(g), "vulkan");
		major = minor = -1;
		assert_int_equal(gdr_driver_get_version(g, &major, &minor), 0);
		assert_int_equal(major, 2);
		assert_int_equal(minor, 6);
		assert_int_equal(gdr_close(g), 0);
	}
}

/* gdr_driver_get_version on g: its return, with both numbers checked to be written. */
static int driver_version(gdr_t g, int *major, int *minor)
{
	*major = -12345;
	*minor = -12345;
	return gdr_driver_get_version(g, major, minor);
}

static void test_driver_version_where_cuda_memory_pins(void **state)
{
	int major, minor;
	gdr_t g;

	(void)state;
	g = open_vulkan();
	/* It stands in for gdrdrv 2.6: the library's own interface version. */
	assert_int_equal(driver_version(g, &major, &minor), 0);
	assert_int_equal(major, GDR_API_MAJOR_VERSION);
	assert_int_equal(minor, GDR_API_MINOR_VERSION);
	assert_int_equal(major, 2);
	assert_int_equal(minor, 6);
	assert_int_equal(gdr_close(g), 0);
}

/* Without what pinning cuMemCreate memory needs: 0.0 (every consumer's gate fails) and ENODEV, with why. */
static void check_version_refused(const char *reason)
{
	int major, minor, rc;
	const char *log;
	gdr_t g;

	g = open_vulkan();
	log_capture_begin();
	rc = driver_version(g, &major, &minor);
	log = log_capture_end();
	assert_int_equal(rc, ENODEV);
	assert_int_equal(major, 0);
	assert_int_equal(minor, 0);
	assert_contains(log, "gdr_driver_get_version: 0.0");
	assert_contains(log, reason);
	assert_contains(log, "or load gdrdrv");
	assert_int_equal(gdr_close(g), 0);
}

static void test_driver_version_without_vmm_calls(void **state)
{
	struct fake_vulkan_config vk = good_vulkan();

	(void)state;
	vk.no_vmm_calls = true;
	configure(&vk, true);
	check_version_refused("libcuda.so.1 has no cuMemRetainAllocationHandle");
}

static void test_driver_version_without_opaque_fd_import(void **state)
{
	struct fake_vulkan_config vk = good_vulkan();

	(void)state;
	vk.no_opaque_fd_import = true;
	configure(&vk, true);
	check_version_refused("can import opaque fds");
}

static void fill(unsigned char *p, size_t n, unsigned char seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(seed + i * 7);
}

/*
 * NCCL's way (ncclGdrCudaCalloc): allocate size + 64 KiB - 1, pin the first
 * 64 KiB-aligned address inside.  Here the pin starts 3 GPU pages into the
 * allocation; CPU writes through the mapping show at the CUDA address and
 * the other way round.
 */
static void test_pin_cumemcreate_at_an_offset(void **state)
{
	const size_t size = 256 * 1024;
	unsigned long gpu = fake_cuda_vmm_create(ALLOC_SIZE, POSIX_FD, 0);
	unsigned long addr = gpu + 3 * GPU_PAGE_BYTES;
	unsigned char out[1000], in[1000];
	gdr_info_t info;
	gdr_mh_t mh;
	void *map;
	gdr_t g;

	(void)state;
	assert_true(gpu != 0);
	g = open_vulkan();
	assert_int_equal(gdr_pin_buffer(g, addr, size, 0, 0, &mh), 0);
	assert_int_equal(fake_cuda_vmm_imports(), 1);
	assert_int_equal(gdr_map(g, mh, &map, size), 0);
	assert_int_equal(gdr_get_info_v2(g, mh, &info), 0);
	assert_int_equal(info.va, addr);
	assert_int_equal(info.mapped_size, size);
	assert_int_equal(info.mapping_type, GDR_MAPPING_TYPE_WC);

	fill(out, sizeof(out), 1);
	assert_int_equal(gdr_copy_to_mapping(mh, (char *)map + 4096 + 3, out, sizeof(out)), 0);
	assert_memory_equal((void *)(addr + 4096 + 3), out, sizeof(out));	/* what "CUDA" reads */
	fill((unsigned char *)(addr + size - sizeof(in)), sizeof(in), 99);	/* what "CUDA" wrote */
	assert_int_equal(gdr_copy_from_mapping(mh, in, (char *)map + size - sizeof(in), sizeof(in)), 0);
	assert_memory_equal(in, (void *)(addr + size - sizeof(in)), sizeof(in));

	assert_int_equal(gdr_unmap(g, mh, map, size), 0);
	assert_int_equal(gdr_unpin_buffer(g, mh), 0);
	assert_int_equal(fake_cuda_vmm_imports(), 0);
	assert_int_equal(fake_cuda_vmm_refs(gpu), 1);	/* every retain released: only the creator's */
	assert_int_equal(gdr_close(g), 0);
	fake_cuda_vmm_free(gpu);
	assert_int_equal(fake_cuda_vmm_live(), 0);
}

/* With no current context, the primary one is borrowed for the lookup and given back. */
static void test_pin_without_a_current_context(void **state)
{
	struct fake_vulkan_config vk = good_vulkan();
	unsigned long gpu;
	gdr_mh_t mh;
	gdr_t g;

	(void)state;
	configure(&vk, false);
	gpu = fake_cuda_vmm_create(ALLOC_SIZE, POSIX_FD, 0);
	g = open_vulkan();
	assert_int_equal(gdr_pin_buffer(g, gpu, GPU_PAGE_BYTES, 0, 0, &mh), 0);
	assert_int_equal(fake_cuda_primary_retains(), fake_cuda_primary_releases());
	assert_int_equal(gdr_unpin_buffer(g, mh), 0);
	assert_int_equal(gdr_close(g), 0);
	fake_cuda_vmm_free(gpu);
}

static void test_pins_of_one_allocation_share_one_import(void **state)
{
	unsigned long gpu = fake_cuda_vmm_create(ALLOC_SIZE, POSIX_FD, 0);
	gdr_mh_t a, b, c;
	void *map_a, *map_b;
	gdr_t g;

	(void)state;
	g = open_vulkan();
	assert_int_equal(gdr_pin_buffer(g, gpu, GPU_PAGE_BYTES, 0, 0, &a), 0);
	assert_int_equal(gdr_pin_buffer_v2(g, gpu + 8 * GPU_PAGE_BYTES, 2 * GPU_PAGE_BYTES, 0, &b), 0);
	assert_int_equal(gdr_pin_buffer(g, gpu + 100, 5000, 0, 0, &c), 0);	/* unaligned: pins, never maps */
	assert_int_equal(fake_cuda_vmm_imports(), 1);
	assert_int_equal(fake_cuda_vmm_refs(gpu), 2);	/* the creator's and the import's */
	assert_int_equal(gdr_map(g, a, &map_a, GPU_PAGE_BYTES), 0);
	assert_int_equal(gdr_map(g, b, &map_b, 2 * GPU_PAGE_BYTES), 0);
	assert_ptr_equal((char *)map_b - (char *)map_a, 8 * GPU_PAGE_BYTES);
	assert_int_equal(gdr_unmap(g, a, map_a, GPU_PAGE_BYTES), 0);
	assert_int_equal(gdr_unpin_buffer(g, a), 0);
	assert_int_equal(gdr_unpin_buffer(g, c), 0);
	assert_int_equal(fake_cuda_vmm_imports(), 1);	/* b still holds it */
	*(volatile unsigned char *)map_b = 0x5a;
	assert_int_equal(*(unsigned char *)(gpu + 8 * GPU_PAGE_BYTES), 0x5a);
	assert_int_equal(gdr_unmap(g, b, map_b, 2 * GPU_PAGE_BYTES), 0);
	assert_int_equal(gdr_unpin_buffer(g, b), 0);
	assert_int_equal(fake_cuda_vmm_imports(), 0);
	assert_int_equal(fake_cuda_vmm_refs(gpu), 1);
	assert_int_equal(gdr_close(g), 0);
	fake_cuda_vmm_free(gpu);
}

/*
 * The caller frees the allocation (cuMemUnmap + cuMemRelease) while it is
 * pinned and mapped: the import keeps the physical memory, so the mapping
 * stays valid (nothing faults) until the unpin; a new allocation at the
 * same address is a new import, never the old one.
 */
static void test_allocation_freed_under_a_pin(void **state)
{
	unsigned long gpu = fake_cuda_vmm_create(ALLOC_SIZE, POSIX_FD, 0), again;
	unsigned char *map, value;
	gdr_mh_t mh, mh2;
	void *map2;
	gdr_t g;

	(void)state;
	g = open_vulkan();
	assert_int_equal(gdr_pin_buffer(g, gpu, ALLOC_SIZE, 0, 0, &mh), 0);
	assert_int_equal(gdr_map(g, mh, (void **)&map, ALLOC_SIZE), 0);
	map[10] = 42;
	fake_cuda_vmm_free(gpu);
	assert_int_equal(fake_cuda_vmm_live(), 1);	/* kept by the import */
	map[ALLOC_SIZE - 1] = 7;
	assert_int_equal(gdr_copy_from_mapping(mh, &value, map + 10, 1), 0);
	assert_int_equal(value, 42);

	again = fake_cuda_vmm_create(ALLOC_SIZE, POSIX_FD, 0);
	assert_int_equal(gdr_pin_buffer(g, again, GPU_PAGE_BYTES, 0, 0, &mh2), 0);
	assert_int_equal(fake_cuda_vmm_imports(), 2);
	assert_int_equal(gdr_map(g, mh2, &map2, GPU_PAGE_BYTES), 0);
	assert_ptr_not_equal(map2, map);
	assert_int_equal(gdr_unmap(g, mh2, map2, GPU_PAGE_BYTES), 0);
	assert_int_equal(gdr_unpin_buffer(g, mh2), 0);

	assert_int_equal(gdr_unmap(g, mh, map, ALLOC_SIZE), 0);
	assert_int_equal(gdr_unpin_buffer(g, mh), 0);
	assert_int_equal(fake_cuda_vmm_live(), 1);	/* only the new allocation */
	assert_int_equal(gdr_close(g), 0);
	fake_cuda_vmm_free(again);
	assert_int_equal(fake_cuda_vmm_live(), 0);
}

/* A pin that fails: EINVAL, with reason in the log, nothing imported, every retain released. */
static void check_pin_refused(gdr_t g, unsigned long addr, size_t size, const char *reason)
{
	const char *log;
	gdr_mh_t mh;
	int rc;

	log_capture_begin();
	rc = gdr_pin_buffer(g, addr, size, 0, 0, &mh);
	log = log_capture_end();
	assert_int_equal(rc, EINVAL);
	assert_contains(log, reason);
	assert_int_equal(fake_cuda_vmm_imports(), 0);
}

static void test_cumemalloc_memory_refused(void **state)
{
	static unsigned char cumemalloc[GPU_PAGE_BYTES * 2] __attribute__((aligned(65536)));
	gdr_t g;

	(void)state;
	fake_cuda_add_range((unsigned long)cumemalloc, sizeof(cumemalloc));
	g = open_vulkan();
	check_pin_refused(g, (unsigned long)cumemalloc, GPU_PAGE_BYTES,
			  "is not cuMemCreate memory (cuMemRetainAllocationHandle: invalid argument, as for memory with no allocation handle)");
	check_pin_refused(g, (unsigned long)cumemalloc, GPU_PAGE_BYTES,
			  "allocate with cuMemCreate requesting CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, or load gdrdrv");
	assert_int_equal(gdr_close(g), 0);
}

static void test_no_shareable_handle_refused(void **state)
{
	unsigned long gpu = fake_cuda_vmm_create(ALLOC_SIZE, 0, 0);
	gdr_t g;

	(void)state;
	g = open_vulkan();
	check_pin_refused(g, gpu, GPU_PAGE_BYTES, "requested no shareable POSIX fd handle (requestedHandleTypes 0)");
	check_pin_refused(g, gpu, GPU_PAGE_BYTES,
			  "allocate with cuMemCreate requesting CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, or load gdrdrv");
	assert_int_equal(fake_cuda_vmm_refs(gpu), 1);
	assert_int_equal(gdr_close(g), 0);
	fake_cuda_vmm_free(gpu);
}

static void test_other_gpu_refused(void **state)
{
	unsigned long gpu = fake_cuda_vmm_create(ALLOC_SIZE, POSIX_FD, 1);
	gdr_t g;

	(void)state;
	g = open_vulkan();
	check_pin_refused(g, gpu, GPU_PAGE_BYTES, "lives on CUDA device 1, which is not among the GPUs Vulkan sees");
	assert_int_equal(fake_cuda_vmm_refs(gpu), 1);
	assert_int_equal(gdr_close(g), 0);
	fake_cuda_vmm_free(gpu);
}

static void test_pin_past_the_allocation_refused(void **state)
{
	unsigned long gpu = fake_cuda_vmm_create(ALLOC_SIZE, POSIX_FD, 0);
	gdr_t g;

	(void)state;
	g = open_vulkan();
	check_pin_refused(g, gpu + ALLOC_SIZE - GPU_PAGE_BYTES, 2 * GPU_PAGE_BYTES,
			  "does not lie inside one 64 KiB-aligned cuMemCreate allocation");
	assert_int_equal(fake_cuda_vmm_refs(gpu), 1);
	assert_int_equal(gdr_close(g), 0);
	fake_cuda_vmm_free(gpu);
}

static void test_pin_without_vmm_calls_refused(void **state)
{
	struct fake_vulkan_config vk = good_vulkan();
	unsigned long gpu;
	gdr_t g;

	(void)state;
	vk.no_vmm_calls = true;
	configure(&vk, true);
	gpu = fake_cuda_vmm_create(ALLOC_SIZE, POSIX_FD, 0);
	g = open_vulkan();
	check_pin_refused(g, gpu, GPU_PAGE_BYTES, "cannot pin memory CUDA allocated: libcuda.so.1 has no cuMemRetainAllocationHandle");
	assert_int_equal(gdr_close(g), 0);
	fake_cuda_vmm_free(gpu);
}

/*
 * NCCL resolves gdr_get_info by name and passes its own copy of the v1
 * struct (40 bytes): the old entry point must write exactly that, not one
 * byte past it.
 */
static void test_gdr_get_info_v1_writes_40_bytes(void **state)
{
	unsigned long gpu = fake_cuda_vmm_create(ALLOC_SIZE, POSIX_FD, 0);
	struct {
		struct gdr_info_v1 info;
		unsigned char guard[64];
	} out;
	unsigned char guard[64];
	gdr_mh_t mh;
	void *map;
	gdr_t g;

	(void)state;
	assert_int_equal(sizeof(out.info), 40);
	memset(guard, 0xa5, sizeof(guard));
	g = open_vulkan();
	assert_int_equal(gdr_pin_buffer(g, gpu, GPU_PAGE_BYTES, 0, 0, &mh), 0);
	assert_int_equal(gdr_map(g, mh, &map, GPU_PAGE_BYTES), 0);
	memset(&out, 0xa5, sizeof(out));
	assert_int_equal(gdr_get_info(g, mh, &out.info), 0);
	assert_memory_equal(out.guard, guard, sizeof(guard));
	assert_int_equal(out.info.va, gpu);
	assert_int_equal(out.info.mapped_size, GPU_PAGE_BYTES);
	assert_int_equal(out.info.page_size, GPU_PAGE_BYTES);
	assert_int_equal(out.info.mapped, 1);
	assert_int_equal(out.info.wc_mapping, 1);
	assert_int_equal(gdr_unmap(g, mh, map, GPU_PAGE_BYTES), 0);
	assert_int_equal(gdr_unpin_buffer(g, mh), 0);
	assert_int_equal(gdr_close(g), 0);
	fake_cuda_vmm_free(gpu);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_implicit_open_never_takes_vulkan, setup, teardown),
		cmocka_unit_test_setup_teardown(test_asking_for_vulkan_keeps_gdrdrv_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_node_opt_in, setup, teardown),
		cmocka_unit_test_setup_teardown(test_process_opt_in_and_unknown_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_code_opt_in_and_unknown_flags, setup, teardown),
		cmocka_unit_test_setup_teardown(test_driver_version_under_each_opt_in, setup, teardown),
		cmocka_unit_test_setup_teardown(test_driver_version_where_cuda_memory_pins, setup, teardown),
		cmocka_unit_test_setup_teardown(test_driver_version_without_vmm_calls, setup, teardown),
		cmocka_unit_test_setup_teardown(test_driver_version_without_opaque_fd_import, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pin_cumemcreate_at_an_offset, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pin_without_a_current_context, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pins_of_one_allocation_share_one_import, setup, teardown),
		cmocka_unit_test_setup_teardown(test_allocation_freed_under_a_pin, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cumemalloc_memory_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_shareable_handle_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_gpu_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pin_past_the_allocation_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pin_without_vmm_calls_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gdr_get_info_v1_writes_40_bytes, setup, teardown),
	};

	enable_library_logging();
	return cmocka_run_group_tests_name("vulkan", tests, NULL, NULL);
}
