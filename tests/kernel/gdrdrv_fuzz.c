// SPDX-License-Identifier: MIT
/*
 * gdrdrv_fuzz - a seeded, structured fuzzer of /dev/gdrdrv's ioctls and
 * mappings, run as root in a test VM with softgpu and gdrdrv loaded.
 *
 * Each seed runs in a worker process: THREADS threads draw operations from
 * per-thread generators seeded from SEED and execute them on shared state
 * (softgpu allocations, pins on three /dev/gdrdrv files, mappings in a
 * reserved address arena).  The operations: every gdrdrv ioctl with valid
 * and invalid arguments (through the 64-bit entry and, on x86-64, through
 * the 32-bit compat entry with int $0x80), unknown commands and wrong magic,
 * mmap with random offsets, sizes, protections and flags, partial munmap,
 * mremap, mprotect, madvise, accesses through the mappings, softgpu frees
 * under live pins and mappings, fork children that touch the mappings and
 * the inherited files, files passed to another process over a unix socket,
 * and files closed and opened again.
 *
 * Every operation's parameters are drawn before it runs and recorded, so a
 * run can be replayed from its log.  A seed fails on a broken invariant (an
 * errno the ABI does not allow, a pin without a valid handle, a mapping that
 * reads another allocation's bytes or survives an unpin), a new WARNING,
 * BUG, oops or PAT complaint in the kernel log, a crash or hang, or P2P pins
 * or GPU memory left behind.  Then the supervisor replays shorter and
 * shorter parts of the log in fresh workers (delta debugging: a suffix
 * window first, then complements of chunks) until it finds the shortest
 * sequence that still fails the same way, and prints it with the seed.
 *
 * The last line is "N passed, N failed", counted per seed.
 */
#include "fuzz.h"

struct shared *shm;
static size_t shm_size;

/* ---- options ------------------------------------------------------------- */

struct options opt = {
	.seed = 1, .seeds = 1, .calls = 10000, .threads = 1, .time_cap = 0,
	.shrink_s = 120, .repeat = 1,
};

int sup_kmsg = -1;

/* ---- main ------------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gdrdrv_fuzz [-s SEED] [-k SEEDS] [-n OPS] [-t THREADS] [-T SECONDS]\n"
		"                   [-S SECONDS] [-R FILE [-r REPEAT]] [-C] [-v]\n"
		"  -s SEED     first seed (default 1); seeds SEED..SEED+SEEDS-1 run in turn\n"
		"  -k SEEDS    how many seeds (default 1)\n"
		"  -n OPS      operations per seed (default 10000)\n"
		"  -t THREADS  threads sharing the files, pins and mappings (1-%d, default 1)\n"
		"  -T SECONDS  stop after this long in all (0: no cap); a cut seed is judged on what ran\n"
		"  -S SECONDS  time to spend shrinking a failure (default 120)\n"
		"  -R FILE     replay the ops of the 'R' lines in FILE (printed on a failure),\n"
		"              each thread running its own ops in order, REPEAT times over\n"
		"  -C          no 32-bit compat ioctls (int $0x80)\n"
		"  -v          print every seed's op counts\n"
		"Run as root in a test VM with softgpu and gdrdrv loaded.  Prints 'ok'/'not ok'\n"
		"per seed, then 'N passed, N failed'; exits 1 if a seed failed.\n", MAX_THREADS);
}

static size_t load_replay(const char *path)
{
	FILE *f = fopen(path, "re");
	char line[1024];
	size_t n = 0;

	if (!f) {
		fprintf(stderr, "gdrdrv_fuzz: %s: %s\n", path, strerror(errno));
		exit(2);
	}
	while (fgets(line, sizeof(line), f) && n < shm->cap) {
		char *r = strstr(line, "| R ");
		unsigned int thread, type, a, b;
		unsigned long long x, y, z;

		if (!r || sscanf(r + 4, "%u %u %x %x %llx %llx %llx", &thread, &type, &a, &b,
				 &x, &y, &z) != 7 || type >= OP_COUNT)
			continue;
		shm->log[n] = (struct op){ .seq = n, .thread = thread, .type = type, .a = a,
					   .b = b, .x = x, .y = y, .z = z, .res = RES_NOT_RUN };
		if (thread + 1 > opt.threads)
			opt.threads = thread + 1;
		n++;
	}
	fclose(f);
	return n;
}

static void print_env(void)
{
	struct softgpu_info info = { 0 };
	struct gdrdrv_get_attr attr = { .attr = GDRDRV_ATTR_USE_PERSISTENT_MAPPING };
	int sg = open(SOFTGPU_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	int gd = open("/dev/gdrdrv", O_RDWR | O_CLOEXEC);
	bool compat;

	if (sg < 0 || ioctl(sg, SOFTGPU_IOC_GET_INFO, &info)) {
		printf("gdrdrv_fuzz: cannot use %s (%s): load softgpu first\n", SOFTGPU_DEVICE_PATH,
		       strerror(errno));
		exit(2);
	}
	if (gd < 0 || ioctl(gd, GDRDRV_IOC_GET_ATTR, &attr)) {
		printf("gdrdrv_fuzz: cannot use /dev/gdrdrv (%s): load gdrdrv first\n", strerror(errno));
		exit(2);
	}
	install_fault_handler();
	compat = probe_int80();
	printf("# softgpu: %s, %s; gdrdrv: %s pins\n", info.name,
	       info.flags & SOFTGPU_INFO_BAR_BACKED ? "BAR (write-combined)" : "RAM",
	       attr.val ? "persistent" : "legacy (callback)");
	if (sizeof(void *) == 4)
		printf("# 32-bit build: every ioctl goes through the kernel's compat entry\n");
	else
		printf("# 32-bit compat ioctls: %s\n", compat ?
		       "through int $0x80 (compat_sys_ioctl, the driver's compat_ioctl)" :
		       opt.no_compat ? "off (-C)" : HAVE_INT80 ?
		       "unavailable (int $0x80 does not work: ia32 emulation off?)" :
		       "not on this architecture");
	close(sg);
	close(gd);
}

/* What the seeds (or the replay) came to: the verdict lines' counts and the work done. */
struct tally {
	unsigned int passed, failed;
	uint64_t ops, calls;
};

/* The options into opt: -1 to go on, else the exit status (-h, or a usage error). */
static int parse_options(int argc, char **argv)
{
	int c;

	while ((c = getopt(argc, argv, "s:k:n:t:T:S:R:r:Cvh")) != -1) {
		switch (c) {
		case 's': opt.seed = strtoull(optarg, NULL, 0); break;
		case 'k': opt.seeds = strtoul(optarg, NULL, 0); break;
		case 'n': opt.calls = strtoull(optarg, NULL, 0); break;
		case 't': opt.threads = strtoul(optarg, NULL, 0); break;
		case 'T': opt.time_cap = strtod(optarg, NULL); break;
		case 'S': opt.shrink_s = strtod(optarg, NULL); break;
		case 'R': opt.replay_file = optarg; break;
		case 'r': opt.repeat = strtoul(optarg, NULL, 0); break;
		case 'C': opt.no_compat = true; break;
		case 'v': opt.verbose = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!opt.threads || opt.threads > MAX_THREADS || !opt.calls || !opt.seeds ||
	    opt.calls > (1U << 26)) {
		usage(stderr);
		return 2;
	}
	return -1;
}

/* The log the workers write and the supervisor reads (shared, so it outlives a crashed worker). */
static bool map_shared_log(void)
{
	uint64_t max_ops = opt.replay_file ? 1U << 20 : opt.calls;

	shm_size = sizeof(*shm) + max_ops * sizeof(struct op);
	shm = mmap(NULL, shm_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED) {
		perror("mmap");
		return false;
	}
	shm->cap = max_ops;
	return true;
}

/* -R: the file's ops, each thread its own in order, opt.repeat times over. */
static void run_replay(size_t replay_n, struct tally *t)
{
	struct verdict v;

	printf("# replaying %zu op(s) from %s with %u thread(s)\n", replay_n, opt.replay_file,
	       opt.threads);
	if (!opt.repeat)
		opt.repeat = 1;
	shm->nlog = replay_n;
	shm->repeat = opt.repeat;
	run_worker(opt.seed, opt.threads, true, 0, &v);
	for (size_t i = 0; i < replay_n && replay_n <= 200; i++)
		print_op(&shm->log[i], "#   ");
	if (v.kind == F_NONE) {
		printf("ok 1 - replay of %s\n", opt.replay_file);
		t->passed++;
		return;
	}
	/* The file's ops again (the run wrote its results over them). */
	shm->nlog = load_replay(opt.replay_file);
	report_failure(opt.seed, opt.threads, &v, true);
	printf("not ok 1 - replay of %s\n", opt.replay_file);
	t->failed++;
}

/* Seeds opt.seed.. in turn until they are done, the time cap (deadline, 0: none) or a fatal failure. */
static void run_seeds(double deadline, struct tally *t)
{
	printf("# gdrdrv_fuzz: seeds %llu..%llu, %llu ops each, %u thread(s)%s\n",
	       (unsigned long long)opt.seed, (unsigned long long)(opt.seed + opt.seeds - 1),
	       (unsigned long long)opt.calls, opt.threads,
	       opt.time_cap > 0 ? ", time cap set" : "");
	for (unsigned int i = 0; i < opt.seeds; i++) {
		uint64_t seed = opt.seed + i;
		double t0 = now_s();
		struct verdict v;

		if (deadline && t0 >= deadline) {
			printf("# time cap reached: seeds from %llu not run\n", (unsigned long long)seed);
			break;
		}
		printf("# seed %llu\n", (unsigned long long)seed);
		shm->exit_dirty = seed % 4 == 3;
		run_worker(seed, opt.threads, false, deadline, &v);
		t->ops += shm->nlog;
		t->calls += shm->calls;
		printf("# seed %llu: %u ops, %llu system calls, %.1f s%s\n", (unsigned long long)seed,
		       shm->nlog, (unsigned long long)shm->calls, now_s() - t0,
		       shm->exit_dirty ? " (exits without cleaning up)" : "");
		if (opt.verbose || v.kind != F_NONE)
			print_counts();
		if (v.kind == F_NONE) {
			printf("ok %u - seed %llu\n", i + 1, (unsigned long long)seed);
			t->passed++;
			continue;
		}
		report_failure(seed, opt.threads, &v, false);
		printf("not ok %u - seed %llu: %s\n", i + 1, (unsigned long long)seed, fail_names[v.kind]);
		t->failed++;
		if (v.fatal) {
			printf("# stopping: the kernel is not to be trusted after a fatal error\n");
			break;
		}
	}
}

/* The closing lines (the totals after seeds, then "N passed, N failed") and the exit status. */
static int report(const struct tally *t, double start)
{
	if (!opt.replay_file)
		printf("# total: %llu ops, %llu system calls, %.1f s\n", (unsigned long long)t->ops,
		       (unsigned long long)t->calls, now_s() - start);
	printf("%u passed, %u failed\n", t->passed, t->failed);
	return t->failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct tally tally = { 0 };
	double start = now_s();
	size_t replay_n = 0;
	int status = parse_options(argc, argv);

	if (status >= 0)
		return status;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!map_shared_log())
		return 2;
	sup_kmsg = kmsg_open();
	if (opt.replay_file)
		replay_n = load_replay(opt.replay_file);
	print_env();
	if (sup_kmsg < 0)
		printf("# /dev/kmsg unreadable: the kernel log is left to the VM runner\n");
	if (opt.replay_file)
		run_replay(replay_n, &tally);
	else
		run_seeds(opt.time_cap > 0 ? start + opt.time_cap : 0, &tally);
	return report(&tally, start);
}
