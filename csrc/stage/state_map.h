// Adaptive probabilities (P22 counters) by a small context.
#pragma once

#include <vector>
#include "common.h"
#include "stage/tables.h"

namespace shazip::stage {

// P22 counters indexed by a small context (a bit-history state, or a match state)
class StateMap {
 public:
  StateMap() = default;
  StateMap(size_t n, u32 init) : t_(n, init) {}
  int p16(size_t cx) const { return int(t_[cx] >> (COUNT_BITS + 6)); }
  void update(const Tables& tb, size_t cx, int y, int limit) { tb.update(t_[cx], y, limit); }
  std::vector<u32>& cells() { return t_; }

 private:
  std::vector<u32> t_;
};

}  // namespace shazip::stage
