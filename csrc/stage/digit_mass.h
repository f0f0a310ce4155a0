// A number's next digit from weighted candidates: the models that know a number's possible printings
// (FLOAT_TAIL: the doubles about a short decimal; LINE_STEP: the line above's number plus a step;
// NUMBER_ECHO: the digits of a recent number) learn how often each candidate is the one printed, and
// give the digits' masses as two inputs.
//
// CONTRACT (the rules every model keeps are atop stage.h):
//   counts         each model keeps counts[class][j] for its candidates j by a class of its own,
//                  starting at 1; learning j adds MASS_STEP, and where the class's counts then sum
//                  above MASS_LIMIT each becomes (count + 1) / 2.
//   mass           before a byte the model names, for the candidates still agreeing with the number
//                  so far, the digit each prints next (none where its printing ends); mass[d] = the sum
//                  of their counts over those printing d (and what the model's own rules add), plus
//                  floor = (the sum over every d) / MASS_FLOOR + 1 for each digit; none where the sum
//                  is 0.
//   inputs         two. At bit k >= the model's first bit, with c0 the bits so far, over the digits
//                  whose byte '0' + d agrees with c0: p = clamp(floor((m1 * 65536 + t / 2) / t), 1,
//                  65535), t their mass, m1 that of those whose bit k is 1; input 1 = stretch[p], input
//                  2 = the stretch of the model's own map's P16 in context (input 1 + 4096) >> 8 (cells
//                  start at 2**21), which learns the bit. Without a mass, before the first bit, or
//                  where no digit agrees with c0: both 0, and the map learns nothing.
#pragma once

#include <array>
#include <vector>

#include "common.h"
#include "stage/constants.h"
#include "stage/state_map.h"
#include "stage/tables.h"

namespace shazip::stage {

constexpr u32 MASS_STEP = 32, MASS_LIMIT = 1 << 16;  // a learned candidate's step, and a class's sum before halving
constexpr u64 MASS_FLOOR = 64;  // each digit's mass beyond the candidates': this share of theirs
constexpr size_t MASS_MAP = 32;  // the map's contexts: bands of input 1 (stretch / 256)

// The next digit's masses (none: total 0)
struct DigitMass {
  std::array<u64, 10> mass{};
  u64 total = 0;
  void add(u64 digit, u64 count) {
    mass[digit] += count;
    total += count;
  }
  // the floor under every digit, once the candidates are in
  void close() {
    if (total == 0) return;
    const u64 floor = total / MASS_FLOOR + 1;
    for (u64& m : mass) m += floor;
    total += 10 * floor;
  }
};

// Counts of candidates by class
class CandidateCounts {
 public:
  CandidateCounts() = default;
  CandidateCounts(size_t classes, size_t candidates)
      : n_(candidates), counts_(classes * candidates, 1), sums_(classes, u32(candidates)) {}
  const u32* of(size_t cls) const { return &counts_[cls * n_]; }
  void learn(size_t cls, size_t j) {
    u32* counts = &counts_[cls * n_];
    counts[j] += MASS_STEP;
    sums_[cls] += MASS_STEP;
    if (sums_[cls] > MASS_LIMIT) {
      sums_[cls] = 0;
      for (size_t i = 0; i < n_; ++i) sums_[cls] += counts[i] = (counts[i] + 1) / 2;
    }
  }

 private:
  size_t n_ = 0;
  std::vector<u32> counts_, sums_;
};

// The two inputs of a DigitMass, from bit `first` of a byte on
class DigitInputs {
 public:
  DigitInputs() = default;
  explicit DigitInputs(int first) : first_(first), map_(MASS_MAP, u32(1) << (P22_BITS - 1 + COUNT_BITS)) {}
  void bit_inputs(const Tables& tb, const DigitMass& m, int k, int c0, i32* x, int& count) {
    u64 all = 0, ones = 0;
    for (int d = 0; d < 10 && m.total && k >= first_; ++d)
      if (((('0' + d) | 256) >> (8 - k)) == c0) {
        all += m.mass[size_t(d)];
        ones += m.mass[size_t(d)] * u64((('0' + d) >> (7 - k)) & 1);
      }
    const int st = all ? tb.st(clampi(int((ones * 65536 + all / 2) / all), 1, P16_MAX)) : 0;
    cx_ = all ? size_t((st + 4096) >> 8) : NONE;
    x[count++] = st;
    x[count++] = all ? tb.st(map_.p16(cx_)) : 0;
  }
  // the same, for a model whose masses `make()` gives once a byte, at the first bit, and only where
  // the bits so far are a digit's (else no digit agrees with them: the inputs are 0 whatever the masses)
  template <class Make>
  void digit_inputs(const Tables& tb, Make&& make, int k, int c0, i32* x, int& count) {
    if (k == first_) held_ = c0 == (('0' | 256) >> (8 - first_)) ? make() : DigitMass{};
    bit_inputs(tb, k >= first_ ? held_ : DigitMass{}, k, c0, x, count);
  }
  void update(const Tables& tb, int y) {
    if (cx_ != NONE) map_.update(tb, cx_, y, COUNT_LIMIT_MAX);
  }

 private:
  static constexpr size_t NONE = MASS_MAP;  // cx_ without inputs
  int first_ = 0;
  StateMap map_;  // by input 1's band
  size_t cx_ = NONE;
  DigitMass held_;  // digit_inputs': this byte's masses, from the first bit on
};

}  // namespace shazip::stage
