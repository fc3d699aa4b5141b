// SPDX-License-Identifier: MIT
/*
 * gdrdrv_fuzz, operation family: softgpu memory (alloc, free, verify).
 */
#include "fuzz.h"

uint64_t alloc_size_of(uint64_t r)
{
	unsigned int c = r % 100;

	if (c < 40)
		return GPU_PAGE;
	if (c < 85)
		return GPU_PAGE * (2 + (r >> 8) % 7);
	if (c < 97)
		return GPU_PAGE * (16 + (r >> 8) % 17);
	return MAX_ALLOC_SIZE;
}

static void fill_pattern(uint32_t *buf, uint16_t tag, uint64_t words)
{
	for (uint64_t i = 0; i < words; i++)
		buf[i] = pattern(tag, i);
}

static uint16_t new_tag(void)
{
	uint16_t tag;

	for (;;) {
		if (++w.next_tag > MAX_TAG) {
			/* Wrap: forget the tags of memory nobody can reach now. */
			w.next_tag = 1;
			memset(w.tag_used, 0, sizeof(w.tag_used));
			for (int i = 0; i < N_ALLOC; i++)
				if (w.allocs[i].state != A_EMPTY)
					w.tag_used[w.allocs[i].tag / 8] |= 1 << (w.allocs[i].tag % 8);
			w.tag_used[CHILD_TAG / 8] |= 1 << (CHILD_TAG % 8);
		}
		tag = w.next_tag;
		if (!tag_used(tag))
			break;
	}
	w.tag_used[tag / 8] |= 1 << (tag % 8);
	return tag;
}

void op_alloc(struct thr *t, struct op *op)
{
	struct softgpu_alloc a = { .size = alloc_size_of(op->x) };
	struct softgpu_copy c;
	uint16_t tag;
	int k, err;

	if (op->a % 16 == 0)		/* sizes softgpu must refuse */
		a.size = op->a & 16 ? 0 : 1ULL << (40 + op->b % 20);
	lock();
	if (w.live_allocs >= MAX_LIVE_ALLOCS && a.size) {
		unlock();
		op->res = RES_SKIPPED;
		return;
	}
	w.live_allocs++;
	unlock();

	err = sg_call(SOFTGPU_IOC_ALLOC, &a);
	op->res = err;
	if (err || a.size > MAX_ALLOC_SIZE || !a.size) {
		lock();
		w.live_allocs--;
		unlock();
		EXPECT(t, err || a.size <= MAX_ALLOC_SIZE, C_SG,
		       "softgpu allocated 0x%llx bytes", (unsigned long long)a.size);
		EXPECT(t, err == 0 || err == ENOMEM || err == EINVAL || err == ENOSPC, C_SG,
		       "SOFTGPU_IOC_ALLOC(0x%llx): %s", (unsigned long long)a.size, errname(err));
		if (!err) {	/* not ours to keep */
			struct softgpu_free f = { .va = a.va };

			sg_call(SOFTGPU_IOC_FREE, &f);
		}
		return;
	}
	lock();
	tag = new_tag();
	unlock();
	fill_pattern(t->buf, tag, a.size / 4);
	c = (struct softgpu_copy){ .va = a.va, .host = (uintptr_t)t->buf, .size = a.size,
				   .direction = SOFTGPU_COPY_TO_GPU };
	err = sg_call(SOFTGPU_IOC_COPY, &c);
	EXPECT(t, !err, C_SG, "filling a new allocation: %s", errname(err));

	lock();
	/* Reuse the oldest record that is free, in ring order. */
	for (k = -1; k < 0;) {
		unsigned int i = w.alloc_next++ % N_ALLOC;

		if (w.allocs[i].state == A_EMPTY || w.allocs[i].state == A_FREED)
			k = i;
	}
	w.allocs[k] = (struct alloc){ .state = A_LIVE, .va = a.va, .size = a.size,
				      .tag = tag, .serial = ++w.serial };
	unlock();
	op->info = tag;
}

void op_free(struct thr *t, struct op *op)
{
	struct softgpu_free f;
	struct alloc *al;
	int k, err, mode = op->b % 8, n = 0;
	int held[N_PIN];
	uint32_t held_serial[N_PIN];

	if (mode == 7) {		/* never allocated, or freed already */
		lock();
		k = pick_alloc(op->a, A_FREED);
		f.va = k >= 0 && (op->x & 1) ? w.allocs[k].va : 0x1000ULL + (op->x & 0xffff0000);
		unlock();
		err = sg_call(SOFTGPU_IOC_FREE, &f);
		op->res = err;
		EXPECT(t, err, C_SG, "SOFTGPU_IOC_FREE of 0x%llx (not allocated) succeeded",
		       (unsigned long long)f.va);
		return;
	}
	lock();
	k = pick_alloc(op->a, A_LIVE);
	if (k < 0) {
		unlock();
		op->res = RES_SKIPPED;
		return;
	}
	al = &w.allocs[k];
	al->state = A_FREEING;
	f.va = al->va;
	/* The pins of this memory are in flux until the free returns. */
	for (int i = 0; i < N_PIN; i++) {
		struct pin *p = &w.pins[i];

		if (p->state != P_EMPTY && p->alloc_k == k && p->alloc_serial == al->serial) {
			p->busy++;
			held[n] = i;
			held_serial[n++] = p->serial;
		}
	}
	unlock();

	err = sg_call(SOFTGPU_IOC_FREE, &f);
	op->res = err;
	op->info = al->tag;
	EXPECT(t, !err, C_SG, "SOFTGPU_IOC_FREE of a live allocation: %s", errname(err));
	lock();
	al->state = err ? A_LIVE : A_FREED;
	if (!err)
		w.live_allocs--;
	for (int i = 0; i < n; i++) {
		struct pin *p = &w.pins[held[i]];

		if (p->serial != held_serial[i])
			continue;
		p->busy--;
		p->ver++;
		/* Legacy pins of freed memory are revoked: their mappings must fault. */
		if (!err && p->legacy && !p->revoked) {
			p->revoked = true;
			p->revoke_seq = op->seq;
		}
		pin_maybe_release(held[i]);
	}
	/* Pins made while we freed it (their pin call raced ours). */
	for (int i = 0; !err && i < N_PIN; i++) {
		struct pin *p = &w.pins[i];

		if (p->state != P_EMPTY && p->alloc_k == k && p->alloc_serial == al->serial &&
		    p->legacy && !p->revoked) {
			p->revoked = true;
			p->revoke_seq = op->seq;
		}
	}
	unlock();
}

/* Reads an allocation back through softgpu: nobody may have written into it. */
void op_verify(struct thr *t, struct op *op)
{
	struct softgpu_copy c;
	uint64_t va, size;
	uint16_t tag;
	int k, err;

	lock();
	k = pick_alloc(op->a, A_LIVE);
	if (k < 0) {
		unlock();
		op->res = RES_SKIPPED;
		return;
	}
	va = w.allocs[k].va;
	size = w.allocs[k].size;
	tag = w.allocs[k].tag;
	unlock();
	c = (struct softgpu_copy){ .va = va, .host = (uintptr_t)t->buf, .size = size,
				   .direction = SOFTGPU_COPY_FROM_GPU };
	err = sg_call(SOFTGPU_IOC_COPY, &c);
	op->res = err;
	if (err)
		return;		/* freed meanwhile */
	for (uint64_t i = 0; i < size / 4; i++) {
		uint32_t v = t->buf[i];

		if (v == pattern(tag, i))
			continue;
		fail(t, F_DATA, 1,
		     "allocation tag %u (va 0x%llx) holds 0x%08x at +0x%llx, not 0x%08x%s",
		     tag, (unsigned long long)va, v, (unsigned long long)i * 4, pattern(tag, i),
		     tag_used(v >> 16) && v >> 16 != tag ?
		     ": written through a stale mapping of another allocation" : "");
		return;
	}
}

