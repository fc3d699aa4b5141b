/* SPDX-License-Identifier: MIT */
/*
 * ktest.h - a small kselftest-style harness and device helpers for the
 * kernel-level tests of gdrdrv and softgpu.  They talk to /dev/gdrdrv and
 * /dev/softgpu directly, never through libgdrapi, so a failure points at
 * the kernel side.
 *
 * Every test runs in a forked child: a crash, a stray signal or a leaked fd
 * stays in that test.  Inside a test, the KT_* macros end the child with a
 * message on failure; kt_skip() ends it as skipped.  The parent prints TAP:
 * "ok N name", "not ok N name", "ok N name # SKIP reason".
 */
#ifndef KTEST_H
#define KTEST_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../../include/gdrcopy_version.h"
#include "../../include/uapi/gdrdrv.h"
#include "../softgpu/include/softgpu_uapi.h"

#define KT_GPU_PAGE ((uint64_t)GDRDRV_GPU_PAGE_SIZE)

struct kt_env {
	bool softgpu;			/* /dev/softgpu usable */
	struct softgpu_info sg_info;
	bool gdrdrv;			/* /dev/gdrdrv usable */
	bool persistent;		/* gdrdrv uses persistent pins */
	bool force_pcie_attr;		/* GDRDRV_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE */
	bool knobs;			/* /sys/module/softgpu/parameters writable */
	const char *gdrdrv_ko;		/* for the unload test; NULL: modprobe */
	char why_no_gdrdrv[160];
};

extern struct kt_env kt_env;

struct kt_test {
	const char *name;
	void (*fn)(void);
	bool needs_gdrdrv;
};

/* ---- reporting (in a test child) ---------------------------------------- */

void kt_fail_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));
void kt_fail_cond(const char *file, int line, const char *cond, const char *fmt, ...)
	__attribute__((format(printf, 4, 5), noreturn));
void kt_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Fails with the message a failed child (of a test) left, and its status. */
void kt_fail_child(int status) __attribute__((noreturn));
void kt_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define KT_FAIL(...) kt_fail_at(__FILE__, __LINE__, __VA_ARGS__)

#define KT_ASSERT(cond, fmt, ...)					\
	do {								\
		if (!(cond))						\
			kt_fail_cond(__FILE__, __LINE__, #cond, fmt, ##__VA_ARGS__); \
	} while (0)

/* @expr is a call returning 0 or an errno value (not -1). */
#define KT_EXPECT_ERR(expr, want)					\
	do {								\
		int kt_got_ = (expr);					\
		if (kt_got_ != (want))					\
			KT_FAIL("%s: got %s (%d), want %s (%d)", #expr,	\
				kt_errname(kt_got_), kt_got_,		\
				kt_errname(want), (want));		\
	} while (0)

#define KT_EXPECT_OK(expr) KT_EXPECT_ERR(expr, 0)

const char *kt_errname(int err);
/* The errno's symbolic name (EINVAL, ...) for the errnos these tests meet; NULL otherwise. */
const char *kt_errno_symbol(int err);

/* ---- running ------------------------------------------------------------ */

/* The whole TAP run of a test program: options, then each test (see above). */
int kt_run(const struct kt_test *tests, size_t count, int argc, char **argv);

/* For programs with their own options (gdrdrv_race), the pieces of kt_run(). */
enum kt_result { KT_RESULT_PASS, KT_RESULT_FAIL, KT_RESULT_SKIP };
/* Probes the devices, starts reading the kernel log; 0, or 2 (printed why). */
int kt_setup(void);
void kt_print_env(void);	/* "# softgpu: ..." and "# gdrdrv: ..." lines */
/*
 * Runs @t in a forked child killed after @timeout_s, then checks what every
 * test must leave as it found (softgpu's pins, memory and misuse counters)
 * and the kernel log since the last check; *why gets the reason when it
 * did not pass.
 */
int kt_run_test(const struct kt_test *t, unsigned int timeout_s, const char **why);

/* ---- softgpu ------------------------------------------------------------- */

int sg_open(void);
int sg_ioctl(int fd, unsigned long cmd, void *arg);	/* 0 or errno */
uint64_t sg_alloc(int sg, uint64_t size);
int sg_try_alloc(int sg, uint64_t size, uint64_t *va);
void sg_free(int sg, uint64_t va);
void sg_write(int sg, uint64_t va, const void *buf, uint64_t size);
void sg_read(int sg, uint64_t va, void *buf, uint64_t size);
struct softgpu_info sg_info(int sg);
struct softgpu_stats sg_stats(void);

/* Write value to a sysfs or procfs file: 0 or the errno. */
int kt_write_file(const char *path, const char *value);

/* Module knobs in /sys/module/softgpu/parameters. */
bool knob_get(const char *name, char *buf, size_t len);
void knob_set(const char *name, const char *value);

/* ---- gdrdrv -------------------------------------------------------------- */

int gd_open(void);
int gd_ioctl(int fd, unsigned long cmd, void *arg);	/* 0 or errno */
int gd_pin(int gd, uint64_t addr, uint64_t size, uint32_t flags, uint64_t *handle);
int gd_pin_tokens(int gd, uint64_t addr, uint64_t size, uint64_t token,
		  uint32_t va_space, uint64_t *handle);
int gd_unpin(int gd, uint64_t handle);
int gd_info(int gd, uint64_t handle, struct gdrdrv_get_info_v2 *info);
int gd_cb_flag(int gd, uint64_t handle, uint32_t *flag);
int gd_req_type(int gd, uint64_t handle, uint32_t type);
void *gd_map(int gd, uint64_t handle, size_t size, int *err);
uint32_t gd_expected_type(void);	/* WC on a BAR, CACHING on RAM */

/* ---- faults -------------------------------------------------------------- */

/* 0 if the access worked, else the signal it raised (SIGBUS, SIGSEGV). */
int kt_try_read32(const volatile void *addr, uint32_t *value);
int kt_try_write32(volatile void *addr, uint32_t value);

/* ---- module loading ------------------------------------------------------ */

/* 0 or errno; delete_module(2) without waiting. */
int kt_unload_module(const char *name);
/* The loaded gdrdrv's parameters, to load it again the same way. */
void kt_gdrdrv_params(char *buf, size_t len, int persistent);
/* 0 or errno; from kt_env.gdrdrv_ko with finit_module(2), else modprobe. */
int kt_load_gdrdrv(const char *params);
/* (Re)creates /dev/gdrdrv from /proc/devices when gdrdrv registered a chrdev. */
void kt_make_gdrdrv_node(void);

#endif /* KTEST_H */
