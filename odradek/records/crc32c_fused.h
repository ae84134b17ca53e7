/*
 * CRC-32C (Castagnoli, reflected polynomial 0x82f63b78, register starting at ~0 and inverted at
 * the end: the CRC of Kafka's v2 batches) with the SSE4.2 ``crc32`` instruction, in three
 * independent streams that the record walk (record_walk.h) advances a few 8-byte words per
 * record, so that the CRC's instructions run while the walk waits on its chain of loads. One
 * stream is latency-bound (3 cycles per 8 bytes); three interleaved keep the unit busy.
 *
 * The span is split in three contiguous parts A|B|C (A and B of ``third`` bytes, a multiple of
 * 8; C the rest, at least as long). A's register starts at ~0, B's and C's at 0; the register
 * is linear over GF(2), so the register after A||B||C is ((a * x^(8|B|) + b) * x^(8|C|) + c)
 * mod P, each shift a few PCLMUL multiplies by powers x^(2^k - 32) from a table, reduced by the
 * crc32 instruction (crc3_shift). Spans shorter than CRC3_MIN_SPLIT go in one stream (A).
 *
 * On CPUs with AVX-512 and VPCLMULQDQ (crc32c_zmm) spans of 64 bytes or more are folded 64
 * bytes at a time instead (crcz_, further down): two carry-less multiplies per 64 bytes on
 * another port than the walk's, where the three streams take eight crc32 instructions on the
 * one port that also runs part of the walk. validate_and_assign on 8,850 records of 100 B:
 * 7.0 -> 6.6 ns a record (L2), 8.2 -> 8.0 (L3); the walk alone is 5.8-6.2.
 *
 * Only x86-64 with GCC or clang (CRC32C_FUSED); the caller checks crc32c_hw (SSE4.2 and PCLMUL,
 * set by crc32c_init from __builtin_cpu_supports) at run time and otherwise keeps the crc32c
 * package.
 * Static functions, included by _log_validator.c alone.
 */
#ifndef ODRADEK_CRC32C_FUSED_H
#define ODRADEK_CRC32C_FUSED_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CRC32C_FUSED 1
#else
#define CRC32C_FUSED 0
#endif

#define CRC32C_POLY 0x82f63b78u
#define CRC3_MIN_SPLIT 512 /* bytes: below, one stream */
#define CRC3_MAX_WORDS 8   /* the most words per stream and step */

static int crc32c_hw;            /* SSE4.2 at run time */
static uint32_t crc32c_x2n[64];  /* x^(2^k) mod P, reflected (bit 31 is x^0) */

/* a * b mod P, both reflected. */
static uint32_t crc32c_multmodp(uint32_t a, uint32_t b) {
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ CRC32C_POLY : b >> 1;
    }
    return p;
}

/* x^(2^k - 32) mod P for k >= 5: crc3_shift's factors (its multiply brings the x^32 back). */
static uint32_t crc32c_x2n_32[64];

/* x^e mod P, reflected (after crc32c_x2n is filled). */
static uint32_t crc32c_xpow(uint64_t e) {
    uint32_t q = 1u << 31;
    for (int j = 0; e; e >>= 1, j++)
        if (e & 1)
            q = crc32c_multmodp(crc32c_x2n[j], q);
    return q;
}

#define CRCZ_BLOCK 64 /* bytes: one 512-bit register */
#define CRCZ_MAX_BLOCKS 4 /* the most blocks per step */
/* Bytes ahead of its fold that a step prefetches. In the broker a request's bytes come from the
 * socket's copy, mostly not in L1/L2 (a micro-benchmark on a buffer it keeps rereading does
 * not show this): without it, a third of the fused walk's time (perf, kcat produce) stalled
 * on the fold's loads, each step waiting for the lines the walk would have needed next. */
#define CRCZ_AHEAD 1024
static int crc32c_zmm;  /* AVX-512F and VPCLMULQDQ at run time (and crc32c_hw) */
static uint32_t crcz_k_low, crcz_k_high; /* crcz_fold's factors, see there */

static void crc32c_init(void) {
    uint32_t p = 1u << 30; /* x^1 */
    crc32c_x2n[0] = p;
    for (int k = 1; k < 64; k++)
        crc32c_x2n[k] = p = crc32c_multmodp(p, p);
    for (int k = 5; k < 64; k++) {
        uint64_t e = ((uint64_t)1 << k) - 32;
        uint32_t q = 1u << 31;
        for (int j = 0; e; e >>= 1, j++)
            if (e & 1)
                q = crc32c_multmodp(crc32c_x2n[j], q);
        crc32c_x2n_32[k] = q;
    }
#if CRC32C_FUSED
    __builtin_cpu_init();
    crc32c_hw = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul");
    crc32c_zmm = crc32c_hw && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq");
#endif
    crcz_k_low = crc32c_xpow(8 * CRCZ_BLOCK + 31);
    crcz_k_high = crc32c_xpow(8 * CRCZ_BLOCK - 33);
}

/* Three streams: stream j's next word is at ``a + j * third`` (A|B|C contiguous, all three
 * advance together while stepping), its last byte before ``end[j]``. One pointer and one
 * offset rather than three pointers: the walk that steps them needs the registers. */
typedef struct {
    const unsigned char *a;
    size_t third;
    size_t steps; /* the steps left that A has the words for */
    const unsigned char *end[3];
    uint64_t s[3];
    size_t len_b, len_c;
    int words; /* per stream and step */
} Crc3;

/* Split the ``n`` bytes at ``b`` and plan ``words`` per step (1..CRC3_MAX_WORDS) for a walk
 * of ``count`` records. */
static inline __attribute__((always_inline)) void crc3_start(Crc3 *c, const unsigned char *b, size_t n, int64_t count) {
    size_t third = n < CRC3_MIN_SPLIT ? 0 : (n / 3) & ~(size_t)7;
    const unsigned char *a_end = third ? b + third : b + n;
    c->a = b;
    c->third = third;
    c->end[0] = a_end;
    c->end[1] = b + 2 * third;
    c->end[2] = b + n;
    c->s[0] = 0xffffffffu;
    c->s[1] = c->s[2] = 0;
    c->len_b = third;
    c->len_c = third ? n - 2 * third : 0;
    /* Enough words that the streams are nearly done when the walk is: each stream takes a
     * third of the bytes per record (all of them when not split), rounded up. */
    int64_t per = count > 0 ? (int64_t)(n / (size_t)count) : (int64_t)n;
    int words = (int)((third ? per / 3 : per) / 8) + 1;
    c->words = words > CRC3_MAX_WORDS ? CRC3_MAX_WORDS : words;
    /* One stream: no stepping (its chain would be the bound); else while A has the words. */
    c->steps = third / (8 * (size_t)c->words);
}

#if CRC32C_FUSED
#include <immintrin.h>

static inline uint64_t crc3_load(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Advance each stream by c->words words, when A (and so B, and C, at least as long) has
 * them. */
__attribute__((target("sse4.2"), always_inline)) static inline void crc3_step(void *state) {
    Crc3 *c = state;
    if (c->steps == 0)
        return;
    c->steps--;
    const unsigned char *a = c->a;
    size_t third = c->third;
    int words = c->words;
    uint64_t sa = c->s[0], sb = c->s[1], sc = c->s[2];
    for (int j = 0; j < words; j++) {
        sa = __builtin_ia32_crc32di(sa, crc3_load(a + 8 * j));
        sb = __builtin_ia32_crc32di(sb, crc3_load(a + third + 8 * j));
        sc = __builtin_ia32_crc32di(sc, crc3_load(a + 2 * third + 8 * j));
    }
    c->a = a + 8 * words;
    c->s[0] = sa;
    c->s[1] = sb;
    c->s[2] = sc;
}

__attribute__((target("sse4.2"))) static uint64_t crc3_rest(uint64_t s, const unsigned char *p,
                                                             const unsigned char *end) {
    for (; end - p >= 8; p += 8)
        s = __builtin_ia32_crc32di(s, crc3_load(p));
    uint32_t s32 = (uint32_t)s;
    for (; p < end; p++)
        s32 = __builtin_ia32_crc32qi(s32, *p);
    return s32;
}

/* a * b * x^32 mod P (reflected): the carry-less product, whose 64-bit reflected form is the
 * integer product shifted left once, reduced by the crc32 instruction (a CRC register fed a
 * message M from 0 is M * x^32 mod P). */
__attribute__((target("sse4.2,pclmul"))) static inline uint32_t crc3_mul32(uint32_t a, uint32_t b) {
    __m128i prod = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)a), _mm_cvtsi32_si128((int)b), 0);
    return (uint32_t)__builtin_ia32_crc32di(0, (uint64_t)_mm_cvtsi128_si64(prod) << 1);
}

/* The register ``s`` times x^(8 * n) mod P: n % 4 zero bytes through the crc32 instruction,
 * then a multiply per further bit of n. */
__attribute__((target("sse4.2,pclmul"))) static uint32_t crc3_shift(uint32_t s, uint64_t n) {
    for (uint64_t r = n & 3; r; r--)
        s = __builtin_ia32_crc32qi(s, 0);
    n >>= 2;
    for (int k = 5; n; n >>= 1, k++)
        if (n & 1)
            s = crc3_mul32(s, crc32c_x2n_32[k]);
    return s;
}

/* The CRC-32C of the whole span: each stream finished, then combined. */
__attribute__((target("sse4.2,pclmul"), always_inline)) static inline uint32_t crc3_finish(Crc3 *c) {
    /* The words all three streams still have, interleaved; then each stream's rest. */
    c->words = 1;
    c->steps = c->third ? (size_t)(c->end[0] - c->a) / 8 : 0;
    while (c->steps)
        crc3_step(c);
    const unsigned char *pa = c->a, *pb = pa + c->third, *pc = pb + c->third;
    uint32_t a = (uint32_t)crc3_rest(c->s[0], pa, c->end[0]);
    if (c->len_b == 0)
        return ~a;
    uint32_t b = (uint32_t)crc3_rest(c->s[1], pb, c->end[1]);
    uint32_t cc = (uint32_t)crc3_rest(c->s[2], pc, c->end[2]);
    uint32_t r = crc3_shift(a, c->len_b) ^ b;
    r = crc3_shift(r, c->len_c) ^ cc;
    return ~r;
}

/* The CRC-32C by folding, for CPUs with AVX-512 and VPCLMULQDQ: one 512-bit register holds
 * 64 bytes of the span as four 128-bit lanes, and each step folds it onto the next 64 bytes:
 * acc = acc * x^512 + next (mod P, lane by lane), two carry-less multiplies and an XOR per 64
 * bytes where the crc32 instruction takes eight instructions on one port. In a lane loaded
 * from memory bit k is the coefficient of x^(127-k) (reflected), so its low qword is the
 * high-degree half h (times x^64) and its high qword l: acc * x^512 = h * x^576 + l * x^512.
 * A product of a qword q by a 32-bit constant k in a lane's low bits is q * k * x^33 in the
 * same frame (k sits at x^32..x^63 of its qword; the multiply adds one more x), so the
 * constants are x^543 and x^479 mod P, each product of degree 127 at most. The register's
 * initial ~0 is folded into the first four bytes (a crc32 register fed M from ~0 equals one
 * fed M with its first four bytes inverted from 0); at the end, the 64 bytes of the
 * accumulator and then the span's tail go through the crc32 instruction from 0. Spans of
 * CRCZ_BLOCK bytes or more. */
typedef struct {
    __m512i acc;
    const unsigned char *p, *end; /* the next block; the span's end */
    size_t steps;                 /* the steps left that have their blocks */
    int blocks;                   /* per step */
} CrcZ;

__attribute__((target("avx512f,vpclmulqdq"), always_inline)) static inline __m512i crcz_fold(__m512i acc,
                                                                                            const unsigned char *p) {
    const __m512i k = _mm512_set_epi64(crcz_k_high, crcz_k_low, crcz_k_high, crcz_k_low, crcz_k_high, crcz_k_low,
                                       crcz_k_high, crcz_k_low);
    __m512i lo = _mm512_clmulepi64_epi128(acc, k, 0x00), hi = _mm512_clmulepi64_epi128(acc, k, 0x11);
    return _mm512_ternarylogic_epi64(lo, hi, _mm512_loadu_si512((const void *)p), 0x96); /* lo ^ hi ^ next */
}

__attribute__((target("avx512f,vpclmulqdq"), always_inline)) static inline void crcz_start(CrcZ *c,
                                                                                           const unsigned char *b,
                                                                                           size_t n, int64_t count) {
    c->acc = _mm512_xor_si512(_mm512_loadu_si512((const void *)b), _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0, 0xffffffff));
    c->p = b + CRCZ_BLOCK;
    c->end = b + n;
    int64_t per = count > 0 ? (int64_t)(n / (size_t)count) : (int64_t)n;
    int blocks = (int)(per / CRCZ_BLOCK) + 1;
    c->blocks = blocks > CRCZ_MAX_BLOCKS ? CRCZ_MAX_BLOCKS : blocks;
    c->steps = (n - CRCZ_BLOCK) / CRCZ_BLOCK / (size_t)c->blocks;
}

__attribute__((target("avx512f,vpclmulqdq"), always_inline)) static inline void crcz_step(void *state) {
    CrcZ *c = state;
    if (c->steps == 0)
        return;
    c->steps--;
    const unsigned char *p = c->p;
    __m512i acc = c->acc;
    for (int j = 0; j < c->blocks; j++) {
        __builtin_prefetch(p + CRCZ_BLOCK * j + CRCZ_AHEAD);
        acc = crcz_fold(acc, p + CRCZ_BLOCK * j);
    }
    c->acc = acc;
    c->p = p + CRCZ_BLOCK * c->blocks;
}

__attribute__((target("avx512f,vpclmulqdq,sse4.2"), always_inline)) static inline uint32_t crcz_finish(CrcZ *c) {
    const unsigned char *p = c->p;
    __m512i acc = c->acc;
    for (; c->end - p >= CRCZ_BLOCK; p += CRCZ_BLOCK)
        acc = crcz_fold(acc, p);
    uint64_t words[8];
    _mm512_storeu_si512((void *)words, acc);
    uint64_t s = 0;
    for (int j = 0; j < 8; j++)
        s = __builtin_ia32_crc32di(s, words[j]);
    return ~(uint32_t)crc3_rest(s, p, c->end);
}

/* The CRC-32C of the ``n`` bytes at ``b`` as a walk of ``count`` records computes it (tests). */
__attribute__((target("avx512f,vpclmulqdq,sse4.2"))) static uint32_t crcz_of(const unsigned char *b, size_t n,
                                                                             int64_t count) {
    CrcZ z;
    crcz_start(&z, b, n, count);
    for (int64_t i = 0; i < count; i++)
        crcz_step(&z);
    return crcz_finish(&z);
}

__attribute__((target("sse4.2,pclmul"))) static uint32_t crc3_of(const unsigned char *b, size_t n, int64_t count) {
    if (crc32c_zmm && n >= CRCZ_BLOCK)
        return crcz_of(b, n, count);
    Crc3 c;
    crc3_start(&c, b, n, count);
    for (int64_t i = 0; i < count; i++)
        crc3_step(&c);
    return crc3_finish(&c);
}
#endif /* CRC32C_FUSED */

#endif /* ODRADEK_CRC32C_FUSED_H */
