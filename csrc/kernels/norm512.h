// LayerNorm in 512-bit float64 lanes, for the AVX-512 path (avx512vnni.cpp includes this inside its
// anonymous namespace, after generic.h, under its target pragma; the AMX path uses it from there).
//
// The float64 argument is norm256.h's: every integer below stays under 2**53 in magnitude, where
// float64 holds it exactly and +, -, * and fused multiply-adds of such integers are exact when
// their result is too; the one division is an estimate corrected to the exact floor. AVX-512DQ
// converts int64 <-> float64 itself, and the mean and the variance come from one pass:
// sum (x - mean)**2 = sum x**2 - 2 mean sum x + d mean**2 in int64 (sum x**2 < d 2**40 <= 2**51 is
// exact in float64). So the result is layer_norm_generic's, bit for bit; a row whose products
// could leave the exact range goes to layer_norm_generic, as in norm256.h.

// quant.QNorm, as layer_norm_generic (x within +-R_MAX, |gain| < 2**40, |bias| <= R_MAX: the
// bounds Model checks at load).
__attribute__((noinline)) static void layer_norm(const i64* __restrict x, const i64* __restrict g,
                                                 const i64* __restrict b, i64 d, i64* __restrict y) {
  if (d % 8 != 0 || d > 2048) return layer_norm_generic(x, g, b, d, y);
  __m512i s8 = _mm512_setzero_si512();
  __m512d q8 = _mm512_setzero_pd();
  for (i64 i = 0; i < d; i += 8) {
    const __m512i v = _mm512_loadu_si512(x + i);
    const __m512d f = _mm512_cvtepi64_pd(v);
    s8 = _mm512_add_epi64(s8, v);
    q8 = _mm512_fmadd_pd(f, f, q8);  // each x**2 < 2**40, the sum < 2**51: exact
  }
  const i64 s = _mm512_reduce_add_epi64(s8), sq = static_cast<i64>(_mm512_reduce_add_pd(q8));
  const i64 mean = rdiv(s, d);
  const i64 ss = sq - 2 * mean * s + d * mean * mean;  // sum (x - mean)**2, exact in int64
  const i64 sd = max64(isqrt((ss / d) << 8), 1);
  // y = floor((2 xc g + B / 2) / B) + bias, B = 2 (sd << 16) (rdiv2), clamped
  const double B = static_cast<double>(sd << (NORM_GAIN_BITS + 1));
  const __m512d Bv = _mm512_set1_pd(B), invv = _mm512_set1_pd(1.0 / B);
  const __m512d half = _mm512_set1_pd(static_cast<double>(sd << NORM_GAIN_BITS));
  const __m512d limit = _mm512_set1_pd(static_cast<double>(i64(1) << 50));
  const __m512d hi = _mm512_set1_pd(static_cast<double>(R_MAX)), lo = _mm512_set1_pd(static_cast<double>(-R_MAX));
  const __m512d one = _mm512_set1_pd(1.0), zero = _mm512_setzero_pd(), meanv = _mm512_set1_pd(static_cast<double>(mean));
  __mmask8 too_big = 0;
  for (i64 i = 0; i < d; i += 8) {
    const __m512d xc = _mm512_sub_pd(_mm512_cvtepi64_pd(_mm512_loadu_si512(x + i)), meanv);
    const __m512d p = _mm512_mul_pd(xc, _mm512_cvtepi64_pd(_mm512_loadu_si512(g + i)));
    too_big |= _mm512_cmp_pd_mask(_mm512_abs_pd(p), limit, _CMP_GE_OQ);
    const __m512d v = _mm512_add_pd(_mm512_add_pd(p, p), half);                                   // < 2**52: exact
    __m512d q = _mm512_roundscale_pd(_mm512_mul_pd(v, invv), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);  // within one of the floor
    const __m512d r = _mm512_fnmadd_pd(q, Bv, v);                                                  // v - q B, exact
    q = _mm512_mask_sub_pd(q, _mm512_cmp_pd_mask(r, zero, _CMP_LT_OQ), q, one);
    q = _mm512_mask_add_pd(q, _mm512_cmp_pd_mask(r, Bv, _CMP_GE_OQ), q, one);
    const __m512d out = _mm512_min_pd(_mm512_max_pd(_mm512_add_pd(q, _mm512_cvtepi64_pd(_mm512_loadu_si512(b + i))), lo), hi);
    _mm512_storeu_si512(y + i, _mm512_cvtpd_epi64(out));
  }
  if (too_big != 0) layer_norm_generic(x, g, b, d, y);
}
