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
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../include/uapi/gdrdrv.h"
#include "../softgpu/include/softgpu_uapi.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif
#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

#define GPU_PAGE ((uint64_t)GDRDRV_GPU_PAGE_SIZE)
#define MAX_THREADS 8
#define N_FD 3			/* /dev/gdrdrv files shared by the threads */
#define N_ALLOC 1024		/* allocation records, reused oldest first */
#define MAX_LIVE_ALLOCS 24
#define N_PIN 64
#define N_MAP 16		/* mapping slots in the arena */
#define SLOT_SIZE (8UL << 20)
#define MAX_ALLOC_SIZE (4UL << 20)
#define N_STALE 16		/* unpinned handles remembered per file */
#define CHILD_TAG 0xfffeU	/* what fork children fill their GPU memory with */
#define MAX_TAG 0xfff0U
#define ABSURD_HANDLE (1ULL << 40)	/* no file ever hands out that many pages */
#define CHILD_TIMEOUT_S 30

/* ---- the operation log -------------------------------------------------- */

enum op_type {
	OP_ALLOC, OP_FREE, OP_VERIFY, OP_PIN, OP_UNPIN, OP_INFO, OP_ATTR,
	OP_REQTYPE, OP_VERSION, OP_BADIOCTL, OP_MMAP, OP_MUNMAP, OP_MREMAP,
	OP_MPROTECT, OP_MADVISE, OP_PROBE, OP_PROCMEM, OP_MSYNC, OP_FILEOPS,
	OP_FORK, OP_FDPASS, OP_REOPEN, OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
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

/*
 * One operation: everything random about it is drawn into a, b, x, y, z
 * before it runs; which pin or mapping it acts on is chosen from the state
 * at run time by those numbers, so a shortened log still runs.
 */
struct op {
	uint32_t seq;		/* order in which the generators drew it */
	uint8_t thread;
	uint8_t type;
	uint16_t pad;
	uint32_t a, b;
	uint64_t x, y, z;
	int32_t res;		/* 0, an errno, or one of RES_* */
	uint32_t info;		/* a handle, a signal, a value: for the log */
};

#define RES_NOT_RUN (-1)
#define RES_SKIPPED (-2)	/* nothing to act on */

/* ---- what a worker reports to the supervisor ------------------------------- */

enum fail_kind {
	F_NONE, F_INVARIANT, F_DATA, F_KERNEL, F_CRASH, F_HANG, F_LEAK,
	F_CHILD, F_SETUP,
};

static const char *const fail_names[] = {
	"none", "invariant", "data", "kernel log", "crash", "hang", "leak",
	"child", "setup",
};

struct failure {
	int kind;
	int sub;		/* which check (for matching a replay) */
	int32_t seq;		/* the op being run, -1 if unknown */
	int thread;
	char msg[768];
};

struct shared {
	volatile int stop;
	int exit_dirty;		/* the worker exits with everything still open */
	uint32_t nlog;		/* ops recorded (generation) */
	uint32_t cap;		/* room in log[] */
	uint32_t nthreads;
	uint32_t repeat;	/* replays run their ops this many times over */
	struct failure fail;
	uint64_t done[OP_COUNT];
	uint64_t ok[OP_COUNT];
	uint64_t skipped[OP_COUNT];
	uint64_t calls;
	struct op log[];
};

static struct shared *shm;
static size_t shm_size;

/* Counts one system call on a device, a mapping or a process. */
#define CALL() __atomic_fetch_add(&shm->calls, 1, __ATOMIC_RELAXED)

/* ---- options ------------------------------------------------------------- */

static struct {
	uint64_t seed;
	unsigned int seeds;
	uint64_t calls;
	unsigned int threads;
	double time_cap;
	double shrink_s;
	bool verbose;
	const char *replay_file;
	unsigned int repeat;
	bool no_compat;
} opt = {
	.seed = 1, .seeds = 1, .calls = 10000, .threads = 1, .time_cap = 0,
	.shrink_s = 120, .repeat = 1,
};

/* ---- small helpers -------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

const char *kt_errno_symbol(int err);	/* ktest.c: the shared errno table */

static const char *errname(int err)
{
	static __thread char buf[16];
	const char *symbol = kt_errno_symbol(err);

	if (symbol)
		return symbol;
	switch (err) {
	case 0: return "ok";
	case RES_NOT_RUN: return "not run";
	case RES_SKIPPED: return "skipped";
	case 524: return "ENOTSUPP";
	default:
		snprintf(buf, sizeof(buf), "errno %d", err);
		return buf;
	}
}

static int sys_err(long r)
{
	return r < 0 ? errno : 0;
}

/* ---- faults: a thread-safe probe -------------------------------------------- */

/*
 * One SIGSEGV/SIGBUS handler for the process; each thread arms its own jump
 * buffer around one access.  A fault in a thread that is not probing is a
 * crash, as without the handler.
 */
static __thread sigjmp_buf probe_jmp;
static __thread volatile sig_atomic_t probe_armed;

static void fault_handler(int sig)
{
	if (!probe_armed) {
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	probe_armed = 0;
	siglongjmp(probe_jmp, sig);
}

static void install_fault_handler(void)
{
	struct sigaction sa = { .sa_handler = fault_handler, .sa_flags = SA_NODEFER };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);
}

/* 0 if the 32-bit access worked, else the signal it raised. */
static int try_access(volatile void *addr, bool write, uint32_t *value)
{
	int sig = sigsetjmp(probe_jmp, 1);

	if (sig)
		return sig;
	probe_armed = 1;
	if (write)
		*(volatile uint32_t *)addr = *value;
	else
		*value = *(volatile uint32_t *)addr;
	probe_armed = 0;
	return 0;
}

/* ---- the 32-bit compat entry ------------------------------------------------ */

/*
 * A 64-bit process reaches the kernel's 32-bit system call table through
 * int $0x80: compat_sys_ioctl(), then the driver's ->compat_ioctl, exactly
 * as a 32-bit program would.  Arguments must lie below 4 GiB.
 */
#if defined(__x86_64__)
#define HAVE_INT80 1
#define IA32_NR_ioctl 54
#define IA32_NR_getpid 20

static long int80_3(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("int $0x80"
			 : "=a"(ret)
			 : "0"(nr), "b"(a), "c"(b), "d"(c)
			 : "memory", "cc", "r8", "r9", "r10", "r11");
	return (int)ret;
}
#else
#define HAVE_INT80 0
#define IA32_NR_ioctl 0	/* never issued: probe_int80() says no compat entry */
static long int80_3(long nr, long a, long b, long c)
{
	(void)nr; (void)a; (void)b; (void)c;
	return -ENOSYS;
}
#endif

enum entry { ENTRY_NATIVE, ENTRY_COMPAT };

/* The seven commands whose number encodes a pointer size. */
static bool quirk_nr(unsigned int nr)
{
	return nr == 2 || nr == 3 || nr == 4 || nr == 5 || nr == 6 || nr == 8 || nr == 0xff;
}

static unsigned long with_size(unsigned long cmd, unsigned int size)
{
	return _IOC(_IOC_DIR(cmd), _IOC_TYPE(cmd), _IOC_NR(cmd), size);
}

/* Whether the driver must accept @cmd through @entry as a known command. */
static bool cmd_known(unsigned long cmd, enum entry entry)
{
	static const unsigned long native[] = {
		GDRDRV_IOC_PIN_BUFFER, GDRDRV_IOC_UNPIN_BUFFER, GDRDRV_IOC_GET_CB_FLAG,
		GDRDRV_IOC_GET_INFO, GDRDRV_IOC_GET_INFO_V2, GDRDRV_IOC_GET_ATTR,
		GDRDRV_IOC_PIN_BUFFER_V2, GDRDRV_IOC_REQ_MAPPING_TYPE,
		GDRDRV_IOC_GET_VERSION,
	};
	bool compat = entry == ENTRY_COMPAT || sizeof(void *) == 4;

	for (size_t i = 0; i < sizeof(native) / sizeof(native[0]); i++) {
		if (cmd == native[i])
			return true;
		/* compat_ioctl also takes the 4-byte spellings (and 32-bit
		 * processes the 8-byte ones: they reach the native switch). */
		if (compat && quirk_nr(_IOC_NR(native[i])) &&
		    (cmd == with_size(native[i], 4) || cmd == with_size(native[i], 8)))
			return true;
	}
	return false;
}

/* ---- shared state ------------------------------------------------------------ */

enum alloc_state { A_EMPTY, A_LIVE, A_FREEING, A_FREED };
enum pin_state { P_EMPTY, P_LIVE, P_UNPINNING, P_GONE };

struct alloc {
	int state;
	uint64_t va, size;
	uint16_t tag;
	uint32_t serial;
};

struct pin {
	int state;
	uint32_t serial;
	int fd;			/* slot */
	uint32_t fd_gen;
	uint64_t handle, addr, size;
	uint64_t va, len;	/* rounded out to GPU pages */
	uint64_t alloc_va, alloc_size;
	int alloc_k;		/* its allocation record, while alloc_serial matches */
	uint32_t alloc_serial;
	uint16_t tag;
	bool legacy, revoked, orphan, untracked;
	uint32_t req_type;
	uint32_t pin_seq, revoke_seq;	/* the ops that pinned and revoked it */
	int nmaps;
	int busy;		/* threads in a call that may change its mappings */
	uint32_t ver;		/* bumped by every change of its mappings */
};

struct mapping {
	pthread_mutex_t mu;	/* held across every syscall on this slot's range */
	bool dirty;		/* may hold VMAs we do not track, until the next reset */
	/* The mapping we track in the slot: */
	bool active;
	char *addr;
	size_t len;
	int pin;
	uint32_t pin_serial;
	uint64_t gpu_off;	/* offset of addr in the pinned range */
	int prot;
	bool disturbed;		/* zapped by madvise, split: reads may fault */
	uint32_t map_seq;	/* the op that mapped it */
};

struct fdslot {
	pthread_rwlock_t lock;	/* write-held while the file is replaced */
	int fd;
	uint32_t gen;
	uint64_t stale[N_STALE];
	unsigned int nstale;
};

static struct world {
	pthread_mutex_t lock;	/* guards everything below but mapping.mu */
	struct alloc allocs[N_ALLOC];
	unsigned int alloc_next, live_allocs;
	struct pin pins[N_PIN];
	struct mapping maps[N_MAP];
	struct fdslot fds[N_FD];
	uint32_t serial;
	uint16_t next_tag;
	uint8_t tag_used[65536 / 8];
	int sg;
	struct softgpu_info sgi;
	bool persistent, force_pcie, int80, cacheable;
	bool tokens_allowed;		/* gdrdrv's allow_p2p_tokens */
	char *arena;
	long page;
	bool replay;
} w;

static void lock(void) { pthread_mutex_lock(&w.lock); }
static void unlock(void) { pthread_mutex_unlock(&w.lock); }

static char *slot_base(int i)
{
	return w.arena + (size_t)i * SLOT_SIZE;
}

static bool tag_used(uint16_t tag)
{
	return tag && (w.tag_used[tag / 8] >> (tag % 8)) & 1;
}

static uint32_t pattern(uint16_t tag, uint64_t word)
{
	return (uint32_t)tag << 16 | (uint32_t)(word & 0xffff);
}

/* ---- per-thread context ------------------------------------------------------ */

struct child_report {
	int failed;
	int kind;
	char msg[512];
};

struct thr {
	int id;
	uint64_t rng;
	pthread_t pt;
	int kmsg;
	uint32_t *buf;			/* MAX_ALLOC_SIZE bytes */
	unsigned char *low;		/* 3 pages below 4 GiB: RW, RO, none */
	struct child_report *rep;	/* shared with fork children */
	struct op *op;			/* running now */
	const uint32_t *replay;		/* indices into shm->log, or NULL */
	size_t nreplay;
};

static void fail(struct thr *t, int kind, int sub, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void fail(struct thr *t, int kind, int sub, const char *fmt, ...)
{
	int none = F_NONE;
	va_list ap;

	if (__atomic_compare_exchange_n(&shm->fail.kind, &none, F_SETUP + 100,
					false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
		char *m = shm->fail.msg;
		int n;

		n = t && t->op ? snprintf(m, sizeof(shm->fail.msg), "op #%u [t%d] %s: ",
					  t->op->seq, t->id, op_names[t->op->type]) : 0;
		va_start(ap, fmt);
		vsnprintf(m + n, sizeof(shm->fail.msg) - n, fmt, ap);
		va_end(ap);
		shm->fail.sub = sub;
		shm->fail.seq = t && t->op ? (int32_t)t->op->seq : -1;
		shm->fail.thread = t ? t->id : -1;
		__atomic_store_n(&shm->fail.kind, kind, __ATOMIC_SEQ_CST);
	}
	shm->stop = 1;
}

/* An invariant of the ABI: @sub names the check for replays. */
#define EXPECT(t, cond, sub, ...)					\
	do {								\
		if (!(cond))						\
			fail(t, F_INVARIANT, sub, __VA_ARGS__);	\
	} while (0)

/* Check ids (F_INVARIANT's sub): one per kind of expectation. */
enum check {
	C_ENOTTY = 1, C_VERSION, C_ATTR, C_PIN_BAD, C_PIN_GOOD, C_PIN_INFO,
	C_HANDLE_DUP, C_STALE_HANDLE, C_UNPIN_LIVE, C_INFO_LIVE, C_INFO_TYPE,
	C_CB_FLAG, C_REQTYPE, C_EFAULT, C_MMAP_BAD, C_MMAP_GOOD, C_MUNMAP,
	C_SG, C_EACCES, C_LOST_MAPPING, C_ARENA,
};

/* ---- kernel log ----------------------------------------------------------- */

/*
 * Kernel log lines that fail a run: what the VM runner's oracle fails
 * (gdrkit/vm/klog.py), and softgpu's P2P contract reports.  PAT's
 * "reserve_ram_pages_type failed" too: gdrdrv never maps RAM WC on x86.
 */
static const char *const bad_log[] = {
	"WARNING:", "BUG:", "kernel BUG at", "Oops", "Call Trace",
	"Kernel panic", "general protection fault", "Unable to handle",
	"Bad page", "bad page", "KASAN", "UBSAN", "possible circular locking",
	"inconsistent lock state", "possible recursive locking",
	"list_del corruption", "refcount_t:", "conflicting memory types",
	"freeing invalid memtype", "map pfn expected mapping type",
	"reserve_ram_pages_type", "P2P API misuse", "never released",
	"blocked for more than", "soft lockup", "hard LOCKUP",
};

/* After these the kernel is not to be trusted for replays. */
static const char *const fatal_log[] = {
	"BUG:", "kernel BUG at", "Oops", "Kernel panic",
	"general protection fault", "Unable to handle", "soft lockup",
	"hard LOCKUP", "blocked for more than",
};

static int kmsg_open(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd >= 0)
		lseek(fd, 0, SEEK_END);
	return fd;
}

/* Reads the new records; copies the first bad one into @out.  Returns it or NULL. */
static const char *kmsg_scan(int fd, char *out, size_t len, bool *fatal)
{
	char rec[2048];
	const char *found = NULL;
	ssize_t n;

	if (fd < 0)
		return NULL;
	while ((n = read(fd, rec, sizeof(rec) - 1)) != 0) {
		if (n < 0) {
			if (errno == EPIPE)
				continue;
			break;
		}
		rec[n] = '\0';
		for (size_t i = 0; !found && i < sizeof(bad_log) / sizeof(bad_log[0]); i++) {
			char *msg;

			if (!strstr(rec, bad_log[i]))
				continue;
			msg = strchr(rec, ';');
			snprintf(out, len, "%.400s", msg ? msg + 1 : rec);
			out[strcspn(out, "\n")] = '\0';
			found = out;
			for (size_t j = 0; fatal && j < sizeof(fatal_log) / sizeof(fatal_log[0]); j++)
				if (strstr(rec, fatal_log[j]))
					*fatal = true;
		}
	}
	return found;
}

/* ---- devices ------------------------------------------------------------------ */

static int sg_ioctl(unsigned long cmd, void *arg)
{
	CALL();
	return ioctl(w.sg, cmd, arg) ? errno : 0;
}

static int sg_stats(struct softgpu_stats *st)
{
	int fd = open(SOFTGPU_DEVICE_PATH, O_RDWR | O_CLOEXEC), err = 0;

	if (fd < 0)
		return errno;
	if (ioctl(fd, SOFTGPU_IOC_GET_STATS, st))
		err = errno;
	close(fd);
	return err;
}

/*
 * ioctl through @entry.  For the compat entry the argument is copied to the
 * thread's page below 4 GiB and back; @len 0 passes @arg as it is (it must
 * then lie below 4 GiB itself).
 */
static int xioctl(struct thr *t, int fd, unsigned long cmd, void *arg, size_t len,
		  enum entry entry)
{
	void *p = arg;
	long r;

	CALL();
	if (entry == ENTRY_NATIVE || !w.int80)
		return ioctl(fd, cmd, arg) ? errno : 0;
	if (arg && len) {
		memcpy(t->low, arg, len);
		p = t->low;
	}
	r = int80_3(IA32_NR_ioctl, fd, (long)(unsigned int)cmd, (long)(uintptr_t)p);
	if (arg && len && !r)
		memcpy(arg, t->low, len);
	else if (arg && len && r == -EFAULT)
		memcpy(arg, t->low, len);
	return r < 0 ? (int)-r : 0;
}

/* The spelling of a quirk command for @entry chosen by @bits. */
static unsigned long spelled(unsigned long cmd, uint32_t bits, enum entry *entry)
{
	*entry = (bits & 7) >= 6 && w.int80 ? ENTRY_COMPAT : ENTRY_NATIVE;
	if (*entry == ENTRY_COMPAT && quirk_nr(_IOC_NR(cmd)) && (bits & 8))
		return with_size(cmd, 4);
	return cmd;
}

/* ---- picking things ----------------------------------------------------------- */

static int pick_alloc(uint32_t sel, int state)
{
	for (unsigned int i = 0; i < N_ALLOC; i++) {
		unsigned int k = (sel + i) % N_ALLOC;

		if (w.allocs[k].state == state)
			return k;
	}
	return -1;
}

/* A live, reachable pin of file slot @fd (not being unpinned). */
static int pick_pin(uint32_t sel, int fd)
{
	for (unsigned int i = 0; i < N_PIN; i++) {
		unsigned int k = (sel + i) % N_PIN;
		struct pin *p = &w.pins[k];

		if (p->state == P_LIVE && !p->orphan && p->fd == fd &&
		    p->fd_gen == w.fds[fd].gen)
			return k;
	}
	return -1;
}

/* Like pick_pin, preferring a pin with no mapping (what mmap can map). */
static int pick_unmapped_pin(uint32_t sel, int fd)
{
	for (unsigned int i = 0; i < N_PIN; i++) {
		unsigned int k = (sel + i) % N_PIN;
		struct pin *p = &w.pins[k];

		if (p->state == P_LIVE && !p->orphan && p->fd == fd &&
		    p->fd_gen == w.fds[fd].gen && !p->nmaps && !p->untracked &&
		    !p->revoked && p->addr == p->va)
			return k;
	}
	return pick_pin(sel, fd);
}

/* A handle that is not valid on file slot @fd: unpinned before, or absurd. */
static uint64_t bad_handle(uint64_t r, int fd)
{
	struct fdslot *s = &w.fds[fd];

	if ((r & 3) && s->nstale)
		return s->stale[(r >> 2) % s->nstale];
	switch ((r >> 2) & 3) {
	case 0: return ~0ULL;
	case 1: return ABSURD_HANDLE + ((r >> 8) & 0xffffff);
	case 2: return 1ULL << 32 << ((r >> 8) % 20);
	default: return (1ULL << 52) - 1;
	}
}

static void push_stale(int fd, uint64_t handle)
{
	struct fdslot *s = &w.fds[fd];

	if (s->nstale < N_STALE)
		s->stale[s->nstale++] = handle;
	else
		s->stale[handle % N_STALE] = handle;
}

/* Drops a pin record nobody needs any more. */
static void pin_maybe_release(int k)
{
	struct pin *p = &w.pins[k];

	if ((p->state == P_GONE || (p->state == P_LIVE && p->orphan)) &&
	    !p->nmaps && !p->busy)
		p->state = P_EMPTY;
}

/* The mapping in slot @i is gone (its VMA unmapped): bookkeeping only. */
static void map_forget(int i)
{
	struct mapping *m = &w.maps[i];
	struct pin *p = &w.pins[m->pin];

	if (!m->active)
		return;
	m->active = false;
	if (p->serial == m->pin_serial) {
		p->nmaps--;
		p->ver++;
		pin_maybe_release(m->pin);
	}
}

/* Puts the PROT_NONE reservation back over [addr, addr + len). */
static void arena_reserve(struct thr *t, char *addr, size_t len, bool noreplace)
{
	void *p;

	if (!len)
		return;
	p = mmap(addr, len, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
		 (noreplace ? MAP_FIXED_NOREPLACE : MAP_FIXED), -1, 0);
	if (p != addr) {
		fail(t, F_SETUP, C_ARENA, "cannot reserve the arena at %p+0x%zx again: %s",
		     (void *)addr, len, p == MAP_FAILED ? strerror(errno) : "placed elsewhere");
		if (p != MAP_FAILED)
			munmap(p, len);
	}
}

/*
 * The pin mapped in a slot, held busy across a call that may change or
 * remove its mapping: until the bookkeeping catches up, other threads must
 * not judge what the driver says about it.  Called with the slot's mutex.
 */
struct held {
	int k;
	uint32_t serial;
};

static struct held slot_hold(const struct mapping *m)
{
	struct held h = { -1, 0 };

	lock();
	if (m->active && w.pins[m->pin].serial == m->pin_serial) {
		h = (struct held){ m->pin, m->pin_serial };
		w.pins[h.k].busy++;
	}
	unlock();
	return h;
}

static void slot_unhold(struct held h)
{
	lock();
	if (h.k >= 0 && w.pins[h.k].serial == h.serial) {
		w.pins[h.k].busy--;
		w.pins[h.k].ver++;
		pin_maybe_release(h.k);
	}
	unlock();
}

/* Empties slot @i entirely (whatever is mapped in it). */
static void slot_reset(struct thr *t, int i)
{
	arena_reserve(t, slot_base(i), SLOT_SIZE, false);
	lock();
	map_forget(i);
	w.maps[i].dirty = false;
	unlock();
}

/* Tracks a new mapping in a slot (w.lock held). */
static void map_set(struct mapping *m, char *addr, size_t len, int pin, uint32_t pin_serial,
		    uint64_t gpu_off, int prot, bool disturbed, uint32_t seq)
{
	m->active = true;
	m->addr = addr;
	m->len = len;
	m->pin = pin;
	m->pin_serial = pin_serial;
	m->gpu_off = gpu_off;
	m->prot = prot;
	m->disturbed = disturbed;
	m->map_seq = seq;
}

/* ---- softgpu memory ------------------------------------------------------------ */

static uint64_t alloc_size_of(uint64_t r)
{
	unsigned int c = r % 100;

	if (c < 40)
		return GPU_PAGE;
	if (c < 85)
		return GPU_PAGE * (2 + (r >> 8) % 7);
	if (c < 97)
		return GPU_PAGE * (16 + (r >> 8) % 17);
	return MAX_ALLOC_SIZE;
}

static void fill_pattern(uint32_t *buf, uint16_t tag, uint64_t words)
{
	for (uint64_t i = 0; i < words; i++)
		buf[i] = pattern(tag, i);
}

static uint16_t new_tag(void)
{
	uint16_t tag;

	for (;;) {
		if (++w.next_tag > MAX_TAG) {
			/* Wrap: forget the tags of memory nobody can reach now. */
			w.next_tag = 1;
			memset(w.tag_used, 0, sizeof(w.tag_used));
			for (int i = 0; i < N_ALLOC; i++)
				if (w.allocs[i].state != A_EMPTY)
					w.tag_used[w.allocs[i].tag / 8] |= 1 << (w.allocs[i].tag % 8);
			w.tag_used[CHILD_TAG / 8] |= 1 << (CHILD_TAG % 8);
		}
		tag = w.next_tag;
		if (!tag_used(tag))
			break;
	}
	w.tag_used[tag / 8] |= 1 << (tag % 8);
	return tag;
}

static void op_alloc(struct thr *t, struct op *op)
{
	struct softgpu_alloc a = { .size = alloc_size_of(op->x) };
	struct softgpu_copy c;
	uint16_t tag;
	int k, err;

	if (op->a % 16 == 0)		/* sizes softgpu must refuse */
		a.size = op->a & 16 ? 0 : 1ULL << (40 + op->b % 20);
	lock();
	if (w.live_allocs >= MAX_LIVE_ALLOCS && a.size) {
		unlock();
		op->res = RES_SKIPPED;
		return;
	}
	w.live_allocs++;
	unlock();

	err = sg_ioctl(SOFTGPU_IOC_ALLOC, &a);
	op->res = err;
	if (err || a.size > MAX_ALLOC_SIZE || !a.size) {
		lock();
		w.live_allocs--;
		unlock();
		EXPECT(t, err || a.size <= MAX_ALLOC_SIZE, C_SG,
		       "softgpu allocated 0x%llx bytes", (unsigned long long)a.size);
		EXPECT(t, err == 0 || err == ENOMEM || err == EINVAL || err == ENOSPC, C_SG,
		       "SOFTGPU_IOC_ALLOC(0x%llx): %s", (unsigned long long)a.size, errname(err));
		if (!err) {	/* not ours to keep */
			struct softgpu_free f = { .va = a.va };

			sg_ioctl(SOFTGPU_IOC_FREE, &f);
		}
		return;
	}
	lock();
	tag = new_tag();
	unlock();
	fill_pattern(t->buf, tag, a.size / 4);
	c = (struct softgpu_copy){ .va = a.va, .host = (uintptr_t)t->buf, .size = a.size,
				   .direction = SOFTGPU_COPY_TO_GPU };
	err = sg_ioctl(SOFTGPU_IOC_COPY, &c);
	EXPECT(t, !err, C_SG, "filling a new allocation: %s", errname(err));

	lock();
	/* Reuse the oldest record that is free, in ring order. */
	for (k = -1; k < 0;) {
		unsigned int i = w.alloc_next++ % N_ALLOC;

		if (w.allocs[i].state == A_EMPTY || w.allocs[i].state == A_FREED)
			k = i;
	}
	w.allocs[k] = (struct alloc){ .state = A_LIVE, .va = a.va, .size = a.size,
				      .tag = tag, .serial = ++w.serial };
	unlock();
	op->info = tag;
}

static void op_free(struct thr *t, struct op *op)
{
	struct softgpu_free f;
	struct alloc *al;
	int k, err, mode = op->b % 8, n = 0;
	int held[N_PIN];
	uint32_t held_serial[N_PIN];

	if (mode == 7) {		/* never allocated, or freed already */
		lock();
		k = pick_alloc(op->a, A_FREED);
		f.va = k >= 0 && (op->x & 1) ? w.allocs[k].va : 0x1000ULL + (op->x & 0xffff0000);
		unlock();
		err = sg_ioctl(SOFTGPU_IOC_FREE, &f);
		op->res = err;
		EXPECT(t, err, C_SG, "SOFTGPU_IOC_FREE of 0x%llx (not allocated) succeeded",
		       (unsigned long long)f.va);
		return;
	}
	lock();
	k = pick_alloc(op->a, A_LIVE);
	if (k < 0) {
		unlock();
		op->res = RES_SKIPPED;
		return;
	}
	al = &w.allocs[k];
	al->state = A_FREEING;
	f.va = al->va;
	/* The pins of this memory are in flux until the free returns. */
	for (int i = 0; i < N_PIN; i++) {
		struct pin *p = &w.pins[i];

		if (p->state != P_EMPTY && p->alloc_k == k && p->alloc_serial == al->serial) {
			p->busy++;
			held[n] = i;
			held_serial[n++] = p->serial;
		}
	}
	unlock();

	err = sg_ioctl(SOFTGPU_IOC_FREE, &f);
	op->res = err;
	op->info = al->tag;
	EXPECT(t, !err, C_SG, "SOFTGPU_IOC_FREE of a live allocation: %s", errname(err));
	lock();
	al->state = err ? A_LIVE : A_FREED;
	if (!err)
		w.live_allocs--;
	for (int i = 0; i < n; i++) {
		struct pin *p = &w.pins[held[i]];

		if (p->serial != held_serial[i])
			continue;
		p->busy--;
		p->ver++;
		/* Legacy pins of freed memory are revoked: their mappings must fault. */
		if (!err && p->legacy && !p->revoked) {
			p->revoked = true;
			p->revoke_seq = op->seq;
		}
		pin_maybe_release(held[i]);
	}
	/* Pins made while we freed it (their pin call raced ours). */
	for (int i = 0; !err && i < N_PIN; i++) {
		struct pin *p = &w.pins[i];

		if (p->state != P_EMPTY && p->alloc_k == k && p->alloc_serial == al->serial &&
		    p->legacy && !p->revoked) {
			p->revoked = true;
			p->revoke_seq = op->seq;
		}
	}
	unlock();
}

/* Reads an allocation back through softgpu: nobody may have written into it. */
static void op_verify(struct thr *t, struct op *op)
{
	struct softgpu_copy c;
	uint64_t va, size;
	uint16_t tag;
	int k, err;

	lock();
	k = pick_alloc(op->a, A_LIVE);
	if (k < 0) {
		unlock();
		op->res = RES_SKIPPED;
		return;
	}
	va = w.allocs[k].va;
	size = w.allocs[k].size;
	tag = w.allocs[k].tag;
	unlock();
	c = (struct softgpu_copy){ .va = va, .host = (uintptr_t)t->buf, .size = size,
				   .direction = SOFTGPU_COPY_FROM_GPU };
	err = sg_ioctl(SOFTGPU_IOC_COPY, &c);
	op->res = err;
	if (err)
		return;		/* freed meanwhile */
	for (uint64_t i = 0; i < size / 4; i++) {
		uint32_t v = t->buf[i];

		if (v == pattern(tag, i))
			continue;
		fail(t, F_DATA, 1,
		     "allocation tag %u (va 0x%llx) holds 0x%08x at +0x%llx, not 0x%08x%s",
		     tag, (unsigned long long)va, v, (unsigned long long)i * 4, pattern(tag, i),
		     tag_used(v >> 16) && v >> 16 != tag ?
		     ": written through a stale mapping of another allocation" : "");
		return;
	}
}

/* ---- gdrdrv ioctls -------------------------------------------------------------- */

static int fd_of(uint32_t sel)
{
	return sel % N_FD;
}

/* Takes file slot @s for an ioctl or mmap; returns its generation. */
static uint32_t fd_get(int s)
{
	pthread_rwlock_rdlock(&w.fds[s].lock);
	return w.fds[s].gen;
}

static void fd_put(int s)
{
	pthread_rwlock_unlock(&w.fds[s].lock);
}

/* Checks a live handle's GET_INFO_V2 against what was pinned. */
static void check_pin_info(struct thr *t, int fd, uint64_t handle, uint64_t va,
			   uint64_t len)
{
	struct gdrdrv_get_info_v2 info = { .handle = handle };
	int err = ioctl(fd, GDRDRV_IOC_GET_INFO_V2, &info) ? errno : 0;

	EXPECT(t, !err, C_PIN_INFO, "GET_INFO_V2 of the handle 0x%llx just pinned: %s",
	       (unsigned long long)handle, errname(err));
	if (err)
		return;
	EXPECT(t, info.va == va && info.mapped_size == len &&
	       info.page_size == GDRDRV_GPU_PAGE_SIZE && info.mapping_type == GDRDRV_MR_NONE,
	       C_PIN_INFO, "GET_INFO_V2 of a new pin: va 0x%llx size 0x%llx page %u type %u, want va 0x%llx size 0x%llx page 65536 type 0",
	       (unsigned long long)info.va, (unsigned long long)info.mapped_size,
	       info.page_size, info.mapping_type, (unsigned long long)va,
	       (unsigned long long)len);
}

enum pin_mode {
	PM_WHOLE, PM_SUB, PM_UNALIGNED, PM_PAST_END, PM_FREED, PM_UNALLOCATED,
	PM_ZERO, PM_HOST,
};

static enum pin_mode pin_mode_of(uint32_t bits)
{
	static const enum pin_mode modes[16] = {
		PM_WHOLE, PM_WHOLE, PM_WHOLE, PM_WHOLE, PM_WHOLE, PM_SUB, PM_SUB,
		PM_SUB, PM_UNALIGNED, PM_UNALIGNED, PM_PAST_END, PM_FREED,
		PM_UNALLOCATED, PM_ZERO, PM_HOST, PM_SUB,
	};
	return modes[bits & 15];
}

/* Argument placements. */
enum arg_mode { ARG_OK, ARG_NULL, ARG_NONE_PAGE, ARG_STRADDLE_NONE, ARG_READONLY };

static enum arg_mode arg_mode_of(uint32_t bits)
{
	switch (bits & 15) {
	case 12: return ARG_NULL;
	case 13: return ARG_NONE_PAGE;
	case 14: return ARG_STRADDLE_NONE;
	case 15: return ARG_READONLY;
	default: return ARG_OK;
	}
}

/*
 * Places @len bytes of @arg as @mode asks, in the thread's low pages.
 * Returns the pointer to pass to ioctl (with length 0: as it is).
 */
static void *place_arg(struct thr *t, enum arg_mode mode, const void *arg, size_t len)
{
	unsigned char *rw = t->low, *ro = t->low + w.page, *none = t->low + 2 * w.page;

	switch (mode) {
	case ARG_NULL:
		return NULL;
	case ARG_NONE_PAGE:
		return none + 64;
	case ARG_STRADDLE_NONE:
		/* The struct starts readable and runs into the PROT_NONE page. */
		mprotect(ro, w.page, PROT_READ | PROT_WRITE);
		memcpy(none - len / 2, arg, len / 2);
		mprotect(ro, w.page, PROT_READ);
		return none - len / 2;
	case ARG_READONLY:
		mprotect(ro, w.page, PROT_READ | PROT_WRITE);
		memcpy(ro + 128, arg, len);
		mprotect(ro, w.page, PROT_READ);
		return ro + 128;
	default:
		memcpy(rw + 256, arg, len);
		return rw + 256;
	}
}

static void op_pin(struct thr *t, struct op *op)
{
	enum pin_mode mode = pin_mode_of(op->b);
	unsigned int kind = (op->b >> 4) & 3, fmode = (op->b >> 6) & 7;
	enum arg_mode amode = arg_mode_of(op->b >> 13);
	int s = fd_of(op->b >> 17), k, err, slot;
	uint64_t addr = 0, size = 0, handle = 0, token = 0, start, end;
	uint32_t flags = 0, pad = 0, va_space = 0, gen, alloc_serial = 0;
	struct gdrdrv_pin_buffer p1;
	struct gdrdrv_pin_buffer_v2 p2;
	struct alloc al = { 0 };
	bool valid, must_fail = false, stable;
	unsigned long cmd;
	enum entry entry;
	const char *why = "";
	void *arg;
	size_t len;

	gen = fd_get(s);
	lock();
	k = pick_alloc(op->a, mode == PM_FREED ? A_FREED : A_LIVE);
	if (k >= 0) {
		al = w.allocs[k];
		alloc_serial = al.serial;
	}
	unlock();

	switch (mode) {
	case PM_WHOLE:
		addr = al.va;
		size = al.size;
		break;
	case PM_SUB:
		if (al.size) {
			uint64_t pages = al.size / GPU_PAGE, first = op->x % pages;

			addr = al.va + first * GPU_PAGE;
			size = (1 + op->y % (pages - first)) * GPU_PAGE;
		}
		break;
	case PM_UNALIGNED:
		if (al.size) {
			uint64_t off = op->x % al.size;

			addr = al.va + off;
			size = 1 + op->y % (al.size - off);
		}
		break;
	case PM_PAST_END:
		if (al.size) {
			addr = al.va + (op->x % al.size & ~(GPU_PAGE - 1));
			size = al.va + al.size - addr + 1 + op->y % (2 * GPU_PAGE);
		}
		break;
	case PM_FREED:
		addr = al.va;
		size = al.size;
		break;
	case PM_UNALLOCATED:
		/* softgpu's addresses start at 1 TiB and grow by what was allocated. */
		addr = op->x & 1 ? (op->x % (1ULL << 40)) | 1ULL << 20 :
		       (1ULL << 56) + (op->x % (1ULL << 40));
		size = 1 + op->y % (4 * GPU_PAGE);
		break;
	case PM_ZERO:
		switch (op->x % 4) {
		case 0: addr = 0; size = GPU_PAGE; break;
		case 1: addr = al.va ? al.va : 1ULL << 40; size = 0; break;
		case 2: addr = al.va ? al.va : 1ULL << 40; size = ~0ULL - addr + 2; break;
		default: addr = ~0ULL - GPU_PAGE; size = 2 * GPU_PAGE; break;
		}
		break;
	case PM_HOST:
		addr = (uintptr_t)t->buf;
		size = GPU_PAGE;
		break;
	}
	if (!size && mode != PM_ZERO) {		/* no allocation of that kind */
		fd_put(s);
		op->res = RES_SKIPPED;
		return;
	}

	switch (fmode) {
	case 5: flags = GDRDRV_PIN_BUFFER_FLAG_FORCE_PCIE; break;
	case 6: flags = (uint32_t)op->z | 2; break;
	case 7: pad = (uint32_t)(op->z >> 32) | 1; break;
	default: break;
	}
	valid = mode == PM_WHOLE || mode == PM_SUB || mode == PM_UNALIGNED;
	if (!addr || !size || mode == PM_ZERO) {
		must_fail = true;
		why = "zero or wrapping range";
	} else if (!valid) {
		must_fail = true;
		why = "range outside the process's live GPU memory";
	}

	if (kind == 2 || kind == 3) {
		/* PIN_BUFFER: tokens, and an ignored pad. */
		if (kind == 3) {
			switch (op->z % 3) {
			case 0:
				token = w.sgi.p2p_token;
				va_space = w.sgi.va_space;
				break;
			case 1:
				token = w.sgi.p2p_token + 1 + (op->z >> 8) % 5;
				va_space = w.sgi.va_space;
				break;
			default:
				token = w.sgi.p2p_token;
				va_space = w.sgi.va_space + 1;
				break;
			}
			if (w.persistent && (token || va_space)) {
				must_fail = true;
				why = "tokens with persistent pins";
			} else if (!w.persistent && op->z % 3) {
				must_fail = true;
				why = "tokens of another space";
			} else if (!w.persistent && !w.tokens_allowed) {
				must_fail = true;
				why = "tokens while gdrdrv's allow_p2p_tokens is off";
			}
		}
		p1 = (struct gdrdrv_pin_buffer){ .addr = addr, .size = size, .p2p_token = token,
						 .va_space = va_space, .pad = (uint32_t)op->z };
		cmd = GDRDRV_IOC_PIN_BUFFER;
		arg = &p1;
		len = sizeof(p1);
	} else {
		if (pad) {
			must_fail = true;
			why = "non-zero pad";
		} else if (flags & ~GDRDRV_PIN_BUFFER_FLAGS_ALL) {
			must_fail = true;
			why = "unknown flags";
		} else if (flags && !w.persistent) {
			must_fail = true;
			why = "FORCE_PCIE with legacy pins";
		} else if (flags && !w.force_pcie) {
			must_fail = true;
			why = "FORCE_PCIE unsupported";
		}
		p2 = (struct gdrdrv_pin_buffer_v2){ .addr = addr, .size = size, .flags = flags,
						    .pad = pad };
		cmd = GDRDRV_IOC_PIN_BUFFER_V2;
		arg = &p2;
		len = sizeof(p2);
	}
	cmd = spelled(cmd, op->b >> 9, &entry);

	if (amode == ARG_OK) {
		err = xioctl(t, w.fds[s].fd, cmd, arg, len, entry);
	} else {
		void *where = place_arg(t, amode, arg, len);

		err = xioctl(t, w.fds[s].fd, cmd, where, 0, entry);
		if (!err)
			memcpy(arg, where, len);
	}
	op->res = err;
	handle = kind >= 2 ? p1.handle : p2.handle;

	lock();
	/* Did the allocation stay as it was for the whole call? */
	stable = k >= 0 && w.allocs[k].serial == alloc_serial &&
		 w.allocs[k].state == (mode == PM_FREED ? A_FREED : A_LIVE);
	unlock();

	if (amode == ARG_NULL || amode == ARG_NONE_PAGE || amode == ARG_STRADDLE_NONE) {
		EXPECT(t, err == EFAULT, C_EFAULT, "PIN with an unreadable argument: %s, want EFAULT",
		       errname(err));
	} else if (amode == ARG_READONLY) {
		/* Pinned, then the handle cannot be written back: unpinned again. */
		EXPECT(t, err != 0, C_EFAULT, "PIN with a read-only argument succeeded");
	} else if (must_fail) {
		EXPECT(t, err != 0 || (mode == PM_FREED && !stable), C_PIN_BAD,
		       "PIN %s 0x%llx+0x%llx flags 0x%x pad 0x%x (%s) succeeded",
		       kind >= 2 ? "v1" : "v2", (unsigned long long)addr,
		       (unsigned long long)size, flags, pad, why);
	} else if (stable) {
		EXPECT(t, !err, C_PIN_GOOD, "PIN %s of 0x%llx+0x%llx (live allocation 0x%llx+0x%llx) failed: %s",
		       kind >= 2 ? "v1" : "v2", (unsigned long long)addr,
		       (unsigned long long)size, (unsigned long long)al.va,
		       (unsigned long long)al.size, errname(err));
	}
	if (err || amode != ARG_OK) {
		fd_put(s);
		return;
	}

	start = addr & GDRDRV_GPU_PAGE_MASK;
	end = (addr + size + GDRDRV_GPU_PAGE_OFFSET) & GDRDRV_GPU_PAGE_MASK;
	op->info = (uint32_t)handle;
	/* Nobody else knows the handle yet: it must be valid now. */
	check_pin_info(t, w.fds[s].fd, handle, start, end - start);

	lock();
	for (int i = 0; i < N_PIN; i++) {
		struct pin *q = &w.pins[i];

		if ((q->state == P_LIVE || q->state == P_UNPINNING) && !q->orphan &&
		    q->fd == s && q->fd_gen == gen && q->handle == handle) {
			unlock();
			fail(t, F_INVARIANT, C_HANDLE_DUP,
			     "PIN returned handle 0x%llx, which is still pinned",
			     (unsigned long long)handle);
			fd_put(s);
			return;
		}
	}
	/*
	 * An allocation freed during the call may have had its address reused by
	 * a new one before the pin reached softgpu: the pin then holds either the
	 * old memory (revoked) or the new (live), and nothing here tells which.
	 * Such a pin is unpinned at once below, as one there is no room for.
	 */
	slot = -1;
	for (int i = 0; (k < 0 || stable) && i < N_PIN && slot < 0; i++)
		if (w.pins[(op->x + i) % N_PIN].state == P_EMPTY)
			slot = (op->x + i) % N_PIN;
	if (slot >= 0) {
		struct pin *q = &w.pins[slot];

		*q = (struct pin){
			.state = P_LIVE, .serial = ++w.serial, .fd = s, .fd_gen = gen,
			.handle = handle, .addr = addr, .size = size, .va = start,
			.len = end - start, .alloc_va = al.va, .alloc_size = al.size,
			.alloc_k = k, .alloc_serial = alloc_serial,
			.tag = al.tag, .legacy = !w.persistent, .pin_seq = op->seq,
		};
		/* Freed while we pinned it: the callback revoked it already. */
		if (q->legacy && k >= 0 &&
		    (w.allocs[k].state != A_LIVE || w.allocs[k].serial != alloc_serial)) {
			q->revoked = true;
			q->revoke_seq = op->seq;
		}
	}
	unlock();
	if (slot < 0) {		/* no room to track it, or it is ambiguous */
		struct gdrdrv_unpin_buffer u = { .handle = handle };

		err = ioctl(w.fds[s].fd, GDRDRV_IOC_UNPIN_BUFFER, &u) ? errno : 0;
		EXPECT(t, !err, C_UNPIN_LIVE, "UNPIN of a new pin: %s", errname(err));
		lock();
		push_stale(s, handle);
		unlock();
	}
	fd_put(s);
}

/*
 * A handle for an ioctl on file slot @s: a live pin (returns its index), or
 * (@want_bad, or none live) an invalid handle (returns -1).
 */
static int target_handle(uint32_t sel, uint64_t r, int s, bool want_bad, __u64 *handle,
			 uint32_t *serial)
{
	int k = want_bad ? -1 : pick_pin(sel, s);

	if (k >= 0) {
		*handle = w.pins[k].handle;
		*serial = w.pins[k].serial;
	} else {
		*handle = bad_handle(r, s);
	}
	return k;
}

static void op_unpin(struct thr *t, struct op *op)
{
	int s = fd_of(op->b >> 8), k, err;
	struct gdrdrv_unpin_buffer u;
	enum arg_mode amode = arg_mode_of(op->b >> 12);
	uint32_t serial = 0;
	unsigned long cmd;
	enum entry entry;

	fd_get(s);
	lock();
	k = target_handle(op->a, op->x, s, (op->b & 3) >= 2, &u.handle, &serial);
	if (k >= 0) {
		w.pins[k].state = P_UNPINNING;
		w.pins[k].busy++;
	}
	unlock();

	cmd = spelled(GDRDRV_IOC_UNPIN_BUFFER, op->b >> 2, &entry);
	if (amode == ARG_OK || amode == ARG_READONLY)
		err = xioctl(t, w.fds[s].fd, cmd, &u, sizeof(u), entry);
	else
		err = xioctl(t, w.fds[s].fd, cmd, place_arg(t, amode, &u, sizeof(u)), 0, entry);
	op->res = err;
	op->info = (uint32_t)u.handle;

	if (amode != ARG_OK && amode != ARG_READONLY)
		EXPECT(t, err == EFAULT, C_EFAULT, "UNPIN with an unreadable argument: %s",
		       errname(err));
	else if (k >= 0)
		EXPECT(t, !err, C_UNPIN_LIVE, "UNPIN of live handle 0x%llx: %s",
		       (unsigned long long)u.handle, errname(err));
	else
		EXPECT(t, err == EINVAL, C_STALE_HANDLE, "UNPIN of invalid handle 0x%llx: %s, want EINVAL",
		       (unsigned long long)u.handle, errname(err));
	lock();
	if (k >= 0) {
		struct pin *p = &w.pins[k];

		p->busy--;
		if (err) {
			p->state = P_LIVE;
		} else {
			p->state = P_GONE;
			if (!p->revoked)
				p->revoke_seq = op->seq;
			p->revoked = true;
			p->ver++;
			push_stale(s, u.handle);
			pin_maybe_release(k);
		}
	}
	unlock();
	fd_put(s);
}

/* GET_INFO, GET_INFO_V2, GET_CB_FLAG. */
static void op_info(struct thr *t, struct op *op)
{
	int s = fd_of(op->b >> 8), k, err, which = op->b % 3;
	bool bad = ((op->b >> 2) & 3) == 3;
	enum arg_mode amode = arg_mode_of(op->b >> 12);
	uint32_t serial = 0, ver = 0, sflags;
	struct pin before = { 0 };
	__u64 handle;
	union {
		struct gdrdrv_get_info v1;
		struct gdrdrv_get_info_v2 v2;
		struct gdrdrv_get_cb_flag cb;
	} a;
	static const unsigned long cmds[3] = {
		GDRDRV_IOC_GET_INFO, GDRDRV_IOC_GET_INFO_V2, GDRDRV_IOC_GET_CB_FLAG,
	};
	static const size_t lens[3] = {
		sizeof(a.v1), sizeof(a.v2), sizeof(a.cb),
	};
	unsigned long cmd;
	enum entry entry;
	bool steady;

	memset(&a, 0xa5, sizeof(a));
	fd_get(s);
	lock();
	k = target_handle(op->a, op->x, s, bad, &handle, &serial);
	if (k >= 0) {
		before = w.pins[k];
		ver = before.ver;
	}
	unlock();
	a.v1.handle = handle;	/* first in all three */

	sflags = op->b >> 4;
	cmd = spelled(cmds[which], sflags, &entry);
	if (amode == ARG_OK)
		err = xioctl(t, w.fds[s].fd, cmd, &a, lens[which], entry);
	else
		err = xioctl(t, w.fds[s].fd, cmd, place_arg(t, amode, &a, lens[which]), 0, entry);
	op->res = err;
	op->info = (uint32_t)handle;

	lock();
	/* The pin did not change while we asked (no unpin, free, map, munmap). */
	steady = k >= 0 && w.pins[k].serial == serial && w.pins[k].state == P_LIVE &&
		 w.pins[k].ver == ver && !w.pins[k].busy && before.state == P_LIVE && !before.busy;
	unlock();

	if (amode == ARG_NULL || amode == ARG_NONE_PAGE || amode == ARG_STRADDLE_NONE) {
		EXPECT(t, err == EFAULT, C_EFAULT, "%s with an unreadable argument: %s, want EFAULT",
		       which == 2 ? "GET_CB_FLAG" : "GET_INFO", errname(err));
	} else if (k < 0) {
		EXPECT(t, err == EINVAL, C_STALE_HANDLE, "%s of invalid handle 0x%llx: %s, want EINVAL",
		       which == 2 ? "GET_CB_FLAG" : which ? "GET_INFO_V2" : "GET_INFO",
		       (unsigned long long)handle, errname(err));
	} else if (amode == ARG_READONLY) {
		EXPECT(t, err == EFAULT || (!steady && err == EINVAL), C_EFAULT,
		       "GET_INFO of a live handle into read-only memory: %s", errname(err));
	} else if (steady) {
		uint32_t type = which == 1 ? a.v2.mapping_type :
				a.v1.mapped ? (a.v1.wc_mapping ? GDRDRV_MR_WC : GDRDRV_MR_CACHING) :
				GDRDRV_MR_NONE;
		bool mapped = before.nmaps > 0 && !before.revoked;

		EXPECT(t, !err, C_INFO_LIVE, "GET_%s of live handle 0x%llx: %s",
		       which == 2 ? "CB_FLAG" : "INFO", (unsigned long long)handle, errname(err));
		if (err) {
			fd_put(s);
			return;
		}
		if (which == 2) {
			/* Persistent pins have no callback; legacy ones fire on free. */
			EXPECT(t, a.cb.flag == (uint32_t)before.revoked, C_CB_FLAG,
			       "GET_CB_FLAG of a %s pin whose memory is %s: %u",
			       before.legacy ? "legacy" : "persistent",
			       before.revoked ? "freed" : "live", a.cb.flag);
			fd_put(s);
			return;
		}
		EXPECT(t, a.v1.va == before.va && a.v1.mapped_size == before.len &&
		       a.v1.page_size == GDRDRV_GPU_PAGE_SIZE, C_INFO_LIVE,
		       "GET_INFO: va 0x%llx size 0x%llx page %u, pinned va 0x%llx size 0x%llx",
		       (unsigned long long)a.v1.va, (unsigned long long)a.v1.mapped_size,
		       a.v1.page_size, (unsigned long long)before.va,
		       (unsigned long long)before.len);
		/* Whether it is mapped, when we know for sure. */
		if (!before.untracked && !before.revoked)
			EXPECT(t, mapped ? type == GDRDRV_MR_WC || type == GDRDRV_MR_CACHING :
			       type == GDRDRV_MR_NONE, C_INFO_TYPE,
			       "GET_INFO%s of a pin with %d mapping(s): type %u",
			       which == 1 ? "_V2" : "", before.nmaps, type);
		if (mapped && !before.untracked && before.req_type != GDRDRV_MR_NONE && which == 1)
			EXPECT(t, type == before.req_type, C_INFO_TYPE,
			       "mapped with type %u after REQ_MAPPING_TYPE %u", type, before.req_type);
	}
	fd_put(s);
}

static void op_attr(struct thr *t, struct op *op)
{
	struct gdrdrv_get_attr a = { .val = 0xdead };
	int s = fd_of(op->b >> 8), err;
	unsigned long cmd;
	enum entry entry;

	a.attr = op->b % 4 ? op->b % 4 : (uint32_t)op->x;
	cmd = spelled(GDRDRV_IOC_GET_ATTR, op->b >> 2, &entry);
	fd_get(s);
	err = xioctl(t, w.fds[s].fd, cmd, &a, sizeof(a), entry);
	fd_put(s);
	op->res = err;
	op->info = a.attr;
	if (a.attr == GDRDRV_ATTR_USE_PERSISTENT_MAPPING)
		EXPECT(t, !err && a.val == w.persistent, C_ATTR,
		       "GET_ATTR(USE_PERSISTENT_MAPPING): %s, val %u, want %d", errname(err),
		       a.val, w.persistent);
	else if (a.attr == GDRDRV_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE)
		EXPECT(t, !err && a.val == w.force_pcie, C_ATTR,
		       "GET_ATTR(SUPPORT_PIN_FLAG_FORCE_PCIE): %s, val %u", errname(err), a.val);
	else if (a.attr == GDRDRV_ATTR_VMA_INHERITED_ON_FORK)
		EXPECT(t, !err && a.val == 0, C_ATTR,
		       "GET_ATTR(VMA_INHERITED_ON_FORK): %s, val %u (mappings are VM_DONTCOPY)",
		       errname(err), a.val);
	else
		EXPECT(t, err == EINVAL, C_ATTR, "GET_ATTR(%u): %s, want EINVAL", a.attr,
		       errname(err));
}

static void op_version(struct thr *t, struct op *op)
{
	struct gdrdrv_get_version v = { 0 };
	int s = fd_of(op->b >> 8), err;
	unsigned long cmd;
	enum entry entry;

	cmd = spelled(GDRDRV_IOC_GET_VERSION, op->b, &entry);
	fd_get(s);
	err = xioctl(t, w.fds[s].fd, cmd, &v, sizeof(v), entry);
	fd_put(s);
	op->res = err;
	EXPECT(t, !err && v.gdrdrv_version == GDRDRV_VERSION &&
	       v.minimum_gdr_api_version == GDRDRV_MINIMUM_GDR_API_VERSION, C_VERSION,
	       "GET_VERSION: %s, 0x%x / 0x%x", errname(err), v.gdrdrv_version,
	       v.minimum_gdr_api_version);
}

static void op_reqtype(struct thr *t, struct op *op)
{
	struct gdrdrv_req_mapping_type r = { 0 };
	int s = fd_of(op->b >> 8), k, err;
	uint32_t serial = 0;
	unsigned long cmd;
	enum entry entry;

	r.mapping_type = op->b % 8 < 6 ? op->b % 8 % 4 : op->b % 8 == 6 ?
			 GDRDRV_MR_TYPE_COUNT : (uint32_t)op->x;
	fd_get(s);
	lock();
	k = target_handle(op->a, op->x, s, (op->b >> 3) % 8 == 0, &r.handle, &serial);
	if (k >= 0) {
		w.pins[k].busy++;
		w.pins[k].ver++;
	}
	unlock();
	cmd = spelled(GDRDRV_IOC_REQ_MAPPING_TYPE, op->b >> 6, &entry);
	err = xioctl(t, w.fds[s].fd, cmd, &r, sizeof(r), entry);
	op->res = err;
	op->info = r.mapping_type;
	if (r.mapping_type >= GDRDRV_MR_TYPE_COUNT)
		EXPECT(t, err == EINVAL, C_REQTYPE, "REQ_MAPPING_TYPE(%u): %s, want EINVAL",
		       r.mapping_type, errname(err));
	else if (k < 0)
		EXPECT(t, err == EINVAL, C_STALE_HANDLE, "REQ_MAPPING_TYPE of invalid handle 0x%llx: %s",
		       (unsigned long long)r.handle, errname(err));
	else
		EXPECT(t, err == 0 || err == EBUSY || err == EOPNOTSUPP || err == EINVAL,
		       C_REQTYPE, "REQ_MAPPING_TYPE(%u): %s", r.mapping_type, errname(err));
	lock();
	if (k >= 0) {
		w.pins[k].busy--;
		w.pins[k].ver++;
		if (!err && w.pins[k].serial == serial)
			w.pins[k].req_type = r.mapping_type;
	}
	unlock();
	fd_put(s);
}

/* Commands the driver must not know, and arguments it cannot read. */
static void op_badioctl(struct thr *t, struct op *op)
{
	static const unsigned long known[] = {
		GDRDRV_IOC_PIN_BUFFER, GDRDRV_IOC_UNPIN_BUFFER, GDRDRV_IOC_GET_CB_FLAG,
		GDRDRV_IOC_GET_INFO, GDRDRV_IOC_GET_INFO_V2, GDRDRV_IOC_GET_ATTR,
		GDRDRV_IOC_PIN_BUFFER_V2, GDRDRV_IOC_REQ_MAPPING_TYPE,
		GDRDRV_IOC_GET_VERSION,
	};
	/* Types the VFS answers itself for any file (FIONREAD, FIFREEZE, ...). */
	static const unsigned char vfs_types[] = { 'T', 'X', 'f', 0x94, 0x00, 0x12, 0x15 };
	int s = fd_of(op->b >> 8), err;
	unsigned long cmd;
	unsigned char buf[64];
	enum entry entry = (op->b >> 4) % 4 == 3 && w.int80 ? ENTRY_COMPAT : ENTRY_NATIVE;
	unsigned int what = op->b % 8;
	void *arg = buf;

	memset(buf, 0, sizeof(buf));
	uint64_t x = op->x, y = op->y, z = op->z;

	switch (what) {
	case 0: case 1:		/* our magic, a number nobody defined */
		do {
			cmd = _IOC(y % 4, GDRDRV_IOCTL, 9 + x % 246, z % 64);
			x = x * 31 + 7;
		} while (cmd_known(cmd, entry));
		break;
	case 2: case 3:		/* a known number, the wrong size or direction */
		do {
			unsigned long base = known[x % 9];

			cmd = y & 1 ? _IOC(z % 4, GDRDRV_IOCTL, _IOC_NR(base), _IOC_SIZE(base)) :
			      _IOC(_IOC_DIR(base), GDRDRV_IOCTL, _IOC_NR(base), z % 64);
			z = z * 31 + 1;
			y = y >> 1 | y << 63;
		} while (cmd_known(cmd, entry));
		break;
	case 4: case 5: {	/* another driver's magic */
		unsigned char type;

		do {
			type = (unsigned char)x;
			x = x * 31 + 3;
		} while (type == GDRDRV_IOCTL || memchr(vfs_types, type, sizeof(vfs_types)));
		cmd = _IOC(y % 4, type, (y >> 2) % 256, z % 64);
		break;
	}
	default: {		/* a known command whose argument cannot be read */
		enum arg_mode m = (y % 3) + ARG_NULL;

		cmd = known[x % 9];
		if (entry == ENTRY_COMPAT && quirk_nr(_IOC_NR(cmd)) && (z & 1))
			cmd = with_size(cmd, 4);
		arg = place_arg(t, m, buf, _IOC_SIZE(cmd) > 8 ? _IOC_SIZE(cmd) : 8);
		fd_get(s);
		err = xioctl(t, w.fds[s].fd, cmd, arg, 0, entry);
		fd_put(s);
		op->res = err;
		op->info = (uint32_t)cmd;
		EXPECT(t, err == EFAULT, C_EFAULT, "ioctl 0x%lx (%s entry) with an unreadable argument: %s, want EFAULT",
		       cmd, entry == ENTRY_COMPAT ? "compat" : "native", errname(err));
		return;
	}
	}
	fd_get(s);
	if (entry == ENTRY_COMPAT)
		arg = t->low + 512;
	err = xioctl(t, w.fds[s].fd, cmd, arg, 0, entry);
	fd_put(s);
	op->res = err;
	op->info = (uint32_t)cmd;
	EXPECT(t, err == ENOTTY, C_ENOTTY, "unknown ioctl 0x%lx (%s entry): %s, want ENOTTY",
	       cmd, entry == ENTRY_COMPAT ? "compat" : "native", errname(err));
}

/* ---- mappings ------------------------------------------------------------------- */

static size_t page_round(uint64_t len)
{
	return (len + w.page - 1) & ~(uint64_t)(w.page - 1);
}

static int prot_of(unsigned int bits, uint64_t r)
{
	static const int odd[] = {
		PROT_WRITE, PROT_NONE, PROT_READ | PROT_EXEC,
		PROT_READ | PROT_WRITE | PROT_EXEC,
	};

	if (bits < 5)
		return PROT_READ | PROT_WRITE;
	if (bits == 5)
		return PROT_READ;
	return odd[r % 4];
}

static void op_mmap(struct thr *t, struct op *op)
{
	static const int flag_set[16] = {
		MAP_SHARED, MAP_SHARED, MAP_SHARED, MAP_SHARED, MAP_SHARED, MAP_SHARED,
		MAP_SHARED, MAP_SHARED, MAP_SHARED, MAP_SHARED, MAP_SHARED, MAP_PRIVATE,
		MAP_SHARED_VALIDATE, MAP_SHARED | MAP_POPULATE, MAP_SHARED | MAP_LOCKED,
		MAP_SHARED_VALIDATE | MAP_SYNC,
	};
	int slot = op->a % N_MAP, s = fd_of(op->b >> 16), k = -1, target = op->b & 15;
	int flags = flag_set[(op->b >> 10) & 15], prot = prot_of((op->b >> 7) & 7, op->z), err;
	unsigned int lmode = (op->b >> 4) & 7;
	struct mapping *m = &w.maps[slot], old;
	uint64_t pgoff, delta = 0, len;
	struct pin before = { 0 };
	struct held oh;
	size_t off = 0;
	bool expect_ok = false, covers, steady;
	char *addr;
	void *p;

	if ((op->b >> 20) & 3) {
		/* Mostly into a free slot. */
		lock();
		for (int i = 0; i < N_MAP && w.maps[slot].active; i++)
			slot = (op->a + i) % N_MAP;
		unlock();
		m = &w.maps[slot];
	}
	pthread_mutex_lock(&m->mu);
	oh = slot_hold(m);
	fd_get(s);
	lock();
	if (target < 12 || target == 14)
		k = (op->b >> 22) & 3 ? pick_unmapped_pin(op->x, s) : pick_pin(op->x, s);
	if (k >= 0) {
		before = w.pins[k];
		w.pins[k].busy++;
		pgoff = before.handle;
		if (target == 14 && before.len / w.page > 1)
			delta = 1 + op->y % (before.len / w.page - 1);
		pgoff += delta;
	} else {
		pgoff = bad_handle(op->x, s);
	}
	old = *m;
	unlock();

	switch (lmode) {
	case 4: len = before.len > (uint64_t)w.page ?
		      page_round(1 + op->y % (before.len - w.page)) : (uint64_t)w.page; break;
	case 5: len = before.len + w.page; break;
	case 6: len = 2 * before.len; break;
	case 7: len = 1 + op->y % (before.len ? before.len : GPU_PAGE); break;
	default: len = before.len ? before.len : GPU_PAGE; break;
	}
	if (!len)
		len = w.page;
	if (page_round(len) > SLOT_SIZE)
		len = SLOT_SIZE;
	if (((op->b >> 14) & 3) == 3)
		off = (op->y >> 20) % ((SLOT_SIZE - page_round(len)) / w.page + 1) * w.page;
	addr = slot_base(slot) + off;
	/* A mapping the driver must give: the basic call on a live, unmapped pin. */
	expect_ok = k >= 0 && !delta && !before.revoked && before.addr == before.va &&
		    !before.nmaps && !before.untracked && !before.busy && lmode < 4 &&
		    (flags == MAP_SHARED || flags == MAP_SHARED_VALIDATE ||
		     flags == (MAP_SHARED | MAP_POPULATE)) &&
		    (prot == PROT_READ || prot == (PROT_READ | PROT_WRITE)) &&
		    /* x86 PAT gives RAM one memtype: a second WC mapping of it fails */
		    !(w.cacheable && before.req_type == GDRDRV_MR_WC) &&
		    (!old.active || (old.addr >= addr && old.addr + old.len <= addr + len)) &&
		    !old.dirty;

	p = mmap(addr, len, prot, flags | MAP_FIXED, w.fds[s].fd, (off_t)(pgoff * w.page));
	err = p == MAP_FAILED ? errno : 0;
	CALL();
	fd_put(s);
	op->res = err;
	op->info = (uint32_t)pgoff;
	if (err) {
		slot_reset(t, slot);	/* MAP_FIXED may have unmapped what was there */
	} else if (p != addr) {
		fail(t, F_INVARIANT, C_MMAP_GOOD, "MAP_FIXED mmap at %p returned %p", (void *)addr, p);
	}

	lock();
	/* Nobody else touched the pin meanwhile (and nobody is in a call on it). */
	steady = k >= 0 && w.pins[k].serial == before.serial && w.pins[k].state == P_LIVE &&
		 w.pins[k].ver == before.ver && !w.pins[k].revoked && w.pins[k].busy == 1;
	if (k >= 0)
		w.pins[k].busy--;
	if (!err && p == addr) {
		covers = !old.active || (old.addr >= addr && old.addr + old.len <= addr + page_round(len));
		if (old.active) {
			int oldpin = m->pin;
			uint32_t oldserial = m->pin_serial;

			map_forget(slot);
			if (!covers && w.pins[oldpin].serial == oldserial)
				w.pins[oldpin].untracked = true;	/* what is left of it */
		}
		if (k < 0 || w.pins[k].serial != before.serial) {
			m->dirty = true;	/* mapped, but not by a pin we track */
		} else {
			map_set(m, addr, page_round(len), k, before.serial, delta * w.page, prot,
				(flags & MAP_PRIVATE) != 0, op->seq);
			if (!covers)
				m->dirty = true;	/* what is left of the old one */
			w.pins[k].nmaps++;
			w.pins[k].ver++;
		}
	}
	unlock();

	if (k < 0)
		EXPECT(t, err, C_MMAP_BAD, "mmap of invalid offset 0x%llx (handle) succeeded",
		       (unsigned long long)pgoff);
	else if (flags & MAP_SYNC)
		EXPECT(t, err, C_MMAP_BAD, "mmap with MAP_SYNC succeeded");
	else if (expect_ok && steady)
		EXPECT(t, !err, C_MMAP_GOOD, "mmap of live handle 0x%llx, 0x%llx of 0x%llx bytes, prot %d: %s",
		       (unsigned long long)before.handle, (unsigned long long)len,
		       (unsigned long long)before.len, prot, errname(err));
	if (!err && k >= 0 && (lmode == 5 || lmode == 6) && page_round(len) > before.len)
		EXPECT(t, 0, C_MMAP_BAD, "mmap of 0x%llx bytes of a 0x%llx-byte pin succeeded",
		       (unsigned long long)len, (unsigned long long)before.len);
	slot_unhold(oh);
	pthread_mutex_unlock(&m->mu);
}

static void op_munmap(struct thr *t, struct op *op)
{
	struct held h;
	int slot = op->a % N_MAP, what = op->b % 8, err = 0;
	struct mapping *m = &w.maps[slot];
	size_t pages, cut;
	char *a;

	pthread_mutex_lock(&m->mu);
	if (!m->active) {
		pthread_mutex_unlock(&m->mu);
		op->res = RES_SKIPPED;
		return;
	}
	h = slot_hold(m);
	pages = m->len / w.page;
	if (what >= 5 && pages < 2)
		what = 0;
	cut = 1 + op->x % (pages > 1 ? pages - 1 : 1);
	CALL();
	switch (what) {
	case 4:		/* replaced by another mapping */
		a = mmap(m->addr, m->len, PROT_NONE,
			 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		err = a == MAP_FAILED ? errno : 0;
		op->res = err;
		EXPECT(t, !err, C_MUNMAP, "mmap over a whole mapping: %s", errname(err));
		if (!err) {
			lock();
			map_forget(slot);
			unlock();
		}
		break;
	case 5:		/* the head */
	case 6:		/* the tail */
	case 7:		/* a hole in the middle */
		if (what == 5)
			a = m->addr;
		else if (what == 6)
			a = m->addr + (pages - cut) * w.page;
		else {
			cut = pages > 2 ? 1 + op->x % (pages - 2) : 1;
			a = m->addr + w.page * (pages > 2 ? 1 + op->y % (pages - cut - 1 + 1) : 1);
			if (a + cut * w.page > m->addr + m->len)
				cut = (m->addr + m->len - a) / w.page;
		}
		err = sys_err(munmap(a, cut * w.page));
		op->res = err;
		if (err)
			break;
		arena_reserve(t, a, cut * w.page, true);
		lock();
		if (what == 5) {
			m->addr += cut * w.page;
			m->gpu_off += cut * w.page;
			m->len -= cut * w.page;
		} else if (what == 6) {
			m->len -= cut * w.page;
		} else {
			struct pin *p = &w.pins[m->pin];

			if (p->serial == m->pin_serial)
				p->untracked = true;	/* the part after the hole */
			m->len = a - m->addr;
			m->dirty = true;
		}
		if (!m->len)
			map_forget(slot);
		unlock();
		break;
	default:
		err = sys_err(munmap(m->addr, m->len));
		op->res = err;
		EXPECT(t, !err, C_MUNMAP, "munmap of a whole mapping: %s", errname(err));
		if (err)
			break;
		arena_reserve(t, m->addr, m->len, true);
		lock();
		map_forget(slot);
		unlock();
		break;
	}
	slot_unhold(h);
	pthread_mutex_unlock(&m->mu);
}

static void op_mremap(struct thr *t, struct op *op)
{
	struct held h;
	int slot = op->a % N_MAP, what = op->b % 8, err, flags = 0, j = -1;
	struct mapping *m = &w.maps[slot], *mj = NULL;
	size_t newlen, pages;
	char *target = NULL;
	void *p;

	pthread_mutex_lock(&m->mu);
	if (!m->active) {
		pthread_mutex_unlock(&m->mu);
		op->res = RES_SKIPPED;
		return;
	}
	h = slot_hold(m);
	pages = m->len / w.page;
	newlen = m->len;
	switch (what) {
	case 0:
		newlen = m->len + w.page * (1 + op->x % 4);
		break;
	case 1:
		newlen = m->len + w.page * (1 + op->x % 4);
		flags = MREMAP_MAYMOVE;
		break;
	case 2:
	case 3:
		newlen = pages > 1 ? w.page * (1 + op->x % (pages - 1)) : m->len;
		break;
	default:
		j = (slot + 1 + op->y % (N_MAP - 1)) % N_MAP;
		mj = &w.maps[j];
		if (pthread_mutex_trylock(&mj->mu)) {
			slot_unhold(h);
			pthread_mutex_unlock(&m->mu);
			op->res = RES_SKIPPED;
			return;
		}
		if (mj->active) {
			pthread_mutex_unlock(&mj->mu);
			slot_unhold(h);
			pthread_mutex_unlock(&m->mu);
			op->res = RES_SKIPPED;
			return;
		}
		target = slot_base(j) + (op->z % 4 == 3 ?
			 (op->z >> 8) % ((SLOT_SIZE - m->len) / w.page + 1) * w.page : 0);
		flags = MREMAP_MAYMOVE | MREMAP_FIXED | (what == 7 ? MREMAP_DONTUNMAP : 0);
		break;
	}
	p = mremap(m->addr, m->len, newlen, flags, target);
	err = p == MAP_FAILED ? errno : 0;
	CALL();
	op->res = err;
	if (err) {
		if (mj)		/* MREMAP_FIXED unmaps the target first */
			slot_reset(t, j);
	} else if (!mj && p == m->addr) {
		if (newlen < m->len)
			arena_reserve(t, m->addr + newlen, m->len - newlen, true);
		lock();
		if (newlen > m->len)
			m->disturbed = true;	/* grown over our reservation?! */
		m->len = newlen;
		unlock();
	} else if (!mj) {
		/* Moved outside the arena: take it down, keep the arena whole. */
		munmap(p, newlen);
		arena_reserve(t, m->addr, m->len, true);
		lock();
		map_forget(slot);
		unlock();
	} else if (p == target) {
		lock();
		map_set(mj, target, newlen, m->pin, m->pin_serial, m->gpu_off, m->prot,
			m->disturbed, m->map_seq);
		if (what == 7) {
			/* The old VMA stays, empty: it faults now. */
			struct pin *pp = &w.pins[m->pin];

			m->disturbed = true;
			if (pp->serial == m->pin_serial) {
				pp->nmaps++;
				pp->ver++;
			}
		} else {
			m->active = false;	/* moved, the pin keeps its count */
		}
		unlock();
		if (what != 7)
			arena_reserve(t, m->addr, m->len, true);
	} else {
		fail(t, F_INVARIANT, C_ARENA, "mremap to %p returned %p", (void *)target, p);
	}
	if (mj)
		pthread_mutex_unlock(&mj->mu);
	slot_unhold(h);
	pthread_mutex_unlock(&m->mu);
}

static void op_mprotect(struct thr *t, struct op *op)
{
	struct held h;
	int slot = op->a % N_MAP, err, prot = prot_of(op->b % 8, op->z);
	struct mapping *m = &w.maps[slot];
	bool partial = op->b % 16 >= 12 && m->len > (size_t)w.page;
	char *a;
	size_t len;

	(void)t;
	pthread_mutex_lock(&m->mu);
	if (!m->active) {
		pthread_mutex_unlock(&m->mu);
		op->res = RES_SKIPPED;
		return;
	}
	h = slot_hold(m);
	a = m->addr;
	len = m->len;
	if (partial) {
		size_t pages = len / w.page, first = op->x % pages;

		a += first * w.page;
		len = (1 + op->y % (pages - first)) * w.page;
		if (len == m->len)
			partial = false;
	}
	err = sys_err(mprotect(a, len, prot));
	CALL();
	op->res = err;
	if (!err) {
		lock();
		if (partial)
			m->disturbed = true;
		else
			m->prot = prot;
		unlock();
	}
	slot_unhold(h);
	pthread_mutex_unlock(&m->mu);
}

static void op_madvise(struct thr *t, struct op *op)
{
	struct held h;
	static const int advice[] = {
		MADV_DONTNEED, MADV_DONTNEED, MADV_DONTFORK, MADV_DOFORK, MADV_WIPEONFORK,
		MADV_KEEPONFORK, MADV_REMOVE, MADV_FREE, 20 /* COLD */, 21 /* PAGEOUT */,
		MADV_WILLNEED, MADV_NORMAL, MADV_RANDOM, MADV_SEQUENTIAL, MADV_DONTDUMP,
		MADV_DODUMP, MADV_MERGEABLE, MADV_UNMERGEABLE, MADV_HUGEPAGE,
		MADV_NOHUGEPAGE, 22 /* POPULATE_READ */, 23 /* POPULATE_WRITE */,
		24 /* DONTNEED_LOCKED */, 25 /* COLLAPSE */, 77 /* nothing */,
	};
	int slot = op->a % N_MAP, err, adv = advice[op->x % (sizeof(advice) / sizeof(advice[0]))];
	struct mapping *m = &w.maps[slot];
	bool partial = op->b % 4 == 3 && m->len > (size_t)w.page;
	char *a;
	size_t len;

	(void)t;
	pthread_mutex_lock(&m->mu);
	if (!m->active) {
		pthread_mutex_unlock(&m->mu);
		op->res = RES_SKIPPED;
		return;
	}
	h = slot_hold(m);
	a = m->addr;
	len = m->len;
	if (partial) {
		size_t pages = len / w.page, first = op->y % pages;

		a += first * w.page;
		len = (1 + op->z % (pages - first)) * w.page;
	}
	err = sys_err(madvise(a, len, adv));
	CALL();
	op->res = err;
	op->info = adv;
	if (!err && (adv == MADV_DONTNEED || adv == MADV_REMOVE || adv == MADV_FREE ||
		     adv == 20 || adv == 21 || adv == 24 || adv == 25 || adv == 23)) {
		lock();
		m->disturbed = true;	/* zapped: without a fault handler it stays so */
		unlock();
	}
	slot_unhold(h);
	pthread_mutex_unlock(&m->mu);
}

/*
 * What a word read through a mapping may be: the pinned allocation's own
 * pattern at that offset; anything else only where the memory is gone
 * (then it must not be another allocation's pattern, ever).
 */
static void check_word(struct thr *t, const char *how, const struct pin *p, uint64_t gpu_off,
		       uint32_t v, bool strict)
{
	uint64_t gpu = p->va + gpu_off;
	uint16_t hi = v >> 16;

	if (gpu >= p->alloc_va && gpu < p->alloc_va + p->alloc_size) {
		uint64_t word = (gpu - p->alloc_va) / 4;

		if (v == pattern(p->tag, word))
			return;
		if (hi == p->tag) {
			fail(t, F_DATA, 2, "%s of handle 0x%llx at +0x%llx read 0x%08x, the word of +0x%llx: mapped at the wrong offset",
			     how, (unsigned long long)p->handle, (unsigned long long)gpu_off, v,
			     (unsigned long long)(v & 0xffff) * 4);
			return;
		}
	}
	if (hi != p->tag && tag_used(hi)) {
		fail(t, F_DATA, 3, "%s of handle 0x%llx (allocation tag %u%s) at +0x%llx read 0x%08x: the bytes of %s allocation (tag %u)",
		     how, (unsigned long long)p->handle, p->tag,
		     p->revoked ? ", unpinned or freed" : "", (unsigned long long)gpu_off, v,
		     hi == CHILD_TAG ? "another process's" : "another", hi);
		return;
	}
	if (strict)
		fail(t, F_DATA, 5, "%s of live handle 0x%llx at +0x%llx read 0x%08x, want 0x%08x",
		     how, (unsigned long long)p->handle, (unsigned long long)gpu_off, v,
		     pattern(p->tag, (gpu - p->alloc_va) / 4));
}

static void op_probe(struct thr *t, struct op *op)
{
	int slot = op->a % N_MAP, reads = 1 + op->b % 4;
	bool write = (op->b >> 2) % 4 == 0;
	struct mapping *m = &w.maps[slot], mm;
	struct pin p;
	uint64_t r = op->x;

	pthread_mutex_lock(&m->mu);
	lock();
	mm = *m;
	p = w.pins[m->pin];
	unlock();
	if (!mm.active || p.serial != mm.pin_serial) {
		pthread_mutex_unlock(&m->mu);
		op->res = RES_SKIPPED;
		return;
	}
	op->res = 0;
	for (int i = 0; i <= reads && !shm->stop; i++) {
		size_t off = i == 0 ? 0 : i == 1 ? mm.len - 4 : (r % (mm.len / 4)) * 4;
		uint64_t gpu_off = mm.gpu_off + off;
		bool in_pin = gpu_off + 4 <= p.len;
		bool is_write = write && i == reads;
		struct pin now;
		uint32_t v = 0;
		bool strict;
		int sig;

		r = r * 6364136223846793005ULL + 1442695040888963407ULL;
		/* Revoked (unpinned, freed under a legacy pin) before we touched it? */
		lock();
		now = w.pins[mm.pin];
		unlock();
		strict = now.serial == p.serial && now.state == P_LIVE && !now.revoked &&
			 !now.busy && !mm.disturbed && (mm.prot & PROT_READ) && in_pin;
		if (is_write) {
			uint64_t gpu = p.va + gpu_off;

			if (!(mm.prot & PROT_WRITE) || mm.disturbed || gpu < p.alloc_va ||
			    gpu + 4 > p.alloc_va + p.alloc_size)
				continue;
			v = pattern(p.tag, (gpu - p.alloc_va) / 4);
			sig = try_access(mm.addr + off, true, &v);
		} else {
			sig = try_access(mm.addr + off, false, &v);
		}
		op->info = sig ? (uint32_t)sig : v;
		if (sig) {
			op->res = sig;
			/* A live, intact mapping of pinned memory must not fault. */
			if (strict && sig == SIGBUS) {
				lock();
				now = w.pins[mm.pin];
				unlock();
				if (now.serial == p.serial && now.state == P_LIVE && !now.revoked &&
				    !now.busy)
					fail(t, F_INVARIANT, C_LOST_MAPPING,
					     "%s of live handle 0x%llx at +0x%llx raised SIGBUS",
					     is_write ? "write" : "read", (unsigned long long)p.handle,
					     (unsigned long long)gpu_off);
			}
			continue;
		}
		if (now.serial == p.serial && now.revoked) {
			fail(t, F_DATA, 4,
			     "%s of handle 0x%llx at +0x%llx worked after its %s returned (read 0x%08x, allocation tag %u): the mapping survived (pinned by op #%u, mapped by op #%u, revoked by op #%u)",
			     is_write ? "write" : "read", (unsigned long long)p.handle,
			     (unsigned long long)gpu_off,
			     now.state == P_GONE ? "unpin" : "memory was freed (legacy pin) and the free",
			     v, p.tag, p.pin_seq, mm.map_seq, now.revoke_seq);
			break;
		}
		if (!is_write)
			check_word(t, "read", &p, gpu_off, v, strict);
	}
	pthread_mutex_unlock(&m->mu);
}

/* Reads through /proc/self/mem (access_process_vm on the mapping). */
static int procmem_fd = -1;

static void op_procmem(struct thr *t, struct op *op)
{
	int slot = op->a % N_MAP;
	struct mapping *m = &w.maps[slot], mm;
	struct pin p;
	uint32_t v = 0;
	ssize_t n;
	size_t off;

	pthread_mutex_lock(&m->mu);
	lock();
	mm = *m;
	p = w.pins[m->pin];
	unlock();
	if (!mm.active || p.serial != mm.pin_serial || procmem_fd < 0) {
		pthread_mutex_unlock(&m->mu);
		op->res = RES_SKIPPED;
		return;
	}
	off = (op->x % (mm.len / 4)) * 4;
	if (op->b & 1) {
		struct iovec local = { &v, 4 }, remote = { mm.addr + off, 4 };

		n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
	} else {
		n = pread(procmem_fd, &v, 4, (off_t)(uintptr_t)(mm.addr + off));
	}
	CALL();
	op->res = n == 4 ? 0 : n < 0 ? errno : EIO;
	if (n == 4 && (mm.prot & PROT_READ) && !mm.disturbed)
		check_word(t, op->b & 1 ? "process_vm_readv" : "/proc/self/mem read", &p,
			   mm.gpu_off + off, v, false);
	pthread_mutex_unlock(&m->mu);
}

static void op_msync(struct thr *t, struct op *op)
{
	static const int how[] = { MS_SYNC, MS_ASYNC, MS_INVALIDATE, MS_SYNC | MS_INVALIDATE };
	int slot = op->a % N_MAP;
	struct mapping *m = &w.maps[slot];

	(void)t;
	pthread_mutex_lock(&m->mu);
	if (!m->active) {
		pthread_mutex_unlock(&m->mu);
		op->res = RES_SKIPPED;
		return;
	}
	op->res = sys_err(msync(m->addr, m->len, how[op->b % 4]));
	CALL();
	pthread_mutex_unlock(&m->mu);
}

/* The file operations gdrdrv does not implement, and what the VFS does itself. */
static void op_fileops(struct thr *t, struct op *op)
{
	int s = fd_of(op->b >> 8), fd, v = 0;
	char buf[64];
	struct stat st;
	struct pollfd pfd;

	(void)t;
	fd_get(s);
	fd = w.fds[s].fd;
	switch (op->b % 8) {
	case 0: op->res = sys_err(read(fd, buf, sizeof(buf))); break;
	case 1: op->res = sys_err(write(fd, buf, 1 + op->x % sizeof(buf))); break;
	case 2: op->res = sys_err(lseek(fd, (off_t)(op->x & 0xffffff), (int)(op->y % 3))); break;
	case 3: op->res = sys_err(fstat(fd, &st)); break;
	case 4:
		pfd = (struct pollfd){ .fd = fd, .events = POLLIN | POLLOUT };
		op->res = sys_err(poll(&pfd, 1, 0));
		break;
	case 5: op->res = sys_err(ioctl(fd, FIONREAD, &v)); break;
	case 6: op->res = sys_err(ioctl(fd, FIONBIO, &v)); break;
	default: op->res = sys_err(fsync(fd)); break;
	}
	CALL();
	fd_put(s);
}

/* ---- other processes ---------------------------------------------------------- */

/*
 * In a child: records the first failure for the parent, then goes on.  A
 * fork child of a threaded process calls nothing that may take a lock
 * another thread held at the fork (malloc, strerror): errname() only.
 */
static void child_fail(struct child_report *rep, int kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void child_fail(struct child_report *rep, int kind, const char *fmt, ...)
{
	va_list ap;

	if (rep->failed)
		return;
	rep->failed = 1;
	rep->kind = kind;
	va_start(ap, fmt);
	vsnprintf(rep->msg, sizeof(rep->msg), fmt, ap);
	va_end(ap);
}

#define CHILD_EXPECT(rep, cond, ...)				\
	do {							\
		if (!(cond))					\
			child_fail(rep, F_INVARIANT, __VA_ARGS__); \
	} while (0)

/* Waits for a child; a hang or an unexpected death fails the op. */
static void reap(struct thr *t, pid_t pid, bool may_be_killed)
{
	double deadline = now_s() + CHILD_TIMEOUT_S;
	int status;
	pid_t r;

	while ((r = waitpid(pid, &status, WNOHANG)) == 0) {
		if (now_s() > deadline) {
			kill(pid, SIGKILL);
			fail(t, F_HANG, 0, "child %d still running after %d s (stuck in the kernel?)",
			     pid, CHILD_TIMEOUT_S);
			waitpid(pid, &status, 0);
			return;
		}
		usleep(1000);
	}
	if (r < 0)
		return;
	if (t->rep->failed) {
		fail(t, t->rep->kind == F_DATA ? F_DATA : F_CHILD, 100 + t->op->type,
		     "in a child: %s", t->rep->msg);
		return;
	}
	if (WIFSIGNALED(status) && !(may_be_killed && WTERMSIG(status) == SIGKILL))
		fail(t, F_CHILD, 99, "child killed by signal %d", WTERMSIG(status));
	else if (WIFEXITED(status) && WEXITSTATUS(status))
		fail(t, F_CHILD, 98, "child exited with %d", WEXITSTATUS(status));
}

/* A child's own GPU memory, pin and mapping, left for exit to clean up. */
static void child_own_state(struct child_report *rep, bool unpin_some)
{
	struct softgpu_alloc a = { .size = 2 * GPU_PAGE };
	struct softgpu_memset ms;
	uint64_t handle;
	int sg = open(SOFTGPU_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	int gd = open("/dev/gdrdrv", O_RDWR | O_CLOEXEC);
	struct gdrdrv_pin_buffer_v2 p;
	uint32_t v;
	void *map;

	if (sg < 0 || gd < 0) {
		child_fail(rep, F_SETUP, "child cannot open the devices: %s", errname(errno));
		return;
	}
	if (ioctl(sg, SOFTGPU_IOC_ALLOC, &a))
		return;		/* full: nothing to do */
	ms = (struct softgpu_memset){ .va = a.va, .count = a.size / 4,
				      .value = (uint32_t)CHILD_TAG << 16, .elem_size = 4 };
	CHILD_EXPECT(rep, !ioctl(sg, SOFTGPU_IOC_MEMSET, &ms), "child MEMSET: %s", errname(errno));
	p = (struct gdrdrv_pin_buffer_v2){ .addr = a.va, .size = a.size };
	if (ioctl(gd, GDRDRV_IOC_PIN_BUFFER_V2, &p)) {
		CHILD_EXPECT(rep, 0, "child's own PIN_BUFFER_V2: %s", errname(errno));
		return;
	}
	handle = p.handle;
	map = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, gd, (off_t)(handle * w.page));
	if (map == MAP_FAILED) {
		CHILD_EXPECT(rep, 0, "child's own mmap: %s", errname(errno));
		return;
	}
	CHILD_EXPECT(rep, !try_access(map, false, &v) && v == (uint32_t)CHILD_TAG << 16,
		     "child reads its own mapping: 0x%08x", v);
	if (unpin_some) {
		struct gdrdrv_unpin_buffer u = { .handle = handle };

		CHILD_EXPECT(rep, !ioctl(gd, GDRDRV_IOC_UNPIN_BUFFER, &u), "child UNPIN: %s",
			     errname(errno));
		CHILD_EXPECT(rep, try_access(map, false, &v) != 0,
			     "child's mapping still reads 0x%08x after its unpin", v);
	}
}

struct snap {
	char *addr;
	size_t len;
	struct pin pin;
	uint64_t gpu_off;
};

static void op_fork(struct thr *t, struct op *op)
{
	struct snap snaps[N_MAP];
	int nsnap = 0, s = fd_of(op->b >> 8), k;
	uint64_t live_handle = 0, live_va = 0, live_size = 0;
	bool have_pin = false;
	unsigned int what = op->b;
	pid_t pid;

	memset(t->rep, 0, sizeof(*t->rep));
	fd_get(s);
	lock();
	for (int i = 0; i < N_MAP; i++) {
		struct mapping *m = &w.maps[i];

		if (m->active)
			snaps[nsnap++] = (struct snap){ m->addr, m->len, w.pins[m->pin], m->gpu_off };
	}
	k = pick_pin(op->x, s);
	if (k >= 0) {
		have_pin = true;
		live_handle = w.pins[k].handle;
		live_va = w.pins[k].va;
		live_size = w.pins[k].len;
	}
	unlock();

	fflush(NULL);
	pid = fork();
	CALL();
	if (pid < 0) {
		fd_put(s);
		op->res = errno;
		return;
	}
	if (pid == 0) {
		struct child_report *rep = t->rep;
		int fd = w.fds[s].fd;

		alarm(CHILD_TIMEOUT_S - 5);
		if (what & 1) {
			/* Mappings are not inherited (VM_DONTCOPY); if one is, it
			 * must still show the parent's own bytes. */
			for (int i = 0; i < nsnap; i++) {
				uint32_t v;

				if (try_access(snaps[i].addr, false, &v))
					continue;
				if ((v >> 16) != snaps[i].pin.tag && tag_used(v >> 16))
					child_fail(rep, F_DATA,
						   "a fork child reads 0x%08x through the parent's mapping of tag %u",
						   v, snaps[i].pin.tag);
			}
		}
		if (what & 2) {
			struct gdrdrv_get_version ver;
			struct gdrdrv_unpin_buffer u = { .handle = live_handle };
			struct gdrdrv_get_info_v2 info = { .handle = live_handle };
			struct gdrdrv_pin_buffer_v2 p = { .addr = live_va, .size = live_size };
			void *m;

			CHILD_EXPECT(rep, ioctl(fd, GDRDRV_IOC_GET_VERSION, &ver) && errno == EACCES,
				     "GET_VERSION on the parent's file in a fork child: %s",
				     errname(errno));
			if (have_pin) {
				CHILD_EXPECT(rep, ioctl(fd, GDRDRV_IOC_UNPIN_BUFFER, &u) && errno == EACCES,
					     "UNPIN of the parent's handle in a fork child: %s",
					     errname(errno));
				CHILD_EXPECT(rep, ioctl(fd, GDRDRV_IOC_GET_INFO_V2, &info) && errno == EACCES,
					     "GET_INFO_V2 in a fork child: %s", errname(errno));
				CHILD_EXPECT(rep, ioctl(fd, GDRDRV_IOC_PIN_BUFFER_V2, &p) && errno == EACCES,
					     "PIN_BUFFER_V2 in a fork child: %s", errname(errno));
				m = mmap(NULL, live_size, PROT_READ, MAP_SHARED, fd,
					 (off_t)(live_handle * w.page));
				CHILD_EXPECT(rep, m == MAP_FAILED && errno == EACCES,
					     "mmap of the parent's handle in a fork child: %s",
					     m == MAP_FAILED ? errname(errno) : "mapped");
			}
		}
		if (what & 4) {
			struct softgpu_alloc a = { .size = GPU_PAGE };

			CHILD_EXPECT(rep, ioctl(w.sg, SOFTGPU_IOC_ALLOC, &a) && errno == EACCES,
				     "SOFTGPU_IOC_ALLOC on the parent's file in a fork child: %s",
				     errname(errno));
		}
		if (what & 8)
			child_own_state(rep, what & 16);
		if (what & 32)
			for (int i = 0; i < N_FD; i++)
				close(w.fds[i].fd);
		if (what & 64)
			raise(SIGKILL);
		_exit(0);
	}
	fd_put(s);
	op->res = 0;
	op->info = pid;
	reap(t, pid, what & 64);
}

static int send_fd(int sock, int fd, uint64_t handle)
{
	char ctrl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { &handle, sizeof(handle) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl,
			      .msg_controllen = sizeof(ctrl) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == sizeof(handle) ? 0 : -1;
}

static int recv_fd(int sock, uint64_t *handle)
{
	char ctrl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { handle, sizeof(*handle) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl,
			      .msg_controllen = sizeof(ctrl) };
	struct pollfd pfd = { .fd = sock, .events = POLLIN };
	struct cmsghdr *c;
	int fd;

	if (poll(&pfd, 1, (CHILD_TIMEOUT_S - 10) * 1000) != 1)
		return -1;
	if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != sizeof(*handle))
		return -1;
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* A file used by a process that did not open it: everything is EACCES. */
static void check_foreign_file(struct child_report *rep, int fd, uint64_t handle,
			       bool have_handle, const char *who)
{
	struct gdrdrv_get_version ver;
	struct gdrdrv_unpin_buffer u = { .handle = handle };
	void *m;

	CHILD_EXPECT(rep, ioctl(fd, GDRDRV_IOC_GET_VERSION, &ver) && errno == EACCES,
		     "GET_VERSION on a file received by %s: %s", who, errname(errno));
	if (!have_handle)
		return;
	CHILD_EXPECT(rep, ioctl(fd, GDRDRV_IOC_UNPIN_BUFFER, &u) && errno == EACCES,
		     "UNPIN on a file received by %s: %s", who, errname(errno));
	m = mmap(NULL, GPU_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)(handle * w.page));
	CHILD_EXPECT(rep, m == MAP_FAILED && errno == EACCES, "mmap of a file received by %s: %s",
		     who, m == MAP_FAILED ? errname(errno) : "mapped");
	if (m != MAP_FAILED)
		munmap(m, GPU_PAGE);
}

static void op_reopen(struct thr *t, struct op *op);

static void op_fdpass(struct thr *t, struct op *op)
{
	int s = fd_of(op->b >> 8), sv[2], k;
	bool to_child = !(op->b & 1), reopen = op->b & 2;
	uint64_t handle = ABSURD_HANDLE;
	char go = 'g';
	pid_t pid;

	memset(t->rep, 0, sizeof(*t->rep));
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		op->res = errno;
		return;
	}
	fd_get(s);
	lock();
	k = pick_pin(op->x, s);
	if (k >= 0)
		handle = w.pins[k].handle;
	unlock();
	fflush(NULL);
	pid = fork();
	CALL();
	if (pid < 0) {
		fd_put(s);
		op->res = errno;
		close(sv[0]);
		close(sv[1]);
		return;
	}
	if (pid == 0) {
		struct child_report *rep = t->rep;
		struct pollfd pfd = { .fd = sv[1], .events = POLLIN };
		uint64_t h;
		int fd;

		alarm(CHILD_TIMEOUT_S - 5);
		close(sv[0]);
		for (int i = 0; i < N_FD; i++)
			close(w.fds[i].fd);	/* only what it is sent */
		if (to_child) {
			fd = recv_fd(sv[1], &h);
			if (fd < 0) {
				child_fail(rep, F_SETUP, "receiving the file: %s", errname(errno));
				_exit(1);
			}
			check_foreign_file(rep, fd, h, h != ABSURD_HANDLE, "another process");
		} else {
			struct softgpu_alloc a = { .size = GPU_PAGE };
			struct gdrdrv_pin_buffer_v2 p = { 0 };
			int sg = open(SOFTGPU_DEVICE_PATH, O_RDWR | O_CLOEXEC);

			fd = open("/dev/gdrdrv", O_RDWR | O_CLOEXEC);
			h = ABSURD_HANDLE;
			if (sg >= 0 && fd >= 0 && !ioctl(sg, SOFTGPU_IOC_ALLOC, &a)) {
				p.addr = a.va;
				p.size = a.size;
				if (!ioctl(fd, GDRDRV_IOC_PIN_BUFFER_V2, &p))
					h = p.handle;
			}
			if (fd < 0 || send_fd(sv[1], fd, h)) {
				child_fail(rep, F_SETUP, "sending a file: %s", errname(errno));
				_exit(1);
			}
		}
		/* Hold the file until the parent says go (it may replace its own). */
		poll(&pfd, 1, (CHILD_TIMEOUT_S - 10) * 1000);
		close(fd);
		_exit(0);
	}
	close(sv[1]);
	op->info = pid;
	if (to_child) {
		op->res = send_fd(sv[0], w.fds[s].fd, handle) ? errno : 0;
		fd_put(s);
		if (reopen && !op->res)
			op_reopen(t, op);	/* the child holds the old file now */
	} else {
		uint64_t h;
		int fd = recv_fd(sv[0], &h);

		fd_put(s);
		op->res = fd < 0 ? EIO : 0;
		if (fd >= 0) {
			struct child_report mine = { 0 };

			check_foreign_file(&mine, fd, h, h != ABSURD_HANDLE, "the parent");
			if (mine.failed)
				fail(t, F_INVARIANT, C_EACCES, "%s", mine.msg);
			close(fd);
		}
	}
	(void)!write(sv[0], &go, 1);
	close(sv[0]);
	reap(t, pid, false);
}

/* Replaces a file slot's file by a new one (the old one is closed here). */
static void op_reopen(struct thr *t, struct op *op)
{
	int s = fd_of(op->b >> 8), fd;
	struct fdslot *f = &w.fds[s];

	pthread_rwlock_wrlock(&f->lock);
	fd = open("/dev/gdrdrv", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fail(t, F_SETUP, 0, "open /dev/gdrdrv: %s", strerror(errno));
		pthread_rwlock_unlock(&f->lock);
		return;
	}
	/* dup2 closes the old file atomically: no other thread can get its number. */
	if (dup2(fd, f->fd) < 0)
		fail(t, F_SETUP, 0, "dup2: %s", strerror(errno));
	close(fd);
	CALL(); CALL();
	lock();
	f->gen++;
	f->nstale = 0;
	for (int i = 0; i < N_PIN; i++) {
		struct pin *p = &w.pins[i];

		if (p->state != P_EMPTY && p->fd == s) {
			/* Mappings keep the old file, and so its pins, alive. */
			p->orphan = true;
			p->ver++;
			pin_maybe_release(i);
		}
	}
	unlock();
	pthread_rwlock_unlock(&f->lock);
	if (op->type == OP_REOPEN)
		op->res = 0;
}

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

static double worker_deadline;

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

static void setup_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(shm->fail.msg, sizeof(shm->fail.msg), fmt, ap);
	va_end(ap);
	shm->fail.seq = -1;
	shm->fail.kind = F_SETUP;
	_exit(3);
}

/* gdrdrv's allow_p2p_tokens; a gdrdrv without it honours tokens. */
static bool gdrdrv_tokens_allowed(void)
{
	char c = 'Y';
	int fd = open("/sys/module/gdrdrv/parameters/allow_p2p_tokens", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (read(fd, &c, 1) != 1)
			c = 'Y';
		close(fd);
	}
	return c == 'Y' || c == '1';
}

static bool probe_int80(void)
{
#if HAVE_INT80
	long r = -1;

	if (opt.no_compat)
		return false;
	if (!sigsetjmp(probe_jmp, 1)) {
		probe_armed = 1;
		r = int80_3(IA32_NR_getpid, 0, 0, 0);
		probe_armed = 0;
	}
	return r == getpid();
#else
	return false;
#endif
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
			int err = sg_ioctl(SOFTGPU_IOC_FREE, &f);

			EXPECT(t, !err, C_SG, "SOFTGPU_IOC_FREE at the end: %s", errname(err));
		}
	}
	for (int i = 0; i < N_FD; i++)
		close(w.fds[i].fd);
	close(w.sg);
}

static struct thr threads[MAX_THREADS];

static void worker(uint64_t seed, unsigned int nthreads, bool replay)
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

/* ---- describing operations ------------------------------------------------------- */

static const char *entry_name(uint32_t bits)
{
	if ((bits & 7) < 6)
		return "";
	return bits & 8 ? " compat/4-byte" : " compat";
}

static void describe(const struct op *op, char *out, size_t len)
{
	static const char *const pin_modes[] = {
		"whole allocation", "sub-range", "unaligned range", "past the end",
		"freed allocation", "unallocated address", "zero/wrapping range", "host address",
	};
	static const char *const arg_modes[] = { "", " arg=NULL", " arg=unmapped",
						 " arg=straddling", " arg=read-only" };
	char res[48];
	int n = 0;

	if (op->res > 0 && op->res < 4096 && (op->type == OP_PROBE))
		snprintf(res, sizeof(res), "%s", op->res == SIGBUS ? "SIGBUS" :
			 op->res == SIGSEGV ? "SIGSEGV" : "signal");
	else
		snprintf(res, sizeof(res), "%s", errname(op->res));

	switch (op->type) {
	case OP_ALLOC:
		n = snprintf(out, len, "alloc 0x%llx bytes",
			     op->a % 16 == 0 ? (op->a & 16 ? 0ULL : 1ULL << (40 + op->b % 20)) :
			     (unsigned long long)alloc_size_of(op->x));
		break;
	case OP_FREE:
		n = snprintf(out, len, "free %s #%u", op->b % 8 == 7 ? "bogus" : "allocation",
			     op->a % N_ALLOC);
		break;
	case OP_PIN:
		n = snprintf(out, len, "pin %s fd%d %s%s%s%s%s", ((op->b >> 4) & 3) >= 2 ? "v1" : "v2",
			     fd_of(op->b >> 17), pin_modes[pin_mode_of(op->b)],
			     ((op->b >> 4) & 3) == 3 ? " tokens" : "",
			     ((op->b >> 6) & 7) == 5 ? " FORCE_PCIE" : ((op->b >> 6) & 7) == 6 ?
			     " bad-flags" : ((op->b >> 6) & 7) == 7 ? " pad!=0" : "",
			     entry_name(op->b >> 9), arg_modes[arg_mode_of(op->b >> 13)]);
		break;
	case OP_UNPIN:
		n = snprintf(out, len, "unpin fd%d %s%s%s", fd_of(op->b >> 8),
			     (op->b & 3) >= 2 ? "invalid handle" : "live pin", entry_name(op->b >> 2),
			     arg_modes[arg_mode_of(op->b >> 12)]);
		break;
	case OP_INFO:
		n = snprintf(out, len, "%s fd%d %s%s%s",
			     op->b % 3 == 0 ? "get_info" : op->b % 3 == 1 ? "get_info_v2" : "get_cb_flag",
			     fd_of(op->b >> 8), ((op->b >> 2) & 3) == 3 ? "invalid handle" : "live pin",
			     entry_name(op->b >> 4), arg_modes[arg_mode_of(op->b >> 12)]);
		break;
	case OP_MMAP:
		n = snprintf(out, len, "mmap slot %u fd%d %s len-mode %u prot-mode %u flags-mode %u%s",
			     op->a % N_MAP, fd_of(op->b >> 16),
			     (op->b & 15) == 14 ? "offset inside a pin" : (op->b & 15) >= 12 ?
			     "invalid handle" : "live pin", (op->b >> 4) & 7, (op->b >> 7) & 7,
			     (op->b >> 10) & 15, ((op->b >> 14) & 3) == 3 ? " at an offset" : "");
		break;
	case OP_MUNMAP: {
		static const char *const how[] = { "whole", "whole", "whole", "whole",
						   "overmap", "head", "tail", "middle" };

		n = snprintf(out, len, "munmap slot %u %s", op->a % N_MAP, how[op->b % 8]);
		break;
	}
	case OP_MREMAP: {
		static const char *const how[] = { "grow", "grow+maymove", "shrink", "shrink",
						   "move", "move", "move", "move+dontunmap" };

		n = snprintf(out, len, "mremap slot %u %s", op->a % N_MAP, how[op->b % 8]);
		break;
	}
	case OP_MPROTECT:
		n = snprintf(out, len, "mprotect slot %u %s prot %d", op->a % N_MAP,
			     op->b % 16 >= 12 ? "partial" : "whole", prot_of(op->b % 8, op->z));
		break;
	case OP_MADVISE:
		n = snprintf(out, len, "madvise slot %u %s", op->a % N_MAP,
			     op->b % 4 == 3 ? "partial" : "whole");
		break;
	case OP_PROBE:
		n = snprintf(out, len, "probe slot %u, %u read(s)%s", op->a % N_MAP, 1 + op->b % 4,
			     (op->b >> 2) % 4 == 0 ? " + write" : "");
		break;
	case OP_FORK:
		n = snprintf(out, len, "fork (child: %s%s%s%s%s%s)", op->b & 1 ? "probe " : "",
			     op->b & 2 ? "gdrdrv-ioctls " : "", op->b & 4 ? "softgpu-ioctl " : "",
			     op->b & 8 ? (op->b & 16 ? "own-pin+unpin " : "own-pin ") : "",
			     op->b & 32 ? "close " : "", op->b & 64 ? "SIGKILL" : "exit");
		break;
	case OP_FDPASS:
		n = snprintf(out, len, "fdpass fd%d %s%s", fd_of(op->b >> 8),
			     op->b & 1 ? "child->parent" : "parent->child",
			     !(op->b & 1) && op->b & 2 ? ", then reopen" : "");
		break;
	case OP_REOPEN:
		n = snprintf(out, len, "reopen fd%d", fd_of(op->b >> 8));
		break;
	default:
		n = snprintf(out, len, "%s", op_names[op->type % OP_COUNT]);
		break;
	}
	if (n >= 0 && (size_t)n < len)
		snprintf(out + n, len - n, " -> %s", res);
}

static void print_op(const struct op *op, const char *prefix)
{
	char d[200];

	describe(op, d, sizeof(d));
	printf("%s[t%u] %-70s | R %u %u %x %x %llx %llx %llx\n", prefix, op->thread, d,
	       op->thread, op->type, op->a, op->b, (unsigned long long)op->x,
	       (unsigned long long)op->y, (unsigned long long)op->z);
}

/* ---- the supervisor ------------------------------------------------------------------- */

struct verdict {
	int kind;
	int sub;
	int32_t seq;
	bool fatal;		/* an oops or the like: replays would not be trusted */
	char msg[1024];
};

static int sup_kmsg = -1;

static bool stats_settled(const struct softgpu_stats *a, const struct softgpu_stats *b)
{
	return a->active_pins == b->active_pins && a->pinned_bytes == b->pinned_bytes &&
	       a->legacy_pins == b->legacy_pins && a->memory_used == b->memory_used &&
	       a->api_misuse == b->api_misuse;
}

static void read_refcount(char *buf, size_t len)
{
	int fd = open("/proc/driver/gdrdrv/nv_get_pages_refcount", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	buf[0] = '\0';
	if (fd < 0)
		return;
	n = read(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

#define HANG_S 120	/* no system call in that long: stuck */

/* Runs one worker (generating, or replaying shm->log[0..nlog)); judges it. */
static void run_worker(uint64_t seed, unsigned int nthreads, bool replay, double deadline,
		       struct verdict *v)
{
	struct softgpu_stats before, after;
	uint64_t last_calls = 0;
	double last_progress = now_s();
	char line[512], refcount[32], refcount_before[32];
	bool hung = false;
	int status = 0;
	pid_t pid;

	memset(v, 0, sizeof(*v));
	v->seq = -1;
	shm->stop = 0;
	memset(&shm->fail, 0, sizeof(shm->fail));
	memset(shm->done, 0, sizeof(shm->done));
	memset(shm->ok, 0, sizeof(shm->ok));
	memset(shm->skipped, 0, sizeof(shm->skipped));
	shm->calls = 0;
	shm->nthreads = nthreads;
	if (!replay)
		shm->nlog = 0;
	if (sg_stats(&before)) {
		v->kind = F_SETUP;
		snprintf(v->msg, sizeof(v->msg), "SOFTGPU_IOC_GET_STATS: %s", strerror(errno));
		return;
	}
	read_refcount(refcount_before, sizeof(refcount_before));
	kmsg_scan(sup_kmsg, line, sizeof(line), NULL);	/* only what this worker causes */
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		v->kind = F_SETUP;
		snprintf(v->msg, sizeof(v->msg), "fork: %s", strerror(errno));
		return;
	}
	if (pid == 0) {
		setpgid(0, 0);
		worker_deadline = deadline;
		worker(seed, nthreads, replay);
	}
	setpgid(pid, pid);
	while (waitpid(pid, &status, WNOHANG) == 0) {
		uint64_t calls = __atomic_load_n(&shm->calls, __ATOMIC_RELAXED);

		if (calls != last_calls) {
			last_calls = calls;
			last_progress = now_s();
		} else if (now_s() - last_progress > HANG_S) {
			hung = true;
			shm->stop = 1;
			kill(-pid, SIGKILL);
			/* A task stuck in the kernel may never go: do not wait forever. */
			for (int i = 0; i < 100 && waitpid(pid, &status, WNOHANG) == 0; i++)
				usleep(100000);
			break;
		}
		usleep(20000);
	}
	/* Fork children of the worker that outlived it. */
	kill(-pid, SIGKILL);
	while (waitpid(-pid, NULL, WNOHANG) > 0)
		;

	if (shm->fail.kind != F_NONE && shm->fail.kind <= F_SETUP) {
		v->kind = shm->fail.kind;
		v->sub = shm->fail.sub;
		v->seq = shm->fail.seq;
		snprintf(v->msg, sizeof(v->msg), "%s", shm->fail.msg);
	}
	if (kmsg_scan(sup_kmsg, line, sizeof(line), &v->fatal)) {
		if (v->kind == F_NONE || v->fatal) {
			if (v->kind != F_NONE && v->kind != F_KERNEL) {
				char prev[sizeof(v->msg)];

				snprintf(prev, sizeof(prev), "%s", v->msg);
				snprintf(v->msg, sizeof(v->msg), "kernel log: %.400s (and %.500s)", line, prev);
			} else {
				snprintf(v->msg, sizeof(v->msg), "kernel log: %.500s", line);
			}
			v->kind = F_KERNEL;
			v->sub = 0;
		}
	}
	if (v->kind != F_NONE)
		return;
	if (hung) {
		v->kind = F_HANG;
		snprintf(v->msg, sizeof(v->msg), "no progress for %d s: a thread is stuck in the kernel", HANG_S);
		v->fatal = true;
		return;
	}
	if (WIFSIGNALED(status)) {
		v->kind = F_CRASH;
		v->sub = WTERMSIG(status);
		snprintf(v->msg, sizeof(v->msg), "the worker was killed by signal %d (%s)",
			 WTERMSIG(status), strsignal(WTERMSIG(status)));
		return;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status)) {
		v->kind = F_SETUP;
		snprintf(v->msg, sizeof(v->msg), "the worker exited with %d", WEXITSTATUS(status));
		return;
	}
	/* Everything the worker had must be released once it is gone. */
	for (int i = 0; i < 100; i++) {
		if (sg_stats(&after) || stats_settled(&before, &after))
			break;
		usleep(50000);
	}
	if (!stats_settled(&before, &after)) {
		v->kind = F_LEAK;
		snprintf(v->msg, sizeof(v->msg),
			 "after the worker exited: %llu P2P pins (%llu bytes, %llu legacy), %llu bytes of GPU memory, %llu P2P API misuses; before: %llu, %llu, %llu, %llu, %llu",
			 (unsigned long long)after.active_pins, (unsigned long long)after.pinned_bytes,
			 (unsigned long long)after.legacy_pins, (unsigned long long)after.memory_used,
			 (unsigned long long)after.api_misuse, (unsigned long long)before.active_pins,
			 (unsigned long long)before.pinned_bytes, (unsigned long long)before.legacy_pins,
			 (unsigned long long)before.memory_used, (unsigned long long)before.api_misuse);
		return;
	}
	/* Against what it was: a pin an earlier seed leaked is that seed's failure. */
	read_refcount(refcount, sizeof(refcount));
	if (strcmp(refcount, refcount_before)) {
		v->kind = F_LEAK;
		v->sub = 1;
		snprintf(v->msg, sizeof(v->msg),
			 "gdrdrv's nv_get_pages_refcount went from %s to %s while the worker ran",
			 refcount_before, refcount);
	}
}

static bool same_failure(const struct verdict *a, const struct verdict *b)
{
	if (a->kind != b->kind)
		return false;
	switch (a->kind) {
	case F_INVARIANT:
	case F_DATA:
	case F_CHILD:
	case F_CRASH:
		return a->sub == b->sub;
	default:
		return true;
	}
}

/*
 * Re-arms WARN_ONCE and friends, so that a replay can show the warning the
 * failing run printed (debugfs, mounted here if it is not).  False if not
 * possible.
 */
static bool clear_warn_once(void)
{
	static const char path[] = "/sys/kernel/debug/clear_warn_once";
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	bool ok;

	if (fd < 0 && errno == ENOENT &&
	    !mount("debugfs", "/sys/kernel/debug", "debugfs", 0, NULL))
		fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ok = write(fd, "1", 1) == 1;
	close(fd);
	return ok;
}

struct shrinker {
	uint64_t seed;
	unsigned int nthreads;
	const struct verdict *want;
	double deadline;
	unsigned int replays, tries, repeat;
	bool fatal;
};

/* Whether @ops (in order) fail like the original, in one of a few replays. */
static bool reproduces(struct shrinker *sh, const struct op *ops, size_t n)
{
	struct verdict v;

	for (unsigned int i = 0; i < sh->tries && now_s() < sh->deadline && !sh->fatal; i++) {
		if (sh->want->kind == F_KERNEL)
			clear_warn_once();
		memcpy(shm->log, ops, n * sizeof(*ops));
		shm->nlog = n;
		/* Races: run short candidates several times over, for a chance. */
		shm->repeat = n <= 2048 ? sh->repeat : 1;
		sh->replays++;
		run_worker(sh->seed, sh->nthreads, true, 0, &v);
		if (v.fatal && !sh->want->fatal)
			sh->fatal = true;
		if (same_failure(&v, sh->want))
			return true;
	}
	return false;
}

/*
 * Shortens @ops[0..*n) (the failing run's log up to the failure) to a
 * sequence that still fails: the shortest suffix window that does (the
 * whole log last), then delta debugging (drop chunks while it still
 * fails).  False if not even the whole log failed again.
 */
static bool shrink(struct shrinker *sh, struct op *ops, size_t *n)
{
	struct op *tmp = malloc(*n * sizeof(*ops));
	size_t len = *n, chunks = 2;

	if (!tmp)
		return false;
	for (size_t win = 8;; win *= 4) {
		if (win > len)
			win = len;
		if (now_s() >= sh->deadline || sh->fatal) {
			free(tmp);
			return false;
		}
		if (reproduces(sh, ops + len - win, win)) {
			memmove(ops, ops + len - win, win * sizeof(*ops));
			len = win;
			break;
		}
		if (win == len) {	/* not even the whole log */
			free(tmp);
			return false;
		}
	}
	while (len >= 2 && now_s() < sh->deadline && !sh->fatal) {
		size_t chunk = (len + chunks - 1) / chunks;
		bool reduced = false;

		for (size_t start = 0; start < len && now_s() < sh->deadline; start += chunk) {
			size_t end = start + chunk < len ? start + chunk : len, m = 0;

			for (size_t i = 0; i < len; i++)
				if (i < start || i >= end)
					tmp[m++] = ops[i];
			if (m && reproduces(sh, tmp, m)) {
				memcpy(ops, tmp, m * sizeof(*ops));
				len = m;
				chunks = chunks > 2 ? chunks - 1 : 2;
				reduced = true;
				break;
			}
		}
		if (!reduced) {
			if (chunks >= len)
				break;
			chunks = chunks * 2 < len ? chunks * 2 : len;
		}
	}
	free(tmp);
	*n = len;
	return true;
}

static void print_counts(void)
{
	printf("#   ops:");
	for (int i = 0; i < OP_COUNT; i++)
		if (shm->done[i])
			printf(" %s %llu/%llu/%llu", op_names[i], (unsigned long long)shm->ok[i],
			       (unsigned long long)(shm->done[i] - shm->skipped[i]),
			       (unsigned long long)shm->done[i]);
	printf(" (succeeded/ran/drawn)\n");
}

static void report_failure(uint64_t seed, unsigned int nthreads, struct verdict *v, bool from_file)
{
	size_t n = shm->nlog, keep;
	struct op *ops;
	struct shrinker sh = {
		.seed = seed, .nthreads = nthreads, .want = v,
		.deadline = now_s() + opt.shrink_s, .tries = nthreads > 1 ? 2 : 1,
		.repeat = from_file ? opt.repeat : nthreads > 1 ? 8 : 1,
	};
	double t0 = now_s();

	printf("# FAILED (%s): %s\n", fail_names[v->kind], v->msg);
	if (!n)
		return;
	/* The log up to the failing op, and what other threads drew meanwhile. */
	keep = !from_file && v->seq >= 0 && (size_t)v->seq < n ?
	       (size_t)v->seq + 1 + 4 * (nthreads - 1) : n;
	if (keep > n)
		keep = n;
	ops = malloc(keep * sizeof(*ops));
	if (!ops)
		return;
	memcpy(ops, shm->log, keep * sizeof(*ops));
	if (v->fatal || v->kind == F_SETUP || v->kind == F_HANG) {
		size_t from = keep > 40 ? keep - 40 : 0;

		printf("#   not shrunk (%s); the last %zu ops before it:\n",
		       v->kind == F_SETUP ? "setup failure" : "the kernel cannot be trusted after this",
		       keep - from);
		for (size_t i = from; i < keep; i++)
			print_op(&ops[i], "#     ");
		free(ops);
		return;
	}
	printf("#   shrinking %zu ops (budget %.0f s)%s...\n", keep, opt.shrink_s,
	       v->kind != F_KERNEL ? "" : clear_warn_once() ?
	       "; WARN_ONCE re-armed before each replay" :
	       "; cannot re-arm WARN_ONCE (no debugfs): a warning printed once per boot will not show again");
	fflush(stdout);
	n = keep;
	if (!shrink(&sh, ops, &n)) {
		size_t from = keep > 40 ? keep - 40 : 0;

		/* shrink() moved nothing: ops[] is still the log. */
		printf("#   the failure did not reproduce in %u replay(s) (%.0f s)%s; the last %zu ops before it:\n",
		       sh.replays, now_s() - t0,
		       sh.fatal ? " (a replay hit a fatal kernel error)" : "", keep - from);
		for (size_t i = from; i < keep; i++)
			print_op(&ops[i], "#     ");
		free(ops);
		return;
	}
	/* Once more, to show what each op returned (in a failing run, mostly). */
	sh.deadline = now_s() + 120;
	sh.tries = 1;
	sh.repeat = 1;
	reproduces(&sh, ops, n);
	memcpy(ops, shm->log, n * sizeof(*ops));
	printf("#   shortest failing sequence found: %zu op(s) (of %zu; %u replays, %.1f s%s)%s:\n",
	       n, keep, sh.replays, now_s() - t0,
	       now_s() >= sh.deadline ? ", budget spent: may shrink further" : "",
	       sh.repeat > 1 ? ", failing when its threads run it several times over" : "");
	for (size_t i = 0; i < n; i++)
		print_op(&ops[i], "#     ");
	if (!from_file)
		printf("#   reproduce: gdrdrv_fuzz -s %llu -n %llu -t %u   or: the R lines above in a file, gdrdrv_fuzz -R FILE -r %u\n",
		       (unsigned long long)seed, (unsigned long long)opt.calls, nthreads,
		       sh.repeat);
	free(ops);
}

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

int main(int argc, char **argv)
{
	unsigned int passed = 0, failed = 0;
	uint64_t total_ops = 0, total_calls = 0, max_ops;
	double start = now_s(), deadline;
	size_t replay_n = 0;
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
	setvbuf(stdout, NULL, _IOLBF, 0);
	max_ops = opt.replay_file ? 1U << 20 : opt.calls;
	shm_size = sizeof(*shm) + max_ops * sizeof(struct op);
	shm = mmap(NULL, shm_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	shm->cap = max_ops;
	sup_kmsg = kmsg_open();
	if (opt.replay_file)
		replay_n = load_replay(opt.replay_file);
	print_env();
	if (sup_kmsg < 0)
		printf("# /dev/kmsg unreadable: the kernel log is left to the VM runner\n");
	deadline = opt.time_cap > 0 ? start + opt.time_cap : 0;

	if (opt.replay_file) {
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
			passed++;
		} else {
			/* The file's ops again (the run wrote its results over them). */
			shm->nlog = load_replay(opt.replay_file);
			report_failure(opt.seed, opt.threads, &v, true);
			printf("not ok 1 - replay of %s\n", opt.replay_file);
			failed++;
		}
		printf("%u passed, %u failed\n", passed, failed);
		return failed ? 1 : 0;
	}

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
		total_ops += shm->nlog;
		total_calls += shm->calls;
		printf("# seed %llu: %u ops, %llu system calls, %.1f s%s\n", (unsigned long long)seed,
		       shm->nlog, (unsigned long long)shm->calls, now_s() - t0,
		       shm->exit_dirty ? " (exits without cleaning up)" : "");
		if (opt.verbose || v.kind != F_NONE)
			print_counts();
		if (v.kind == F_NONE) {
			printf("ok %u - seed %llu\n", i + 1, (unsigned long long)seed);
			passed++;
			continue;
		}
		report_failure(seed, opt.threads, &v, false);
		printf("not ok %u - seed %llu: %s\n", i + 1, (unsigned long long)seed, fail_names[v.kind]);
		failed++;
		if (v.fatal) {
			printf("# stopping: the kernel is not to be trusted after a fatal error\n");
			break;
		}
	}
	printf("# total: %llu ops, %llu system calls, %.1f s\n", (unsigned long long)total_ops,
	       (unsigned long long)total_calls, now_s() - start);
	printf("%u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}
