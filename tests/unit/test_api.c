// SPDX-License-Identifier: MIT
/*
 * The public API against the fake gdrdrv: gdr_open's diagnosis of every
 * failure, the driver-version feature gates, and the error paths of pin,
 * map, unmap, unpin, info, attributes and close.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_common.h"
#include "uapi/gdrdrv.h"

/* The GDRCopy <= 2.3 entry point, which gdrapi.h hides behind a macro. */
#include "gdrapi_v1.h"
int gdr_get_info(gdr_t g, gdr_mh_t handle, struct gdr_info_v1 *info);

#define NR(ioc) _IOC_NR(ioc)

static struct sandbox sandbox;

static int setup(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();

	(void)state;
	sandbox_init(&sandbox);
	fake_reset(&cfg);
	unsetenv("GDRCOPY_USE_DMABUF_MMAP");
	unsetenv("GDRCOPY_BACKEND");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	assert_int_equal(fake_live_files(), 0);	/* every test closes what it opened */
	sandbox_cleanup(&sandbox);
	return 0;
}

static void use_config(const struct fake_gdrdrv_config *cfg)
{
	fake_reset(cfg);
}

/* gdr_open expected to fail: returns the log. */
static const char *open_must_fail(int expected_errno)
{
	const char *log;
	gdr_t g;

	log_capture_begin();
	errno = 0;
	g = gdr_open();
	{
		int err = errno;

		log = log_capture_end();
		assert_null(g);
		assert_int_equal(err, expected_errno);
	}
	return log;
}

/* ---- gdr_open ---- */

static void test_open_succeeds_with_cloexec(void **state)
{
	const char *log;
	gdr_t g;

	(void)state;
	log_capture_begin();
	g = gdr_open();
	log = log_capture_end();
	assert_non_null(g);
	assert_int_equal(fake_last_open_flags() & (O_ACCMODE | O_CLOEXEC), O_RDWR | O_CLOEXEC);
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_GET_VERSION)), 1);
	assert_contains(log, "INFO: gdr_open: using the gdrdrv backend");
	assert_int_equal(gdr_close(g), 0);
}

static void test_open_module_not_loaded(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	const char *log;

	(void)state;
	cfg.open_errno = ENOENT;
	use_config(&cfg);
	sandbox_set_major(&sandbox, -1);
	log = open_must_fail(ENOENT);
	assert_contains(log, "ERR:  ");
	assert_contains(log, "gdrdrv kernel module is not loaded");
	assert_contains(log, "modprobe gdrdrv");
	/* The dma-buf backend was tried too, and says why it failed. */
	assert_contains(log, "dmabuf: cannot load libcuda.so.1");
}

/* GDRCopy's driver (register_chrdev): the major is in /proc/devices, minor 0 by convention. */
static void test_open_node_missing_chrdev_loaded(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	const char *log;
	char expect[256];

	(void)state;
	cfg.open_errno = ENOENT;
	use_config(&cfg);
	sandbox_set_major(&sandbox, 237);
	log = open_must_fail(ENOENT);
	snprintf(expect, sizeof(expect), "mknod -m 666 %s c 237 0", sandbox.device);
	assert_contains(log, "gdrdrv module is loaded (char 237:0 in ");
	assert_contains(log, sandbox.proc_devices);
	assert_contains(log, expect);
}

/* Our driver is a misc device: /proc/devices has no gdrdrv line, sysfs has the numbers. */
static void test_open_node_missing_misc_loaded(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	const char *log;
	char expect[256];

	(void)state;
	cfg.open_errno = ENOENT;
	use_config(&cfg);
	sandbox_set_major(&sandbox, -1);
	sandbox_set_misc(&sandbox, 10, 123);
	assert_int_equal(mkdir(sandbox.sys_module, 0755), 0);
	log = open_must_fail(ENOENT);
	snprintf(expect, sizeof(expect), "mknod -m 666 %s c 10 123", sandbox.device);
	assert_contains(log, "gdrdrv module is loaded (char 10:123 in ");
	assert_contains(log, sandbox.sys_misc_dev);
	assert_contains(log, "udev/devtmpfs did not create it");
	assert_contains(log, expect);
	assert_contains(log, "rmmod gdrdrv; modprobe gdrdrv");
	assert_true(strstr(log, "failed to initialise") == NULL);
}

/* sysfs wins over /proc/devices (which an old driver of the same name could still be in). */
static void test_open_misc_numbers_preferred(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	char expect[256];

	(void)state;
	cfg.open_errno = ENOENT;
	use_config(&cfg);
	sandbox_set_major(&sandbox, 237);
	sandbox_set_misc(&sandbox, 10, 61);
	snprintf(expect, sizeof(expect), "mknod -m 666 %s c 10 61", sandbox.device);
	assert_contains(open_must_fail(ENOENT), expect);
}

/* A garbled sysfs file is no information: fall back to /proc/devices. */
static void test_open_misc_file_garbled(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();

	(void)state;
	cfg.open_errno = ENOENT;
	use_config(&cfg);
	sandbox_set_major(&sandbox, 237);
	sandbox_write(sandbox.sys_misc_dev, "gdrdrv\n");
	assert_contains(open_must_fail(ENOENT), "char 237:0");
}

static void test_open_module_registered_nothing(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	const char *log;

	(void)state;
	cfg.open_errno = ENOENT;
	use_config(&cfg);
	sandbox_set_major(&sandbox, -1);
	assert_int_equal(mkdir(sandbox.sys_module, 0755), 0);
	log = open_must_fail(ENOENT);
	assert_contains(log, "failed to initialise");
	assert_contains(log, "dmesg");
}

static void test_open_permission_denied(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	const char *log;

	(void)state;
	cfg.open_errno = EACCES;
	use_config(&cfg);
	sandbox_write(sandbox.device, "");
	assert_int_equal(chmod(sandbox.device, 0640), 0);
	log = open_must_fail(EACCES);
	assert_contains(log, "permission denied");
	assert_contains(log, "mode 0640");
	assert_contains(log, "group ");
	assert_contains(log, "chmod 666");
}

/* The backend list and the failure report: what callers that do their own reporting read. */
static void test_open_failure_report_and_backend_list(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	const char *report;
	gdr_t g;

	(void)state;
	assert_string_equal(gdr_get_backend_list(), "gdrdrv\ndmabuf\nvulkan\n");
	cfg.open_errno = EACCES;
	use_config(&cfg);
	sandbox_write(sandbox.device, "");
	open_must_fail(EACCES);
	report = gdr_get_open_failure();
	/* One line per backend, in order, each with its reason, logged or not. */
	assert_true(strncmp(report, "gdrdrv: ", 8) == 0);
	assert_contains(report, "permission denied");
	assert_contains(report, "\ndmabuf: ");
	assert_contains(report, "\nvulkan: ");
	assert_int_equal(report[strlen(report) - 1], '\n');
	/* A later success clears it. */
	cfg = fake_gdrdrv_default();
	use_config(&cfg);
	g = gdr_open();
	assert_non_null(g);
	assert_string_equal(gdr_get_open_failure(), "");
	gdr_close(g);
}

static void test_open_eperm_reported_as_eacces(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();

	(void)state;
	cfg.open_errno = EPERM;	/* what a container's device cgroup gives */
	use_config(&cfg);
	sandbox_write(sandbox.device, "");
	assert_contains(open_must_fail(EACCES), "--device");
}

static void test_open_no_driver_behind_node(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();

	(void)state;
	cfg.open_errno = ENXIO;
	use_config(&cfg);
	sandbox_write(sandbox.device, "");
	sandbox_set_major(&sandbox, 240);
	assert_contains(open_must_fail(ENODEV), "stale node");
}

static void test_open_no_driver_not_loaded(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	const char *log;

	(void)state;
	cfg.open_errno = ENODEV;	/* a misc node whose minor nobody has any more */
	use_config(&cfg);
	sandbox_write(sandbox.device, "");
	sandbox_set_major(&sandbox, -1);
	log = open_must_fail(ENODEV);
	assert_contains(log, "gdrdrv is not loaded");
	assert_contains(log, "modprobe gdrdrv");
}

/* The node opened is 1:3 (the fake is /dev/null) but GDRCopy's driver has major 240. */
static void test_open_stale_major(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	const char *log;

	(void)state;
	use_config(&cfg);
	sandbox_set_major(&sandbox, 240);
	log = open_must_fail(ENODEV);
	assert_contains(log, "stale node: ");
	assert_contains(log, "is char 1:3 (the file opened) but gdrdrv is char major 240");
	assert_contains(log, "c 240 0");
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_GET_VERSION)), 0);
}

/* The misc device has a dynamic minor: the same major with another minor is someone else. */
static void test_open_stale_misc_minor(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	const char *log;
	char expect[512];	/* two sandbox paths */

	(void)state;
	use_config(&cfg);
	sandbox_set_misc(&sandbox, 1, 5);
	log = open_must_fail(ENODEV);
	snprintf(expect, sizeof(expect), "rm %s; mknod -m 666 %s c 1 5", sandbox.device, sandbox.device);
	assert_contains(log, "is char 1:3 (the file opened) but gdrdrv is char 1:5");
	assert_contains(log, expect);
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_GET_VERSION)), 0);
}

/* A node with another device's numbers (here /dev/null's) is diagnosed without opening it. */
static void test_open_stale_node_not_opened(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	const char *log;
	char expect[512];	/* two sandbox paths */

	(void)state;
	use_config(&cfg);
	sandbox_set_misc(&sandbox, 10, 123);
	assert_int_equal(symlink("/dev/null", sandbox.device), 0);
	log = open_must_fail(ENODEV);
	snprintf(expect, sizeof(expect), "stale node: %s is char 1:3 but gdrdrv is char 10:123 (%s)", sandbox.device,
		 sandbox.sys_misc_dev);
	assert_contains(log, expect);
	assert_contains(log, "mknod -m 666");
	assert_contains(log, "c 10 123");
	assert_int_equal(fake_open_count(), 0);
}

/*
 * Only device nodes are judged before open: a plain file is opened, so that
 * open's own errno (EACCES, ...) still gets its diagnosis, and judged on the
 * opened file.  The fake answers with /dev/null (1:3), which matches here.
 */
static void test_open_plain_file_judged_after_open(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();

	(void)state;
	use_config(&cfg);
	sandbox_set_misc(&sandbox, 1, 3);
	sandbox_write(sandbox.device, "");
	{
		gdr_t g = gdr_open();

		assert_non_null(g);
		assert_int_equal(gdr_close(g), 0);
	}
}

/* The numbers match the misc device: the driver is asked, and used. */
static void test_open_misc_numbers_match(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	gdr_t g;

	(void)state;
	use_config(&cfg);
	sandbox_set_major(&sandbox, -1);
	sandbox_set_misc(&sandbox, 1, 3);
	g = gdr_open();
	assert_non_null(g);
	assert_int_equal(gdr_close(g), 0);
}

/* Right numbers, but GET_VERSION unknown: not a stale node, an old (or foreign) driver. */
static void test_open_misc_match_no_get_version(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();

	(void)state;
	cfg.version_errno = ENOTTY;
	use_config(&cfg);
	sandbox_set_misc(&sandbox, 1, 3);
	assert_contains(open_must_fail(ENOTTY), "older than 2.0");
}

static void test_open_pre_2_0_driver(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	const char *log;

	(void)state;
	cfg.version_errno = ENOTTY;	/* 1.x had no GET_VERSION */
	use_config(&cfg);
	log = open_must_fail(ENOTTY);
	assert_contains(log, "does not answer GET_VERSION");
	assert_contains(log, "older than 2.0");
	assert_int_equal(fake_live_files(), 0);
}

static void test_open_driver_too_old(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	const char *log;

	(void)state;
	cfg.version = FAKE_VERSION(1, 9);
	use_config(&cfg);
	log = open_must_fail(EPROTO);
	assert_contains(log, "gdrdrv 1.9 is loaded");
	assert_contains(log, "needs gdrdrv 2.0 or newer");
	assert_int_equal(fake_live_files(), 0);
}

static void test_open_library_too_old_for_driver(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	const char *log;

	(void)state;
	cfg.version = FAKE_VERSION(3, 1);
	cfg.minimum_api = FAKE_VERSION(2, 7);
	use_config(&cfg);
	log = open_must_fail(EPROTO);
	assert_contains(log, "gdrdrv 3.1 needs libgdrapi 2.7 or newer but this is libgdrapi 2.6");
}

static void test_open_dmabuf_forced_skips_gdrdrv(void **state)
{
	const char *log;

	(void)state;
	setenv("GDRCOPY_USE_DMABUF_MMAP", "1", 1);
	log = open_must_fail(ENOENT);
	unsetenv("GDRCOPY_USE_DMABUF_MMAP");
	assert_int_equal(fake_open_count(), 0);
	assert_contains(log, "gdrdrv: skipped because GDRCOPY_USE_DMABUF_MMAP=1");
	assert_contains(log, "libcuda.so.1");
}

static void test_open_dmabuf_env_must_be_exactly_1(void **state)
{
	gdr_t g;

	(void)state;
	setenv("GDRCOPY_USE_DMABUF_MMAP", "yes", 1);
	g = gdr_open();
	unsetenv("GDRCOPY_USE_DMABUF_MMAP");
	assert_non_null(g);
	assert_int_equal(fake_open_count(), 1);
	assert_int_equal(gdr_close(g), 0);
}

/* ---- feature gates ---- */

struct pinned {
	gdr_t g;
	gdr_mh_t mh;
	void *va;
};

static void open_with(uint32_t version, struct pinned *p)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();

	cfg.version = version;
	cfg.persistent = version >= FAKE_VERSION(2, 5);
	use_config(&cfg);
	p->g = gdr_open();
	assert_non_null(p->g);
}

static void test_gates_driver_2_3(void **state)
{
	struct pinned p;
	gdr_info_t info;
	int value = -1, major, minor;

	(void)state;
	open_with(FAKE_VERSION(2, 3), &p);
	assert_int_equal(gdr_driver_get_version(p.g, &major, &minor), 0);
	assert_int_equal(major, 2);
	assert_int_equal(minor, 3);

	/* Legacy pin ioctl, with the tokens passed through. */
	assert_int_equal(gdr_pin_buffer(p.g, FAKE_GPU_VA, GPU_PAGE, 0x1234, 7, &p.mh), 0);
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_PIN_BUFFER)), 1);
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_PIN_BUFFER_V2)), 0);
	assert_int_equal(fake_last_pin_token(), 0x1234);
	assert_int_equal(fake_last_pin_va_space(), 7);

	/* No pin flags before 2.5. */
	{
		gdr_mh_t other;

		assert_int_equal(gdr_pin_buffer_v2(p.g, FAKE_GPU_VA + GPU_PAGE, GPU_PAGE, GDR_PIN_FLAG_FORCE_PCIE,
						   &other),
				 EPROTONOSUPPORT);
	}

	/* No REQ_MAPPING_TYPE; the type comes from the old GET_INFO. */
	assert_int_equal(gdr_map(p.g, p.mh, &p.va, GPU_PAGE), 0);
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_REQ_MAPPING_TYPE)), 0);
	assert_int_equal(gdr_get_info_v2(p.g, p.mh, &info), 0);
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_GET_INFO_V2)), 0);
	assert_true(fake_ioctl_count(NR(GDRDRV_IOC_GET_INFO)) >= 2);
	assert_int_equal(info.mapping_type, GDR_MAPPING_TYPE_WC);
	assert_int_equal(info.mapped, 1);
	assert_int_equal(info.wc_mapping, 1);
	assert_int_equal(gdr_unmap(p.g, p.mh, p.va, GPU_PAGE), 0);

	/* A type it cannot select: mapped, found wrong, undone. */
	assert_int_equal(gdr_map_v2(p.g, p.mh, &p.va, GPU_PAGE, GDR_MAP_FLAG_REQ_CACHE_MAPPING), EINVAL);
	assert_int_equal(fake_live_mappings(), 0);
	assert_int_equal(gdr_map_v2(p.g, p.mh, &p.va, GPU_PAGE, GDR_MAP_FLAG_REQ_WC_MAPPING), 0);
	assert_int_equal(gdr_unmap(p.g, p.mh, p.va, GPU_PAGE), 0);

	/* Attributes are known without asking: no persistent mapping, no FORCE_PCIE. */
	assert_int_equal(gdr_get_attribute(p.g, GDR_ATTR_USE_PERSISTENT_MAPPING, &value), 0);
	assert_int_equal(value, 0);
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_GET_ATTR)), 0);

	assert_int_equal(gdr_close(p.g), 0);
}

static void test_gates_driver_2_4(void **state)
{
	struct pinned p;
	gdr_info_t info;

	(void)state;
	open_with(FAKE_VERSION(2, 4), &p);
	assert_int_equal(gdr_pin_buffer_v2(p.g, FAKE_GPU_VA, GPU_PAGE, GDR_PIN_FLAG_DEFAULT, &p.mh), 0);
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_PIN_BUFFER)), 1);
	assert_int_equal(gdr_map(p.g, p.mh, &p.va, GPU_PAGE), 0);
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_REQ_MAPPING_TYPE)), 0);
	assert_true(fake_ioctl_count(NR(GDRDRV_IOC_GET_INFO_V2)) >= 1);
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_GET_INFO)), 0);
	assert_int_equal(gdr_get_info_v2(p.g, p.mh, &info), 0);
	assert_int_equal(info.mapping_type, GDR_MAPPING_TYPE_WC);
	assert_int_equal(gdr_close(p.g), 0);
	assert_int_equal(fake_live_mappings(), 0);
}

static void test_gates_driver_2_5(void **state)
{
	struct pinned p;
	int value = -1;

	(void)state;
	open_with(FAKE_VERSION(2, 5), &p);
	/* Legacy call, new ioctl: tokens are dropped (persistent mode rejects them). */
	assert_int_equal(gdr_pin_buffer(p.g, FAKE_GPU_VA, GPU_PAGE, 0x1234, 7, &p.mh), 0);
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_PIN_BUFFER_V2)), 1);
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_PIN_BUFFER)), 0);
	assert_int_equal(fake_last_pin_flags(), 0);

	/* Even a default map first clears any old type request. */
	assert_int_equal(gdr_map(p.g, p.mh, &p.va, GPU_PAGE), 0);
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_REQ_MAPPING_TYPE)), 1);
	assert_int_equal(gdr_unmap(p.g, p.mh, p.va, GPU_PAGE), 0);
	assert_int_equal(gdr_map_v2(p.g, p.mh, &p.va, GPU_PAGE, GDR_MAP_FLAG_REQ_CACHE_MAPPING), 0);
	{
		gdr_info_t info;

		assert_int_equal(gdr_get_info_v2(p.g, p.mh, &info), 0);
		assert_int_equal(info.mapping_type, GDR_MAPPING_TYPE_CACHING);
		assert_int_equal(info.mapped, 1);
		assert_int_equal(info.wc_mapping, 0);
	}

	assert_int_equal(gdr_get_attribute(p.g, GDR_ATTR_USE_PERSISTENT_MAPPING, &value), 0);
	assert_int_equal(value, 1);
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_GET_ATTR)), 1);
	assert_int_equal(gdr_close(p.g), 0);
}

static void test_force_pcie_pin(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	gdr_mh_t mh;
	int value = -1;
	gdr_t g;

	(void)state;
	use_config(&cfg);
	g = gdr_open();
	assert_non_null(g);
	assert_int_equal(gdr_get_attribute(g, GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE, &value), 0);
	assert_int_equal(value, 0);
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, GDR_PIN_FLAG_FORCE_PCIE, &mh), EOPNOTSUPP);
	assert_int_equal(gdr_close(g), 0);

	cfg.force_pcie = true;
	use_config(&cfg);
	g = gdr_open();
	assert_non_null(g);
	assert_int_equal(gdr_get_attribute(g, GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE, &value), 0);
	assert_int_equal(value, 1);
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, GDR_PIN_FLAG_FORCE_PCIE, &mh), 0);
	assert_int_equal(fake_last_pin_flags(), GDRDRV_PIN_BUFFER_FLAG_FORCE_PCIE);
	assert_int_equal(gdr_close(g), 0);
}

/* ---- pin / map / unmap / unpin ---- */

static gdr_t open_default(void)
{
	gdr_t g = gdr_open();

	assert_non_null(g);
	return g;
}

/* FORCE_PCIE pin failed: errno and log for each reason (gdrapi.h); nothing stays pinned. */
static void expect_force_pcie_failure(const struct fake_gdrdrv_config *cfg, unsigned long addr, int want,
				      const char *advice)
{
	const char *log;
	gdr_mh_t mh;
	gdr_t g;
	int rc;

	use_config(cfg);
	g = open_default();
	log_capture_begin();
	rc = gdr_pin_buffer_v2(g, addr, GPU_PAGE, GDR_PIN_FLAG_FORCE_PCIE, &mh);
	log = log_capture_end();
	assert_int_equal(rc, want);
	assert_contains(log, advice);
	assert_int_equal(fake_live_pins(), 0);
	/* Where the flag was the reason, the fallback consumers make works. */
	if (addr && !cfg->pin_errno) {
		assert_int_equal(gdr_pin_buffer_v2(g, addr, GPU_PAGE, 0, &mh), 0);
		assert_int_equal(gdr_unpin_buffer(g, mh), 0);
	}
	assert_int_equal(gdr_close(g), 0);
}

static void test_force_pcie_failure_reasons(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();

	(void)state;
	cfg.version = FAKE_VERSION(2, 4);
	expect_force_pcie_failure(&cfg, FAKE_GPU_VA, EPROTONOSUPPORT, "need gdrdrv 2.5 or newer");
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_PIN_BUFFER_V2)), 0);

	cfg = fake_gdrdrv_default();
	cfg.force_pcie = true;
	cfg.persistent = false;
	expect_force_pcie_failure(&cfg, FAKE_GPU_VA, ENOPROTOOPT, "use_persistent_mapping=1");

	cfg = fake_gdrdrv_default();
	cfg.force_pcie = false;
	expect_force_pcie_failure(&cfg, FAKE_GPU_VA, EOPNOTSUPP, "NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING");

	cfg = fake_gdrdrv_default();
	cfg.force_pcie = true;
	cfg.force_pcie_refused_errno = EINVAL;
	expect_force_pcie_failure(&cfg, FAKE_GPU_VA, ENXIO, "refused a forced PCIe BAR1 mapping");
	cfg.force_pcie_refused_errno = 524;	/* the NVIDIA driver's ENOTSUPP */
	expect_force_pcie_failure(&cfg, FAKE_GPU_VA, ENXIO, "pin with flags 0");

	/* A range nothing can pin: the flag is not the reason, and the errno says so. */
	cfg = fake_gdrdrv_default();
	cfg.force_pcie = true;
	expect_force_pcie_failure(&cfg, 0, EINVAL, "PIN_BUFFER_V2");
	cfg.pin_errno = ENOMEM;
	expect_force_pcie_failure(&cfg, FAKE_GPU_VA, ENOMEM, "BAR1");

	/* Another process's file: EACCES, without asking the driver anything else. */
	cfg = fake_gdrdrv_default();
	cfg.force_pcie = true;
	cfg.pin_errno = EACCES;
	expect_force_pcie_failure(&cfg, FAKE_GPU_VA, EACCES, "another process");
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_GET_ATTR)), 0);
}

static int vma_inherited(void)
{
	int value = -1;
	gdr_t g = open_default();

	assert_int_equal(gdr_get_attribute(g, GDR_ATTR_VMA_INHERITED_ON_FORK, &value), 0);
	assert_int_equal(gdr_close(g), 0);
	return value;
}

static void test_vma_inherited_on_fork(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();

	(void)state;
	/* Our gdrdrv (a misc device) answers; the library passes on what it says. */
	sandbox_set_major(&sandbox, -1);
	sandbox_set_misc(&sandbox, 1, 3);
	cfg.knows_vma_attr = true;
	use_config(&cfg);
	assert_int_equal(vma_inherited(), 0);
	assert_int_equal(fake_attr_queries(GDRDRV_ATTR_VMA_INHERITED_ON_FORK), 1);
	cfg.vma_inherited = true;
	use_config(&cfg);
	assert_int_equal(vma_inherited(), 1);
	/* Ours from before the attribute: VM_DONTCOPY always. */
	cfg.knows_vma_attr = false;
	use_config(&cfg);
	sandbox_write(sandbox.osrelease, "6.18.0-1-amd64\n");
	assert_int_equal(vma_inherited(), 0);

	/* GDRCopy's drivers are never asked: flavour and kernel decide. */
	sandbox_set_misc(&sandbox, -1, 0);
	sandbox_set_major(&sandbox, 1);
	cfg = fake_gdrdrv_default();
	cfg.knows_vma_attr = true;	/* even if it knew a number 3: its meaning is not ours to assume */
	cfg.vma_inherited = false;
	use_config(&cfg);
	sandbox_write(sandbox.proc_params,
		      "Version: 2.6\nBuilt for NVIDIA driver flavor: proprietary\nUse persistent mapping: yes\n");
	sandbox_write(sandbox.osrelease, "6.15.0-1-amd64\n");
	assert_int_equal(vma_inherited(), 1);
	assert_int_equal(fake_attr_queries(GDRDRV_ATTR_VMA_INHERITED_ON_FORK), 0);
	sandbox_write(sandbox.osrelease, "6.14.11\n");
	assert_int_equal(vma_inherited(), 0);
	sandbox_write(sandbox.osrelease, "5.14.0-570.el9.x86_64\n");
	assert_int_equal(vma_inherited(), 0);
	sandbox_write(sandbox.osrelease, "7.0.0\n");
	assert_int_equal(vma_inherited(), 1);
	unlink(sandbox.osrelease);	/* unknown kernel: the proprietary build may be the one that cannot */
	assert_int_equal(vma_inherited(), 1);
	sandbox_write(sandbox.osrelease, "6.17.1\n");
	sandbox_write(sandbox.proc_params, "Version: 2.6\nBuilt for NVIDIA driver flavor: opensource\n");
	assert_int_equal(vma_inherited(), 0);
	/* Ours seen without sysfs (a container): its params line answers. */
	sandbox_write(sandbox.proc_params, "Version: 2.6\nBuilt for NVIDIA driver flavor: proprietary\n"
		      "Use persistent mapping: yes\ndbg_enabled: 0\ninfo_enabled: 0\nVMA inherited on fork: no\n");
	assert_int_equal(vma_inherited(), 0);
	sandbox_write(sandbox.proc_params, "Built for NVIDIA driver flavor: opensource\nVMA inherited on fork: yes\n");
	assert_int_equal(vma_inherited(), 1);
	unlink(sandbox.proc_params);	/* no params: only the kernel speaks */
	assert_int_equal(vma_inherited(), 1);
	sandbox_write(sandbox.osrelease, "6.1.0-30-amd64\n");
	assert_int_equal(vma_inherited(), 0);

	/* Drivers older than 2.5 have no GET_ATTR: the same reasoning, nothing asked. */
	cfg.version = FAKE_VERSION(2, 4);
	use_config(&cfg);
	assert_int_equal(vma_inherited(), 0);
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_GET_ATTR)), 0);
}

static void test_pin_argument_errors(void **state)
{
	gdr_t g = open_default();
	gdr_mh_t mh;

	(void)state;
	assert_int_equal(gdr_pin_buffer(g, FAKE_GPU_VA, GPU_PAGE, 0, 0, NULL), EINVAL);
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, 0, 0, &mh), EINVAL);
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, 0x80, &mh), EINVAL);
	assert_int_equal(gdr_pin_buffer_v2(NULL, FAKE_GPU_VA, GPU_PAGE, 0, &mh), EINVAL);
	/* The driver's own refusal (addr 0) comes back as is. */
	assert_int_equal(gdr_pin_buffer_v2(g, 0, GPU_PAGE, 0, &mh), EINVAL);
	assert_int_equal(fake_live_pins(), 0);
	assert_int_equal(gdr_close(g), 0);
}

static void test_pin_bar1_exhausted(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	const char *log;
	gdr_mh_t mh;
	gdr_t g;
	int rc;

	(void)state;
	cfg.pin_errno = ENOMEM;
	use_config(&cfg);
	g = open_default();
	log_capture_begin();
	rc = gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, 0, &mh);
	log = log_capture_end();
	assert_int_equal(rc, ENOMEM);
	assert_contains(log, "BAR1");
	assert_int_equal(gdr_close(g), 0);
}

static void test_map_errors(void **state)
{
	gdr_t g = open_default(), g2 = open_default();
	gdr_mh_t mh, unaligned, bogus = { 0 };
	const char *log;
	void *va, *va2;
	int rc;

	(void)state;
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, 4 * GPU_PAGE, 0, &mh), 0);
	assert_int_equal(gdr_map_v2(g, mh, &va, GPU_PAGE, 7), EINVAL);
	assert_int_equal(gdr_map_v2(g, mh, &va, GPU_PAGE, -1), EINVAL);
	assert_int_equal(gdr_map(g, mh, NULL, GPU_PAGE), EINVAL);
	assert_int_equal(gdr_map(g, mh, &va, 0), EINVAL);
	assert_int_equal(gdr_map(g, bogus, &va, GPU_PAGE), EINVAL);
	assert_int_equal(gdr_map(g2, mh, &va, GPU_PAGE), EINVAL);	/* another instance's handle */
	assert_int_equal(gdr_unmap(g, mh, (void *)0x1000, GPU_PAGE), EINVAL);	/* not mapped */

	assert_int_equal(gdr_map(g, mh, &va, 4 * GPU_PAGE), 0);
	assert_int_equal(gdr_map(g, mh, &va2, GPU_PAGE), EAGAIN);	/* one mapping per buffer */
	assert_int_equal(gdr_unmap(g, mh, (char *)va + 4096, GPU_PAGE), EINVAL);
	assert_int_equal(fake_live_mappings(), 1);
	assert_int_equal(gdr_unmap(g, mh, va, 4 * GPU_PAGE), 0);
	assert_int_equal(fake_live_mappings(), 0);
	assert_int_equal(gdr_unmap(g, mh, va, 4 * GPU_PAGE), EINVAL);

	/* Larger than pinned: the driver says no. */
	assert_int_equal(gdr_map(g, mh, &va, 5 * GPU_PAGE), EINVAL);

	/* gdrdrv maps only pins that start on a GPU page. */
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA + 16 * GPU_PAGE + 8, 64, 0, &unaligned), 0);
	log_capture_begin();
	rc = gdr_map(g, unaligned, &va, 64);
	log = log_capture_end();
	assert_int_equal(rc, EINVAL);
	assert_contains(log, "64 KiB boundary");
	assert_int_equal(gdr_close(g), 0);
	assert_int_equal(gdr_close(g2), 0);
}

static void test_map_type_refused_by_driver(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	gdr_mh_t mh;
	void *va;
	gdr_t g;

	(void)state;
	cfg.unsupported_types = 1u << GDRDRV_MR_DEVICE;
	use_config(&cfg);
	g = open_default();
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, 0, &mh), 0);
	assert_int_equal(gdr_map_v2(g, mh, &va, GPU_PAGE, GDR_MAP_FLAG_REQ_DEVICE_MAPPING), EOPNOTSUPP);
	assert_int_equal(fake_live_mappings(), 0);
	assert_int_equal(gdr_map_v2(g, mh, &va, GPU_PAGE, GDR_MAP_FLAG_DEFAULT), 0);
	assert_int_equal(gdr_close(g), 0);
}

static void test_unpin_errors_and_unmap_on_unpin(void **state)
{
	gdr_t g = open_default();
	gdr_mh_t mh, bogus = { 0 };
	void *va;

	(void)state;
	assert_int_equal(gdr_unpin_buffer(g, bogus), EINVAL);
	assert_int_equal(gdr_unpin_buffer(NULL, bogus), EINVAL);
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, 0, &mh), 0);
	assert_int_equal(gdr_map(g, mh, &va, GPU_PAGE), 0);
	/* Unpinning a mapped buffer unmaps it first: nothing dangles. */
	assert_int_equal(gdr_unpin_buffer(g, mh), 0);
	assert_int_equal(fake_live_mappings(), 0);
	assert_int_equal(fake_live_pins(), 0);
	assert_int_equal(gdr_close(g), 0);
}

/*
 * A handle that is no live buffer (never issued, unpinned, of a closed
 * gdr_t) is refused with EINVAL by every call, copies included; GDRCopy
 * reads freed memory there.  A new pin never brings an old value back.
 */
static void test_stale_and_never_issued_handles(void **state)
{
	gdr_t g = open_default(), g2 = open_default();
	gdr_mh_t mh, again, orphan, made_up[] = { { 0 }, { 1 }, { ULONG_MAX }, { 0x7f1234567890UL } };
	char buf[64] = { 0 };
	gdr_info_t info;
	size_t i;
	void *va;
	int flag;

	(void)state;
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, 0, &mh), 0);
	assert_int_equal(gdr_map(g, mh, &va, GPU_PAGE), 0);
	assert_int_equal(gdr_unpin_buffer(g, mh), 0);
	made_up[0].h = mh.h + 1;
	for (i = 0; i < sizeof(made_up) / sizeof(made_up[0]); i++) {
		assert_int_equal(gdr_unpin_buffer(g, made_up[i]), EINVAL);
		assert_int_equal(gdr_get_info_v2(g, made_up[i], &info), EINVAL);
		assert_int_equal(gdr_copy_to_mapping(made_up[i], va, buf, sizeof(buf)), EINVAL);
	}
	/* Unpinned: everything says EINVAL, and the record's reuse does not revive the old value. */
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, 0, &again), 0);
	assert_int_not_equal(again.h, mh.h);
	assert_int_equal(gdr_unpin_buffer(g, mh), EINVAL);
	assert_int_equal(gdr_map(g, mh, &va, GPU_PAGE), EINVAL);
	assert_int_equal(gdr_unmap(g, mh, va, GPU_PAGE), EINVAL);
	assert_int_equal(gdr_get_info_v2(g, mh, &info), EINVAL);
	assert_int_equal(gdr_get_callback_flag(g, mh, &flag), EINVAL);
	assert_int_equal(gdr_copy_to_mapping(mh, va, buf, sizeof(buf)), EINVAL);
	assert_int_equal(gdr_copy_from_mapping(mh, buf, va, sizeof(buf)), EINVAL);
	assert_int_equal(gdr_copy_to_mapping_parallel(mh, va, buf, sizeof(buf), 4), EINVAL);
	/* The handles of a closed gdr_t are stale too. */
	assert_int_equal(gdr_pin_buffer_v2(g2, FAKE_GPU_VA, GPU_PAGE, 0, &orphan), 0);
	assert_int_equal(gdr_map(g2, orphan, &va, GPU_PAGE), 0);
	assert_int_equal(gdr_close(g2), 0);
	assert_int_equal(gdr_copy_from_mapping(orphan, buf, va, sizeof(buf)), EINVAL);
	assert_int_equal(gdr_unpin_buffer(g, orphan), EINVAL);
	assert_int_equal(gdr_close(g), 0);
}

/* A size that wraps to 0 when rounded to pages would leave a mapping no unmap removes. */
static void test_map_size_that_cannot_be_rounded(void **state)
{
	gdr_t g = open_default();
	gdr_mh_t mh;
	void *va;

	(void)state;
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, 0, &mh), 0);
	assert_int_equal(gdr_map(g, mh, &va, SIZE_MAX), EINVAL);
	assert_int_equal(gdr_map(g, mh, &va, SIZE_MAX - 4000), EINVAL);
	assert_int_equal(fake_live_mappings(), 0);
	assert_int_equal(gdr_close(g), 0);
}

static void test_get_info(void **state)
{
	gdr_t g = open_default();
	gdr_info_t info;
	gdr_mh_t mh;
	void *va;

	(void)state;
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA + 3 * GPU_PAGE + 100, 2 * GPU_PAGE, 0, &mh), 0);
	memset(&info, 0xff, sizeof(info));
	assert_int_equal(gdr_get_info_v2(g, mh, &info), 0);
	assert_int_equal(info.va, FAKE_GPU_VA + 3 * GPU_PAGE);
	assert_int_equal(info.mapped_size, 3 * GPU_PAGE);
	assert_int_equal(info.page_size, GPU_PAGE);
	assert_int_equal(info.cycles_per_ms, 2000000);
	assert_int_equal(info.tm_cycles, 1234);
	assert_int_equal(info.mapped, 0);
	assert_int_equal(info.wc_mapping, 0);
	assert_int_equal(info.mapping_type, GDR_MAPPING_TYPE_NONE);
	assert_int_equal(gdr_get_info_v2(g, mh, NULL), EINVAL);
	assert_int_equal(gdr_unpin_buffer(g, mh), 0);

	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, 0, &mh), 0);
	assert_int_equal(gdr_map(g, mh, &va, GPU_PAGE), 0);
	assert_int_equal(gdr_get_info_v2(g, mh, &info), 0);
	assert_int_equal(info.mapped, 1);
	assert_int_equal(info.wc_mapping, 1);
	assert_int_equal(info.mapping_type, GDR_MAPPING_TYPE_WC);
	assert_int_equal(gdr_close(g), 0);
}

static void test_get_info_v1_symbol(void **state)
{
	gdr_t g = open_default();
	/* NCCL passes its own v1 copy (40 bytes): not one byte past it may be written. */
	struct {
		struct gdr_info_v1 v1;
		unsigned char guard[64];
	} out;
	struct gdr_info_v1 info;
	unsigned char guard[64];
	unsigned int v2_before;
	gdr_mh_t mh;
	void *va;

	(void)state;
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, 0, &mh), 0);
	assert_int_equal(gdr_map(g, mh, &va, GPU_PAGE), 0);
	v2_before = fake_ioctl_count(NR(GDRDRV_IOC_GET_INFO_V2));
	memset(&out, 0xa5, sizeof(out));
	memset(guard, 0xa5, sizeof(guard));
	assert_int_equal(gdr_get_info(g, mh, &out.v1), 0);
	assert_memory_equal(out.guard, guard, sizeof(guard));
	info = out.v1;
	/* The old symbol keeps the old ioctl, as GDRCopy does. */
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_GET_INFO)), 1);
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_GET_INFO_V2)), v2_before);
	assert_int_equal(info.va, FAKE_GPU_VA);
	assert_int_equal(info.mapped_size, GPU_PAGE);
	assert_int_equal(info.page_size, GPU_PAGE);
	assert_int_equal(info.mapped, 1);
	assert_int_equal(info.wc_mapping, 1);
	assert_int_equal(gdr_get_info(g, mh, NULL), EINVAL);
	assert_int_equal(gdr_close(g), 0);
}

static void test_get_attribute(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	int value = 42;
	gdr_t g = open_default();

	(void)state;
	assert_int_equal(gdr_get_attribute(g, 0, &value), EINVAL);
	assert_int_equal(gdr_get_attribute(g, GDR_ATTR_MAX, &value), EINVAL);
	assert_int_equal(gdr_get_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING, NULL), EINVAL);
	assert_int_equal(gdr_get_attribute(NULL, GDR_ATTR_USE_PERSISTENT_MAPPING, &value), EINVAL);
	assert_int_equal(value, 42);
	assert_int_equal(gdr_get_attribute(g, GDR_ATTR_USING_DMA_BUF_MMAP, &value), 0);
	assert_int_equal(value, 0);
	assert_int_equal(gdr_get_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING, &value), 0);
	assert_int_equal(value, 1);
	assert_int_equal(gdr_close(g), 0);

	/* A driver that does not know an attribute does not have that feature (GDRCopy's dead fallback, fixed). */
	cfg.attr_errno = EINVAL;
	use_config(&cfg);
	g = open_default();
	value = 42;
	assert_int_equal(gdr_get_attribute(g, GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE, &value), 0);
	assert_int_equal(value, 0);
	assert_int_equal(gdr_close(g), 0);

	/* Any other failure is reported, with the value untouched. */
	cfg.attr_errno = EIO;
	use_config(&cfg);
	g = open_default();
	value = 42;
	assert_int_equal(gdr_get_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING, &value), EIO);
	assert_int_equal(value, 42);
	assert_int_equal(gdr_close(g), 0);
}

static void test_callback_flag(void **state)
{
	gdr_t g = open_default();
	gdr_mh_t mh;
	int flag = -1;

	(void)state;
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, 0, &mh), 0);
	assert_int_equal(gdr_get_callback_flag(g, mh, &flag), 0);
	assert_int_equal(flag, 0);
	fake_gdrdrv_invalidate(FAKE_GPU_VA + 10);
	assert_int_equal(gdr_get_callback_flag(g, mh, &flag), 0);
	assert_int_equal(flag, 1);
	assert_int_equal(gdr_get_callback_flag(g, mh, NULL), EINVAL);
	assert_int_equal(gdr_close(g), 0);
}

static void test_close_unpins_everything(void **state)
{
	gdr_t g = open_default();
	gdr_mh_t mh[5];
	void *va;
	int i;

	(void)state;
	for (i = 0; i < 5; i++)
		assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA + i * 2 * GPU_PAGE, 2 * GPU_PAGE, 0, &mh[i]), 0);
	assert_int_equal(gdr_map(g, mh[1], &va, GPU_PAGE), 0);
	assert_int_equal(gdr_map(g, mh[3], &va, 2 * GPU_PAGE), 0);
	assert_int_equal(gdr_unpin_buffer(g, mh[4]), 0);
	assert_int_equal(fake_live_pins(), 4);
	assert_int_equal(fake_live_mappings(), 2);
	assert_int_equal(gdr_close(g), 0);
	assert_int_equal(fake_ioctl_count(NR(GDRDRV_IOC_UNPIN_BUFFER)), 5);
	assert_int_equal(fake_live_files(), 0);
	assert_int_equal(gdr_close(NULL), EINVAL);
}

static void test_versions_and_strings(void **state)
{
	const char *name = NULL;
	int major = -1, minor = -1;
	gdr_t g = open_default();

	(void)state;
	gdr_runtime_get_version(&major, &minor);
	assert_int_equal(major, 2);
	assert_int_equal(minor, 6);
	assert_int_equal(gdr_driver_get_version(g, &major, &minor), 0);
	assert_int_equal(major, 2);
	assert_int_equal(minor, 6);
	assert_int_equal(gdr_driver_get_version(g, NULL, &minor), EINVAL);
	assert_int_equal(gdr_close(g), 0);

	assert_int_equal(gdr_get_mapping_type_string(GDR_MAPPING_TYPE_NONE, &name), 0);
	assert_string_equal(name, "None");
	assert_int_equal(gdr_get_mapping_type_string(GDR_MAPPING_TYPE_WC, &name), 0);
	assert_string_equal(name, "Write Combining");
	assert_int_equal(gdr_get_mapping_type_string(GDR_MAPPING_TYPE_CACHING, &name), 0);
	assert_string_equal(name, "Caching");
	assert_int_equal(gdr_get_mapping_type_string(GDR_MAPPING_TYPE_DEVICE, &name), 0);
	assert_string_equal(name, "Device");
	assert_int_equal(gdr_get_mapping_type_string(GDR_MAPPING_TYPE_MAX, &name), EINVAL);
	assert_int_equal(gdr_get_mapping_type_string((gdr_mapping_type_t)-1, &name), EINVAL);
	assert_int_equal(gdr_get_mapping_type_string(GDR_MAPPING_TYPE_WC, NULL), EINVAL);
}

static void test_copy_through_mapping(void **state)
{
	gdr_t g = open_default();
	unsigned char in[300], out[300];
	gdr_mh_t mh;
	char *va;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(in); i++)
		in[i] = (unsigned char)(i * 7 + 1);
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, 0, &mh), 0);
	assert_int_equal(gdr_copy_to_mapping(mh, (void *)0x1000, in, 1), EINVAL);	/* not mapped */
	assert_int_equal(gdr_map(g, mh, (void **)&va, GPU_PAGE), 0);
	assert_int_equal(gdr_copy_to_mapping(mh, va + 13, in, sizeof(in)), 0);
	assert_memory_equal(va + 13, in, sizeof(in));
	memset(out, 0, sizeof(out));
	assert_int_equal(gdr_copy_from_mapping(mh, out, va + 13, sizeof(out)), 0);
	assert_memory_equal(out, in, sizeof(in));
	assert_int_equal(gdr_copy_to_mapping(mh, va, in, 0), 0);
	/* Outside the mapping. */
	assert_int_equal(gdr_copy_to_mapping(mh, va + GPU_PAGE - 10, in, 11), EINVAL);
	assert_int_equal(gdr_copy_from_mapping(mh, out, va - 1, 2), EINVAL);
	/* The inline path's window, at each edge, with the sizes it takes (aligned polls, flags, lines). */
	assert_int_equal(gdr_copy_from_mapping(mh, out, va - 16, 16), EINVAL);
	assert_int_equal(gdr_copy_from_mapping(mh, out, va - 32, 32), EINVAL);
	assert_int_equal(gdr_copy_to_mapping(mh, va - 8, in, 8), EINVAL);
	assert_int_equal(gdr_copy_from_mapping(mh, out, va - 256, 256), EINVAL);
	assert_int_equal(gdr_copy_from_mapping(mh, out, va + GPU_PAGE, 16), EINVAL);
	assert_int_equal(gdr_copy_from_mapping(mh, out, va + GPU_PAGE - 32, 64), EINVAL);
	assert_int_equal(gdr_copy_from_mapping(mh, out, va + GPU_PAGE - 16, 16), 0);
	assert_int_equal(gdr_copy_from_mapping(mh, out, va + 64, SIZE_MAX), EINVAL);	/* would wrap */
	assert_int_equal(gdr_copy_from_mapping(mh, out, va + 64, SIZE_MAX - 63), EINVAL);
	/* A value with the live buffer's generation bits but no slot, or another slot. */
	assert_int_equal(gdr_copy_from_mapping((gdr_mh_t){ mh.h & ~0xffffffUL }, out, va, 16), EINVAL);
	assert_int_equal(gdr_copy_from_mapping((gdr_mh_t){ mh.h ^ 1 }, out, va, 16), EINVAL);
	assert_int_equal(gdr_unmap(g, mh, va, GPU_PAGE), 0);
	assert_int_equal(gdr_copy_from_mapping(mh, out, va, 16), EINVAL);
	assert_int_equal(gdr_copy_from_mapping(mh, out, va, 32), EINVAL);
	assert_int_equal(gdr_copy_from_mapping(mh, out, va, 1), EINVAL);
	assert_int_equal(gdr_close(g), 0);
}

static void test_extensions_on_gdrdrv(void **state)
{
	const size_t size = 1 << 20;
	unsigned char *in = malloc(size), *out = malloc(size);
	uint64_t gpu_ptr;
	void *cpu_ptr;
	gdr_t g = open_default();
	gdr_mh_t mh;
	char *va;
	size_t i;

	(void)state;
	assert_string_equal(gdr_get_backend_name(g), "gdrdrv");
	assert_null(gdr_get_backend_name(NULL));
	/* Only the vulkan backend allocates. */
	assert_int_equal(gdr_alloc_mapped(g, GPU_PAGE, &gpu_ptr, &cpu_ptr), ENOTSUP);
	assert_int_equal(gdr_free_mapped(g, FAKE_GPU_VA), ENOTSUP);
	assert_int_equal(gdr_alloc_mapped(NULL, GPU_PAGE, &gpu_ptr, &cpu_ptr), EINVAL);

	/* Parallel copies through a mapping: same bytes, same range checks. */
	for (i = 0; i < size; i++)
		in[i] = (unsigned char)(i * 29 + (i >> 12));
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, size + GPU_PAGE, 0, &mh), 0);
	assert_int_equal(gdr_map(g, mh, (void **)&va, size + GPU_PAGE), 0);
	assert_int_equal(gdr_copy_to_mapping_parallel(mh, va + 7, in, size, 4), 0);
	assert_memory_equal(va + 7, in, size);
	memset(out, 0, size);
	assert_int_equal(gdr_copy_from_mapping_parallel(mh, out, va + 7, size, 4), 0);
	assert_memory_equal(out, in, size);
	assert_int_equal(gdr_copy_to_mapping_parallel(mh, va + GPU_PAGE + 1, in, size, 4), EINVAL);
	assert_int_equal(gdr_unmap(g, mh, va, size + GPU_PAGE), 0);
	assert_int_equal(gdr_copy_from_mapping_parallel(mh, out, va, size, 4), EINVAL);
	assert_int_equal(gdr_close(g), 0);
	free(in);
	free(out);
}

static void test_host_page_from_sysconf(void **state)
{
	(void)state;
	assert_int_equal(gdr_host_page()->size, (size_t)sysconf(_SC_PAGESIZE));
	assert_int_equal((size_t)1 << gdr_host_page()->shift, gdr_host_page()->size);
}

/*
 * A fork() child of the process that opened the gdr_t: gdrdrv mappings are
 * not inherited, so whatever sits at the parent's mapping address must be
 * neither written nor unmapped.  Every call on the parent's gdr_t says
 * EPERM and leaves the memory alone.
 */
static void test_fork_child_gets_eperm(void **state)
{
	gdr_t g = open_default();
	gdr_mh_t mh;
	void *va;
	int status;
	pid_t pid;

	(void)state;
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, 0, &mh), 0);
	assert_int_equal(gdr_map(g, mh, &va, GPU_PAGE), 0);
	memset(va, 0x11, 64);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char buf[64];
		int rc;

		memset(buf, 0x22, sizeof(buf));
		if ((rc = gdr_copy_to_mapping(mh, va, buf, sizeof(buf))) != EPERM)
			_exit(10 + rc);
		/* The small reads a poller makes take the inline path: it checks too. */
		if ((rc = gdr_copy_from_mapping(mh, buf, va, 16)) != EPERM)
			_exit(100 + rc);
		if ((rc = gdr_copy_from_mapping(mh, buf, va, 32)) != EPERM)
			_exit(150 + rc);
		if (((unsigned char *)va)[0] != 0x11)
			_exit(2);	/* it wrote anyway */
		if (gdr_unmap(g, mh, va, GPU_PAGE) != EPERM || gdr_unpin_buffer(g, mh) != EPERM)
			_exit(3);
		if (msync(va, GPU_PAGE, MS_ASYNC))
			_exit(4);	/* it unmapped the address */
		if (gdr_close(g) != EPERM)
			_exit(5);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* The parent's buffer is untouched and still its own. */
	assert_int_equal(gdr_unmap(g, mh, va, GPU_PAGE), 0);
	assert_int_equal(gdr_close(g), 0);
}

/*
 * Pin and map a page, then do what an application may do behind the
 * library: munmap gdr_map's pointer and map something of its own (0x33s)
 * at the same address.  Returns that address.
 */
static void *map_then_unmap_behind(gdr_t g, gdr_mh_t *mh)
{
	void *va, *other;

	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, 0, mh), 0);
	assert_int_equal(gdr_map(g, *mh, &va, GPU_PAGE), 0);
	assert_int_equal(munmap(va, GPU_PAGE), 0);
	other = mmap(va, GPU_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	assert_ptr_equal(other, va);
	memset(other, 0x33, GPU_PAGE);
	return other;
}

/* The application munmapped the mapping itself: gdr_unmap must not unmap what is there now. */
static void test_unmapped_behind_the_library(void **state)
{
	gdr_t g = open_default();
	gdr_mh_t mh;
	void *va, *other;

	(void)state;
	other = map_then_unmap_behind(g, &mh);
	va = other;
	log_capture_begin();
	assert_int_equal(gdr_unmap(g, mh, va, GPU_PAGE), EFAULT);
	assert_non_null(strstr(log_capture_end(), "unmapped behind"));
	assert_int_equal(msync(other, GPU_PAGE, MS_ASYNC), 0);
	assert_int_equal(((unsigned char *)other)[100], 0x33);
	assert_int_equal(gdr_unpin_buffer(g, mh), 0);
	assert_int_equal(gdr_close(g), 0);
	munmap(other, GPU_PAGE);
}

/*
 * The application munmapped buffer A's mapping and the kernel put buffer B's
 * new mapping at the same address: a copy to A must not write into B.  The
 * library sees it at gdr_map (the new range overlaps A's record), not on
 * the copy path.
 */
static void test_copy_after_unmap_behind_fails_once_a_new_mapping_lands_there(void **state)
{
	gdr_t g = open_default();
	gdr_mh_t a, b;
	void *va, *vb;
	unsigned char buf[64];
	const char *log;

	(void)state;
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, 0, &a), 0);
	assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA + GPU_PAGE, GPU_PAGE, 0, &b), 0);
	assert_int_equal(gdr_map(g, a, &va, GPU_PAGE), 0);
	assert_int_equal(munmap(va, GPU_PAGE), 0);	/* behind the library */
	fake_gdrdrv_next_map_at(va);
	log_capture_begin();
	assert_int_equal(gdr_map(g, b, &vb, GPU_PAGE), 0);
	log = log_capture_end();
	assert_ptr_equal(vb, va);
	assert_non_null(strstr(log, "unmapped behind"));
	memset(vb, 0x44, 64);

	memset(buf, 0x55, sizeof(buf));
	log_capture_begin();
	assert_int_equal(gdr_copy_to_mapping(a, va, buf, sizeof(buf)), EFAULT);
	assert_int_equal(gdr_copy_from_mapping(a, buf, va, sizeof(buf)), EFAULT);
	assert_non_null(strstr(log_capture_end(), "unmapped behind"));
	assert_int_equal(((unsigned char *)vb)[0], 0x44);	/* B untouched */
	assert_int_equal(buf[0], 0x55);
	/* A's unmap leaves B's mapping alone; B works as before. */
	assert_int_equal(gdr_unmap(g, a, va, GPU_PAGE), EFAULT);
	assert_int_equal(msync(vb, GPU_PAGE, MS_ASYNC), 0);
	assert_int_equal(gdr_copy_to_mapping(b, vb, buf, sizeof(buf)), 0);
	assert_int_equal(((unsigned char *)vb)[0], 0x55);
	assert_int_equal(gdr_unmap(g, b, vb, GPU_PAGE), 0);
	assert_int_equal(gdr_close(g), 0);
	assert_int_equal(fake_live_mappings(), 0);
}

/*
 * gdr_get_info is the other point where the library learns it: gdrdrv says
 * the buffer has no mapping while the library still holds one.  From then
 * on copies fail, and the buffer can be mapped again.
 */
static void test_get_info_finds_a_mapping_unmapped_behind(void **state)
{
	gdr_t g = open_default();
	gdr_mh_t mh;
	gdr_info_v2_t info;
	void *va, *other, *again;
	unsigned char buf[64];

	(void)state;
	other = map_then_unmap_behind(g, &mh);
	va = other;
	assert_int_equal(gdr_get_info_v2(g, mh, &info), 0);
	assert_int_equal(info.mapped, 0);
	memset(buf, 0x66, sizeof(buf));
	assert_int_equal(gdr_copy_to_mapping(mh, va, buf, sizeof(buf)), EFAULT);
	assert_int_equal(((unsigned char *)other)[0], 0x33);
	/* Mapped anew, it is a buffer like any other. */
	assert_int_equal(gdr_map(g, mh, &again, GPU_PAGE), 0);
	assert_int_equal(gdr_copy_to_mapping(mh, again, buf, sizeof(buf)), 0);
	assert_int_equal(gdr_unmap(g, mh, again, GPU_PAGE), 0);
	assert_int_equal(((unsigned char *)other)[0], 0x33);
	assert_int_equal(gdr_close(g), 0);
	munmap(other, GPU_PAGE);
}

/* A pin that gdrdrv refuses says which module parameter is behind the refusal. */
static void test_pin_refusals_name_gdrdrvs_parameters(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	/* The per-file and per-user pin limits, each named by the errno gdrdrv gives. */
	static const struct {
		int err;
		const char *parameter;
	} limits[] = { { ENOSPC, "max_pins_per_file" }, { ENOSPC, "max_pinned_bytes_per_file" },
		       { EDQUOT, "max_pins_per_user" }, { EDQUOT, "max_pinned_bytes_per_user" } };
	gdr_mh_t mh;
	gdr_t g;
	const char *log;

	(void)state;
	/* A driver that takes tokens only through the legacy PIN_BUFFER, and refuses them. */
	cfg.version = FAKE_VERSION(2, 3);
	cfg.persistent = false;
	cfg.refuse_p2p_tokens = true;
	use_config(&cfg);
	g = gdr_open();
	assert_non_null(g);
	log_capture_begin();
	assert_int_equal(gdr_pin_buffer(g, FAKE_GPU_VA, GPU_PAGE, 0x1234, 7, &mh), EPERM);
	log = log_capture_end();
	assert_non_null(strstr(log, "allow_p2p_tokens=1"));
	assert_non_null(strstr(log, "tokens 0"));
	/* Without tokens the same driver pins. */
	assert_int_equal(gdr_pin_buffer(g, FAKE_GPU_VA, GPU_PAGE, 0, 0, &mh), 0);
	assert_int_equal(gdr_close(g), 0);

	cfg = fake_gdrdrv_default();
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		cfg.pin_errno = limits[i].err;
		use_config(&cfg);
		g = gdr_open();
		assert_non_null(g);
		log_capture_begin();
		assert_int_equal(gdr_pin_buffer_v2(g, FAKE_GPU_VA, GPU_PAGE, 0, &mh), limits[i].err);
		assert_non_null(strstr(log_capture_end(), limits[i].parameter));
		assert_int_equal(gdr_close(g), 0);
	}
}

static pid_t copy_caller_tid;
static sigjmp_buf copy_fault_jmp;

static void revoked_fault_handler(int sig)
{
	(void)sig;
	if ((pid_t)syscall(SYS_gettid) != copy_caller_tid) {
		static const char msg[] = "the revoked mapping faulted on a copy worker thread\n";

		(void)!write(2, msg, sizeof(msg) - 1);
		_exit(3);
	}
	siglongjmp(copy_fault_jmp, 1);
}

/*
 * A legacy pin whose memory was freed: the mapping faults.  A parallel copy
 * (GDRCOPY_COPY_THREADS > 1) must fault on the calling thread, where the
 * caller's handler sees it, never on a worker (the caller then waits
 * forever, or its handler runs on the wrong stack).
 */
static void test_revoked_legacy_pin_faults_on_the_calling_thread(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();
	const size_t size = 16 * GPU_PAGE;
	int status;
	pid_t pid;

	(void)state;
	cfg.persistent = false;
	use_config(&cfg);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sigaction sa = { .sa_handler = revoked_fault_handler };
		static char buf[16 * 64 * 1024];
		gdr_t g = gdr_open();
		gdr_mh_t mh;
		void *va;

		if (!g || gdr_pin_buffer(g, FAKE_GPU_VA, size, 0, 0, &mh) || gdr_map(g, mh, &va, size))
			_exit(2);
		sigaction(SIGSEGV, &sa, NULL);
		sigaction(SIGBUS, &sa, NULL);
		alarm(20);	/* a hang ends as SIGALRM */
		copy_caller_tid = (pid_t)syscall(SYS_gettid);
		/* Revoked: all but the first GPU page fault, as after the free callback. */
		fake_gdrdrv_invalidate(FAKE_GPU_VA);
		mprotect((char *)va + GPU_PAGE, size - GPU_PAGE, PROT_NONE);
		if (!sigsetjmp(copy_fault_jmp, 1)) {
			gdr_copy_to_mapping_parallel(mh, va, buf, size, 4);
			_exit(4);	/* no fault at all */
		}
		usleep(300 * 1000);	/* a worker faulting as well would end us with 3 */
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status)) {
		print_message("# the copy child died of signal %d (%s)\n", WTERMSIG(status),
			      WTERMSIG(status) == SIGALRM ? "SIGALRM: the parallel copy hung" : strsignal(WTERMSIG(status)));
		fail();
	}
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_open_succeeds_with_cloexec, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_child_gets_eperm, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unmapped_behind_the_library, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_after_unmap_behind_fails_once_a_new_mapping_lands_there, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_get_info_finds_a_mapping_unmapped_behind, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pin_refusals_name_gdrdrvs_parameters, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revoked_legacy_pin_faults_on_the_calling_thread, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_module_not_loaded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_node_missing_chrdev_loaded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_node_missing_misc_loaded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_misc_numbers_preferred, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_misc_file_garbled, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_module_registered_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_permission_denied, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_failure_report_and_backend_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_eperm_reported_as_eacces, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_no_driver_behind_node, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_stale_major, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_stale_misc_minor, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_stale_node_not_opened, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_plain_file_judged_after_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_misc_numbers_match, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_misc_match_no_get_version, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_no_driver_not_loaded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_pre_2_0_driver, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_driver_too_old, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_library_too_old_for_driver, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_dmabuf_forced_skips_gdrdrv, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_dmabuf_env_must_be_exactly_1, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gates_driver_2_3, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gates_driver_2_4, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gates_driver_2_5, setup, teardown),
		cmocka_unit_test_setup_teardown(test_force_pcie_pin, setup, teardown),
		cmocka_unit_test_setup_teardown(test_force_pcie_failure_reasons, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vma_inherited_on_fork, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pin_argument_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pin_bar1_exhausted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_map_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_map_type_refused_by_driver, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unpin_errors_and_unmap_on_unpin, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_and_never_issued_handles, setup, teardown),
		cmocka_unit_test_setup_teardown(test_map_size_that_cannot_be_rounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_get_info, setup, teardown),
		cmocka_unit_test_setup_teardown(test_get_info_v1_symbol, setup, teardown),
		cmocka_unit_test_setup_teardown(test_get_attribute, setup, teardown),
		cmocka_unit_test_setup_teardown(test_callback_flag, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_unpins_everything, setup, teardown),
		cmocka_unit_test_setup_teardown(test_versions_and_strings, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_through_mapping, setup, teardown),
		cmocka_unit_test_setup_teardown(test_extensions_on_gdrdrv, setup, teardown),
		cmocka_unit_test(test_host_page_from_sysconf),
	};

	enable_library_logging();
	return cmocka_run_group_tests_name("api", tests, NULL, NULL);
}
