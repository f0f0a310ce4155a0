// The block's history: a ring of the last 2**history_bits bytes of every lane, by global position,
// and what of it the decoder knows at a given byte (the match models and the contexts that look
// back read it only there).
#pragma once

#include <vector>

#include "common.h"
#include "stage/big_vector.h"
#include "stage/lane.h"

namespace shazip::stage {

// Where a byte is being coded: which history bytes are already known to the decoder (lane l of
// the block holds positions base + l * span .. and has coded its first `coded` of them)
struct Where {
  u64 base, span, lanes;
  const std::vector<Lane>* lane;
};

class History {
 public:
  History() = default;
  // kept: whether any model reads the bytes (else only positions are reasoned about)
  History(int bits, bool kept) : bits_(bits), ring_(kept ? size_t(1) << bits : 0) {}
  bool kept() const { return !ring_.empty(); }
  // the byte at position p (valid(p) must hold)
  int operator[](u64 p) const { return ring_[p & mask()]; }
  // the byte at position p where the decoder knows it, else -1
  int byte(u64 p, const Where& at) const { return valid(p, at) ? int(ring_[p & mask()]) : -1; }
  void put(u64 p, int c) {
    if (kept()) ring_[p & mask()] = u8(c);
  }
  // may position p be read: written (in an earlier block or this one's known part) and not yet
  // overwritten by a later position sharing its slot
  bool valid(u64 p, const Where& at) const {
    const u64 size = u64(1) << bits_, end = at.base + at.span * at.lanes;
    if (p >= at.base && (p >= end || !known(p, at))) return false;
    const u64 later = p + size;
    if (later < at.base) return false;
    return !(later < end && known(later, at));
  }
  size_t bytes() const { return ring_.size(); }

 private:
  // written in this block? (its lane has coded the position's offset)
  static bool known(u64 p, const Where& at) {
    const u64 o = p - at.base, lane = o / at.span;
    return lane < at.lanes && o % at.span < (*at.lane)[lane].coded;
  }
  u64 mask() const { return (u64(1) << bits_) - 1; }
  int bits_ = 10;
  BigVector<u8> ring_;
};


}  // namespace shazip::stage
