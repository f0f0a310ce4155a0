// The kernels' shared implementation: plain C++ loops that the compiler vectorizes for the
// instruction set of the file including it. Each path file (portable.cpp, avx2.cpp,
// avx512vnni.cpp) includes this inside its own anonymous namespace, after its target pragma,
// having first defined
//
//   static void lookup(const i32* table, const i32* idx, i32* out, i64 n);  // out[j] = table[idx[j]]
//
// (a vector gather where the path has one). No #include here and no library template: every
// function below is compiled anew, with internal linkage, for each path (see kernels.h).
//
// Every line mirrors twin.py's torch step (the twin); the comments name the twin's lines.

// A path's table (kernels.h), after its anonymous namespace: every kernel by the same name in
// every path file, so a new kernel is one line here.
#define SHAZIP_KERNEL_TABLE(NAME)                                                                          \
  extern constexpr Kernels table = {NAME, packed_bytes, pack, gemm_scratch_bytes, gemm, layer_norm,       \
                                    quantize_row, lstm_cell, linear_clamp, dots, attention_weights, mix, \
                                    attention_out, boom, out_freq, mixer_dot, mixer_train};

static inline i64 min64(i64 a, i64 b) { return a < b ? a : b; }
static inline i64 max64(i64 a, i64 b) { return a > b ? a : b; }
static inline i64 clamp64(i64 x, i64 lo, i64 hi) { return x < lo ? lo : (x > hi ? hi : x); }
static inline i64 half_of(int s) { return s > 0 ? i64(1) << (s - 1) : 0; }
// quant.rshift: round(x / 2**s), halves up
static inline i64 rshift(i64 x, int s) { return s > 0 ? (x + (i64(1) << (s - 1))) >> s : x; }
static inline i64 floordiv(i64 a, i64 b) {
  const i64 q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
// quant.rdiv: round(a / b) for b > 0, halves up
static inline i64 rdiv(i64 a, i64 b) { return floordiv(2 * a + b, 2 * b); }

// Division by one positive divisor many times: a float64 estimate of the quotient, corrected by
// integer arithmetic to the exact floor (the estimate is within one of it for |a / b| < 2**50,
// which every use satisfies). Branch-free, so loops of it vectorize.
struct Divisor {
  i64 b;
  double inv;
  explicit Divisor(i64 b_) : b(b_), inv(1.0 / static_cast<double>(b_)) {}
  i64 floor(i64 a) const {
    const double x = static_cast<double>(a) * inv;
    i64 q = static_cast<i64>(x);           // truncation; then floor (|q| < 2**53: double(q) is exact)
    q -= i64(static_cast<double>(q) > x);
    const i64 r = a - q * b;
    return q - i64(r < 0) + i64(r >= b);
  }
};
// round(a / b), halves up, as rdiv: floor((2a + b) / 2b); `twice` is Divisor(2b)
static inline i64 rdiv2(i64 a, const Divisor& twice) { return twice.floor(2 * a + twice.b / 2); }

// quant.isqrt: floor(sqrt(v)) for 0 <= v < 2**52 (the float64 root is within one; fixed up exactly)
static inline i64 isqrt(i64 v) {
  i64 s = static_cast<i64>(__builtin_sqrt(static_cast<double>(v)));
  if (s * s > v) s -= 1;
  if ((s + 1) * (s + 1) <= v) s += 1;
  return s;
}

// quant.QNorm (the AVX2 and AVX-512 paths run norm256.h's and norm512.h's, which equal it). Out
// of line: inlined into a bigger function GCC may stop vectorizing the last loop.
[[maybe_unused]] __attribute__((noinline)) static void layer_norm_generic(const i64* __restrict x, const i64* __restrict g,
                                                 const i64* __restrict b, i64 d_, i64* __restrict y) {
  const i64 d = d_;
  i64 s = 0;
  for (i64 i = 0; i < d; ++i) s += x[i];
  const i64 mean = rdiv(s, d);  // xc = x - rdiv(sum x, d)
  i64 ss = 0;
  for (i64 i = 0; i < d; ++i) ss += (x[i] - mean) * (x[i] - mean);
  const i64 sd = max64(isqrt((ss / d) << 8), 1);  // isqrt((sum xc^2 // d) << 8).clamp_min(1); ss >= 0
  const Divisor twice(2 * (sd << NORM_GAIN_BITS));
  for (i64 i = 0; i < d; ++i) y[i] = clamp64(rdiv2((x[i] - mean) * g[i], twice) + b[i], -R_MAX, R_MAX);
}

// quant.quantize_rows for one row with |y| <= R_MAX: then 254 y + e < 2**29 and every step below
// fits int32, which vectorizes twice as wide as int64.
[[maybe_unused]] static i64 quantize_row_generic(const i64* __restrict y, i64 d_, i8* __restrict q) {
  const i64 d = d_;
  i64 e = 1;
  for (i64 i = 0; i < d; ++i) e = max64(e, y[i] < 0 ? -y[i] : y[i]);
  const i32 b = static_cast<i32>(2 * e), e32 = static_cast<i32>(e);
  const double inv = 1.0 / static_cast<double>(b);
  for (i64 i = 0; i < d; ++i) {  // floor((254 y + e) / 2e), as Divisor::floor in int32
    const i32 a = 254 * static_cast<i32>(y[i]) + e32;
    const double x = static_cast<double>(a) * inv;
    i32 t = static_cast<i32>(x);
    t -= i32(static_cast<double>(t) > x);
    const i32 r = a - t * b;
    q[i] = static_cast<i8>(t - i32(r < 0) + i32(r >= b));
  }
  return e;
}

// quant.IntModel._lstm for one lane
static void lstm_cell(const i32* __restrict ax, const i32* __restrict ah, i64 e, const i64* __restrict m0,
                      const i64* __restrict m1, const i64* __restrict bias, int shift, const i32* sig,
                      const i32* tnh, i64 d_, i64* __restrict c, i8* __restrict hq, i64* __restrict h,
                      i32* __restrict scratch) {
  const i64 d = d_, n4 = 4 * d_, half = half_of(shift);
  i32* __restrict idx = scratch;        // [4d] table indices of the gates, then [d] of the cell
  i32* __restrict act = scratch + n4;   // [4d] i, f, g, o
  // gates = lstm([q(x), h]); only looked up, so clamped straight to the tables' range
  for (i64 j = 0; j < n4; ++j) {
    const i64 g = (bias[j] + half + i64(ax[j]) * (e * m0[j]) + i64(ah[j]) * m1[j]) >> shift;
    idx[j] = static_cast<i32>(clamp64(g, -LUT_HALF, LUT_HALF) + LUT_HALF);
  }
  lookup(sig, idx, act, 2 * d);               // i, f
  lookup(tnh, idx + 2 * d, act + 2 * d, d);   // g
  lookup(sig, idx + 3 * d, act + 3 * d, d);   // o
  const i32* __restrict ai = act;
  const i32* __restrict af = act + d;
  const i32* __restrict ag = act + 2 * d;
  const i32* __restrict ao = act + 3 * d;
  for (i64 j = 0; j < d; ++j) {  // c = rshift(f c + i g, GATE_FRAC).clamp(C_MAX); tanh index of rshift(c, 5)
    const i64 cj = clamp64((i64(af[j]) * c[j] + i64(ai[j]) * ag[j] + (i64(1) << (GATE_FRAC - 1))) >> GATE_FRAC,
                           -C_MAX, C_MAX);
    c[j] = cj;
    const i64 cc = (cj + (i64(1) << (GATE_FRAC - FRAC - 1))) >> (GATE_FRAC - FRAC);
    idx[j] = static_cast<i32>(clamp64(cc, -LUT_HALF, LUT_HALF) + LUT_HALF);
  }
  i32* __restrict t = act;  // i is no longer needed
  lookup(tnh, idx, t, d);
  for (i64 j = 0; j < d; ++j) {
    const i64 hh = i64(ao[j]) * t[j];  // Q30
    hq[j] = static_cast<i8>((hh * 127 + (i64(1) << (2 * GATE_FRAC - 1))) >> (2 * GATE_FRAC));
    h[j] = clamp64(h[j] + ((hh + (i64(1) << (2 * GATE_FRAC - FRAC - 1))) >> (2 * GATE_FRAC - FRAC)), -R_MAX, R_MAX);
  }
}

// quant.QLinear of one input, then clamped (the query: .clamp(-R_MAX, R_MAX))
static void linear_clamp(const i32* __restrict acc, i64 e, const i64* __restrict m, const i64* __restrict bias,
                         int shift, i64 n_, i64 lim, i64* __restrict out) {
  const i64 n = n_, half = half_of(shift);
  for (i64 j = 0; j < n; ++j) out[j] = clamp64((bias[j] + half + i64(acc[j]) * (e * m[j])) >> shift, -lim, lim);
}

[[maybe_unused]] static void dots_generic(const i8* keys, i64 n, i64 d_, const i8* __restrict q, i32* out) {
  const i64 d = d_;
  for (i64 j = 0; j < n; ++j) {
    const i8* __restrict k = keys + j * d;
    i32 s = 0;
    for (i64 i = 0; i < d; ++i) s += i32(k[i]) * i32(q[i]);
    out[j] = s;
  }
}

// quant.IntModel._attend, from the dots to u and ebar
static i64 attention_weights(const i32* __restrict dots, const i64* __restrict es, i64 n_, i64 eq,
                             const i32* __restrict expa, i32* __restrict u, i64* __restrict scratch) {
  const i64 n = n_;
  i64* __restrict s = scratch;
  i64* __restrict w = scratch + n;
  const Divisor score_div(2 * 127 * 127);
  for (i64 j = 0; j < n; ++j) s[j] = rdiv2(rshift(i64(dots[j]) * es[j], FRAC) * eq, score_div);  // scores
  i64 mx = s[0];
  for (i64 j = 1; j < n; ++j) mx = max64(mx, s[j]);
  i64 we_sum = 0, w_sum = 0;
  for (i64 j = 0; j < n; ++j) {
    w[j] = expa[min64(mx - s[j], EXP_ATT_MAX)];
    w_sum += w[j];
    we_sum += w[j] * es[j];
  }
  const Divisor by_we_sum(we_sum);  // >= exp_att[0] > 0
  for (i64 j = 0; j < n; ++j) u[j] = static_cast<i32>(by_we_sum.floor(w[j] * es[j] * MIX_MASS));
  return floordiv(we_sum << 8, w_sum);  // ebar: mean scale * 2**8
}

[[maybe_unused]] static void mix_generic(const i8* keys, i64 n, const i32* u, const i8* extra, i32 u_extra, i64 d_,
                        i32* __restrict out, u8*) {
  const i64 d = d_;
  for (i64 i = 0; i < d; ++i) out[i] = u_extra * i32(extra[i]);
  for (i64 j = 0; j < n; ++j) {
    if (u[j] == 0) continue;  // most keys get no weight: skip reading them
    const i32 uj = u[j];
    const i8* __restrict k = keys + j * d;
    for (i64 i = 0; i < d; ++i) out[i] += uj * i32(k[i]);
  }
}

// The mix's keys in groups of four, key n being `extra` and keys past it `extra` with weight
// zero: f(rows, weights) for each group with some weight (avx2.cpp's and avx512vnni.cpp's mix).
template <class F>
static inline void weighted_key_groups(const i8* keys, i64 n, const i32* u, const i8* extra, i32 u_extra, i64 d,
                                       F&& f) {
  for (i64 j = 0; j <= n; j += 4) {
    const i8* rows[4];
    i32 w[4];
    bool any = false;
    for (i64 t = 0; t < 4; ++t) {
      const i64 k = j + t;
      w[t] = k < n ? u[k] : (k == n ? u_extra : 0);
      rows[t] = k < n ? keys + k * d : extra;
      any |= w[t] != 0;
    }
    if (any) f(rows, w);
  }
}

static void attention_out(const i32* __restrict mix, i64 ebar, const i64* __restrict vs, const i64* __restrict mid,
                          i64 d_, i64* __restrict h) {
  const i64 d = d_;
  const Divisor out_div(i64(2 * 127) << 20);
  for (i64 i = 0; i < d; ++i) {
    const i64 t = rshift(i64(mix[i]) * ebar, 25);  // = mix * ebar / MIX_MASS / 2**8
    h[i] = clamp64(mid[i] + rdiv2(t * vs[i], out_div), -R_MAX, R_MAX);  // (mid + rdiv(t vs, 127 << 20)).clamp
  }
}

// quant.IntModel._boom, then h = (ln_ff(h) + boom).clamp
static void boom(const i32* __restrict acc, i64 e, const i64* __restrict m, const i64* __restrict bias, int shift,
                 const i32* gelu, const i64* __restrict ff, i64 d_, i64 d_boom, i64* __restrict h,
                 i64* __restrict scratch) {
  const i64 d = d_, n = d_boom, half = half_of(shift);
  i64* __restrict pre = scratch;
  i32* __restrict idx = reinterpret_cast<i32*>(scratch + n);  // [n] indices, then [n] looked up
  i32* __restrict gl = idx + n;
  for (i64 j = 0; j < n; ++j) {
    pre[j] = (bias[j] + half + i64(acc[j]) * (e * m[j])) >> shift;
    idx[j] = static_cast<i32>(clamp64(pre[j], -LUT_HALF, LUT_HALF) + LUT_HALF);
  }
  lookup(gelu, idx, gl, n);
  for (i64 j = 0; j < n; ++j) pre[j] = gl[j] + max64(pre[j] - LUT_HALF, 0);  // GELU(x) = x beyond 8
  for (i64 i = 0; i < d; ++i) h[i] = ff[i];
  for (i64 k = 0; k < n; k += d) {  // the Boom's chunks summed
    const i64* __restrict g = pre + k;
    for (i64 i = 0; i < d; ++i) h[i] += g[i];
  }
  for (i64 i = 0; i < d; ++i) h[i] = clamp64(h[i], -R_MAX, R_MAX);
}

// logits = out([quantize_rows(h)]); freq = exp_out[(max - logits).clamp_max(..)].clamp_min(1)
static void out_freq(const i32* __restrict acc, i64 e, const i64* __restrict m, const i64* __restrict bias, int shift,
                     const i32* __restrict expo, i64 n_, i64* __restrict freq, i64* __restrict scratch) {
  const i64 n = n_, half = half_of(shift);
  i64* __restrict logits = scratch;
  for (i64 j = 0; j < n; ++j) logits[j] = (bias[j] + half + i64(acc[j]) * (e * m[j])) >> shift;
  i64 mx = logits[0];
  for (i64 j = 1; j < n; ++j) mx = max64(mx, logits[j]);
  for (i64 j = 0; j < n; ++j) freq[j] = max64(expo[min64(mx - logits[j], EXP_OUT_MAX)], 1);
}

// The stage's mixers, rows in groups (avx2.cpp, avx512vnni.cpp): f(Rows<R>{}, j) for rows [j, j + R)
// of m, groups of G and then the rest as one group: a pass over the inputs a group, R a constant so
// that the group's accumulators stay in registers
template <int R>
struct Rows {
  static constexpr int n = R;
};
template <int R, class F>
static inline __attribute__((always_inline)) void rest_of_rows(i64 r, i64 j, F& f) {
  if constexpr (R > 0) {
    if (r == R) f(Rows<R>{}, j);
    else rest_of_rows<R - 1>(r, j, f);
  }
}
template <int G, class F>
static inline __attribute__((always_inline)) void in_row_groups(i64 m, F&& f) {
  i64 j = 0;
  for (; j + G <= m; j += G) f(Rows<G>{}, j);
  rest_of_rows<G - 1>(m - j, j, f);
}

// ---- the adaptive stage's mixers (stage/mixer.h; their rules: the contract atop stage/stage.h);
// avx2.cpp and avx512vnni.cpp have their own on int16 halves (vpmaddwd)
// sum w_i x_i of each row, exact in int64 whatever the order (|w_i| <= 2**24, |x_i| <= 4095)
[[maybe_unused]] static void mixer_dot_generic(const i32* const* w, i64 m, const i32* __restrict x, i64 n, i64* sums) {
  for (i64 j = 0; j < m; ++j) {
    const i32* __restrict r = w[j];
    i64 s = 0;
    for (i64 i = 0; i < n; ++i) s += i64(r[i]) * x[i];
    sums[j] = s;
  }
}

// w_i = clamp(w_i + floor((x_i e + 2**19) / 2**20), +-2**24), for |x_i| <= 4095 and |e| < 2**24, in
// int32 lanes: with e = eh 2**12 + el (0 <= el < 2**12), floor((x e + 2**19) / 2**20) =
// floor((x eh + floor((x el + 2**19) / 2**12)) / 2**8), and no term reaches 2**25.
[[maybe_unused]] static void mixer_train_generic(i32* const* w, const i64* e, i64 m, const i32* __restrict x, i64 n) {
  for (i64 j = 0; j < m; ++j) {
    i32* __restrict r = w[j];
    const i32 eh = i32(e[j] >> 12), el = i32(e[j] & 4095);
    for (i64 i = 0; i < n; ++i) {
      const i32 d = (x[i] * eh + ((x[i] * el + (1 << 19)) >> 12)) >> 8;
      const i32 v = r[i] + d;
      r[i] = v < -(1 << 24) ? -(1 << 24) : (v > (1 << 24) ? (1 << 24) : v);
    }
  }
}
