// Tests only, never part of the build: the AVX-512 intrinsics avx512vnni.cpp uses, emulated in
// portable C++ by SIMDe (Debian/Ubuntu: libsimde-dev), plus the few SIMDe 0.7 lacks. Compiling
// the core with -DSHAZIP_EMULATE_AVX512 builds avx512vnni.cpp on this header instead of the real
// instructions and reports the path available, so tests/test_core_model.py checks its integers on
// any x86-64 CPU (slowly). E.g. build csrc/**/*.cpp with that flag into a scratch _core, and run
// the tests with sys.modules["shazip._core"] set to it before shazip is imported.
#pragma once

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include <cstdint>
#include <cstring>

typedef simde__mmask16 __mmask16;
typedef simde__mmask32 __mmask32;
typedef simde__mmask64 __mmask64;

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
