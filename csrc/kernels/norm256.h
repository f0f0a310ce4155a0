// LayerNorm in 256-bit float64 lanes, for the AVX2 path (avx2.cpp includes this inside its
// anonymous namespace, after generic.h, under its target pragma; norm512.h is the AVX-512 path's).
//
// Why float64: the norm's last step multiplies int64 values by int64 gains and divides by a
// per-row integer. AVX2 has no int64 multiply, no int64 <-> float64 conversion and no division,
// so the compiler runs generic.h's loop one element at a time (a tenth of the step). Every
// integer here stays below 2**53 in magnitude, where float64 holds it exactly and +, - and * of
// such integers are exact when their result is too; the one division is an estimate corrected
// to the exact floor, as generic.h's Divisor does. So the result is layer_norm_generic's, bit for
// bit. A row whose products could leave that range (a gain times |x - mean| of 2**50 or more;
// the product check is exact because rounding is monotonic) is handed to layer_norm_generic.

// int64 <-> float64 for integers below 2**51 in magnitude: add (subtract) 1.5 * 2**52, whose
// float64 ulp is 1, so the integer is the mantissa's low bits.
static inline __m256d i64_to_f64(__m256i v) {
  const __m256i magic_i = _mm256_set1_epi64x(0x4338000000000000LL);
  return _mm256_sub_pd(_mm256_castsi256_pd(_mm256_add_epi64(v, magic_i)), _mm256_set1_pd(6755399441055744.0));
}
static inline __m256i f64_to_i64(__m256d v) {
  const __m256d magic = _mm256_set1_pd(6755399441055744.0);
  return _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(v, magic)), _mm256_castpd_si256(magic));
}
static inline double hsum_pd(__m256d v) {
  const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// quant.QNorm, as layer_norm_generic (x within +-R_MAX, |gain| < 2**40, |bias| <= R_MAX: the
// bounds Model checks at load).
__attribute__((noinline)) static void layer_norm(const i64* __restrict x, const i64* __restrict g,
                                                 const i64* __restrict b, i64 d, i64* __restrict y) {
  // d * (2 R_MAX)**2 < 2**53 keeps the sum of squares exact
  if (d % 4 != 0 || d > 2048) return layer_norm_generic(x, g, b, d, y);
  __m256i s4 = _mm256_setzero_si256();
  for (i64 i = 0; i < d; i += 4) s4 = _mm256_add_epi64(s4, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
  alignas(32) i64 parts[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(parts), s4);
  const i64 mean = rdiv(parts[0] + parts[1] + parts[2] + parts[3], d);
  const __m256d meanv = _mm256_set1_pd(static_cast<double>(mean));
  __m256d ss4 = _mm256_setzero_pd();
  for (i64 i = 0; i < d; i += 4) {
    const __m256d xc = _mm256_sub_pd(i64_to_f64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))), meanv);
    ss4 = _mm256_add_pd(ss4, _mm256_mul_pd(xc, xc));  // each < 2**42, the sum < 2**53: exact
  }
  const i64 ss = static_cast<i64>(hsum_pd(ss4));
  const i64 sd = max64(isqrt((ss / d) << 8), 1);
  // y = floor((2 xc g + B / 2) / B) + bias, B = 2 (sd << 16) (rdiv2), clamped
  const double B = static_cast<double>(sd << (NORM_GAIN_BITS + 1)), inv = 1.0 / B;
  const __m256d Bv = _mm256_set1_pd(B), invv = _mm256_set1_pd(inv), half = _mm256_set1_pd(static_cast<double>(sd << NORM_GAIN_BITS));
  const __m256d limit = _mm256_set1_pd(static_cast<double>(i64(1) << 50)), hi = _mm256_set1_pd(static_cast<double>(R_MAX));
  const __m256d lo = _mm256_set1_pd(static_cast<double>(-R_MAX)), one = _mm256_set1_pd(1.0), zero = _mm256_setzero_pd();
  const __m256d sign = _mm256_set1_pd(-0.0);
  __m256d too_big = _mm256_setzero_pd();
  for (i64 i = 0; i < d; i += 4) {
    const __m256d xc = _mm256_sub_pd(i64_to_f64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))), meanv);
    const __m256d p = _mm256_mul_pd(xc, i64_to_f64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + i))));
    too_big = _mm256_or_pd(too_big, _mm256_cmp_pd(_mm256_andnot_pd(sign, p), limit, _CMP_GE_OQ));
    const __m256d v = _mm256_add_pd(_mm256_add_pd(p, p), half);        // < 2**52: exact
    __m256d q = _mm256_floor_pd(_mm256_mul_pd(v, invv));               // within one of the floor
    const __m256d r = _mm256_sub_pd(v, _mm256_mul_pd(q, Bv));          // exact: integers below 2**52
    q = _mm256_sub_pd(q, _mm256_and_pd(_mm256_cmp_pd(r, zero, _CMP_LT_OQ), one));
    q = _mm256_add_pd(q, _mm256_and_pd(_mm256_cmp_pd(r, Bv, _CMP_GE_OQ), one));
    const __m256d bias = i64_to_f64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i)));
    const __m256d out = _mm256_min_pd(_mm256_max_pd(_mm256_add_pd(q, bias), lo), hi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), f64_to_i64(out));
  }
  if (_mm256_movemask_pd(too_big) != 0) layer_norm_generic(x, g, b, d, y);
}
