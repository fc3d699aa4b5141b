// SPDX-License-Identifier: MIT
/*
 * gdrdrv_sectest - TAP tests of what keeps tenants of a shared node apart:
 * P2P tokens (another process's GPU memory), the per-file and per-user pin
 * and byte budgets (charged before the NVIDIA driver is asked, and not
 * multiplied by the uids of a user namespace), memory cgroup charging of
 * pins, access after execve(), and x86 PAT reservations (released with the
 * pin; never WC over RAM).
 * Same harness and options as gdrdrv_ktest; run by run_ktests.sh -p.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ktest.h"

#define GDRDRV_PARAMS "/sys/module/gdrdrv/parameters/"
#define EXEC_PROBE_ENV "GDRDRV_SECTEST_EXEC_PROBE"

static void read_line(const char *path, char *buf, size_t len)
{
	FILE *fp = fopen(path, "r");

	KT_ASSERT(fp, "open %s: %s", path, strerror(errno));
	if (!fgets(buf, (int)len, fp))
		buf[0] = 0;
	fclose(fp);
	buf[strcspn(buf, "\n")] = 0;
}

/* Whether /proc/driver/gdrdrv/params has the line @want. */
static bool params_has(const char *want)
{
	char line[160];
	bool found = false;
	FILE *fp = fopen("/proc/driver/gdrdrv/params", "r");

	KT_ASSERT(fp, "open params: %s", strerror(errno));
	while (!found && fgets(line, sizeof(line), fp))
		found = !strcmp(line, want);
	fclose(fp);
	return found;
}

static void wait_child_ok(pid_t pid)
{
	int status;

	KT_ASSERT(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		kt_fail_child(status);
}

/*
 * Process A registers GPU memory (its space has P2P tokens); process B pins
 * A's address with A's tokens.  NVIDIA's driver (and softgpu, which copies
 * it) resolves tokens in any process, so gdrdrv must refuse them.
 */
static void test_tokens_of_another_process(void)
{
	int to_b[2], to_a[2];
	struct { uint64_t va, token; uint32_t va_space; } a_info;
	uint64_t h;
	char c = 0;
	pid_t a;
	int gd, err;

	KT_ASSERT(!pipe(to_b) && !pipe(to_a), "pipe");
	a = fork();
	KT_ASSERT(a >= 0, "fork");
	if (a == 0) {
		int sg = sg_open();
		struct softgpu_info si = sg_info(sg);
		uint32_t secret[16];
		unsigned int i;

		for (i = 0; i < 16; i++)
			secret[i] = 0x5ec2e700u + i;
		a_info.va = sg_alloc(sg, KT_GPU_PAGE);
		sg_write(sg, a_info.va, secret, sizeof(secret));
		a_info.token = si.p2p_token;
		a_info.va_space = si.va_space;
		if (write(to_b[1], &a_info, sizeof(a_info)) != sizeof(a_info))
			_exit(2);
		(void)read(to_a[0], &c, 1);	/* alive until B is done */
		_exit(0);
	}
	KT_ASSERT(read(to_b[0], &a_info, sizeof(a_info)) == sizeof(a_info), "A did not start");
	gd = gd_open();
	err = gd_pin_tokens(gd, a_info.va, KT_GPU_PAGE, a_info.token, a_info.va_space, &h);
	if (!err) {
		uint32_t *map = gd_map(gd, h, KT_GPU_PAGE, &err);

		kt_note("B pinned A's memory: handle %#llx, mapped %s, first word %#x",
			(unsigned long long)h, map ? "yes" : "no", map ? map[0] : 0);
		if (map)
			munmap(map, KT_GPU_PAGE);
		gd_unpin(gd, h);
	}
	(void)write(to_a[1], &c, 1);
	wait_child_ok(a);
	KT_ASSERT(err != 0, "process B pinned process A's GPU memory with A's P2P token");
	KT_EXPECT_ERR(err, kt_env.persistent ? EINVAL : EPERM);
	/* One's own tokens too: the driver cannot tell whose they are. */
	{
		int sg = sg_open();
		struct softgpu_info si = sg_info(sg);
		uint64_t va = sg_alloc(sg, KT_GPU_PAGE);

		KT_EXPECT_ERR(gd_pin_tokens(gd, va, KT_GPU_PAGE, si.p2p_token, si.va_space, &h),
			      kt_env.persistent ? EINVAL : EPERM);
		KT_EXPECT_OK(gd_pin_tokens(gd, va, KT_GPU_PAGE, 0, 0, &h));
		KT_EXPECT_OK(gd_unpin(gd, h));
	}
	KT_ASSERT(params_has("P2P tokens allowed: no\n"),
		  "/proc/driver/gdrdrv/params lacks \"P2P tokens allowed: no\" (default off)");
}

/* Pins @n times on @gd, each must pass. */
static void pin_n(int gd, uint64_t va, unsigned int n, uint64_t *handles)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		int err = gd_pin(gd, va, KT_GPU_PAGE, 0, &handles[i]);

		if (err)
			KT_FAIL("pin %u of %u: %s", i + 1, n, kt_errname(err));
	}
}

/* A pin refused by a budget: its errno, and the NVIDIA driver never asked. */
static void expect_refused(int gd, uint64_t va, uint64_t size, int want)
{
	uint64_t calls = sg_stats().get_pages_calls, h;

	KT_EXPECT_ERR(gd_pin(gd, va, size, 0, &h), want);
	KT_ASSERT(sg_stats().get_pages_calls == calls,
		  "a pin refused with %s still called nvidia_p2p_get_pages (%llu calls, %llu before): the budget must be charged before the NVIDIA driver is asked",
		  kt_errname(want), (unsigned long long)sg_stats().get_pages_calls,
		  (unsigned long long)calls);
}

static void test_pin_limits(void)
{
	char old_file[32], old_user[32];
	pid_t pid;
	int status;

	KT_ASSERT(params_has("max_pins_per_file: 65536\n"),
		  "/proc/driver/gdrdrv/params lacks \"max_pins_per_file: 65536\"");
	KT_ASSERT(params_has("max_pins_per_user: 262144\n"),
		  "/proc/driver/gdrdrv/params lacks \"max_pins_per_user: 262144\"");
	read_line(GDRDRV_PARAMS "max_pins_per_file", old_file, sizeof(old_file));
	read_line(GDRDRV_PARAMS "max_pins_per_user", old_user, sizeof(old_user));
	KT_EXPECT_OK(kt_write_file(GDRDRV_PARAMS "max_pins_per_file", "8"));
	KT_EXPECT_OK(kt_write_file(GDRDRV_PARAMS "max_pins_per_user", "12"));
	pid = fork();
	KT_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		int sg = sg_open(), gd1 = gd_open(), gd2 = gd_open();
		uint64_t va = sg_alloc(sg, KT_GPU_PAGE), h[16], extra;
		unsigned int i;

		KT_ASSERT(params_has("max_pins_per_file: 8\n"), "params do not show the new limit");
		pin_n(gd1, va, 8, h);
		expect_refused(gd1, va, KT_GPU_PAGE, ENOSPC);
		pin_n(gd2, va, 4, h + 8);
		expect_refused(gd2, va, KT_GPU_PAGE, EDQUOT);
		/* An unpin gives the pin back to the file and the user. */
		KT_EXPECT_OK(gd_unpin(gd1, h[0]));
		KT_EXPECT_OK(gd_pin(gd2, va, KT_GPU_PAGE, 0, &extra));
		KT_EXPECT_ERR(gd_pin(gd1, va, KT_GPU_PAGE, 0, &extra), EDQUOT);
		/* Closing a file gives all of its pins back. */
		close(gd1);
		pin_n(gd2, va, 3, h);
		for (i = 0; i < 3; i++)
			KT_EXPECT_OK(gd_unpin(gd2, h[i]));
		_exit(0);
	}
	waitpid(pid, &status, 0);
	kt_write_file(GDRDRV_PARAMS "max_pins_per_file", old_file);
	kt_write_file(GDRDRV_PARAMS "max_pins_per_user", old_user);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		kt_fail_child(status);
}

/* The four budget parameters, to put them back after a test. */
struct budgets { char pins_file[32], pins_user[32], bytes_file[32], bytes_user[32]; };

/* A parameter's value, or "" where this gdrdrv has no such parameter. */
static void read_param(const char *name, char *buf, size_t len)
{
	char path[128];

	snprintf(path, sizeof(path), GDRDRV_PARAMS "%s", name);
	buf[0] = 0;
	if (!access(path, F_OK))
		read_line(path, buf, len);
}

static void budgets_save(struct budgets *b)
{
	read_param("max_pins_per_file", b->pins_file, sizeof(b->pins_file));
	read_param("max_pins_per_user", b->pins_user, sizeof(b->pins_user));
	read_param("max_pinned_bytes_per_file", b->bytes_file, sizeof(b->bytes_file));
	read_param("max_pinned_bytes_per_user", b->bytes_user, sizeof(b->bytes_user));
}

/* Sets the budgets that are not NULL. */
static void budgets_set(const char *pins_file, const char *pins_user, const char *bytes_file,
			const char *bytes_user)
{
	const char *names[] = { "max_pins_per_file", "max_pins_per_user",
				"max_pinned_bytes_per_file", "max_pinned_bytes_per_user" };
	const char *values[] = { pins_file, pins_user, bytes_file, bytes_user };
	char path[128];
	unsigned int i;

	for (i = 0; i < 4; i++) {
		if (!values[i])
			continue;
		snprintf(path, sizeof(path), GDRDRV_PARAMS "%s", names[i]);
		KT_EXPECT_OK(kt_write_file(path, values[i]));
	}
}

static void budgets_restore(const struct budgets *b)
{
	if (b->pins_file[0])
		kt_write_file(GDRDRV_PARAMS "max_pins_per_file", b->pins_file);
	if (b->pins_user[0])
		kt_write_file(GDRDRV_PARAMS "max_pins_per_user", b->pins_user);
	if (b->bytes_file[0])
		kt_write_file(GDRDRV_PARAMS "max_pinned_bytes_per_file", b->bytes_file);
	if (b->bytes_user[0])
		kt_write_file(GDRDRV_PARAMS "max_pinned_bytes_per_user", b->bytes_user);
}

/*
 * Pinned bytes, per file (ENOSPC) and per user (EDQUOT), whatever the pin
 * count: pinning one range again costs NVIDIA's memory again, so it counts
 * again.  A refused pin never reaches the NVIDIA driver; bad arguments are
 * EINVAL before any budget is looked at.
 */
static void test_byte_budgets(void)
{
	char want[64];
	struct budgets saved;
	pid_t pid;
	int status;

	snprintf(want, sizeof(want), "max_pinned_bytes_per_file: %llu\n", 2ULL << 40);
	KT_ASSERT(params_has(want), "/proc/driver/gdrdrv/params lacks \"%.*s\"",
		  (int)strlen(want) - 1, want);
	snprintf(want, sizeof(want), "max_pinned_bytes_per_user: %llu\n", 4ULL << 40);
	KT_ASSERT(params_has(want), "/proc/driver/gdrdrv/params lacks \"%.*s\"",
		  (int)strlen(want) - 1, want);
	budgets_save(&saved);
	snprintf(want, sizeof(want), "%llu", (unsigned long long)(3 * KT_GPU_PAGE));
	budgets_set("0", "0", want, "327680");	/* 3 and 5 GPU pages */
	pid = fork();
	KT_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		int sg = sg_open(), gd1 = gd_open(), gd2 = gd_open();
		uint64_t va = sg_alloc(sg, 4 * KT_GPU_PAGE), h1, h2, h3, h4;

		KT_ASSERT(params_has("max_pinned_bytes_per_file: 196608\n"),
			  "params do not show the new byte budget");
		KT_EXPECT_OK(gd_pin(gd1, va, 2 * KT_GPU_PAGE, 0, &h1));
		expect_refused(gd1, va, 2 * KT_GPU_PAGE, ENOSPC);
		/* A few bytes pin a whole GPU page, and are charged as one. */
		KT_EXPECT_OK(gd_pin(gd1, va + 16, 64, 0, &h2));
		expect_refused(gd1, va, 64, ENOSPC);
		/* Bad arguments are EINVAL first, however full the file is. */
		KT_EXPECT_ERR(gd_pin(gd1, va, 0, 0, &h3), EINVAL);
		KT_EXPECT_ERR(gd_pin(gd1, va, KT_GPU_PAGE, 0x80, &h3), EINVAL);
		/* The same range again counts again, up to the user's 5 pages. */
		KT_EXPECT_OK(gd_pin(gd2, va, 2 * KT_GPU_PAGE, 0, &h3));
		expect_refused(gd2, va, KT_GPU_PAGE, EDQUOT);
		/* An unpin gives its bytes back to the file and the user. */
		KT_EXPECT_OK(gd_unpin(gd1, h1));
		KT_EXPECT_OK(gd_pin(gd2, va, KT_GPU_PAGE, 0, &h4));
		expect_refused(gd1, va, 2 * KT_GPU_PAGE, EDQUOT);
		/* Closing a file gives all of its bytes back. */
		close(gd2);
		KT_EXPECT_OK(gd_pin(gd1, va, 2 * KT_GPU_PAGE, 0, &h1));
		KT_EXPECT_OK(gd_unpin(gd1, h1));
		KT_EXPECT_OK(gd_unpin(gd1, h2));
		_exit(0);
	}
	waitpid(pid, &status, 0);
	budgets_restore(&saved);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		kt_fail_child(status);
}

#define NS_USER 1000u		/* who makes the user namespace */
#define NS_UID_BASE 200000u	/* what its uids 0..NS_UIDS-1 map to */
#define NS_UIDS 8u

/*
 * In the user namespace, as its root: a child per uid 0..NS_UIDS-1, each
 * pinning one GPU page and holding it until @hold closes.  Writes each
 * child's errno to @out; exits 0 when all reported.
 */
static void ns_pin_as_each_uid(int out, int hold)
{
	unsigned int i;

	for (i = 0; i < NS_UIDS; i++) {
		pid_t pid = fork();

		if (pid < 0)
			_exit(2);
		if (pid == 0) {
			int sg, gd, err;
			uint64_t va, h;
			char c;

			if (setresgid(0, 0, 0) || setresuid(i, i, i)) {
				err = errno;	/* counted as "other" */
				if (write(out, &err, sizeof(err)) != sizeof(err))
					_exit(4);
				_exit(3);
			}
			sg = sg_open();
			gd = gd_open();
			va = sg_alloc(sg, KT_GPU_PAGE);
			err = gd_pin(gd, va, KT_GPU_PAGE, 0, &h);
			if (write(out, &err, sizeof(err)) != sizeof(err))
				_exit(4);
			(void)read(hold, &c, 1);	/* held until the test has counted */
			_exit(0);
		}
	}
	while (wait(NULL) > 0)
		;
	_exit(0);
}

/*
 * The kernel refuses user namespaces to a chrooted process, and the test VM
 * runs its command chrooted into the root it booted.  In a private mount
 * namespace, make that root the namespace's own (as switch_root does): out
 * of the chroot to the initramfs root, move the booted root onto it, and
 * enter it.  As root, in the process about to make the user namespace.
 */
static int unchroot(void)
{
	const char *escape = "/tmp/kt-gdrdrv-unchroot";
	char cwd[256];
	int i;

	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return 10;
	if (mkdir(escape, 0700) && errno != EEXIST)
		return 11;
	if (chroot(escape))
		return 12;
	for (i = 0; i < 64; i++)
		if (chdir(".."))
			return 13;
	if (chroot(".") || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return 14;
	if (!getcwd(cwd, sizeof(cwd)) || strcmp(cwd, "/"))
		return 15;
	/* The booted root's mount point in the initramfs: gdrkit.vm's init. */
	if (chdir("/newroot") || mount(".", "/", NULL, MS_MOVE, NULL) || chroot(".") ||
	    chdir("/"))
		return 16;
	rmdir(escape);
	return 0;
}

static void write_map(pid_t pid, const char *which)
{
	char path[64], map[64];

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, which);
	snprintf(map, sizeof(map), "0 %u %u", NS_UID_BASE, NS_UIDS);
	KT_EXPECT_OK(kt_write_file(path, map));
}

/*
 * uid NS_USER makes a user namespace whose uids map to NS_UIDS other uids
 * (as a rootless container's subordinate range does) and pins once as each.
 * The pins are charged to NS_USER as well, so together they get no more
 * than NS_USER's budget: with the pin budget and with the byte budget at 4
 * pins' worth, 4 pins work and the others fail with EDQUOT.  Before the fix
 * every one of the NS_UIDS uids had a budget of its own (8 pins worked).
 */
static void test_user_namespace_shares_its_creators_budget(void)
{
	static const char *const budget_names[] = { "pins", "bytes" };
	struct budgets saved;
	unsigned int round;

	if (!access("/proc/sys/kernel/unprivileged_userns_clone", F_OK))
		KT_EXPECT_OK(kt_write_file("/proc/sys/kernel/unprivileged_userns_clone", "1"));
	budgets_save(&saved);
	for (round = 0; round < 2; round++) {
		int to_test[2], hold[2], go[2], ok = 0, quota = 0, other = 0, err;
		unsigned int i;
		pid_t pid;
		char c = 0;

		if (round == 0)
			budgets_set("0", "4", NULL, NULL);
		else
			budgets_set("0", "0", "0", "262144");	/* 4 GPU pages */
		KT_ASSERT(!pipe(to_test) && !pipe(hold) && !pipe(go), "pipe");
		pid = fork();
		KT_ASSERT(pid >= 0, "fork");
		if (pid == 0) {
			close(to_test[0]);
			close(hold[1]);
			close(go[1]);
			err = unchroot();
			if (err)
				_exit(err);
			if (setgroups(0, NULL) || setresgid(NS_USER, NS_USER, NS_USER) ||
			    setresuid(NS_USER, NS_USER, NS_USER))
				_exit(5);
			if (unshare(CLONE_NEWUSER))
				_exit(6);
			c = 'u';
			if (write(to_test[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
				_exit(7);
			ns_pin_as_each_uid(to_test[1], hold[0]);
		}
		close(to_test[1]);
		close(hold[0]);
		close(go[0]);
		if (read(to_test[0], &c, 1) != 1) {
			int status;

			budgets_restore(&saved);
			waitpid(pid, &status, 0);
			KT_FAIL("the child did not make a user namespace: exit status %d (5: dropping to uid %u, 6: unshare(CLONE_NEWUSER), 10-16: leaving the VM's chroot)",
				WIFEXITED(status) ? WEXITSTATUS(status) : -1, NS_USER);
		}
		write_map(pid, "uid_map");
		write_map(pid, "gid_map");
		KT_ASSERT(write(go[1], &c, 1) == 1, "pipe");
		for (i = 0; i < NS_UIDS; i++) {
			if (read(to_test[0], &err, sizeof(err)) != sizeof(err))
				break;
			if (!err)
				ok++;
			else if (err == EDQUOT)
				quota++;
			else
				other++;
		}
		close(hold[1]);		/* the children unpin by exiting */
		wait_child_ok(pid);
		close(to_test[0]);
		close(go[1]);
		kt_note("%s budget of 4: %d pins worked, %d EDQUOT, %d other, from %u uids of a user namespace made by uid %u",
			budget_names[round], ok, quota, other, NS_UIDS, NS_USER);
		if (ok != 4 || quota != (int)NS_UIDS - 4 || other) {
			budgets_restore(&saved);
			KT_FAIL("%s budget of 4 for uid %u: %d pins worked from the %u uids of its user namespace, %d failed with EDQUOT, %d otherwise; want 4, %u, 0",
				budget_names[round], NS_USER, ok, NS_UIDS, quota, other, NS_UIDS - 4);
		}
	}
	budgets_restore(&saved);
}

/* A memory.stat field of a cgroup, in bytes. */
static long long memcg_stat(const char *cg, const char *field)
{
	char path[256], line[160];
	size_t n = strlen(field);
	long long v = -1;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/memory.stat", cg);
	fp = fopen(path, "r");
	KT_ASSERT(fp, "open %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), fp))
		if (!strncmp(line, field, n) && line[n] == ' ')
			v = atoll(line + n + 1);
	fclose(fp);
	KT_ASSERT(v >= 0, "%s has no %s", path, field);
	return v;
}

/*
 * 4000 pins from a process in a fresh memory cgroup: gdrdrv's per-pin
 * memory must show in the cgroup's kernel memory (before the fix it went
 * unaccounted: the cgroup's slab stayed flat).
 */
static void test_pins_charged_to_memcg(void)
{
	const unsigned int n = 4000;
	const char *root = "/sys/fs/cgroup";
	char cg[128], controllers[256], path[256];
	pid_t pid;
	int status;

	snprintf(path, sizeof(path), "%s/cgroup.controllers", root);
	if (access(path, F_OK)) {
		root = "/tmp/kt-cgroup2";
		mkdir(root, 0755);
		snprintf(path, sizeof(path), "%s/cgroup.controllers", root);
		if (access(path, F_OK) && mount("cgroup2", root, "cgroup2", 0, NULL))
			kt_skip("no cgroup v2 hierarchy, and mounting one failed: %s", strerror(errno));
	}
	read_line(path, controllers, sizeof(controllers));
	if (!strstr(controllers, "memory"))
		kt_skip("the memory controller is not available (cgroup.controllers: %s)", controllers);
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", root);
	KT_EXPECT_OK(kt_write_file(path, "+memory"));
	snprintf(cg, sizeof(cg), "%s/kt-gdrdrv-%d", root, (int)getpid());
	KT_ASSERT(!mkdir(cg, 0755) || errno == EEXIST, "mkdir %s: %s", cg, strerror(errno));

	pid = fork();
	KT_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		static uint64_t handles[4000];
		long long slab0, slab1;
		int sg, gd;
		uint64_t va;

		snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
		KT_EXPECT_OK(kt_write_file(path, "0"));
		sg = sg_open();
		gd = gd_open();
		va = sg_alloc(sg, KT_GPU_PAGE);
		sleep(2);	/* memcg statistics are flushed every 2 s */
		slab0 = memcg_stat(cg, "slab");
		pin_n(gd, va, n, handles);
		sleep(3);
		slab1 = memcg_stat(cg, "slab");
		kt_note("cgroup slab %lld -> %lld bytes for %u pins (%lld per pin)", slab0, slab1,
			n, (slab1 - slab0) / n);
		KT_ASSERT(slab1 - slab0 >= (long long)n * 128,
			  "%u pins added %lld bytes of slab to the pinning process's memory cgroup; gdrdrv's per-pin memory is not charged to it",
			  n, slab1 - slab0);
		close(gd);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	rmdir(cg);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		kt_fail_child(status);
}

/* In the image that execve() started: the inherited file must refuse it. */
static int exec_probe(const char *arg)
{
	struct gdrdrv_get_info_v2 info;
	unsigned long long handle;
	int fd, err;
	void *map;

	if (sscanf(arg, "%d:%llx", &fd, &handle) != 2)
		return 3;
	err = gd_info(fd, handle, &info);
	if (err != EACCES) {
		printf("# after execve, GET_INFO on the inherited file: %s, want EACCES\n",
		       kt_errname(err));
		return 1;
	}
	map = mmap(NULL, KT_GPU_PAGE, PROT_READ, MAP_SHARED, fd, (off_t)handle * getpagesize());
	if (map != MAP_FAILED || errno != EACCES) {
		printf("# after execve, mmap of the inherited file: %s, want EACCES\n",
		       map == MAP_FAILED ? kt_errname(errno) : "mapped");
		return 1;
	}
	return 0;
}

static void test_execve_drops_access(void)
{
	pid_t pid = fork();

	KT_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		int sg = sg_open(), gd = gd_open();
		uint64_t va = sg_alloc(sg, KT_GPU_PAGE), h;
		char arg[64];

		KT_EXPECT_OK(gd_pin(gd, va, KT_GPU_PAGE, 0, &h));
		KT_ASSERT(fcntl(gd, F_SETFD, 0) == 0, "clear FD_CLOEXEC");
		snprintf(arg, sizeof(arg), "%d:%llx", gd, (unsigned long long)h);
		setenv(EXEC_PROBE_ENV, arg, 1);
		execl("/proc/self/exe", "gdrdrv_sectest", (char *)NULL);
		KT_FAIL("execve: %s", strerror(errno));
	}
	wait_child_ok(pid);
}

/* Write-combining entries in x86 PAT's memtype list; -1 if unreadable. */
static int pat_wc_entries(void)
{
	const char *path = "/sys/kernel/debug/x86/pat_memtype_list";
	char line[256];
	int n = 0;
	FILE *fp = fopen(path, "r");

	if (!fp && errno == ENOENT)
		mount("debugfs", "/sys/kernel/debug", "debugfs", 0, NULL);
	if (!fp)
		fp = fopen(path, "r");
	if (!fp)
		return -1;
	while (fgets(line, sizeof(line), fp))
		n += strstr(line, "write-combining") != NULL;
	fclose(fp);
	return n;
}

/* The WC entries PAT holds now; skips the test where there is nothing to count. */
static int pat_wc_entries_or_skip(void)
{
	int n;

	if (!(kt_env.sg_info.flags & SOFTGPU_INFO_BAR_BACKED))
		kt_skip("softgpu is RAM-backed here: no WC mapping to reserve");
	n = pat_wc_entries();
	if (n < 0)
		kt_skip("no /sys/kernel/debug/x86/pat_memtype_list (not x86, or no debugfs): %s",
			strerror(errno));
	return n;
}

/*
 * A WC mapping's memtype reservation ends with the pin (unpin, or the free
 * callback of a legacy pin), not at munmap: a process keeping dead mappings
 * must not keep PAT entries (before the fix they stayed until munmap).
 */
static void test_wc_reservation_ends_with_pin(void)
{
	int base, mapped, err, round;

	base = pat_wc_entries_or_skip();
	for (round = 0; round < 2; round++) {
		int sg = sg_open(), gd = gd_open();
		uint64_t va = sg_alloc(sg, 4 * KT_GPU_PAGE), h;
		struct gdrdrv_get_info_v2 info;
		volatile uint32_t *map;
		bool by_free = round == 1;

		if (by_free && kt_env.persistent)
			break;		/* persistent pins outlive the free */
		KT_EXPECT_OK(gd_pin(gd, va, 4 * KT_GPU_PAGE, 0, &h));
		map = gd_map(gd, h, 4 * KT_GPU_PAGE, &err);
		KT_ASSERT(map, "map: %s", kt_errname(err));
		map[0] = 1;
		KT_EXPECT_OK(gd_info(gd, h, &info));
		KT_ASSERT(info.mapping_type == GDRDRV_MR_WC, "BAR mapped with type %u, want WC",
			  info.mapping_type);
		mapped = pat_wc_entries();
		KT_ASSERT(mapped > base, "WC mapping: %d PAT WC entries, %d before", mapped, base);
		if (by_free)
			sg_free(sg, va);
		else
			KT_EXPECT_OK(gd_unpin(gd, h));
		KT_ASSERT(pat_wc_entries() == base,
			  "after %s, with the dead mapping still in place: %d PAT WC entries, %d before mapping (the reservation outlives the pin)",
			  by_free ? "the free callback" : "unpin", pat_wc_entries(), base);
		munmap((void *)map, 4 * KT_GPU_PAGE);
		KT_ASSERT(pat_wc_entries() == base, "after munmap: %d PAT WC entries, %d before",
			  pat_wc_entries(), base);
		close(gd);
		close(sg);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Mappings of one buffer held at once; each stage maps up to the next. */
#define PAT_STAGES 4
static const unsigned int pat_stage_maps[PAT_STAGES] = { 1, 256, 1024, 4096 };

/*
 * One GPU buffer pinned and mapped write-combined many times over (the pins
 * share its BAR pages, as RM's do when a range is pinned again): x86 PAT
 * must not get one memtype entry per mapping.  Every entry over a range is
 * walked, under the host-wide memtype_lock, by each reservation of that
 * range, so N mappings cost O(N^2) there and stall PAT for everyone (before
 * the fix: one entry per mapping, and a per-mmap cost growing with N).
 * Prints, per stage, the PAT WC entries and the median mmap time.
 */
static void test_pat_cost_of_many_maps_of_one_buffer(void)
{
	unsigned int total = pat_stage_maps[PAT_STAGES - 1], done = 0, stage, i;
	double median_us[PAT_STAGES], *lat;
	int entries[PAT_STAGES], base, sg, gd, err;
	uint64_t va, *handles;
	void **maps;

	base = pat_wc_entries_or_skip();
	handles = calloc(total, sizeof(*handles));
	maps = calloc(total, sizeof(*maps));
	lat = calloc(total, sizeof(*lat));
	KT_ASSERT(handles && maps && lat, "out of memory");
	sg = sg_open();
	gd = gd_open();
	va = sg_alloc(sg, KT_GPU_PAGE);
	for (stage = 0; stage < PAT_STAGES; stage++) {
		unsigned int first = done;

		for (; done < pat_stage_maps[stage]; done++) {
			double t0;

			KT_EXPECT_OK(gd_pin(gd, va, KT_GPU_PAGE, 0, &handles[done]));
			t0 = now_us();
			maps[done] = gd_map(gd, handles[done], KT_GPU_PAGE, &err);
			lat[done] = now_us() - t0;
			KT_ASSERT(maps[done], "mapping %u of the buffer: %s", done + 1,
				  kt_errname(err));
			*(volatile uint32_t *)maps[done] = done;
		}
		qsort(lat + first, done - first, sizeof(*lat), cmp_double);
		median_us[stage] = lat[first + (done - first) / 2];
		entries[stage] = pat_wc_entries() - base;
		kt_note("%u mappings of one buffer: %d PAT WC entries, median mmap %.1f us over the last %u",
			done, entries[stage], median_us[stage], done - first);
	}
	for (i = 0; i < done; i++) {
		KT_ASSERT(*(volatile uint32_t *)maps[i] == done - 1,
			  "mapping %u reads %u, want %u", i, *(volatile uint32_t *)maps[i], done - 1);
		munmap(maps[i], KT_GPU_PAGE);
		KT_EXPECT_OK(gd_unpin(gd, handles[i]));
	}
	sg_free(sg, va);
	close(gd);
	close(sg);
	KT_ASSERT(pat_wc_entries() == base, "after unpinning: %d PAT WC entries, %d before",
		  pat_wc_entries(), base);
	KT_ASSERT(entries[PAT_STAGES - 1] <= entries[0],
		  "%u mappings of one buffer hold %d PAT WC entries, 1 mapping %d: one per mapping, each reservation walking them all",
		  total, entries[PAT_STAGES - 1], entries[0]);
	/* Medians of hundreds of mmaps: a generous bound that O(N) per mmap breaks. */
	KT_ASSERT(median_us[PAT_STAGES - 1] < 4 * median_us[1] + 50,
		  "median mmap %.1f us with %u to %u mappings held, %.1f us with up to %u: the cost per mapping grows with N",
		  median_us[PAT_STAGES - 1], pat_stage_maps[PAT_STAGES - 2], total, median_us[1],
		  pat_stage_maps[1]);
}

/* Bytes x86 PAT records as write-combining (both list formats); -1 if unreadable. */
static long long pat_wc_bytes(void)
{
	FILE *fp = fopen("/sys/kernel/debug/x86/pat_memtype_list", "r");
	unsigned long long start, end;
	long long bytes = 0;
	char line[256];

	if (!fp)
		return -1;
	while (fgets(line, sizeof(line), fp)) {
		if (!strstr(line, "write-combining"))
			continue;
		if (sscanf(line, "PAT: [mem %llx-%llx]", &start, &end) == 2 ||
		    sscanf(line, "%*[^@]@ %llx-%llx", &start, &end) == 2)
			bytes += (long long)(end - start);
	}
	fclose(fp);
	return bytes;
}

/*
 * Overlapping pins of one buffer, mapped WC at once: PAT holds exactly the
 * union of the live mappings, each byte once, however they overlap and in
 * whatever order they go (before the fix: each mapping its own reservation,
 * the overlaps counted as often as they are mapped).  Every mapping shows
 * what the others wrote.
 */
static void test_pat_holds_the_union_of_overlapping_maps(void)
{
	/* Pinned ranges of an 8-page buffer, in GPU pages: first and count. */
	static const struct { unsigned int first, count; } ranges[] = {
		{ 0, 8 }, { 2, 4 }, { 1, 2 }, { 5, 3 }, { 2, 4 },
	};
	/* Union of the ranges still mapped once the first k are gone. */
	static const unsigned int union_after[] = { 8, 7, 7, 6, 4, 0 };
	enum { NR = sizeof(ranges) / sizeof(ranges[0]) };
	volatile uint32_t *maps[NR];
	uint64_t va, handles[NR];
	long long base, held;
	int sg, gd, err;
	unsigned int i, j;

	pat_wc_entries_or_skip();
	base = pat_wc_bytes();
	if (base < 0)
		kt_skip("no /sys/kernel/debug/x86/pat_memtype_list: %s", strerror(errno));
	sg = sg_open();
	gd = gd_open();
	va = sg_alloc(sg, 8 * KT_GPU_PAGE);
	for (i = 0; i < NR; i++) {
		uint64_t size = ranges[i].count * KT_GPU_PAGE;

		KT_EXPECT_OK(gd_pin(gd, va + ranges[i].first * KT_GPU_PAGE, size, 0, &handles[i]));
		maps[i] = gd_map(gd, handles[i], size, &err);
		KT_ASSERT(maps[i], "mapping pages %u+%u: %s", ranges[i].first, ranges[i].count,
			  kt_errname(err));
	}
	/* Each mapping writes the first word of its pages; all must agree. */
	for (i = 0; i < NR; i++)
		for (j = 0; j < ranges[i].count; j++)
			maps[i][j * KT_GPU_PAGE / 4] = 0x1000 * i + ranges[i].first + j;
	for (i = 0; i < NR; i++)
		for (j = 0; j < ranges[i].count; j++) {
			unsigned int page = ranges[i].first + j, last = 0;

			for (unsigned int k = 0; k < NR; k++)
				if (page >= ranges[k].first && page < ranges[k].first + ranges[k].count)
					last = k;
			KT_ASSERT(maps[i][j * KT_GPU_PAGE / 4] == 0x1000 * last + page,
				  "mapping %u, page %u reads %#x, want %#x", i, page,
				  maps[i][j * KT_GPU_PAGE / 4], 0x1000 * last + page);
		}
	for (i = 0; i <= NR; i++) {
		held = pat_wc_bytes() - base;
		kt_note("%u of %u overlapping mappings gone: PAT holds %lld KiB WC, their union %u KiB",
			i, NR, held >> 10, union_after[i] * (unsigned int)(KT_GPU_PAGE >> 10));
		KT_ASSERT(held == (long long)(union_after[i] * KT_GPU_PAGE),
			  "with %u of %u overlapping mappings gone PAT holds %lld bytes WC, want their union %llu",
			  i, NR, held, (unsigned long long)(union_after[i] * KT_GPU_PAGE));
		if (i == NR)
			break;
		/* Unpinning ends the reservation; the last one goes by munmap. */
		if (i < NR - 1)
			KT_EXPECT_OK(gd_unpin(gd, handles[i]));
		munmap((void *)maps[i], ranges[i].count * KT_GPU_PAGE);
	}
	KT_EXPECT_OK(gd_unpin(gd, handles[NR - 1]));
	sg_free(sg, va);
	close(gd);
	close(sg);
}

/*
 * x86 never maps RAM write-combined: PAT refuses the reservation
 * ("reserve_ram_pages_type failed") and the page is write-back anyway.
 * RAM-backed pins are mapped cached; WC is refused up front.
 */
static void test_no_wc_of_ram(void)
{
	struct fixture_ram { int sg, gd; uint64_t va; } f;
	struct gdrdrv_get_info_v2 info;
	uint64_t h;
	void *map;
	int err;

#if !defined(__x86_64__) && !defined(__i386__)
	kt_skip("x86 only: PAT");
#endif
	if (kt_env.sg_info.flags & SOFTGPU_INFO_BAR_BACKED)
		kt_skip("softgpu is BAR-backed here: no RAM to map");
	f.sg = sg_open();
	f.gd = gd_open();
	f.va = sg_alloc(f.sg, KT_GPU_PAGE);
	KT_EXPECT_OK(gd_pin(f.gd, f.va, KT_GPU_PAGE, 0, &h));
	KT_EXPECT_ERR(gd_req_type(f.gd, h, GDRDRV_MR_WC), EOPNOTSUPP);
	map = gd_map(f.gd, h, KT_GPU_PAGE, &err);
	KT_ASSERT(map, "map: %s", kt_errname(err));
	*(volatile uint32_t *)map = 7;
	KT_EXPECT_OK(gd_info(f.gd, h, &info));
	KT_ASSERT(info.mapping_type == GDRDRV_MR_CACHING, "RAM mapped with type %u, want CACHING",
		  info.mapping_type);
	munmap(map, KT_GPU_PAGE);
	KT_EXPECT_OK(gd_unpin(f.gd, h));
	if (kt_env.force_pcie_attr) {
		/* FORCE_PCIE asks for the BAR path; RAM still is not WC. */
		KT_EXPECT_OK(gd_pin(f.gd, f.va, KT_GPU_PAGE, GDRDRV_PIN_BUFFER_FLAG_FORCE_PCIE, &h));
		map = gd_map(f.gd, h, KT_GPU_PAGE, &err);
		KT_ASSERT(map, "map: %s", kt_errname(err));
		*(volatile uint32_t *)map = 8;
		KT_EXPECT_OK(gd_info(f.gd, h, &info));
		KT_ASSERT(info.mapping_type == GDRDRV_MR_CACHING,
			  "FORCE_PCIE pin of RAM mapped with type %u, want CACHING", info.mapping_type);
		munmap(map, KT_GPU_PAGE);
		KT_EXPECT_OK(gd_unpin(f.gd, h));
	}
}

static long gdrdrv_refcnt(void)
{
	char line[32];

	read_line("/sys/module/gdrdrv/refcnt", line, sizeof(line));
	return atol(line);
}

/*
 * nvidia_p2p_put_pages() failed on a legacy pin: the pin stands and its free
 * callback can still come, with gdrdrv's region as its argument.  The region
 * and the module must stay until then (before the fix the region was freed
 * and the callback wrote into freed memory).
 */
static void test_failed_put_pages_keeps_the_region(void)
{
	long refcnt0 = gdrdrv_refcnt();
	char old_user[32];
	int sg, gd, err;
	uint64_t va, va2, h;

	if (kt_env.persistent)
		kt_skip("persistent pins have no free callback");
	sg = sg_open();
	gd = gd_open();
	va = sg_alloc(sg, KT_GPU_PAGE);
	KT_EXPECT_OK(gd_pin(gd, va, KT_GPU_PAGE, 0, &h));
	knob_set("fail_put_nth", "1");
	KT_EXPECT_OK(gd_unpin(gd, h));	/* the handle is gone either way */
	close(gd);
	KT_ASSERT(sg_stats().active_pins == 1, "the failed put released the pin");
	KT_ASSERT(gdrdrv_refcnt() == refcnt0 + 1,
		  "gdrdrv refcnt %ld after a failed put_pages with its callback armed, want %ld (a module reference until the callback)",
		  gdrdrv_refcnt(), refcnt0 + 1);
	/* The pin stands: it stays charged to its user until the callback. */
	read_line(GDRDRV_PARAMS "max_pins_per_user", old_user, sizeof(old_user));
	KT_EXPECT_OK(kt_write_file(GDRDRV_PARAMS "max_pins_per_user", "1"));
	gd = gd_open();
	va2 = sg_alloc(sg, KT_GPU_PAGE);
	err = gd_pin(gd, va2, KT_GPU_PAGE, 0, &h);
	sg_free(sg, va);	/* the callback comes now */
	KT_ASSERT(sg_stats().active_pins == (err ? 0 : 1), "the callback did not release the pin");
	KT_ASSERT(gdrdrv_refcnt() == refcnt0 + 1, "gdrdrv refcnt %ld after the callback, want %ld (the new file)",
		  gdrdrv_refcnt(), refcnt0 + 1);
	if (!err)
		gd_unpin(gd, h);
	else
		KT_EXPECT_OK(gd_pin(gd, va2, KT_GPU_PAGE, 0, &h));	/* given back */
	kt_write_file(GDRDRV_PARAMS "max_pins_per_user", old_user);
	KT_ASSERT(err == EDQUOT,
		  "with the failed pin still standing and max_pins_per_user=1, another pin by the same user got %s, want EDQUOT: the standing pin was no longer charged",
		  kt_errname(err));
	close(gd);
	close(sg);
}

#define T(name) { #name, test_##name, true }

static const struct kt_test tests[] = {
	T(tokens_of_another_process),
	T(pin_limits),
	T(byte_budgets),
	T(user_namespace_shares_its_creators_budget),
	T(pins_charged_to_memcg),
	T(execve_drops_access),
	T(wc_reservation_ends_with_pin),
	T(pat_cost_of_many_maps_of_one_buffer),
	T(pat_holds_the_union_of_overlapping_maps),
	T(no_wc_of_ram),
	T(failed_put_pages_keeps_the_region),
};

int main(int argc, char **argv)
{
	const char *probe = getenv(EXEC_PROBE_ENV);

	if (probe)
		return exec_probe(probe);
	return kt_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
