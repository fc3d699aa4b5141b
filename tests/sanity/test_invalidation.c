// SPDX-License-Identifier: MIT
/*
 * Invalidation and isolation: what happens to a mapping when its memory
 * or its gdr_t goes away, and that no other process -- a fork child, or a
 * receiver of the file descriptor -- can use another's pins or mappings.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uapi/gdrdrv.h>

#include "sanity.h"

#define INVAL_SIZE ((size_t)2 * GPU_ALLOC_ALIGNMENT)

/*
 * Why each test waives under -a gdr_alloc_mapped (sanity_require_cuda_allocations).
 * As every test here does, their allocations need no gdr_t (NULL).
 */
#define WHY_FREE "the test frees the GPU memory while it is pinned (cuMemFree and the NVIDIA free callback), and gdr_alloc_mapped memory cannot be freed while pinned"
#define WHY_FORK "the test checks gdrdrv's rules for a gdr_t across fork() and fd passing; the vulkan backend has no device file"
#define WHY_CLOSE "the test keeps using the GPU memory after gdr_close(), but gdr_alloc_mapped memory goes with its gdr_t"

struct mapped_buffer {
	struct gpu_mem mem;
	gdr_mh_t mh;
	void *map;
	size_t size;
};

static void map_new_buffer(gdr_t g, CUdevice dev, enum gpu_alloc_kind kind, size_t size,
			   struct mapped_buffer *buf)
{
	buf->size = size;
	sanity_alloc(dev, g, kind, size, &buf->mem);
	ASSERT_GDR_OK(gdr_pin_buffer(g, buf->mem.ptr, size, 0, 0, &buf->mh));
	ASSERT_GDR_OK(gdr_map(g, buf->mh, &buf->map, size));
}

static void unmap_buffer(gdr_t g, struct mapped_buffer *buf)
{
	ASSERT_GDR_OK(gdr_unmap(g, buf->mh, buf->map, buf->size));
	ASSERT_GDR_OK(gdr_unpin_buffer(g, buf->mh));
}

static void store_word(struct mapped_buffer *buf, uint32_t value)
{
	uint32_t readback = 0;

	ASSERT_GDR_OK(gdr_copy_to_mapping(buf->mh, buf->map, &value, sizeof(value)));
	ASSERTDRV(cuMemcpyDtoH(&readback, buf->mem.ptr, sizeof(readback)));
	ASSERT_EQ(readback, value);
}

/* Load the first word of a mapping; returns the signal it raised, or 0 and the value. */
static int load_word(void *map, uint32_t *value)
{
	struct sanity_word_access access = { .addr = map };
	int sig = sanity_catch_fault(sanity_access_word, &access);

	*value = access.value;
	return sig;
}

SANITY_TEST_BOTH_ALLOCS(invalidation_access_after_gdr_close)
{
	struct mapped_buffer buf;
	uint32_t value;
	CUdevice dev;
	gdr_t g;
	int sig;

	sanity_require_cuda_allocations(WHY_CLOSE);
	dev = sanity_gpu_init(false);
	g = sanity_gdr_open();
	map_new_buffer(g, dev, kind, INVAL_SIZE, &buf);
	store_word(&buf, 0xdead0001);

	/* Neither unmapped nor unpinned: gdr_close must take the mapping away. */
	ASSERT_GDR_OK(gdr_close(g));
	sig = load_word(buf.map, &value);
	ASSERT_MSG(sig, "read 0x%x through a mapping after gdr_close(); it must fault", value);
	test_debug("access after gdr_close raised signal %d", sig);
	sanity_free(&buf.mem);
}

SANITY_TEST_BOTH_ALLOCS(invalidation_access_after_free)
{
	struct mapped_buffer buf;
	uint32_t value = 0;
	CUdevice dev;
	gdr_t g;
	int sig, flag = -1;

	sanity_require_cuda_allocations(WHY_FREE);
	dev = sanity_gpu_init(false);
	g = sanity_gdr_open();
	map_new_buffer(g, dev, kind, INVAL_SIZE, &buf);
	store_word(&buf, 0xdead0002);

	sanity_free(&buf.mem);
	sig = load_word(buf.map, &value);
	ASSERT_GDR_OK(gdr_get_callback_flag(g, buf.mh, &flag));
	if (sanity_persistent(g)) {
		/* A persistent pin keeps the pages until it is unpinned. */
		ASSERT_MSG(!sig, "persistent mapping faulted (signal %d) after the memory was freed; it must stay valid until unpinned",
			   sig);
		ASSERT_EQ(value, 0xdead0002);
		ASSERT_EQ(flag, 0);
	} else {
		ASSERT_MSG(sig, "read 0x%x after the memory was freed; a non-persistent mapping must be revoked",
			   value);
		ASSERT_EQ(flag, 1);
	}
	unmap_buffer(g, &buf);
	ASSERT_GDR_OK(gdr_close(g));
}

SANITY_TEST_BOTH_ALLOCS(invalidation_two_mappings)
{
	struct mapped_buffer a, b;
	uint32_t value = 0;
	CUdevice dev;
	gdr_t g;
	int sig;

	sanity_require_cuda_allocations(WHY_FREE);
	dev = sanity_gpu_init(false);
	g = sanity_gdr_open();
	map_new_buffer(g, dev, kind, INVAL_SIZE, &a);
	map_new_buffer(g, dev, kind, INVAL_SIZE, &b);
	store_word(&a, 0xaaaa0001);
	store_word(&b, 0xbbbb0001);

	sanity_free(&a.mem);

	/* B is untouched by freeing A. */
	sig = load_word(b.map, &value);
	ASSERT_MSG(!sig, "freeing buffer A broke buffer B's mapping (signal %d)", sig);
	ASSERT_EQ(value, 0xbbbb0001);
	store_word(&b, 0xbbbb0002);

	/*
	 * A non-persistent pin of A is revoked only when the driver really
	 * releases A's pages, which a sub-allocating cuMemAlloc may delay
	 * while B lives in the same chunk; only persistence is certain.
	 */
	sig = load_word(a.map, &value);
	if (sanity_persistent(g))
		ASSERT_MSG(!sig && value == 0xaaaa0001,
			   "persistent mapping of freed buffer A: signal %d, value 0x%x", sig, value);
	else
		test_debug("freed buffer A's mapping: %s", sig ? "revoked" : "still readable");

	unmap_buffer(g, &a);
	unmap_buffer(g, &b);
	ASSERT_GDR_OK(gdr_close(g));
	sanity_free(&b.mem);
}

/* ---- fork ---------------------------------------------------------------- */

struct two_way {
	int to_child[2];
	int to_parent[2];
	enum gpu_alloc_kind kind;
};

static void two_way_init(struct two_way *tw, enum gpu_alloc_kind kind)
{
	tw->kind = kind;
	ASSERT(pipe(tw->to_child) == 0);
	ASSERT(pipe(tw->to_parent) == 0);
}

/*
 * After the fork each side closes the other's pipe ends, so that when one
 * side dies the other reads end-of-file at once instead of hanging.
 */
static void two_way_as_parent(struct two_way *tw)
{
	close(tw->to_child[0]);
	close(tw->to_parent[1]);
}

static void two_way_as_child(struct two_way *tw)
{
	close(tw->to_child[1]);
	close(tw->to_parent[0]);
}

#define PATTERN_WORDS (INVAL_SIZE / sizeof(uint32_t))

static void fill_buffer(struct mapped_buffer *buf, uint32_t seed)
{
	uint32_t *src = malloc(buf->size);

	ASSERT(src);
	fill_seeded(src, buf->size, seed);
	ASSERT_GDR_OK(gdr_copy_to_mapping(buf->mh, buf->map, src, buf->size));
	free(src);
}

/* Does the GPU buffer (read with cuMemcpyDtoH) hold fill_seeded(seed)? */
static bool gpu_holds(CUdeviceptr ptr, size_t size, uint32_t seed)
{
	uint32_t *expected = malloc(size), *got = malloc(size);
	bool same;

	ASSERT(expected && got);
	fill_seeded(expected, size, seed);
	ASSERTDRV(cuMemcpyDtoH(got, ptr, size));
	same = !memcmp(expected, got, size);
	free(expected);
	free(got);
	return same;
}

struct mapping_read {
	struct mapped_buffer *buf;
	uint32_t *dst;
};

static void read_mapping(void *arg)
{
	struct mapping_read *r = arg;

	ASSERT_GDR_OK(gdr_copy_from_mapping(r->buf->mh, r->dst, r->buf->map, r->buf->size));
}

#define PARENT_SEED 0x11110000U
#define CHILD_SEED 0x22220000U

/*
 * A fork child's start: wait for the parent's go, then map a buffer of its own,
 * filled with CHILD_SEED.  NULL when the parent gave up before saying go.
 */
static gdr_t child_maps_own_buffer(struct two_way *tw, struct mapped_buffer *buf)
{
	CUdevice dev;
	gdr_t g;

	two_way_as_child(tw);
	if (!sanity_recv(tw->to_child[0]))
		return NULL;
	dev = sanity_gpu_init(true);
	g = sanity_gdr_open();
	map_new_buffer(g, dev, tw->kind, INVAL_SIZE, buf);
	fill_buffer(buf, CHILD_SEED);
	return g;
}

static void fork_access_after_free_child(void *arg)
{
	struct two_way *tw = arg;
	struct mapped_buffer buf;
	/* The go comes once the parent freed its buffer, so its pages may come back here. */
	gdr_t g = child_maps_own_buffer(tw, &buf);

	if (!g)
		return;
	ASSERT(gpu_holds(buf.mem.ptr, buf.size, CHILD_SEED));
	sanity_send(tw->to_parent[1], 1);
	sanity_recv(tw->to_child[0]);
	unmap_buffer(g, &buf);
	ASSERT_GDR_OK(gdr_close(g));
	sanity_free(&buf.mem);
}

SANITY_TEST_BOTH_ALLOCS(invalidation_fork_access_after_free)
{
	uint32_t *seen = malloc(INVAL_SIZE), *child_data = malloc(INVAL_SIZE),
		 *parent_data = malloc(INVAL_SIZE);
	struct mapping_read read = { .dst = seen };
	struct mapped_buffer buf;
	struct two_way tw;
	CUdevice dev;
	pid_t child;
	gdr_t g;
	int sig;

	sanity_require_cuda_allocations(WHY_FREE);
	ASSERT(seen && child_data && parent_data);
	two_way_init(&tw, kind);
	/* Fork before CUDA is initialised: a child of a CUDA process cannot use CUDA. */
	child = sanity_fork(fork_access_after_free_child, &tw);
	two_way_as_parent(&tw);

	dev = sanity_gpu_init(true);
	g = sanity_gdr_open();
	map_new_buffer(g, dev, kind, INVAL_SIZE, &buf);
	fill_buffer(&buf, PARENT_SEED);

	sanity_free(&buf.mem);	/* still pinned and mapped */
	sanity_send(tw.to_child[1], 1);
	sanity_recv(tw.to_parent[0]);

	read.buf = &buf;
	memset(seen, 0, INVAL_SIZE);
	sig = sanity_catch_fault(read_mapping, &read);
	fill_seeded(child_data, INVAL_SIZE, CHILD_SEED);
	fill_seeded(parent_data, INVAL_SIZE, PARENT_SEED);
	if (sig) {
		ASSERT_MSG(!sanity_persistent(g),
			   "persistent mapping faulted (signal %d) after free; it must stay valid until unpinned", sig);
	} else {
		ASSERT_MSG(memcmp(seen, child_data, INVAL_SIZE) != 0,
			   "the parent's stale mapping shows the child's data: memory leaked across processes");
		if (sanity_persistent(g))
			ASSERT_MSG(!memcmp(seen, parent_data, INVAL_SIZE),
				   "persistent mapping changed after the memory was freed");
	}
	sanity_send(tw.to_child[1], 1);
	sanity_expect_child_passed(child, "maps new memory after the parent freed its own");
	unmap_buffer(g, &buf);
	ASSERT_GDR_OK(gdr_close(g));
	free(seen);
	free(child_data);
	free(parent_data);
}

static void *fork_child_map;

static void fork_after_map_child(void *arg)
{
	uint32_t value = 0;
	int sig;

	(void)arg;
	sig = load_word(fork_child_map, &value);
	ASSERT_MSG(sig, "a fork child read 0x%x through its parent's mapping; mappings must not be inherited",
		   value);
}

SANITY_TEST_BOTH_ALLOCS(invalidation_fork_after_gdr_map)
{
	struct mapped_buffer buf;
	uint32_t value = 0;
	CUdevice dev;
	gdr_t g;

	sanity_require_cuda_allocations(WHY_FORK);
	dev = sanity_gpu_init(false);
	g = sanity_gdr_open();
	sanity_require_not_dmabuf(g, "keep mappings out of fork children");
	/* As NVIDIA's release waives it there: a child's copy may upset the driver's tracking. */
	if (sanity_gdr_attribute(g, GDR_ATTR_VMA_INHERITED_ON_FORK))
		test_waive("GDR_ATTR_VMA_INHERITED_ON_FORK is 1: this driver's mappings are inherited by fork children");
	map_new_buffer(g, dev, kind, INVAL_SIZE, &buf);
	store_word(&buf, 0xf0f00001);

	fork_child_map = buf.map;
	sanity_expect_child_passed(sanity_fork(fork_after_map_child, NULL),
				   "reads the parent's mapping");

	ASSERT_MSG(!load_word(buf.map, &value), "the parent's mapping faulted after fork");
	ASSERT_EQ(value, 0xf0f00001);
	store_word(&buf, 0xf0f00002);
	unmap_buffer(g, &buf);
	ASSERT_GDR_OK(gdr_close(g));
	sanity_free(&buf.mem);
}

/* Whether some mapping of this process covers addr (/proc/self/maps). */
static bool address_mapped(const void *addr)
{
	unsigned long start, end, a = (unsigned long)addr;
	char line[512];
	bool found = false;
	FILE *fp = fopen("/proc/self/maps", "re");

	ASSERT_MSG(fp, "open /proc/self/maps: %s", strerror(errno));
	while (!found && fgets(line, sizeof(line), fp))
		if (sscanf(line, "%lx-%lx", &start, &end) == 2 && a >= start && a < end)
			found = true;
	fclose(fp);
	return found;
}

static int fork_child_inherited;

static void fork_inheritance_child(void *arg)
{
	bool mapped = address_mapped(fork_child_map);
	uint32_t value = 0;
	int sig;

	(void)arg;
	ASSERT_MSG(mapped == (fork_child_inherited != 0),
		   "GDR_ATTR_VMA_INHERITED_ON_FORK is %d but the child %s the parent's mapping",
		   fork_child_inherited, mapped ? "has" : "does not have");
	if (!mapped)
		return;
	/* Inherited: the same GPU memory, not a copy. */
	sig = load_word(fork_child_map, &value);
	ASSERT_MSG(!sig, "the inherited mapping faulted (signal %d) in the child", sig);
	ASSERT_EQ(value, 0xf0f00003);
}

/*
 * GDR_ATTR_VMA_INHERITED_ON_FORK tells the truth: a fork child has the
 * parent's mapping exactly when it says 1.  On every backend: gdrdrv keeps
 * mappings out of children, the dma-buf and vulkan backends' NVIDIA
 * mappings are inherited.
 */
SANITY_TEST(invalidation_fork_inherits_as_attribute_says)
{
	struct mapped_buffer buf;
	CUdevice dev;
	gdr_t g;

	dev = sanity_gpu_init(false);
	g = sanity_gdr_open();
	fork_child_inherited = sanity_gdr_attribute(g, GDR_ATTR_VMA_INHERITED_ON_FORK);
	/* NVIDIA's gdrdrv in that configuration: the child's copy may upset its tracking. */
	if (fork_child_inherited && sanity_find_gdrdrv_fd() >= 0)
		test_waive("GDR_ATTR_VMA_INHERITED_ON_FORK is 1 on gdrdrv: a child's copy of the mapping may upset the driver's tracking");
	map_new_buffer(g, dev, GPU_ALLOC_CUMEMALLOC, INVAL_SIZE, &buf);
	store_word(&buf, 0xf0f00003);
	test_debug("GDR_ATTR_VMA_INHERITED_ON_FORK = %d", fork_child_inherited);

	fork_child_map = buf.map;
	sanity_expect_child_passed(sanity_fork(fork_inheritance_child, NULL),
				   "has the parent's mapping exactly when the attribute says so");
	unmap_buffer(g, &buf);
	sanity_free(&buf.mem);
	ASSERT_GDR_OK(gdr_close(g));
}

struct parent_pin {
	gdr_t g;
	gdr_mh_t mh;
	size_t size;
};

static void child_maps_parent_pin(void *arg)
{
	struct parent_pin *p = arg;
	void *map = NULL;
	int ret = gdr_map(p->g, p->mh, &map, p->size);

	ASSERT_MSG(ret != 0, "a fork child mapped its parent's pinned buffer");
	test_debug("child's gdr_map failed as it must: %d (%s)", ret, test_errno_text(ret));
}

SANITY_TEST_BOTH_ALLOCS(invalidation_fork_child_gdr_map_parent)
{
	struct parent_pin p = { .size = INVAL_SIZE };
	struct mapped_buffer buf = { .size = INVAL_SIZE };
	CUdevice dev;

	sanity_require_cuda_allocations(WHY_FORK);
	dev = sanity_gpu_init(false);
	p.g = sanity_gdr_open();
	sanity_require_not_dmabuf(p.g, "stop another process from mapping a pinned buffer");
	sanity_alloc(dev, NULL, kind, INVAL_SIZE, &buf.mem);
	ASSERT_GDR_OK(gdr_pin_buffer(p.g, buf.mem.ptr, INVAL_SIZE, 0, 0, &p.mh));

	sanity_expect_child_passed(sanity_fork(child_maps_parent_pin, &p),
				   "maps the parent's pinned buffer");

	/* The owner still can. */
	buf.mh = p.mh;
	ASSERT_GDR_OK(gdr_map(p.g, buf.mh, &buf.map, INVAL_SIZE));
	store_word(&buf, 0xf0f00003);
	unmap_buffer(p.g, &buf);
	ASSERT_GDR_OK(gdr_close(p.g));
	sanity_free(&buf.mem);
}

static void fork_map_and_free_child(void *arg)
{
	struct two_way *tw = arg;
	struct mapped_buffer buf;
	gdr_t g = child_maps_own_buffer(tw, &buf);

	if (!g)
		return;
	sanity_free(&buf.mem);	/* while mapped */
	unmap_buffer(g, &buf);
	ASSERT_GDR_OK(gdr_close(g));
	sanity_send(tw->to_parent[1], 1);
}

SANITY_TEST_BOTH_ALLOCS(invalidation_fork_map_and_free)
{
	uint32_t *seen = malloc(INVAL_SIZE), *expected = malloc(INVAL_SIZE);
	struct mapping_read read = { .dst = seen };
	struct mapped_buffer buf;
	struct two_way tw;
	CUdevice dev;
	pid_t child;
	gdr_t g;
	int sig;

	sanity_require_cuda_allocations(WHY_FREE);
	ASSERT(seen && expected);
	two_way_init(&tw, kind);
	child = sanity_fork(fork_map_and_free_child, &tw);
	two_way_as_parent(&tw);

	dev = sanity_gpu_init(true);
	g = sanity_gdr_open();
	map_new_buffer(g, dev, kind, INVAL_SIZE, &buf);
	fill_buffer(&buf, PARENT_SEED);
	sanity_send(tw.to_child[1], 1);
	sanity_recv(tw.to_parent[0]);

	/* The child's map-and-free left the parent's mapping and memory intact. */
	read.buf = &buf;
	sig = sanity_catch_fault(read_mapping, &read);
	ASSERT_MSG(!sig, "the parent's mapping faulted (signal %d) after the child freed its own buffer", sig);
	fill_seeded(expected, INVAL_SIZE, PARENT_SEED);
	ASSERT_MSG(!memcmp(seen, expected, INVAL_SIZE),
		   "the parent's mapping changed when the child freed its own buffer");
	ASSERT(gpu_holds(buf.mem.ptr, INVAL_SIZE, PARENT_SEED));
	fill_buffer(&buf, PARENT_SEED + 1);
	ASSERT(gpu_holds(buf.mem.ptr, INVAL_SIZE, PARENT_SEED + 1));

	sanity_expect_child_passed(child, "maps and frees its own buffer");
	unmap_buffer(g, &buf);
	ASSERT_GDR_OK(gdr_close(g));
	sanity_free(&buf.mem);
	free(seen);
	free(expected);
}

/* ---- file descriptors passed over a UNIX socket -------------------------- */

struct fd_passing {
	int sock[2];		/* [0] parent's end, [1] child's end */
	int go[2];		/* parent -> child: 1 = an fd follows, 0 = stop */
	enum gpu_alloc_kind kind;
};

static void fd_passing_as_parent(struct fd_passing *fp)
{
	close(fp->go[0]);
	close(fp->sock[1]);
}

static void fd_passing_as_child(struct fd_passing *fp)
{
	close(fp->go[1]);
	close(fp->sock[0]);
}

static void fd_passing_init(struct fd_passing *fp, enum gpu_alloc_kind kind)
{
	fp->kind = kind;
	ASSERT_MSG(socketpair(AF_UNIX, SOCK_DGRAM, 0, fp->sock) == 0, "socketpair failed: %s",
		   strerror(errno));
	ASSERT(pipe(fp->go) == 0);
}

/* Parent: stop the child (it exits passing), then waive. */
static void __attribute__((noreturn)) fd_passing_waive(struct fd_passing *fp, pid_t child,
						       const char *why)
{
	sanity_send(fp->go[1], 0);
	sanity_wait(child);
	test_waive("%s", why);
}

/* Is this the gdrdrv backend?  The fd tests need the driver's file. */
static int gdrdrv_fd_of(gdr_t g, struct fd_passing *fp, pid_t child)
{
	int fd;

	if (sanity_using_dmabuf(g))
		fd_passing_waive(fp, child, "the dma-buf mmap backend is in use; its per-buffer fds are not protected against passing");
	fd = sanity_find_gdrdrv_fd();
	if (fd < 0)
		fd_passing_waive(fp, child, "gdr_open() did not open " GDRDRV_NODE " (another backend is in use)");
	return fd;
}

static void receiver_pins_with_foreign_fd(void *arg)
{
	struct fd_passing *fp = arg;
	struct gdrdrv_pin_buffer_v2 pin_v2;
	struct gdrdrv_pin_buffer pin;
	struct gpu_mem mem;
	uint64_t unused;
	gdr_mh_t mh;
	CUdevice dev;
	gdr_t own;
	int fd;

	fd_passing_as_child(fp);
	if (!sanity_recv(fp->go[0]))
		return;
	dev = sanity_gpu_init(true);
	sanity_alloc(dev, NULL, fp->kind, INVAL_SIZE, &mem);
	fd = sanity_recv_fd(fp->sock[1], &unused);

	/* Our own, valid buffer: only the fd's owner makes the pin fail. */
	memset(&pin_v2, 0, sizeof(pin_v2));
	pin_v2.addr = mem.ptr;
	pin_v2.size = INVAL_SIZE;
	errno = 0;
	ASSERT_MSG(ioctl(fd, GDRDRV_IOC_PIN_BUFFER_V2, &pin_v2) < 0 && errno == EACCES,
		   "PIN_BUFFER_V2 on a gdrdrv fd received over a socket: %s; it must fail with EACCES",
		   errno ? strerror(errno) : "succeeded");
	memset(&pin, 0, sizeof(pin));
	pin.addr = mem.ptr;
	pin.size = INVAL_SIZE;
	errno = 0;
	ASSERT_MSG(ioctl(fd, GDRDRV_IOC_PIN_BUFFER, &pin) < 0 && errno == EACCES,
		   "PIN_BUFFER on a gdrdrv fd received over a socket: %s; it must fail with EACCES",
		   errno ? strerror(errno) : "succeeded");
	close(fd);

	/* Control: with its own gdr_t the receiver pins the same buffer fine. */
	own = sanity_gdr_open();
	ASSERT_GDR_OK(gdr_pin_buffer(own, mem.ptr, INVAL_SIZE, 0, 0, &mh));
	ASSERT_GDR_OK(gdr_unpin_buffer(own, mh));
	ASSERT_GDR_OK(gdr_close(own));
	sanity_free(&mem);
}

SANITY_TEST_BOTH_ALLOCS(invalidation_unix_sock_shared_fd_gdr_pin_buffer)
{
	struct fd_passing fp;
	struct mapped_buffer buf;
	CUdevice dev;
	pid_t child;
	gdr_t g;
	int fd;

	sanity_require_cuda_allocations(WHY_FORK);
	fd_passing_init(&fp, kind);
	child = sanity_fork(receiver_pins_with_foreign_fd, &fp);
	fd_passing_as_parent(&fp);

	dev = sanity_gpu_init(true);
	g = sanity_gdr_open();
	fd = gdrdrv_fd_of(g, &fp, child);
	sanity_send(fp.go[1], 1);
	sanity_send_fd(fp.sock[0], fd, 0);
	sanity_expect_child_passed(child, "pins with a gdrdrv fd received over a socket");

	/* The owner's fd still works. */
	map_new_buffer(g, dev, kind, INVAL_SIZE, &buf);
	store_word(&buf, 0x50c40001);
	unmap_buffer(g, &buf);
	ASSERT_GDR_OK(gdr_close(g));
	sanity_free(&buf.mem);
}

static void receiver_maps_with_foreign_fd(void *arg)
{
	struct fd_passing *fp = arg;
	struct gdrdrv_get_info_v2 info;
	uint64_t handle;
	void *map;
	int fd;

	fd_passing_as_child(fp);
	if (!sanity_recv(fp->go[0]))
		return;
	fd = sanity_recv_fd(fp->sock[1], &handle);
	errno = 0;
	map = mmap(NULL, INVAL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   (off_t)(handle << __builtin_ctzl((unsigned long)sysconf(_SC_PAGESIZE))));
	ASSERT_MSG(map == MAP_FAILED && errno == EACCES,
		   "mmap of a pinned buffer through a gdrdrv fd received over a socket: %s; it must fail with EACCES",
		   map == MAP_FAILED ? strerror(errno) : "succeeded");
	memset(&info, 0, sizeof(info));
	info.handle = handle;
	errno = 0;
	ASSERT_MSG(ioctl(fd, GDRDRV_IOC_GET_INFO_V2, &info) < 0 && errno == EACCES,
		   "GET_INFO_V2 through a received gdrdrv fd: %s; it must fail with EACCES",
		   errno ? strerror(errno) : "succeeded");
	close(fd);
}

SANITY_TEST_BOTH_ALLOCS(invalidation_unix_sock_shared_fd_gdr_map)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct gdrdrv_pin_buffer_v2 pin_v2;
	struct gdrdrv_pin_buffer pin;
	struct gdrdrv_unpin_buffer unpin;
	struct fd_passing fp;
	struct gpu_mem mem;
	uint64_t handle;
	CUdevice dev;
	pid_t child;
	void *map;
	gdr_t g;
	int fd;

	sanity_require_cuda_allocations(WHY_FORK);
	fd_passing_init(&fp, kind);
	child = sanity_fork(receiver_maps_with_foreign_fd, &fp);
	fd_passing_as_parent(&fp);

	dev = sanity_gpu_init(false);
	g = sanity_gdr_open();
	gdrdrv_fd_of(g, &fp, child);
	/* A file of our own, so we know the driver's handle to pass along. */
	fd = open(GDRDRV_NODE, O_RDWR | O_CLOEXEC);
	ASSERT_MSG(fd >= 0, "cannot open %s: %s", GDRDRV_NODE, strerror(errno));
	sanity_alloc(dev, NULL, kind, INVAL_SIZE, &mem);
	if (sanity_persistent(g)) {
		memset(&pin_v2, 0, sizeof(pin_v2));
		pin_v2.addr = mem.ptr;
		pin_v2.size = INVAL_SIZE;
		ASSERT_MSG(ioctl(fd, GDRDRV_IOC_PIN_BUFFER_V2, &pin_v2) == 0, "PIN_BUFFER_V2 failed: %s",
			   strerror(errno));
		handle = pin_v2.handle;
	} else {
		CUDA_POINTER_ATTRIBUTE_P2P_TOKENS tokens;

		ASSERTDRV(cuPointerGetAttribute(&tokens, CU_POINTER_ATTRIBUTE_P2P_TOKENS, mem.ptr));
		memset(&pin, 0, sizeof(pin));
		pin.addr = mem.ptr;
		pin.size = INVAL_SIZE;
		pin.p2p_token = tokens.p2pToken;
		pin.va_space = tokens.vaSpaceToken;
		ASSERT_MSG(ioctl(fd, GDRDRV_IOC_PIN_BUFFER, &pin) == 0, "PIN_BUFFER failed: %s",
			   strerror(errno));
		handle = pin.handle;
	}

	/* Control: the owner can map it with exactly what the receiver gets. */
	map = mmap(NULL, INVAL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   (off_t)(handle << __builtin_ctzl(page)));
	ASSERT_MSG(map != MAP_FAILED, "the owner cannot mmap its own pin: %s", strerror(errno));
	ASSERT_EQ(munmap(map, INVAL_SIZE), 0);

	sanity_send(fp.go[1], 1);
	sanity_send_fd(fp.sock[0], fd, handle);
	sanity_expect_child_passed(child, "maps with a gdrdrv fd and handle received over a socket");

	unpin.handle = handle;
	ASSERT_MSG(ioctl(fd, GDRDRV_IOC_UNPIN_BUFFER, &unpin) == 0, "UNPIN_BUFFER failed: %s",
		   strerror(errno));
	close(fd);
	ASSERT_GDR_OK(gdr_close(g));
	sanity_free(&mem);
}

struct token_message {
	uint64_t addr;
	uint64_t size;
	uint64_t p2p_token;
	uint64_t va_space;
};

static void child_pins_parent_buffer(void *arg)
{
	struct two_way *tw = arg;
	struct token_message msg;
	struct gpu_mem own_mem;
	gdr_mh_t mh;
	CUdevice dev;
	gdr_t g;
	int ret;

	two_way_as_child(tw);
	if (!sanity_recv(tw->to_child[0]))
		return;
	msg.addr = sanity_recv(tw->to_child[0]);
	msg.size = sanity_recv(tw->to_child[0]);
	msg.p2p_token = sanity_recv(tw->to_child[0]);
	msg.va_space = sanity_recv(tw->to_child[0]);

	dev = sanity_gpu_init(true);
	g = sanity_gdr_open();
	ret = gdr_pin_buffer(g, msg.addr, msg.size, msg.p2p_token, (uint32_t)msg.va_space, &mh);
	if (ret == 0) {
		gdr_unpin_buffer(g, mh);
		TEST_FAIL("a fork child pinned its parent's GPU buffer with the parent's P2P tokens");
	}
	/* Control: the child's own memory pins. */
	sanity_alloc(dev, NULL, GPU_ALLOC_CUMEMALLOC, INVAL_SIZE, &own_mem);
	ASSERT_GDR_OK(gdr_pin_buffer(g, own_mem.ptr, INVAL_SIZE, 0, 0, &mh));
	ASSERT_GDR_OK(gdr_unpin_buffer(g, mh));
	ASSERT_GDR_OK(gdr_close(g));
	sanity_free(&own_mem);
}

SANITY_TEST(invalidation_fork_child_gdr_pin_parent_with_tokens)
{
	CUDA_POINTER_ATTRIBUTE_P2P_TOKENS tokens;
	struct gpu_mem mem;
	struct two_way tw;
	CUdevice dev;
	pid_t child;
	gdr_mh_t mh;
	gdr_t g;

	sanity_require_cuda_allocations("P2P tokens belong to cuMemAlloc memory pinned by gdrdrv");
	two_way_init(&tw, GPU_ALLOC_CUMEMALLOC);
	child = sanity_fork(child_pins_parent_buffer, &tw);
	two_way_as_parent(&tw);

	dev = sanity_gpu_init(true);
	g = sanity_gdr_open();
	if (sanity_using_dmabuf(g)) {
		sanity_send(tw.to_child[1], 0);
		sanity_wait(child);
		test_waive("the dma-buf mmap backend is in use; it takes no P2P tokens");
	}
	sanity_alloc(dev, NULL, GPU_ALLOC_CUMEMALLOC, INVAL_SIZE, &mem);
	memset(&tokens, 0, sizeof(tokens));
	ASSERTDRV(cuPointerGetAttribute(&tokens, CU_POINTER_ATTRIBUTE_P2P_TOKENS, mem.ptr));

	sanity_send(tw.to_child[1], 1);
	sanity_send(tw.to_child[1], mem.ptr);
	sanity_send(tw.to_child[1], INVAL_SIZE);
	sanity_send(tw.to_child[1], tokens.p2pToken);
	sanity_send(tw.to_child[1], tokens.vaSpaceToken);
	sanity_expect_child_passed(child, "pins the parent's buffer with its tokens");

	/* Control: the owner pins it (tokens only where the driver takes them). */
	if (sanity_persistent(g))
		ASSERT_GDR_OK(gdr_pin_buffer(g, mem.ptr, INVAL_SIZE, 0, 0, &mh));
	else
		ASSERT_GDR_OK(gdr_pin_buffer(g, mem.ptr, INVAL_SIZE, tokens.p2pToken,
					     tokens.vaSpaceToken, &mh));
	ASSERT_GDR_OK(gdr_unpin_buffer(g, mh));
	ASSERT_GDR_OK(gdr_close(g));
	sanity_free(&mem);
}

/* ---- extended: page references leaked through a fork child --------------- */

#define REFCOUNT_FILE "/proc/driver/gdrdrv/nv_get_pages_refcount"

static long read_refcount(void)
{
	FILE *f = fopen(REFCOUNT_FILE, "r");
	long value = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &value) != 1)
		value = -1;
	fclose(f);
	return value;
}

static gdr_t leak_g;
static int leak_go[2];

static void leak_child_closes(void *arg)
{
	(void)arg;
	sanity_recv(leak_go[0]);
	/* Its unpins fail (not the owner); closing drops the file's last reference. */
	gdr_close(leak_g);
}

SANITY_EXTENDED_TEST(leakage_pin_pages_fork_cumemalloc)
{
	struct gpu_mem mem;
	long before, during, after;
	CUdevice dev;
	gdr_mh_t mh;
	pid_t child;
	int fd;

	sanity_require_cuda_allocations("the test counts the page references gdrdrv holds for cuMemAlloc memory");
	before = read_refcount();
	if (before < 0)
		test_waive("cannot read " REFCOUNT_FILE ": load gdrdrv with dbg_enabled=1 and run as root");
	if (before != 0)
		test_waive(REFCOUNT_FILE " is %ld before the test: another process holds pins", before);

	dev = sanity_gpu_init(false);
	leak_g = sanity_gdr_open();
	sanity_require_not_dmabuf(leak_g, "use gdrdrv's page references");
	fd = sanity_find_gdrdrv_fd();
	ASSERT_MSG(fd >= 0, "gdr_open() did not open " GDRDRV_NODE);
	sanity_alloc(dev, NULL, GPU_ALLOC_CUMEMALLOC, INVAL_SIZE, &mem);
	ASSERT_GDR_OK(gdr_pin_buffer(leak_g, mem.ptr, INVAL_SIZE, 0, 0, &mh));
	during = read_refcount();
	ASSERT_MSG(during > 0, "the refcount did not count the pin (%ld)", during);

	ASSERT(pipe(leak_go) == 0);
	child = sanity_fork(leak_child_closes, NULL);
	/* The parent lets go first, so the child's close releases the file. */
	close(fd);
	sanity_send(leak_go[1], 1);
	sanity_expect_child_passed(child, "closes the last reference to the gdrdrv file");

	after = read_refcount();
	ASSERT_MSG(after == 0, "%ld page references leaked after the last close (in a fork child)", after);
	sanity_free(&mem);
}
