// The portable kernel path: plain C++ for any CPU (the compiler vectorizes it for the build's
// baseline: SSE2 on x86-64, NEON on aarch64). Always available; the reference the faster paths
// are tested against (all of them are tested against the torch twin).
#include "kernels/kernels.h"

namespace shazip::kernels::portable {
namespace {

static void lookup(const i32* __restrict t, const i32* __restrict idx, i32* __restrict out, i64 n) {
  for (i64 j = 0; j < n; ++j) out[j] = t[idx[j]];
}

#include "kernels/generic.h"

// Weights as int16 [K, N] (the products are then int16 x int16, which compilers vectorize
// better than int8 x int8: clang ran twice as fast); four rows at a time share each weight
// row's loads.
static i64 packed_bytes(i64 K, i64 N) { return K * N * 2; }

static void pack(const i8* w, i64 K, i64 N, u8* out) {
  int16_t* o = reinterpret_cast<int16_t*>(out);
  for (i64 i = 0; i < K * N; ++i) o[i] = w[i];
}

static i64 gemm_scratch_bytes(i64, i64) { return 0; }

static void gemm(const i8* a, i64 rows, i64 K, i64 N_, const u8* packed, i32* c, u8*) {
  const int16_t* w = reinterpret_cast<const int16_t*>(packed);
  const i64 N = N_;
  i64 r = 0;
  for (; r + 4 <= rows; r += 4) {
    i32* __restrict c0 = c + r * N;
    i32* __restrict c1 = c0 + N;
    i32* __restrict c2 = c1 + N;
    i32* __restrict c3 = c2 + N;
    for (i64 n = 0; n < N; ++n) c0[n] = c1[n] = c2[n] = c3[n] = 0;
    for (i64 k = 0; k < K; ++k) {
      const int16_t* __restrict wk = w + k * N;
      const int16_t a0 = a[r * K + k], a1 = a[(r + 1) * K + k], a2 = a[(r + 2) * K + k], a3 = a[(r + 3) * K + k];
      for (i64 n = 0; n < N; ++n) {
        const int16_t x = wk[n];
        c0[n] += i32(a0) * x;
        c1[n] += i32(a1) * x;
        c2[n] += i32(a2) * x;
        c3[n] += i32(a3) * x;
      }
    }
  }
  for (; r < rows; ++r) {
    i32* __restrict c0 = c + r * N;
    for (i64 n = 0; n < N; ++n) c0[n] = 0;
    for (i64 k = 0; k < K; ++k) {
      const int16_t* __restrict wk = w + k * N;
      const int16_t a0 = a[r * K + k];
      for (i64 n = 0; n < N; ++n) c0[n] += i32(a0) * wk[n];
    }
  }
}

// the table's LayerNorm, quantization, attention and stage mixers' kernels: generic.h's plain loops
constexpr auto layer_norm = layer_norm_generic;
constexpr auto quantize_row = quantize_row_generic;
constexpr auto dots = dots_generic;
constexpr auto mix = mix_generic;
constexpr auto mixer_dot = mixer_dot_generic;
constexpr auto mixer_train = mixer_train_generic;

}  // namespace

SHAZIP_KERNEL_TABLE("portable")

}  // namespace shazip::kernels::portable
