// SPDX-License-Identifier: MIT
/*
 * gdrdrv_fuzz: the executor.  Draws operations from each thread's
 * generator (or replays a log), runs them, and sets up and tears down the
 * worker process that runs one seed.
 */
#include "fuzz.h"

const char *const op_names[OP_COUNT] = {
	"alloc", "free", "verify", "pin", "unpin", "info", "attr", "reqtype",
	"version", "badioctl", "mmap", "munmap", "mremap", "mprotect",
	"madvise", "probe", "procmem", "msync", "fileops", "fork", "fdpass",
	"reopen",
};

/* Relative frequencies (per mille, roughly). */
static const unsigned int op_weights[OP_COUNT] = {
	[OP_ALLOC] = 50, [OP_FREE] = 30, [OP_VERIFY] = 10, [OP_PIN] = 100,
	[OP_UNPIN] = 60, [OP_INFO] = 60, [OP_ATTR] = 10, [OP_REQTYPE] = 30,
	[OP_VERSION] = 10, [OP_BADIOCTL] = 40, [OP_MMAP] = 100,
	[OP_MUNMAP] = 50, [OP_MREMAP] = 25, [OP_MPROTECT] = 25,
	[OP_MADVISE] = 30, [OP_PROBE] = 150, [OP_PROCMEM] = 10, [OP_MSYNC] = 8,
	[OP_FILEOPS] = 8, [OP_FORK] = 3, [OP_FDPASS] = 2, [OP_REOPEN] = 5,
};

/* ---- running operations ------------------------------------------------------- */

static void run_op(struct thr *t, struct op *op)
{
	t->op = op;
	op->res = RES_NOT_RUN;
	switch (op->type) {
	case OP_ALLOC: op_alloc(t, op); break;
	case OP_FREE: op_free(t, op); break;
	case OP_VERIFY: op_verify(t, op); break;
	case OP_PIN: op_pin(t, op); break;
	case OP_UNPIN: op_unpin(t, op); break;
	case OP_INFO: op_info(t, op); break;
	case OP_ATTR: op_attr(t, op); break;
	case OP_REQTYPE: op_reqtype(t, op); break;
	case OP_VERSION: op_version(t, op); break;
	case OP_BADIOCTL: op_badioctl(t, op); break;
	case OP_MMAP: op_mmap(t, op); break;
	case OP_MUNMAP: op_munmap(t, op); break;
	case OP_MREMAP: op_mremap(t, op); break;
	case OP_MPROTECT: op_mprotect(t, op); break;
	case OP_MADVISE: op_madvise(t, op); break;
	case OP_PROBE: op_probe(t, op); break;
	case OP_PROCMEM: op_procmem(t, op); break;
	case OP_MSYNC: op_msync(t, op); break;
	case OP_FILEOPS: op_fileops(t, op); break;
	case OP_FORK: op_fork(t, op); break;
	case OP_FDPASS: op_fdpass(t, op); break;
	case OP_REOPEN: op_reopen(t, op); break;
	default: op->res = RES_SKIPPED; break;
	}
	__atomic_fetch_add(&shm->done[op->type % OP_COUNT], 1, __ATOMIC_RELAXED);
	if (op->res == 0)
		__atomic_fetch_add(&shm->ok[op->type % OP_COUNT], 1, __ATOMIC_RELAXED);
	else if (op->res == RES_SKIPPED)
		__atomic_fetch_add(&shm->skipped[op->type % OP_COUNT], 1, __ATOMIC_RELAXED);
	t->op = NULL;
}

static void gen_op(struct thr *t, struct op *op, uint32_t seq)
{
	static unsigned int total;
	unsigned int pick;
	int type = 0;

	if (!total)
		for (int i = 0; i < OP_COUNT; i++)
			total += op_weights[i];
	pick = splitmix(&t->rng) % total;
	while (pick >= op_weights[type])
		pick -= op_weights[type++];
	*op = (struct op){
		.seq = seq, .thread = t->id, .type = type,
		.a = (uint32_t)splitmix(&t->rng), .b = (uint32_t)splitmix(&t->rng),
		.x = splitmix(&t->rng), .y = splitmix(&t->rng), .z = splitmix(&t->rng),
		.res = RES_NOT_RUN,
	};
}

double worker_deadline;

static void *thread_main(void *arg)
{
	struct thr *t = arg;
	char line[512];

	for (size_t i = 0, pass = 0; !shm->stop; i++) {
		struct op *op;

		if (t->replay) {
			if (i >= t->nreplay) {
				if (++pass >= shm->repeat || !t->nreplay)
					break;
				i = 0;
			}
			op = &shm->log[t->replay[i]];
		} else {
			uint32_t idx;

			if (worker_deadline && now_s() > worker_deadline)
				break;
			idx = __atomic_fetch_add(&shm->nlog, 1, __ATOMIC_SEQ_CST);
			if (idx >= shm->cap)
				break;
			op = &shm->log[idx];
			gen_op(t, op, idx);
		}
		run_op(t, op);
		if (kmsg_scan(t->kmsg, line, sizeof(line), NULL))
			fail(t, F_KERNEL, 0, "kernel log: %s", line);
	}
	return NULL;
}

/* ---- the worker process --------------------------------------------------------- */

static void setup_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

void setup_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(shm->fail.msg, sizeof(shm->fail.msg), fmt, ap);
	va_end(ap);
	shm->fail.seq = -1;
	shm->fail.kind = F_SETUP;
	_exit(3);
}

static void world_setup(void)
{
	struct gdrdrv_get_attr attr;

	memset(&w, 0, sizeof(w));
	pthread_mutex_init(&w.lock, NULL);
	w.page = sysconf(_SC_PAGESIZE);
	install_fault_handler();
	w.sg = open(SOFTGPU_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (w.sg < 0 || ioctl(w.sg, SOFTGPU_IOC_GET_INFO, &w.sgi))
		setup_fail("cannot use %s: %s", SOFTGPU_DEVICE_PATH, strerror(errno));
	w.cacheable = w.sgi.flags & SOFTGPU_INFO_CPU_CACHEABLE;
	for (int i = 0; i < N_FD; i++) {
		pthread_rwlock_init(&w.fds[i].lock, NULL);
		w.fds[i].fd = open("/dev/gdrdrv", O_RDWR | O_CLOEXEC);
		if (w.fds[i].fd < 0)
			setup_fail("cannot open /dev/gdrdrv: %s", strerror(errno));
	}
	attr = (struct gdrdrv_get_attr){ .attr = GDRDRV_ATTR_USE_PERSISTENT_MAPPING };
	if (ioctl(w.fds[0].fd, GDRDRV_IOC_GET_ATTR, &attr))
		setup_fail("GET_ATTR: %s", strerror(errno));
	w.persistent = attr.val;
	attr = (struct gdrdrv_get_attr){ .attr = GDRDRV_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE };
	if (ioctl(w.fds[0].fd, GDRDRV_IOC_GET_ATTR, &attr))
		setup_fail("GET_ATTR: %s", strerror(errno));
	w.force_pcie = attr.val;
	w.tokens_allowed = gdrdrv_tokens_allowed();
	w.int80 = probe_int80();
	w.arena = mmap(NULL, N_MAP * SLOT_SIZE, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (w.arena == MAP_FAILED)
		setup_fail("cannot reserve the arena: %s", strerror(errno));
	for (int i = 0; i < N_MAP; i++)
		pthread_mutex_init(&w.maps[i].mu, NULL);
	w.tag_used[CHILD_TAG / 8] |= 1 << (CHILD_TAG % 8);
	procmem_fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
}

static void thr_setup(struct thr *t, int id, uint64_t seed)
{
	int low_flags = MAP_PRIVATE | MAP_ANONYMOUS;

#ifdef MAP_32BIT
	low_flags |= MAP_32BIT;
#endif
	memset(t, 0, sizeof(*t));
	t->id = id;
	t->rng = seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL * (id + 1);
	t->buf = malloc(MAX_ALLOC_SIZE);
	t->low = mmap(NULL, 3 * w.page, PROT_READ | PROT_WRITE, low_flags, -1, 0);
	t->rep = mmap(NULL, sizeof(*t->rep), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		      -1, 0);
	if (!t->buf || t->low == MAP_FAILED || t->rep == MAP_FAILED)
		setup_fail("out of memory");
	if ((uintptr_t)t->low + 3 * w.page > (1ULL << 32))
		w.int80 = false;	/* no memory below 4 GiB for compat arguments */
	mprotect(t->low + w.page, w.page, PROT_READ);
	mprotect(t->low + 2 * w.page, w.page, PROT_NONE);
	t->kmsg = kmsg_open();
}

/* Unmaps, unpins, frees and closes everything, checking as it goes. */
static void world_teardown(struct thr *t)
{
	for (int i = 0; i < N_MAP; i++)
		if (w.maps[i].active)
			slot_reset(t, i);
	for (int i = 0; i < N_PIN; i++) {
		struct pin *p = &w.pins[i];

		if (p->state == P_LIVE && !p->orphan) {
			struct gdrdrv_unpin_buffer u = { .handle = p->handle };
			int err = ioctl(w.fds[p->fd].fd, GDRDRV_IOC_UNPIN_BUFFER, &u) ? errno : 0;

			EXPECT(t, !err, C_UNPIN_LIVE, "UNPIN at the end: %s", errname(err));
			p->state = P_GONE;
		}
	}
	for (int i = 0; i < N_ALLOC; i++) {
		if (w.allocs[i].state == A_LIVE) {
			struct softgpu_free f = { .va = w.allocs[i].va };
			int err = sg_call(SOFTGPU_IOC_FREE, &f);

			EXPECT(t, !err, C_SG, "SOFTGPU_IOC_FREE at the end: %s", errname(err));
		}
	}
	for (int i = 0; i < N_FD; i++)
		close(w.fds[i].fd);
	close(w.sg);
}

static struct thr threads[MAX_THREADS];

void worker(uint64_t seed, unsigned int nthreads, bool replay)
{
	static uint32_t *lists[MAX_THREADS];
	struct thr *t0 = &threads[0];
	char line[512];

	world_setup();
	for (unsigned int i = 0; i < nthreads; i++)
		thr_setup(&threads[i], i, seed);
	if (replay) {
		for (unsigned int i = 0; i < nthreads; i++) {
			lists[i] = calloc(shm->nlog + 1, sizeof(uint32_t));
			if (!lists[i])
				setup_fail("out of memory");
		}
		for (uint32_t i = 0; i < shm->nlog; i++) {
			struct thr *t = &threads[shm->log[i].thread % nthreads];

			lists[t->id][t->nreplay++] = i;
		}
		for (unsigned int i = 0; i < nthreads; i++)
			threads[i].replay = lists[i];
	}
	for (unsigned int i = 1; i < nthreads; i++)
		if (pthread_create(&threads[i].pt, NULL, thread_main, &threads[i]))
			setup_fail("pthread_create: %s", strerror(errno));
	thread_main(t0);
	for (unsigned int i = 1; i < nthreads; i++)
		pthread_join(threads[i].pt, NULL);
	if (shm->nlog > shm->cap)
		shm->nlog = shm->cap;
	if (!shm->exit_dirty && shm->fail.kind == F_NONE)
		world_teardown(t0);
	if (kmsg_scan(t0->kmsg, line, sizeof(line), NULL))
		fail(t0, F_KERNEL, 0, "kernel log: %s", line);
	_exit(0);
}

