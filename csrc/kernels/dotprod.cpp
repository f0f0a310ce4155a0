// The aarch64 dot-product kernel path (Armv8.2-A NEON with DotProd: SDOT), chosen at run time
// where the CPU has it (Arm since Cortex-A55/A75 and Neoverse N1, Apple since M1, Graviton 2 on).
//
// Compiled for those instructions by the target pragma below, not by a command-line flag, so
// the rest of the module stays baseline Armv8-A; see avx2.cpp and kernels.h for why everything
// here is internal and template-free.
//
// Exactness: SDOT multiplies signed by signed bytes and adds each group of four products into an
// int32 lane without saturation, so the GEMM and the attention dots need no offset or sign trick
// (any int8 values). The mix's weights (0 <= u <= 2**17) go in 7-bit parts, each a signed byte.
// The stage's mixers multiply int32 by int32 into int64 (SMLAL), exact. LayerNorm runs in float64
// lanes (norm128.h); everything else is generic.h's integer code, vectorized by the compiler.
// Integer sums in any order, so the same integers as every other path.
#include "kernels/kernels.h"

#if defined(SHAZIP_KERNELS_NEON)

#if defined(__clang__)
// The target applies to arm_neon.h's functions too: older clang (14, for one) declares the intrinsics of
// an extension only where its feature macro is set, as if the whole file were built for it.
#pragma clang attribute push(__attribute__((target("dotprod"))), apply_to = function)
#if !defined(__ARM_FEATURE_DOTPROD)
#define __ARM_FEATURE_DOTPROD 1
#endif
#include <arm_neon.h>
#else
#include <arm_neon.h>
#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
#endif

namespace shazip::kernels::dotprod {
namespace {

// (no gather: NEON looks tables up one entry at a time)
static void lookup(const i32* __restrict t, const i32* __restrict idx, i32* __restrict out, i64 n) {
  for (i64 j = 0; j < n; ++j) out[j] = t[idx[j]];
}

#include "kernels/generic.h"
#include "kernels/norm128.h"

static inline i64 round_up(i64 x, i64 m) { return (x + m - 1) / m * m; }

// ---- GEMM. Weights packed in panels (panels.h) with K padded to 16: a panel's group of four
// rows is four vectors of four columns' four bytes, and SDOT by lane g of a row's 16 activations
// (k = 4g .. 4g + 3) adds them to four columns' sums. Tiles of four rows by one panel: 16
// accumulators, 4 weight and 4 activation registers.
#include "kernels/panels.h"

constexpr i64 KSTEP = 16;  // activations a load

static i64 packed_bytes(i64 K, i64 N) { return round_up(K, KSTEP) * round_up(N, PANEL); }

static void pack(const i8* w, i64 K, i64 N, u8* out) { pack_panels(w, K, N, round_up(K, KSTEP), out); }

// the rows of a with K padded to 16 by zeros
static i64 gemm_scratch_bytes(i64 rows, i64 K) { return rows * round_up(K, KSTEP); }

// the `valid` first of a panel's 16 columns of row r of c
static inline void store_panel(i32* __restrict c, const int32x4_t* acc, i64 valid) {
  if (valid == PANEL) {
    for (int v = 0; v < 4; ++v) vst1q_s32(c + 4 * v, acc[v]);
    return;
  }
  i32 all[PANEL];
  for (int v = 0; v < 4; ++v) vst1q_s32(all + 4 * v, acc[v]);
  for (i64 n = 0; n < valid; ++n) c[n] = all[n];
}

template <int R>
static inline __attribute__((always_inline)) void tile(const i8* __restrict a, i64 Kp, const i8* __restrict wp,
                                                       i32* __restrict c, i64 N, i64 valid) {
  int32x4_t acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 4; ++v) acc[r][v] = vdupq_n_s32(0);
  for (i64 k = 0; k < Kp; k += KSTEP) {
    int8x16_t av[R];
    for (int r = 0; r < R; ++r) av[r] = vld1q_s8(a + r * Kp + k);
    const i8* wk = wp + k * PANEL;  // the panel's groups 4g .. 4g + 3 of rows k ..
#define SHAZIP_GROUP(g)                                                                   \
  {                                                                                        \
    const int8x16_t w0 = vld1q_s8(wk + 64 * g), w1 = vld1q_s8(wk + 64 * g + 16);          \
    const int8x16_t w2 = vld1q_s8(wk + 64 * g + 32), w3 = vld1q_s8(wk + 64 * g + 48);     \
    for (int r = 0; r < R; ++r) {                                                          \
      acc[r][0] = vdotq_laneq_s32(acc[r][0], w0, av[r], g);                               \
      acc[r][1] = vdotq_laneq_s32(acc[r][1], w1, av[r], g);                               \
      acc[r][2] = vdotq_laneq_s32(acc[r][2], w2, av[r], g);                               \
      acc[r][3] = vdotq_laneq_s32(acc[r][3], w3, av[r], g);                               \
    }                                                                                      \
  }
    SHAZIP_GROUP(0)
    SHAZIP_GROUP(1)
    SHAZIP_GROUP(2)
    SHAZIP_GROUP(3)
#undef SHAZIP_GROUP
  }
  for (int r = 0; r < R; ++r) store_panel(c + r * N, acc[r], valid);
}

static void gemm(const i8* a, i64 rows, i64 K, i64 N, const u8* packed, i32* c, u8* scratch) {
  const i64 Kp = round_up(K, KSTEP), panels = round_up(N, PANEL) / PANEL;
  i8* ap = reinterpret_cast<i8*>(scratch);
  for (i64 r = 0; r < rows; ++r) {
    for (i64 k = 0; k < K; ++k) ap[r * Kp + k] = a[r * K + k];
    for (i64 k = K; k < Kp; ++k) ap[r * Kp + k] = 0;
  }
  const i8* w = reinterpret_cast<const i8*>(packed);
  for (i64 p = 0; p < panels; ++p) {  // a panel's weights stay in L1 while the rows pass
    const i64 n0 = p * PANEL, valid = min64(PANEL, N - n0);
    const i8* wp = w + p * Kp * PANEL;
    i64 r = 0;
    for (; r + 4 <= rows; r += 4) tile<4>(ap + r * Kp, Kp, wp, c + r * N + n0, N, valid);
    switch (rows - r) {
      case 3: tile<3>(ap + r * Kp, Kp, wp, c + r * N + n0, N, valid); break;
      case 2: tile<2>(ap + r * Kp, Kp, wp, c + r * N + n0, N, valid); break;
      case 1: tile<1>(ap + r * Kp, Kp, wp, c + r * N + n0, N, valid); break;
      default: break;
    }
  }
}

// ---- attention dots, four keys at a time: SDOT of 16 bytes of a key and of q, then the four
// keys' lanes added pairwise into one vector of their four sums. The last d % 16 entries one by one.
static void dots(const i8* keys, i64 n, i64 d, const i8* q, i32* out) {
  const i64 dv = d / 16 * 16;
  const auto tail = [&](const i8* k) {
    i32 s = 0;
    for (i64 i = dv; i < d; ++i) s += i32(k[i]) * i32(q[i]);
    return s;
  };
  i64 j = 0;
  for (; j + 4 <= n; j += 4) {
    const i8* k0 = keys + j * d;
    const i8* k1 = k0 + d;
    const i8* k2 = k1 + d;
    const i8* k3 = k2 + d;
    int32x4_t a0 = vdupq_n_s32(0), a1 = a0, a2 = a0, a3 = a0;
    for (i64 i = 0; i < dv; i += 16) {
      const int8x16_t qv = vld1q_s8(q + i);
      a0 = vdotq_s32(a0, vld1q_s8(k0 + i), qv);
      a1 = vdotq_s32(a1, vld1q_s8(k1 + i), qv);
      a2 = vdotq_s32(a2, vld1q_s8(k2 + i), qv);
      a3 = vdotq_s32(a3, vld1q_s8(k3 + i), qv);
    }
    int32x4_t s = vpaddq_s32(vpaddq_s32(a0, a1), vpaddq_s32(a2, a3));
    if (dv < d) {
      const i32 t[4] = {tail(k0), tail(k1), tail(k2), tail(k3)};
      s = vaddq_s32(s, vld1q_s32(t));
    }
    vst1q_s32(out + j, s);
  }
  for (; j < n; ++j) {
    const i8* k0 = keys + j * d;
    int32x4_t a0 = vdupq_n_s32(0);
    for (i64 i = 0; i < dv; i += 16) a0 = vdotq_s32(a0, vld1q_s8(k0 + i), vld1q_s8(q + i));
    out[j] = vaddvq_s32(a0) + tail(k0);
  }
}

// ---- attention mix: keys with weight in groups of four, whose 16-byte chunks are interleaved
// (two rounds of zips) so that each int32 lane holds one dimension of the four keys; SDOT with
// the four weights' bytes then adds u_j k_j of the four keys to each lane. The weights go in 7-bit
// parts, u = p0 + 2**7 p1 + 2**14 p2 (u <= 2**17: p2 <= 8), each a signed byte, summed apart and
// combined at the end: each part's sum stays under 2**31 (|k| <= 127: quantized rows, and n < 2**17
// keys) and their combination is the exact sum (|sum u k| <= 2**24). A group whose four weights are
// zero is skipped; the last d % 16 dimensions are summed one by one.
struct Group {
  const i8* r[4];
  i32 part[3];  // the four weights' 7-bit parts, a byte each
};

static void mix(const i8* keys, i64 n, const i32* u, const i8* extra, i32 u_extra, i64 d, i32* out, u8* scratch) {
  Group* groups = reinterpret_cast<Group*>(scratch);
  i64 ng = 0;
  weighted_key_groups(keys, n, u, extra, u_extra, d, [&](const i8* const* rows, const i32* w) {
    Group& g = groups[ng++];
    g = Group{};
    for (int t = 0; t < 4; ++t) {
      g.r[t] = rows[t];
      for (int p = 0; p < 3; ++p) g.part[p] |= i32(u32((w[t] >> (7 * p)) & 127) << (8 * t));
    }
  });
  i64 c = 0;
  for (; c + 16 <= d; c += 16) {
    int32x4_t x[3][4];
    for (int p = 0; p < 3; ++p)
      for (int m = 0; m < 4; ++m) x[p][m] = vdupq_n_s32(0);
    for (i64 g = 0; g < ng; ++g) {
      const Group& gr = groups[g];
      const int8x16_t k0 = vld1q_s8(gr.r[0] + c), k1 = vld1q_s8(gr.r[1] + c);
      const int8x16_t k2 = vld1q_s8(gr.r[2] + c), k3 = vld1q_s8(gr.r[3] + c);
      const int16x8_t a = vreinterpretq_s16_s8(vzip1q_s8(k0, k1)), b = vreinterpretq_s16_s8(vzip2q_s8(k0, k1));
      const int16x8_t e = vreinterpretq_s16_s8(vzip1q_s8(k2, k3)), f = vreinterpretq_s16_s8(vzip2q_s8(k2, k3));
      // t[m], int32 lane i: dimension c + 4 m + i of keys 0..3
      const int8x16_t t[4] = {vreinterpretq_s8_s16(vzip1q_s16(a, e)), vreinterpretq_s8_s16(vzip2q_s16(a, e)),
                              vreinterpretq_s8_s16(vzip1q_s16(b, f)), vreinterpretq_s8_s16(vzip2q_s16(b, f))};
      for (int p = 0; p < 3; ++p) {
        if (p > 0 && gr.part[p] == 0) continue;
        const int8x16_t wv = vreinterpretq_s8_s32(vdupq_n_s32(gr.part[p]));
        for (int m = 0; m < 4; ++m) x[p][m] = vdotq_s32(x[p][m], t[m], wv);
      }
    }
    for (int m = 0; m < 4; ++m)
      vst1q_s32(out + c + 4 * m, vaddq_s32(x[0][m], vaddq_s32(vshlq_n_s32(x[1][m], 7), vshlq_n_s32(x[2][m], 14))));
  }
  for (; c < d; ++c) {
    i32 s = u_extra * i32(extra[c]);
    for (i64 j = 0; j < n; ++j) s += u[j] * i32(keys[j * d + c]);
    out[c] = s;
  }
}

// ---- the stage's mixers, four rows a pass over the inputs (independent chains, x loaded once).
// Dot: SMLAL multiplies int32 lanes into int64 ones, exact whatever the order. Training: generic.h's
// formula in int32 lanes (its comment says why no term overflows).
constexpr int MIXER_ROWS = 4;

// sums[r] = sum of w[r][i] x_i, r < rows
template <int rows>
static inline __attribute__((always_inline)) void mixer_dot_rows(const i32* const* w, const i32* x, i64 n, i64* sums) {
  int64x2_t lo[rows], hi[rows];
  for (int r = 0; r < rows; ++r) lo[r] = hi[r] = vdupq_n_s64(0);
  i64 i = 0;
  for (; i + 4 <= n; i += 4) {
    const int32x4_t xv = vld1q_s32(x + i);
    for (int r = 0; r < rows; ++r) {
      const int32x4_t wv = vld1q_s32(w[r] + i);
      lo[r] = vmlal_s32(lo[r], vget_low_s32(wv), vget_low_s32(xv));
      hi[r] = vmlal_high_s32(hi[r], wv, xv);
    }
  }
  for (int r = 0; r < rows; ++r) {
    i64 s = vaddvq_s64(vaddq_s64(lo[r], hi[r]));
    for (i64 t = i; t < n; ++t) s += i64(w[r][t]) * x[t];
    sums[r] = s;
  }
}

static void mixer_dot(const i32* const* w, i64 m, const i32* __restrict x, i64 n, i64* sums) {
  in_row_groups<MIXER_ROWS>(m, [&](auto g, i64 j) { mixer_dot_rows<decltype(g)::n>(w + j, x, n, sums + j); });
}

// rows r < rows learn their errors e[r]
template <int rows>
static inline __attribute__((always_inline)) void mixer_train_rows(i32* const* w, const i64* e, const i32* x, i64 n) {
  const int32x4_t half = vdupq_n_s32(1 << 19), lo = vdupq_n_s32(-(1 << 24)), hi = vdupq_n_s32(1 << 24);
  int32x4_t eh[rows], el[rows];
  for (int r = 0; r < rows; ++r) eh[r] = vdupq_n_s32(i32(e[r] >> 12)), el[r] = vdupq_n_s32(i32(e[r] & 4095));
  i64 i = 0;
  for (; i + 4 <= n; i += 4) {
    const int32x4_t xv = vld1q_s32(x + i);
    for (int r = 0; r < rows; ++r) {
      const int32x4_t part = vshrq_n_s32(vmlaq_s32(half, xv, el[r]), 12);
      const int32x4_t d = vshrq_n_s32(vmlaq_s32(part, xv, eh[r]), 8);
      vst1q_s32(w[r] + i, vminq_s32(vmaxq_s32(vaddq_s32(vld1q_s32(w[r] + i), d), lo), hi));
    }
  }
  if (i < n) {
    i32* tails[rows];
    for (int r = 0; r < rows; ++r) tails[r] = w[r] + i;
    mixer_train_generic(tails, e, rows, x + i, n - i);
  }
}

static void mixer_train(i32* const* w, const i64* e, i64 m, const i32* __restrict x, i64 n) {
  in_row_groups<MIXER_ROWS>(m, [&](auto g, i64 j) { mixer_train_rows<decltype(g)::n>(w + j, e + j, x, n); });
}

constexpr auto quantize_row = quantize_row_generic;

}  // namespace

SHAZIP_KERNEL_TABLE("dotprod")

}  // namespace shazip::kernels::dotprod

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif  // SHAZIP_KERNELS_NEON
