// SPDX-License-Identifier: MIT
/*
 * The dma-buf backend against a fake CUDA driver: when it is chosen, what
 * it refuses and why (driver too old, no dma-buf, mmap ENOTSUPP), and pin /
 * map / copy / info / attributes / close on it.
 */
#include <errno.h>
#include <sys/mman.h>

#include "test_common.h"

#define HOST_PAGE 4096UL

static struct sandbox sandbox;
static void *gpu_memory;	/* "GPU" addresses are host addresses here */
#define GPU_SIZE (64 * HOST_PAGE)

static struct fake_cuda_config good_cuda(void)
{
	struct fake_cuda_config c = {
		.present = true,
		.driver_version = 13030,
		.dmabuf_supported = true,
	};
	return c;
}

static int setup(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	struct fake_cuda_config cuda = good_cuda();

	(void)state;
	sandbox_init(&sandbox);
	cfg.open_errno = ENOENT;	/* no gdrdrv: the dma-buf backend is the fallback */
	sandbox_set_major(&sandbox, -1);
	fake_reset(&cfg);
	fake_cuda_set(&cuda);
	fake_cuda_add_range((unsigned long)gpu_memory, GPU_SIZE);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	assert_false(fake_cuda_loaded());	/* every gdr_close releases libcuda */
	assert_int_equal(fake_cuda_live_fds(), 0);
	sandbox_cleanup(&sandbox);
	return 0;
}

static const char *open_must_fail(int expected_errno)
{
	const char *log;
	gdr_t g;
	int err;

	log_capture_begin();
	g = gdr_open();
	err = errno;
	log = log_capture_end();
	assert_null(g);
	assert_int_equal(err, expected_errno);
	return log;
}

static void test_fallback_when_gdrdrv_missing(void **state)
{
	int value = -1, major = -1, minor = -1;
	const char *log;
	gdr_t g;

	(void)state;
	log_capture_begin();
	g = gdr_open();
	log = log_capture_end();
	assert_non_null(g);
	assert_contains(log, "backend gdrdrv not used: the gdrdrv kernel module is not loaded");
	assert_contains(log, "using the dmabuf backend");
	assert_string_equal(gdr_get_backend_name(g), "dmabuf");
	assert_int_equal(gdr_get_attribute(g, GDR_ATTR_USING_DMA_BUF_MMAP, &value), 0);
	assert_int_equal(value, 1);
	assert_int_equal(gdr_get_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING, &value), 0);
	assert_int_equal(value, 1);
	assert_int_equal(gdr_get_attribute(g, GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE, &value), 0);
	assert_int_equal(value, 1);
	/* The NVIDIA driver's dma-buf mmap sets no VM_DONTCOPY. */
	value = -1;
	assert_int_equal(gdr_get_attribute(g, GDR_ATTR_VMA_INHERITED_ON_FORK, &value), 0);
	assert_int_equal(value, 1);
	/*
	 * No gdrdrv to ask, but consumers read both numbers whatever it returns:
	 * it stands in for the gdrdrv interface the library implements (2.6),
	 * since it pins any CUDA memory a consumer gated on that version pins.
	 */
	assert_int_equal(gdr_driver_get_version(g, &major, &minor), 0);
	assert_int_equal(major, GDR_API_MAJOR_VERSION);
	assert_int_equal(minor, GDR_API_MINOR_VERSION);
	assert_int_equal(major, 2);
	assert_int_equal(minor, 6);
	assert_int_equal(gdr_close(g), 0);
}

/* The vulkan backend's attributes: its mappings are the NVIDIA driver's BAR1 mappings. */
static void test_vulkan_attributes(void **state)
{
	struct fake_cuda_config cuda = good_cuda();
	struct fake_vulkan_config vk = { .present = true, .bar1_visible = true, .heap_size = 1 << 20 };
	int value = -1;
	gdr_t g;

	(void)state;
	cuda.driver_version = 12040;	/* too old for dma-buf mmap */
	fake_cuda_set(&cuda);
	fake_vulkan_set(&vk);
	g = gdr_open_ex(GDR_OPEN_FLAG_ALLOW_VULKAN);
	assert_non_null(g);
	assert_string_equal(gdr_get_backend_name(g), "vulkan");
	assert_int_equal(gdr_get_attribute(g, GDR_ATTR_VMA_INHERITED_ON_FORK, &value), 0);
	assert_int_equal(value, 1);
	assert_int_equal(gdr_get_attribute(g, GDR_ATTR_USING_DMA_BUF_MMAP, &value), 0);
	assert_int_equal(value, 0);
	assert_int_equal(gdr_get_attribute(g, GDR_ATTR_MAX, &value), EINVAL);
	assert_int_equal(gdr_close(g), 0);
	assert_int_equal(fake_vulkan_live_objects(), 0);
}

static void test_forced_even_with_gdrdrv(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	struct fake_cuda_config cuda = good_cuda();
	int value = -1;
	gdr_t g;

	(void)state;
	fake_reset(&cfg);
	fake_cuda_set(&cuda);
	setenv("GDRCOPY_USE_DMABUF_MMAP", "1", 1);
	g = gdr_open();
	unsetenv("GDRCOPY_USE_DMABUF_MMAP");
	assert_non_null(g);
	assert_int_equal(fake_open_count(), 0);
	assert_int_equal(gdr_get_attribute(g, GDR_ATTR_USING_DMA_BUF_MMAP, &value), 0);
	assert_int_equal(value, 1);
	assert_int_equal(gdr_close(g), 0);
}

/* GDRCOPY_BACKEND takes the README's spelling too: "dma-buf" chose no backend at all before. */
static void test_backend_spelled_as_the_readme_does(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	struct fake_cuda_config cuda = good_cuda();
	const char *names[] = { "dmabuf", "dma-buf" };
	size_t i;
	gdr_t g;

	(void)state;
	fake_reset(&cfg);
	fake_cuda_set(&cuda);
	for (i = 0; i < 2; i++) {
		setenv("GDRCOPY_BACKEND", names[i], 1);
		g = gdr_open();
		unsetenv("GDRCOPY_BACKEND");
		assert_non_null(g);
		assert_string_equal(gdr_get_backend_name(g), "dmabuf");
		assert_int_equal(fake_open_count(), 0);
		assert_int_equal(gdr_close(g), 0);
	}
}

static void test_driver_too_old(void **state)
{
	struct fake_cuda_config cuda = good_cuda();
	const char *log;

	(void)state;
	cuda.driver_version = 13000;	/* the GPU machine's 580 driver */
	fake_cuda_set(&cuda);
	setenv("GDRCOPY_USE_DMABUF_MMAP", "1", 1);
	log = open_must_fail(ENOTSUP);
	unsetenv("GDRCOPY_USE_DMABUF_MMAP");
	assert_contains(log, "the CUDA driver is 13.0 but mapping dma-buf fds needs 13.3 or newer");
	assert_contains(log, "524");
}

static void test_no_libcuda(void **state)
{
	struct fake_cuda_config cuda = good_cuda();
	const char *log;

	(void)state;
	cuda.present = false;
	fake_cuda_set(&cuda);
	/* gdrdrv's reason comes first and sets errno. */
	log = open_must_fail(ENOENT);
	assert_contains(log, "gdrdrv: the gdrdrv kernel module is not loaded");
	assert_contains(log, "dmabuf: cannot load libcuda.so.1");
}

static void test_no_dmabuf_support(void **state)
{
	struct fake_cuda_config cuda = good_cuda();

	(void)state;
	cuda.dmabuf_supported = false;
	fake_cuda_set(&cuda);
	setenv("GDRCOPY_BACKEND", "dmabuf", 1);
	assert_contains(open_must_fail(ENOTSUP), "DMA_BUF_SUPPORTED is 0");
	unsetenv("GDRCOPY_BACKEND");
}

static void test_pin_map_copy(void **state)
{
	unsigned long addr = (unsigned long)gpu_memory + 2 * HOST_PAGE;
	unsigned char in[1000], out[1000];
	gdr_info_t info;
	gdr_mh_t mh;
	char *va;
	int flag = -1;
	size_t i;
	gdr_t g;

	(void)state;
	g = gdr_open();
	assert_non_null(g);
	for (i = 0; i < sizeof(in); i++)
		in[i] = (unsigned char)(i ^ 0x5a);
	assert_int_equal(gdr_pin_buffer_v2(g, addr, 3 * HOST_PAGE, 0, &mh), 0);
	assert_int_equal(fake_cuda_live_fds(), 1);
	assert_int_equal(fake_cuda_last_export_flags(), 0);
	/* No context on this thread: the primary one was borrowed and given back. */
	assert_int_equal(fake_cuda_primary_retains(), 1);
	assert_int_equal(fake_cuda_primary_releases(), 1);

	assert_int_equal(gdr_get_info(g, mh, &info), 0);
	assert_int_equal(info.va, addr);
	assert_int_equal(info.mapped_size, 3 * HOST_PAGE);
	assert_int_equal(info.page_size, HOST_PAGE);
	assert_int_equal(info.tm_cycles, 0);
	assert_int_equal(info.cycles_per_ms, 0);
	assert_int_equal(info.mapped, 0);

	/* Non-coherent platform: WC only. */
	assert_int_equal(gdr_map_v2(g, mh, (void **)&va, 3 * HOST_PAGE, GDR_MAP_FLAG_REQ_CACHE_MAPPING), EINVAL);
	assert_int_equal(gdr_map(g, mh, (void **)&va, 3 * HOST_PAGE), 0);
	assert_int_equal(gdr_get_info(g, mh, &info), 0);
	assert_int_equal(info.mapping_type, GDR_MAPPING_TYPE_WC);
	assert_int_equal(info.mapped, 1);
	assert_int_equal(gdr_copy_to_mapping(mh, va + 5, in, sizeof(in)), 0);
	assert_int_equal(gdr_copy_from_mapping(mh, out, va + 5, sizeof(out)), 0);
	assert_memory_equal(in, out, sizeof(in));
	assert_int_equal(gdr_get_callback_flag(g, mh, &flag), 0);
	assert_int_equal(flag, 0);
	assert_int_equal(gdr_unmap(g, mh, va, 3 * HOST_PAGE), 0);
	assert_int_equal(gdr_unpin_buffer(g, mh), 0);
	assert_int_equal(fake_cuda_live_fds(), 0);
	assert_int_equal(gdr_close(g), 0);
}

static void test_coherent_and_force_pcie(void **state)
{
	struct fake_cuda_config cuda = good_cuda();
	unsigned long addr = (unsigned long)gpu_memory;
	gdr_info_t info;
	gdr_mh_t cached, pcie;
	void *va;
	gdr_t g;

	(void)state;
	cuda.coherent = true;
	cuda.have_context = true;
	fake_cuda_set(&cuda);
	g = gdr_open();
	assert_non_null(g);
	assert_int_equal(gdr_pin_buffer_v2(g, addr, HOST_PAGE, 0, &cached), 0);
	assert_int_equal(fake_cuda_primary_retains(), 0);	/* the thread's own context was used */
	assert_int_equal(gdr_map_v2(g, cached, &va, HOST_PAGE, GDR_MAP_FLAG_REQ_CACHE_MAPPING), 0);
	assert_int_equal(gdr_get_info(g, cached, &info), 0);
	assert_int_equal(info.mapping_type, GDR_MAPPING_TYPE_CACHING);

	assert_int_equal(gdr_pin_buffer_v2(g, addr + HOST_PAGE, HOST_PAGE, GDR_PIN_FLAG_FORCE_PCIE, &pcie), 0);
	assert_int_equal(fake_cuda_last_export_flags(), 1);	/* CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE */
	assert_int_equal(gdr_map(g, pcie, &va, HOST_PAGE), 0);
	assert_int_equal(gdr_get_info(g, pcie, &info), 0);
	assert_int_equal(info.mapping_type, GDR_MAPPING_TYPE_WC);
	/* Close with both still mapped. */
	assert_int_equal(gdr_close(g), 0);
}

static void test_unaligned_pin_does_not_map(void **state)
{
	unsigned long addr = (unsigned long)gpu_memory + HOST_PAGE + 100;
	const char *log;
	gdr_info_t info;
	gdr_mh_t mh;
	void *va;
	gdr_t g;
	int rc;

	(void)state;
	g = gdr_open();
	assert_non_null(g);
	assert_int_equal(gdr_pin_buffer_v2(g, addr, 200, 0, &mh), 0);
	assert_int_equal(gdr_get_info(g, mh, &info), 0);
	assert_int_equal(info.va, addr - 100);
	assert_int_equal(info.mapped_size, HOST_PAGE);
	log_capture_begin();
	rc = gdr_map(g, mh, &va, 200);
	log = log_capture_end();
	assert_int_equal(rc, EINVAL);
	assert_contains(log, "page boundary");
	assert_int_equal(gdr_close(g), 0);
}

static void test_mmap_enotsupp_explained(void **state)
{
	struct fake_cuda_config cuda = good_cuda();
	const char *log;
	gdr_mh_t mh;
	void *va;
	gdr_t g;
	int rc;

	(void)state;
	cuda.mmap_errno = 524;	/* what a pre-13.3 driver's dma-buf gives */
	fake_cuda_set(&cuda);
	g = gdr_open();
	assert_non_null(g);
	assert_int_equal(gdr_pin_buffer_v2(g, (unsigned long)gpu_memory, HOST_PAGE, 0, &mh), 0);
	log_capture_begin();
	rc = gdr_map(g, mh, &va, HOST_PAGE);
	log = log_capture_end();
	assert_int_equal(rc, 524);
	assert_contains(log, "errno 524 (ENOTSUPP)");
	assert_contains(log, "13.3");
	assert_int_equal(gdr_close(g), 0);
}

static void test_pin_of_host_memory_refused(void **state)
{
	static char not_gpu[2 * HOST_PAGE];
	gdr_mh_t mh;
	gdr_t g;

	(void)state;
	g = gdr_open();
	assert_non_null(g);
	assert_int_equal(gdr_pin_buffer_v2(g, (unsigned long)not_gpu, HOST_PAGE, 0, &mh), EINVAL);
	assert_int_equal(fake_cuda_live_fds(), 0);
	assert_int_equal(gdr_close(g), 0);
}

/* A size that wraps when rounded to whole pages must not export a page and call it a success. */
static void test_pin_size_wrapping_refused(void **state)
{
	unsigned long addr = (unsigned long)gpu_memory;
	gdr_mh_t mh;
	gdr_t g;

	(void)state;
	g = gdr_open();
	assert_non_null(g);
	assert_int_equal(gdr_pin_buffer_v2(g, addr + 8, SIZE_MAX, 0, &mh), EINVAL);
	assert_int_equal(gdr_pin_buffer_v2(g, addr + 8, SIZE_MAX - 4100, 0, &mh), EINVAL);
	assert_int_equal(gdr_pin_buffer_v2(g, addr, SIZE_MAX - HOST_PAGE + 2, 0, &mh), EINVAL);
	assert_int_equal(fake_cuda_live_fds(), 0);
	assert_int_equal(gdr_close(g), 0);
}

static void test_two_instances_share_libcuda(void **state)
{
	gdr_t a, b;

	(void)state;
	a = gdr_open();
	b = gdr_open();
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(gdr_close(a), 0);
	assert_true(fake_cuda_loaded());	/* b still uses it */
	assert_int_equal(gdr_close(b), 0);
	assert_false(fake_cuda_loaded());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fallback_when_gdrdrv_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_forced_even_with_gdrdrv, setup, teardown),
		cmocka_unit_test_setup_teardown(test_backend_spelled_as_the_readme_does, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vulkan_attributes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_driver_too_old, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_libcuda, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_dmabuf_support, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pin_map_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_coherent_and_force_pcie, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unaligned_pin_does_not_map, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mmap_enotsupp_explained, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pin_of_host_memory_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pin_size_wrapping_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_instances_share_libcuda, setup, teardown),
	};
	int rc;

	enable_library_logging();
	gpu_memory = mmap(NULL, GPU_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	rc = cmocka_run_group_tests_name("dmabuf", tests, NULL, NULL);
	munmap(gpu_memory, GPU_SIZE);
	return rc;
}
