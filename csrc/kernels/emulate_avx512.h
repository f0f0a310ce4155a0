// Tests only, never part of the build: the AVX-512 intrinsics avx512vnni.cpp uses, emulated in
// portable C++ by SIMDe (Debian/Ubuntu: libsimde-dev), plus those SIMDe 0.7 lacks or gets wrong.
// Compiling the core with -DSHAZIP_EMULATE_AVX512 builds avx512vnni.cpp on this header instead of the real
// instructions and reports the path available, so tests/test_core_model.py checks its integers on
// any x86-64 CPU (slowly). E.g. build csrc/**/*.cpp with that flag into a scratch _core, and run
// the tests with sys.modules["shazip._core"] set to it before shazip is imported.
#pragma once

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include <cmath>
#include <cstdint>
#include <cstring>

typedef simde__mmask16 __mmask16;
typedef simde__mmask32 __mmask32;
typedef simde__mmask64 __mmask64;
typedef simde__mmask8 __mmask8;

static inline simde__m512i _mm512_shuffle_i64x2(simde__m512i a, simde__m512i b, int imm) {
  int64_t x[8], y[8], r[8];
  std::memcpy(x, &a, 64);
  std::memcpy(y, &b, 64);
  for (int l = 0; l < 4; ++l) {
    const int sel = (imm >> (2 * l)) & 3;
    const int64_t* src = l < 2 ? x : y;
    r[2 * l] = src[2 * sel];
    r[2 * l + 1] = src[2 * sel + 1];
  }
  simde__m512i o;
  std::memcpy(&o, r, 64);
  return o;
}

static inline simde__m512i _mm512_maskz_loadu_epi8(__mmask64 m, const void* p) {
  int8_t r[64] = {0};
  for (int i = 0; i < 64; ++i)
    if ((m >> i) & 1) r[i] = static_cast<const int8_t*>(p)[i];
  simde__m512i o;
  std::memcpy(&o, r, 64);
  return o;
}

static inline simde__m256i _mm256_maskz_loadu_epi8(__mmask32 m, const void* p) {
  int8_t r[32] = {0};
  for (int i = 0; i < 32; ++i)
    if ((m >> i) & 1) r[i] = static_cast<const int8_t*>(p)[i];
  simde__m256i o;
  std::memcpy(&o, r, 32);
  return o;
}

static inline void _mm512_mask_storeu_epi32(void* p, __mmask16 m, simde__m512i v) {
  int32_t r[16];
  std::memcpy(r, &v, 64);
  for (int i = 0; i < 16; ++i)
    if ((m >> i) & 1) static_cast<int32_t*>(p)[i] = r[i];
}

static inline simde__m512i _mm512_maskz_loadu_epi32(__mmask16 m, const void* p) {
  int32_t r[16] = {0};
  for (int i = 0; i < 16; ++i)
    if ((m >> i) & 1) std::memcpy(&r[i], static_cast<const char*>(p) + 4 * i, 4);
  simde__m512i o;
  std::memcpy(&o, r, 64);
  return o;
}

static inline simde__m512i _mm512_srai_epi32(simde__m512i v, unsigned int s) {
  int32_t r[16];
  std::memcpy(r, &v, 64);
  for (int i = 0; i < 16; ++i) r[i] = s > 31 ? (r[i] < 0 ? -1 : 0) : r[i] >> s;
  std::memcpy(&v, r, 64);
  return v;
}

static inline simde__m512i _mm512_cvtepi32_epi64(simde__m256i v) {
  int32_t a[8];
  int64_t r[8];
  std::memcpy(a, &v, 32);
  for (int i = 0; i < 8; ++i) r[i] = a[i];
  simde__m512i o;
  std::memcpy(&o, r, 64);
  return o;
}

static inline int64_t _mm512_reduce_add_epi64(simde__m512i v) {
  int64_t r[8], s = 0;
  std::memcpy(r, &v, 64);
  for (int i = 0; i < 8; ++i) s += r[i];
  return s;
}

static inline int64_t _mm512_reduce_max_epi64(simde__m512i v) {
  int64_t a[8];
  std::memcpy(a, &v, sizeof a);
  int64_t m = a[0];
  for (int64_t x : a) m = x > m ? x : m;
  return m;
}

static inline simde__m128i _mm512_cvtepi64_epi8(simde__m512i v) {  // truncation, as vpmovqb
  int64_t a[8];
  int8_t r[16] = {};
  std::memcpy(a, &v, sizeof a);
  for (int i = 0; i < 8; ++i) r[i] = static_cast<int8_t>(a[i]);
  simde__m128i out;
  std::memcpy(&out, r, sizeof out);
  return out;
}

static inline simde__m512d _mm512_cvtepi64_pd(simde__m512i v) {
  int64_t a[8];
  double r[8];
  std::memcpy(a, &v, 64);
  for (int i = 0; i < 8; ++i) r[i] = double(a[i]);
  simde__m512d o;
  std::memcpy(&o, r, 64);
  return o;
}

#ifndef _MM_FROUND_NO_EXC
#define _MM_FROUND_NO_EXC SIMDE_MM_FROUND_NO_EXC
#endif

static inline double _mm512_reduce_add_pd(simde__m512d v) {
  double r[8], s = 0;
  std::memcpy(r, &v, 64);
  for (int i = 0; i < 8; ++i) s += r[i];
  return s;
}

static inline simde__m512i _mm512_cvtpd_epi64(simde__m512d v) {  // the values are whole numbers here
  double a[8];
  int64_t r[8];
  std::memcpy(a, &v, 64);
  for (int i = 0; i < 8; ++i) r[i] = static_cast<int64_t>(a[i]);
  simde__m512i o;
  std::memcpy(&o, r, 64);
  return o;
}

// SIMDe 0.7.4's roundscale gave other values (norm512.h's LayerNorm one off on negative outputs):
// floor, ceil, truncate or nearest by hand
#undef _mm512_roundscale_pd
static inline simde__m512d _mm512_roundscale_pd(simde__m512d v, int imm) {
  double r[8];
  std::memcpy(r, &v, 64);
  for (int i = 0; i < 8; ++i)
    switch (imm & 3) {
      case 0: r[i] = std::nearbyint(r[i]); break;
      case 1: r[i] = std::floor(r[i]); break;
      case 2: r[i] = std::ceil(r[i]); break;
      default: r[i] = std::trunc(r[i]); break;
    }
  std::memcpy(&v, r, 64);
  return v;
}
