// The int8 step's kernels and the adaptive stage's mixers: one table of function pointers per
// instruction-set path.
//
// Every path computes the same integers (numerics.py's contract: integer arithmetic only, so
// vector width, summation order and tiling cannot change a result); the paths differ only in
// speed. tests/test_core_model.py runs the whole step on every path available on the machine
// against the torch twin (quant.IntModel.step).
//
//   portable    plain C++ (any CPU; the compiler vectorizes for the build's baseline)
//   avx2        x86-64-v3: AVX2 + FMA + BMI2 (kernels/avx2.cpp)
//   avx512vnni  AVX-512 F/BW/VL/DQ + VNNI (kernels/avx512vnni.cpp)
//   amx         avx512vnni's kernels with the matmul on AMX-INT8 tiles (kernels/amx.cpp)
//   dotprod     aarch64: NEON with the dot product (SDOT) (kernels/dotprod.cpp)
//   i8mm        dotprod's kernels with the matmul on SMMLA (kernels/i8mm.cpp)
//
// The ISA paths are compiled with `#pragma GCC target` in their own files, so one build runs on
// any CPU and dispatch.cpp picks the path at run time. Their code lives in a path namespace with
// internal linkage and calls no library template, so nothing compiled for a newer CPU can be
// shared with (and run by) the rest of the module.
//
// Conventions. Kernels take raw pointers and caller-provided scratch and never allocate. A row
// of the residual stream is int64 [d] in units of 2**-FRAC, clamped to +-R_MAX. Matmul inputs
// are int8 rows quantized per row (|q| <= 127); weights are int8 [K, N] (any value), repacked
// once by `pack` into the path's own layout. Lookup tables are int32 (their entries fit: checked
// when a model is built), indexed as described at each kernel.
#pragma once

#include "common.h"

#include <string>
#include <vector>

// The AMX path needs Linux (which hands out the tiles' state on request), a compiler that knows
// the tile instructions (GCC 11, clang 12) and the real AVX-512 (not emulate_avx512.h's).
#if defined(__x86_64__) && defined(__linux__) && !defined(SHAZIP_EMULATE_AVX512) && \
    (defined(__clang__) ? __clang_major__ >= 12 : (defined(__GNUC__) && __GNUC__ >= 11))
#define SHAZIP_KERNELS_AMX 1
#endif

// The aarch64 paths need a way to ask the CPU for its features: Linux's auxiliary vector or
// macOS's sysctl. SMMLA's intrinsics came with GCC 10 and clang 11.
#if defined(__aarch64__) && (defined(__linux__) || defined(__APPLE__))
#define SHAZIP_KERNELS_NEON 1
#if defined(__clang__) ? __clang_major__ >= 11 : (defined(__GNUC__) && __GNUC__ >= 10)
#define SHAZIP_KERNELS_I8MM 1
#endif
#endif

namespace shazip::kernels {

// The numerics contract's constants (numerics.py; _core.contract() exports them and core.py
// refuses a module whose constants differ).
constexpr int FRAC = 10;
constexpr i64 ONE = i64(1) << FRAC;
constexpr i64 R_MAX = (i64(1) << 20) - 1;
constexpr i64 LUT_RANGE = 8;
constexpr i64 LUT_HALF = LUT_RANGE * ONE;  // sigmoid/tanh/GELU tables cover [-8, 8]: 2 * LUT_HALF + 1 entries
constexpr int GATE_FRAC = 15;
constexpr i64 C_MAX = (i64(1) << 22) - 1;
constexpr i64 EXP_ATT_RANGE = 16;
constexpr i64 EXP_ATT_MAX = EXP_ATT_RANGE * ONE;  // exp_att has EXP_ATT_MAX + 1 entries
constexpr i64 EXP_OUT_RANGE = 24;
constexpr i64 EXP_OUT_MAX = EXP_OUT_RANGE * ONE;  // exp_out has EXP_OUT_MAX + 1 entries
constexpr i64 MIX_MASS = i64(1) << 17;
constexpr int NORM_GAIN_BITS = 16;

struct Kernels {
  const char* name;

  // ---- int8 matmul: c[r * N + n] = sum_k a[r * K + k] * w[k * N + n], exact in int32
  // (K * 128 * 128 < 2**31). `w` is packed once into packed_bytes(K, N) bytes at `out`
  // (64-byte aligned); gemm needs gemm_scratch_bytes(rows, K) bytes of 64-byte aligned scratch.
  i64 (*packed_bytes)(i64 K, i64 N);
  void (*pack)(const i8* w, i64 K, i64 N, u8* out);
  i64 (*gemm_scratch_bytes)(i64 rows, i64 K);
  void (*gemm)(const i8* a, i64 rows, i64 K, i64 N, const u8* packed, i32* c, u8* scratch);

  // ---- one row each
  // y = LayerNorm(x) (numerics.Norm): mean, 16 std = isqrt(256 var), gain, bias, clamp +-R_MAX.
  // x and y must not overlap.
  void (*layer_norm)(const i64* x, const i64* gain, const i64* bias, i64 d, i64* y);
  // q = round(127 y / e), e = max(1, max|y|), returned; needs |y| <= R_MAX.
  i64 (*quantize_row)(const i64* y, i64 d, i8* q);
  // The LSTM cell of one lane, from the int32 matmul rows of its input (ax, row scale e) and of
  // its int8 hidden state (ah): gates = (bias + ax e m0 + ah m1) / 2**shift rounded [4d],
  // i f o = sigmoid, g = tanh (tables over +-LUT_HALF); updates c (int64 [d], Q15), the int8
  // state hq [d], and adds the output to the residual row h (clamped). scratch: int32 [8 d].
  void (*lstm_cell)(const i32* ax, const i32* ah, i64 e, const i64* m0, const i64* m1, const i64* bias, int shift,
                    const i32* sigmoid, const i32* tanh, i64 d, i64* c, i8* hq, i64* h, i32* scratch);
  // out = clamp((bias + acc e m) / 2**shift rounded, +-lim) [n]
  void (*linear_clamp)(const i32* acc, i64 e, const i64* m, const i64* bias, int shift, i64 n, i64 lim, i64* out);
  // out[j] = keys[j * d ..] . q for j < n (int8 rows, |values| <= 127: they are quantized rows)
  void (*dots)(const i8* keys, i64 n, i64 d, const i8* q, i32* out);
  // The attention weights of n keys from their dots and row scales es (int64 [n]) and the
  // query's scale eq: scores, exp_att weights w (table int32 [EXP_ATT_MAX + 1]), then
  // u[j] = floor(w_j es_j MIX_MASS / sum w es) (sum u <= MIX_MASS); returns
  // ebar = floor((sum w es) 2**8 / sum w). scratch: int64 [2 n].
  i64 (*attention_weights)(const i32* dots, const i64* es, i64 n, i64 eq, const i32* exp_att, i32* u, i64* scratch);
  // out[i] = sum_{j < n} u[j] keys[j * d + i] + u_extra * extra[i] (exact in int32: sum u <= 2**17).
  // scratch: 32 (n + 2) bytes, 64-byte aligned.
  void (*mix)(const i8* keys, i64 n, const i32* u, const i8* extra, i32 u_extra, i64 d, i32* out, u8* scratch);
  // h[i] = clamp(mid[i] + round(round(mix[i] ebar / 2**25) vs[i] / (127 2**20)), +-R_MAX)
  void (*attention_out)(const i32* mix, i64 ebar, const i64* vs, const i64* mid, i64 d, i64* h);
  // Boom: pre = (bias + acc e m) / 2**shift rounded [d_boom], g = GELU table (int32 over
  // +-LUT_HALF) + max(pre - LUT_HALF, 0); h[i] = clamp(ff[i] + sum of the d_boom / d chunks
  // g[k d + i], +-R_MAX). scratch: int64 [2 d_boom].
  void (*boom)(const i32* acc, i64 e, const i64* m, const i64* bias, int shift, const i32* gelu, const i64* ff,
               i64 d, i64 d_boom, i64* h, i64* scratch);
  // Output frequencies: logits = (bias + acc e m) / 2**shift rounded [n];
  // freq[j] = max(exp_out[min(max(logits) - logits[j], EXP_OUT_MAX)], 1). scratch: int64 [n].
  void (*out_freq)(const i32* acc, i64 e, const i64* m, const i64* bias, int shift, const i32* exp_out, i64 n,
                   i64* freq, i64* scratch);

  // ---- the adaptive stage's mixers (csrc/stage): m weight rows over the same inputs, |w[j][i]| <=
  // 2**24, |x_i| <= 4095 (ST_MAX). One call for every mixer of a bit: the inputs are read once.
  // sums[j] = sum_{i < n} w[j][i] x_i for j < m, exact in int64
  void (*mixer_dot)(const i32* const* w, i64 m, const i32* x, i64 n, i64* sums);
  // w[j][i] = clamp(w[j][i] + floor((x_i e[j] + 2**19) / 2**20), +-2**24) for j < m, i < n; |e[j]| < 2**24;
  // the rows do not overlap
  void (*mixer_train)(i32* const* w, const i64* e, i64 m, const i32* x, i64 n);
};

// `base`'s table with another path's matmul (its packing, scratch and GEMM) under that path's
// name: amx's on avx512vnni's kernels, i8mm's on dotprod's. Called by those files outside their
// target pragma, so built for the baseline CPU: it runs when the module loads, on any CPU.
static inline Kernels with_matmul(Kernels base, const char* name, decltype(Kernels::packed_bytes) packed_bytes,
                                  decltype(Kernels::pack) pack, decltype(Kernels::gemm_scratch_bytes) scratch_bytes,
                                  decltype(Kernels::gemm) gemm) {
  base.name = name;
  base.packed_bytes = packed_bytes;
  base.pack = pack;
  base.gemm_scratch_bytes = scratch_bytes;
  base.gemm = gemm;
  return base;
}

// The path `name` ("auto": the SHAZIP_KERNELS environment variable's path if it is set, else
// the best this CPU runs). An unknown name, or a path this CPU (or build) lacks, is an
// ArgumentError saying which paths are available.
const Kernels& select_kernels(const std::string& name);
// The paths this CPU and build can run, slowest first ("portable" always).
std::vector<std::string> available_kernels();
// Every path name this build knows, available here or not.
std::vector<std::string> known_kernels();

}  // namespace shazip::kernels
