// SPDX-License-Identifier: MIT
/*
 * arm64 copy routines for write-combined memory (Normal Non-cacheable, as
 * pgprot_writecombine maps a BAR there).  Such memory gathers stores in the
 * CPU's write buffer: the wider each store, the fewer transactions reach
 * the GPU.  Loads from it are uncached; what makes them fast is having
 * many in flight, so each routine issues a whole round of loads before the
 * first store.
 *
 * The accesses are inline assembly, not intrinsics or plain C: the compiler
 * may turn a copy loop into a memcpy() call, and libc's memcpy may use
 * instructions (DC ZVA in memset, unaligned tails) that Non-cacheable or
 * Device memory does not tolerate.  Sets:
 *
 *   neon  LD1/ST1 of four Q registers (64 B), LDP/STP of Q pairs (32 B),
 *         LDR/STR Q (16 B); chosen when the CPU has Advanced SIMD
 *         (HWCAP_ASIMD, run-time).
 *   ldp   LDP/STP of X register pairs (16 B): no SIMD registers at all.
 *
 * LS64 (ST64B/LD64B) is not used: it faults on anything but device memory
 * with the right attributes, so no test here could run it.
 */
#if defined(__aarch64__)

#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>

#include "copy.h"
#include "internal.h"

#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)	/* asm/hwcap.h; older libc headers lack it */
#endif

static bool have_asimd(void)
{
	return getauxval(AT_HWCAP) & HWCAP_ASIMD;
}

/* ---- neon: 16, 32 and 64 bytes per instruction ---- */

static void store16_neon(void *dst, const void *src, size_t n)
{
	char *d = dst;
	const char *s = src;

	for (; n >= 64; n -= 64, d += 64, s += 64)
		__asm__ volatile("ld1 {v0.16b, v1.16b, v2.16b, v3.16b}, [%1]\n\t"
				 "str q0, [%0]\n\tstr q1, [%0, #16]\n\tstr q2, [%0, #32]\n\tstr q3, [%0, #48]"
				 : : "r"(d), "r"(s) : "v0", "v1", "v2", "v3", "memory");
	for (; n; n -= 16, d += 16, s += 16)
		__asm__ volatile("ld1 {v0.16b}, [%1]\n\tstr q0, [%0]" : : "r"(d), "r"(s) : "v0", "memory");
}

static void load16_neon(void *dst, const void *src, size_t n)
{
	char *d = dst;
	const char *s = src;

	for (; n >= 64; n -= 64, d += 64, s += 64)
		__asm__ volatile("ldr q0, [%1]\n\tldr q1, [%1, #16]\n\tldr q2, [%1, #32]\n\tldr q3, [%1, #48]\n\t"
				 "st1 {v0.16b, v1.16b, v2.16b, v3.16b}, [%0]"
				 : : "r"(d), "r"(s) : "v0", "v1", "v2", "v3", "memory");
	for (; n; n -= 16, d += 16, s += 16)
		__asm__ volatile("ldr q0, [%1]\n\tst1 {v0.16b}, [%0]" : : "r"(d), "r"(s) : "v0", "memory");
}

static void store32_neon(void *dst, const void *src, size_t n)
{
	char *d = dst;
	const char *s = src;

	for (; n; n -= 32, d += 32, s += 32)
		__asm__ volatile("ld1 {v0.16b, v1.16b}, [%1]\n\tstp q0, q1, [%0]"
				 : : "r"(d), "r"(s) : "v0", "v1", "memory");
}

static void load32_neon(void *dst, const void *src, size_t n)
{
	char *d = dst;
	const char *s = src;

	for (; n; n -= 32, d += 32, s += 32)
		__asm__ volatile("ldp q0, q1, [%1]\n\tst1 {v0.16b, v1.16b}, [%0]"
				 : : "r"(d), "r"(s) : "v0", "v1", "memory");
}

static void store64_neon(void *dst, const void *src, size_t n)
{
	char *d = dst;
	const char *s = src;

	/* Two lines per round: eight loads from host memory, then the stores. */
	for (; n >= 128; n -= 128, d += 128, s += 128)
		__asm__ volatile("ld1 {v0.16b, v1.16b, v2.16b, v3.16b}, [%1]\n\t"
				 "ld1 {v4.16b, v5.16b, v6.16b, v7.16b}, [%2]\n\t"
				 "st1 {v0.16b, v1.16b, v2.16b, v3.16b}, [%0]\n\t"
				 "st1 {v4.16b, v5.16b, v6.16b, v7.16b}, [%3]"
				 : : "r"(d), "r"(s), "r"(s + 64), "r"(d + 64)
				 : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "memory");
	for (; n; n -= 64, d += 64, s += 64)
		__asm__ volatile("ld1 {v0.16b, v1.16b, v2.16b, v3.16b}, [%1]\n\t"
				 "st1 {v0.16b, v1.16b, v2.16b, v3.16b}, [%0]"
				 : : "r"(d), "r"(s) : "v0", "v1", "v2", "v3", "memory");
}

static void load64_neon(void *dst, const void *src, size_t n)
{
	char *d = dst;
	const char *s = src;

	/* Four lines in flight per round (16 Q registers), then the stores. */
	for (; n >= 256; n -= 256, d += 256, s += 256)
		__asm__ volatile("ld1 {v16.16b, v17.16b, v18.16b, v19.16b}, [%4]\n\t"
				 "ld1 {v20.16b, v21.16b, v22.16b, v23.16b}, [%5]\n\t"
				 "ld1 {v24.16b, v25.16b, v26.16b, v27.16b}, [%6]\n\t"
				 "ld1 {v28.16b, v29.16b, v30.16b, v31.16b}, [%7]\n\t"
				 "st1 {v16.16b, v17.16b, v18.16b, v19.16b}, [%0]\n\t"
				 "st1 {v20.16b, v21.16b, v22.16b, v23.16b}, [%1]\n\t"
				 "st1 {v24.16b, v25.16b, v26.16b, v27.16b}, [%2]\n\t"
				 "st1 {v28.16b, v29.16b, v30.16b, v31.16b}, [%3]"
				 : : "r"(d), "r"(d + 64), "r"(d + 128), "r"(d + 192),
				     "r"(s), "r"(s + 64), "r"(s + 128), "r"(s + 192)
				 : "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23",
				   "v24", "v25", "v26", "v27", "v28", "v29", "v30", "v31", "memory");
	for (; n; n -= 64, d += 64, s += 64)
		__asm__ volatile("ld1 {v0.16b, v1.16b, v2.16b, v3.16b}, [%1]\n\t"
				 "st1 {v0.16b, v1.16b, v2.16b, v3.16b}, [%0]"
				 : : "r"(d), "r"(s) : "v0", "v1", "v2", "v3", "memory");
}

/* ---- ldp: pairs of 64-bit general registers ---- */

static void store16_ldp(void *dst, const void *src, size_t n)
{
	char *d = dst;
	const char *s = src;
	uint64_t a, b, c, e;

	for (; n >= 32; n -= 32, d += 32, s += 32)
		__asm__ volatile("ldp %0, %1, [%5]\n\tldp %2, %3, [%5, #16]\n\t"
				 "stp %0, %1, [%4]\n\tstp %2, %3, [%4, #16]"
				 : "=&r"(a), "=&r"(b), "=&r"(c), "=&r"(e) : "r"(d), "r"(s) : "memory");
	for (; n; n -= 16, d += 16, s += 16)
		__asm__ volatile("ldp %0, %1, [%3]\n\tstp %0, %1, [%2]"
				 : "=&r"(a), "=&r"(b) : "r"(d), "r"(s) : "memory");
}

static void load16_ldp(void *dst, const void *src, size_t n)
{
	/* The same instructions; only which side is the mapping differs. */
	store16_ldp(dst, src, n);
}

static void set_ldp(struct gdr_copy_routines *r)
{
	r->name = "ldp";
	r->store16 = store16_ldp;
	r->load16 = load16_ldp;
	r->store_desc = r->load_desc = "LDP/STP of X register pairs (16 B)";
}

bool gdr_arch_copy_routines_get(const char *name, struct gdr_copy_routines *r)
{
	if (strcmp(name, "ldp") == 0) {
		set_ldp(r);
		return true;
	}
	if (strcmp(name, "neon") == 0) {
		if (!have_asimd())
			return false;
		r->name = "neon";
		r->store16 = store16_neon;
		r->load16 = load16_neon;
		r->store32 = store32_neon;
		r->load32 = load32_neon;
		r->store64 = store64_neon;
		r->load64 = load64_neon;
		r->store_desc = "NEON ST1 of 4 Q registers (64 B)";
		r->load_desc = "NEON LD1 of 4 Q registers (64 B, 4 lines in flight)";
		return true;
	}
	return false;
}

void gdr_arch_copy_routines_best(struct gdr_copy_routines *r)
{
	if (!gdr_arch_copy_routines_get("neon", r))
		set_ldp(r);
	gdr_dbg("arm64: Advanced SIMD %s; copy routines: %s", have_asimd() ? "yes" : "no", r->name);
	r->name = "auto";
}

/* copy_fast.h's inline path is x86's (streaming-load semantics); arm64 takes copy.c's. */
bool gdr_arch_fast_path_ok(void)
{
	return false;
}

/* Full-system barriers: the GPU is an observer outside every shareability domain. */
void gdr_arch_store_fence(void)
{
	__asm__ volatile("dmb st" ::: "memory");
}

void gdr_arch_full_fence(void)
{
	__asm__ volatile("dmb sy" ::: "memory");
}

#endif /* __aarch64__ */
