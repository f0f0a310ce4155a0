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
  // the byte's frequencies (valid until the byte is coded); each bit sums the half of the bits so
  // far's range it needs (the other is what is left of the range's sum)
  void begin_byte(const i64* freq) {
    if (!on_) return;
    freq_ = freq;
    node_ = -1;
  }
  // the row of partial byte c0 after byte c1 (a hint only)
  void prefetch(int c0, u32 c1) const {
    if (on_) apm_.prefetch(size_t(c0) | c1 << 8);
  }
  // the bit's inputs (c0: 1 followed by the bits so far), appended to x
  void bit_inputs(const Tables& tb, int c0, u32 c1, i32* x, int& n) {
    if (!on_) return;
    const int k = 31 - __builtin_clz(unsigned(c0)), width = 128 >> k;  // bit k: c0's values span 2 width
    const i64* lo = freq_ + ((c0 << (8 - k)) & 255);
    const i64 s0 = range_sum(lo, width);
    const i64 s1 = node_ < 0 ? range_sum(lo + width, width) : node_ - s0;  // bit 0: the byte's upper half
    s0_ = s0, s1_ = s1;
    const int s = tb.st(clampi((s1 * 65536 + (s0 + s1) / 2) / (s0 + s1), 1, P16_MAX));
    x[n] = s;
    x[n + 1] = clampi((i64(s) * std::abs(s)) >> 11, -ST_MAX, ST_MAX);
    x[n + 2] = tb.st(apm_.p16(s, size_t(c0) | c1 << 8));
    n += 3;
  }
  void update(int y) {
    if (!on_) return;
    apm_.update(y);
    node_ = y ? s1_ : s0_;  // the sum of the range the bits so far leave
  }

 private:
  bool on_ = false;
  APM apm_;
  static i64 range_sum(const i64* f, int n) {
    i64 s = 0;
    for (int i = 0; i < n; ++i) s += f[i];
    return s;
  }
  const i64* freq_ = nullptr;
  i64 node_ = -1, s0_ = 0, s1_ = 0;  // the bits so far's range's sum (-1: at bit 0), the bit's halves'
};


}  // namespace shazip::stage
