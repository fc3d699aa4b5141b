// SPDX-License-Identifier: MIT
/*
 * gdrdrv_fuzz: how a run fails.  A broken invariant of the ABI (fail() and
 * EXPECT), a bad kernel log line, and what a worker must leave behind once
 * it is gone (no P2P pins, GPU memory or gdrdrv page references).
 */
#include "fuzz.h"

void fail(struct thr *t, int kind, int sub, const char *fmt, ...)
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

int kmsg_open(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd >= 0)
		lseek(fd, 0, SEEK_END);
	return fd;
}

/* Reads the new records; copies the first bad one into @out.  Returns it or NULL. */
const char *kmsg_scan(int fd, char *out, size_t len, bool *fatal)
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
		/* KCSAN's reports are judged whole by the VM runner (gdrkit/vm/klog.py): it tells the core kernel's own races from ours. */
		if (strstr(rec, "BUG: KCSAN:"))
			continue;
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

/* ---- what a worker leaves behind ------------------------------------------- */

int read_sg_stats(struct softgpu_stats *st)
{
	int fd = open(SOFTGPU_DEVICE_PATH, O_RDWR | O_CLOEXEC), err = 0;

	if (fd < 0)
		return errno;
	if (ioctl(fd, SOFTGPU_IOC_GET_STATS, st))
		err = errno;
	close(fd);
	return err;
}

bool stats_settled(const struct softgpu_stats *a, const struct softgpu_stats *b)
{
	return a->active_pins == b->active_pins && a->pinned_bytes == b->pinned_bytes &&
	       a->legacy_pins == b->legacy_pins && a->memory_used == b->memory_used &&
	       a->api_misuse == b->api_misuse;
}

void read_refcount(char *buf, size_t len)
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

