// SPDX-License-Identifier: MIT
/*
 * Thread safety on the fake driver: many threads pinning, mapping, copying,
 * unmapping and unpinning through one gdr_t; threads fighting over the
 * mapping of one buffer; threads opening and closing their own instances.
 * cmocka asserts may not run off the main thread, so workers count errors
 * and the main thread checks the counts.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "test_common.h"

#define THREADS 8
#define ROUNDS 300

static struct sandbox sandbox;
static atomic_int errors;
static gdr_t shared;

static void note_error(const char *what, int rc)
{
	if (atomic_fetch_add(&errors, 1) < 10)
		fprintf(stderr, "thread error: %s: %d\n", what, rc);
}

static int setup(void **state)
{
	struct fake_gdrdrv_config cfg = fake_gdrdrv_default();

	(void)state;
	sandbox_init(&sandbox);
	fake_reset(&cfg);
	atomic_store(&errors, 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sandbox_cleanup(&sandbox);
	return 0;
}

static void *lifecycle_worker(void *arg)
{
	long id = (long)arg;
	unsigned char in[512], out[512];
	int round;

	for (round = 0; round < ROUNDS; round++) {
		unsigned long addr = FAKE_GPU_VA + ((unsigned long)id * ROUNDS + round) * 4 * GPU_PAGE;
		gdr_info_t info;
		gdr_mh_t mh;
		char *va;
		int rc;

		memset(in, (int)(id * 31 + round), sizeof(in));
		rc = gdr_pin_buffer_v2(shared, addr, 2 * GPU_PAGE, 0, &mh);
		if (rc) {
			note_error("pin", rc);
			continue;
		}
		rc = gdr_map(shared, mh, (void **)&va, 2 * GPU_PAGE);
		if (rc) {
			note_error("map", rc);
		} else {
			if ((rc = gdr_copy_to_mapping(mh, va + id, in, sizeof(in))) != 0)
				note_error("copy to", rc);
			if ((rc = gdr_copy_from_mapping(mh, out, va + id, sizeof(out))) != 0)
				note_error("copy from", rc);
			if (memcmp(in, out, sizeof(in)) != 0)
				note_error("data", 0);
			rc = gdr_get_info(shared, mh, &info);
			if (rc || info.va != addr || !info.mapped)
				note_error("info", rc);
			/* Every other round leave the unmapping to unpin. */
			if ((round & 1) && (rc = gdr_unmap(shared, mh, va, 2 * GPU_PAGE)) != 0)
				note_error("unmap", rc);
		}
		if ((rc = gdr_unpin_buffer(shared, mh)) != 0)
			note_error("unpin", rc);
	}
	return NULL;
}

static void run_threads(void *(*fn)(void *))
{
	pthread_t threads[THREADS];
	long i;

	for (i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&threads[i], NULL, fn, (void *)i), 0);
	for (i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(threads[i], NULL), 0);
}

static void test_concurrent_lifecycle(void **state)
{
	(void)state;
	shared = gdr_open();
	assert_non_null(shared);
	run_threads(lifecycle_worker);
	assert_int_equal(atomic_load(&errors), 0);
	assert_int_equal(fake_live_pins(), 0);
	assert_int_equal(fake_live_mappings(), 0);
	assert_int_equal(gdr_close(shared), 0);
}

static gdr_mh_t contested;
static atomic_int maps_won, concurrent_holders, max_holders;

static void *contend_worker(void *arg)
{
	unsigned char byte = (unsigned char)(long)arg;
	int round;

	for (round = 0; round < ROUNDS * 2; round++) {
		void *va;
		int rc = gdr_map(shared, contested, &va, GPU_PAGE);

		if (rc == EAGAIN)
			continue;	/* another thread holds the mapping */
		if (rc) {
			note_error("map", rc);
			continue;
		}
		{
			int holders = atomic_fetch_add(&concurrent_holders, 1) + 1;
			int seen = atomic_load(&max_holders);

			while (holders > seen && !atomic_compare_exchange_weak(&max_holders, &seen, holders))
				;
		}
		atomic_fetch_add(&maps_won, 1);
		if ((rc = gdr_copy_to_mapping(contested, va, &byte, 1)) != 0)
			note_error("copy", rc);
		atomic_fetch_sub(&concurrent_holders, 1);
		if ((rc = gdr_unmap(shared, contested, va, GPU_PAGE)) != 0)
			note_error("unmap", rc);
	}
	return NULL;
}

static void test_contended_mapping(void **state)
{
	(void)state;
	shared = gdr_open();
	assert_non_null(shared);
	assert_int_equal(gdr_pin_buffer_v2(shared, FAKE_GPU_VA, GPU_PAGE, 0, &contested), 0);
	atomic_store(&maps_won, 0);
	atomic_store(&max_holders, 0);
	run_threads(contend_worker);
	assert_int_equal(atomic_load(&errors), 0);
	assert_true(atomic_load(&maps_won) > 0);
	/* One mapping per buffer at any time. */
	assert_int_equal(atomic_load(&max_holders), 1);
	assert_int_equal(fake_live_mappings(), 0);
	assert_int_equal(gdr_close(shared), 0);
	assert_int_equal(fake_live_files(), 0);
}

/*
 * Calls on a handle racing its unpin: each either acts on the live buffer or
 * fails with EINVAL; none may reach the backend after the unpin released the
 * buffer's state (that was a NULL dereference), and no mapping may outlive it.
 */
static _Atomic unsigned long racing_handle;
static atomic_bool racing_done;

static void *unpin_racer(void *arg)
{
	int round;

	(void)arg;
	for (round = 0; round < ROUNDS * 4; round++) {
		gdr_mh_t mh;
		int rc = gdr_pin_buffer_v2(shared, FAKE_GPU_VA, GPU_PAGE, 0, &mh);

		if (rc) {
			note_error("pin", rc);
			continue;
		}
		atomic_store(&racing_handle, mh.h);
		sched_yield();
		if ((rc = gdr_unpin_buffer(shared, mh)) != 0)
			note_error("unpin", rc);
	}
	atomic_store(&racing_done, true);
	return NULL;
}

static void *call_racer(void *arg)
{
	int round;

	(void)arg;
	for (round = 0; round < ROUNDS * 2 && !atomic_load(&racing_done); round++) {
		gdr_mh_t mh = { .h = atomic_load(&racing_handle) };
		gdr_info_t info;
		void *va;
		int rc, flag;

		if ((rc = gdr_get_info(shared, mh, &info)) != 0 && rc != EINVAL)
			note_error("info", rc);
		if ((rc = gdr_get_callback_flag(shared, mh, &flag)) != 0 && rc != EINVAL)
			note_error("callback flag", rc);
		rc = gdr_map(shared, mh, &va, GPU_PAGE);
		if (rc == 0) {
			if ((rc = gdr_unmap(shared, mh, va, GPU_PAGE)) != 0 && rc != EINVAL)
				note_error("unmap", rc);
		} else if (rc != EINVAL && rc != EAGAIN) {
			note_error("map", rc);
		}
	}
	return NULL;
}

static void *race_worker(void *arg)
{
	return (long)arg == 0 ? unpin_racer(arg) : call_racer(arg);
}

static void test_calls_racing_unpin(void **state)
{
	int saved_stderr, devnull;

	(void)state;
	shared = gdr_open();
	assert_non_null(shared);
	atomic_store(&racing_handle, 0);
	atomic_store(&racing_done, false);
	/* Thousands of "handle was unpinned" errors are the expected answers: not into the log. */
	fflush(stderr);
	saved_stderr = dup(STDERR_FILENO);
	devnull = open("/dev/null", O_WRONLY);
	assert_true(saved_stderr >= 0 && devnull >= 0);
	dup2(devnull, STDERR_FILENO);
	run_threads(race_worker);
	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	close(devnull);
	assert_int_equal(atomic_load(&errors), 0);
	assert_int_equal(fake_live_pins(), 0);
	assert_int_equal(fake_live_mappings(), 0);
	assert_int_equal(gdr_close(shared), 0);
}

static void *open_close_worker(void *arg)
{
	long id = (long)arg;
	int round;

	for (round = 0; round < ROUNDS / 10; round++) {
		gdr_t g = gdr_open();
		gdr_mh_t mh[3];
		void *va;
		int i, rc;

		if (!g) {
			note_error("open", errno);
			continue;
		}
		for (i = 0; i < 3; i++)
			if ((rc = gdr_pin_buffer_v2(g, FAKE_GPU_VA + (id * 8 + i) * GPU_PAGE, GPU_PAGE, 0, &mh[i])) != 0)
				note_error("pin", rc);
		if ((rc = gdr_map(g, mh[1], &va, GPU_PAGE)) != 0)
			note_error("map", rc);
		/* Close with everything still pinned and mapped. */
		if ((rc = gdr_close(g)) != 0)
			note_error("close", rc);
	}
	return NULL;
}

static void test_concurrent_open_close(void **state)
{
	(void)state;
	run_threads(open_close_worker);
	assert_int_equal(atomic_load(&errors), 0);
	assert_int_equal(fake_live_files(), 0);
	assert_int_equal(fake_open_count(), THREADS * (ROUNDS / 10));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_concurrent_lifecycle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_contended_mapping, setup, teardown),
		cmocka_unit_test_setup_teardown(test_calls_racing_unpin, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_open_close, setup, teardown),
	};

	enable_library_logging();
	setenv("GDRCOPY_LOG_LEVEL", "4", 1);
	return cmocka_run_group_tests_name("threads", tests, NULL, NULL);
}
