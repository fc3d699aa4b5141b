// SPDX-License-Identifier: MIT
/*
 * gdrdrv_fuzz: the supervisor runs each worker in its own process group,
 * watches that it makes progress, and judges it when it is gone.
 */
#include "fuzz.h"

const char *const fail_names[] = {
	"none", "invariant", "data", "kernel log", "crash", "hang", "leak",
	"child", "setup",
};

#define HANG_S 120	/* no system call in that long: stuck */

/* Waits for worker @pid while it makes system calls; true if it stopped making any. */
static bool watch_worker(pid_t pid, int *status)
{
	uint64_t last_calls = 0;
	double last_progress = now_s();
	bool hung = false;

	while (waitpid(pid, status, WNOHANG) == 0) {
		uint64_t calls = __atomic_load_n(&shm->calls, __ATOMIC_RELAXED);

		if (calls != last_calls) {
			last_calls = calls;
			last_progress = now_s();
		} else if (now_s() - last_progress > HANG_S) {
			hung = true;
			shm->stop = 1;
			kill(-pid, SIGKILL);
			/* A task stuck in the kernel may never go: do not wait forever. */
			for (int i = 0; i < 100 && waitpid(pid, status, WNOHANG) == 0; i++)
				usleep(100000);
			break;
		}
		usleep(20000);
	}
	/* Fork children of the worker that outlived it. */
	kill(-pid, SIGKILL);
	while (waitpid(-pid, NULL, WNOHANG) > 0)
		;
	return hung;
}

/* What the worker reported, and what the kernel log says since it started. */
static void judge_reports(struct verdict *v)
{
	char line[512];

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
}

/* How the worker ended: stuck, killed by a signal, or exited with a failure status. */
static void judge_exit(struct verdict *v, int status, bool hung)
{
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
	}
}

/* Everything the worker had must be released once it is gone. */
static void judge_leaks(struct verdict *v, const struct softgpu_stats *before,
			const char *refcount_before)
{
	struct softgpu_stats after;
	char refcount[32];

	for (int i = 0; i < 100; i++) {
		if (read_sg_stats(&after) || stats_settled(before, &after))
			break;
		usleep(50000);
	}
	if (!stats_settled(before, &after)) {
		v->kind = F_LEAK;
		snprintf(v->msg, sizeof(v->msg),
			 "after the worker exited: %llu P2P pins (%llu bytes, %llu legacy), %llu bytes of GPU memory, %llu P2P API misuses; before: %llu, %llu, %llu, %llu, %llu",
			 (unsigned long long)after.active_pins, (unsigned long long)after.pinned_bytes,
			 (unsigned long long)after.legacy_pins, (unsigned long long)after.memory_used,
			 (unsigned long long)after.api_misuse, (unsigned long long)before->active_pins,
			 (unsigned long long)before->pinned_bytes, (unsigned long long)before->legacy_pins,
			 (unsigned long long)before->memory_used, (unsigned long long)before->api_misuse);
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

/* Runs one worker (generating, or replaying shm->log[0..nlog)); judges it. */
void run_worker(uint64_t seed, unsigned int nthreads, bool replay, double deadline,
		struct verdict *v)
{
	struct softgpu_stats before;
	char line[512], refcount_before[32];
	int status = 0;
	bool hung;
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
	if (read_sg_stats(&before)) {
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
	hung = watch_worker(pid, &status);

	judge_reports(v);
	if (v->kind == F_NONE)
		judge_exit(v, status, hung);
	if (v->kind == F_NONE)
		judge_leaks(v, &before, refcount_before);
}

