// The stage's hashes of contexts (uint32/uint64 arithmetic wraps: defined).
#pragma once

#include <cstdint>
#include "common.h"

namespace shazip::stage {

inline u32 hash64(u64 x, u64 seed) {
  x ^= seed * 0x9E3779B97F4A7C15ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 32;
  return u32(x);
}
inline u32 hash32(u32 x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

}  // namespace shazip::stage
