// SPDX-License-Identifier: MIT
/*
 * gdrdrv_fuzz, operation family: mappings (mmap, munmap, mremap, mprotect,
 * madvise, accesses through them, /proc/self/mem, msync) and the file
 * operations gdrdrv does not implement.
 */
#include "fuzz.h"

static size_t page_round(uint64_t len)
{
	return (len + w.page - 1) & ~(uint64_t)(w.page - 1);
}

int prot_of(unsigned int bits, uint64_t r)
{
	static const int odd[] = {
		PROT_WRITE, PROT_NONE, PROT_READ | PROT_EXEC,
		PROT_READ | PROT_WRITE | PROT_EXEC,
	};

	if (bits < 5)
		return PROT_READ | PROT_WRITE;
	if (bits == 5)
		return PROT_READ;
	return odd[r % 4];
}

void op_mmap(struct thr *t, struct op *op)
{
	static const int flag_set[16] = {
		MAP_SHARED, MAP_SHARED, MAP_SHARED, MAP_SHARED, MAP_SHARED, MAP_SHARED,
		MAP_SHARED, MAP_SHARED, MAP_SHARED, MAP_SHARED, MAP_SHARED, MAP_PRIVATE,
		MAP_SHARED_VALIDATE, MAP_SHARED | MAP_POPULATE, MAP_SHARED | MAP_LOCKED,
		MAP_SHARED_VALIDATE | MAP_SYNC,
	};
	int slot = op->a % N_MAP, s = fd_of(op->b >> 16), k = -1, target = op->b & 15;
	int flags = flag_set[(op->b >> 10) & 15], prot = prot_of((op->b >> 7) & 7, op->z), err;
	unsigned int lmode = (op->b >> 4) & 7;
	struct mapping *m = &w.maps[slot], old;
	uint64_t pgoff, delta = 0, len;
	struct pin before = { 0 };
	struct held oh;
	size_t off = 0;
	bool expect_ok = false, covers, steady;
	char *addr;
	void *p;

	if ((op->b >> 20) & 3) {
		/* Mostly into a free slot. */
		lock();
		for (int i = 0; i < N_MAP && w.maps[slot].active; i++)
			slot = (op->a + i) % N_MAP;
		unlock();
		m = &w.maps[slot];
	}
	pthread_mutex_lock(&m->mu);
	oh = slot_hold(m);
	fd_get(s);
	lock();
	if (target < 12 || target == 14)
		k = (op->b >> 22) & 3 ? pick_unmapped_pin(op->x, s) : pick_pin(op->x, s);
	if (k >= 0) {
		before = w.pins[k];
		w.pins[k].busy++;
		pgoff = before.handle;
		if (target == 14 && before.len / w.page > 1)
			delta = 1 + op->y % (before.len / w.page - 1);
		pgoff += delta;
	} else {
		pgoff = bad_handle(op->x, s);
	}
	old = *m;
	unlock();

	switch (lmode) {
	case 4: len = before.len > (uint64_t)w.page ?
		      page_round(1 + op->y % (before.len - w.page)) : (uint64_t)w.page; break;
	case 5: len = before.len + w.page; break;
	case 6: len = 2 * before.len; break;
	case 7: len = 1 + op->y % (before.len ? before.len : GPU_PAGE); break;
	default: len = before.len ? before.len : GPU_PAGE; break;
	}
	if (!len)
		len = w.page;
	if (page_round(len) > SLOT_SIZE)
		len = SLOT_SIZE;
	if (((op->b >> 14) & 3) == 3)
		off = (op->y >> 20) % ((SLOT_SIZE - page_round(len)) / w.page + 1) * w.page;
	addr = slot_base(slot) + off;
	/* A mapping the driver must give: the basic call on a live, unmapped pin. */
	expect_ok = k >= 0 && !delta && !before.revoked && before.addr == before.va &&
		    !before.nmaps && !before.untracked && !before.busy && lmode < 4 &&
		    (flags == MAP_SHARED || flags == MAP_SHARED_VALIDATE ||
		     flags == (MAP_SHARED | MAP_POPULATE)) &&
		    (prot == PROT_READ || prot == (PROT_READ | PROT_WRITE)) &&
		    /* x86 PAT gives RAM one memtype: a second WC mapping of it fails */
		    !(w.cacheable && before.req_type == GDRDRV_MR_WC) &&
		    (!old.active || (old.addr >= addr && old.addr + old.len <= addr + len)) &&
		    !old.dirty;

	p = mmap(addr, len, prot, flags | MAP_FIXED, w.fds[s].fd, (off_t)(pgoff * w.page));
	err = p == MAP_FAILED ? errno : 0;
	CALL();
	fd_put(s);
	op->res = err;
	op->info = (uint32_t)pgoff;
	if (err) {
		slot_reset(t, slot);	/* MAP_FIXED may have unmapped what was there */
	} else if (p != addr) {
		fail(t, F_INVARIANT, C_MMAP_GOOD, "MAP_FIXED mmap at %p returned %p", (void *)addr, p);
	}

	lock();
	/* Nobody else touched the pin meanwhile (and nobody is in a call on it). */
	steady = k >= 0 && w.pins[k].serial == before.serial && w.pins[k].state == P_LIVE &&
		 w.pins[k].ver == before.ver && !w.pins[k].revoked && w.pins[k].busy == 1;
	if (k >= 0)
		w.pins[k].busy--;
	if (!err && p == addr) {
		covers = !old.active || (old.addr >= addr && old.addr + old.len <= addr + page_round(len));
		if (old.active) {
			int oldpin = m->pin;
			uint32_t oldserial = m->pin_serial;

			map_forget(slot);
			if (!covers && w.pins[oldpin].serial == oldserial)
				w.pins[oldpin].untracked = true;	/* what is left of it */
		}
		if (k < 0 || w.pins[k].serial != before.serial) {
			m->dirty = true;	/* mapped, but not by a pin we track */
		} else {
			map_set(m, addr, page_round(len), k, before.serial, delta * w.page, prot,
				(flags & MAP_PRIVATE) != 0, op->seq);
			if (!covers)
				m->dirty = true;	/* what is left of the old one */
			w.pins[k].nmaps++;
			w.pins[k].ver++;
		}
	}
	unlock();

	if (k < 0)
		EXPECT(t, err, C_MMAP_BAD, "mmap of invalid offset 0x%llx (handle) succeeded",
		       (unsigned long long)pgoff);
	else if (flags & MAP_SYNC)
		EXPECT(t, err, C_MMAP_BAD, "mmap with MAP_SYNC succeeded");
	else if (expect_ok && steady)
		EXPECT(t, !err, C_MMAP_GOOD, "mmap of live handle 0x%llx, 0x%llx of 0x%llx bytes, prot %d: %s",
		       (unsigned long long)before.handle, (unsigned long long)len,
		       (unsigned long long)before.len, prot, errname(err));
	if (!err && k >= 0 && (lmode == 5 || lmode == 6) && page_round(len) > before.len)
		EXPECT(t, 0, C_MMAP_BAD, "mmap of 0x%llx bytes of a 0x%llx-byte pin succeeded",
		       (unsigned long long)len, (unsigned long long)before.len);
	slot_unhold(oh);
	pthread_mutex_unlock(&m->mu);
}

void op_munmap(struct thr *t, struct op *op)
{
	struct held h;
	int slot = op->a % N_MAP, what = op->b % 8, err = 0;
	struct mapping *m = &w.maps[slot];
	size_t pages, cut;
	char *a;

	pthread_mutex_lock(&m->mu);
	if (!m->active) {
		pthread_mutex_unlock(&m->mu);
		op->res = RES_SKIPPED;
		return;
	}
	h = slot_hold(m);
	pages = m->len / w.page;
	if (what >= 5 && pages < 2)
		what = 0;
	cut = 1 + op->x % (pages > 1 ? pages - 1 : 1);
	CALL();
	switch (what) {
	case 4:		/* replaced by another mapping */
		a = mmap(m->addr, m->len, PROT_NONE,
			 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		err = a == MAP_FAILED ? errno : 0;
		op->res = err;
		EXPECT(t, !err, C_MUNMAP, "mmap over a whole mapping: %s", errname(err));
		if (!err) {
			lock();
			map_forget(slot);
			unlock();
		}
		break;
	case 5:		/* the head */
	case 6:		/* the tail */
	case 7:		/* a hole in the middle */
		if (what == 5)
			a = m->addr;
		else if (what == 6)
			a = m->addr + (pages - cut) * w.page;
		else {
			cut = pages > 2 ? 1 + op->x % (pages - 2) : 1;
			a = m->addr + w.page * (pages > 2 ? 1 + op->y % (pages - cut - 1 + 1) : 1);
			if (a + cut * w.page > m->addr + m->len)
				cut = (m->addr + m->len - a) / w.page;
		}
		err = sys_err(munmap(a, cut * w.page));
		op->res = err;
		if (err)
			break;
		arena_reserve(t, a, cut * w.page, true);
		lock();
		if (what == 5) {
			m->addr += cut * w.page;
			m->gpu_off += cut * w.page;
			m->len -= cut * w.page;
		} else if (what == 6) {
			m->len -= cut * w.page;
		} else {
			struct pin *p = &w.pins[m->pin];

			if (p->serial == m->pin_serial)
				p->untracked = true;	/* the part after the hole */
			m->len = a - m->addr;
			m->dirty = true;
		}
		if (!m->len)
			map_forget(slot);
		unlock();
		break;
	default:
		err = sys_err(munmap(m->addr, m->len));
		op->res = err;
		EXPECT(t, !err, C_MUNMAP, "munmap of a whole mapping: %s", errname(err));
		if (err)
			break;
		arena_reserve(t, m->addr, m->len, true);
		lock();
		map_forget(slot);
		unlock();
		break;
	}
	slot_unhold(h);
	pthread_mutex_unlock(&m->mu);
}

void op_mremap(struct thr *t, struct op *op)
{
	struct held h;
	int slot = op->a % N_MAP, what = op->b % 8, err, flags = 0, j = -1;
	struct mapping *m = &w.maps[slot], *mj = NULL;
	size_t newlen, pages;
	char *target = NULL;
	void *p;

	pthread_mutex_lock(&m->mu);
	if (!m->active) {
		pthread_mutex_unlock(&m->mu);
		op->res = RES_SKIPPED;
		return;
	}
	h = slot_hold(m);
	pages = m->len / w.page;
	newlen = m->len;
	switch (what) {
	case 0:
		newlen = m->len + w.page * (1 + op->x % 4);
		break;
	case 1:
		newlen = m->len + w.page * (1 + op->x % 4);
		flags = MREMAP_MAYMOVE;
		break;
	case 2:
	case 3:
		newlen = pages > 1 ? w.page * (1 + op->x % (pages - 1)) : m->len;
		break;
	default:
		j = (slot + 1 + op->y % (N_MAP - 1)) % N_MAP;
		mj = &w.maps[j];
		if (pthread_mutex_trylock(&mj->mu)) {
			slot_unhold(h);
			pthread_mutex_unlock(&m->mu);
			op->res = RES_SKIPPED;
			return;
		}
		if (mj->active) {
			pthread_mutex_unlock(&mj->mu);
			slot_unhold(h);
			pthread_mutex_unlock(&m->mu);
			op->res = RES_SKIPPED;
			return;
		}
		target = slot_base(j) + (op->z % 4 == 3 ?
			 (op->z >> 8) % ((SLOT_SIZE - m->len) / w.page + 1) * w.page : 0);
		flags = MREMAP_MAYMOVE | MREMAP_FIXED | (what == 7 ? MREMAP_DONTUNMAP : 0);
		break;
	}
	p = mremap(m->addr, m->len, newlen, flags, target);
	err = p == MAP_FAILED ? errno : 0;
	CALL();
	op->res = err;
	if (err) {
		if (mj)		/* MREMAP_FIXED unmaps the target first */
			slot_reset(t, j);
	} else if (!mj && p == m->addr) {
		if (newlen < m->len)
			arena_reserve(t, m->addr + newlen, m->len - newlen, true);
		lock();
		if (newlen > m->len)
			m->disturbed = true;	/* grown over our reservation?! */
		m->len = newlen;
		unlock();
	} else if (!mj) {
		/* Moved outside the arena: take it down, keep the arena whole. */
		munmap(p, newlen);
		arena_reserve(t, m->addr, m->len, true);
		lock();
		map_forget(slot);
		unlock();
	} else if (p == target) {
		lock();
		map_set(mj, target, newlen, m->pin, m->pin_serial, m->gpu_off, m->prot,
			m->disturbed, m->map_seq);
		if (what == 7) {
			/* The old VMA stays, empty: it faults now. */
			struct pin *pp = &w.pins[m->pin];

			m->disturbed = true;
			if (pp->serial == m->pin_serial) {
				pp->nmaps++;
				pp->ver++;
			}
		} else {
			m->active = false;	/* moved, the pin keeps its count */
		}
		unlock();
		if (what != 7)
			arena_reserve(t, m->addr, m->len, true);
	} else {
		fail(t, F_INVARIANT, C_ARENA, "mremap to %p returned %p", (void *)target, p);
	}
	if (mj)
		pthread_mutex_unlock(&mj->mu);
	slot_unhold(h);
	pthread_mutex_unlock(&m->mu);
}

void op_mprotect(struct thr *t, struct op *op)
{
	struct held h;
	int slot = op->a % N_MAP, err, prot = prot_of(op->b % 8, op->z);
	struct mapping *m = &w.maps[slot];
	bool partial = op->b % 16 >= 12 && m->len > (size_t)w.page;
	char *a;
	size_t len;

	(void)t;
	pthread_mutex_lock(&m->mu);
	if (!m->active) {
		pthread_mutex_unlock(&m->mu);
		op->res = RES_SKIPPED;
		return;
	}
	h = slot_hold(m);
	a = m->addr;
	len = m->len;
	if (partial) {
		size_t pages = len / w.page, first = op->x % pages;

		a += first * w.page;
		len = (1 + op->y % (pages - first)) * w.page;
		if (len == m->len)
			partial = false;
	}
	err = sys_err(mprotect(a, len, prot));
	CALL();
	op->res = err;
	if (!err) {
		lock();
		if (partial)
			m->disturbed = true;
		else
			m->prot = prot;
		unlock();
	}
	slot_unhold(h);
	pthread_mutex_unlock(&m->mu);
}

void op_madvise(struct thr *t, struct op *op)
{
	struct held h;
	static const int advice[] = {
		MADV_DONTNEED, MADV_DONTNEED, MADV_DONTFORK, MADV_DOFORK, MADV_WIPEONFORK,
		MADV_KEEPONFORK, MADV_REMOVE, MADV_FREE, 20 /* COLD */, 21 /* PAGEOUT */,
		MADV_WILLNEED, MADV_NORMAL, MADV_RANDOM, MADV_SEQUENTIAL, MADV_DONTDUMP,
		MADV_DODUMP, MADV_MERGEABLE, MADV_UNMERGEABLE, MADV_HUGEPAGE,
		MADV_NOHUGEPAGE, 22 /* POPULATE_READ */, 23 /* POPULATE_WRITE */,
		24 /* DONTNEED_LOCKED */, 25 /* COLLAPSE */, 77 /* nothing */,
	};
	int slot = op->a % N_MAP, err, adv = advice[op->x % (sizeof(advice) / sizeof(advice[0]))];
	struct mapping *m = &w.maps[slot];
	bool partial = op->b % 4 == 3 && m->len > (size_t)w.page;
	char *a;
	size_t len;

	(void)t;
	pthread_mutex_lock(&m->mu);
	if (!m->active) {
		pthread_mutex_unlock(&m->mu);
		op->res = RES_SKIPPED;
		return;
	}
	h = slot_hold(m);
	a = m->addr;
	len = m->len;
	if (partial) {
		size_t pages = len / w.page, first = op->y % pages;

		a += first * w.page;
		len = (1 + op->z % (pages - first)) * w.page;
	}
	err = sys_err(madvise(a, len, adv));
	CALL();
	op->res = err;
	op->info = adv;
	if (!err && (adv == MADV_DONTNEED || adv == MADV_REMOVE || adv == MADV_FREE ||
		     adv == 20 || adv == 21 || adv == 24 || adv == 25 || adv == 23)) {
		lock();
		m->disturbed = true;	/* zapped: without a fault handler it stays so */
		unlock();
	}
	slot_unhold(h);
	pthread_mutex_unlock(&m->mu);
}

/*
 * What a word read through a mapping may be: the pinned allocation's own
 * pattern at that offset; anything else only where the memory is gone
 * (then it must not be another allocation's pattern, ever).
 */
static void check_word(struct thr *t, const char *how, const struct pin *p, uint64_t gpu_off,
		       uint32_t v, bool strict)
{
	uint64_t gpu = p->va + gpu_off;
	uint16_t hi = v >> 16;

	if (gpu >= p->alloc_va && gpu < p->alloc_va + p->alloc_size) {
		uint64_t word = (gpu - p->alloc_va) / 4;

		if (v == pattern(p->tag, word))
			return;
		if (hi == p->tag) {
			fail(t, F_DATA, 2, "%s of handle 0x%llx at +0x%llx read 0x%08x, the word of +0x%llx: mapped at the wrong offset",
			     how, (unsigned long long)p->handle, (unsigned long long)gpu_off, v,
			     (unsigned long long)(v & 0xffff) * 4);
			return;
		}
	}
	if (hi != p->tag && tag_used(hi)) {
		fail(t, F_DATA, 3, "%s of handle 0x%llx (allocation tag %u%s) at +0x%llx read 0x%08x: the bytes of %s allocation (tag %u)",
		     how, (unsigned long long)p->handle, p->tag,
		     p->revoked ? ", unpinned or freed" : "", (unsigned long long)gpu_off, v,
		     hi == CHILD_TAG ? "another process's" : "another", hi);
		return;
	}
	if (strict)
		fail(t, F_DATA, 5, "%s of live handle 0x%llx at +0x%llx read 0x%08x, want 0x%08x",
		     how, (unsigned long long)p->handle, (unsigned long long)gpu_off, v,
		     pattern(p->tag, (gpu - p->alloc_va) / 4));
}

void op_probe(struct thr *t, struct op *op)
{
	int slot = op->a % N_MAP, reads = 1 + op->b % 4;
	bool write = (op->b >> 2) % 4 == 0;
	struct mapping *m = &w.maps[slot], mm;
	struct pin p;
	uint64_t r = op->x;

	pthread_mutex_lock(&m->mu);
	lock();
	mm = *m;
	p = w.pins[m->pin];
	unlock();
	if (!mm.active || p.serial != mm.pin_serial) {
		pthread_mutex_unlock(&m->mu);
		op->res = RES_SKIPPED;
		return;
	}
	op->res = 0;
	for (int i = 0; i <= reads && !shm->stop; i++) {
		size_t off = i == 0 ? 0 : i == 1 ? mm.len - 4 : (r % (mm.len / 4)) * 4;
		uint64_t gpu_off = mm.gpu_off + off;
		bool in_pin = gpu_off + 4 <= p.len;
		bool is_write = write && i == reads;
		struct pin now;
		uint32_t v = 0;
		bool strict;
		int sig;

		r = r * 6364136223846793005ULL + 1442695040888963407ULL;
		/* Revoked (unpinned, freed under a legacy pin) before we touched it? */
		lock();
		now = w.pins[mm.pin];
		unlock();
		strict = now.serial == p.serial && now.state == P_LIVE && !now.revoked &&
			 !now.busy && !mm.disturbed && (mm.prot & PROT_READ) && in_pin;
		if (is_write) {
			uint64_t gpu = p.va + gpu_off;

			if (!(mm.prot & PROT_WRITE) || mm.disturbed || gpu < p.alloc_va ||
			    gpu + 4 > p.alloc_va + p.alloc_size)
				continue;
			v = pattern(p.tag, (gpu - p.alloc_va) / 4);
			sig = try_access(mm.addr + off, true, &v);
		} else {
			sig = try_access(mm.addr + off, false, &v);
		}
		op->info = sig ? (uint32_t)sig : v;
		if (sig) {
			op->res = sig;
			/* A live, intact mapping of pinned memory must not fault. */
			if (strict && sig == SIGBUS) {
				lock();
				now = w.pins[mm.pin];
				unlock();
				if (now.serial == p.serial && now.state == P_LIVE && !now.revoked &&
				    !now.busy)
					fail(t, F_INVARIANT, C_LOST_MAPPING,
					     "%s of live handle 0x%llx at +0x%llx raised SIGBUS",
					     is_write ? "write" : "read", (unsigned long long)p.handle,
					     (unsigned long long)gpu_off);
			}
			continue;
		}
		if (now.serial == p.serial && now.revoked) {
			fail(t, F_DATA, 4,
			     "%s of handle 0x%llx at +0x%llx worked after its %s returned (read 0x%08x, allocation tag %u): the mapping survived (pinned by op #%u, mapped by op #%u, revoked by op #%u)",
			     is_write ? "write" : "read", (unsigned long long)p.handle,
			     (unsigned long long)gpu_off,
			     now.state == P_GONE ? "unpin" : "memory was freed (legacy pin) and the free",
			     v, p.tag, p.pin_seq, mm.map_seq, now.revoke_seq);
			break;
		}
		if (!is_write)
			check_word(t, "read", &p, gpu_off, v, strict);
	}
	pthread_mutex_unlock(&m->mu);
}

/* Reads through /proc/self/mem (access_process_vm on the mapping). */
int procmem_fd = -1;

void op_procmem(struct thr *t, struct op *op)
{
	int slot = op->a % N_MAP;
	struct mapping *m = &w.maps[slot], mm;
	struct pin p;
	uint32_t v = 0;
	ssize_t n;
	size_t off;

	pthread_mutex_lock(&m->mu);
	lock();
	mm = *m;
	p = w.pins[m->pin];
	unlock();
	if (!mm.active || p.serial != mm.pin_serial || procmem_fd < 0) {
		pthread_mutex_unlock(&m->mu);
		op->res = RES_SKIPPED;
		return;
	}
	off = (op->x % (mm.len / 4)) * 4;
	if (op->b & 1) {
		struct iovec local = { &v, 4 }, remote = { mm.addr + off, 4 };

		n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
	} else {
		n = pread(procmem_fd, &v, 4, (off_t)(uintptr_t)(mm.addr + off));
	}
	CALL();
	op->res = n == 4 ? 0 : n < 0 ? errno : EIO;
	if (n == 4 && (mm.prot & PROT_READ) && !mm.disturbed)
		check_word(t, op->b & 1 ? "process_vm_readv" : "/proc/self/mem read", &p,
			   mm.gpu_off + off, v, false);
	pthread_mutex_unlock(&m->mu);
}

void op_msync(struct thr *t, struct op *op)
{
	static const int how[] = { MS_SYNC, MS_ASYNC, MS_INVALIDATE, MS_SYNC | MS_INVALIDATE };
	int slot = op->a % N_MAP;
	struct mapping *m = &w.maps[slot];

	(void)t;
	pthread_mutex_lock(&m->mu);
	if (!m->active) {
		pthread_mutex_unlock(&m->mu);
		op->res = RES_SKIPPED;
		return;
	}
	op->res = sys_err(msync(m->addr, m->len, how[op->b % 4]));
	CALL();
	pthread_mutex_unlock(&m->mu);
}

/* The file operations gdrdrv does not implement, and what the VFS does itself. */
void op_fileops(struct thr *t, struct op *op)
{
	int s = fd_of(op->b >> 8), fd, v = 0;
	char buf[64];
	struct stat st;
	struct pollfd pfd;

	(void)t;
	fd_get(s);
	fd = w.fds[s].fd;
	switch (op->b % 8) {
	case 0: op->res = sys_err(read(fd, buf, sizeof(buf))); break;
	case 1: op->res = sys_err(write(fd, buf, 1 + op->x % sizeof(buf))); break;
	case 2: op->res = sys_err(lseek(fd, (off_t)(op->x & 0xffffff), (int)(op->y % 3))); break;
	case 3: op->res = sys_err(fstat(fd, &st)); break;
	case 4:
		pfd = (struct pollfd){ .fd = fd, .events = POLLIN | POLLOUT };
		op->res = sys_err(poll(&pfd, 1, 0));
		break;
	case 5: op->res = sys_err(ioctl(fd, FIONREAD, &v)); break;
	case 6: op->res = sys_err(ioctl(fd, FIONBIO, &v)); break;
	default: op->res = sys_err(fsync(fd)); break;
	}
	CALL();
	fd_put(s);
}

