// SPDX-License-Identifier: MIT
/*
 * gdrdrv_race - threads hammering one gdrdrv handle from several sides at
 * once, checking after every round that no mapping outlived its pin.
 *
 * Each scenario repeats one round many times.  A round pins a fresh
 * allocation filled with a pattern of its own, lets two to four threads
 * race (each after a random, seeded delay of up to about one mmap), then
 * checks:
 *  - data: every access through a mapping either faults (SIGBUS/SIGSEGV) or
 *    reads the pin's own pattern, and only while the pin legitimately lives.
 *    After the race the GPU memory is freed and allocated again and the new
 *    allocation filled with another pattern: a mapping that survived must
 *    never show it.  A read that breaks these rules is a stale mapping.
 *  - the driver's state: GET_CB_FLAG, GET_INFO_V2's mapping type and the
 *    handle's existence agree with what the threads did;
 *  - softgpu's counters: no pin or GPU memory left behind after the round.
 * Each scenario runs in a child process (see ktest.h); afterwards its
 * softgpu counters and the kernel log (oops, WARNING, PAT complaints) are
 * checked too.
 *
 * Scenarios (what races on one handle):
 *   unpin-vs-mmap    UNPIN_BUFFER and mmap()
 *   free-vs-mmap     softgpu FREE of the pinned memory and mmap()
 *   free-vs-munmap   softgpu FREE and munmap()
 *   unpin-vs-munmap  UNPIN_BUFFER and munmap()
 *   close-vs-all     close() of the gdrdrv file and, by turns, mmap or
 *                    munmap, with UNPIN and FREE
 * Where munmap races, its thread reads the mapping until its call (reads
 * against the zap), and the UNPIN or FREE thread reads it once its call
 * returned (no read may work once the pin is dead).
 * Legacy pins: FREE fires the free callback, after which no mapping may
 * work.  Persistent pins: FREE leaves the memory pinned, and the mapping
 * must keep reading it, unchanged, until unpin.
 *
 * The last line is "N passed, N failed"; the exit status is non-zero when a
 * scenario saw a stale mapping or any other failure.  Run it as root in a
 * test VM with softgpu and gdrdrv loaded; run_races.sh runs it in every
 * module configuration.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ktest.h"

#define RACE_PAGES 2			/* GPU pages per pin */
#define RACE_SIZE (RACE_PAGES * KT_GPU_PAGE)
#define RACE_WORDS (RACE_SIZE / 4)
#define MAX_WORKERS 4
#define NPROBES 4			/* words checked after a round */
#define FAILURES_SHOWN 5		/* per scenario, without -v */

/* ---- options and results -------------------------------------------------- */

struct options {
	unsigned long iterations;
	unsigned long long seed;
	unsigned int time_cap_s;	/* per scenario; 0: none */
	long delay_ns;			/* -1: calibrate */
	bool verbose;
};

static struct options opt = { .iterations = 1000, .delay_ns = -1 };

/* Written by the scenario's child, read by the parent: shared memory. */
struct scenario_result {
	unsigned long iterations;
	unsigned long stale;		/* rounds with a stale mapping */
	unsigned long foreign;		/* ... that read the new allocation */
	unsigned long failures;		/* rounds with any other failure */
	unsigned long mapped;		/* rounds whose racing mmap succeeded */
	unsigned long touch_reads;	/* reads through the mapping during races */
	unsigned long touch_faults;	/* faults they took */
	unsigned long delay_ns;
	double race_seconds;		/* of which the racing calls */
	double wake_seconds;		/* ... waking the threads (the slowest) */
	double call_seconds;		/* ... in the longest racing call */
	bool time_capped;
	bool done;
	double seconds;
};

static struct scenario_result *result;

/* ---- small helpers -------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("pause" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

static void spin(unsigned long loops)
{
	for (unsigned long i = 0; i < loops; i++)
		cpu_relax();
}

static double spins_per_ns;

static void calibrate_spin(void)
{
	unsigned long loops = 20000;
	double t0 = now_s(), dt;

	spin(loops);
	dt = now_s() - t0;
	spins_per_ns = dt > 0 ? loops / (dt * 1e9) : 1.0;
}

/* Word @i of the pattern an allocation tagged @tag is filled with. */
static inline uint32_t pattern(uint32_t tag, size_t i)
{
	/* Odd multipliers: two tags never agree on any word. */
	return tag * 0x9e3779b1u ^ (uint32_t)i * 0x85ebca6bu ^ 0x5a17c0deu;
}

static void futex_wait(unsigned int *word, unsigned int val)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(unsigned int *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static unsigned int load(const unsigned int *word)
{
	return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

/* ---- one scenario's context ---------------------------------------------- */

enum op { OP_NONE, OP_MMAP, OP_MUNMAP, OP_UNPIN, OP_FREE, OP_CLOSE };

static const char *const op_names[] = {
	[OP_NONE] = "none", [OP_MMAP] = "mmap", [OP_MUNMAP] = "munmap",
	[OP_UNPIN] = "UNPIN", [OP_FREE] = "FREE", [OP_CLOSE] = "close",
};

struct ctx;

/* What a thread saw reading the mapping during one round. */
struct touch_log {
	unsigned long reads, faults;
	unsigned long after_death;	/* reads that worked after the pin died */
	unsigned long wrong;		/* reads of anything but the pin's pattern */
	size_t first_word;
	uint32_t first_value;
};

struct worker {
	pthread_t thread;
	struct ctx *c;
	enum op op;
	unsigned long delay;		/* spin loops before the call */
	unsigned int seen;		/* last round started */
	int err;			/* the call's errno, 0 if it worked */
	double woke, called, returned;	/* when, this round */
	struct touch_log touch;
};

struct ctx {
	const char *scenario;
	int sg, gd, stats_fd;
	bool persistent;
	uint64_t base_pins, base_memory;
	unsigned long delay_loops;	/* upper bound of a racer's delay */
	uint64_t seed;

	/* The round in progress. */
	unsigned long iter;
	uint64_t rng;
	uint64_t va, handle;
	uint32_t *map;			/* the mapping munmap races on (and reads) */
	uint32_t *mmap_result;		/* what the racing mmap returned */
	uint32_t tag_old, tag_new;
	bool round_stale, round_foreign, round_failed;

	/* Synchronisation with the workers. */
	unsigned int start;		/* round counter: the threads' go */
	unsigned int done;		/* threads finished with the round */
	unsigned int pin_dead;		/* set once the pin may no longer be used */
	bool quit;
	unsigned int nworkers;
	struct worker workers[MAX_WORKERS];
	bool touch;			/* the threads read c->map around their calls */

	uint32_t buf[RACE_WORDS];	/* pattern staging */
};

static void report(struct ctx *c, const char *kind, const char *fmt, va_list ap)
{
	static unsigned long shown;
	char msg[400];

	if (!opt.verbose && shown >= FAILURES_SHOWN)
		return;
	shown++;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	printf("# %s round %lu: %s: %s\n", c->scenario, c->iter, kind, msg);
}

/* A mapping worked where it must not, or read what it must not. */
static void __attribute__((format(printf, 2, 3))) stale(struct ctx *c, const char *fmt, ...)
{
	va_list ap;

	c->round_stale = true;
	va_start(ap, fmt);
	report(c, "STALE MAPPING", fmt, ap);
	va_end(ap);
}

static void __attribute__((format(printf, 2, 3))) failure(struct ctx *c, const char *fmt, ...)
{
	va_list ap;

	c->round_failed = true;
	va_start(ap, fmt);
	report(c, "FAILURE", fmt, ap);
	va_end(ap);
}

/* ---- softgpu and gdrdrv, returning errors instead of ending the child ---- */

static void fill(struct ctx *c, uint64_t va, uint32_t tag)
{
	for (size_t i = 0; i < RACE_WORDS; i++)
		c->buf[i] = pattern(tag, i);
	sg_write(c->sg, va, c->buf, RACE_SIZE);
}

static int sg_free_err(int sg, uint64_t va)
{
	struct softgpu_free f = { .va = va };

	return sg_ioctl(sg, SOFTGPU_IOC_FREE, &f);
}

static struct softgpu_stats stats_now(struct ctx *c)
{
	struct softgpu_stats st;

	KT_EXPECT_OK(sg_ioctl(c->stats_fd, SOFTGPU_IOC_GET_STATS, &st));
	return st;
}

/* What reading a mapping gave. */
struct probe {
	unsigned int faults, old, new_, other;
	size_t word;			/* of the first read that was not the pin's */
	uint32_t value;
};

/* Reads NPROBES words: the first and last host page of each GPU page. */
static struct probe probe(struct ctx *c, const uint32_t *map)
{
	size_t page_words = (size_t)sysconf(_SC_PAGESIZE) / 4;
	size_t words[NPROBES] = {
		0, KT_GPU_PAGE / 4 - page_words,
		KT_GPU_PAGE / 4, RACE_WORDS - page_words,
	};
	struct probe p = { 0 };

	for (int i = 0; i < NPROBES; i++) {
		size_t w = words[i] + splitmix64(&c->rng) % page_words;
		uint32_t v = 0;

		if (kt_try_read32(&map[w], &v)) {
			p.faults++;
			continue;
		}
		if (v == pattern(c->tag_old, w)) {
			p.old++;
			continue;
		}
		if (!p.new_ && !p.other) {
			p.word = w;
			p.value = v;
		}
		if (v == pattern(c->tag_new, w))
			p.new_++;
		else
			p.other++;
	}
	return p;
}

static const char *probe_says(const struct probe *p, char *buf, size_t len)
{
	snprintf(buf, len, "%u of %d reads worked (%u the pin's pattern, %u the new allocation's, %u other)",
		 NPROBES - p->faults, NPROBES, p->old, p->new_, p->other);
	return buf;
}

/* The pin is gone: every access must fault. */
static void expect_dead(struct ctx *c, const uint32_t *map, const char *when)
{
	struct probe p = probe(c, map);
	char buf[160];

	if (p.faults == NPROBES)
		return;
	if (p.new_)
		c->round_foreign = true;
	stale(c, "%s: %s%s", when, probe_says(&p, buf, sizeof(buf)),
	      p.new_ ? ": ANOTHER ALLOCATION'S BYTES" : "");
}

/* The pin lives: every access must read its pattern. */
static void expect_live(struct ctx *c, const uint32_t *map, const char *when)
{
	struct probe p = probe(c, map);
	char buf[160];

	if (p.old == NPROBES)
		return;
	if (p.new_ || p.other) {
		if (p.new_)
			c->round_foreign = true;
		stale(c, "%s: %s; word %zu is %#x, the pin's is %#x", when,
		      probe_says(&p, buf, sizeof(buf)), p.word, p.value,
		      pattern(c->tag_old, p.word));
	} else {
		failure(c, "%s: the pin lives but its mapping faults: %s", when,
			probe_says(&p, buf, sizeof(buf)));
	}
}

static void expect_info(struct ctx *c, int gd, uint32_t want_type, const char *when)
{
	struct gdrdrv_get_info_v2 info;
	int err = gd_info(gd, c->handle, &info);

	if (err)
		failure(c, "%s: GET_INFO_V2: %s", when, kt_errname(err));
	else if (info.mapping_type != want_type)
		failure(c, "%s: GET_INFO_V2 says mapping type %u, want %u", when,
			info.mapping_type, want_type);
}

static void expect_cb_flag(struct ctx *c, uint32_t want, const char *when)
{
	uint32_t flag = 0;
	int err = gd_cb_flag(c->gd, c->handle, &flag);

	if (err)
		failure(c, "%s: GET_CB_FLAG: %s", when, kt_errname(err));
	else if (flag != want)
		failure(c, "%s: GET_CB_FLAG says %u, want %u", when, flag, want);
}

static void expect_no_handle(struct ctx *c, int gd, const char *when)
{
	struct gdrdrv_get_info_v2 info;
	uint32_t flag;
	int err = gd_info(gd, c->handle, &info);

	if (err != EINVAL)
		failure(c, "%s: GET_INFO_V2 of the unpinned handle: %s, want EINVAL",
			when, kt_errname(err));
	err = gd_cb_flag(gd, c->handle, &flag);
	if (err != EINVAL)
		failure(c, "%s: GET_CB_FLAG of the unpinned handle: %s, want EINVAL",
			when, kt_errname(err));
}

static void expect_ok(struct ctx *c, int err, const char *what)
{
	if (err)
		failure(c, "%s: %s", what, kt_errname(err));
}

/* ---- the racing threads --------------------------------------------------- */

/* One read of the mapping during a race, judged and logged. */
static bool touch_once(struct worker *w, size_t word)
{
	struct ctx *c = w->c;
	struct touch_log *t = &w->touch;
	bool dead = load(&c->pin_dead);
	uint32_t v;

	if (kt_try_read32(&c->map[word], &v)) {
		t->faults++;
		return false;
	}
	t->reads++;
	if (v != pattern(c->tag_old, word) || dead) {
		if (!t->after_death && !t->wrong) {
			t->first_word = word;
			t->first_value = v;
		}
		if (dead)
			t->after_death++;
		else
			t->wrong++;
	}
	return true;
}

/*
 * The munmap thread spends its delay reading the mapping, host page after
 * host page (each faults in on its own), so reads race the zap of UNPIN or
 * FREE.  Three faults in a row: the mapping is dead and stays so; stop.
 */
static void touch_for(struct worker *w, double seconds)
{
	size_t page_words = (size_t)sysconf(_SC_PAGESIZE) / 4, word = 0;
	double end = now_s() + seconds;
	unsigned int faults = 0;

	do {
		word = (word + page_words + 1) % RACE_WORDS;
		faults = touch_once(w, word) ? 0 : faults + 1;
	} while (faults < 3 && now_s() < end);
}

/* After UNPIN (or FREE of a legacy pin) returned: reads must fault. */
static void touch_after(struct worker *w)
{
	size_t page_words = (size_t)sysconf(_SC_PAGESIZE) / 4;

	touch_once(w, 0);
	touch_once(w, RACE_WORDS - page_words);
}

static void run_op(struct worker *w)
{
	struct ctx *c = w->c;
	void *p;

	w->err = 0;
	switch (w->op) {
	case OP_NONE:
		return;
	case OP_MMAP:
		c->mmap_result = gd_map(c->gd, c->handle, RACE_SIZE, &w->err);
		break;
	case OP_MUNMAP:
		p = c->map;
		if (munmap(p, RACE_SIZE))
			w->err = errno;
		break;
	case OP_UNPIN:
		w->err = gd_unpin(c->gd, c->handle);
		if (!w->err)
			__atomic_store_n(&c->pin_dead, 1, __ATOMIC_RELEASE);
		if (!w->err && c->touch)
			touch_after(w);
		break;
	case OP_FREE:
		w->err = sg_free_err(c->sg, c->va);
		/* Legacy: the callback has run, or the pin was already gone. */
		if (!w->err && !c->persistent)
			__atomic_store_n(&c->pin_dead, 1, __ATOMIC_RELEASE);
		if (!w->err && !c->persistent && c->touch)
			touch_after(w);
		break;
	case OP_CLOSE:
		if (close(c->gd))
			w->err = errno;
		break;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct ctx *c = w->c;

	for (;;) {
		unsigned int spins = 0;

		/* Spin a little (the next round may be close), then sleep. */
		while (load(&c->start) == w->seen) {
			if (++spins < 1000)
				cpu_relax();
			else
				futex_wait(&c->start, w->seen);
		}
		w->seen = load(&c->start);
		if (__atomic_load_n(&c->quit, __ATOMIC_ACQUIRE))
			return NULL;
		w->woke = now_s();
		if (w->op == OP_MUNMAP && c->touch)
			touch_for(w, w->delay / spins_per_ns / 1e9);
		else
			spin(w->delay);
		w->called = now_s();
		run_op(w);
		w->returned = now_s();
		__atomic_add_fetch(&c->done, 1, __ATOMIC_ACQ_REL);
		futex_wake(&c->done);
	}
}

/*
 * Runs one round: the listed calls at once, each in its thread after its
 * random delay.  Measured: the wakeups themselves spread the starts by
 * about as much as the delays do, and spinning for a common start instead
 * starves someone when there are more threads than CPUs.
 */
static void race(struct ctx *c, const enum op *ops, unsigned int nops)
{
	unsigned int d;
	double t0, wake = 0, call = 0;

	KT_ASSERT(nops <= c->nworkers, "%u calls for %u threads", nops, c->nworkers);
	for (unsigned int i = 0; i < c->nworkers; i++) {
		struct worker *w = &c->workers[i];

		w->op = i < nops ? ops[i] : OP_NONE;
		w->err = 0;
		w->delay = c->delay_loops ? splitmix64(&c->rng) % (c->delay_loops + 1) : 0;
		memset(&w->touch, 0, sizeof(w->touch));
	}
	c->mmap_result = NULL;
	c->pin_dead = 0;
	c->done = 0;
	t0 = now_s();
	__atomic_add_fetch(&c->start, 1, __ATOMIC_ACQ_REL);
	futex_wake(&c->start);
	while ((d = load(&c->done)) != c->nworkers)
		futex_wait(&c->done, d);
	result->race_seconds += now_s() - t0;
	for (unsigned int i = 0; i < nops; i++) {
		struct worker *w = &c->workers[i];

		if (w->woke - t0 > wake)
			wake = w->woke - t0;
		if (w->returned - w->called > call)
			call = w->returned - w->called;
	}
	result->wake_seconds += wake;
	result->call_seconds += call;
}

static int op_err(struct ctx *c, enum op op)
{
	for (unsigned int i = 0; i < c->nworkers; i++)
		if (c->workers[i].op == op)
			return c->workers[i].err;
	return 0;
}

static void check_op(struct ctx *c, enum op op)
{
	int err = op_err(c, op);

	if (err)
		failure(c, "%s failed: %s", op_names[op], kt_errname(err));
}

/* What the threads read through the mapping during the race. */
static void check_touch(struct ctx *c)
{
	struct touch_log t = { 0 };

	for (unsigned int i = 0; i < c->nworkers; i++) {
		const struct touch_log *w = &c->workers[i].touch;

		if ((w->after_death || w->wrong) && !t.after_death && !t.wrong) {
			t.first_word = w->first_word;
			t.first_value = w->first_value;
		}
		t.reads += w->reads;
		t.faults += w->faults;
		t.after_death += w->after_death;
		t.wrong += w->wrong;
	}
	result->touch_reads += t.reads;
	result->touch_faults += t.faults;
	if (t.after_death)
		stale(c, "the mapping was read %lu time(s) after the pin died (word %zu: %#x, the pin's %#x)",
		      t.after_death, t.first_word, t.first_value,
		      pattern(c->tag_old, t.first_word));
	else if (t.wrong)
		stale(c, "%lu read(s) of wrong values while the pin lived (word %zu: %#x, want %#x)",
		      t.wrong, t.first_word, t.first_value, pattern(c->tag_old, t.first_word));
}

/* ---- rounds --------------------------------------------------------------- */

static int pin_round(struct ctx *c, int gd)
{
	int err;

	c->va = sg_alloc(c->sg, RACE_SIZE);
	fill(c, c->va, c->tag_old);
	err = gd_pin(gd, c->va, RACE_SIZE, 0, &c->handle);
	if (err) {
		failure(c, "PIN_BUFFER_V2: %s", kt_errname(err));
		sg_free(c->sg, c->va);
	}
	return err;
}

/* A new allocation, likely on the memory just freed, with the new pattern. */
static uint64_t reallocate(struct ctx *c)
{
	uint64_t va = sg_alloc(c->sg, RACE_SIZE);

	fill(c, va, c->tag_new);
	return va;
}

static uint32_t *map_now(struct ctx *c, int gd)
{
	int err;
	uint32_t *map = gd_map(gd, c->handle, RACE_SIZE, &err);

	if (!map)
		failure(c, "mmap of a live pin: %s", kt_errname(err));
	return map;
}

static void unmap(struct ctx *c, uint32_t *map)
{
	if (map && munmap(map, RACE_SIZE))
		failure(c, "munmap: %s", strerror(errno));
}

/* Nothing of the round may be left: no pin, no GPU memory. */
static void check_released(struct ctx *c)
{
	struct softgpu_stats st = stats_now(c);

	if (st.active_pins != c->base_pins)
		failure(c, "%llu P2P pin(s) left after the round",
			(unsigned long long)(st.active_pins - c->base_pins));
	else if (st.memory_used != c->base_memory)
		failure(c, "%lld bytes of GPU memory left after the round",
			(long long)(st.memory_used - c->base_memory));
}

/* UNPIN and mmap at once: whoever wins, no mapping may work afterwards. */
static void round_unpin_vs_mmap(struct ctx *c)
{
	static const enum op ops[] = { OP_MMAP, OP_UNPIN };
	uint32_t *map;
	uint64_t va2;

	if (pin_round(c, c->gd))
		return;
	race(c, ops, 2);
	map = c->mmap_result;
	check_op(c, OP_UNPIN);
	if (op_err(c, OP_UNPIN))
		gd_unpin(c->gd, c->handle);
	if (map) {
		result->mapped++;
		expect_dead(c, map, "mapping after UNPIN returned");
	}
	expect_no_handle(c, c->gd, "after UNPIN");
	sg_free(c->sg, c->va);
	va2 = reallocate(c);
	if (map) {
		expect_dead(c, map, "mapping after the memory was freed and reallocated");
		unmap(c, map);
	}
	sg_free(c->sg, va2);
}

/*
 * FREE of the pinned memory and mmap at once.  Legacy pins: the callback
 * invalidates the pin, so no mapping may work after FREE returns.
 * Persistent pins: the pin keeps the memory, and the mapping must show it.
 */
static void round_free_vs_mmap(struct ctx *c)
{
	static const enum op ops[] = { OP_MMAP, OP_FREE };
	uint32_t *map;
	uint64_t va2;

	if (pin_round(c, c->gd))
		return;
	race(c, ops, 2);
	map = c->mmap_result;
	check_op(c, OP_FREE);
	if (map)
		result->mapped++;
	if (c->persistent) {
		expect_cb_flag(c, 0, "persistent pin after FREE");
		if (!map)
			failure(c, "mmap of a persistent pin beside FREE: %s",
				kt_errname(op_err(c, OP_MMAP)));
		else
			expect_live(c, map, "persistent pin's mapping after FREE");
	} else {
		expect_cb_flag(c, 1, "legacy pin after FREE returned");
		if (map)
			expect_dead(c, map, "mapping after FREE returned (the free callback ran)");
	}
	if (map && c->persistent)
		expect_info(c, c->gd, gd_expected_type(), "mapped, after FREE");
	va2 = reallocate(c);
	if (map) {
		if (c->persistent)
			expect_live(c, map, "persistent pin's mapping after its memory was reallocated");
		else
			expect_dead(c, map, "mapping after the memory was freed and reallocated");
	}
	expect_ok(c, gd_unpin(c->gd, c->handle), "UNPIN after the race");
	if (map) {
		expect_dead(c, map, "mapping after UNPIN");
		unmap(c, map);
	}
	sg_free(c->sg, va2);
}

/*
 * FREE and munmap at once, reads around them (the free callback's zap
 * against the VMA's teardown: PAT bookkeeping).
 */
static void round_free_vs_munmap(struct ctx *c)
{
	static const enum op ops[] = { OP_MUNMAP, OP_FREE };
	uint32_t *map;
	uint64_t va2;
	int err;

	if (pin_round(c, c->gd))
		return;
	c->map = map_now(c, c->gd);
	if (!c->map) {
		gd_unpin(c->gd, c->handle);
		sg_free(c->sg, c->va);
		return;
	}
	expect_live(c, c->map, "fresh mapping");
	c->touch = true;
	race(c, ops, 2);
	check_op(c, OP_MUNMAP);
	check_op(c, OP_FREE);
	check_touch(c);
	expect_cb_flag(c, !c->persistent, "after FREE");
	expect_info(c, c->gd, GDRDRV_MR_NONE, "after munmap");
	if (c->persistent) {
		/* The pin still holds the memory: it maps and reads as before. */
		map = map_now(c, c->gd);
		if (map)
			expect_live(c, map, "persistent pin mapped again after FREE");
		va2 = reallocate(c);
		if (map)
			expect_live(c, map, "persistent pin's mapping after its memory was reallocated");
	} else {
		map = gd_map(c->gd, c->handle, RACE_SIZE, &err);
		if (map) {
			failure(c, "mmap of a pin whose memory was freed worked");
			expect_dead(c, map, "mapping made after the free callback");
		}
		va2 = reallocate(c);
		if (map)
			expect_dead(c, map, "mapping made after the free callback, memory reallocated");
	}
	expect_ok(c, gd_unpin(c->gd, c->handle), "UNPIN after the race");
	if (map) {
		expect_dead(c, map, "mapping after UNPIN");
		unmap(c, map);
	}
	sg_free(c->sg, va2);
}

/* UNPIN and munmap at once, reads around them. */
static void round_unpin_vs_munmap(struct ctx *c)
{
	static const enum op ops[] = { OP_MUNMAP, OP_UNPIN };

	if (pin_round(c, c->gd))
		return;
	c->map = map_now(c, c->gd);
	if (!c->map) {
		gd_unpin(c->gd, c->handle);
		sg_free(c->sg, c->va);
		return;
	}
	expect_live(c, c->map, "fresh mapping");
	c->touch = true;
	race(c, ops, 2);
	check_op(c, OP_MUNMAP);
	check_op(c, OP_UNPIN);
	if (op_err(c, OP_UNPIN))
		gd_unpin(c->gd, c->handle);
	check_touch(c);
	expect_no_handle(c, c->gd, "after UNPIN");
	sg_free(c->sg, c->va);
}

/*
 * close() of the gdrdrv file against everything else on its one handle.
 * By turns (seeded): mmap + UNPIN + FREE, or munmap + UNPIN + FREE with
 * reads.  A mapping holds the file, so after close the pin lives on while
 * it is mapped, unless UNPIN got in first (or FREE, with legacy pins).
 */
static void round_close_vs_all(struct ctx *c)
{
	static const enum op with_mmap[] = { OP_CLOSE, OP_MMAP, OP_UNPIN, OP_FREE };
	static const enum op with_munmap[] = { OP_CLOSE, OP_MUNMAP, OP_UNPIN, OP_FREE };
	bool munmap_turn = splitmix64(&c->rng) & 1;
	uint32_t *map = NULL;
	uint64_t va2;
	int err;

	c->gd = gd_open();
	if (pin_round(c, c->gd)) {
		close(c->gd);
		return;
	}
	if (munmap_turn) {
		c->map = map_now(c, c->gd);
		if (!c->map) {
			close(c->gd);
			sg_free(c->sg, c->va);
			return;
		}
		expect_live(c, c->map, "fresh mapping");
		c->touch = true;
		race(c, with_munmap, 4);
		check_op(c, OP_MUNMAP);
		check_touch(c);
	} else {
		race(c, with_mmap, 4);
		map = c->mmap_result;
		err = op_err(c, OP_MMAP);
		if (map)
			result->mapped++;
		else if (err != EBADF && err != EINVAL)
			failure(c, "mmap beside close: %s, want success, EBADF or EINVAL",
				kt_errname(err));
	}
	check_op(c, OP_CLOSE);
	check_op(c, OP_FREE);
	err = op_err(c, OP_UNPIN);
	if (err && err != EBADF)
		failure(c, "UNPIN beside close: %s, want success or EBADF", kt_errname(err));
	if (map) {
		/* Alive only if nothing killed it: the mapping holds the file. */
		bool alive = c->persistent && err;

		if (alive)
			expect_live(c, map, "mapping after close (pin kept by the mapping)");
		else
			expect_dead(c, map, "mapping after close, UNPIN or FREE killed the pin");
		va2 = reallocate(c);
		if (alive)
			expect_live(c, map, "mapping after close, memory reallocated");
		else
			expect_dead(c, map, "mapping after close, memory reallocated");
		unmap(c, map);	/* the last reference to the file: releases the pin */
	} else {
		va2 = reallocate(c);
	}
	sg_free(c->sg, va2);
}

/* ---- scenarios ------------------------------------------------------------ */

struct scenario {
	const char *name;
	void (*round)(struct ctx *c);
	unsigned int threads;		/* racing calls, one thread each */
	const char *what;
};

static const struct scenario scenarios[] = {
	{ "unpin-vs-mmap", round_unpin_vs_mmap, 2,
	  "UNPIN_BUFFER racing mmap() of the same handle" },
	{ "free-vs-mmap", round_free_vs_mmap, 2,
	  "softgpu FREE of the pinned memory racing mmap()" },
	{ "free-vs-munmap", round_free_vs_munmap, 2,
	  "softgpu FREE racing munmap() of a mapping being read" },
	{ "unpin-vs-munmap", round_unpin_vs_munmap, 2,
	  "UNPIN_BUFFER racing munmap() of a mapping being read" },
	{ "close-vs-all", round_close_vs_all, 4,
	  "close() of the gdrdrv file racing mmap or munmap, UNPIN and FREE" },
};
#define NSCENARIOS (sizeof(scenarios) / sizeof(scenarios[0]))

static const struct scenario *current;

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* About as long as one mmap() and munmap() of a pin (median): the delay window. */
static unsigned long calibrate_delay(void)
{
	int sg = sg_open(), gd = gd_open();
	uint64_t va = sg_alloc(sg, RACE_SIZE), h;
	double t[13];

	KT_EXPECT_OK(gd_pin(gd, va, RACE_SIZE, 0, &h));
	for (int i = -4; i < 13; i++) {
		double t0 = now_s();
		int err;
		void *map = gd_map(gd, h, RACE_SIZE, &err);

		KT_ASSERT(map, "calibration mmap: %s", kt_errname(err));
		munmap(map, RACE_SIZE);
		if (i >= 0)
			t[i] = now_s() - t0;
	}
	KT_EXPECT_OK(gd_unpin(gd, h));
	sg_free(sg, va);
	close(gd);
	close(sg);
	qsort(t, 13, sizeof(t[0]), cmp_double);
	return (unsigned long)(t[6] * 1e9);
}

static unsigned long delay_ns;

static void run_calibration(void)
{
	result->delay_ns = calibrate_delay();
}

static void run_scenario(void)
{
	const struct scenario *s = current;
	unsigned int idx = (unsigned int)(s - scenarios);
	struct softgpu_stats st;
	struct ctx *c;
	double t0 = now_s();

	c = calloc(1, sizeof(*c));
	KT_ASSERT(c, "out of memory");
	c->scenario = s->name;
	c->sg = sg_open();
	c->gd = gd_open();
	c->stats_fd = sg_open();
	c->persistent = kt_env.persistent;
	c->seed = opt.seed ^ (0x51ed270b7e4dbe27ULL * (idx + 1));
	st = stats_now(c);
	c->base_pins = st.active_pins;
	c->base_memory = st.memory_used;

	result->delay_ns = delay_ns;
	c->delay_loops = (unsigned long)(result->delay_ns * spins_per_ns);
	if (!strcmp(s->name, "close-vs-all"))
		close(c->gd);	/* each round opens its own */

	c->nworkers = s->threads;
	for (unsigned int i = 0; i < c->nworkers; i++) {
		c->workers[i].c = c;
		KT_ASSERT(!pthread_create(&c->workers[i].thread, NULL, worker_main,
					  &c->workers[i]), "pthread_create");
	}

	for (unsigned long i = 0; i < opt.iterations; i++) {
		if (opt.time_cap_s && now_s() - t0 >= opt.time_cap_s) {
			result->time_capped = true;
			break;
		}
		c->iter = i;
		c->rng = c->seed ^ (i * 0x2545f4914f6cdd1dULL);
		/* Distinct per round and per side; XOR keeps distinct tags distinct. */
		c->tag_old = (uint32_t)(2 * i) ^ (uint32_t)c->seed;
		c->tag_new = (uint32_t)(2 * i + 1) ^ (uint32_t)c->seed;
		c->round_stale = c->round_foreign = c->round_failed = false;
		c->map = NULL;
		c->touch = false;
		s->round(c);
		check_released(c);
		result->iterations++;
		result->stale += c->round_stale;
		result->foreign += c->round_foreign;
		result->failures += c->round_failed;
		result->seconds = now_s() - t0;
	}

	__atomic_store_n(&c->quit, true, __ATOMIC_RELEASE);
	__atomic_add_fetch(&c->start, 1, __ATOMIC_ACQ_REL);
	futex_wake(&c->start);
	for (unsigned int i = 0; i < c->nworkers; i++)
		pthread_join(c->workers[i].thread, NULL);
	result->seconds = now_s() - t0;
	result->done = true;
	if (result->stale || result->failures)
		_exit(1);
}

/* ---- main ----------------------------------------------------------------- */

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [-n ITERATIONS] [-s SEED] [-t SECONDS] [-d NS] [-v] [-l] [SCENARIO... | all]\n"
		"  -n N     rounds per scenario (default 1000)\n"
		"  -s SEED  seed of the threads' delays and the probed words (default: from the clock; printed)\n"
		"  -t S     stop each scenario after S seconds; its line says how many rounds ran\n"
		"  -d NS    longest delay before a racing call, in ns (default: one mmap+munmap, measured)\n"
		"  -v       print every failing round (default: the first %d per scenario)\n"
		"  -l       list the scenarios\n"
		"Exit status: 0 when no scenario saw a stale mapping or other failure.\n",
		prog, FAILURES_SHOWN);
}

static bool wanted(const char *name, int argc, char **argv)
{
	if (optind >= argc)
		return true;
	for (int i = optind; i < argc; i++)
		if (!strcmp(argv[i], "all") || !strcmp(argv[i], name))
			return true;
	return false;
}

/* Where main goes on after parse_options() and prepare(): on, or exit with a status. */
#define CONTINUE (-1)

/* Reads the options into opt: CONTINUE, or the exit status (-l, -h, a bad option or scenario). */
static int parse_options(int argc, char **argv)
{
	bool seeded = false;
	int o;

	while ((o = getopt(argc, argv, "n:s:t:d:vlh")) != -1) {
		switch (o) {
		case 'n':
			opt.iterations = strtoul(optarg, NULL, 0);
			break;
		case 's':
			opt.seed = strtoull(optarg, NULL, 0);
			seeded = true;
			break;
		case 't':
			opt.time_cap_s = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'd':
			opt.delay_ns = strtol(optarg, NULL, 0);
			break;
		case 'v':
			opt.verbose = true;
			break;
		case 'l':
			for (size_t i = 0; i < NSCENARIOS; i++)
				printf("%-16s %s\n", scenarios[i].name, scenarios[i].what);
			return 0;
		case 'h':
			usage(stdout, argv[0]);
			return 0;
		default:
			usage(stderr, argv[0]);
			return 2;
		}
	}
	for (int i = optind; i < argc; i++) {
		bool known = !strcmp(argv[i], "all");

		for (size_t j = 0; j < NSCENARIOS; j++)
			known |= !strcmp(argv[i], scenarios[j].name);
		if (!known) {
			fprintf(stderr, "gdrdrv_race: unknown scenario '%s' (-l lists them)\n", argv[i]);
			return 2;
		}
	}
	if (!seeded)
		opt.seed = (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 32);
	return CONTINUE;
}

/* The devices, the shared result page and the delays: CONTINUE, or the exit status. */
static int prepare(void)
{
	int ret = kt_setup();

	if (ret)
		return ret;
	kt_print_env();
	if (!kt_env.gdrdrv) {
		printf("gdrdrv_race: %s\n", kt_env.why_no_gdrdrv);
		return 2;
	}
	result = mmap(NULL, sizeof(*result), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (result == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	calibrate_spin();
	if (opt.delay_ns < 0) {
		/* In a child, as the scenarios: the helpers end the process on errors. */
		struct kt_test t = { .name = "calibration", .fn = run_calibration, .needs_gdrdrv = true };
		const char *why;

		if (kt_run_test(&t, 300, &why) != KT_RESULT_PASS) {
			printf("gdrdrv_race: calibrating the delays failed: %s\n", why);
			printf("0 passed, 1 failed\n");
			return 1;
		}
		delay_ns = result->delay_ns;
	} else {
		delay_ns = (unsigned long)opt.delay_ns;
	}
	return CONTINUE;
}

/* Runs scenario @s in a child and prints its line: KT_RESULT_*. */
static int run_and_report(const struct scenario *s)
{
	struct kt_test t = { .name = s->name, .fn = run_scenario, .needs_gdrdrv = true };
	const char *why;
	int r;

	current = s;
	memset(result, 0, sizeof(*result));
	/* The child's own cap, with room to finish its last round. */
	r = kt_run_test(&t, opt.time_cap_s ? opt.time_cap_s + 600 : 0, &why);
	if (r == KT_RESULT_SKIP) {
		printf("skip %s: %s\n", s->name, why);
		return r;
	}
	if (r != KT_RESULT_PASS && why[0])
		printf("# %s: %s\n", s->name, why);
	if (r != KT_RESULT_PASS && result->done && !result->stale && !result->failures)
		result->failures++;	/* the harness's own checks */
	printf("%s %s: %lu iterations, %lu stale mappings (%lu read another allocation's bytes), %lu other failures%s; mmap succeeded %lu, %lu reads/%lu faults racing; %.1f s (%.2f ms a round, %.2f ms racing)%s\n",
	       r == KT_RESULT_PASS ? "ok" : "not ok", s->name, result->iterations,
	       result->stale, result->foreign, result->failures,
	       result->done ? "" : " (did not finish)",
	       result->mapped, result->touch_reads, result->touch_faults,
	       result->seconds,
	       result->iterations ? 1e3 * result->seconds / result->iterations : 0.0,
	       result->iterations ? 1e3 * result->race_seconds / result->iterations : 0.0,
	       result->time_capped ? " (time cap reached)" : "");
	if (opt.verbose && result->iterations)
		printf("# %s: per round %.3f ms waking the threads, %.3f ms in the longest call\n",
		       s->name, 1e3 * result->wake_seconds / result->iterations,
		       1e3 * result->call_seconds / result->iterations);
	return r;
}

int main(int argc, char **argv)
{
	unsigned int passed = 0, failed = 0;
	int status;

	status = parse_options(argc, argv);
	if (status == CONTINUE)
		status = prepare();
	if (status != CONTINUE)
		return status;
	printf("# seed %llu, %lu rounds per scenario%s, %d GPU pages per pin, delays up to %lu ns%s\n",
	       opt.seed, opt.iterations, opt.time_cap_s ? " (time capped)" : "",
	       RACE_PAGES, delay_ns, opt.delay_ns < 0 ? " (one mmap+munmap)" : "");

	for (size_t i = 0; i < NSCENARIOS; i++) {
		int r;

		if (!wanted(scenarios[i].name, argc, argv))
			continue;
		r = run_and_report(&scenarios[i]);
		if (r == KT_RESULT_SKIP)
			continue;
		if (r == KT_RESULT_PASS)
			passed++;
		else
			failed++;
	}
	printf("%u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}
