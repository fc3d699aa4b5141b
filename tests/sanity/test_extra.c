// SPDX-License-Identifier: MIT
/*
 * Tests of what this implementation adds to GDRCopy 2.6: thread safety,
 * precise gdr_open() errors, and the choice between the gdrdrv and dma-buf
 * backends (with fallback when gdrdrv is absent).
 *
 * The open-error and fallback tests hide or replace /dev/gdrdrv inside a
 * private mount namespace (needs root), so the real node is never touched.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "sanity.h"

/* Our library's extensions; weak so this program still runs on GDRCopy 2.6's library. */
#pragma weak gdr_get_backend_name
#pragma weak gdr_alloc_mapped
#pragma weak gdr_free_mapped

/* ---- thread safety --------------------------------------------------------- */

#define TS_THREADS 8
#define TS_ITERATIONS 40
#define TS_SLICE ((size_t)2 * GPU_ALLOC_ALIGNMENT)

struct ts_shared {
	gdr_t g;		/* used by every thread at once */
	CUcontext ctx;
	CUdeviceptr base;
	pthread_barrier_t start;
};

struct ts_thread {
	struct ts_shared *shared;
	unsigned int id;
};

static void *ts_worker(void *arg)
{
	struct ts_thread *t = arg;
	struct ts_shared *s = t->shared;
	CUdeviceptr slice;
	unsigned char *src = malloc(TS_SLICE), *dst = malloc(TS_SLICE), *gpu = malloc(TS_SLICE);
	gdr_t own = NULL;

	ASSERT(src && dst && gpu);
	ASSERTDRV(cuCtxSetCurrent(s->ctx));
	pthread_barrier_wait(&s->start);

	for (unsigned int iter = 0; iter < TS_ITERATIONS; iter++) {
		uint32_t seed = (t->id << 16) | iter;
		gdr_t g = s->g;
		struct gpu_mem own_mem = { 0 };
		gdr_info_t info;
		gdr_mh_t mh;
		void *map = NULL;

		slice = s->base + t->id * TS_SLICE;
		/*
		 * Every third iteration on a gdr_t of its own, opened and closed
		 * meanwhile; every tenth under -a gdr_alloc_mapped, where each such
		 * gdr_t creates a Vulkan instance and device (tenths of a second).
		 */
		if (iter % (sanity_alloc_mapped ? 10 : 3) == 2) {
			own = gdr_open();
			ASSERT_MSG(own, "gdr_open() in thread %u failed: %s", t->id, strerror(errno));
			g = own;
			/* gdr_alloc_mapped memory can be pinned only on the gdr_t that allocated it. */
			if (sanity_alloc_mapped) {
				sanity_alloc(0, own, GPU_ALLOC_CUMEMALLOC, TS_SLICE, &own_mem);
				slice = own_mem.ptr;
			}
		}
		ASSERT_GDR_OK(gdr_pin_buffer(g, slice, TS_SLICE, 0, 0, &mh));
		ASSERT_GDR_OK(gdr_map(g, mh, &map, TS_SLICE));
		ASSERT_GDR_OK(gdr_get_info(g, mh, &info));
		ASSERT_MSG(info.mapped && info.va <= slice && info.va + info.mapped_size >= slice + TS_SLICE,
			   "thread %u: gdr_get_info describes another buffer", t->id);

		fill_seeded(src, TS_SLICE, seed);
		ASSERT_GDR_OK(gdr_copy_to_mapping(mh, map, src, TS_SLICE));
		ASSERT_GDR_OK(gdr_copy_from_mapping(mh, dst, map, TS_SLICE));
		ASSERT_MSG(first_difference(src, dst, TS_SLICE) == (size_t)-1,
			   "thread %u iteration %u: data read back through the mapping differs", t->id, iter);
		ASSERTDRV(cuMemcpyDtoH(gpu, slice, TS_SLICE));
		ASSERT_MSG(first_difference(src, gpu, TS_SLICE) == (size_t)-1,
			   "thread %u iteration %u: GPU memory differs from what was written", t->id, iter);

		ASSERT_GDR_OK(gdr_unmap(g, mh, map, TS_SLICE));
		ASSERT_GDR_OK(gdr_unpin_buffer(g, mh));
		if (own) {
			sanity_free(&own_mem);
			ASSERT_GDR_OK(gdr_close(own));
			own = NULL;
		}
	}
	free(src);
	free(dst);
	free(gpu);
	return NULL;
}

SANITY_TEST(thread_safety_pin_map_copy_cumemalloc)
{
	struct ts_thread threads[TS_THREADS];
	pthread_t ids[TS_THREADS];
	struct ts_shared s;
	struct gpu_mem mem;
	CUdevice dev;

	dev = gpu_init(sanity_gpu_id, false, false, &s.ctx);
	s.g = sanity_gdr_open();
	sanity_alloc(dev, s.g, GPU_ALLOC_CUMEMALLOC, TS_THREADS * TS_SLICE, &mem);
	s.base = mem.ptr;
	ASSERT_EQ(pthread_barrier_init(&s.start, NULL, TS_THREADS), 0);
	for (unsigned int i = 0; i < TS_THREADS; i++) {
		threads[i] = (struct ts_thread){ .shared = &s, .id = i };
		ASSERT_EQ(pthread_create(&ids[i], NULL, ts_worker, &threads[i]), 0);
	}
	for (unsigned int i = 0; i < TS_THREADS; i++)
		ASSERT_EQ(pthread_join(ids[i], NULL), 0);
	pthread_barrier_destroy(&s.start);
	sanity_free(&mem);
	ASSERT_GDR_OK(gdr_close(s.g));
}

/* ---- backend selection ------------------------------------------------------ */

static const char *backend_name(gdr_t g)
{
	return gdr_get_backend_name ? gdr_get_backend_name(g) : NULL;
}

/* Does the CUDA driver offer dma-buf mmap (13.3+ and a GPU with dma-buf)?  why says why not. */
static bool dmabuf_expected(CUdevice dev, char *why, size_t len)
{
	int version = gpu_driver_version();

	if (version < 13030) {
		snprintf(why, len, "CUDA driver %d.%d has no dma-buf mmap of GPU memory (needs 13.3 or newer)",
			 version / 1000, version % 1000 / 10);
		return false;
	}
	if (!gpu_attribute(dev, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)) {
		snprintf(why, len, "the GPU does not support dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)");
		return false;
	}
	return true;
}

/*
 * Pin, map, write and read back one buffer through g, a gdrdrv or dma-buf
 * gdr_t: cuMemAlloc memory, whatever -a says.
 */
static void check_backend_works(gdr_t g, CUdevice dev, size_t expected_page_size)
{
	const size_t size = 2 * GPU_ALLOC_ALIGNMENT;
	unsigned char *src = malloc(size), *gpu = malloc(size);
	struct gpu_mem mem;
	gdr_info_t info;
	gdr_mh_t mh;
	void *map;

	ASSERT(src && gpu);
	(void)dev;
	ASSERTDRV(gpu_mem_alloc(&mem, size, true, true));
	ASSERT_GDR_OK(gdr_pin_buffer(g, mem.ptr, size, 0, 0, &mh));
	ASSERT_GDR_OK(gdr_map(g, mh, &map, size));
	ASSERT_GDR_OK(gdr_get_info(g, mh, &info));
	if (expected_page_size)
		ASSERT_EQ(info.page_size, expected_page_size);
	fill_seeded(src, size, 4242);
	ASSERT_GDR_OK(gdr_copy_to_mapping(mh, map, src, size));
	ASSERTDRV(cuMemcpyDtoH(gpu, mem.ptr, size));
	ASSERT_MSG(first_difference(src, gpu, size) == (size_t)-1, "GPU memory differs from what was written");
	ASSERT_GDR_OK(gdr_unmap(g, mh, map, size));
	ASSERT_GDR_OK(gdr_unpin_buffer(g, mh));
	sanity_free(&mem);
	free(src);
	free(gpu);
}

SANITY_TEST(backend_default_prefers_gdrdrv)
{
	int major = -1, minor = -1;
	const char *name;
	CUdevice dev;
	gdr_t g;

	unsetenv("GDRCOPY_USE_DMABUF_MMAP");
	unsetenv("GDRCOPY_BACKEND");
	if (access(GDRDRV_NODE, R_OK | W_OK))
		test_waive("%s is not usable here (%s): gdrdrv is not loaded, nothing to prefer",
			   GDRDRV_NODE, strerror(errno));
	dev = sanity_gpu_init(false);
	g = sanity_gdr_open();
	ASSERT_MSG(!sanity_using_dmabuf(g), "gdr_open() chose dma-buf although %s is usable", GDRDRV_NODE);
	ASSERT_MSG(sanity_find_gdrdrv_fd() >= 0, "gdr_open() did not open %s", GDRDRV_NODE);
	name = backend_name(g);
	ASSERT_MSG(!name || !strcmp(name, "gdrdrv"), "backend is '%s', expected gdrdrv", name);
	ASSERT_GDR_OK(gdr_driver_get_version(g, &major, &minor));
	ASSERT_MSG(major == 2 && minor >= 0, "gdrdrv version %d.%d is not 2.x", major, minor);
	check_backend_works(g, dev, GPU_ALLOC_ALIGNMENT);
	ASSERT_GDR_OK(gdr_close(g));
}

SANITY_TEST(backend_dmabuf_env_selects_dmabuf)
{
	char why[256];
	const char *name;
	CUdevice dev;
	gdr_t g;

	unsetenv("GDRCOPY_BACKEND");
	setenv("GDRCOPY_USE_DMABUF_MMAP", "1", 1);
	dev = sanity_gpu_init(false);
	g = gdr_open();
	if (!g) {
		int err = errno;

		if (!dmabuf_expected(dev, why, sizeof(why)))
			test_waive("%s", why);
		TEST_FAIL("gdr_open() with GDRCOPY_USE_DMABUF_MMAP=1 failed (%s) although the CUDA driver should support dma-buf mmap; rerun with GDRCOPY_ENABLE_LOGGING=1",
			  strerror(err));
	}
	ASSERT_MSG(sanity_using_dmabuf(g), "GDRCOPY_USE_DMABUF_MMAP=1 but GDR_ATTR_USING_DMA_BUF_MMAP is 0");
	ASSERT_MSG(sanity_find_gdrdrv_fd() < 0, "GDRCOPY_USE_DMABUF_MMAP=1 but %s was opened", GDRDRV_NODE);
	name = backend_name(g);
	ASSERT_MSG(!name || !strcmp(name, "dmabuf"), "backend is '%s', expected dmabuf", name);
	ASSERT_EQ(sanity_gdr_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING), 1);
	check_backend_works(g, dev, (size_t)sysconf(_SC_PAGESIZE));
	ASSERT_GDR_OK(gdr_close(g));
}

/* ---- a private /dev ---------------------------------------------------------- */

enum gdrdrv_node { NODE_MISSING, NODE_ROOT_ONLY, NODE_OTHER_DEVICE };

/* Recreate the entries of old_dir under new_path (devices, dirs, links), except gdrdrv at the top. */
static void copy_dev_tree(int old_dir, const char *new_path, int depth, enum gdrdrv_node node,
			  const struct stat *null_st)
{
	int iter_fd = openat(old_dir, ".", O_RDONLY | O_DIRECTORY);
	DIR *dir = iter_fd >= 0 ? fdopendir(iter_fd) : NULL;
	struct dirent *entry;

	ASSERT_MSG(dir, "cannot list the old /dev: %s", strerror(errno));
	while ((entry = readdir(dir))) {
		char path[512], target[512];
		struct stat st;
		ssize_t len;

		if (!strcmp(entry->d_name, ".") || !strcmp(entry->d_name, ".."))
			continue;
		if (fstatat(old_dir, entry->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		snprintf(path, sizeof(path), "%s/%s", new_path, entry->d_name);
		if (depth == 0 && !strcmp(entry->d_name, "gdrdrv")) {
			if (node == NODE_ROOT_ONLY)
				ASSERT_MSG(!mknod(path, S_IFCHR | 0600, st.st_rdev), "mknod %s: %s", path,
					   strerror(errno));
			else if (node == NODE_OTHER_DEVICE)
				ASSERT_MSG(!mknod(path, S_IFCHR | 0666, null_st->st_rdev), "mknod %s: %s",
					   path, strerror(errno));
			continue;
		}
		if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
			/* Everything else stays usable after the test drops root. */
			if (!mknod(path, (st.st_mode & S_IFMT) | 0666, st.st_rdev))
				chmod(path, 0666);
		} else if (S_ISDIR(st.st_mode) && depth < 3) {
			int sub = openat(old_dir, entry->d_name, O_RDONLY | O_DIRECTORY);

			mkdir(path, 01777);
			if (sub >= 0) {
				copy_dev_tree(sub, path, depth + 1, node, null_st);
				close(sub);
			}
		} else if (S_ISLNK(st.st_mode)) {
			len = readlinkat(old_dir, entry->d_name, target, sizeof(target) - 1);
			if (len > 0) {
				target[len] = '\0';
				if (symlink(target, path))
					test_debug("symlink %s: %s", path, strerror(errno));
			}
		}
	}
	closedir(dir);
}

/* In a private mount namespace, replace /dev by a copy where gdrdrv is as asked. */
static void private_dev(enum gdrdrv_node node)
{
	struct stat null_st;
	int old_dev;

	if (stat("/dev/null", &null_st))
		TEST_FAIL("cannot stat /dev/null: %s", strerror(errno));
	if (unshare(CLONE_NEWNS))
		test_waive("cannot make a private mount namespace (%s): run as root to test this",
			   strerror(errno));
	ASSERT_MSG(!mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL),
		   "cannot make mounts private: %s", strerror(errno));
	old_dev = open("/dev", O_RDONLY | O_DIRECTORY);
	ASSERT_MSG(old_dev >= 0, "cannot open /dev: %s", strerror(errno));
	ASSERT_MSG(!mount("sanity-dev", "/dev", "tmpfs", 0, "mode=0755"),
		   "cannot mount a tmpfs on /dev: %s", strerror(errno));
	copy_dev_tree(old_dev, "/dev", 0, node, &null_st);
	close(old_dev);
}

/* gdr_open() with only the gdrdrv backend and logging on; returns errno, log in *log. */
static int gdrdrv_open_errno(char *log, size_t log_len)
{
	int saved_stderr, log_fd, err;
	ssize_t got;
	gdr_t g;

	setenv("GDRCOPY_BACKEND", "gdrdrv", 1);
	setenv("GDRCOPY_ENABLE_LOGGING", "1", 1);
	unsetenv("GDRCOPY_USE_DMABUF_MMAP");
	log_fd = memfd_create("gdr_open-log", 0);
	ASSERT_MSG(log_fd >= 0, "memfd_create: %s", strerror(errno));
	fflush(stderr);
	saved_stderr = dup(2);
	ASSERT(saved_stderr >= 0 && dup2(log_fd, 2) == 2);
	errno = 0;
	g = gdr_open();
	err = errno;
	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	lseek(log_fd, 0, SEEK_SET);
	got = read(log_fd, log, log_len - 1);
	log[got > 0 ? got : 0] = '\0';
	close(log_fd);
	test_debug("gdr_open log:\n%s", log);
	if (g) {
		gdr_close(g);
		TEST_FAIL("gdr_open() succeeded with GDRCOPY_BACKEND=gdrdrv and a broken %s", GDRDRV_NODE);
	}
	return err;
}

static void require_gdrdrv_loaded(void)
{
	if (access(GDRDRV_NODE, F_OK))
		test_waive("%s does not exist (gdrdrv not loaded); the test breaks a working node", GDRDRV_NODE);
}

/*
 * The log must give the mknod with gdrdrv's own numbers: those of the misc
 * device in sysfs (our gdrdrv), or GDRCopy's major (not checked: it has no sysfs file).
 */
static void expect_mknod_numbers(const char *log)
{
	unsigned int major, minor;
	char want[64];
	FILE *f = fopen("/sys/class/misc/gdrdrv/dev", "r");

	if (!f)
		return;
	if (fscanf(f, "%u:%u", &major, &minor) == 2) {
		snprintf(want, sizeof(want), "mknod -m 666 %s c %u %u", GDRDRV_NODE, major, minor);
		ASSERT_MSG(strstr(log, want), "the log does not say '%s': '%s'", want, log);
	}
	fclose(f);
}

static void expect_open_error(int err, int expected, const char *log, const char *situation)
{
	ASSERT_MSG(err == expected, "gdr_open() with %s set errno %d (%s), expected %d (%s)", situation,
		   err, strerror(err), expected, strerror(expected));
	ASSERT_MSG(strstr(log, GDRDRV_NODE), "the GDRCOPY_ENABLE_LOGGING output for %s does not name %s: '%s'",
		   situation, GDRDRV_NODE, log);
}

SANITY_TEST(open_error_gdrdrv_node_missing)
{
	char log[8192];

	require_gdrdrv_loaded();
	private_dev(NODE_MISSING);
	expect_open_error(gdrdrv_open_errno(log, sizeof(log)), ENOENT, log, "no " GDRDRV_NODE);
	/* gdrdrv is loaded, so the fix is to create the node: say so. */
	ASSERT_MSG(strstr(log, "mknod"), "the log does not say how to create the node: '%s'", log);
	expect_mknod_numbers(log);
}

SANITY_TEST(open_error_gdrdrv_permission_denied)
{
	char log[8192];

	require_gdrdrv_loaded();
	private_dev(NODE_ROOT_ONLY);
	/* Root ignores file modes: become nobody, supplementary groups included. */
	ASSERT_MSG(!setgroups(0, NULL) && !setresgid(65534, 65534, 65534) && !setresuid(65534, 65534, 65534),
		   "cannot drop root: %s", strerror(errno));
	expect_open_error(gdrdrv_open_errno(log, sizeof(log)), EACCES, log, "a root-only " GDRDRV_NODE);
}

SANITY_TEST(open_error_gdrdrv_wrong_device)
{
	char log[8192];

	require_gdrdrv_loaded();
	private_dev(NODE_OTHER_DEVICE);
	/* A stale node (another driver's major) is the classic "major number stolen" case. */
	expect_open_error(gdrdrv_open_errno(log, sizeof(log)), ENODEV, log,
			  GDRDRV_NODE " pointing at another driver");
	ASSERT_MSG(strstr(log, "mknod"), "the log does not say how to recreate the node: '%s'", log);
	expect_mknod_numbers(log);
}

SANITY_TEST(backend_fallback_without_gdrdrv)
{
	char why[256];
	const char *name;
	CUdevice dev;
	gdr_t g;

	require_gdrdrv_loaded();
	private_dev(NODE_MISSING);
	unsetenv("GDRCOPY_USE_DMABUF_MMAP");
	unsetenv("GDRCOPY_BACKEND");
	dev = sanity_gpu_init(false);
	g = gdr_open();
	if (!g) {
		int err = errno;

		if (!dmabuf_expected(dev, why, sizeof(why)))
			test_waive("without gdrdrv nothing is left to fall back to: %s", why);
		TEST_FAIL("without %s gdr_open() failed (%s) instead of falling back to dma-buf mmap",
			  GDRDRV_NODE, strerror(err));
	}
	name = backend_name(g);
	ASSERT_MSG(!name || strcmp(name, "gdrdrv"), "backend is gdrdrv although %s is hidden", GDRDRV_NODE);
	if (!name || !strcmp(name, "dmabuf"))
		ASSERT_MSG(sanity_using_dmabuf(g), "fell back, but GDR_ATTR_USING_DMA_BUF_MMAP is 0");
	test_debug("fell back to the %s backend", name ? name : "dma-buf");
	/* The vulkan backend only maps its own allocations, not cuMemAlloc memory. */
	if (!name || strcmp(name, "vulkan"))
		check_backend_works(g, dev, 0);
	ASSERT_GDR_OK(gdr_close(g));
}

/* ---- gdr_alloc_mapped (the vulkan backend's allocator) ------------------------- */

static void require_alloc_mapped_symbols(void)
{
	if (!gdr_alloc_mapped || !gdr_free_mapped || !gdr_get_backend_name)
		test_waive("this libgdrapi has no gdr_alloc_mapped() (GDRCopy's own library?)");
}

SANITY_TEST(gdr_alloc_mapped_enotsup_elsewhere)
{
	uint64_t gpu_ptr = 0;
	void *cpu_ptr = NULL;
	struct gpu_mem mem;
	char why[512];
	const char *name;
	gdr_t g;

	require_alloc_mapped_symbols();
	sanity_gpu_init(false);
	g = sanity_gdr_open();
	name = gdr_get_backend_name(g);
	if (!strcmp(name, "vulkan"))
		test_waive("the vulkan backend is in use, which does allocate (gdr_alloc_mapped_rules tests it)");
	ASSERT_EQ(gdr_alloc_mapped(g, GPU_ALLOC_ALIGNMENT, &gpu_ptr, &cpu_ptr), ENOTSUP);
	ASSERT_MSG(!gpu_ptr && !cpu_ptr, "gdr_alloc_mapped() failed but handed out pointers");
	ASSERT_EQ(gdr_free_mapped(g, GPU_ALLOC_ALIGNMENT), ENOTSUP);
	/* What -a gdr_alloc_mapped prints there: a waiver naming the backend, not a failure. */
	ASSERT_EQ(gpu_alloc(GPU_ALLOC_GDR_MAPPED, g, &mem, GPU_ALLOC_ALIGNMENT, true, true, why, sizeof(why)),
		  GPU_ALLOC_UNAVAILABLE);
	ASSERT_MSG(strstr(why, name) && strstr(why, "vulkan"), "gpu_alloc's reason names neither the %s backend nor vulkan: '%s'",
		   name, why);
	test_debug("%s", why);
	ASSERT_GDR_OK(gdr_close(g));
}

SANITY_TEST(gdr_alloc_mapped_rules)
{
	const size_t size = 100;	/* rounded up to one GPU page */
	uint32_t word = 0, readback = 0;
	struct gpu_mem mem, other;
	gdr_mh_t mh, outside;
	void *map = NULL;
	CUdevice dev;
	gdr_t g;

	require_alloc_mapped_symbols();
	dev = sanity_gpu_init(false);
	g = sanity_gdr_open();
	if (strcmp(gdr_get_backend_name(g), "vulkan"))
		test_waive("the %s backend is in use; gdr_alloc_mapped needs the vulkan backend (-a gdr_alloc_mapped, or GDRCOPY_BACKEND=vulkan)",
			   gdr_get_backend_name(g));
	sanity_alloc(dev, g, GPU_ALLOC_GDR_MAPPED, size, &mem);
	ASSERT_MSG(mem.cpu_ptr, "gdr_alloc_mapped() gave no CPU pointer");
	ASSERT_MSG(!(mem.ptr & (GPU_ALLOC_ALIGNMENT - 1)), "gdr_alloc_mapped() pointer 0x%llx is not 64 KiB aligned",
		   (unsigned long long)mem.ptr);

	/* The CPU pointer and the CUDA pointer name the same bytes, both ways. */
	*(volatile uint32_t *)mem.cpu_ptr = 0xfeed0001;
	__sync_synchronize();
	ASSERTDRV(cuMemcpyDtoH(&readback, mem.ptr, sizeof(readback)));
	ASSERT_EQ(readback, 0xfeed0001);
	word = 0xfeed0002;
	ASSERTDRV(cuMemcpyHtoD(mem.ptr + GPU_ALLOC_ALIGNMENT - sizeof(word), &word, sizeof(word)));
	ASSERTDRV(cuCtxSynchronize());	/* the copy may still be in flight (see test_data.c) */
	ASSERT_EQ(((volatile uint32_t *)mem.cpu_ptr)[GPU_ALLOC_ALIGNMENT / sizeof(word) - 1], 0xfeed0002);

	/* The whole rounded-up page pins and maps; the mapping is the same memory. */
	ASSERT_GDR_OK(gdr_pin_buffer(g, mem.ptr, GPU_ALLOC_ALIGNMENT, 0, 0, &mh));
	ASSERT_GDR_OK(gdr_map(g, mh, &map, GPU_ALLOC_ALIGNMENT));
	ASSERT_EQ(((volatile uint32_t *)map)[0], 0xfeed0001);

	/* Memory that did not come from gdr_alloc_mapped cannot be pinned. */
	ASSERTDRV(gpu_mem_alloc(&other, GPU_ALLOC_ALIGNMENT, true, true));
	ASSERT_EQ(gdr_pin_buffer(g, other.ptr, GPU_ALLOC_ALIGNMENT, 0, 0, &outside), EINVAL);
	/* Nor a range running past the allocation. */
	ASSERT_EQ(gdr_pin_buffer(g, mem.ptr, 2 * GPU_ALLOC_ALIGNMENT, 0, 0, &outside), EINVAL);
	ASSERTDRV(gpu_mem_free(&other));

	/* Pinned memory cannot be freed; unpinned it can, once. */
	ASSERT_EQ(gdr_free_mapped(g, mem.ptr), EBUSY);
	ASSERT_GDR_OK(gdr_unmap(g, mh, map, GPU_ALLOC_ALIGNMENT));
	ASSERT_GDR_OK(gdr_unpin_buffer(g, mh));
	ASSERT_GDR_OK(gdr_free_mapped(g, mem.ptr));
	ASSERT_EQ(gdr_free_mapped(g, mem.ptr), EINVAL);
	sanity_forget_closed(&mem);	/* freed by hand above */

	/* gdr_close() frees what was never freed. */
	sanity_alloc(dev, g, GPU_ALLOC_GDR_MAPPED, size, &mem);
	ASSERT_GDR_OK(gdr_close(g));
}
