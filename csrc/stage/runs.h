// RUNS: each hashed context's last byte and how many times in a row it came (the contract atop
// stage.h says how): one run table per hashed context model, one map for their inputs.
#pragma once

#include <algorithm>

#include "common.h"

namespace shazip::stage {

constexpr int RUN_BITS_BELOW = 5;  // a model's run table has 2**(table_bits - this) entries
constexpr u32 RUN_COUNTS = 16;  // the map's contexts tell runs of 1..14 and 15 or more apart

// A run entry after byte c in its context (chk: the context's check byte)
inline u32 run_after(u32 e, u32 chk, int c) {
  const u32 b1 = e >> 16 & 255, n = e & 255;
  if (e >> 24 != chk || n == 0) return chk << 24 | u32(c) << 16 | u32(c) << 8 | 1;
  if (b1 == u32(c)) return e - n + std::min<u32>(n + 1, 255);
  return chk << 24 | u32(c) << 16 | b1 << 8 | 1;
}

// What model m's run entry e (its context's check byte chk) predicts for the byte
struct RunGuess {
  int byte = -1;   // the last byte seen in the context (-1: none)
  int base = 0;    // its map context but the bit position's group and the expected bit
  int shift = 0;   // 2 when the byte before it differed, else 0
};
inline RunGuess run_guess(u32 e, u32 chk, int m) {
  const u32 b1 = e >> 16 & 255, b2 = e >> 8 & 255, n = e & 255;
  if (e >> 24 != chk || n == 0) return {};
  const int u = b2 != b1;  // the map context is 256 m + ((min(n, 15) * 4 + group) * 2 + u) * 2 + bit
  return {int(b1), 256 * m + int(std::min(n, RUN_COUNTS - 1)) * 16 + u * 2, u ? 2 : 0};
}


}  // namespace shazip::stage
