// The context models' hashed tables of bit-history states.
#pragma once

#include <cstring>
#include <vector>
#include "common.h"
#include "stage/big_vector.h"

namespace shazip::stage {

// A hash table of 16-byte buckets, one per (context, nibble): byte 0 is a check byte, bytes
// 1..15 the bit-history states of the nibble's 15 binary-tree nodes (byte 1, the nibble's
// first node, doubles as the bucket's priority). A lookup probes 3 buckets of one 64-byte
// line and, on a miss, clears the one of lowest priority.
class BucketTable {
 public:
  explicit BucketTable(int bits) : lines_(size_t(1) << (bits - 6)), mask_((u32(1) << (bits - 4)) - 1) {}
  u8* find(u32 h) {
    const u8 check = u8(h >> 24);
    const u32 i = h & mask_;
    u8* b[3] = {bucket(i), bucket(i ^ 1), bucket(i ^ 2)};
    for (u8* p : b)
      if (p[0] == check) return p;
    u8* victim = b[0];
    if (b[1][1] < victim[1]) victim = b[1];
    if (b[2][1] < victim[1]) victim = b[2];
    std::memset(victim, 0, 16);
    victim[0] = check;
    return victim;
  }
  size_t bytes() const { return lines_.size() * sizeof(Line); }
  void prefetch(u32 h) const { __builtin_prefetch(&lines_[(h & mask_) >> 2]); }

 private:
  struct alignas(64) Line {
    u8 b[64];
  };
  u8* bucket(u32 i) { return lines_[i >> 2].b + (i & 3) * 16; }
  BigVector<Line> lines_;
  u32 mask_;
};

}  // namespace shazip::stage
