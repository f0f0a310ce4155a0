// LayerNorm in 128-bit float64 lanes, for the aarch64 paths (dotprod.cpp includes this inside its
// anonymous namespace, after generic.h, under its target pragma; the I8MM path uses it from there).
//
// The float64 argument is norm256.h's: every integer below stays under 2**53 in magnitude, where
// float64 holds it exactly and +, -, * and fused multiply-adds of such integers are exact when
// their result is too; the one division is an estimate corrected to the exact floor. NEON has no
// int64 multiply (generic.h's loop would run one element at a time) but converts int64 <-> float64
// itself. So the result is layer_norm_generic's, bit for bit; a row whose products could leave the
// exact range goes to layer_norm_generic, as in norm256.h.

// quant.QNorm, as layer_norm_generic (x within +-R_MAX, |gain| < 2**40, |bias| <= R_MAX: the
// bounds Model checks at load).
__attribute__((noinline)) static void layer_norm(const i64* __restrict x, const i64* __restrict g,
                                                 const i64* __restrict b, i64 d, i64* __restrict y) {
  // d * (2 R_MAX)**2 < 2**53 keeps the sum of squares exact
  if (d % 2 != 0 || d > 2048) return layer_norm_generic(x, g, b, d, y);
  int64x2_t s2 = vdupq_n_s64(0);
  for (i64 i = 0; i < d; i += 2) s2 = vaddq_s64(s2, vld1q_s64(x + i));
  const i64 mean = rdiv(vaddvq_s64(s2), d);
  const float64x2_t meanv = vdupq_n_f64(static_cast<double>(mean));
  float64x2_t ss2 = vdupq_n_f64(0.0);
  for (i64 i = 0; i < d; i += 2) {
    const float64x2_t xc = vsubq_f64(vcvtq_f64_s64(vld1q_s64(x + i)), meanv);
    ss2 = vfmaq_f64(ss2, xc, xc);  // each < 2**42, the sum < 2**53: exact
  }
  const i64 ss = static_cast<i64>(vaddvq_f64(ss2));
  const i64 sd = max64(isqrt((ss / d) << 8), 1);
  // y = floor((2 xc g + B / 2) / B) + bias, B = 2 (sd << 16) (rdiv2), clamped
  const double B = static_cast<double>(sd << (NORM_GAIN_BITS + 1));
  const float64x2_t Bv = vdupq_n_f64(B), invv = vdupq_n_f64(1.0 / B);
  const float64x2_t half = vdupq_n_f64(static_cast<double>(sd << NORM_GAIN_BITS));
  const float64x2_t limit = vdupq_n_f64(static_cast<double>(i64(1) << 50));
  const float64x2_t hi = vdupq_n_f64(static_cast<double>(R_MAX)), lo = vdupq_n_f64(static_cast<double>(-R_MAX));
  const float64x2_t one = vdupq_n_f64(1.0), zero = vdupq_n_f64(0.0);
  uint64x2_t too_big = vdupq_n_u64(0);
  for (i64 i = 0; i < d; i += 2) {
    const float64x2_t xc = vsubq_f64(vcvtq_f64_s64(vld1q_s64(x + i)), meanv);
    const float64x2_t p = vmulq_f64(xc, vcvtq_f64_s64(vld1q_s64(g + i)));
    too_big = vorrq_u64(too_big, vcageq_f64(p, limit));
    const float64x2_t v = vaddq_f64(vaddq_f64(p, p), half);  // < 2**52: exact
    float64x2_t q = vrndmq_f64(vmulq_f64(v, invv));           // within one of the floor
    const float64x2_t r = vfmsq_f64(v, q, Bv);                 // v - q B, exact: integers below 2**52
    q = vsubq_f64(q, vbslq_f64(vcltq_f64(r, zero), one, zero));
    q = vaddq_f64(q, vbslq_f64(vcgeq_f64(r, Bv), one, zero));
    const float64x2_t out = vminq_f64(vmaxq_f64(vaddq_f64(q, vcvtq_f64_s64(vld1q_s64(b + i))), lo), hi);
    vst1q_s64(y + i, vcvtq_s64_f64(out));
  }
  if (vmaxvq_u32(vreinterpretq_u32_u64(too_big)) != 0) layer_norm_generic(x, g, b, d, y);
}
