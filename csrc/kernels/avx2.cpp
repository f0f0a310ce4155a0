// The AVX2 kernel path (x86-64-v3: AVX2, FMA, BMI2), chosen at run time where the CPU has them.
//
// Compiled for those instructions by the target pragma below, not by a command-line flag, so
// the rest of the module stays baseline x86-64. Everything here has internal linkage in its own
// namespace and calls no library template (see kernels.h: a template instantiated here could
// be picked by the linker for the whole module and crash an older CPU).
//
// Exactness: the int8 products are summed with vpmaddwd on int16-widened operands (pairs of
// int8 products, exact in int32 for any int8 values), never vpmaddubsw on raw values (it
// saturates at int16). The attention dots, whose operands are quantized rows (|v| <= 127), use
// vpmaddubsw on |q| and sign(k, q): a pair of products is at most 2 * 127 * 127 = 32258 < 2**15,
// so it cannot saturate; the mix's weights go in 7-bit parts for the same reason. Everything
// else is generic.h's integer code, vectorized by the compiler.
#include "kernels/kernels.h"

#include <type_traits>

#if defined(__x86_64__)

#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,bmi,bmi2,popcnt"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,bmi,bmi2,popcnt")
#endif

namespace shazip::kernels::avx2 {
namespace {

static void lookup(const i32* __restrict t, const i32* __restrict idx, i32* __restrict out, i64 n) {
  i64 j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256i ix = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + j));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), _mm256_i32gather_epi32(t, ix, 4));
  }
  for (; j < n; ++j) out[j] = t[idx[j]];
}

#include "kernels/generic.h"
#include "kernels/norm256.h"

constexpr auto quantize_row = quantize_row_generic;

// ---- GEMM, two exact schemes, chosen per matrix when it is packed.
//
// Sign trick (any matrix without the weight -128, i.e. every matrix a model has: its weights
// are quantized to +-127): vpmaddubsw(|a|, sign(w, a)) multiplies adjacent byte pairs, u8 by s8,
// into int16 sums of two products each at most 127 * 127, so 2 * 16129 = 32258 < 2**15 cannot
// saturate; vpmaddwd with ones adds the two sums of four k into int32. On Zen 3 it runs about
// as fast as the widened scheme (the loop is bound by issue: 4 operations per 32 products either
// way; a variant summing the pairs by shifts, one multiply per 32 products, was slower) and a
// few % faster end to end, having no widening to do. Weights are packed in panels of 32
// columns: for each group of four rows k (4kq .. 4kq + 3), four 32-byte vectors, each 8 columns
// x 4 bytes; K is padded to 4 and N to 32 with zeros. Tiles: 2 rows x 32 columns, then 1 x 32.
//
// Widened (a matrix holding -128, whose negation sign() cannot represent): int8 pairs widened
// to int16 and multiplied by vpmaddwd with a broadcast pair of activations, exact for any int8.
// Panels of 16 columns: for each pair of rows k, 16 columns x 2 values; K padded to 2, N to 16.
// Tiles 2 x 32, 1 x 32, 4 x 16, 1 x 16. (Both keep int8 in memory: at a few lanes the step
// streams every weight from L3 once, and int16 weights made it a third slower.)
//
// A packed matrix starts with a 64-byte header whose first byte names its scheme. (Named
// accumulators throughout: GCC 12 keeps arrays of them in registers less well, and ran the same
// loops at 60% of this speed.)
constexpr i64 HEADER = 64;
constexpr u8 SIGNED = 1, WIDENED = 2;

static inline i64 round_up(i64 x, i64 m) { return (x + m - 1) / m * m; }

static i64 packed_bytes(i64 K, i64 N) {
  return HEADER + max64(round_up(K, 4) * round_up(N, 32), round_up(K, 2) * round_up(N, 16));
}

static void pack(const i8* w, i64 K, i64 N, u8* out) {
  bool has_min = false;
  for (i64 i = 0; i < K * N; ++i) has_min |= w[i] == -128;
  out[0] = has_min ? WIDENED : SIGNED;
  i8* o = reinterpret_cast<i8*>(out + HEADER);
  auto at = [&](i64 k, i64 n) -> i8 { return (k < K && n < N) ? w[k * N + n] : 0; };
  if (!has_min) {
    const i64 KQ = round_up(K, 4) / 4, panels = round_up(N, 32) / 32;
    for (i64 p = 0; p < panels; ++p)
      for (i64 kq = 0; kq < KQ; ++kq)
        for (i64 c = 0; c < 32; ++c)
          for (i64 t = 0; t < 4; ++t) o[((p * KQ + kq) * 32 + c) * 4 + t] = at(4 * kq + t, p * 32 + c);
  } else {
    const i64 KK = round_up(K, 2) / 2, panels = round_up(N, 16) / 16;
    for (i64 p = 0; p < panels; ++p)
      for (i64 kk = 0; kk < KK; ++kk)
        for (i64 c = 0; c < 16; ++c)
          for (i64 t = 0; t < 2; ++t) o[((p * KK + kk) * 16 + c) * 2 + t] = at(2 * kk + t, p * 16 + c);
  }
}

// the rows of a as int32 words of four bytes (signed) or of two int16 (widened): rows x 4-byte words
static i64 gemm_scratch_bytes(i64 rows, i64 K) { return rows * max64(round_up(K, 4), round_up(K, 2) * 2); }

// c[0 .. valid) = v (valid <= 8 entries of 8)
static inline void store8(i32* c, __m256i v, i64 valid) {
  if (valid >= 8) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), v);
  } else if (valid > 0) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_epi32(c, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<i32>(valid)), lanes), v);
  }
}
static inline void store32(i32* c, __m256i x0, __m256i x1, __m256i x2, __m256i x3, i64 nv) {
  store8(c, x0, nv);
  store8(c + 8, x1, nv - 8);
  store8(c + 16, x2, nv - 16);
  store8(c + 24, x3, nv - 24);
}

// -- sign trick
#define SHAZIP_W(k) _mm256_load_si256(reinterpret_cast<const __m256i*>(wp + (k)))
#define SHAZIP_MAC(acc, aa, ab, w) \
  acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(aa, _mm256_sign_epi8(w, ab)), ones))

// rows a0, a1 (words of four bytes, KQ of them) x one 32-column panel at wp
static inline void signed_2x32(const i32* __restrict a0, const i32* __restrict a1, i64 KQ, const i8* __restrict wp,
                               i32* __restrict c0, i32* __restrict c1, i64 nv) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i x0 = _mm256_setzero_si256(), x1 = x0, x2 = x0, x3 = x0, y0 = x0, y1 = x0, y2 = x0, y3 = x0;
  for (i64 kq = 0; kq < KQ; ++kq, wp += 128) {
    const __m256i w0 = SHAZIP_W(0), w1 = SHAZIP_W(32), w2 = SHAZIP_W(64), w3 = SHAZIP_W(96);
    const __m256i b0 = _mm256_set1_epi32(a0[kq]), p0 = _mm256_abs_epi8(b0);
    SHAZIP_MAC(x0, p0, b0, w0);
    SHAZIP_MAC(x1, p0, b0, w1);
    SHAZIP_MAC(x2, p0, b0, w2);
    SHAZIP_MAC(x3, p0, b0, w3);
    const __m256i b1 = _mm256_set1_epi32(a1[kq]), p1 = _mm256_abs_epi8(b1);
    SHAZIP_MAC(y0, p1, b1, w0);
    SHAZIP_MAC(y1, p1, b1, w1);
    SHAZIP_MAC(y2, p1, b1, w2);
    SHAZIP_MAC(y3, p1, b1, w3);
  }
  store32(c0, x0, x1, x2, x3, nv);
  store32(c1, y0, y1, y2, y3, nv);
}

static inline void signed_1x32(const i32* __restrict a0, i64 KQ, const i8* __restrict wp, i32* __restrict c0, i64 nv) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i x0 = _mm256_setzero_si256(), x1 = x0, x2 = x0, x3 = x0;
  for (i64 kq = 0; kq < KQ; ++kq, wp += 128) {
    const __m256i b0 = _mm256_set1_epi32(a0[kq]), p0 = _mm256_abs_epi8(b0);
    SHAZIP_MAC(x0, p0, b0, SHAZIP_W(0));
    SHAZIP_MAC(x1, p0, b0, SHAZIP_W(32));
    SHAZIP_MAC(x2, p0, b0, SHAZIP_W(64));
    SHAZIP_MAC(x3, p0, b0, SHAZIP_W(96));
  }
  store32(c0, x0, x1, x2, x3, nv);
}
#undef SHAZIP_W
#undef SHAZIP_MAC

static void gemm_signed(const i8* a, i64 rows, i64 K, i64 N, const i8* w, i32* c, u8* scratch) {
  const i64 Kp = round_up(K, 4), KQ = Kp / 4, panels = round_up(N, 32) / 32;
  for (i64 r = 0; r < rows; ++r) {
    __builtin_memcpy(scratch + r * Kp, a + r * K, static_cast<size_t>(K));
    for (i64 k = K; k < Kp; ++k) scratch[r * Kp + k] = 0;
  }
  const i32* ap = reinterpret_cast<const i32*>(scratch);
  for (i64 p = 0; p < panels; ++p) {
    const i64 n0 = p * 32, nv = N - n0;
    const i8* wp = w + p * KQ * 128;
    i64 r = 0;
    for (; r + 2 <= rows; r += 2) signed_2x32(ap + r * KQ, ap + (r + 1) * KQ, KQ, wp, c + r * N + n0, c + (r + 1) * N + n0, nv);
    if (r < rows) signed_1x32(ap + r * KQ, KQ, wp, c + r * N + n0, nv);
  }
}

// -- widened
#define SHAZIP_W(ptr) _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(ptr)))
#define SHAZIP_MAC(acc, b, w) acc = _mm256_add_epi32(acc, _mm256_madd_epi16(b, w))

// rows r, r + 1 (a0, a1: their pair words) x the two panels at wp, wq; nv: valid columns from n0
static inline void tile_2x32(const i32* __restrict a0, const i32* __restrict a1, i64 KK,
                             const i8* __restrict wp, const i8* __restrict wq, i32* __restrict c0,
                             i32* __restrict c1, i64 nv) {
  __m256i x0 = _mm256_setzero_si256(), x1 = x0, x2 = x0, x3 = x0, y0 = x0, y1 = x0, y2 = x0, y3 = x0;
  for (i64 kk = 0; kk < KK; ++kk) {
    const __m256i w0 = SHAZIP_W(wp + kk * 32), w1 = SHAZIP_W(wp + kk * 32 + 16);
    const __m256i w2 = SHAZIP_W(wq + kk * 32), w3 = SHAZIP_W(wq + kk * 32 + 16);
    const __m256i b0 = _mm256_set1_epi32(a0[kk]);
    SHAZIP_MAC(x0, b0, w0);
    SHAZIP_MAC(x1, b0, w1);
    SHAZIP_MAC(x2, b0, w2);
    SHAZIP_MAC(x3, b0, w3);
    const __m256i b1 = _mm256_set1_epi32(a1[kk]);
    SHAZIP_MAC(y0, b1, w0);
    SHAZIP_MAC(y1, b1, w1);
    SHAZIP_MAC(y2, b1, w2);
    SHAZIP_MAC(y3, b1, w3);
  }
  store32(c0, x0, x1, x2, x3, nv);
  store32(c1, y0, y1, y2, y3, nv);
}

static inline void tile_1x32(const i32* __restrict a0, i64 KK, const i8* __restrict wp,
                             const i8* __restrict wq, i32* __restrict c0, i64 nv) {
  __m256i x0 = _mm256_setzero_si256(), x1 = x0, x2 = x0, x3 = x0;
  for (i64 kk = 0; kk < KK; ++kk) {
    const __m256i b0 = _mm256_set1_epi32(a0[kk]);
    SHAZIP_MAC(x0, b0, SHAZIP_W(wp + kk * 32));
    SHAZIP_MAC(x1, b0, SHAZIP_W(wp + kk * 32 + 16));
    SHAZIP_MAC(x2, b0, SHAZIP_W(wq + kk * 32));
    SHAZIP_MAC(x3, b0, SHAZIP_W(wq + kk * 32 + 16));
  }
  store32(c0, x0, x1, x2, x3, nv);
}

static inline void tile_4x16(const i32* __restrict a, i64 KK, const i8* __restrict wp, i32* __restrict c, i64 N,
                             i64 nv) {
  const i32* a0 = a;
  const i32* a1 = a + KK;
  const i32* a2 = a + 2 * KK;
  const i32* a3 = a + 3 * KK;
  __m256i x0 = _mm256_setzero_si256(), x1 = x0, y0 = x0, y1 = x0, z0 = x0, z1 = x0, u0 = x0, u1 = x0;
  for (i64 kk = 0; kk < KK; ++kk) {
    const __m256i w0 = SHAZIP_W(wp + kk * 32), w1 = SHAZIP_W(wp + kk * 32 + 16);
    __m256i b = _mm256_set1_epi32(a0[kk]);
    SHAZIP_MAC(x0, b, w0);
    SHAZIP_MAC(x1, b, w1);
    b = _mm256_set1_epi32(a1[kk]);
    SHAZIP_MAC(y0, b, w0);
    SHAZIP_MAC(y1, b, w1);
    b = _mm256_set1_epi32(a2[kk]);
    SHAZIP_MAC(z0, b, w0);
    SHAZIP_MAC(z1, b, w1);
    b = _mm256_set1_epi32(a3[kk]);
    SHAZIP_MAC(u0, b, w0);
    SHAZIP_MAC(u1, b, w1);
  }
  store8(c, x0, nv);
  store8(c + 8, x1, nv - 8);
  store8(c + N, y0, nv);
  store8(c + N + 8, y1, nv - 8);
  store8(c + 2 * N, z0, nv);
  store8(c + 2 * N + 8, z1, nv - 8);
  store8(c + 3 * N, u0, nv);
  store8(c + 3 * N + 8, u1, nv - 8);
}

static inline void tile_1x16(const i32* __restrict a0, i64 KK, const i8* __restrict wp, i32* __restrict c0,
                             i64 nv) {
  __m256i x0 = _mm256_setzero_si256(), x1 = x0;
  for (i64 kk = 0; kk < KK; ++kk) {
    const __m256i b0 = _mm256_set1_epi32(a0[kk]);
    SHAZIP_MAC(x0, b0, SHAZIP_W(wp + kk * 32));
    SHAZIP_MAC(x1, b0, SHAZIP_W(wp + kk * 32 + 16));
  }
  store8(c0, x0, nv);
  store8(c0 + 8, x1, nv - 8);
}

#undef SHAZIP_W
#undef SHAZIP_MAC

static void gemm_widened(const i8* a, i64 rows, i64 K, i64 N, const i8* w, i32* c, u8* scratch) {
  constexpr i64 PANEL = 16;
  const i64 KK = round_up(K, 2) / 2, panels = round_up(N, PANEL) / PANEL;
  i32* ap = reinterpret_cast<i32*>(scratch);
  for (i64 r = 0; r < rows; ++r)
    for (i64 kk = 0; kk < KK; ++kk) {
      const i64 k = 2 * kk;
      const u32 lo = static_cast<uint16_t>(static_cast<int16_t>(a[r * K + k]));
      const u32 hi = k + 1 < K ? static_cast<uint16_t>(static_cast<int16_t>(a[r * K + k + 1])) : 0;
      ap[r * KK + kk] = static_cast<i32>(lo | (hi << 16));
    }
  const i64 stride = KK * 2 * PANEL;  // bytes per panel
  i64 p = 0;
  for (; p + 2 <= panels; p += 2) {
    const i64 n0 = p * PANEL, nv = N - n0;
    const i8* wp = w + p * stride;
    i64 r = 0;
    for (; r + 2 <= rows; r += 2)
      tile_2x32(ap + r * KK, ap + (r + 1) * KK, KK, wp, wp + stride, c + r * N + n0, c + (r + 1) * N + n0, nv);
    if (r < rows) tile_1x32(ap + r * KK, KK, wp, wp + stride, c + r * N + n0, nv);
  }
  if (p < panels) {
    const i64 n0 = p * PANEL, nv = N - n0;
    const i8* wp = w + p * stride;
    i64 r = 0;
    for (; r + 4 <= rows; r += 4) tile_4x16(ap + r * KK, KK, wp, c + r * N + n0, N, nv);
    for (; r < rows; ++r) tile_1x16(ap + r * KK, KK, wp, c + r * N + n0, nv);
  }
}

static void gemm(const i8* a, i64 rows, i64 K, i64 N, const u8* packed, i32* c, u8* scratch) {
  const i8* w = reinterpret_cast<const i8*>(packed + HEADER);
  if (packed[0] == SIGNED)
    gemm_signed(a, rows, K, N, w, c, scratch);
  else
    gemm_widened(a, rows, K, N, w, c, scratch);
}

// ---- attention dots, four keys at a time: |q| (u8) x sign(k, q) (s8) pairs by vpmaddubsw
// (exact, see the top), then pairs of pairs to int32 by vpmaddwd with ones.
static inline i32 hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

static void dots(const i8* keys, i64 n, i64 d, const i8* q, i32* out) {
  const i64 dv = d / 32 * 32;
  const __m256i ones = _mm256_set1_epi16(1);
  i32 tail_q[32];  // q's last d - dv entries, for the scalar tail
  for (i64 i = dv; i < d; ++i) tail_q[i - dv] = q[i];
  auto tail = [&](const i8* k) {
    i32 s = 0;
    for (i64 i = dv; i < d; ++i) s += i32(k[i]) * tail_q[i - dv];
    return s;
  };
  i64 j = 0;
  for (; j + 4 <= n; j += 4) {
    const i8* k0 = keys + j * d;
    const i8* k1 = k0 + d;
    const i8* k2 = k1 + d;
    const i8* k3 = k2 + d;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (i64 i = 0; i < dv; i += 32) {
      const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i));
      const __m256i qa = _mm256_abs_epi8(qv);
#define SHAZIP_DOT(acc, k)                                                                               \
  acc = _mm256_add_epi32(                                                                                \
      acc, _mm256_madd_epi16(_mm256_maddubs_epi16(                                                       \
                                 qa, _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + i)), qv)), \
                             ones))
      SHAZIP_DOT(a0, k0);
      SHAZIP_DOT(a1, k1);
      SHAZIP_DOT(a2, k2);
      SHAZIP_DOT(a3, k3);
    }
    // per 128-bit lane: [sum a0, sum a1, sum a2, sum a3], then the two lanes added
    const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
    __m128i r = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    if (dv < d) r = _mm_add_epi32(r, _mm_setr_epi32(tail(k0), tail(k1), tail(k2), tail(k3)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), r);
  }
  for (; j < n; ++j) {
    const i8* k0 = keys + j * d;
    __m256i a0 = _mm256_setzero_si256();
    for (i64 i = 0; i < dv; i += 32) {
      const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i));
      const __m256i qa = _mm256_abs_epi8(qv);
      SHAZIP_DOT(a0, k0);
    }
#undef SHAZIP_DOT
    out[j] = hsum(a0) + tail(k0);
  }
}

// ---- attention mix: keys with weight in groups of four, whose 32-byte chunks are interleaved
// (two rounds of vpunpck) so that each int32 lane holds one dimension of the four keys. The
// weights go in 7-bit parts, u = p0 + 2**7 p1 + 2**14 p2 (u <= 2**17), as unsigned bytes into
// vpmaddubsw: a pair of products is at most 2 * 127 * 127 < 2**15 (keys are quantized rows, |k| <=
// 127), so it cannot saturate; vpmaddwd by 1, 2**7 or 2**14 adds the pairs of each part, weighted,
// into int32, every partial sum under 2**31 (sum u |k| <= 2**24). A group whose four weights are
// zero is skipped; the last d % 32 dimensions are summed one by one.
struct Group {
  const i8* r[4];
  u32 part[3];  // the four weights' 7-bit parts, a byte each
};

static void mix(const i8* keys, i64 n, const i32* u, const i8* extra, i32 u_extra, i64 d, i32* out, u8* scratch) {
  Group* groups = reinterpret_cast<Group*>(scratch);
  i64 ng = 0;
  weighted_key_groups(keys, n, u, extra, u_extra, d, [&](const i8* const* rows, const i32* w) {
    Group& g = groups[ng++];
    g = Group{};
    for (int t = 0; t < 4; ++t) {
      g.r[t] = rows[t];
      for (int p = 0; p < 3; ++p) g.part[p] |= u32((w[t] >> (7 * p)) & 127) << (8 * t);
    }
  });
  const __m256i scale0 = _mm256_set1_epi16(1), scale1 = _mm256_set1_epi16(1 << 7), scale2 = _mm256_set1_epi16(1 << 14);
  i64 c = 0;
  for (; c + 32 <= d; c += 32) {
    __m256i x0 = _mm256_setzero_si256(), x1 = x0, x2 = x0, x3 = x0;  // named: see the GEMM
    for (i64 g = 0; g < ng; ++g) {
      const Group& gr = groups[g];
      const __m256i k0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gr.r[0] + c));
      const __m256i k1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gr.r[1] + c));
      const __m256i k2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gr.r[2] + c));
      const __m256i k3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gr.r[3] + c));
      const __m256i a = _mm256_unpacklo_epi8(k0, k1), b = _mm256_unpackhi_epi8(k0, k1);
      const __m256i e = _mm256_unpacklo_epi8(k2, k3), f = _mm256_unpackhi_epi8(k2, k3);
      // t_m, 128-bit lane L, int32 p: dimension c + 16 L + 4 m + p of keys 0..3
      const __m256i t0 = _mm256_unpacklo_epi16(a, e), t1 = _mm256_unpackhi_epi16(a, e);
      const __m256i t2 = _mm256_unpacklo_epi16(b, f), t3 = _mm256_unpackhi_epi16(b, f);
#define SHAZIP_PART(w, scale)                                                 \
  {                                                                           \
    const __m256i wv = _mm256_set1_epi32(static_cast<i32>(w));                \
    x0 = _mm256_add_epi32(x0, _mm256_madd_epi16(_mm256_maddubs_epi16(wv, t0), scale)); \
    x1 = _mm256_add_epi32(x1, _mm256_madd_epi16(_mm256_maddubs_epi16(wv, t1), scale)); \
    x2 = _mm256_add_epi32(x2, _mm256_madd_epi16(_mm256_maddubs_epi16(wv, t2), scale)); \
    x3 = _mm256_add_epi32(x3, _mm256_madd_epi16(_mm256_maddubs_epi16(wv, t3), scale)); \
  }
      SHAZIP_PART(gr.part[0], scale0)
      if (gr.part[1] != 0) SHAZIP_PART(gr.part[1], scale1)
      if (gr.part[2] != 0) SHAZIP_PART(gr.part[2], scale2)
#undef SHAZIP_PART
    }
    // lanes back in order: dimensions c + 8 q .. c + 8 q + 7 are (x0, x1) or (x2, x3), lane q / 2
    __m256i* o = reinterpret_cast<__m256i*>(out + c);
    _mm256_storeu_si256(o, _mm256_permute2x128_si256(x0, x1, 0x20));
    _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(x2, x3, 0x20));
    _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(x0, x1, 0x31));
    _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(x2, x3, 0x31));
  }
  for (; c < d; ++c) {
    i32 s = u_extra * i32(extra[c]);
    for (i64 j = 0; j < n; ++j) s += u[j] * i32(keys[j * d + c]);
    out[c] = s;
  }
}

// ---- the stage's mixers on int16 halves, as avx512vnni.cpp's (its comment says why they are exact)
// with vpmaddwd in 8 lanes, four rows a pass; in the last chunk the lanes past n are masked off
// (vpmaskmovd, slower than plain loads and stores: the full chunks go without)
static inline __m256i first_lanes(i64 n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(i32(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
template <class Full>
static inline __attribute__((always_inline)) __m256i load8(const i32* p, __m256i m) {
  if constexpr (Full::value) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  else return _mm256_maskload_epi32(p, m);
}
template <class Full>
static inline __attribute__((always_inline)) void store8(i32* p, __m256i m, __m256i v) {
  if constexpr (Full::value) _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  else _mm256_maskstore_epi32(p, m, v);
}
constexpr int MIXER_ROWS = 4;

// sums[r] += sum of w[r][i] x_i for i in [c, end) (end - c <= 512), r < rows
template <int rows>
static inline __attribute__((always_inline)) void mixer_dot_rows(const i32* const* w, const i32* x, i64 c, i64 end,
                                                                 i64* sums) {
  const __m256i low16 = _mm256_set1_epi32(0xFFFF), low12 = _mm256_set1_epi32(4095);
  __m256i hi[rows], lo[rows];
  for (int r = 0; r < rows; ++r) hi[r] = lo[r] = _mm256_setzero_si256();
  const auto chunk = [&](i64 i, auto full, __m256i m) {
    const __m256i xv = _mm256_and_si256(load8<decltype(full)>(x + i, m), low16);
    for (int r = 0; r < rows; ++r) {
      const __m256i wv = load8<decltype(full)>(w[r] + i, m);
      hi[r] = _mm256_add_epi32(hi[r], _mm256_madd_epi16(xv, _mm256_srai_epi32(wv, 12)));
      lo[r] = _mm256_add_epi32(lo[r], _mm256_madd_epi16(xv, _mm256_and_si256(wv, low12)));
    }
  };
  i64 i = c;
  for (; i + 8 <= end; i += 8) chunk(i, std::true_type{}, __m256i{});
  if (i < end) chunk(i, std::false_type{}, first_lanes(end - i));
  for (int r = 0; r < rows; ++r) {  // 2**12 hi + lo in int64 lanes, then across
    const __m256i h = _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(hi[r])),
                                       _mm256_cvtepi32_epi64(_mm256_extracti128_si256(hi[r], 1)));
    const __m256i l = _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(lo[r])),
                                       _mm256_cvtepi32_epi64(_mm256_extracti128_si256(lo[r], 1)));
    const __m256i t = _mm256_add_epi64(_mm256_slli_epi64(h, 12), l);
    const __m128i u = _mm_add_epi64(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    sums[r] += _mm_cvtsi128_si64(u) + _mm_extract_epi64(u, 1);
  }
}

static void mixer_dot(const i32* const* w, i64 m, const i32* __restrict x, i64 n, i64* sums) {
  for (i64 j = 0; j < m; ++j) sums[j] = 0;
  for (i64 c = 0; c < n; c += 512) {
    const i64 end = min64(n, c + 512);
    in_row_groups<MIXER_ROWS>(m, [&](auto g, i64 j) { mixer_dot_rows<decltype(g)::n>(w + j, x, c, end, sums + j); });
  }
}

// rows r < rows learn their errors e[r]
template <int rows>
static inline __attribute__((always_inline)) void mixer_train_rows(i32* const* w, const i64* e, const i32* x, i64 n) {
  const __m256i low16 = _mm256_set1_epi32(0xFFFF), half = _mm256_set1_epi32(1 << 19);
  const __m256i lo = _mm256_set1_epi32(-(1 << 24)), hi = _mm256_set1_epi32(1 << 24);
  __m256i eh[rows], el[rows];
  for (int r = 0; r < rows; ++r)
    eh[r] = _mm256_set1_epi32(i32(e[r] >> 12) & 0xFFFF), el[r] = _mm256_set1_epi32(i32(e[r] & 4095));
  const auto chunk = [&](i64 i, auto full, __m256i m) {
    const __m256i xv = _mm256_and_si256(load8<decltype(full)>(x + i, m), low16);
    for (int r = 0; r < rows; ++r) {
      const __m256i part = _mm256_srai_epi32(_mm256_add_epi32(_mm256_madd_epi16(xv, el[r]), half), 12);
      const __m256i d = _mm256_srai_epi32(_mm256_add_epi32(_mm256_madd_epi16(xv, eh[r]), part), 8);
      const __m256i v = _mm256_add_epi32(load8<decltype(full)>(w[r] + i, m), d);
      store8<decltype(full)>(w[r] + i, m, _mm256_min_epi32(_mm256_max_epi32(v, lo), hi));
    }
  };
  i64 i = 0;
  for (; i + 8 <= n; i += 8) chunk(i, std::true_type{}, __m256i{});
  if (i < n) chunk(i, std::false_type{}, first_lanes(n - i));
}

static void mixer_train(i32* const* w, const i64* e, i64 m, const i32* __restrict x, i64 n) {
  in_row_groups<MIXER_ROWS>(m, [&](auto g, i64 j) { mixer_train_rows<decltype(g)::n>(w + j, e + j, x, n); });
}

}  // namespace

SHAZIP_KERNEL_TABLE("avx2")

}  // namespace shazip::kernels::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif  // __x86_64__
