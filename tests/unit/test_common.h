/* SPDX-License-Identifier: MIT */
/* What every unit test file needs: cmocka, the fakes and a sandbox of system paths. */
#ifndef UNIT_TEST_COMMON_H
#define UNIT_TEST_COMMON_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "gdrapi.h"
#include "backend_gdrdrv.h"
#include "internal.h"
#include "fakes.h"

/*
 * A temporary directory standing in for /dev, /proc and /sys, so that the
 * library's diagnosis of a missing or inaccessible node can be tested.
 */
struct sandbox {
	char dir[128];
	char device[192];
	char sys_misc_dev[192];
	char proc_devices[192];
	char sys_module[192];
	char proc_params[192];
	char osrelease[192];
	char node_config[192];	/* GDRCOPY_CONFIG_FILE: absent until a test writes it */
	struct gdrdrv_sys_paths paths;
};

static inline void sandbox_write(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* /proc/devices with gdrdrv at major (or without it when major < 0). */
static inline void sandbox_set_major(struct sandbox *s, int major)
{
	char text[256];

	/* A block device of the same name must not count: only the character section does. */
	if (major >= 0)
		snprintf(text, sizeof(text), "Character devices:\n  1 mem\n  4 tty\n%3d gdrdrv\n\nBlock devices:\n  8 sd\n",
			 major);
	else
		snprintf(text, sizeof(text), "Character devices:\n  1 mem\n  4 tty\n\nBlock devices:\n  8 sd\n251 gdrdrv\n");
	sandbox_write(s->proc_devices, text);
}

/* /sys/class/misc/gdrdrv/dev saying "major:minor" (or, with major < 0, no such file). */
static inline void sandbox_set_misc(struct sandbox *s, int major, int minor)
{
	char text[32];

	if (major < 0) {
		unlink(s->sys_misc_dev);
		return;
	}
	snprintf(text, sizeof(text), "%d:%d\n", major, minor);
	sandbox_write(s->sys_misc_dev, text);
}

static inline void sandbox_init(struct sandbox *s)
{
	snprintf(s->dir, sizeof(s->dir), "/tmp/gdrapi-unit-XXXXXX");
	assert_non_null(mkdtemp(s->dir));
	snprintf(s->device, sizeof(s->device), "%s/gdrdrv-node", s->dir);
	snprintf(s->sys_misc_dev, sizeof(s->sys_misc_dev), "%s/misc-gdrdrv-dev", s->dir);
	snprintf(s->proc_devices, sizeof(s->proc_devices), "%s/devices", s->dir);
	snprintf(s->sys_module, sizeof(s->sys_module), "%s/module-gdrdrv", s->dir);
	snprintf(s->proc_params, sizeof(s->proc_params), "%s/params", s->dir);
	snprintf(s->osrelease, sizeof(s->osrelease), "%s/osrelease", s->dir);
	snprintf(s->node_config, sizeof(s->node_config), "%s/gdrcopy.conf", s->dir);
	/* Never the machine's own /etc/gdrcopy.conf: what a test allows is what it wrote. */
	setenv("GDRCOPY_CONFIG_FILE", s->node_config, 1);
	s->paths.device = s->device;
	s->paths.sys_misc_dev = s->sys_misc_dev;
	s->paths.proc_devices = s->proc_devices;
	s->paths.sys_module = s->sys_module;
	s->paths.proc_params = s->proc_params;	/* absent until a test writes it */
	s->paths.osrelease = s->osrelease;
	/* No misc device: GDRCopy's driver, with /dev/null's major: what the fake node really is. */
	sandbox_set_major(s, 1);
	gdrdrv_sys_paths = &s->paths;
}

static inline void sandbox_cleanup(struct sandbox *s)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", s->dir);
}

/* Logging on at INFO so that tests can check the messages. */
static inline void enable_library_logging(void)
{
	setenv("GDRCOPY_ENABLE_LOGGING", "1", 1);
	setenv("GDRCOPY_LOG_LEVEL", "2", 1);
	unsetenv("GDRCOPY_USE_DMABUF_MMAP");
	unsetenv("GDRCOPY_BACKEND");
}

#define assert_contains(haystack, needle)                                                        \
	do {                                                                                     \
		const char *h_ = (haystack);                                                     \
		if (!strstr(h_, (needle)))                                                       \
			fail_msg("expected \"%s\" in:\n%s", (needle), h_);                       \
	} while (0)

#define GPU_PAGE (64UL * 1024)
/* Fake GPU virtual addresses: anything non-zero the fake driver accepts. */
#define FAKE_GPU_VA 0x7f0000000000UL

#endif /* UNIT_TEST_COMMON_H */
