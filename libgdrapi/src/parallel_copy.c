// SPDX-License-Identifier: MIT
/*
 * Parallel copies: one large copy split into contiguous pieces that several
 * cores copy at once.  A single core's streaming stores saturate at about
 * 15 GB/s into BAR memory and its streaming loads well under 1 GB/s out of
 * it; a few cores together move roughly twice that.
 *
 * Opt-in only: nothing here runs, and no thread exists, until a caller asks
 * for more than one thread (gdr_copy_*_parallel, or GDRCOPY_COPY_THREADS).
 * Workers are created on first need, block every signal, and live until the
 * process exits.  Several callers may copy in parallel at once: jobs queue up
 * and workers take pieces from the oldest.
 *
 * Each piece goes through the ordinary copy engine, which fences its own
 * stores; the caller learns a job is done under pool_lock, so every piece's
 * stores are ordered before the call returns.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdlib.h>

#include "copy_engine.h"
#include "internal.h"
#include "parallel_copy.h"

#define DEFAULT_PARALLEL_MIN_SIZE ((size_t)1 << 20)
#define PIECE_ALIGN 64U

struct copy_job {
	struct copy_job *next;		/* queue link, under pool_lock */
	gdr_mapping_type_t type;
	bool to_mapping;
	char *dst;
	const char *src;
	size_t size;
	size_t piece;
	unsigned int pieces;
	unsigned int taken;		/* pieces handed out, under pool_lock */
	unsigned int done;		/* pieces finished, under pool_lock */
	int rc;				/* first error, under pool_lock */
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_ready = PTHREAD_COND_INITIALIZER;
static pthread_cond_t piece_done = PTHREAD_COND_INITIALIZER;
static struct copy_job *queue_head, *queue_tail;
static unsigned int pool_size;

/* Under pool_lock: the next piece of the oldest job with pieces left, dropping finished ones. */
static struct copy_job *take_piece(unsigned int *index)
{
	while (queue_head) {
		struct copy_job *job = queue_head;

		if (job->taken < job->pieces) {
			*index = job->taken++;
			return job;
		}
		queue_head = job->next;
		if (!queue_head)
			queue_tail = NULL;
		job->next = NULL;
	}
	return NULL;
}

static void copy_piece(struct copy_job *job, unsigned int index)
{
	size_t offset = (size_t)index * job->piece;
	size_t length = job->size - offset < job->piece ? job->size - offset : job->piece;
	int rc;

	if (job->to_mapping)
		rc = gdr_copy_to_type(job->type, job->dst + offset, job->src + offset, length);
	else
		rc = gdr_copy_from_type(job->type, job->dst + offset, job->src + offset, length);

	pthread_mutex_lock(&pool_lock);
	if (rc && !job->rc)
		job->rc = rc;
	if (++job->done == job->pieces)
		pthread_cond_broadcast(&piece_done);
	pthread_mutex_unlock(&pool_lock);
}

static void *worker_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct copy_job *job;
		unsigned int index;

		pthread_mutex_lock(&pool_lock);
		while ((job = take_piece(&index)) == NULL)
			pthread_cond_wait(&work_ready, &pool_lock);
		pthread_mutex_unlock(&pool_lock);
		copy_piece(job, index);
	}
	return NULL;
}

/* Under pool_lock: make sure `wanted` workers exist (fewer if threads cannot be created). */
static void grow_pool(unsigned int wanted)
{
	sigset_t all, old;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);	/* workers inherit "every signal blocked" */
	while (pool_size < wanted) {
		pthread_attr_t attr;
		pthread_t thread;
		int rc;

		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&thread, &attr, worker_main, NULL);
		pthread_attr_destroy(&attr);
		if (rc) {
			gdr_warn("parallel copy: could not start worker %u (%d); continuing with %u", pool_size + 1, rc,
				 pool_size);
			break;
		}
		pool_size++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int gdr_copy_parallel(gdr_mapping_type_t type, bool to_mapping, void *dst, const void *src, size_t size,
		      unsigned int threads)
{
	struct copy_job job = {
		.type = type,
		.to_mapping = to_mapping,
		.dst = dst,
		.src = src,
		.size = size,
	};
	struct copy_job **link, *prev;
	unsigned int index;
	size_t piece;

	if (threads > GDR_PARALLEL_MAX_THREADS)
		threads = GDR_PARALLEL_MAX_THREADS;
	piece = threads ? (size + threads - 1) / threads : size;
	piece = (piece + PIECE_ALIGN - 1) & ~(size_t)(PIECE_ALIGN - 1);
	if (piece < GDR_PARALLEL_MIN_PIECE)
		piece = GDR_PARALLEL_MIN_PIECE;
	if (threads <= 1 || size <= piece)
		return to_mapping ? gdr_copy_to_type(type, dst, src, size) : gdr_copy_from_type(type, dst, src, size);

	job.piece = piece;
	job.pieces = (unsigned int)((size + piece - 1) / piece);

	pthread_mutex_lock(&pool_lock);
	grow_pool(job.pieces - 1 < threads - 1 ? job.pieces - 1 : threads - 1);
	if (queue_tail)
		queue_tail->next = &job;
	else
		queue_head = &job;
	queue_tail = &job;
	pthread_cond_broadcast(&work_ready);
	pthread_mutex_unlock(&pool_lock);

	/* The caller works too, then waits for the pieces the workers took. */
	for (;;) {
		struct copy_job *mine;

		pthread_mutex_lock(&pool_lock);
		mine = job.taken < job.pieces ? &job : NULL;
		if (mine)
			index = job.taken++;
		pthread_mutex_unlock(&pool_lock);
		if (!mine)
			break;
		copy_piece(&job, index);
	}
	pthread_mutex_lock(&pool_lock);
	while (job.done < job.pieces)
		pthread_cond_wait(&piece_done, &pool_lock);
	/* Unlink the job if no worker dropped it yet: nothing may point at it after we return. */
	for (link = &queue_head, prev = NULL; *link; prev = *link, link = &(*link)->next) {
		if (*link == &job) {
			*link = job.next;
			if (queue_tail == &job)
				queue_tail = prev;
			break;
		}
	}
	pthread_mutex_unlock(&pool_lock);
	return job.rc;
}

static pthread_once_t defaults_once = PTHREAD_ONCE_INIT;
static atomic_bool defaults_ready;	/* checked on every copy; pthread_once behind it */
static unsigned int default_threads = 1;
static size_t default_min_size = DEFAULT_PARALLEL_MIN_SIZE;

static void read_defaults(void)
{
	const char *threads = getenv("GDRCOPY_COPY_THREADS");
	const char *min_size = getenv("GDRCOPY_PARALLEL_MIN_SIZE");
	char *end;

	if (threads && *threads) {
		unsigned long value = strtoul(threads, &end, 10);

		if (*end || value == 0 || value > GDR_PARALLEL_MAX_THREADS)
			gdr_warn("GDRCOPY_COPY_THREADS=%s is not a number from 1 to %u; copies stay single-threaded",
				 threads, GDR_PARALLEL_MAX_THREADS);
		else
			default_threads = (unsigned int)value;
	}
	if (min_size && *min_size) {
		unsigned long long value = strtoull(min_size, &end, 10);

		if (*end)
			gdr_warn("GDRCOPY_PARALLEL_MIN_SIZE=%s is not a byte count; using %zu", min_size,
				 DEFAULT_PARALLEL_MIN_SIZE);
		else
			default_min_size = (size_t)value;
	}
	if (default_threads > 1)
		gdr_info("parallel copy: copies of %zu bytes or more use up to %u threads", default_min_size,
			 default_threads);
}

static void read_defaults_once(void)
{
	read_defaults();
	atomic_store_explicit(&defaults_ready, true, memory_order_release);
}

unsigned int gdr_default_copy_threads(size_t size)
{
	if (!atomic_load_explicit(&defaults_ready, memory_order_acquire))
		pthread_once(&defaults_once, read_defaults_once);
	return size >= default_min_size ? default_threads : 1;
}
