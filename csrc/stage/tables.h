// The stage's shared integer tables: squash (given by Python), its exact inverse, counter
// reciprocals and the bit-history state machine.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.h"
#include "stage/constants.h"

namespace shazip::stage {


// Bit histories: a state stands for a pair of bit counts (n0, n1), bounded so that 256
// states suffice, plus the last bit where there is room; an observed bit increments its
// count and discounts the other, so the state tracks recent, not lifetime, statistics.
// States are numbered by increasing n0 + n1, which makes the number a usable priority.
// The bounds and discount are zpaq's; the construction is a plain enumeration.
class BitHistory {
 public:
  BitHistory() {
    constexpr int N = 50;
    std::vector<int> id(N * N * 2, -1);  // (n0, n1, last bit) -> state
    int s = 0;
    for (int total = 0; total < N; ++total)
      for (int n1 = 0; n1 <= total; ++n1) {
        const int n0 = total - n1, k = slots(n0, n1);
        if (!k) continue;
        id[(n0 * N + n1) * 2] = s;
        id[(n0 * N + n1) * 2 + 1] = s + k - 1;
        s += k;
      }
    if (s > 256) throw std::logic_error("bit-history states do not fit a byte");
    states_ = s;
    for (int n0 = 0; n0 < N; ++n0)
      for (int n1 = 0; n1 < N; ++n1)
        for (int last = 0; last < slots(n0, n1); ++last) {
          const int st = id[(n0 * N + n1) * 2 + last];
          n0_[st] = u8(n0);
          n1_[st] = u8(n1);
          for (int y = 0; y < 2; ++y) {
            int a = n0, b = n1;
            advance(a, b, y);
            next_[st][y] = u8(id[(a * N + b) * 2 + y]);
          }
        }
  }
  u8 next(int state, int y) const { return next_[state][y]; }
  int n0(int state) const { return n0_[state]; }
  int n1(int state) const { return n1_[state]; }
  int states() const { return states_; }

 private:
  // how many states the counts (a, b) get: 0 (not representable), 1, or 2 (with the last bit)
  static int slots(int a, int b) {
    if (a < b) std::swap(a, b);
    static constexpr int bound[6] = {20, 48, 15, 8, 6, 5};  // larger count allowed, by smaller
    if (b >= 6 || a > bound[b]) return 0;
    return 1 + (b > 0 && a + b <= 17);
  }
  static int discount(int n) {
    return (n >= 1) + (n >= 2) + (n >= 3) + (n >= 4) + (n >= 5) + (n >= 7) + (n >= 8);
  }
  // counts after bit y: its count up, the other's discounted, then scaled back into range
  static void advance(int& zeros, int& ones, int y) {
    if (zeros < ones) {  // symmetric: handled with the roles swapped
      advance(ones, zeros, 1 - y);
      return;
    }
    if (y) {
      ++ones;
      zeros = discount(zeros);
    } else {
      ++zeros;
      ones = discount(ones);
    }
    while (!slots(zeros, ones)) {
      if (ones < 2) {
        --zeros;
      } else {
        zeros = (zeros * (ones - 1) + ones / 2) / ones;
        --ones;
      }
    }
  }
  u8 next_[256][2] = {};
  u8 n0_[256] = {}, n1_[256] = {};
  int states_ = 0;
};

struct Tables {
  std::vector<u16> squash;   // [x + ST_MAX] -> P16 (16 KB: read a dozen times a bit, it stays in L1)
  std::vector<int16_t> stretch;  // [P16] -> x
  std::array<i32, COUNT_LIMIT_MAX + 1> recip{};
  BitHistory history;

  explicit Tables(const std::vector<i64>& sq) {
    if (int(sq.size()) != SQUASH_SIZE) throw std::invalid_argument("squash table needs 8191 entries");
    squash.resize(SQUASH_SIZE);
    for (int i = 0; i < SQUASH_SIZE; ++i) {
      if (sq[i] < 1 || sq[i] > P16_MAX || (i && sq[i] < sq[i - 1]))
        throw std::invalid_argument("squash table must be non-decreasing within [1, 65535]");
      squash[i] = u16(sq[i]);
    }
    stretch.assign(P16_MAX + 1, int16_t(ST_MAX));
    for (int p = 32768, x = -ST_MAX; p <= P16_MAX; ++p) {  // upper half: smallest x reaching p
      while (x <= ST_MAX && squash[x + ST_MAX] < p) ++x;
      if (x > ST_MAX) break;  // the rest keep ST_MAX
      stretch[p] = int16_t(x);
    }
    for (int p = 32767, x = ST_MAX; p >= 0; --p) {  // lower half: largest x not above p
      while (x >= -ST_MAX && squash[x + ST_MAX] > p) --x;
      stretch[p] = int16_t(std::max(x, -ST_MAX));
    }
    for (int n = 0; n <= COUNT_LIMIT_MAX; ++n) recip[n] = 131072 / (2 * n + 3);
  }
  int sq(int x) const { return squash[clampi(x, -ST_MAX, ST_MAX) + ST_MAX]; }
  int st(int p16) const { return stretch[clampi(p16, 0, P16_MAX)]; }
  // the adaptive counter (see the contract): P22 << 10 | n
  void update(u32& cell, int y, int limit) const {
    const u32 n = cell & COUNT_MASK;
    const i64 p = cell >> COUNT_BITS;
    const i64 np = p + ((((i64(y) << P22_BITS) - p) * recip[n]) >> 16);
    cell = u32(np << COUNT_BITS) | std::min<u32>(n + 1, u32(limit));
  }
};


}  // namespace shazip::stage
