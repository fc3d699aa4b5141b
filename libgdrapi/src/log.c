// SPDX-License-Identifier: MIT
/*
 * Logging: silent unless GDRCOPY_ENABLE_LOGGING is set, as GDRCopy 2.6.
 * GDRCOPY_LOG_LEVEL (1 debug, 2 info, 3 warn, 4 error; default 4) sets the
 * threshold.  Both are read once, on the first message.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static bool log_enabled;
static int log_threshold = GDR_LOG_ERROR;

static void log_read_environment(void)
{
	const char *level = getenv("GDRCOPY_LOG_LEVEL");

	log_enabled = getenv("GDRCOPY_ENABLE_LOGGING") != NULL;
	if (level) {
		char *end;
		long value = strtol(level, &end, 10);

		if (end != level && value >= GDR_LOG_DEBUG && value <= GDR_LOG_ERROR)
			log_threshold = (int)value;
	}
}

bool gdr_log_enabled(int level)
{
	pthread_once(&log_once, log_read_environment);
	return log_enabled && level >= log_threshold;
}

void gdr_log(int level, const char *fmt, ...)
{
	static const char *const prefixes[] = {
		[GDR_LOG_DEBUG] = "DBG:  ",
		[GDR_LOG_INFO] = "INFO: ",
		[GDR_LOG_WARN] = "WARN: ",
		[GDR_LOG_ERROR] = "ERR:  ",
	};
	char line[1024];
	int saved_errno = errno;	/* callers log between a failure and reading errno */
	va_list ap;
	int len;

	if (!gdr_log_enabled(level))
		goto out;

	/* One write() per message so lines from different threads do not interleave. */
	len = snprintf(line, sizeof(line), "%s", prefixes[level]);
	va_start(ap, fmt);
	len += vsnprintf(line + len, sizeof(line) - len, fmt, ap);
	va_end(ap);
	if (len > (int)sizeof(line) - 2)
		len = sizeof(line) - 2;
	if (line[len - 1] != '\n')
		line[len++] = '\n';
	if (write(STDERR_FILENO, line, len) < 0) {
		/* Nowhere left to report it. */
	}
out:
	errno = saved_errno;
}
