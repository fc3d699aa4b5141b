// SPDX-License-Identifier: MIT
/*
 * gdrdrv_fuzz: the state the threads share (softgpu allocations, pins,
 * mapping slots, file slots) and the helpers every operation family uses:
 * the fault probe, the 32-bit compat entry, ioctls, picking things.
 */
#include "fuzz.h"

struct world w;

/* ---- small helpers -------------------------------------------------------- */

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

const char *kt_errno_symbol(int err);	/* ktest.c: the shared errno table */

const char *errname(int err)
{
	static __thread char buf[16];
	const char *symbol = kt_errno_symbol(err);

	if (symbol)
		return symbol;
	switch (err) {
	case 0: return "ok";
	case RES_NOT_RUN: return "not run";
	case RES_SKIPPED: return "skipped";
	case 524: return "ENOTSUPP";
	default:
		snprintf(buf, sizeof(buf), "errno %d", err);
		return buf;
	}
}

int sys_err(long r)
{
	return r < 0 ? errno : 0;
}

/* ---- faults: a thread-safe probe -------------------------------------------- */

/*
 * One SIGSEGV/SIGBUS handler for the process; each thread arms its own jump
 * buffer around one access.  A fault in a thread that is not probing is a
 * crash, as without the handler.
 */
static __thread sigjmp_buf probe_jmp;
static __thread volatile sig_atomic_t probe_armed;

static void fault_handler(int sig)
{
	if (!probe_armed) {
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	probe_armed = 0;
	siglongjmp(probe_jmp, sig);
}

void install_fault_handler(void)
{
	struct sigaction sa = { .sa_handler = fault_handler, .sa_flags = SA_NODEFER };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);
}

/* 0 if the 32-bit access worked, else the signal it raised. */
int try_access(volatile void *addr, bool write, uint32_t *value)
{
	int sig = sigsetjmp(probe_jmp, 1);

	if (sig)
		return sig;
	probe_armed = 1;
	if (write)
		*(volatile uint32_t *)addr = *value;
	else
		*value = *(volatile uint32_t *)addr;
	probe_armed = 0;
	return 0;
}

/* ---- the 32-bit compat entry ------------------------------------------------ */

/*
 * A 64-bit process reaches the kernel's 32-bit system call table through
 * int $0x80: compat_sys_ioctl(), then the driver's ->compat_ioctl, exactly
 * as a 32-bit program would.  Arguments must lie below 4 GiB.
 */
#if HAVE_INT80
static long int80_3(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("int $0x80"
			 : "=a"(ret)
			 : "0"(nr), "b"(a), "c"(b), "d"(c)
			 : "memory", "cc", "r8", "r9", "r10", "r11");
	return (int)ret;
}
#else
long int80_3(long nr, long a, long b, long c)
{
	(void)nr; (void)a; (void)b; (void)c;
	return -ENOSYS;
}
#endif

/* gdrdrv's allow_p2p_tokens; a gdrdrv without it honours tokens. */
bool gdrdrv_tokens_allowed(void)
{
	char c = 'Y';
	int fd = open("/sys/module/gdrdrv/parameters/allow_p2p_tokens", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (read(fd, &c, 1) != 1)
			c = 'Y';
		close(fd);
	}
	return c == 'Y' || c == '1';
}

bool probe_int80(void)
{
#if HAVE_INT80
	long r = -1;

	if (opt.no_compat)
		return false;
	if (!sigsetjmp(probe_jmp, 1)) {
		probe_armed = 1;
		r = int80_3(IA32_NR_getpid, 0, 0, 0);
		probe_armed = 0;
	}
	return r == getpid();
#else
	return false;
#endif
}


/* The seven commands whose number encodes a pointer size. */
bool quirk_nr(unsigned int nr)
{
	return nr == 2 || nr == 3 || nr == 4 || nr == 5 || nr == 6 || nr == 8 || nr == 0xff;
}

unsigned long with_size(unsigned long cmd, unsigned int size)
{
	return _IOC(_IOC_DIR(cmd), _IOC_TYPE(cmd), _IOC_NR(cmd), size);
}

/* Whether the driver must accept @cmd through @entry as a known command. */
bool cmd_known(unsigned long cmd, enum entry entry)
{
	static const unsigned long native[] = {
		GDRDRV_IOC_PIN_BUFFER, GDRDRV_IOC_UNPIN_BUFFER, GDRDRV_IOC_GET_CB_FLAG,
		GDRDRV_IOC_GET_INFO, GDRDRV_IOC_GET_INFO_V2, GDRDRV_IOC_GET_ATTR,
		GDRDRV_IOC_PIN_BUFFER_V2, GDRDRV_IOC_REQ_MAPPING_TYPE,
		GDRDRV_IOC_GET_VERSION,
	};
	bool compat = entry == ENTRY_COMPAT || sizeof(void *) == 4;

	for (size_t i = 0; i < sizeof(native) / sizeof(native[0]); i++) {
		if (cmd == native[i])
			return true;
		/* compat_ioctl also takes the 4-byte spellings (and 32-bit
		 * processes the 8-byte ones: they reach the native switch). */
		if (compat && quirk_nr(_IOC_NR(native[i])) &&
		    (cmd == with_size(native[i], 4) || cmd == with_size(native[i], 8)))
			return true;
	}
	return false;
}

/* ---- devices ------------------------------------------------------------------ */

int sg_call(unsigned long cmd, void *arg)
{
	CALL();
	return ioctl(w.sg, cmd, arg) ? errno : 0;
}

/*
 * ioctl through @entry.  For the compat entry the argument is copied to the
 * thread's page below 4 GiB and back; @len 0 passes @arg as it is (it must
 * then lie below 4 GiB itself).
 */
int xioctl(struct thr *t, int fd, unsigned long cmd, void *arg, size_t len,
		  enum entry entry)
{
	void *p = arg;
	long r;

	CALL();
	if (entry == ENTRY_NATIVE || !w.int80)
		return ioctl(fd, cmd, arg) ? errno : 0;
	if (arg && len) {
		memcpy(t->low, arg, len);
		p = t->low;
	}
	r = int80_3(IA32_NR_ioctl, fd, (long)(unsigned int)cmd, (long)(uintptr_t)p);
	if (arg && len && !r)
		memcpy(arg, t->low, len);
	else if (arg && len && r == -EFAULT)
		memcpy(arg, t->low, len);
	return r < 0 ? (int)-r : 0;
}

/* The spelling of a quirk command for @entry chosen by @bits. */
unsigned long spelled(unsigned long cmd, uint32_t bits, enum entry *entry)
{
	*entry = (bits & 7) >= 6 && w.int80 ? ENTRY_COMPAT : ENTRY_NATIVE;
	if (*entry == ENTRY_COMPAT && quirk_nr(_IOC_NR(cmd)) && (bits & 8))
		return with_size(cmd, 4);
	return cmd;
}

/* ---- picking things ----------------------------------------------------------- */

int pick_alloc(uint32_t sel, int state)
{
	for (unsigned int i = 0; i < N_ALLOC; i++) {
		unsigned int k = (sel + i) % N_ALLOC;

		if (w.allocs[k].state == state)
			return k;
	}
	return -1;
}

/* A live, reachable pin of file slot @fd (not being unpinned). */
int pick_pin(uint32_t sel, int fd)
{
	for (unsigned int i = 0; i < N_PIN; i++) {
		unsigned int k = (sel + i) % N_PIN;
		struct pin *p = &w.pins[k];

		if (p->state == P_LIVE && !p->orphan && p->fd == fd &&
		    p->fd_gen == w.fds[fd].gen)
			return k;
	}
	return -1;
}

/* Like pick_pin, preferring a pin with no mapping (what mmap can map). */
int pick_unmapped_pin(uint32_t sel, int fd)
{
	for (unsigned int i = 0; i < N_PIN; i++) {
		unsigned int k = (sel + i) % N_PIN;
		struct pin *p = &w.pins[k];

		if (p->state == P_LIVE && !p->orphan && p->fd == fd &&
		    p->fd_gen == w.fds[fd].gen && !p->nmaps && !p->untracked &&
		    !p->revoked && p->addr == p->va)
			return k;
	}
	return pick_pin(sel, fd);
}

/* A handle that is not valid on file slot @fd: unpinned before, or absurd. */
uint64_t bad_handle(uint64_t r, int fd)
{
	struct fdslot *s = &w.fds[fd];

	if ((r & 3) && s->nstale)
		return s->stale[(r >> 2) % s->nstale];
	switch ((r >> 2) & 3) {
	case 0: return ~0ULL;
	case 1: return ABSURD_HANDLE + ((r >> 8) & 0xffffff);
	case 2: return 1ULL << 32 << ((r >> 8) % 20);
	default: return (1ULL << 52) - 1;
	}
}

void push_stale(int fd, uint64_t handle)
{
	struct fdslot *s = &w.fds[fd];

	if (s->nstale < N_STALE)
		s->stale[s->nstale++] = handle;
	else
		s->stale[handle % N_STALE] = handle;
}

/* Drops a pin record nobody needs any more. */
void pin_maybe_release(int k)
{
	struct pin *p = &w.pins[k];

	if ((p->state == P_GONE || (p->state == P_LIVE && p->orphan)) &&
	    !p->nmaps && !p->busy)
		p->state = P_EMPTY;
}

/* The mapping in slot @i is gone (its VMA unmapped): bookkeeping only. */
void map_forget(int i)
{
	struct mapping *m = &w.maps[i];
	struct pin *p = &w.pins[m->pin];

	if (!m->active)
		return;
	m->active = false;
	if (p->serial == m->pin_serial) {
		p->nmaps--;
		p->ver++;
		pin_maybe_release(m->pin);
	}
}

/* Puts the PROT_NONE reservation back over [addr, addr + len). */
void arena_reserve(struct thr *t, char *addr, size_t len, bool noreplace)
{
	void *p;

	if (!len)
		return;
	p = mmap(addr, len, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
		 (noreplace ? MAP_FIXED_NOREPLACE : MAP_FIXED), -1, 0);
	if (p != addr) {
		fail(t, F_SETUP, C_ARENA, "cannot reserve the arena at %p+0x%zx again: %s",
		     (void *)addr, len, p == MAP_FAILED ? strerror(errno) : "placed elsewhere");
		if (p != MAP_FAILED)
			munmap(p, len);
	}
}

/*
 * The pin mapped in a slot, held busy across a call that may change or
 * remove its mapping: until the bookkeeping catches up, other threads must
 * not judge what the driver says about it.  Called with the slot's mutex.
 */

struct held slot_hold(const struct mapping *m)
{
	struct held h = { -1, 0 };

	lock();
	if (m->active && w.pins[m->pin].serial == m->pin_serial) {
		h = (struct held){ m->pin, m->pin_serial };
		w.pins[h.k].busy++;
	}
	unlock();
	return h;
}

void slot_unhold(struct held h)
{
	lock();
	if (h.k >= 0 && w.pins[h.k].serial == h.serial) {
		w.pins[h.k].busy--;
		w.pins[h.k].ver++;
		pin_maybe_release(h.k);
	}
	unlock();
}

/* Empties slot @i entirely (whatever is mapped in it). */
void slot_reset(struct thr *t, int i)
{
	arena_reserve(t, slot_base(i), SLOT_SIZE, false);
	lock();
	map_forget(i);
	w.maps[i].dirty = false;
	unlock();
}

/* Tracks a new mapping in a slot (w.lock held). */
void map_set(struct mapping *m, char *addr, size_t len, int pin, uint32_t pin_serial,
		    uint64_t gpu_off, int prot, bool disturbed, uint32_t seq)
{
	m->active = true;
	m->addr = addr;
	m->len = len;
	m->pin = pin;
	m->pin_serial = pin_serial;
	m->gpu_off = gpu_off;
	m->prot = prot;
	m->disturbed = disturbed;
	m->map_seq = seq;
}

int fd_of(uint32_t sel)
{
	return sel % N_FD;
}

/* Takes file slot @s for an ioctl or mmap; returns its generation. */
uint32_t fd_get(int s)
{
	pthread_rwlock_rdlock(&w.fds[s].lock);
	return w.fds[s].gen;
}

void fd_put(int s)
{
	pthread_rwlock_unlock(&w.fds[s].lock);
}

/* Checks a live handle's GET_INFO_V2 against what was pinned. */
enum arg_mode arg_mode_of(uint32_t bits)
{
	switch (bits & 15) {
	case 12: return ARG_NULL;
	case 13: return ARG_NONE_PAGE;
	case 14: return ARG_STRADDLE_NONE;
	case 15: return ARG_READONLY;
	default: return ARG_OK;
	}
}

/*
 * Places @len bytes of @arg as @mode asks, in the thread's low pages.
 * Returns the pointer to pass to ioctl (with length 0: as it is).
 */
void *place_arg(struct thr *t, enum arg_mode mode, const void *arg, size_t len)
{
	unsigned char *rw = t->low, *ro = t->low + w.page, *none = t->low + 2 * w.page;

	switch (mode) {
	case ARG_NULL:
		return NULL;
	case ARG_NONE_PAGE:
		return none + 64;
	case ARG_STRADDLE_NONE:
		/* The struct starts readable and runs into the PROT_NONE page. */
		mprotect(ro, w.page, PROT_READ | PROT_WRITE);
		memcpy(none - len / 2, arg, len / 2);
		mprotect(ro, w.page, PROT_READ);
		return none - len / 2;
	case ARG_READONLY:
		mprotect(ro, w.page, PROT_READ | PROT_WRITE);
		memcpy(ro + 128, arg, len);
		mprotect(ro, w.page, PROT_READ);
		return ro + 128;
	default:
		memcpy(rw + 256, arg, len);
		return rw + 256;
	}
}

/*
 * A handle for an ioctl on file slot @s: a live pin (returns its index), or
 * (@want_bad, or none live) an invalid handle (returns -1).
 */
int target_handle(uint32_t sel, uint64_t r, int s, bool want_bad, __u64 *handle,
			 uint32_t *serial)
{
	int k = want_bad ? -1 : pick_pin(sel, s);

	if (k >= 0) {
		*handle = w.pins[k].handle;
		*serial = w.pins[k].serial;
	} else {
		*handle = bad_handle(r, s);
	}
	return k;
}

