// SPDX-License-Identifier: MIT
/*
 * gdrcopy_sanity - functional tests of libgdrapi and gdrdrv (or the dma-buf
 * backend) on a GPU.
 *
 * Every test runs in its own forked process, in its own process group,
 * which is killed when the test ends: exit status 0 is a pass, 2 a waiver
 * (the environment lacks what the test needs, and it says what), anything
 * else -- including death by a signal or running past the timeout -- a
 * failure.  Tests run in name order.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sanity.h"

#define DEFAULT_TIMEOUT_S 60

int sanity_gpu_id;

/* ---- helpers for tests ------------------------------------------------- */

CUdevice sanity_gpu_init(bool require_default_compute_mode)
{
	return gpu_init(sanity_gpu_id, require_default_compute_mode, false, NULL);
}

gdr_t sanity_gdr_open(void)
{
	gdr_t g = gdr_open();

	if (!g)
		TEST_FAIL("gdr_open() failed: %s; check that gdrdrv is loaded and /dev/gdrdrv exists "
			  "(or that the CUDA driver supports dma-buf mmap); rerun with "
			  "GDRCOPY_ENABLE_LOGGING=1 to see why", strerror(errno));
	return g;
}

int sanity_gdr_attribute(gdr_t g, gdr_attr_t attr)
{
	int value = -1;

	ASSERT_GDR_OK(gdr_get_attribute(g, attr, &value));
	return value;
}

bool sanity_using_dmabuf(gdr_t g)
{
	return sanity_gdr_attribute(g, GDR_ATTR_USING_DMA_BUF_MMAP) != 0;
}

bool sanity_persistent(gdr_t g)
{
	return sanity_gdr_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING) != 0;
}

bool sanity_gpu_coherent(CUdevice dev)
{
	return gpu_attribute(dev, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES) != 0;
}

void sanity_require_force_pcie(gdr_t g, CUdevice dev)
{
	int major;

	if (!sanity_gdr_attribute(g, GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE))
		test_waive("GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE is 0: this gdrdrv/driver cannot force PCIe mappings");
	if (!sanity_gpu_coherent(dev))
		test_waive("the platform is not coherent (PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES is 0): every mapping already goes through PCIe BAR1");
	major = gpu_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
	if (major < 10)
		test_waive("FORCE_PCIE needs compute capability 10.0 or newer; this GPU is %d.x", major);
}

void sanity_require_not_dmabuf(gdr_t g, const char *what)
{
	if (sanity_using_dmabuf(g))
		test_waive("the dma-buf mmap backend is in use; it does not %s", what);
}

bool sanity_alloc_mapped;

void sanity_require_cuda_allocations(const char *why)
{
	if (sanity_alloc_mapped)
		test_waive("-a gdr_alloc_mapped: %s", why);
}

void sanity_alloc(CUdevice dev, gdr_t g, enum gpu_alloc_kind kind, size_t size, struct gpu_mem *mem)
{
	char why[512];

	(void)dev;	/* gpu_alloc() allocates on the current context's device, which is dev */
	/* cuMemCreate memory (with a POSIX fd handle) the vulkan backend pins too; cuMemAlloc memory it cannot. */
	if (sanity_alloc_mapped && kind != GPU_ALLOC_CUMEMCREATE)
		kind = GPU_ALLOC_GDR_MAPPED;
	switch (gpu_alloc(kind, g, mem, size, true, true, why, sizeof(why))) {
	case GPU_ALLOC_OK:
		break;
	case GPU_ALLOC_UNAVAILABLE:
		test_waive("%s", why);
	case GPU_ALLOC_ERROR:
		TEST_FAIL("%s", why);
	}
	test_debug("allocated %zu bytes at 0x%llx with %s", size, (unsigned long long)mem->ptr,
		   gpu_alloc_kind_name(kind));
}

void sanity_free(struct gpu_mem *mem)
{
	char why[512];

	if (gpu_free(mem, why, sizeof(why)))
		TEST_FAIL("%s", why);
}

void sanity_forget_closed(struct gpu_mem *mem)
{
	if (mem->kind == GPU_ALLOC_GDR_MAPPED)
		memset(mem, 0, sizeof(*mem));
}

static __thread sigjmp_buf *fault_jump;
static __thread volatile sig_atomic_t fault_signal;

static void fault_handler(int sig)
{
	fault_signal = sig;
	if (fault_jump)
		siglongjmp(*fault_jump, 1);
	/* Not expecting a fault here: die of it. */
	signal(sig, SIG_DFL);
	raise(sig);
}

int sanity_catch_fault(void (*fn)(void *arg), void *arg)
{
	struct sigaction action, old_segv, old_bus;
	sigjmp_buf jump;
	int sig = 0;

	memset(&action, 0, sizeof(action));
	action.sa_handler = fault_handler;
	sigemptyset(&action.sa_mask);
	sigaction(SIGSEGV, &action, &old_segv);
	sigaction(SIGBUS, &action, &old_bus);
	fault_signal = 0;
	if (sigsetjmp(jump, 1) == 0) {
		fault_jump = &jump;
		fn(arg);
	} else {
		sig = fault_signal;
	}
	fault_jump = NULL;
	sigaction(SIGSEGV, &old_segv, NULL);
	sigaction(SIGBUS, &old_bus, NULL);
	return sig;
}

void sanity_access_word(void *arg)
{
	struct sanity_word_access *access = arg;

	if (access->store) {
		*access->addr = access->value;
		__sync_synchronize();
	} else {
		access->value = *access->addr;
	}
}

pid_t sanity_fork(void (*fn)(void *arg), void *arg)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	ASSERT_MSG(pid >= 0, "fork failed: %s", strerror(errno));
	if (pid == 0) {
		fn(arg);
		fflush(stdout);
		_exit(TEST_EXIT_PASSED);
	}
	return pid;
}

int sanity_wait(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		ASSERT_MSG(errno == EINTR, "waitpid failed: %s", strerror(errno));
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

void sanity_expect_child_passed(pid_t pid, const char *what)
{
	int status = sanity_wait(pid);

	if (status == TEST_EXIT_WAIVED)
		test_waive("the child process (%s) waived", what);
	if (status > 128)
		TEST_FAIL("the child process (%s) died of signal %d (%s)", what, status - 128,
			  strsignal(status - 128));
	ASSERT_MSG(status == 0, "the child process (%s) failed with exit status %d", what, status);
}

void sanity_send(int fd, uint64_t value)
{
	ASSERT_MSG(write(fd, &value, sizeof(value)) == (ssize_t)sizeof(value),
		   "pipe write failed: %s", strerror(errno));
}

uint64_t sanity_recv(int fd)
{
	uint64_t value;
	ssize_t got;

	do
		got = read(fd, &value, sizeof(value));
	while (got < 0 && errno == EINTR);
	ASSERT_MSG(got == (ssize_t)sizeof(value),
		   "pipe read failed (%s): the other process probably failed first",
		   got < 0 ? strerror(errno) : "end of file");
	return value;
}

void sanity_send_fd(int sock, int fd, uint64_t word)
{
	char control[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &word, .iov_len = sizeof(word) };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control,
		.msg_controllen = sizeof(control),
	};
	struct cmsghdr *cmsg;

	memset(control, 0, sizeof(control));
	cmsg = CMSG_FIRSTHDR(&msg);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
	ASSERT_MSG(sendmsg(sock, &msg, 0) == (ssize_t)sizeof(word), "sendmsg(SCM_RIGHTS) failed: %s",
		   strerror(errno));
}

int sanity_recv_fd(int sock, uint64_t *word)
{
	char control[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = word, .iov_len = sizeof(*word) };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control,
		.msg_controllen = sizeof(control),
	};
	struct cmsghdr *cmsg;
	int fd;

	ASSERT_MSG(recvmsg(sock, &msg, 0) == (ssize_t)sizeof(*word),
		   "recvmsg failed (%s): the sending process probably failed first", strerror(errno));
	cmsg = CMSG_FIRSTHDR(&msg);
	ASSERT_MSG(cmsg && cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS,
		   "no file descriptor arrived over the socket");
	memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
	return fd;
}

int sanity_find_gdrdrv_fd(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *entry;
	int found = -1;

	ASSERT_MSG(dir, "cannot list /proc/self/fd: %s", strerror(errno));
	while ((entry = readdir(dir))) {
		char path[300], target[PATH_MAX];
		ssize_t len;

		if (entry->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", entry->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		if (!strcmp(target, GDRDRV_NODE)) {
			found = atoi(entry->d_name);
			break;
		}
	}
	closedir(dir);
	return found;
}

/* ---- the harness ------------------------------------------------------- */

/* Written by the test process (and its children), read by the harness. */
struct shared_result {
	int outcome;
	char message[1024];
};

static struct shared_result *shared_result;

static void report_to_harness(enum test_outcome outcome, const char *message)
{
	char *c;

	/* The first report wins: it is the root cause, later ones are consequences. */
	if (shared_result->message[0])
		return;
	shared_result->outcome = outcome;
	snprintf(shared_result->message, sizeof(shared_result->message), "%s", message);
	/* One line per test in the output: fold embedded newlines. */
	for (c = shared_result->message; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = (c[1] ? ' ' : '\0');
}

enum result_kind { RESULT_PASSED, RESULT_FAILED, RESULT_WAIVED };

struct test_result {
	const struct sanity_test *test;
	enum result_kind kind;
	double seconds;
	char message[1024];
};

static int compare_tests(const void *a, const void *b)
{
	const struct sanity_test *const *ta = a, *const *tb = b;

	return strcmp((*ta)->name, (*tb)->name);
}

static double seconds_since(struct timespec start)
{
	return time_diff_us(start, time_now()) / 1e6;
}

static void run_one(const struct sanity_test *test, unsigned int timeout_s, struct test_result *result)
{
	struct timespec start = time_now();
	bool timed_out = false;
	int status = 0;
	pid_t pid;

	memset(shared_result, 0, sizeof(*shared_result));
	result->test = test;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		result->kind = RESULT_FAILED;
		snprintf(result->message, sizeof(result->message), "fork failed: %s", strerror(errno));
		return;
	}
	if (pid == 0) {
		setpgid(0, 0);
		test_set_reporter(report_to_harness);
		test->run();
		fflush(stdout);
		_exit(TEST_EXIT_PASSED);
	}
	/* Also here, so that killpg below cannot race the child's own setpgid. */
	setpgid(pid, pid);

	for (;;) {
		pid_t done = waitpid(pid, &status, WNOHANG);

		if (done == pid)
			break;
		if (done < 0 && errno != EINTR) {
			status = -1;
			break;
		}
		if (timeout_s && seconds_since(start) > timeout_s) {
			timed_out = true;
			killpg(pid, SIGKILL);
			waitpid(pid, &status, 0);
			break;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 5 * 1000 * 1000 }, NULL);
	}
	/* Whatever the test left behind (fork children) goes with it. */
	killpg(pid, SIGKILL);
	result->seconds = seconds_since(start);

	if (timed_out) {
		result->kind = RESULT_FAILED;
		snprintf(result->message, sizeof(result->message),
			 "timed out after %u s and was killed%s%.900s", timeout_s,
			 shared_result->message[0] ? "; last report: " : "", shared_result->message);
	} else if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == TEST_EXIT_PASSED) {
		result->kind = RESULT_PASSED;
	} else if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == TEST_EXIT_WAIVED) {
		result->kind = RESULT_WAIVED;
		snprintf(result->message, sizeof(result->message), "%s",
			 shared_result->message[0] ? shared_result->message : "no reason given");
	} else {
		result->kind = RESULT_FAILED;
		if (status >= 0 && WIFSIGNALED(status))
			snprintf(result->message, sizeof(result->message), "killed by signal %d (%s)%s%.900s",
				 WTERMSIG(status), strsignal(WTERMSIG(status)),
				 shared_result->message[0] ? " after: " : "", shared_result->message);
		else if (shared_result->message[0])
			snprintf(result->message, sizeof(result->message), "%s", shared_result->message);
		else
			snprintf(result->message, sizeof(result->message), "exited with status %d",
				 status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	}
}

static void xml_escaped(FILE *out, const char *text)
{
	for (; *text; text++) {
		switch (*text) {
		case '&': fputs("&amp;", out); break;
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '"': fputs("&quot;", out); break;
		case '\'': fputs("&apos;", out); break;
		default:
			/* XML 1.0 forbids most control characters. */
			if ((unsigned char)*text < 0x20 && *text != '\t' && *text != '\n')
				fputc('?', out);
			else
				fputc(*text, out);
		}
	}
}

static int write_junit(const char *path, const struct test_result *results, size_t count,
		       size_t failed, size_t waived, double total_seconds)
{
	FILE *out = fopen(path, "w");

	if (!out) {
		fprintf(stderr, "cannot write the JUnit report %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	fprintf(out, "<testsuites tests=\"%zu\" failures=\"%zu\" skipped=\"%zu\" time=\"%.3f\">\n",
		count, failed, waived, total_seconds);
	fprintf(out, "  <testsuite name=\"gdrcopy_sanity\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\" time=\"%.3f\">\n",
		count, failed, waived, total_seconds);
	for (size_t i = 0; i < count; i++) {
		const struct test_result *r = &results[i];

		fprintf(out, "    <testcase classname=\"gdrcopy_sanity\" name=\"");
		xml_escaped(out, r->test->name);
		fprintf(out, "\" time=\"%.3f\"", r->seconds);
		if (r->kind == RESULT_PASSED) {
			fprintf(out, "/>\n");
			continue;
		}
		fprintf(out, ">\n      <%s message=\"", r->kind == RESULT_FAILED ? "failure" : "skipped");
		xml_escaped(out, r->message);
		fprintf(out, "\"/>\n    </testcase>\n");
	}
	fprintf(out, "  </testsuite>\n</testsuites>\n");
	if (fclose(out)) {
		fprintf(stderr, "cannot write the JUnit report %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Print the GPU list from a child: CUDA must not be initialised in the harness, or fork children could not use it. */
static int show_gpus(void)
{
	pid_t pid;
	int status;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int count = gpu_print_list();

		if (count < 0)
			_exit(1);
		if (sanity_gpu_id < 0 || sanity_gpu_id >= count) {
			fprintf(stderr, "GPU %d does not exist (found %d); pick one with -d\n",
				sanity_gpu_id, count);
			_exit(1);
		}
		printf("selecting device %d\n", sanity_gpu_id);
		fflush(stdout);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/*
 * -a gdr_alloc_mapped: can this process allocate that way at all?  Asked in a
 * child (CUDA must stay uninitialised here).  0 yes, 2 not here (the line
 * printed says why), 1 an error.
 */
static int check_alloc_mapped(void)
{
	pid_t pid;
	int status;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		struct gpu_mem mem;
		char why[512];
		gdr_t g;

		gpu_init(sanity_gpu_id, false, false, NULL);
		g = gdr_open();
		if (!g) {
			printf("-a gdr_alloc_mapped: gdr_open() with GDRCOPY_BACKEND=%s failed (%s): no vulkan backend here (GDRCOPY_ENABLE_LOGGING=1 says why); nothing to test\n",
			       getenv("GDRCOPY_BACKEND"), strerror(errno));
			fflush(stdout);
			_exit(TEST_EXIT_WAIVED);
		}
		switch (gpu_alloc(GPU_ALLOC_GDR_MAPPED, g, &mem, GPU_ALLOC_ALIGNMENT, true, true, why, sizeof(why))) {
		case GPU_ALLOC_OK:
			break;
		case GPU_ALLOC_UNAVAILABLE:
			printf("-a gdr_alloc_mapped: %s; nothing to test\n", why);
			fflush(stdout);
			_exit(TEST_EXIT_WAIVED);
		case GPU_ALLOC_ERROR:
			printf("-a gdr_alloc_mapped: %s\n", why);
			fflush(stdout);
			_exit(TEST_EXIT_FAILED);
		}
		if (gpu_free(&mem, why, sizeof(why))) {
			printf("-a gdr_alloc_mapped: %s\n", why);
			fflush(stdout);
			_exit(TEST_EXIT_FAILED);
		}
		gdr_close(g);
		_exit(TEST_EXIT_PASSED);
	}
	if (waitpid(pid, &status, 0) < 0)
		return 1;
	if (WIFEXITED(status) && WEXITSTATUS(status) == TEST_EXIT_WAIVED)
		return 2;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

static void usage(FILE *out, const char *prog)
{
	fprintf(out,
		"Usage: %s [options]\n"
		"Functional tests of libgdrapi with gdrdrv (or dma-buf mmap) on a GPU.\n"
		"\n"
		"  -h, --help          this text\n"
		"  -v                  verbose: print each test as it runs and its debug output\n"
		"  -s                  do not print the summary\n"
		"  -l                  list the tests and exit\n"
		"  -t <test>           run only this test (repeatable; default: all)\n"
		"  -d <gpu>            GPU to use (default 0)\n"
		"  -e                  also run the extended tests (may crash a buggy driver)\n"
		"  -a <allocator>      GPU memory for the tests: default (each test's own: cuMemAlloc,\n"
		"                      or cuMemCreate for *_vmmalloc) or gdr_alloc_mapped (libgdrapi's\n"
		"                      vulkan backend, which pins that and cuMemCreate memory; sets\n"
		"                      GDRCOPY_BACKEND=vulkan unless it is set) in place of\n"
		"                      cuMemAlloc; *_vmmalloc keep their cuMemCreate memory (with a\n"
		"                      POSIX fd handle).  Tests that need cuMemAlloc memory or gdrdrv\n"
		"                      waive.  Exits 2 when gdr_alloc_mapped is not usable here.\n"
		"  --junit <file>      also write a JUnit XML report to <file>\n"
		"  --timeout <s>       fail a test that runs longer than <s> seconds (default %d, 0: none)\n"
		"\n"
		"Exit status: 0 when no test failed, 1 otherwise (2: the -a allocator cannot be used\n"
		"here, with one line saying why).  Waived tests say why.\n",
		prog, DEFAULT_TIMEOUT_S);
}

/* What the command line asks for. */
struct options {
	bool list, summary, extended;
	unsigned int timeout_s;
	const char *junit_path;
	char **requested;	/* -t names, in the order given */
	size_t n_requested;
};

/* Where main goes on after parse_options() and friends: on, or exit with a status. */
#define CONTINUE (-1)

static int parse_alloc_option(const char *arg)
{
	enum gpu_alloc_kind kind;

	if (!strcmp(arg, "default")) {
		sanity_alloc_mapped = false;
		return CONTINUE;
	}
	if (parse_gpu_alloc_kind(arg, &kind)) {
		fprintf(stderr, "-a %s: expected default or gdr_alloc_mapped\n", arg);
		return 1;
	}
	if (kind != GPU_ALLOC_GDR_MAPPED) {
		fprintf(stderr, "-a %s: the tests choose cuMemAlloc/cuMemCreate themselves (*_cumemalloc, *_vmmalloc); -a takes default or gdr_alloc_mapped\n",
			arg);
		return 1;
	}
	sanity_alloc_mapped = true;
	return CONTINUE;
}

/* Reads the options into @o (and the harness's globals): CONTINUE, or the exit status. */
static int parse_options(int argc, char *argv[], struct options *o)
{
	static const struct option long_options[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "junit", required_argument, NULL, 'J' },
		{ "timeout", required_argument, NULL, 'T' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, status;

	while ((opt = getopt_long(argc, argv, "hvslt:d:ea:", long_options, NULL)) != -1) {
		char *end;

		switch (opt) {
		case 'h':
			usage(stdout, argv[0]);
			return 0;
		case 'v':
			test_verbose = 1;
			break;
		case 's':
			o->summary = false;
			break;
		case 'l':
			o->list = true;
			break;
		case 't':
			o->requested[o->n_requested++] = optarg;
			break;
		case 'd':
			sanity_gpu_id = (int)strtol(optarg, &end, 0);
			if (*end || sanity_gpu_id < 0) {
				fprintf(stderr, "-d wants a GPU number, not '%s'\n", optarg);
				return 1;
			}
			break;
		case 'e':
			o->extended = true;
			break;
		case 'a':
			status = parse_alloc_option(optarg);
			if (status != CONTINUE)
				return status;
			break;
		case 'J':
			o->junit_path = optarg;
			break;
		case 'T':
			o->timeout_s = (unsigned int)strtoul(optarg, &end, 0);
			if (*end) {
				fprintf(stderr, "--timeout wants seconds, not '%s'\n", optarg);
				return 1;
			}
			break;
		default:
			usage(stderr, argv[0]);
			return 1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "unexpected argument '%s'\n", argv[optind]);
		usage(stderr, argv[0]);
		return 1;
	}
	return CONTINUE;
}

/*
 * The tests to run, in name order, into @selected: the -t ones (even if
 * extended), else all but the extended ones unless -e.  CONTINUE, or 1 for
 * a name that is no test.
 */
static int select_tests(const struct sanity_test **all, size_t n_all, const struct options *o,
			const char *prog, const struct sanity_test **selected, size_t *n_selected)
{
	*n_selected = 0;
	if (!o->n_requested) {
		for (size_t i = 0; i < n_all; i++)
			if (o->extended || !all[i]->extended)
				selected[(*n_selected)++] = all[i];
		return CONTINUE;
	}
	for (size_t i = 0; i < n_all; i++)
		for (size_t r = 0; r < o->n_requested; r++)
			if (o->requested[r] && !strcmp(o->requested[r], all[i]->name)) {
				selected[(*n_selected)++] = all[i];
				break;
			}
	for (size_t r = 0; r < o->n_requested; r++) {
		bool known = false;

		for (size_t i = 0; i < n_all; i++)
			known = known || !strcmp(o->requested[r], all[i]->name);
		if (!known) {
			fprintf(stderr, "unknown test '%s'; %s -l lists them\n", o->requested[r], prog);
			return 1;
		}
	}
	return CONTINUE;
}

/* The result page, a usable GPU and, for -a gdr_alloc_mapped, that allocator: CONTINUE, or the exit status. */
static int prepare_run(void)
{
	shared_result = mmap(NULL, sizeof(*shared_result), PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared_result == MAP_FAILED) {
		fprintf(stderr, "mmap of the result page failed: %s\n", strerror(errno));
		return 1;
	}

	if (show_gpus()) {
		fprintf(stderr, "no usable CUDA GPU %d: every test would fail; check the GPU driver "
			"(and -d)\n", sanity_gpu_id);
		return 1;
	}

	if (sanity_alloc_mapped) {
		int usable;

		/* The vulkan backend is the one that allocates; gdr_open() takes it only when asked. */
		setenv("GDRCOPY_BACKEND", "vulkan", 0);
		printf("allocator: gdr_alloc_mapped (GDRCOPY_BACKEND=%s)\n", getenv("GDRCOPY_BACKEND"));
		usable = check_alloc_mapped();
		if (usable) {
			fflush(stdout);
			return usable;
		}
	}
	return CONTINUE;
}

struct tally {
	size_t passed, failed, waived;
};

/* Runs the selected tests in turn, one line for each that did not pass. */
static void run_tests(const struct sanity_test **selected, size_t n_selected, unsigned int timeout_s,
		      struct test_result *results, struct tally *tally)
{
	for (size_t i = 0; i < n_selected; i++) {
		struct test_result *r = &results[i];

		if (test_verbose)
			printf("&&&& RUNNING %s\n", selected[i]->name);
		run_one(selected[i], timeout_s, r);
		switch (r->kind) {
		case RESULT_PASSED:
			tally->passed++;
			if (test_verbose)
				printf("&&&& PASSED %s\n", r->test->name);
			break;
		case RESULT_WAIVED:
			tally->waived++;
			if (test_verbose)
				printf("&&&& WAIVED %s\n", r->test->name);
			printf("waived: %s: %s\n", r->test->name, r->message);
			break;
		case RESULT_FAILED:
			tally->failed++;
			if (test_verbose)
				printf("&&&& FAILED %s\n", r->test->name);
			printf("failed: %s: %s\n", r->test->name, r->message);
			break;
		}
		fflush(stdout);
	}
}

/* The summary (unless -s) and the JUnit report (--junit); the exit status. */
static int report(const struct options *o, const struct test_result *results, size_t n_selected,
		  const struct tally *tally, double seconds)
{
	if (o->summary) {
		printf("\nTotal: %zu, Passed: %zu, Failed: %zu, Waived: %zu\n", n_selected,
		       tally->passed, tally->failed, tally->waived);
		printf("\nList of failed tests:\n");
		for (size_t i = 0; i < n_selected; i++)
			if (results[i].kind == RESULT_FAILED)
				printf("    %s\n", results[i].test->name);
		printf("\nList of waived tests:\n");
		for (size_t i = 0; i < n_selected; i++)
			if (results[i].kind == RESULT_WAIVED)
				printf("    %s\n", results[i].test->name);
	}
	if (o->junit_path &&
	    write_junit(o->junit_path, results, n_selected, tally->failed, tally->waived, seconds))
		return 1;
	return tally->failed ? 1 : 0;
}

int main(int argc, char *argv[])
{
	size_t n_all = (size_t)(__stop_sanity_tests - __start_sanity_tests), n_selected;
	struct options o = { .summary = true, .timeout_s = DEFAULT_TIMEOUT_S };
	const struct sanity_test **all, **selected;
	struct test_result *results;
	struct tally tally = { 0 };
	struct timespec start;
	int status;

	all = calloc(n_all, sizeof(*all));
	selected = calloc(n_all, sizeof(*selected));
	o.requested = calloc((size_t)argc, sizeof(*o.requested));
	results = calloc(n_all, sizeof(*results));
	if (!all || !selected || !o.requested || !results) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	memcpy(all, __start_sanity_tests, n_all * sizeof(*all));
	qsort(all, n_all, sizeof(*all), compare_tests);

	status = parse_options(argc, argv, &o);
	if (status != CONTINUE)
		return status;
	if (o.list) {
		for (size_t i = 0; i < n_all; i++)
			printf("%s%s\n", all[i]->name, all[i]->extended ? " (extended: -e)" : "");
		return 0;
	}
	status = select_tests(all, n_all, &o, argv[0], selected, &n_selected);
	if (status == CONTINUE)
		status = prepare_run();
	if (status != CONTINUE)
		return status;

	start = time_now();
	run_tests(selected, n_selected, o.timeout_s, results, &tally);
	return report(&o, results, n_selected, &tally, seconds_since(start));
}
