// SPDX-License-Identifier: MIT
/*
 * gdrdrv_fuzz's internal header: the operation log, the state the threads
 * share, and what each of the fuzzer's files offers the others.
 *
 *   gdrdrv_fuzz.c        options and main
 *   fuzz_state.c         shared state, devices, the fault probe, the compat entry
 *   fuzz_ops_memory.c    operations on softgpu memory
 *   fuzz_ops_ioctl.c     operations: gdrdrv's ioctls
 *   fuzz_ops_mmap.c      operations: mappings and file operations
 *   fuzz_ops_process.c   operations: fork children, passed files, reopened files
 *   fuzz_exec.c          the executor: generators, threads, the worker process
 *   fuzz_invariants.c    failures: broken invariants, the kernel log, leaks
 *   fuzz_supervisor.c    runs a worker and judges it
 *   fuzz_shrink.c        the minimizer and the failure report
 *   fuzz_describe.c      operations as text
 */
#ifndef FUZZ_H
#define FUZZ_H

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

/* Counts one system call on a device, a mapping or a process. */
#define CALL() __atomic_fetch_add(&shm->calls, 1, __ATOMIC_RELAXED)

/* ---- options ------------------------------------------------------------- */

struct options {
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
};

#if defined(__x86_64__)
#define HAVE_INT80 1
#define IA32_NR_ioctl 54
#define IA32_NR_getpid 20

#else
#define HAVE_INT80 0
#define IA32_NR_ioctl 0	/* never issued: probe_int80() says no compat entry */
#endif

enum entry { ENTRY_NATIVE, ENTRY_COMPAT };

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

struct world {
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
};

extern struct world w;		/* fuzz_state.c */

static inline void lock(void) { pthread_mutex_lock(&w.lock); }
static inline void unlock(void) { pthread_mutex_unlock(&w.lock); }

static inline char *slot_base(int i)
{
	return w.arena + (size_t)i * SLOT_SIZE;
}

static inline bool tag_used(uint16_t tag)
{
	return tag && (w.tag_used[tag / 8] >> (tag % 8)) & 1;
}

static inline uint32_t pattern(uint16_t tag, uint64_t word)
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

void fail(struct thr *t, int kind, int sub, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

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

struct held {
	int k;
	uint32_t serial;
};

enum pin_mode {
	PM_WHOLE, PM_SUB, PM_UNALIGNED, PM_PAST_END, PM_FREED, PM_UNALLOCATED,
	PM_ZERO, PM_HOST,
};

enum arg_mode { ARG_OK, ARG_NULL, ARG_NONE_PAGE, ARG_STRADDLE_NONE, ARG_READONLY };

/* ---- the supervisor ------------------------------------------------------------------- */

struct verdict {
	int kind;
	int sub;
	int32_t seq;
	bool fatal;		/* an oops or the like: replays would not be trusted */
	char msg[1024];
};


/* ---- what each file offers the others ------------------------------------------ */

/* gdrdrv_fuzz.c */
extern struct shared *shm;
extern struct options opt;
extern int sup_kmsg;		/* the supervisor's /dev/kmsg */

/* fuzz_state.c */
double now_s(void);
uint64_t splitmix(uint64_t *s);
const char *errname(int err);
int sys_err(long r);
void install_fault_handler(void);
int try_access(volatile void *addr, bool write, uint32_t *value);
bool probe_int80(void);
bool gdrdrv_tokens_allowed(void);
bool quirk_nr(unsigned int nr);
unsigned long with_size(unsigned long cmd, unsigned int size);
bool cmd_known(unsigned long cmd, enum entry entry);
int sg_call(unsigned long cmd, void *arg);
int xioctl(struct thr *t, int fd, unsigned long cmd, void *arg, size_t len,
	   enum entry entry);
unsigned long spelled(unsigned long cmd, uint32_t bits, enum entry *entry);
int pick_alloc(uint32_t sel, int state);
int pick_pin(uint32_t sel, int fd);
int pick_unmapped_pin(uint32_t sel, int fd);
uint64_t bad_handle(uint64_t r, int fd);
void push_stale(int fd, uint64_t handle);
void pin_maybe_release(int k);
void map_forget(int i);
void arena_reserve(struct thr *t, char *addr, size_t len, bool noreplace);
struct held slot_hold(const struct mapping *m);
void slot_unhold(struct held h);
void slot_reset(struct thr *t, int i);
void map_set(struct mapping *m, char *addr, size_t len, int pin, uint32_t pin_serial,
	     uint64_t gpu_off, int prot, bool disturbed, uint32_t seq);
int fd_of(uint32_t sel);
uint32_t fd_get(int s);
void fd_put(int s);
enum arg_mode arg_mode_of(uint32_t bits);
void *place_arg(struct thr *t, enum arg_mode mode, const void *arg, size_t len);
int target_handle(uint32_t sel, uint64_t r, int s, bool want_bad, __u64 *handle,
		  uint32_t *serial);

/* fuzz_invariants.c */
int kmsg_open(void);
const char *kmsg_scan(int fd, char *out, size_t len, bool *fatal);
int read_sg_stats(struct softgpu_stats *st);
bool stats_settled(const struct softgpu_stats *a, const struct softgpu_stats *b);
void read_refcount(char *buf, size_t len);

/* fuzz_ops_memory.c */
uint64_t alloc_size_of(uint64_t r);
void op_alloc(struct thr *t, struct op *op);
void op_free(struct thr *t, struct op *op);
void op_verify(struct thr *t, struct op *op);

/* fuzz_ops_ioctl.c */
enum pin_mode pin_mode_of(uint32_t bits);
void op_pin(struct thr *t, struct op *op);
void op_unpin(struct thr *t, struct op *op);
void op_info(struct thr *t, struct op *op);
void op_attr(struct thr *t, struct op *op);
void op_version(struct thr *t, struct op *op);
void op_reqtype(struct thr *t, struct op *op);
void op_badioctl(struct thr *t, struct op *op);

/* fuzz_ops_mmap.c */
extern int procmem_fd;		/* /proc/self/mem, opened by world_setup() */
int prot_of(unsigned int bits, uint64_t r);
void op_mmap(struct thr *t, struct op *op);
void op_munmap(struct thr *t, struct op *op);
void op_mremap(struct thr *t, struct op *op);
void op_mprotect(struct thr *t, struct op *op);
void op_madvise(struct thr *t, struct op *op);
void op_probe(struct thr *t, struct op *op);
void op_procmem(struct thr *t, struct op *op);
void op_msync(struct thr *t, struct op *op);
void op_fileops(struct thr *t, struct op *op);

/* fuzz_ops_process.c */
void op_fork(struct thr *t, struct op *op);
void op_fdpass(struct thr *t, struct op *op);
void op_reopen(struct thr *t, struct op *op);

/* fuzz_exec.c */
extern const char *const op_names[OP_COUNT];
extern double worker_deadline;
void worker(uint64_t seed, unsigned int nthreads, bool replay);

/* fuzz_supervisor.c */
extern const char *const fail_names[];
void run_worker(uint64_t seed, unsigned int nthreads, bool replay, double deadline,
		struct verdict *v);

/* fuzz_shrink.c */
void report_failure(uint64_t seed, unsigned int nthreads, struct verdict *v, bool from_file);

/* fuzz_describe.c */
void print_op(const struct op *op, const char *prefix);
void print_counts(void);

#endif /* FUZZ_H */
