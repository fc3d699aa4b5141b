// SPDX-License-Identifier: MIT
/*
 * ktest.c - harness and device helpers for the kernel-level tests.
 * See ktest.h.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ktest.h"

#define KT_EXIT_PASS 0
#define KT_EXIT_FAIL 1
#define KT_EXIT_SKIP 4		/* kselftest's KSFT_SKIP */
#define KT_TIMEOUT_S 300

struct kt_env kt_env;

/* Shared with the test children, for their one-line verdict. */
static char *kt_message;
#define KT_MESSAGE_LEN 512

static const char *const kt_knob_names[] = {
	"pt_version", "pt_page_size", "cpu_cacheable", "bar1_limit",
	"fail_nth", "fail_errno", "persistent_api", "ram_size", "pt_extra_entries",
};
#define KT_NR_KNOBS (sizeof(kt_knob_names) / sizeof(kt_knob_names[0]))
static char kt_knob_saved[KT_NR_KNOBS][64];

/* ---- reporting ------------------------------------------------------------ */

void kt_fail_at(const char *file, int line, const char *fmt, ...)
{
	int n = snprintf(kt_message, KT_MESSAGE_LEN, "%s:%d: ", file, line);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(kt_message + n, KT_MESSAGE_LEN - n, fmt, ap);
	va_end(ap);
	_exit(KT_EXIT_FAIL);
}

void kt_fail_cond(const char *file, int line, const char *cond, const char *fmt, ...)
{
	int n = snprintf(kt_message, KT_MESSAGE_LEN, "%s:%d: ", file, line);
	va_list ap;

	/* The message says what went wrong; the condition names the check. */
	va_start(ap, fmt);
	vsnprintf(kt_message + n, KT_MESSAGE_LEN - n, fmt, ap);
	va_end(ap);
	n = strlen(kt_message);
	snprintf(kt_message + n, KT_MESSAGE_LEN - n, " [%s]", cond);
	_exit(KT_EXIT_FAIL);
}

void kt_skip(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(kt_message, KT_MESSAGE_LEN, fmt, ap);
	va_end(ap);
	_exit(KT_EXIT_SKIP);
}

void kt_fail_child(int status)
{
	char child[KT_MESSAGE_LEN];

	snprintf(child, sizeof(child), "%s", kt_message);
	snprintf(kt_message, KT_MESSAGE_LEN, "in a child process (status %d): %.400s",
		 status, child[0] ? child : "no message");
	_exit(KT_EXIT_FAIL);
}

void kt_note(const char *fmt, ...)
{
	va_list ap;

	fputs("# ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

const char *kt_errno_symbol(int err)
{
	switch (err) {
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case EIO: return "EIO";
	case ENXIO: return "ENXIO";
	case EBADF: return "EBADF";
	case EAGAIN: return "EAGAIN";
	case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES";
	case EFAULT: return "EFAULT";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case ENODEV: return "ENODEV";
	case EINVAL: return "EINVAL";
	case ENOSPC: return "ENOSPC";
	case ENOTTY: return "ENOTTY";
	case ERANGE: return "ERANGE";
	case ENOSYS: return "ENOSYS";
	case EOVERFLOW: return "EOVERFLOW";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	default: return NULL;
	}
}

const char *kt_errname(int err)
{
	const char *symbol = kt_errno_symbol(err);

	if (symbol)
		return symbol;
	if (err == 0)
		return "success";
	if (err == 524)
		return "ENOTSUPP(524)";
	return strerror(err);
}

/* ---- softgpu --------------------------------------------------------------- */

int sg_open(void)
{
	int fd = open(SOFTGPU_DEVICE_PATH, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		KT_FAIL("open %s: %s (is softgpu.ko loaded?)", SOFTGPU_DEVICE_PATH,
			strerror(errno));
	return fd;
}

int sg_ioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? errno : 0;
}

int sg_try_alloc(int sg, uint64_t size, uint64_t *va)
{
	struct softgpu_alloc a = { .size = size };
	int err = sg_ioctl(sg, SOFTGPU_IOC_ALLOC, &a);

	if (!err)
		*va = a.va;
	return err;
}

uint64_t sg_alloc(int sg, uint64_t size)
{
	uint64_t va;
	int err = sg_try_alloc(sg, size, &va);

	if (err)
		KT_FAIL("SOFTGPU_IOC_ALLOC(%llu): %s", (unsigned long long)size,
			kt_errname(err));
	return va;
}

void sg_free(int sg, uint64_t va)
{
	struct softgpu_free f = { .va = va };

	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_FREE, &f));
}

static void sg_copy(int sg, uint64_t va, void *buf, uint64_t size, uint32_t dir)
{
	struct softgpu_copy c = {
		.va = va, .host = (uintptr_t)buf, .size = size, .direction = dir,
	};

	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_COPY, &c));
}

void sg_write(int sg, uint64_t va, const void *buf, uint64_t size)
{
	sg_copy(sg, va, (void *)buf, size, SOFTGPU_COPY_TO_GPU);
}

void sg_read(int sg, uint64_t va, void *buf, uint64_t size)
{
	sg_copy(sg, va, buf, size, SOFTGPU_COPY_FROM_GPU);
}

struct softgpu_info sg_info(int sg)
{
	struct softgpu_info info;

	KT_EXPECT_OK(sg_ioctl(sg, SOFTGPU_IOC_GET_INFO, &info));
	return info;
}

/* Works in the parent too: errors end the program there. */
struct softgpu_stats sg_stats(void)
{
	struct softgpu_stats stats;
	int fd = open(SOFTGPU_DEVICE_PATH, O_RDWR | O_CLOEXEC);

	if (fd < 0 || ioctl(fd, SOFTGPU_IOC_GET_STATS, &stats)) {
		fprintf(stderr, "ktest: SOFTGPU_IOC_GET_STATS: %s\n", strerror(errno));
		exit(2);
	}
	close(fd);
	return stats;
}

static void knob_path(const char *name, char *path, size_t len)
{
	snprintf(path, len, "/sys/module/softgpu/parameters/%s", name);
}

bool knob_get(const char *name, char *buf, size_t len)
{
	char path[128];
	ssize_t n;
	int fd;

	knob_path(name, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return true;
}

int kt_write_file(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return errno;
	if (write(fd, value, strlen(value)) < 0)
		err = errno;
	close(fd);
	return err;
}

static int knob_write(const char *name, const char *value)
{
	char path[128];

	knob_path(name, path, sizeof(path));
	return kt_write_file(path, value);
}

void knob_set(const char *name, const char *value)
{
	int err;

	if (!kt_env.knobs)
		kt_skip("softgpu's knobs in /sys/module/softgpu/parameters are not writable");
	err = knob_write(name, value);
	if (err)
		KT_FAIL("setting softgpu knob %s=%s: %s", name, value, strerror(err));
}

/* ---- gdrdrv ---------------------------------------------------------------- */

int gd_open(void)
{
	int fd = open("/dev/gdrdrv", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		KT_FAIL("open /dev/gdrdrv: %s", strerror(errno));
	return fd;
}

int gd_ioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? errno : 0;
}

int gd_pin(int gd, uint64_t addr, uint64_t size, uint32_t flags, uint64_t *handle)
{
	struct gdrdrv_pin_buffer_v2 p = { .addr = addr, .size = size, .flags = flags };
	int err = gd_ioctl(gd, GDRDRV_IOC_PIN_BUFFER_V2, &p);

	if (!err && handle)
		*handle = p.handle;
	return err;
}

int gd_pin_tokens(int gd, uint64_t addr, uint64_t size, uint64_t token,
		  uint32_t va_space, uint64_t *handle)
{
	struct gdrdrv_pin_buffer p = {
		.addr = addr, .size = size, .p2p_token = token, .va_space = va_space,
	};
	int err = gd_ioctl(gd, GDRDRV_IOC_PIN_BUFFER, &p);

	if (!err && handle)
		*handle = p.handle;
	return err;
}

int gd_unpin(int gd, uint64_t handle)
{
	struct gdrdrv_unpin_buffer u = { .handle = handle };

	return gd_ioctl(gd, GDRDRV_IOC_UNPIN_BUFFER, &u);
}

int gd_info(int gd, uint64_t handle, struct gdrdrv_get_info_v2 *info)
{
	memset(info, 0, sizeof(*info));
	info->handle = handle;
	return gd_ioctl(gd, GDRDRV_IOC_GET_INFO_V2, info);
}

int gd_cb_flag(int gd, uint64_t handle, uint32_t *flag)
{
	struct gdrdrv_get_cb_flag f = { .handle = handle };
	int err = gd_ioctl(gd, GDRDRV_IOC_GET_CB_FLAG, &f);

	*flag = f.flag;
	return err;
}

int gd_req_type(int gd, uint64_t handle, uint32_t type)
{
	struct gdrdrv_req_mapping_type r = { .handle = handle, .mapping_type = type };

	return gd_ioctl(gd, GDRDRV_IOC_REQ_MAPPING_TYPE, &r);
}

void *gd_map(int gd, uint64_t handle, size_t size, int *err)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p;

	size = (size + page - 1) & ~(size_t)(page - 1);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, gd,
		 (off_t)(handle * (uint64_t)page));
	*err = p == MAP_FAILED ? errno : 0;
	return p == MAP_FAILED ? NULL : p;
}

uint32_t gd_expected_type(void)
{
	return kt_env.sg_info.flags & SOFTGPU_INFO_CPU_CACHEABLE ?
	       GDRDRV_MR_CACHING : GDRDRV_MR_WC;
}

/* ---- faults ---------------------------------------------------------------- */

/*
 * One handler for the whole process, installed on first use and left in
 * place, so that several threads may probe at once (installing and
 * restoring handlers per call would race).  Each thread has its own jump
 * buffer; a fault in a thread that is not probing is fatal, as without us.
 */
static __thread sigjmp_buf kt_fault_jmp;
static __thread volatile sig_atomic_t kt_fault_armed, kt_fault_sig;
static pthread_once_t kt_fault_once = PTHREAD_ONCE_INIT;

static void kt_fault_handler(int sig)
{
	if (!kt_fault_armed) {
		/* Not ours: die of it (SA_NODEFER: delivered at once). */
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	kt_fault_armed = 0;
	kt_fault_sig = sig;
	siglongjmp(kt_fault_jmp, 1);
}

/*
 * SA_NODEFER: the handler leaves with siglongjmp(), and nothing is blocked
 * that it would have to unblock, so the jump needs no signal mask: a probe
 * costs no system call.
 */
static void kt_fault_install(void)
{
	struct sigaction sa = { .sa_handler = kt_fault_handler, .sa_flags = SA_NODEFER };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);
}

static int kt_try_access(volatile void *addr, bool write, uint32_t *value)
{
	pthread_once(&kt_fault_once, kt_fault_install);
	kt_fault_sig = 0;
	if (!sigsetjmp(kt_fault_jmp, 0)) {
		kt_fault_armed = 1;
		if (write)
			*(volatile uint32_t *)addr = *value;
		else
			*value = *(volatile uint32_t *)addr;
		kt_fault_armed = 0;
	}
	return kt_fault_sig;
}

int kt_try_read32(const volatile void *addr, uint32_t *value)
{
	return kt_try_access((volatile void *)addr, false, value);
}

int kt_try_write32(volatile void *addr, uint32_t value)
{
	return kt_try_access(addr, true, &value);
}

/* ---- module loading -------------------------------------------------------- */

int kt_unload_module(const char *name)
{
	return syscall(SYS_delete_module, name, O_NONBLOCK) ? errno : 0;
}

void kt_gdrdrv_params(char *buf, size_t len, int persistent)
{
	static const char *const names[] = {
		"dbg_enabled", "info_enabled", "node_mode", "node_gid",
	};
	size_t n = snprintf(buf, len, "use_persistent_mapping=%d", persistent);

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && n < len; i++) {
		char path[128], value[32];
		ssize_t got;
		int fd;

		snprintf(path, sizeof(path), "/sys/module/gdrdrv/parameters/%s", names[i]);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		got = read(fd, value, sizeof(value) - 1);
		close(fd);
		if (got <= 0)
			continue;
		value[got] = '\0';
		value[strcspn(value, "\n")] = '\0';
		n += snprintf(buf + n, len - n, " %s=%s", names[i], value);
	}
}

int kt_load_gdrdrv(const char *params)
{
	char cmd[512];
	int fd, err = 0;

	if (kt_env.gdrdrv_ko) {
		fd = open(kt_env.gdrdrv_ko, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return errno;
		if (syscall(SYS_finit_module, fd, params, 0))
			err = errno;
		close(fd);
	} else {
		snprintf(cmd, sizeof(cmd), "modprobe gdrdrv %s", params);
		if (system(cmd) != 0)
			err = ENOENT;
	}
	if (!err)
		kt_make_gdrdrv_node();
	return err;
}

void kt_make_gdrdrv_node(void)
{
	char line[128], name[64];
	unsigned int major = 0;
	struct stat st;
	bool chr = false;
	FILE *f;

	f = fopen("/proc/devices", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Character", 9))
			chr = true;
		else if (!strncmp(line, "Block", 5))
			chr = false;
		else if (chr && sscanf(line, "%u %63s", &major, name) == 2 &&
			 !strcmp(name, "gdrdrv"))
			break;
		major = 0;
	}
	fclose(f);
	if (!major)
		return;	/* a misc device, or not loaded: udev/devtmpfs made the node */
	if (!stat("/dev/gdrdrv", &st) && S_ISCHR(st.st_mode) &&
	    major(st.st_rdev) == major)
		return;
	unlink("/dev/gdrdrv");
	mknod("/dev/gdrdrv", S_IFCHR | 0666, makedev(major, 0));
}

/* ---- environment ----------------------------------------------------------- */

static void kt_probe_env(void)
{
	struct gdrdrv_get_attr attr;
	struct gdrdrv_get_version ver;
	int fd;

	fd = open(SOFTGPU_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd >= 0 && !ioctl(fd, SOFTGPU_IOC_GET_INFO, &kt_env.sg_info))
		kt_env.softgpu = true;
	if (fd >= 0)
		close(fd);
	kt_env.knobs = kt_env.softgpu && !access("/sys/module/softgpu/parameters/pt_version", W_OK);

	kt_make_gdrdrv_node();
	fd = open("/dev/gdrdrv", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		snprintf(kt_env.why_no_gdrdrv, sizeof(kt_env.why_no_gdrdrv),
			 "cannot open /dev/gdrdrv (%s): load gdrdrv.ko built against softgpu's Module.symvers",
			 strerror(errno));
		return;
	}
	if (ioctl(fd, GDRDRV_IOC_GET_VERSION, &ver)) {
		snprintf(kt_env.why_no_gdrdrv, sizeof(kt_env.why_no_gdrdrv),
			 "GDRDRV_IOC_GET_VERSION failed: %s", strerror(errno));
		close(fd);
		return;
	}
	kt_env.gdrdrv = true;
	attr = (struct gdrdrv_get_attr){ .attr = GDRDRV_ATTR_USE_PERSISTENT_MAPPING };
	if (!ioctl(fd, GDRDRV_IOC_GET_ATTR, &attr))
		kt_env.persistent = attr.val;
	attr = (struct gdrdrv_get_attr){ .attr = GDRDRV_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE };
	if (!ioctl(fd, GDRDRV_IOC_GET_ATTR, &attr))
		kt_env.force_pcie_attr = attr.val;
	close(fd);

	for (size_t i = 0; i < KT_NR_KNOBS && kt_env.knobs; i++)
		if (!knob_get(kt_knob_names[i], kt_knob_saved[i], sizeof(kt_knob_saved[i])))
			kt_env.knobs = false;
}

static void kt_restore_knobs(void)
{
	for (size_t i = 0; i < KT_NR_KNOBS && kt_env.knobs; i++) {
		char now[64];

		if (knob_get(kt_knob_names[i], now, sizeof(now)) &&
		    strcmp(now, kt_knob_saved[i]))
			knob_write(kt_knob_names[i], kt_knob_saved[i]);
	}
}

/* ---- the kernel log -------------------------------------------------------- */

static int kt_kmsg = -1;

/* Kernel log lines that fail the test running when they appear. */
static const char *const kt_bad_log[] = {
	"WARNING:", "BUG:", "kernel BUG at", "Oops", "Call Trace", "Kernel panic",
	"general protection fault", "Unable to handle", "bad page", "Bad page",
	"KASAN", "UBSAN", "possible circular locking", "inconsistent lock state",
	"possible recursive locking", "list_del corruption", "refcount_t:",
	"conflicting memory types", "freeing invalid memtype",
	"map pfn expected mapping type", "reserve_ram_pages_type",
	"P2P API misuse", "never released", "blocked for more than",
};

/* Returns the first bad kernel log line since the last call, or NULL. */
static const char *kt_scan_kmsg(char *out, size_t len)
{
	char rec[2048];
	const char *found = NULL;
	ssize_t n;

	if (kt_kmsg < 0)
		return NULL;
	while ((n = read(kt_kmsg, rec, sizeof(rec) - 1)) != 0) {
		if (n < 0) {
			if (errno == EPIPE)	/* overwritten records: go on */
				continue;
			break;			/* EAGAIN: caught up */
		}
		rec[n] = '\0';
		/* KCSAN's reports are judged whole by the VM runner (gdrkit/vm/klog.py): it tells the core kernel's own races from ours. */
		if (strstr(rec, "BUG: KCSAN:"))
			continue;
		for (size_t i = 0; !found && i < sizeof(kt_bad_log) / sizeof(kt_bad_log[0]); i++) {
			if (strstr(rec, kt_bad_log[i])) {
				char *msg = strchr(rec, ';');

				snprintf(out, len, "%.400s", msg ? msg + 1 : rec);
				out[strcspn(out, "\n")] = '\0';
				found = out;
			}
		}
	}
	return found;
}

/* ---- running --------------------------------------------------------------- */

static void kt_usage(const char *prog, const struct kt_test *tests, size_t count)
{
	printf("usage: %s [-l] [-t PATTERN]... [-k GDRDRV_KO]\n"
	       "  -l            list the tests and exit\n"
	       "  -t PATTERN    run only tests matching the shell pattern (repeatable; default: all)\n"
	       "  -k PATH       gdrdrv.ko for the tests that reload gdrdrv (default: $GDRDRV_KO, else modprobe)\n"
	       "Exit status: 0 when no test failed, 1 otherwise.\n", prog);
	(void)tests;
	(void)count;
}

static bool kt_selected(const char *name, char **patterns, int npatterns)
{
	if (!npatterns)
		return true;
	for (int i = 0; i < npatterns; i++)
		if (!fnmatch(patterns[i], name, 0))
			return true;
	return false;
}

int kt_setup(void)
{
	if (!kt_message) {
		kt_message = mmap(NULL, KT_MESSAGE_LEN, PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (kt_message == MAP_FAILED) {
			kt_message = NULL;
			perror("mmap");
			return 2;
		}
	}
	kt_message[0] = '\0';
	if (kt_kmsg < 0) {
		kt_kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (kt_kmsg >= 0)
			lseek(kt_kmsg, 0, SEEK_END);
	}
	kt_probe_env();
	if (!kt_env.softgpu) {
		printf("ktest: cannot use %s: load softgpu.ko first\n", SOFTGPU_DEVICE_PATH);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	return 0;
}

void kt_print_env(void)
{
	printf("# softgpu: %s, %llu MiB, page tables %s\n", kt_env.sg_info.name,
	       (unsigned long long)kt_env.sg_info.memory_size >> 20,
	       kt_env.sg_info.flags & SOFTGPU_INFO_CPU_CACHEABLE ? "CPU-cacheable" : "not cacheable");
	if (kt_env.gdrdrv)
		printf("# gdrdrv: %s pins, force-PCIe %ssupported\n",
		       kt_env.persistent ? "persistent" : "legacy (callback)",
		       kt_env.force_pcie_attr ? "" : "not ");
	else
		printf("# gdrdrv: %s\n", kt_env.why_no_gdrdrv);
	if (kt_kmsg < 0)
		printf("# /dev/kmsg unreadable: kernel log not checked\n");
}

int kt_run_test(const struct kt_test *t, unsigned int timeout_s, const char **why)
{
	struct softgpu_stats before, after;
	char logline[512];
	int status = 0, code;
	pid_t pid;

	kt_message[0] = '\0';
	*why = kt_message;
	if (t->needs_gdrdrv && !kt_env.gdrdrv) {
		snprintf(kt_message, KT_MESSAGE_LEN, "%s", kt_env.why_no_gdrdrv);
		return KT_RESULT_SKIP;
	}
	before = sg_stats();
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		snprintf(kt_message, KT_MESSAGE_LEN, "fork: %s", strerror(errno));
		return KT_RESULT_FAIL;
	}
	if (pid == 0) {
		alarm(timeout_s);
		t->fn();
		fflush(stdout);
		_exit(KT_EXIT_PASS);
	}
	waitpid(pid, &status, 0);
	kt_restore_knobs();
	after = sg_stats();

	if (WIFSIGNALED(status)) {
		code = KT_EXIT_FAIL;
		snprintf(kt_message, KT_MESSAGE_LEN, "killed by signal %d (%s)%s",
			 WTERMSIG(status), strsignal(WTERMSIG(status)),
			 WTERMSIG(status) == SIGALRM ? ": timed out" : "");
	} else {
		code = WEXITSTATUS(status);
	}
	/* Invariants every test must keep, whatever it did. */
	if (code != KT_EXIT_FAIL) {
		if (after.active_pins != before.active_pins) {
			code = KT_EXIT_FAIL;
			snprintf(kt_message, KT_MESSAGE_LEN,
				 "%llu P2P pins outstanding after the test's files closed (before: %llu)",
				 (unsigned long long)after.active_pins,
				 (unsigned long long)before.active_pins);
		} else if (after.api_misuse != before.api_misuse) {
			code = KT_EXIT_FAIL;
			snprintf(kt_message, KT_MESSAGE_LEN,
				 "%llu P2P API contract violations (see the kernel log)",
				 (unsigned long long)(after.api_misuse - before.api_misuse));
		} else if (after.memory_used != before.memory_used) {
			code = KT_EXIT_FAIL;
			snprintf(kt_message, KT_MESSAGE_LEN,
				 "GPU memory in use went from %llu to %llu bytes: leaked",
				 (unsigned long long)before.memory_used,
				 (unsigned long long)after.memory_used);
		}
	}
	if (kt_scan_kmsg(logline, sizeof(logline))) {
		code = KT_EXIT_FAIL;
		snprintf(kt_message, KT_MESSAGE_LEN, "kernel log: %.400s", logline);
	}
	if (code == KT_EXIT_PASS)
		return KT_RESULT_PASS;
	return code == KT_EXIT_SKIP ? KT_RESULT_SKIP : KT_RESULT_FAIL;
}

/*
 * The per-test limit: KT_TIMEOUT_S, times GDRKIT_SLOWDOWN when gdrkit.vm boots
 * one of its debug kernels (KASAN and lockdep make the same work many times
 * slower; a test killed by its alarm there is not a defect of the driver).
 */
static unsigned int kt_timeout_s(void)
{
	const char *text = getenv("GDRKIT_SLOWDOWN");
	unsigned long factor = text ? strtoul(text, NULL, 10) : 1;

	return KT_TIMEOUT_S * (factor >= 1 && factor <= 100 ? factor : 1);
}

int kt_run(const struct kt_test *tests, size_t count, int argc, char **argv)
{
	char *patterns[64];
	int npatterns = 0, opt, passed = 0, failed = 0, skipped = 0, num = 0, ret;

	kt_env.gdrdrv_ko = getenv("GDRDRV_KO");
	while ((opt = getopt(argc, argv, "hlt:k:")) != -1) {
		switch (opt) {
		case 'l':
			for (size_t i = 0; i < count; i++)
				printf("%s\n", tests[i].name);
			return 0;
		case 't':
			if (npatterns < 64)
				patterns[npatterns++] = optarg;
			break;
		case 'k':
			kt_env.gdrdrv_ko = optarg;
			break;
		case 'h':
			kt_usage(argv[0], tests, count);
			return 0;
		default:
			kt_usage(argv[0], tests, count);
			return 2;
		}
	}

	ret = kt_setup();
	if (ret)
		return ret;
	printf("TAP version 13\n");
	for (size_t i = 0; i < count; i++)
		num += kt_selected(tests[i].name, patterns, npatterns);
	printf("1..%d\n", num);
	kt_print_env();

	num = 0;
	for (size_t i = 0; i < count; i++) {
		const struct kt_test *t = &tests[i];
		const char *why;

		if (!kt_selected(t->name, patterns, npatterns))
			continue;
		num++;
		switch (kt_run_test(t, kt_timeout_s(), &why)) {
		case KT_RESULT_PASS:
			printf("ok %d %s\n", num, t->name);
			passed++;
			break;
		case KT_RESULT_SKIP:
			printf("ok %d %s # SKIP %s\n", num, t->name, why);
			skipped++;
			break;
		default:
			printf("# %s: %s\n", t->name, why[0] ? why : "failed");
			printf("not ok %d %s\n", num, t->name);
			failed++;
		}
	}
	printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
	return failed ? 1 : 0;
}
