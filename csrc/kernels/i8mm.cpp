// The aarch64 I8MM kernel path: dotprod's kernels, with the int8 matmul on SMMLA (Armv8.6-A's
// int8 matrix multiply, optional from Armv8.2-A: Neoverse V1/N2/V2, Cortex-A710/X2 on, Apple M2
// on, Graviton 3 on). Chosen at run time where the CPU has it.
//
// Why: SDOT does 16 multiply-adds an instruction, SMMLA 32 (a 2x8 by 8x2 int8 product into a 2x2
// int32 block), and a tile of four row pairs by four column pairs reads each loaded vector four
// times.
//
// Exactness: SMMLA multiplies signed by signed bytes and adds them into int32 without
// saturation; integer sums in any order, so the same integers as every other path.
//
// Compiled for those instructions by the target pragma below (see avx2.cpp and kernels.h for why
// the kernels are internal and template-free); the table at the end is built outside it.
#include "kernels/kernels.h"

#if defined(SHAZIP_KERNELS_I8MM)

#if defined(__clang__)
// The target applies to arm_neon.h's functions too: older clang (14, for one) declares the intrinsics of
// an extension only where its feature macro is set, as if the whole file were built for it.
#pragma clang attribute push(__attribute__((target("dotprod,i8mm"))), apply_to = function)
#if !defined(__ARM_FEATURE_MATMUL_INT8)
#define __ARM_FEATURE_DOTPROD 1
#define __ARM_FEATURE_MATMUL_INT8 1
#endif
#include <arm_neon.h>
#else
#include <arm_neon.h>
#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod+i8mm")
#endif

namespace shazip::kernels::i8mm {
namespace {

// SMMLA's operands: a row pair's (or a column pair's) eight bytes of K side by side, 16 bytes.
// Weights: panels of 8 columns (4 pairs) with K padded to 8; in a panel, for each chunk of eight
// rows, each column pair's 2 x 8 bytes: 64 bytes. Activations: rows padded to even, each row pair's
// chunks of eight in the same way.
constexpr i64 PANEL = 8, KC = 8;

static inline i64 round_up(i64 x, i64 m) { return (x + m - 1) / m * m; }

static i64 packed_bytes(i64 K, i64 N) { return round_up(K, KC) * round_up(N, PANEL); }

// a's rows as pairs, each pair's chunks of eight side by side (16 bytes: SMMLA's first operand);
// a last odd row's partner and K past its end zero
static void pack_pairs(const i8* a, i64 rows, i64 K, i8* out) {
  const i64 chunks = round_up(K, KC) / KC;
  for (i64 r = 0; r < round_up(rows, 2); ++r)
    for (i64 k = 0; k < chunks * KC; ++k)
      out[((r / 2 * chunks + k / KC) * 2 + r % 2) * KC + k % KC] = (r < rows && k < K) ? a[r * K + k] : 0;
}

static void pack(const i8* w, i64 K, i64 N, u8* out) {
  const i64 chunks = round_up(K, KC) / KC, Np = round_up(N, PANEL);
  i8* o = reinterpret_cast<i8*>(out);
  for (i64 p = 0; p < Np / PANEL; ++p)
    for (i64 kc = 0; kc < chunks; ++kc)
      for (i64 c = 0; c < PANEL; ++c)
        for (i64 t = 0; t < KC; ++t) {
          const i64 n = p * PANEL + c, k = kc * KC + t;
          o[((p * chunks + kc) * PANEL + c) * KC + t] = (n < N && k < K) ? w[k * N + n] : 0;
        }
}

static i64 gemm_scratch_bytes(i64 rows, i64 K) { return round_up(rows, 2) * round_up(K, KC); }

// c's rows r0, r0 + 1 (the second only if `both`), `valid` of the panel's 8 columns, from a row
// pair's four 2 x 2 blocks
static inline void store_pair(i32* __restrict c, i64 N, const int32x4_t* acc, i64 valid, bool both) {
  const int64x2_t b0 = vreinterpretq_s64_s32(acc[0]), b1 = vreinterpretq_s64_s32(acc[1]);
  const int64x2_t b2 = vreinterpretq_s64_s32(acc[2]), b3 = vreinterpretq_s64_s32(acc[3]);
  const int32x4_t rows[2][2] = {
      {vreinterpretq_s32_s64(vzip1q_s64(b0, b1)), vreinterpretq_s32_s64(vzip1q_s64(b2, b3))},
      {vreinterpretq_s32_s64(vzip2q_s64(b0, b1)), vreinterpretq_s32_s64(vzip2q_s64(b2, b3))}};
  for (int h = 0; h < (both ? 2 : 1); ++h) {
    i32* row = c + h * N;
    if (valid == PANEL) {
      vst1q_s32(row, rows[h][0]);
      vst1q_s32(row + 4, rows[h][1]);
    } else {
      i32 all[PANEL];
      vst1q_s32(all, rows[h][0]);
      vst1q_s32(all + 4, rows[h][1]);
      for (i64 n = 0; n < valid; ++n) row[n] = all[n];
    }
  }
}

// R row pairs (rows r0 .. r0 + 2R - 1, the last `odd` row missing) by one panel
template <int R>
static inline __attribute__((always_inline)) void tile(const i8* __restrict ap, i64 chunks, const i8* __restrict wp,
                                                       i32* __restrict c, i64 N, i64 valid, bool odd) {
  int32x4_t acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < 4; ++q) acc[r][q] = vdupq_n_s32(0);
  for (i64 kc = 0; kc < chunks; ++kc) {
    const i8* wk = wp + kc * 64;
    const int8x16_t b0 = vld1q_s8(wk), b1 = vld1q_s8(wk + 16), b2 = vld1q_s8(wk + 32), b3 = vld1q_s8(wk + 48);
    for (int r = 0; r < R; ++r) {
      const int8x16_t a = vld1q_s8(ap + (r * chunks + kc) * 16);
      acc[r][0] = vmmlaq_s32(acc[r][0], a, b0);
      acc[r][1] = vmmlaq_s32(acc[r][1], a, b1);
      acc[r][2] = vmmlaq_s32(acc[r][2], a, b2);
      acc[r][3] = vmmlaq_s32(acc[r][3], a, b3);
    }
  }
  for (int r = 0; r < R; ++r) store_pair(c + 2 * r * N, N, acc[r], valid, !(odd && r == R - 1));
}

static void gemm(const i8* a, i64 rows, i64 K, i64 N, const u8* packed, i32* c, u8* scratch) {
  const i64 chunks = round_up(K, KC) / KC, panels = round_up(N, PANEL) / PANEL, pairs = (rows + 1) / 2;
  i8* ap = reinterpret_cast<i8*>(scratch);
  pack_pairs(a, rows, K, ap);
  const i8* w = reinterpret_cast<const i8*>(packed);
  const bool odd = rows % 2 != 0;
  for (i64 p = 0; p < panels; ++p) {  // a panel's weights stay in L1 while the rows pass
    const i64 n0 = p * PANEL, valid = N - n0 < PANEL ? N - n0 : PANEL;
    const i8* wp = w + p * chunks * 64;
    i64 q = 0;
    for (; q + 4 <= pairs; q += 4) tile<4>(ap + q * chunks * 16, chunks, wp, c + 2 * q * N + n0, N, valid, odd && q + 4 == pairs);
    const i8* aq = ap + q * chunks * 16;
    i32* cq = c + 2 * q * N + n0;
    switch (pairs - q) {
      case 3: tile<3>(aq, chunks, wp, cq, N, valid, odd); break;
      case 2: tile<2>(aq, chunks, wp, cq, N, valid, odd); break;
      case 1: tile<1>(aq, chunks, wp, cq, N, valid, odd); break;
      default: break;
    }
  }
}

}  // namespace
}  // namespace shazip::kernels::i8mm

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace shazip::kernels {
namespace dotprod {
extern const Kernels table;
}
namespace i8mm {

extern const Kernels table = with_matmul(dotprod::table, "i8mm", packed_bytes, pack, gemm_scratch_bytes, gemm);

}  // namespace i8mm
}  // namespace shazip::kernels

#endif  // SHAZIP_KERNELS_I8MM
