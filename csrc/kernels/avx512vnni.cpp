// The AVX-512 VNNI kernel path (AVX-512 F/BW/VL/DQ + VNNI), chosen at run time where the CPU
// has them (Intel since Cascade Lake, AMD since Zen 4).
//
// Compiled for those instructions by the target pragma below, not by a command-line flag; see
// avx2.cpp and kernels.h for why everything here is internal and template-free.
//
// Exactness: vpdpbusd multiplies unsigned by signed bytes and adds groups of four products into
// int32 without saturation. Activations are offset by 128 (a ^ 0x80 = a + 128 as u8) and the
// offset taken off again: sum (a + 128) w = sum a w + 128 sum w, where 128 sum w is computed
// once per weight column (GEMM) or per query (dots). The mix takes its weights (at most 2**17,
// non-negative) as unsigned bytes, the keys as the signed side. Integer sums in any order, so
// the same integers as the portable path.
//
// SHAZIP_EMULATE_AVX512 (never set by the build; see emulate_avx512.h) compiles this file on
// emulated intrinsics, without the target pragma, and reports the path available: a check of
// its integers on a CPU without AVX-512.
#include "kernels/kernels.h"

#if defined(__x86_64__) || defined(SHAZIP_EMULATE_AVX512)

#if defined(SHAZIP_EMULATE_AVX512)
#include "kernels/emulate_avx512.h"
#else
#include <immintrin.h>
#if defined(__clang__)
#pragma clang attribute push(                                                                               \
    __attribute__((target("avx2,fma,bmi,bmi2,popcnt,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,bmi,bmi2,popcnt,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,prefer-vector-width=512")
#endif
#endif

namespace shazip::kernels::avx512vnni {
namespace {

static void lookup(const i32* __restrict t, const i32* __restrict idx, i32* __restrict out, i64 n) {
  i64 j = 0;
#if !defined(SHAZIP_EMULATE_AVX512)
  for (; j + 16 <= n; j += 16) {
    const __m512i ix = _mm512_loadu_si512(idx + j);
    _mm512_storeu_si512(out + j, _mm512_i32gather_epi32(ix, t, 4));
  }
#endif
  for (; j < n; ++j) out[j] = t[idx[j]];
}

#include "kernels/generic.h"
#include "kernels/norm512.h"

static inline i64 round_up(i64 x, i64 m) { return (x + m - 1) / m * m; }
static inline __mmask16 first_lanes(i64 n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1); }

// quant.quantize_rows for one row (generic.h's quantize_row_generic), in float64 lanes: with
// |y| <= e <= R_MAX, a = 254 y + e is below 2**29, exact in float64 (the multiply-add rounds once,
// and the exact result is representable); a / 2e estimated by a multiply is within one of its
// floor, which the remainder a - t 2e (exact) corrects. Eight entries a round, so d % 8 == 0.
static i64 quantize_row(const i64* __restrict y, i64 d, i8* __restrict q) {
  if (d % 8 != 0) return quantize_row_generic(y, d, q);
  __m512i m = _mm512_set1_epi64(1);
  for (i64 i = 0; i < d; i += 8) m = _mm512_max_epi64(m, _mm512_abs_epi64(_mm512_loadu_si512(y + i)));
  const i64 e = _mm512_reduce_max_epi64(m);
  const double b = static_cast<double>(2 * e);
  const __m512d bv = _mm512_set1_pd(b), inv = _mm512_set1_pd(1.0 / b), ev = _mm512_set1_pd(static_cast<double>(e));
  const __m512d k254 = _mm512_set1_pd(254.0), one = _mm512_set1_pd(1.0), zero = _mm512_setzero_pd();
  for (i64 i = 0; i < d; i += 8) {
    const __m512d a = _mm512_fmadd_pd(_mm512_cvtepi64_pd(_mm512_loadu_si512(y + i)), k254, ev);
    __m512d t = _mm512_roundscale_pd(_mm512_mul_pd(a, inv), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m512d r = _mm512_fnmadd_pd(t, bv, a);
    t = _mm512_mask_sub_pd(t, _mm512_cmp_pd_mask(r, zero, _CMP_LT_OQ), t, one);
    t = _mm512_mask_add_pd(t, _mm512_cmp_pd_mask(r, bv, _CMP_GE_OQ), t, one);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi64_epi8(_mm512_cvtpd_epi64(t)));
  }
  return e;
}

static inline i32 load_i32(const u8* p) {
  i32 v;
  __builtin_memcpy(&v, p, 4);
  return v;
}

// ---- GEMM. Weights packed in panels (panels.h) with K padded to 4; vpdpbusd with a broadcast
// group of four offset activations adds a panel's 16 columns' partial sums. After the panels,
// int32 [Np]: 128 * (column sum of w), the offset's share.
#include "kernels/panels.h"

constexpr int ROWS = 8;  // rows per tile, two panels wide: 16 accumulators

static i64 packed_bytes(i64 K, i64 N) { return round_up(K, 4) * round_up(N, PANEL) + round_up(N, PANEL) * 4; }

static void pack(const i8* w, i64 K, i64 N, u8* out) {
  const i64 KQ = round_up(K, 4) / 4, Np = round_up(N, PANEL);
  pack_panels(w, K, N, 4 * KQ, out);
  i32* cs = reinterpret_cast<i32*>(out + KQ * 4 * Np);
  for (i64 n = 0; n < Np; ++n) {
    i32 s = 0;
    for (i64 k = 0; n < N && k < K; ++k) s += w[k * N + n];
    cs[n] = 128 * s;
  }
}

// the rows of a offset to u8 (a ^ 0x80), K padded to 4 (with offset zeros)
static i64 gemm_scratch_bytes(i64 rows, i64 K) { return rows * round_up(K, 4); }

// Accumulators are named variables, not an array: GCC 12 copies arrays of vpdpbusd
// accumulators between registers (and the stack) on every iteration.
#define SHAZIP_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

template <int R, int P>
static inline void tile(const u8* __restrict au, i64 Kp, const i8* __restrict wp, i64 panel_bytes,
                        const i32* __restrict cs, i32* __restrict c, i64 N, i64 n0) {
#define SHAZIP_DECL(r) __m512i x##r = _mm512_setzero_si512(), y##r = x##r;
  SHAZIP_ROWS(SHAZIP_DECL)
#undef SHAZIP_DECL
  const i64 KQ = Kp / 4;
  for (i64 kq = 0; kq < KQ; ++kq) {
    const __m512i w0 = _mm512_load_si512(wp + kq * 64);
    const __m512i w1 = P > 1 ? _mm512_load_si512(wp + panel_bytes + kq * 64) : w0;
#define SHAZIP_ROW(r)                                                   \
  if constexpr (R > r) {                                                \
    const __m512i b = _mm512_set1_epi32(load_i32(au + r * Kp + 4 * kq)); \
    x##r = _mm512_dpbusd_epi32(x##r, b, w0);                            \
    if constexpr (P > 1) y##r = _mm512_dpbusd_epi32(y##r, b, w1);       \
  }
    SHAZIP_ROWS(SHAZIP_ROW)
#undef SHAZIP_ROW
  }
  for (int p = 0; p < P; ++p) {
    const i64 n = n0 + p * PANEL;
    const __m512i off = _mm512_load_si512(cs + n);
    const i64 valid = N - n < PANEL ? N - n : PANEL;
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
#define SHAZIP_STORE(r) \
  if constexpr (R > r) _mm512_mask_storeu_epi32(c + r * N + n, mask, _mm512_sub_epi32(p == 0 ? x##r : y##r, off));
    SHAZIP_ROWS(SHAZIP_STORE)
#undef SHAZIP_STORE
  }
}
#undef SHAZIP_ROWS

template <int P>
static inline void tiles(const u8* au, i64 rows, i64 Kp, const i8* wp, i64 panel_bytes, const i32* cs, i32* c,
                         i64 N, i64 n0) {
  i64 r = 0;
  for (; r + ROWS <= rows; r += ROWS) tile<ROWS, P>(au + r * Kp, Kp, wp, panel_bytes, cs, c + r * N, N, n0);
  const u8* a = au + r * Kp;
  i32* cr = c + r * N;
  switch (rows - r) {
    case 7: tile<7, P>(a, Kp, wp, panel_bytes, cs, cr, N, n0); break;
    case 6: tile<6, P>(a, Kp, wp, panel_bytes, cs, cr, N, n0); break;
    case 5: tile<5, P>(a, Kp, wp, panel_bytes, cs, cr, N, n0); break;
    case 4: tile<4, P>(a, Kp, wp, panel_bytes, cs, cr, N, n0); break;
    case 3: tile<3, P>(a, Kp, wp, panel_bytes, cs, cr, N, n0); break;
    case 2: tile<2, P>(a, Kp, wp, panel_bytes, cs, cr, N, n0); break;
    case 1: tile<1, P>(a, Kp, wp, panel_bytes, cs, cr, N, n0); break;
    default: break;
  }
}

static void gemm(const i8* a, i64 rows, i64 K, i64 N, const u8* packed, i32* c, u8* scratch) {
  const i64 Kp = round_up(K, 4), Np = round_up(N, PANEL), panels = Np / PANEL, panel_bytes = Kp * PANEL;
  u8* au = scratch;
  for (i64 r = 0; r < rows; ++r) {
    for (i64 k = 0; k < K; ++k) au[r * Kp + k] = static_cast<u8>(a[r * K + k]) ^ 0x80;
    for (i64 k = K; k < Kp; ++k) au[r * Kp + k] = 0x80;
  }
  const i8* w = reinterpret_cast<const i8*>(packed);
  const i32* cs = reinterpret_cast<const i32*>(packed + Kp * Np);
  i64 p = 0;
  for (; p + 2 <= panels; p += 2) tiles<2>(au, rows, Kp, w + p * panel_bytes, panel_bytes, cs, c, N, p * PANEL);
  if (p < panels) tiles<1>(au, rows, Kp, w + p * panel_bytes, panel_bytes, cs, c, N, p * PANEL);
}

// ---- attention dots: 16 keys at a time (independent accumulator chains, so the loads
// overlap) through vpdpbusd on offset keys (k ^ 0x80 = k + 128), 128 sum(q) taken off again;
// the 16 accumulators are summed across in one transpose tree. A d that is not a multiple of
// 64 ends with masked loads (masked bytes are zero in q, so they add nothing).
static inline __m512i sum16(const __m512i* v) {  // r[k] = sum of the 16 entries of v[k]
  __m512i w[8], x[4];
  for (int i = 0; i < 8; ++i)
    w[i] = _mm512_add_epi32(_mm512_shuffle_i64x2(v[2 * i], v[2 * i + 1], 0x44),
                            _mm512_shuffle_i64x2(v[2 * i], v[2 * i + 1], 0xEE));
  for (int i = 0; i < 4; ++i)  // 128-bit lane L of x[i]: four partial sums of v[4i + L]
    x[i] = _mm512_add_epi32(_mm512_shuffle_i64x2(w[2 * i], w[2 * i + 1], 0x88),
                            _mm512_shuffle_i64x2(w[2 * i], w[2 * i + 1], 0xDD));
  const __m512i y0 = _mm512_add_epi32(_mm512_unpacklo_epi32(x[0], x[1]), _mm512_unpackhi_epi32(x[0], x[1]));
  const __m512i y1 = _mm512_add_epi32(_mm512_unpacklo_epi32(x[2], x[3]), _mm512_unpackhi_epi32(x[2], x[3]));
  const __m512i z = _mm512_add_epi32(_mm512_unpacklo_epi64(y0, y1), _mm512_unpackhi_epi64(y0, y1));
  // z[4L + m] = sum of v[4m + L]
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_epi32(order, z);
}

static void dots(const i8* keys, i64 n, i64 d, const i8* q, i32* out) {
  i32 q_sum = 0;
  for (i64 i = 0; i < d; ++i) q_sum += q[i];
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i offset = _mm512_set1_epi32(128 * q_sum);
  const i64 dv = d / 64 * 64;
  const __mmask64 tail = d > dv ? (~0ULL >> (64 - (d - dv))) : 0;
  for (i64 j0 = 0; j0 < n; j0 += 16) {
    const i64 m = n - j0 < 16 ? n - j0 : 16;
    const i8* k[16];
    for (i64 t = 0; t < 16; ++t) k[t] = keys + (j0 + (t < m ? t : m - 1)) * d;
#define SHAZIP_KEYS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define SHAZIP_DECL(t) __m512i a##t = _mm512_setzero_si512();
    SHAZIP_KEYS(SHAZIP_DECL)
#undef SHAZIP_DECL
#define SHAZIP_DOT(t) a##t = _mm512_dpbusd_epi32(a##t, _mm512_xor_si512(_mm512_loadu_si512(k[t] + c), flip), qv);
    for (i64 c = 0; c < dv; c += 64) {
      const __m512i qv = _mm512_loadu_si512(q + c);
      SHAZIP_KEYS(SHAZIP_DOT)
    }
#undef SHAZIP_DOT
#define SHAZIP_DOT(t) a##t = _mm512_dpbusd_epi32(a##t, _mm512_xor_si512(_mm512_maskz_loadu_epi8(tail, k[t] + dv), flip), qv);
    if (tail) {
      const __m512i qv = _mm512_maskz_loadu_epi8(tail, q + dv);
      SHAZIP_KEYS(SHAZIP_DOT)
    }
#undef SHAZIP_DOT
#define SHAZIP_NAME(t) a##t,
    const __m512i acc[16] = {SHAZIP_KEYS(SHAZIP_NAME)};
#undef SHAZIP_NAME
#undef SHAZIP_KEYS
    const __m512i r = _mm512_sub_epi32(sum16(acc), offset);
    _mm512_mask_storeu_epi32(out + j0, static_cast<__mmask16>((1u << m) - 1), r);
  }
}

// ---- attention mix: keys with weight in groups of four, whose 64-byte chunks are interleaved
// (two rounds of vpunpck) so that each int32 lane holds one dimension of the four keys; then
// vpdpbusd adds four products u_j k_j a lane, u taken as unsigned bytes: u = lo + 256 mid +
// 65536 hi, lo and mid < 256 summed apart (each sum stays under 2**31: sum u <= 2**17) and
// combined at the end; hi (u >= 65536: at most two keys, seldom any) added by itself. A group
// whose four weights are zero is skipped, as the last chunk's missing bytes are (masked loads).
struct Group {
  const i8* r[4];
  u32 lo, mid;  // the four weights' low and middle bytes
};

static void mix(const i8* keys, i64 n, const i32* u, const i8* extra, i32 u_extra, i64 d, i32* out, u8* scratch) {
  Group* groups = reinterpret_cast<Group*>(scratch);
  i64 ng = 0, nbig = 0;
  const i8* big_row[2];
  i32 big_hi[2];
  weighted_key_groups(keys, n, u, extra, u_extra, d, [&](const i8* const* rows, const i32* w) {
    Group& g = groups[ng++];
    g = Group{};
    for (int t = 0; t < 4; ++t) {
      g.r[t] = rows[t];
      g.lo |= u32(w[t] & 255) << (8 * t);
      g.mid |= u32((w[t] >> 8) & 255) << (8 * t);
      if (w[t] >> 16) {
        big_row[nbig] = rows[t];
        big_hi[nbig++] = w[t] >> 16;
      }
    }
  });
  for (i64 c = 0; c < d; c += 64) {
    const i64 valid = d - c < 64 ? d - c : 64;
    const __mmask64 mask = valid == 64 ? ~__mmask64(0) : (~__mmask64(0) >> (64 - valid));
    __m512i l0 = _mm512_setzero_si512(), l1 = l0, l2 = l0, l3 = l0, m0 = l0, m1 = l0, m2 = l0, m3 = l0;
    for (i64 g = 0; g < ng; ++g) {
      const Group& gr = groups[g];
      const __m512i k0 = _mm512_maskz_loadu_epi8(mask, gr.r[0] + c), k1 = _mm512_maskz_loadu_epi8(mask, gr.r[1] + c);
      const __m512i k2 = _mm512_maskz_loadu_epi8(mask, gr.r[2] + c), k3 = _mm512_maskz_loadu_epi8(mask, gr.r[3] + c);
      const __m512i a = _mm512_unpacklo_epi8(k0, k1), b = _mm512_unpackhi_epi8(k0, k1);
      const __m512i e = _mm512_unpacklo_epi8(k2, k3), f = _mm512_unpackhi_epi8(k2, k3);
      // t_m, 128-bit lane L, int32 p: dimension c + 16 L + 4 m + p of keys 0..3
      const __m512i t0 = _mm512_unpacklo_epi16(a, e), t1 = _mm512_unpackhi_epi16(a, e);
      const __m512i t2 = _mm512_unpacklo_epi16(b, f), t3 = _mm512_unpackhi_epi16(b, f);
      const __m512i lo = _mm512_set1_epi32(i32(gr.lo)), mid = _mm512_set1_epi32(i32(gr.mid));
      l0 = _mm512_dpbusd_epi32(l0, lo, t0);
      l1 = _mm512_dpbusd_epi32(l1, lo, t1);
      l2 = _mm512_dpbusd_epi32(l2, lo, t2);
      l3 = _mm512_dpbusd_epi32(l3, lo, t3);
      m0 = _mm512_dpbusd_epi32(m0, mid, t0);
      m1 = _mm512_dpbusd_epi32(m1, mid, t1);
      m2 = _mm512_dpbusd_epi32(m2, mid, t2);
      m3 = _mm512_dpbusd_epi32(m3, mid, t3);
    }
    const __m512i v0 = _mm512_add_epi32(l0, _mm512_slli_epi32(m0, 8)), v1 = _mm512_add_epi32(l1, _mm512_slli_epi32(m1, 8));
    const __m512i v2 = _mm512_add_epi32(l2, _mm512_slli_epi32(m2, 8)), v3 = _mm512_add_epi32(l3, _mm512_slli_epi32(m3, 8));
    // 128-bit lanes transposed: output vector L is lane L of v0, v1, v2, v3 (dimensions c + 16 L ..)
    const __m512i s0 = _mm512_shuffle_i64x2(v0, v1, 0x44), s1 = _mm512_shuffle_i64x2(v2, v3, 0x44);
    const __m512i s2 = _mm512_shuffle_i64x2(v0, v1, 0xEE), s3 = _mm512_shuffle_i64x2(v2, v3, 0xEE);
    const __m512i o[4] = {_mm512_shuffle_i64x2(s0, s1, 0x88), _mm512_shuffle_i64x2(s0, s1, 0xDD),
                          _mm512_shuffle_i64x2(s2, s3, 0x88), _mm512_shuffle_i64x2(s2, s3, 0xDD)};
    for (i64 L = 0; L < 4 && 16 * L < valid; ++L)
      _mm512_mask_storeu_epi32(out + c + 16 * L, first_lanes(valid - 16 * L), o[L]);
  }
  for (i64 t = 0; t < nbig; ++t)
    for (i64 i = 0; i < d; ++i) out[i] += (big_hi[t] << 16) * i32(big_row[t][i]);
}

// ---- the stage's mixers on int16 halves. The inputs (|x| <= 4095) are int16s; a weight (|w| <=
// 2**24) is wh 2**12 + wl with wh = w >> 12 (|wh| <= 2**12) and wl = w & 4095, both int16s.
// vpdpwssd on x's int32 lanes with their upper halves cleared adds x wh (or x wl) exactly to an
// int32 lane. Dot: a lane sums at most 64 such products (< 2**30) before the lanes are added in
// int64. Training: x el + 2**19 and then x eh + that >> 12 in one vpdpwssd each (generic.h's formula).
// Rows go four at a time through one pass over the inputs: independent chains, x loaded once.
// (GCC 12 warns of the undefined vector that its own _mm512_srai_epi32 and min/max start from.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
constexpr int MIXER_ROWS = 4;  // rows a pass: 8 accumulators

// sums[r] += sum of w[r][i] x_i for i in [c, end) (end - c <= 1024), r < rows
template <int rows>
static inline __attribute__((always_inline)) void mixer_dot_rows(const i32* const* w, const i32* x, i64 c, i64 end,
                                                                 i64* sums) {
  const __m512i low16 = _mm512_set1_epi32(0xFFFF), low12 = _mm512_set1_epi32(4095);
  __m512i hi[rows], lo[rows];
  for (int r = 0; r < rows; ++r) hi[r] = lo[r] = _mm512_setzero_si512();
  for (i64 i = c; i < end; i += 16) {
    const __mmask16 m = first_lanes(end - i);
    const __m512i xv = _mm512_and_si512(_mm512_maskz_loadu_epi32(m, x + i), low16);
    for (int r = 0; r < rows; ++r) {
      const __m512i wv = _mm512_maskz_loadu_epi32(m, w[r] + i);
      hi[r] = _mm512_dpwssd_epi32(hi[r], xv, _mm512_srai_epi32(wv, 12));
      lo[r] = _mm512_dpwssd_epi32(lo[r], xv, _mm512_and_si512(wv, low12));
    }
  }
  for (int r = 0; r < rows; ++r) {
    const __m512i hi64 = _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_castsi512_si256(hi[r])),
                                          _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(hi[r], 1)));
    const __m512i lo64 = _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_castsi512_si256(lo[r])),
                                          _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(lo[r], 1)));
    sums[r] += _mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_slli_epi64(hi64, 12), lo64));
  }
}

static void mixer_dot(const i32* const* w, i64 m, const i32* __restrict x, i64 n, i64* sums) {
  for (i64 j = 0; j < m; ++j) sums[j] = 0;
  for (i64 c = 0; c < n; c += 1024) {
    const i64 end = min64(n, c + 1024);
    in_row_groups<MIXER_ROWS>(m, [&](auto g, i64 j) { mixer_dot_rows<decltype(g)::n>(w + j, x, c, end, sums + j); });
  }
}

// rows r < rows learn their errors e[r]
template <int rows>
static inline __attribute__((always_inline)) void mixer_train_rows(i32* const* w, const i64* e, const i32* x, i64 n) {
  const __m512i low16 = _mm512_set1_epi32(0xFFFF), half = _mm512_set1_epi32(1 << 19);
  const __m512i lo = _mm512_set1_epi32(-(1 << 24)), hi = _mm512_set1_epi32(1 << 24);
  __m512i eh[rows], el[rows];
  for (int r = 0; r < rows; ++r)
    eh[r] = _mm512_set1_epi32(i32(e[r] >> 12) & 0xFFFF), el[r] = _mm512_set1_epi32(i32(e[r] & 4095));
  for (i64 i = 0; i < n; i += 16) {
    const __mmask16 m = first_lanes(n - i);
    const __m512i xv = _mm512_and_si512(_mm512_maskz_loadu_epi32(m, x + i), low16);
    for (int r = 0; r < rows; ++r) {
      const __m512i part = _mm512_srai_epi32(_mm512_dpwssd_epi32(half, xv, el[r]), 12);
      const __m512i d = _mm512_srai_epi32(_mm512_dpwssd_epi32(part, xv, eh[r]), 8);
      const __m512i v = _mm512_add_epi32(_mm512_maskz_loadu_epi32(m, w[r] + i), d);
      _mm512_mask_storeu_epi32(w[r] + i, m, _mm512_min_epi32(_mm512_max_epi32(v, lo), hi));
    }
  }
}

static void mixer_train(i32* const* w, const i64* e, i64 m, const i32* __restrict x, i64 n) {
  in_row_groups<MIXER_ROWS>(m, [&](auto g, i64 j) { mixer_train_rows<decltype(g)::n>(w + j, e + j, x, n); });
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

SHAZIP_KERNEL_TABLE("avx512vnni")

}  // namespace shazip::kernels::avx512vnni

#if !defined(SHAZIP_EMULATE_AVX512)
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

#endif  // __x86_64__ || SHAZIP_EMULATE_AVX512
