// SPDX-License-Identifier: MIT
/*
 * x86-64 copy routines for write-combined memory.  Each one is compiled for
 * its own ISA with __attribute__((target)), so the library builds with the
 * default -march and runs on any x86-64; which ones run is decided from
 * CPUID and XCR0 at run time.
 *
 * Stores: non-temporal (streaming) stores fill write-combining buffers a
 * line at a time.  MOVDIR64B writes a whole 64-byte line as one transaction.
 * Loads: MOVNTDQA from WC memory pulls the whole line into a streaming-load
 * buffer; we touch several lines before using the data so that several
 * reads are in flight -- that, not the vector width, is what makes BAR reads
 * fast.
 */
#if defined(__x86_64__) || defined(__i386__)

#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "copy.h"
#include "internal.h"

struct x86_features {
	bool sse41, avx, avx2, avx512f, avx512bw_vl, movdir64b;
};

static uint64_t read_xcr0(void)
{
	uint32_t lo, hi;

	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}

static void detect(struct x86_features *f)
{
	unsigned int eax, ebx, ecx, edx, max_leaf;
	bool ymm_state = false, zmm_state = false;

	memset(f, 0, sizeof(*f));
	max_leaf = __get_cpuid_max(0, NULL);
	if (max_leaf < 1 || !__get_cpuid(1, &eax, &ebx, &ecx, &edx))
		return;
	f->sse41 = ecx & bit_SSE4_1;
	/* The OS must save the wider registers, or using them corrupts other tasks. */
	if (ecx & bit_OSXSAVE) {
		uint64_t xcr0 = read_xcr0();

		ymm_state = (xcr0 & 0x6) == 0x6;
		zmm_state = ymm_state && (xcr0 & 0xe0) == 0xe0;
	}
	f->avx = (ecx & bit_AVX) && ymm_state;
	if (max_leaf >= 7) {
		__cpuid_count(7, 0, eax, ebx, ecx, edx);
		f->avx2 = f->avx && (ebx & bit_AVX2);
		f->avx512f = zmm_state && (ebx & bit_AVX512F);
		f->avx512bw_vl = f->avx512f && (ebx & bit_AVX512BW) && (ebx & bit_AVX512VL);
		f->movdir64b = ecx & (1u << 28);	/* CPUID.(7,0):ECX.MOVDIR64B[bit 28] */
	}
}

static pthread_once_t features_once = PTHREAD_ONCE_INIT;
static struct x86_features features;

static void detect_once(void)
{
	detect(&features);
	gdr_dbg("CPU: SSE4.1 %d, AVX %d, AVX2 %d, AVX-512F %d, AVX-512BW+VL %d, MOVDIR64B %d", features.sse41,
		features.avx, features.avx2, features.avx512f, features.avx512bw_vl, features.movdir64b);
}

static const struct x86_features *cpu(void)
{
	pthread_once(&features_once, detect_once);
	return &features;
}

/* ---- 16 bytes: SSE2 streaming stores (baseline on x86-64), SSE4.1 streaming loads ---- */

static void store16_sse2(void *dst, const void *src, size_t n)
{
	__m128i *d = dst;
	const __m128i *s = src;

	for (; n >= 64; n -= 64, d += 4, s += 4) {
		__m128i a = _mm_loadu_si128(s), b = _mm_loadu_si128(s + 1);
		__m128i c = _mm_loadu_si128(s + 2), e = _mm_loadu_si128(s + 3);

		_mm_stream_si128(d, a);
		_mm_stream_si128(d + 1, b);
		_mm_stream_si128(d + 2, c);
		_mm_stream_si128(d + 3, e);
	}
	for (; n; n -= 16, d++, s++)
		_mm_stream_si128(d, _mm_loadu_si128(s));
}

__attribute__((target("sse4.1"))) static void load16_sse41(void *dst, const void *src, size_t n)
{
	__m128i *d = dst;
	__m128i *s = (__m128i *)src;	/* the intrinsic takes a non-const pointer */

	/* Four lines per round: all 16 loads issue before the first store. */
	for (; n >= 256; n -= 256, d += 16, s += 16) {
		__m128i v[16];
		int i;

		for (i = 0; i < 16; i++)
			v[i] = _mm_stream_load_si128(s + i);
		for (i = 0; i < 16; i++)
			_mm_storeu_si128(d + i, v[i]);
	}
	for (; n >= 64; n -= 64, d += 4, s += 4) {
		__m128i a = _mm_stream_load_si128(s), b = _mm_stream_load_si128(s + 1);
		__m128i c = _mm_stream_load_si128(s + 2), e = _mm_stream_load_si128(s + 3);

		_mm_storeu_si128(d, a);
		_mm_storeu_si128(d + 1, b);
		_mm_storeu_si128(d + 2, c);
		_mm_storeu_si128(d + 3, e);
	}
	for (; n; n -= 16, d++, s++)
		_mm_storeu_si128(d, _mm_stream_load_si128(s));
}

/* Without SSE4.1 there is no streaming load: plain aligned 16-byte loads. */
/* For polls (copy_fast.c): each load stored at once, so a poll's loads overlap the next poll's. */
__attribute__((target("sse4.1"))) static void poll16_sse41(void *dst, const void *src, size_t n)
{
	__m128i *d = dst;
	__m128i *s = (__m128i *)src;

	for (; n; n -= 16, d++, s++)
		_mm_storeu_si128(d, _mm_stream_load_si128(s));
}

/* The same with 32-byte loads: a third kind of poll for copy_fast.c to time. */
__attribute__((target("avx2"))) static void poll32_avx2(void *dst, const void *src, size_t n)
{
	__m256i *d = dst;
	__m256i *s = (__m256i *)src;

	for (; n; n -= 32, d++, s++)
		_mm256_storeu_si256(d, _mm256_stream_load_si256(s));
	_mm256_zeroupper();
}

static void load16_sse2(void *dst, const void *src, size_t n)
{
	__m128i *d = dst;
	const __m128i *s = src;

	for (; n; n -= 16, d++, s++)
		_mm_storeu_si128(d, _mm_load_si128(s));
}

/* ---- 32 bytes: AVX streaming stores, AVX2 streaming loads ---- */

__attribute__((target("avx"))) static void store32_avx(void *dst, const void *src, size_t n)
{
	__m256i *d = dst;
	const __m256i *s = src;

	for (; n >= 128; n -= 128, d += 4, s += 4) {
		__m256i a = _mm256_loadu_si256(s), b = _mm256_loadu_si256(s + 1);
		__m256i c = _mm256_loadu_si256(s + 2), e = _mm256_loadu_si256(s + 3);

		_mm256_stream_si256(d, a);
		_mm256_stream_si256(d + 1, b);
		_mm256_stream_si256(d + 2, c);
		_mm256_stream_si256(d + 3, e);
	}
	for (; n; n -= 32, d++, s++)
		_mm256_stream_si256(d, _mm256_loadu_si256(s));
	/* Leave no dirty upper halves behind for SSE code that follows. */
	_mm256_zeroupper();
}

__attribute__((target("avx2"))) static void load32_avx2(void *dst, const void *src, size_t n)
{
	__m256i *d = dst;
	__m256i *s = (__m256i *)src;

	for (; n >= 256; n -= 256, d += 8, s += 8) {
		__m256i v[8];
		int i;

		for (i = 0; i < 8; i++)
			v[i] = _mm256_stream_load_si256(s + i);
		for (i = 0; i < 8; i++)
			_mm256_storeu_si256(d + i, v[i]);
	}
	for (; n; n -= 32, d++, s++)
		_mm256_storeu_si256(d, _mm256_stream_load_si256(s));
	_mm256_zeroupper();
}

/* ---- 64 bytes: AVX-512 streaming stores and loads, MOVDIR64B stores ---- */

__attribute__((target("avx512f"))) static void store64_avx512(void *dst, const void *src, size_t n)
{
	__m512i *d = dst;
	const __m512i *s = src;

	for (; n >= 256; n -= 256, d += 4, s += 4) {
		__m512i a = _mm512_loadu_si512(s), b = _mm512_loadu_si512(s + 1);
		__m512i c = _mm512_loadu_si512(s + 2), e = _mm512_loadu_si512(s + 3);

		_mm512_stream_si512(d, a);
		_mm512_stream_si512(d + 1, b);
		_mm512_stream_si512(d + 2, c);
		_mm512_stream_si512(d + 3, e);
	}
	for (; n; n -= 64, d++, s++)
		_mm512_stream_si512(d, _mm512_loadu_si512(s));
	_mm256_zeroupper();
}

__attribute__((target("avx512f"))) static void load64_avx512(void *dst, const void *src, size_t n)
{
	__m512i *d = dst;
	__m512i *s = (__m512i *)src;

	/* Sixteen lines in flight: BAR reads are latency-bound, so depth is what counts. */
	for (; n >= 1024; n -= 1024, d += 16, s += 16) {
		__m512i v[16];
		int i;

		for (i = 0; i < 16; i++)
			v[i] = _mm512_stream_load_si512(s + i);
		for (i = 0; i < 16; i++)
			_mm512_storeu_si512(d + i, v[i]);
	}
	for (; n >= 256; n -= 256, d += 4, s += 4) {
		__m512i a = _mm512_stream_load_si512(s), b = _mm512_stream_load_si512(s + 1);
		__m512i c = _mm512_stream_load_si512(s + 2), e = _mm512_stream_load_si512(s + 3);

		_mm512_storeu_si512(d, a);
		_mm512_storeu_si512(d + 1, b);
		_mm512_storeu_si512(d + 2, c);
		_mm512_storeu_si512(d + 3, e);
	}
	for (; n; n -= 64, d++, s++)
		_mm512_storeu_si512(d, _mm512_stream_load_si512(s));
	_mm256_zeroupper();
}

/* Part of a 16-byte block: one streaming load, then a store of just those bytes. */
__attribute__((target("sse4.1,avx512f,avx512bw,avx512vl"))) static void load16_part_avx512bw(
	void *dst, const void *block, unsigned int offset, unsigned int len)
{
	__m128i v = _mm_stream_load_si128((__m128i *)block);
	__mmask16 keep = (__mmask16)(((1u << len) - 1) << offset);

	/* Masked-off bytes are neither written nor faulted on: dst - offset need not be mapped. */
	_mm_mask_storeu_epi8((char *)dst - offset, keep, v);
}

/*
 * 1..64 bytes at any alignment.  A read inside one aligned 16-, 32- or
 * 64-byte block (gdr_single_load_width) is one streaming load of that block,
 * stored with a mask of just the bytes asked for: the CPU fetches it whole,
 * so a GPU writing the block with one store is never seen half-written (a
 * 32-byte read done as two 16-byte loads was, about 30 % of the time, while
 * the GPU rewrote the line once a microsecond: tools/h200/RESULTS.md).  The
 * narrowest load that holds the read is used, because back to back a
 * 64-byte load of a line waits for the previous one and narrower ones overlap.
 * A read that crosses a line: one load per 16-byte block holding some of it.
 * No bounce buffer, no calls.
 */
__attribute__((target("sse4.1,avx2,avx512f,avx512bw,avx512vl"))) static void small_read_avx512bw(void *dst,
												    const void *wc_src,
												    size_t n)
{
	uintptr_t s = (uintptr_t)wc_src, end = s + n, block = s & ~(uintptr_t)15;
	unsigned int width = gdr_single_load_width(s, n);

	if (width == 64) {
		uintptr_t line = s & ~(uintptr_t)63;
		__m512i v = _mm512_stream_load_si512((void *)line);
		__mmask64 keep = (n == 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1)) << (s - line);

		_mm512_mask_storeu_epi8((char *)dst - (s - line), keep, v);
		_mm256_zeroupper();
		return;
	}
	if (width == 32) {
		uintptr_t half = s & ~(uintptr_t)31;
		__m256i v = _mm256_stream_load_si256((__m256i *)half);
		__mmask32 keep = (__mmask32)((((uint64_t)1 << n) - 1) << (s - half));

		_mm256_mask_storeu_epi8((char *)dst - (s - half), keep, v);
		_mm256_zeroupper();
		return;
	}
	for (; block < end; block += 16) {
		__m128i v = _mm_stream_load_si128((__m128i *)block);
		unsigned int lo = block < s ? (unsigned int)(s - block) : 0;
		unsigned int hi = end - block < 16 ? (unsigned int)(end - block) : 16;
		__mmask16 keep = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));

		_mm_mask_storeu_epi8((char *)dst + ((intptr_t)block - (intptr_t)s), keep, v);
	}
}

/*
 * MOVDIR64B (%rsi), %rdi -- written as bytes so that any assembler takes it;
 * the CPUID check decides whether it runs.  The source may be unaligned, the
 * destination must be 64-byte aligned.
 */
static inline void movdir64b(void *dst, const void *src)
{
	__asm__ volatile(".byte 0x66, 0x0f, 0x38, 0xf8, 0x3e"
			 : "=m"(*(char(*)[64])dst)
			 : "D"(dst), "S"(src), "m"(*(const char(*)[64])src));
}

static void store64_movdir64b(void *dst, const void *src, size_t n)
{
	char *d = dst;
	const char *s = src;

	for (; n; n -= 64, d += 64, s += 64)
		movdir64b(d, s);
}

/* ---- sets ---- */

static void set_sse(struct gdr_copy_routines *r, const struct x86_features *f)
{
	r->store16 = store16_sse2;
	r->load16 = f->sse41 ? load16_sse41 : load16_sse2;
	r->store_desc = "SSE2 MOVNTDQ (16 B)";
	r->load_desc = f->sse41 ? "SSE4.1 MOVNTDQA (16 B, 4 lines in flight)" : "SSE2 MOVDQA (16 B; no SSE4.1)";
}

bool gdr_arch_copy_routines_get(const char *name, struct gdr_copy_routines *r)
{
	const struct x86_features *f = cpu();

	if (strcmp(name, "sse") == 0) {
		set_sse(r, f);
		r->name = "sse";
		return true;
	}
	if (strcmp(name, "avx2") == 0) {
		if (!f->avx2)
			return false;
		set_sse(r, f);
		r->name = "avx2";
		r->store32 = store32_avx;
		r->load32 = load32_avx2;
		r->store_desc = "AVX VMOVNTDQ (32 B)";
		r->load_desc = "AVX2 VMOVNTDQA (32 B, 4 lines in flight)";
		return true;
	}
	if (strcmp(name, "avx512") == 0) {
		if (!f->avx512f || !f->avx2)
			return false;
		gdr_arch_copy_routines_get("avx2", r);
		r->name = "avx512";
		r->store64 = store64_avx512;
		r->load64 = load64_avx512;
		if (f->avx512bw_vl && f->sse41) {
			r->load16_part = load16_part_avx512bw;
			r->small_read = small_read_avx512bw;
		}
		r->store_desc = "AVX-512 VMOVNTDQ (64 B)";
		r->load_desc = "AVX-512 VMOVNTDQA (64 B, 16 lines in flight)";
		return true;
	}
	if (strcmp(name, "movdir64b") == 0) {
		if (!f->movdir64b)
			return false;
		set_sse(r, f);
		if (f->avx2) {
			r->store32 = store32_avx;
			r->load32 = load32_avx2;
		}
		r->name = "movdir64b";
		r->store64 = store64_movdir64b;
		r->store_desc = "MOVDIR64B (64 B)";
		if (f->avx2)
			r->load_desc = "AVX2 VMOVNTDQA (32 B, 4 lines in flight)";
		return true;
	}
	return false;
}

/*
 * Measured on an H200's BAR1 (Sapphire Rapids, 16 MiB): AVX-512 and AVX
 * streaming stores about 15 GB/s, MOVDIR64B about 13 GB/s; reads: AVX-512
 * streaming loads about 0.9 GB/s, SSE4.1 ones about 0.45 GB/s, and a single
 * line in one round trip instead of two (copy.c says when reads use which).
 * So: the widest streaming stores and loads, SSE4.1 loads for parts of lines
 * (AVX2 loads were not faster anywhere).  GDRCOPY_COPY_ROUTINE overrides this.
 */
void gdr_arch_copy_routines_best(struct gdr_copy_routines *r)
{
	const struct x86_features *f = cpu();

	if (f->avx512f && f->avx2) {
		gdr_arch_copy_routines_get("avx512", r);
		r->load16 = f->sse41 ? load16_sse41 : load16_sse2;
		r->poll16 = f->sse41 ? poll16_sse41 : NULL;
		r->poll32 = poll32_avx2;
		r->read32 = poll32_avx2;	/* for n = 32: one load, stored at once */
		r->load32 = NULL;
		r->load_desc = r->load16_part ?
			"AVX-512 VMOVNTDQA (64 B) for whole lines, one load of 16/32/64 B for a read within a line (masked stores), SSE4.1 or AVX2 MOVNTDQA for polls" :
			"AVX-512 VMOVNTDQA (64 B) for whole lines, SSE4.1 or AVX2 MOVNTDQA for parts and polls";
	} else if (f->avx2) {
		gdr_arch_copy_routines_get("avx2", r);
		r->load32 = NULL;
		r->load_desc = f->sse41 ? "SSE4.1 MOVNTDQA (16 B, 4 lines in flight)" : "SSE2 MOVDQA (16 B; no SSE4.1)";
	} else {
		gdr_arch_copy_routines_get("sse", r);
	}
	r->name = "auto";
}

bool gdr_arch_fast_path_ok(void)
{
	return cpu()->sse41;
}

void gdr_arch_store_fence(void)
{
	_mm_sfence();
}

void gdr_arch_full_fence(void)
{
	_mm_mfence();
}

#endif /* x86 */
