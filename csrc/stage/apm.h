// Adaptive probability maps (SSE): a probability refined in a context.
#pragma once

#include <vector>
#include "common.h"
#include "stage/big_vector.h"
#include "stage/tables.h"

namespace shazip::stage {

// Adaptive probability map: refines a probability given a context by interpolating
// between 33 cells spaced one nat apart over the stretch domain
class APM {
 public:
  APM() = default;
  APM(const Tables& tb, size_t contexts) : t_(contexts * APM_CELLS) {
    for (size_t c = 0; c < contexts; ++c)
      for (int j = 0; j < APM_CELLS; ++j) t_[c * APM_CELLS + j] = tb.sq(256 * (j - 16)) << 6;
  }
  // P16 of context cx for stretch-domain input x; remembers the cell to train
  int p16(int x, size_t cx) {
    const int u = clampi(x, -ST_MAX, ST_MAX) + 4096;
    const int j = u >> 8, w = u & 255;
    const i32* c = &t_[cx * APM_CELLS + j];
    last_ = cx * APM_CELLS + j + (w >> 7);
    return int(((i64(c[0]) * (256 - w) + i64(c[1]) * w) >> 8) >> 6);
  }
  void prefetch(size_t cx) const {  // the row's 132 bytes span at most 3 cache lines
    const char* row = reinterpret_cast<const char*>(&t_[cx * APM_CELLS]);
    for (int b : {0, 64, APM_CELLS * 4 - 1}) __builtin_prefetch(row + b);
  }
  void update(int y) {
    i32& c = t_[last_];
    c += i32((((i64(y) << P22_BITS) - c)) >> APM_RATE);
  }
  BigVector<i32>& cells() { return t_; }
  size_t bytes() const { return t_.size() * sizeof(i32); }

 private:
  BigVector<i32> t_;
  size_t last_ = 0;
};

}  // namespace shazip::stage
