// SPDX-License-Identifier: MIT
/*
 * gdrdrv_fuzz: the minimizer.  Shrinks a failing log to the shortest
 * sequence that still fails (a suffix window, then delta debugging) and
 * reports it with the seed.
 */
#include "fuzz.h"

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

void report_failure(uint64_t seed, unsigned int nthreads, struct verdict *v, bool from_file)
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

