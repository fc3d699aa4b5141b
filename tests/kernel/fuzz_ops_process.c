// SPDX-License-Identifier: MIT
/*
 * gdrdrv_fuzz, operation family: other processes (fork children, files
 * passed over a unix socket, files closed and opened again).
 */
#include "fuzz.h"

/*
 * In a child: records the first failure for the parent, then goes on.  A
 * fork child of a threaded process calls nothing that may take a lock
 * another thread held at the fork (malloc, strerror): errname() only.
 */
static void child_fail(struct child_report *rep, int kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

void child_fail(struct child_report *rep, int kind, const char *fmt, ...)
{
	va_list ap;

	if (rep->failed)
		return;
	rep->failed = 1;
	rep->kind = kind;
	va_start(ap, fmt);
	vsnprintf(rep->msg, sizeof(rep->msg), fmt, ap);
	va_end(ap);
}

#define CHILD_EXPECT(rep, cond, ...)				\
	do {							\
		if (!(cond))					\
			child_fail(rep, F_INVARIANT, __VA_ARGS__); \
	} while (0)

/* Waits for a child; a hang or an unexpected death fails the op. */
static void reap(struct thr *t, pid_t pid, bool may_be_killed)
{
	double deadline = now_s() + CHILD_TIMEOUT_S;
	int status;
	pid_t r;

	while ((r = waitpid(pid, &status, WNOHANG)) == 0) {
		if (now_s() > deadline) {
			kill(pid, SIGKILL);
			fail(t, F_HANG, 0, "child %d still running after %d s (stuck in the kernel?)",
			     pid, CHILD_TIMEOUT_S);
			waitpid(pid, &status, 0);
			return;
		}
		usleep(1000);
	}
	if (r < 0)
		return;
	if (t->rep->failed) {
		fail(t, t->rep->kind == F_DATA ? F_DATA : F_CHILD, 100 + t->op->type,
		     "in a child: %s", t->rep->msg);
		return;
	}
	if (WIFSIGNALED(status) && !(may_be_killed && WTERMSIG(status) == SIGKILL))
		fail(t, F_CHILD, 99, "child killed by signal %d", WTERMSIG(status));
	else if (WIFEXITED(status) && WEXITSTATUS(status))
		fail(t, F_CHILD, 98, "child exited with %d", WEXITSTATUS(status));
}

/* A child's own GPU memory, pin and mapping, left for exit to clean up. */
static void child_own_state(struct child_report *rep, bool unpin_some)
{
	struct softgpu_alloc a = { .size = 2 * GPU_PAGE };
	struct softgpu_memset ms;
	uint64_t handle;
	int sg = open(SOFTGPU_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	int gd = open("/dev/gdrdrv", O_RDWR | O_CLOEXEC);
	struct gdrdrv_pin_buffer_v2 p;
	uint32_t v;
	void *map;

	if (sg < 0 || gd < 0) {
		child_fail(rep, F_SETUP, "child cannot open the devices: %s", errname(errno));
		return;
	}
	if (ioctl(sg, SOFTGPU_IOC_ALLOC, &a))
		return;		/* full: nothing to do */
	ms = (struct softgpu_memset){ .va = a.va, .count = a.size / 4,
				      .value = (uint32_t)CHILD_TAG << 16, .elem_size = 4 };
	CHILD_EXPECT(rep, !ioctl(sg, SOFTGPU_IOC_MEMSET, &ms), "child MEMSET: %s", errname(errno));
	p = (struct gdrdrv_pin_buffer_v2){ .addr = a.va, .size = a.size };
	if (ioctl(gd, GDRDRV_IOC_PIN_BUFFER_V2, &p)) {
		CHILD_EXPECT(rep, 0, "child's own PIN_BUFFER_V2: %s", errname(errno));
		return;
	}
	handle = p.handle;
	map = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, gd, (off_t)(handle * w.page));
	if (map == MAP_FAILED) {
		CHILD_EXPECT(rep, 0, "child's own mmap: %s", errname(errno));
		return;
	}
	CHILD_EXPECT(rep, !try_access(map, false, &v) && v == (uint32_t)CHILD_TAG << 16,
		     "child reads its own mapping: 0x%08x", v);
	if (unpin_some) {
		struct gdrdrv_unpin_buffer u = { .handle = handle };

		CHILD_EXPECT(rep, !ioctl(gd, GDRDRV_IOC_UNPIN_BUFFER, &u), "child UNPIN: %s",
			     errname(errno));
		CHILD_EXPECT(rep, try_access(map, false, &v) != 0,
			     "child's mapping still reads 0x%08x after its unpin", v);
	}
}

struct snap {
	char *addr;
	size_t len;
	struct pin pin;
	uint64_t gpu_off;
};

void op_fork(struct thr *t, struct op *op)
{
	struct snap snaps[N_MAP];
	int nsnap = 0, s = fd_of(op->b >> 8), k;
	uint64_t live_handle = 0, live_va = 0, live_size = 0;
	bool have_pin = false;
	unsigned int what = op->b;
	pid_t pid;

	memset(t->rep, 0, sizeof(*t->rep));
	fd_get(s);
	lock();
	for (int i = 0; i < N_MAP; i++) {
		struct mapping *m = &w.maps[i];

		if (m->active)
			snaps[nsnap++] = (struct snap){ m->addr, m->len, w.pins[m->pin], m->gpu_off };
	}
	k = pick_pin(op->x, s);
	if (k >= 0) {
		have_pin = true;
		live_handle = w.pins[k].handle;
		live_va = w.pins[k].va;
		live_size = w.pins[k].len;
	}
	unlock();

	fflush(NULL);
	pid = fork();
	CALL();
	if (pid < 0) {
		fd_put(s);
		op->res = errno;
		return;
	}
	if (pid == 0) {
		struct child_report *rep = t->rep;
		int fd = w.fds[s].fd;

		alarm(CHILD_TIMEOUT_S - 5);
		if (what & 1) {
			/* Mappings are not inherited (VM_DONTCOPY); if one is, it
			 * must still show the parent's own bytes. */
			for (int i = 0; i < nsnap; i++) {
				uint32_t v;

				if (try_access(snaps[i].addr, false, &v))
					continue;
				if ((v >> 16) != snaps[i].pin.tag && tag_used(v >> 16))
					child_fail(rep, F_DATA,
						   "a fork child reads 0x%08x through the parent's mapping of tag %u",
						   v, snaps[i].pin.tag);
			}
		}
		if (what & 2) {
			struct gdrdrv_get_version ver;
			struct gdrdrv_unpin_buffer u = { .handle = live_handle };
			struct gdrdrv_get_info_v2 info = { .handle = live_handle };
			struct gdrdrv_pin_buffer_v2 p = { .addr = live_va, .size = live_size };
			void *m;

			CHILD_EXPECT(rep, ioctl(fd, GDRDRV_IOC_GET_VERSION, &ver) && errno == EACCES,
				     "GET_VERSION on the parent's file in a fork child: %s",
				     errname(errno));
			if (have_pin) {
				CHILD_EXPECT(rep, ioctl(fd, GDRDRV_IOC_UNPIN_BUFFER, &u) && errno == EACCES,
					     "UNPIN of the parent's handle in a fork child: %s",
					     errname(errno));
				CHILD_EXPECT(rep, ioctl(fd, GDRDRV_IOC_GET_INFO_V2, &info) && errno == EACCES,
					     "GET_INFO_V2 in a fork child: %s", errname(errno));
				CHILD_EXPECT(rep, ioctl(fd, GDRDRV_IOC_PIN_BUFFER_V2, &p) && errno == EACCES,
					     "PIN_BUFFER_V2 in a fork child: %s", errname(errno));
				m = mmap(NULL, live_size, PROT_READ, MAP_SHARED, fd,
					 (off_t)(live_handle * w.page));
				CHILD_EXPECT(rep, m == MAP_FAILED && errno == EACCES,
					     "mmap of the parent's handle in a fork child: %s",
					     m == MAP_FAILED ? errname(errno) : "mapped");
			}
		}
		if (what & 4) {
			struct softgpu_alloc a = { .size = GPU_PAGE };

			CHILD_EXPECT(rep, ioctl(w.sg, SOFTGPU_IOC_ALLOC, &a) && errno == EACCES,
				     "SOFTGPU_IOC_ALLOC on the parent's file in a fork child: %s",
				     errname(errno));
		}
		if (what & 8)
			child_own_state(rep, what & 16);
		if (what & 32)
			for (int i = 0; i < N_FD; i++)
				close(w.fds[i].fd);
		if (what & 64)
			raise(SIGKILL);
		_exit(0);
	}
	fd_put(s);
	op->res = 0;
	op->info = pid;
	reap(t, pid, what & 64);
}

static int send_fd(int sock, int fd, uint64_t handle)
{
	char ctrl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { &handle, sizeof(handle) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl,
			      .msg_controllen = sizeof(ctrl) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == sizeof(handle) ? 0 : -1;
}

static int recv_fd(int sock, uint64_t *handle)
{
	char ctrl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { handle, sizeof(*handle) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl,
			      .msg_controllen = sizeof(ctrl) };
	struct pollfd pfd = { .fd = sock, .events = POLLIN };
	struct cmsghdr *c;
	int fd;

	if (poll(&pfd, 1, (CHILD_TIMEOUT_S - 10) * 1000) != 1)
		return -1;
	if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != sizeof(*handle))
		return -1;
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* A file used by a process that did not open it: everything is EACCES. */
static void check_foreign_file(struct child_report *rep, int fd, uint64_t handle,
			       bool have_handle, const char *who)
{
	struct gdrdrv_get_version ver;
	struct gdrdrv_unpin_buffer u = { .handle = handle };
	void *m;

	CHILD_EXPECT(rep, ioctl(fd, GDRDRV_IOC_GET_VERSION, &ver) && errno == EACCES,
		     "GET_VERSION on a file received by %s: %s", who, errname(errno));
	if (!have_handle)
		return;
	CHILD_EXPECT(rep, ioctl(fd, GDRDRV_IOC_UNPIN_BUFFER, &u) && errno == EACCES,
		     "UNPIN on a file received by %s: %s", who, errname(errno));
	m = mmap(NULL, GPU_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)(handle * w.page));
	CHILD_EXPECT(rep, m == MAP_FAILED && errno == EACCES, "mmap of a file received by %s: %s",
		     who, m == MAP_FAILED ? errname(errno) : "mapped");
	if (m != MAP_FAILED)
		munmap(m, GPU_PAGE);
}

void op_reopen(struct thr *t, struct op *op);

void op_fdpass(struct thr *t, struct op *op)
{
	int s = fd_of(op->b >> 8), sv[2], k;
	bool to_child = !(op->b & 1), reopen = op->b & 2;
	uint64_t handle = ABSURD_HANDLE;
	char go = 'g';
	pid_t pid;

	memset(t->rep, 0, sizeof(*t->rep));
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		op->res = errno;
		return;
	}
	fd_get(s);
	lock();
	k = pick_pin(op->x, s);
	if (k >= 0)
		handle = w.pins[k].handle;
	unlock();
	fflush(NULL);
	pid = fork();
	CALL();
	if (pid < 0) {
		fd_put(s);
		op->res = errno;
		close(sv[0]);
		close(sv[1]);
		return;
	}
	if (pid == 0) {
		struct child_report *rep = t->rep;
		struct pollfd pfd = { .fd = sv[1], .events = POLLIN };
		uint64_t h;
		int fd;

		alarm(CHILD_TIMEOUT_S - 5);
		close(sv[0]);
		for (int i = 0; i < N_FD; i++)
			close(w.fds[i].fd);	/* only what it is sent */
		if (to_child) {
			fd = recv_fd(sv[1], &h);
			if (fd < 0) {
				child_fail(rep, F_SETUP, "receiving the file: %s", errname(errno));
				_exit(1);
			}
			check_foreign_file(rep, fd, h, h != ABSURD_HANDLE, "another process");
		} else {
			struct softgpu_alloc a = { .size = GPU_PAGE };
			struct gdrdrv_pin_buffer_v2 p = { 0 };
			int sg = open(SOFTGPU_DEVICE_PATH, O_RDWR | O_CLOEXEC);

			fd = open("/dev/gdrdrv", O_RDWR | O_CLOEXEC);
			h = ABSURD_HANDLE;
			if (sg >= 0 && fd >= 0 && !ioctl(sg, SOFTGPU_IOC_ALLOC, &a)) {
				p.addr = a.va;
				p.size = a.size;
				if (!ioctl(fd, GDRDRV_IOC_PIN_BUFFER_V2, &p))
					h = p.handle;
			}
			if (fd < 0 || send_fd(sv[1], fd, h)) {
				child_fail(rep, F_SETUP, "sending a file: %s", errname(errno));
				_exit(1);
			}
		}
		/* Hold the file until the parent says go (it may replace its own). */
		poll(&pfd, 1, (CHILD_TIMEOUT_S - 10) * 1000);
		close(fd);
		_exit(0);
	}
	close(sv[1]);
	op->info = pid;
	if (to_child) {
		op->res = send_fd(sv[0], w.fds[s].fd, handle) ? errno : 0;
		fd_put(s);
		if (reopen && !op->res)
			op_reopen(t, op);	/* the child holds the old file now */
	} else {
		uint64_t h;
		int fd = recv_fd(sv[0], &h);

		fd_put(s);
		op->res = fd < 0 ? EIO : 0;
		if (fd >= 0) {
			struct child_report mine = { 0 };

			check_foreign_file(&mine, fd, h, h != ABSURD_HANDLE, "the parent");
			if (mine.failed)
				fail(t, F_INVARIANT, C_EACCES, "%s", mine.msg);
			close(fd);
		}
	}
	(void)!write(sv[0], &go, 1);
	close(sv[0]);
	reap(t, pid, false);
}

/* Replaces a file slot's file by a new one (the old one is closed here). */
void op_reopen(struct thr *t, struct op *op)
{
	int s = fd_of(op->b >> 8), fd;
	struct fdslot *f = &w.fds[s];

	pthread_rwlock_wrlock(&f->lock);
	fd = open("/dev/gdrdrv", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fail(t, F_SETUP, 0, "open /dev/gdrdrv: %s", strerror(errno));
		pthread_rwlock_unlock(&f->lock);
		return;
	}
	/* dup2 closes the old file atomically: no other thread can get its number. */
	if (dup2(fd, f->fd) < 0)
		fail(t, F_SETUP, 0, "dup2: %s", strerror(errno));
	close(fd);
	CALL(); CALL();
	lock();
	f->gen++;
	f->nstale = 0;
	for (int i = 0; i < N_PIN; i++) {
		struct pin *p = &w.pins[i];

		if (p->state != P_EMPTY && p->fd == s) {
			/* Mappings keep the old file, and so its pins, alive. */
			p->orphan = true;
			p->ver++;
			pin_maybe_release(i);
		}
	}
	unlock();
	pthread_rwlock_unlock(&f->lock);
	if (op->type == OP_REOPEN)
		op->res = 0;
}

