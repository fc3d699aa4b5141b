// SPDX-License-Identifier: MIT
/*
 * gdrdrv_fuzz, operation family: gdrdrv's ioctls (pin, unpin, get_info,
 * get_attr, get_version, req_mapping_type, unknown commands).
 */
#include "fuzz.h"

static void check_pin_info(struct thr *t, int fd, uint64_t handle, uint64_t va,
			   uint64_t len)
{
	struct gdrdrv_get_info_v2 info = { .handle = handle };
	int err = ioctl(fd, GDRDRV_IOC_GET_INFO_V2, &info) ? errno : 0;

	EXPECT(t, !err, C_PIN_INFO, "GET_INFO_V2 of the handle 0x%llx just pinned: %s",
	       (unsigned long long)handle, errname(err));
	if (err)
		return;
	EXPECT(t, info.va == va && info.mapped_size == len &&
	       info.page_size == GDRDRV_GPU_PAGE_SIZE && info.mapping_type == GDRDRV_MR_NONE,
	       C_PIN_INFO, "GET_INFO_V2 of a new pin: va 0x%llx size 0x%llx page %u type %u, want va 0x%llx size 0x%llx page 65536 type 0",
	       (unsigned long long)info.va, (unsigned long long)info.mapped_size,
	       info.page_size, info.mapping_type, (unsigned long long)va,
	       (unsigned long long)len);
}

enum pin_mode pin_mode_of(uint32_t bits)
{
	static const enum pin_mode modes[16] = {
		PM_WHOLE, PM_WHOLE, PM_WHOLE, PM_WHOLE, PM_WHOLE, PM_SUB, PM_SUB,
		PM_SUB, PM_UNALIGNED, PM_UNALIGNED, PM_PAST_END, PM_FREED,
		PM_UNALLOCATED, PM_ZERO, PM_HOST, PM_SUB,
	};
	return modes[bits & 15];
}

/* Argument placements. */
/* One PIN call: what it asks for, drawn from the op and the state. */
struct pin_call {
	enum pin_mode mode;
	unsigned int kind;	/* 2, 3: PIN_BUFFER (3 with tokens); else PIN_BUFFER_V2 */
	enum arg_mode amode;
	int s;			/* file slot */
	uint32_t gen;		/* its generation */
	int k;			/* the allocation record, or -1 */
	uint32_t alloc_serial;
	struct alloc al;	/* as it was when picked */
	uint64_t addr, size;
	uint32_t flags, pad;
	bool must_fail;
	const char *why;
};

/* The range to pin, as the mode asks, in or around the picked allocation. */
static void pin_range(struct pin_call *c, const struct thr *t, const struct op *op)
{
	const struct alloc *al = &c->al;

	switch (c->mode) {
	case PM_WHOLE:
		c->addr = al->va;
		c->size = al->size;
		break;
	case PM_SUB:
		if (al->size) {
			uint64_t pages = al->size / GPU_PAGE, first = op->x % pages;

			c->addr = al->va + first * GPU_PAGE;
			c->size = (1 + op->y % (pages - first)) * GPU_PAGE;
		}
		break;
	case PM_UNALIGNED:
		if (al->size) {
			uint64_t off = op->x % al->size;

			c->addr = al->va + off;
			c->size = 1 + op->y % (al->size - off);
		}
		break;
	case PM_PAST_END:
		if (al->size) {
			c->addr = al->va + (op->x % al->size & ~(GPU_PAGE - 1));
			c->size = al->va + al->size - c->addr + 1 + op->y % (2 * GPU_PAGE);
		}
		break;
	case PM_FREED:
		c->addr = al->va;
		c->size = al->size;
		break;
	case PM_UNALLOCATED:
		/* softgpu's addresses start at 1 TiB and grow by what was allocated. */
		c->addr = op->x & 1 ? (op->x % (1ULL << 40)) | 1ULL << 20 :
			  (1ULL << 56) + (op->x % (1ULL << 40));
		c->size = 1 + op->y % (4 * GPU_PAGE);
		break;
	case PM_ZERO:
		switch (op->x % 4) {
		case 0: c->addr = 0; c->size = GPU_PAGE; break;
		case 1: c->addr = al->va ? al->va : 1ULL << 40; c->size = 0; break;
		case 2: c->addr = al->va ? al->va : 1ULL << 40; c->size = ~0ULL - c->addr + 2; break;
		default: c->addr = ~0ULL - GPU_PAGE; c->size = 2 * GPU_PAGE; break;
		}
		break;
	case PM_HOST:
		c->addr = (uintptr_t)t->buf;
		c->size = GPU_PAGE;
		break;
	}
}

static void pin_must_fail(struct pin_call *c, const char *why)
{
	c->must_fail = true;
	c->why = why;
}

/* PIN_BUFFER's argument: tokens (kind 3), and an ignored pad. */
static void pin_args_v1(struct pin_call *c, const struct op *op, struct gdrdrv_pin_buffer *p1)
{
	uint64_t token = 0;
	uint32_t va_space = 0;

	if (c->kind == 3) {
		switch (op->z % 3) {
		case 0:
			token = w.sgi.p2p_token;
			va_space = w.sgi.va_space;
			break;
		case 1:
			token = w.sgi.p2p_token + 1 + (op->z >> 8) % 5;
			va_space = w.sgi.va_space;
			break;
		default:
			token = w.sgi.p2p_token;
			va_space = w.sgi.va_space + 1;
			break;
		}
		if (w.persistent && (token || va_space))
			pin_must_fail(c, "tokens with persistent pins");
		else if (!w.persistent && op->z % 3)
			pin_must_fail(c, "tokens of another space");
		else if (!w.persistent && !w.tokens_allowed)
			pin_must_fail(c, "tokens while gdrdrv's allow_p2p_tokens is off");
	}
	*p1 = (struct gdrdrv_pin_buffer){ .addr = c->addr, .size = c->size, .p2p_token = token,
					  .va_space = va_space, .pad = (uint32_t)op->z };
}

/* PIN_BUFFER_V2's argument: flags and a pad the driver must check. */
static void pin_args_v2(struct pin_call *c, struct gdrdrv_pin_buffer_v2 *p2)
{
	if (c->pad)
		pin_must_fail(c, "non-zero pad");
	else if (c->flags & ~GDRDRV_PIN_BUFFER_FLAGS_ALL)
		pin_must_fail(c, "unknown flags");
	else if (c->flags && !w.persistent)
		pin_must_fail(c, "FORCE_PCIE with legacy pins");
	else if (c->flags && !w.force_pcie)
		pin_must_fail(c, "FORCE_PCIE unsupported");
	*p2 = (struct gdrdrv_pin_buffer_v2){ .addr = c->addr, .size = c->size, .flags = c->flags,
					     .pad = c->pad };
}

/* What the driver must have answered, as far as the state tells. */
static void pin_check_answer(struct thr *t, const struct pin_call *c, int err, bool stable)
{
	const char *version = c->kind >= 2 ? "v1" : "v2";

	if (c->amode == ARG_NULL || c->amode == ARG_NONE_PAGE || c->amode == ARG_STRADDLE_NONE) {
		EXPECT(t, err == EFAULT, C_EFAULT, "PIN with an unreadable argument: %s, want EFAULT",
		       errname(err));
	} else if (c->amode == ARG_READONLY) {
		/* Pinned, then the handle cannot be written back: unpinned again. */
		EXPECT(t, err != 0, C_EFAULT, "PIN with a read-only argument succeeded");
	} else if (c->must_fail) {
		EXPECT(t, err != 0 || (c->mode == PM_FREED && !stable), C_PIN_BAD,
		       "PIN %s 0x%llx+0x%llx flags 0x%x pad 0x%x (%s) succeeded",
		       version, (unsigned long long)c->addr,
		       (unsigned long long)c->size, c->flags, c->pad, c->why);
	} else if (stable) {
		EXPECT(t, !err, C_PIN_GOOD, "PIN %s of 0x%llx+0x%llx (live allocation 0x%llx+0x%llx) failed: %s",
		       version, (unsigned long long)c->addr,
		       (unsigned long long)c->size, (unsigned long long)c->al.va,
		       (unsigned long long)c->al.size, errname(err));
	}
}

/* Whether file slot @s already has a live pin with @handle (w.lock held). */
static bool handle_in_use(int s, uint32_t gen, uint64_t handle)
{
	for (int i = 0; i < N_PIN; i++) {
		const struct pin *q = &w.pins[i];

		if ((q->state == P_LIVE || q->state == P_UNPINNING) && !q->orphan &&
		    q->fd == s && q->fd_gen == gen && q->handle == handle)
			return true;
	}
	return false;
}

/*
 * Records a new pin in a free slot (w.lock held); -1 if there is none, or
 * if the pin is ambiguous: an allocation freed during the call may have had
 * its address reused by a new one before the pin reached softgpu, and the
 * pin then holds either the old memory (revoked) or the new (live).
 */
static int pin_record(const struct pin_call *c, const struct op *op, uint64_t handle,
		      bool stable)
{
	uint64_t start = c->addr & GDRDRV_GPU_PAGE_MASK;
	uint64_t end = (c->addr + c->size + GDRDRV_GPU_PAGE_OFFSET) & GDRDRV_GPU_PAGE_MASK;
	struct pin *q;
	int slot = -1;

	for (int i = 0; (c->k < 0 || stable) && i < N_PIN && slot < 0; i++)
		if (w.pins[(op->x + i) % N_PIN].state == P_EMPTY)
			slot = (op->x + i) % N_PIN;
	if (slot < 0)
		return -1;
	q = &w.pins[slot];
	*q = (struct pin){
		.state = P_LIVE, .serial = ++w.serial, .fd = c->s, .fd_gen = c->gen,
		.handle = handle, .addr = c->addr, .size = c->size, .va = start,
		.len = end - start, .alloc_va = c->al.va, .alloc_size = c->al.size,
		.alloc_k = c->k, .alloc_serial = c->alloc_serial,
		.tag = c->al.tag, .legacy = !w.persistent, .pin_seq = op->seq,
	};
	/* Freed while we pinned it: the callback revoked it already. */
	if (q->legacy && c->k >= 0 &&
	    (w.allocs[c->k].state != A_LIVE || w.allocs[c->k].serial != c->alloc_serial)) {
		q->revoked = true;
		q->revoke_seq = op->seq;
	}
	return slot;
}

/* A new pin: checks its handle, and tracks it or unpins it again. */
static void pin_track(struct thr *t, struct op *op, const struct pin_call *c, uint64_t handle,
		      bool stable)
{
	uint64_t start = c->addr & GDRDRV_GPU_PAGE_MASK;
	uint64_t end = (c->addr + c->size + GDRDRV_GPU_PAGE_OFFSET) & GDRDRV_GPU_PAGE_MASK;
	int slot, err;

	op->info = (uint32_t)handle;
	/* Nobody else knows the handle yet: it must be valid now. */
	check_pin_info(t, w.fds[c->s].fd, handle, start, end - start);

	lock();
	if (handle_in_use(c->s, c->gen, handle)) {
		unlock();
		fail(t, F_INVARIANT, C_HANDLE_DUP, "PIN returned handle 0x%llx, which is still pinned",
		     (unsigned long long)handle);
		return;
	}
	slot = pin_record(c, op, handle, stable);
	unlock();
	if (slot < 0) {		/* no room to track it, or it is ambiguous */
		struct gdrdrv_unpin_buffer u = { .handle = handle };

		err = ioctl(w.fds[c->s].fd, GDRDRV_IOC_UNPIN_BUFFER, &u) ? errno : 0;
		EXPECT(t, !err, C_UNPIN_LIVE, "UNPIN of a new pin: %s", errname(err));
		lock();
		push_stale(c->s, handle);
		unlock();
	}
}

void op_pin(struct thr *t, struct op *op)
{
	struct pin_call c = {
		.mode = pin_mode_of(op->b), .kind = (op->b >> 4) & 3,
		.amode = arg_mode_of(op->b >> 13), .s = fd_of(op->b >> 17), .why = "",
	};
	unsigned int fmode = (op->b >> 6) & 7;
	struct gdrdrv_pin_buffer p1;
	struct gdrdrv_pin_buffer_v2 p2;
	unsigned long cmd;
	enum entry entry;
	uint64_t handle;
	bool stable;
	void *arg;
	size_t len;
	int err;

	c.gen = fd_get(c.s);
	lock();
	c.k = pick_alloc(op->a, c.mode == PM_FREED ? A_FREED : A_LIVE);
	if (c.k >= 0) {
		c.al = w.allocs[c.k];
		c.alloc_serial = c.al.serial;
	}
	unlock();

	pin_range(&c, t, op);
	if (!c.size && c.mode != PM_ZERO) {		/* no allocation of that kind */
		fd_put(c.s);
		op->res = RES_SKIPPED;
		return;
	}

	switch (fmode) {
	case 5: c.flags = GDRDRV_PIN_BUFFER_FLAG_FORCE_PCIE; break;
	case 6: c.flags = (uint32_t)op->z | 2; break;
	case 7: c.pad = (uint32_t)(op->z >> 32) | 1; break;
	default: break;
	}
	if (!c.addr || !c.size || c.mode == PM_ZERO)
		pin_must_fail(&c, "zero or wrapping range");
	else if (c.mode != PM_WHOLE && c.mode != PM_SUB && c.mode != PM_UNALIGNED)
		pin_must_fail(&c, "range outside the process's live GPU memory");

	if (c.kind == 2 || c.kind == 3) {
		pin_args_v1(&c, op, &p1);
		cmd = GDRDRV_IOC_PIN_BUFFER;
		arg = &p1;
		len = sizeof(p1);
	} else {
		pin_args_v2(&c, &p2);
		cmd = GDRDRV_IOC_PIN_BUFFER_V2;
		arg = &p2;
		len = sizeof(p2);
	}
	cmd = spelled(cmd, op->b >> 9, &entry);

	if (c.amode == ARG_OK) {
		err = xioctl(t, w.fds[c.s].fd, cmd, arg, len, entry);
	} else {
		void *where = place_arg(t, c.amode, arg, len);

		err = xioctl(t, w.fds[c.s].fd, cmd, where, 0, entry);
		if (!err)
			memcpy(arg, where, len);
	}
	op->res = err;
	handle = c.kind >= 2 ? p1.handle : p2.handle;

	lock();
	/* Did the allocation stay as it was for the whole call? */
	stable = c.k >= 0 && w.allocs[c.k].serial == c.alloc_serial &&
		 w.allocs[c.k].state == (c.mode == PM_FREED ? A_FREED : A_LIVE);
	unlock();

	pin_check_answer(t, &c, err, stable);
	if (!err && c.amode == ARG_OK)
		pin_track(t, op, &c, handle, stable);
	fd_put(c.s);
}

void op_unpin(struct thr *t, struct op *op)
{
	int s = fd_of(op->b >> 8), k, err;
	struct gdrdrv_unpin_buffer u;
	enum arg_mode amode = arg_mode_of(op->b >> 12);
	uint32_t serial = 0;
	unsigned long cmd;
	enum entry entry;

	fd_get(s);
	lock();
	k = target_handle(op->a, op->x, s, (op->b & 3) >= 2, &u.handle, &serial);
	if (k >= 0) {
		w.pins[k].state = P_UNPINNING;
		w.pins[k].busy++;
	}
	unlock();

	cmd = spelled(GDRDRV_IOC_UNPIN_BUFFER, op->b >> 2, &entry);
	if (amode == ARG_OK || amode == ARG_READONLY)
		err = xioctl(t, w.fds[s].fd, cmd, &u, sizeof(u), entry);
	else
		err = xioctl(t, w.fds[s].fd, cmd, place_arg(t, amode, &u, sizeof(u)), 0, entry);
	op->res = err;
	op->info = (uint32_t)u.handle;

	if (amode != ARG_OK && amode != ARG_READONLY)
		EXPECT(t, err == EFAULT, C_EFAULT, "UNPIN with an unreadable argument: %s",
		       errname(err));
	else if (k >= 0)
		EXPECT(t, !err, C_UNPIN_LIVE, "UNPIN of live handle 0x%llx: %s",
		       (unsigned long long)u.handle, errname(err));
	else
		EXPECT(t, err == EINVAL, C_STALE_HANDLE, "UNPIN of invalid handle 0x%llx: %s, want EINVAL",
		       (unsigned long long)u.handle, errname(err));
	lock();
	if (k >= 0) {
		struct pin *p = &w.pins[k];

		p->busy--;
		if (err) {
			p->state = P_LIVE;
		} else {
			p->state = P_GONE;
			if (!p->revoked)
				p->revoke_seq = op->seq;
			p->revoked = true;
			p->ver++;
			push_stale(s, u.handle);
			pin_maybe_release(k);
		}
	}
	unlock();
	fd_put(s);
}

/* GET_INFO, GET_INFO_V2, GET_CB_FLAG. */
void op_info(struct thr *t, struct op *op)
{
	int s = fd_of(op->b >> 8), k, err, which = op->b % 3;
	bool bad = ((op->b >> 2) & 3) == 3;
	enum arg_mode amode = arg_mode_of(op->b >> 12);
	uint32_t serial = 0, ver = 0, sflags;
	struct pin before = { 0 };
	__u64 handle;
	union {
		struct gdrdrv_get_info v1;
		struct gdrdrv_get_info_v2 v2;
		struct gdrdrv_get_cb_flag cb;
	} a;
	static const unsigned long cmds[3] = {
		GDRDRV_IOC_GET_INFO, GDRDRV_IOC_GET_INFO_V2, GDRDRV_IOC_GET_CB_FLAG,
	};
	static const size_t lens[3] = {
		sizeof(a.v1), sizeof(a.v2), sizeof(a.cb),
	};
	unsigned long cmd;
	enum entry entry;
	bool steady;

	memset(&a, 0xa5, sizeof(a));
	fd_get(s);
	lock();
	k = target_handle(op->a, op->x, s, bad, &handle, &serial);
	if (k >= 0) {
		before = w.pins[k];
		ver = before.ver;
	}
	unlock();
	a.v1.handle = handle;	/* first in all three */

	sflags = op->b >> 4;
	cmd = spelled(cmds[which], sflags, &entry);
	if (amode == ARG_OK)
		err = xioctl(t, w.fds[s].fd, cmd, &a, lens[which], entry);
	else
		err = xioctl(t, w.fds[s].fd, cmd, place_arg(t, amode, &a, lens[which]), 0, entry);
	op->res = err;
	op->info = (uint32_t)handle;

	lock();
	/* The pin did not change while we asked (no unpin, free, map, munmap). */
	steady = k >= 0 && w.pins[k].serial == serial && w.pins[k].state == P_LIVE &&
		 w.pins[k].ver == ver && !w.pins[k].busy && before.state == P_LIVE && !before.busy;
	unlock();

	if (amode == ARG_NULL || amode == ARG_NONE_PAGE || amode == ARG_STRADDLE_NONE) {
		EXPECT(t, err == EFAULT, C_EFAULT, "%s with an unreadable argument: %s, want EFAULT",
		       which == 2 ? "GET_CB_FLAG" : "GET_INFO", errname(err));
	} else if (k < 0) {
		EXPECT(t, err == EINVAL, C_STALE_HANDLE, "%s of invalid handle 0x%llx: %s, want EINVAL",
		       which == 2 ? "GET_CB_FLAG" : which ? "GET_INFO_V2" : "GET_INFO",
		       (unsigned long long)handle, errname(err));
	} else if (amode == ARG_READONLY) {
		EXPECT(t, err == EFAULT || (!steady && err == EINVAL), C_EFAULT,
		       "GET_INFO of a live handle into read-only memory: %s", errname(err));
	} else if (steady) {
		uint32_t type = which == 1 ? a.v2.mapping_type :
				a.v1.mapped ? (a.v1.wc_mapping ? GDRDRV_MR_WC : GDRDRV_MR_CACHING) :
				GDRDRV_MR_NONE;
		bool mapped = before.nmaps > 0 && !before.revoked;

		EXPECT(t, !err, C_INFO_LIVE, "GET_%s of live handle 0x%llx: %s",
		       which == 2 ? "CB_FLAG" : "INFO", (unsigned long long)handle, errname(err));
		if (err) {
			fd_put(s);
			return;
		}
		if (which == 2) {
			/* Persistent pins have no callback; legacy ones fire on free. */
			EXPECT(t, a.cb.flag == (uint32_t)before.revoked, C_CB_FLAG,
			       "GET_CB_FLAG of a %s pin whose memory is %s: %u",
			       before.legacy ? "legacy" : "persistent",
			       before.revoked ? "freed" : "live", a.cb.flag);
			fd_put(s);
			return;
		}
		EXPECT(t, a.v1.va == before.va && a.v1.mapped_size == before.len &&
		       a.v1.page_size == GDRDRV_GPU_PAGE_SIZE, C_INFO_LIVE,
		       "GET_INFO: va 0x%llx size 0x%llx page %u, pinned va 0x%llx size 0x%llx",
		       (unsigned long long)a.v1.va, (unsigned long long)a.v1.mapped_size,
		       a.v1.page_size, (unsigned long long)before.va,
		       (unsigned long long)before.len);
		/* Whether it is mapped, when we know for sure. */
		if (!before.untracked && !before.revoked)
			EXPECT(t, mapped ? type == GDRDRV_MR_WC || type == GDRDRV_MR_CACHING :
			       type == GDRDRV_MR_NONE, C_INFO_TYPE,
			       "GET_INFO%s of a pin with %d mapping(s): type %u",
			       which == 1 ? "_V2" : "", before.nmaps, type);
		if (mapped && !before.untracked && before.req_type != GDRDRV_MR_NONE && which == 1)
			EXPECT(t, type == before.req_type, C_INFO_TYPE,
			       "mapped with type %u after REQ_MAPPING_TYPE %u", type, before.req_type);
	}
	fd_put(s);
}

void op_attr(struct thr *t, struct op *op)
{
	struct gdrdrv_get_attr a = { .val = 0xdead };
	int s = fd_of(op->b >> 8), err;
	unsigned long cmd;
	enum entry entry;

	a.attr = op->b % 4 ? op->b % 4 : (uint32_t)op->x;
	cmd = spelled(GDRDRV_IOC_GET_ATTR, op->b >> 2, &entry);
	fd_get(s);
	err = xioctl(t, w.fds[s].fd, cmd, &a, sizeof(a), entry);
	fd_put(s);
	op->res = err;
	op->info = a.attr;
	if (a.attr == GDRDRV_ATTR_USE_PERSISTENT_MAPPING)
		EXPECT(t, !err && a.val == w.persistent, C_ATTR,
		       "GET_ATTR(USE_PERSISTENT_MAPPING): %s, val %u, want %d", errname(err),
		       a.val, w.persistent);
	else if (a.attr == GDRDRV_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE)
		EXPECT(t, !err && a.val == w.force_pcie, C_ATTR,
		       "GET_ATTR(SUPPORT_PIN_FLAG_FORCE_PCIE): %s, val %u", errname(err), a.val);
	else if (a.attr == GDRDRV_ATTR_VMA_INHERITED_ON_FORK)
		EXPECT(t, !err && a.val == 0, C_ATTR,
		       "GET_ATTR(VMA_INHERITED_ON_FORK): %s, val %u (mappings are VM_DONTCOPY)",
		       errname(err), a.val);
	else
		EXPECT(t, err == EINVAL, C_ATTR, "GET_ATTR(%u): %s, want EINVAL", a.attr,
		       errname(err));
}

void op_version(struct thr *t, struct op *op)
{
	struct gdrdrv_get_version v = { 0 };
	int s = fd_of(op->b >> 8), err;
	unsigned long cmd;
	enum entry entry;

	cmd = spelled(GDRDRV_IOC_GET_VERSION, op->b, &entry);
	fd_get(s);
	err = xioctl(t, w.fds[s].fd, cmd, &v, sizeof(v), entry);
	fd_put(s);
	op->res = err;
	EXPECT(t, !err && v.gdrdrv_version == GDRDRV_VERSION &&
	       v.minimum_gdr_api_version == GDRDRV_MINIMUM_GDR_API_VERSION, C_VERSION,
	       "GET_VERSION: %s, 0x%x / 0x%x", errname(err), v.gdrdrv_version,
	       v.minimum_gdr_api_version);
}

void op_reqtype(struct thr *t, struct op *op)
{
	struct gdrdrv_req_mapping_type r = { 0 };
	int s = fd_of(op->b >> 8), k, err;
	uint32_t serial = 0;
	unsigned long cmd;
	enum entry entry;

	r.mapping_type = op->b % 8 < 6 ? op->b % 8 % 4 : op->b % 8 == 6 ?
			 GDRDRV_MR_TYPE_COUNT : (uint32_t)op->x;
	fd_get(s);
	lock();
	k = target_handle(op->a, op->x, s, (op->b >> 3) % 8 == 0, &r.handle, &serial);
	if (k >= 0) {
		w.pins[k].busy++;
		w.pins[k].ver++;
	}
	unlock();
	cmd = spelled(GDRDRV_IOC_REQ_MAPPING_TYPE, op->b >> 6, &entry);
	err = xioctl(t, w.fds[s].fd, cmd, &r, sizeof(r), entry);
	op->res = err;
	op->info = r.mapping_type;
	if (r.mapping_type >= GDRDRV_MR_TYPE_COUNT)
		EXPECT(t, err == EINVAL, C_REQTYPE, "REQ_MAPPING_TYPE(%u): %s, want EINVAL",
		       r.mapping_type, errname(err));
	else if (k < 0)
		EXPECT(t, err == EINVAL, C_STALE_HANDLE, "REQ_MAPPING_TYPE of invalid handle 0x%llx: %s",
		       (unsigned long long)r.handle, errname(err));
	else
		EXPECT(t, err == 0 || err == EBUSY || err == EOPNOTSUPP || err == EINVAL,
		       C_REQTYPE, "REQ_MAPPING_TYPE(%u): %s", r.mapping_type, errname(err));
	lock();
	if (k >= 0) {
		w.pins[k].busy--;
		w.pins[k].ver++;
		if (!err && w.pins[k].serial == serial)
			w.pins[k].req_type = r.mapping_type;
	}
	unlock();
	fd_put(s);
}

/* Commands the driver must not know, and arguments it cannot read. */
void op_badioctl(struct thr *t, struct op *op)
{
	static const unsigned long known[] = {
		GDRDRV_IOC_PIN_BUFFER, GDRDRV_IOC_UNPIN_BUFFER, GDRDRV_IOC_GET_CB_FLAG,
		GDRDRV_IOC_GET_INFO, GDRDRV_IOC_GET_INFO_V2, GDRDRV_IOC_GET_ATTR,
		GDRDRV_IOC_PIN_BUFFER_V2, GDRDRV_IOC_REQ_MAPPING_TYPE,
		GDRDRV_IOC_GET_VERSION,
	};
	/* Types the VFS answers itself for any file (FIONREAD, FIFREEZE, ...). */
	static const unsigned char vfs_types[] = { 'T', 'X', 'f', 0x94, 0x00, 0x12, 0x15 };
	int s = fd_of(op->b >> 8), err;
	unsigned long cmd;
	unsigned char buf[64];
	enum entry entry = (op->b >> 4) % 4 == 3 && w.int80 ? ENTRY_COMPAT : ENTRY_NATIVE;
	unsigned int what = op->b % 8;
	void *arg = buf;

	memset(buf, 0, sizeof(buf));
	uint64_t x = op->x, y = op->y, z = op->z;

	switch (what) {
	case 0: case 1:		/* our magic, a number nobody defined */
		do {
			cmd = _IOC(y % 4, GDRDRV_IOCTL, 9 + x % 246, z % 64);
			x = x * 31 + 7;
		} while (cmd_known(cmd, entry));
		break;
	case 2: case 3:		/* a known number, the wrong size or direction */
		do {
			unsigned long base = known[x % 9];

			cmd = y & 1 ? _IOC(z % 4, GDRDRV_IOCTL, _IOC_NR(base), _IOC_SIZE(base)) :
			      _IOC(_IOC_DIR(base), GDRDRV_IOCTL, _IOC_NR(base), z % 64);
			z = z * 31 + 1;
			y = y >> 1 | y << 63;
		} while (cmd_known(cmd, entry));
		break;
	case 4: case 5: {	/* another driver's magic */
		unsigned char type;

		do {
			type = (unsigned char)x;
			x = x * 31 + 3;
		} while (type == GDRDRV_IOCTL || memchr(vfs_types, type, sizeof(vfs_types)));
		cmd = _IOC(y % 4, type, (y >> 2) % 256, z % 64);
		break;
	}
	default: {		/* a known command whose argument cannot be read */
		enum arg_mode m = (y % 3) + ARG_NULL;

		cmd = known[x % 9];
		if (entry == ENTRY_COMPAT && quirk_nr(_IOC_NR(cmd)) && (z & 1))
			cmd = with_size(cmd, 4);
		arg = place_arg(t, m, buf, _IOC_SIZE(cmd) > 8 ? _IOC_SIZE(cmd) : 8);
		fd_get(s);
		err = xioctl(t, w.fds[s].fd, cmd, arg, 0, entry);
		fd_put(s);
		op->res = err;
		op->info = (uint32_t)cmd;
		EXPECT(t, err == EFAULT, C_EFAULT, "ioctl 0x%lx (%s entry) with an unreadable argument: %s, want EFAULT",
		       cmd, entry == ENTRY_COMPAT ? "compat" : "native", errname(err));
		return;
	}
	}
	fd_get(s);
	if (entry == ENTRY_COMPAT)
		arg = t->low + 512;
	err = xioctl(t, w.fds[s].fd, cmd, arg, 0, entry);
	fd_put(s);
	op->res = err;
	op->info = (uint32_t)cmd;
	EXPECT(t, err == ENOTTY, C_ENOTTY, "unknown ioctl 0x%lx (%s entry): %s, want ENOTTY",
	       cmd, entry == ENTRY_COMPAT ? "compat" : "native", errname(err));
}

