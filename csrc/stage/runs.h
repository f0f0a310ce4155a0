// RUNS: each hashed context's last byte and how many times in a row it came (the contract below
// says how): one run table per hashed context model, one map for their inputs.
//
// CONTRACT: RUNS (models.def has its bit and stage version); the rules every model keeps are
// atop stage.h.
//   RUNS           every hashed context model (all but order 1's direct table) keeps a run table of
//                  2**(table_bits - 5) u32 entries chk << 24 | b1 << 16 | b2 << 8 | n at index ctx >> (37 -
//                  table_bits), chk = (ctx >> 2) & 255, ctx the model's context hash for the byte: the last
//                  byte seen in that context (b1), the different one before it (b2; b1 if none) and how
//                  many times in a row b1 came (n in 1..255; 0: empty). After byte c an entry with another
//                  chk or n = 0 becomes chk, c, c, 1; else b1 = c makes n = min(n + 1, 255); else it becomes
//                  chk, c, b1, 1. One input per such model, after the context models' (in their order):
//                  while the entry's chk is the context's, n > 0 and b1 agrees with the bits so far c0, the
//                  stretch of the run map's P16 in context 256 * m + ((min(n, 15) * 4 + g) * 2 + u) * 2 + e
//                  (m: the model's place among them; g: 0 at bit 0, 1 at bit 1, 2 at bits 2-4, 3 at bits
//                  5-7; u: b2 != b1; e: b1's bit k), floor-divided by 4 when u; else 0 and no update of the
//                  map. Its cells start at 2**21. A context's last byte and how surely it repeats, which its
//                  bit histories (one per bit of the byte) see only in parts.
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
