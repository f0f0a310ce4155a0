// The neural model's inputs: its probability of each bit (exact subtree sums of its integer
// frequencies), stretched; a confidence-weighted copy; and an APM of it by the order-1 context
// (the contract atop stage.h says how).
#pragma once

#include <algorithm>
#include <cstdlib>

#include "common.h"
#include "stage/apm.h"
#include "stage/params.h"
#include "stage/tables.h"

namespace shazip::stage {

class NNInputs {
 public:
  NNInputs() = default;
  NNInputs(const Params& p, const Tables& tb) : on_(p.nn) {
    if (on_) apm_ = APM(tb, 65536);
  }
  int inputs() const { return on_ ? 3 : 0; }
  size_t bytes() const { return apm_.bytes(); }
  // the byte's subtree sums from the NN's 256 frequencies: tree[(1 << d) + v] = total of the byte
  // values whose top d bits are v
  void begin_byte(const i64* freq) {
    if (!on_) return;
    std::copy(freq, freq + 256, tree_ + 256);
    for (int d = 7; d >= 0; --d)
      for (int v = 0; v < (1 << d); ++v) tree_[(1 << d) + v] = tree_[(2 << d) + 2 * v] + tree_[(2 << d) + 2 * v + 1];
  }
  // the row of partial byte c0 after byte c1 (a hint only)
  void prefetch(int c0, u32 c1) const {
    if (on_) apm_.prefetch(size_t(c0) | c1 << 8);
  }
  // the bit's inputs (c0: 1 followed by the bits so far), appended to x
  void bit_inputs(const Tables& tb, int c0, u32 c1, i32* x, int& n) {
    if (!on_) return;
    const i64 s0 = tree_[2 * c0], s1 = tree_[2 * c0 + 1];
    const int s = tb.st(clampi((s1 * 65536 + (s0 + s1) / 2) / (s0 + s1), 1, P16_MAX));
    x[n] = s;
    x[n + 1] = clampi((i64(s) * std::abs(s)) >> 11, -ST_MAX, ST_MAX);
    x[n + 2] = tb.st(apm_.p16(s, size_t(c0) | c1 << 8));
    n += 3;
  }
  void update(int y) {
    if (on_) apm_.update(y);
  }

 private:
  bool on_ = false;
  APM apm_;
  i64 tree_[512] = {};
};


}  // namespace shazip::stage
