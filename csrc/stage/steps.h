// LINE_STEP: a line's numbers as the line above's plus a small step. A log's times, pids, counters
// and sequence numbers go up by a little from line to line ("06:55:46" under "06:55:44", "sshd[24202]"
// under "sshd[24200]"); the context models see the line above's digits but cannot add. This model
// takes the i-th number of the line above, prints it plus each step of a range, and learns, by i,
// which steps the file's numbers take.
//
// CONTRACT (LINE_STEP, named as in models.def, where its bit and stage version are; the rules every
// model keeps are atop stage.h):
//   numbers        a number is a run of digits; a lane counts a line's numbers from 0 (every run, each
//                  ended by a non-digit), and keeps the first STEP_NUMBERS of the line and of the line
//                  above (a '\n' makes this line's the line above's): each one's value and width (its
//                  digits, leading zeros included), none where it has more than STEP_DIGITS digits.
//   candidates     for number i of a line where the line above kept a number i of value a and width w:
//                  for each step j in [-STEP_BELOW, STEP_ABOVE] with a + j >= 0, the printing of a + j
//                  (its digits, padded with leading zeros to w where w is more than a's digits). set =
//                  those whose printing begins with number i's digits so far (all of them before its
//                  first). When a byte ends number i, the smallest step of set whose printing is the
//                  number is learned (digit_mass.h's counts, class min(i, STEP_NUMBERS - 1) * 2 + same,
//                  same: the line's number before it printed its above's value and width; false at a
//                  line's start), and same becomes whether number i did.
//   inputs         two after FLOAT_TAIL's, digit_mass.h's from bit STEP_FIRST_BIT (where the bits so far
//                  say the byte is '0'-'?': within a number or where one may start, the digits come
//                  from here): before a byte that goes on number i, or would start number i (the byte
//                  before is no digit), each candidate of set whose printing is longer than the number's
//                  digits so far prints its next digit.
#pragma once

#include <algorithm>
#include <array>

#include "common.h"
#include "stage/digit_mass.h"
#include "stage/floats.h"
#include "stage/lane.h"
#include "stage/params.h"
#include "stage/tables.h"

namespace shazip::stage {

constexpr int STEP_BELOW = 16, STEP_ABOVE = 47;  // the steps: a number above minus 16 .. plus 47
constexpr int STEPS = STEP_BELOW + STEP_ABOVE + 1;
constexpr u32 STEP_DIGITS = 18;  // a number's digits kept (10**18 < 2**63)
constexpr size_t STEP_CLASSES = 2 * STEP_NUMBERS;  // the steps' counts, by the number's place in its line and whether the one before kept its above
constexpr int STEP_FIRST_BIT = 4;  // the inputs start once the bits so far are a digit's first four
static_assert(STEPS <= 64, "a lane's set of steps is a 64-bit mask");

// digits of v (1 for 0)
inline u32 digit_count(u64 v) {
  u32 n = 1;
  while (v >= 10 && n < 20) v /= 10, ++n;
  return n;
}

class LineStep {
 public:
  LineStep() = default;
  explicit LineStep(const Params& p)
      : on_(p.has(LINE_STEP)), counts_(on_ ? STEP_CLASSES : 0, STEPS), inputs_(STEP_FIRST_BIT) {}
  int inputs() const { return 2 * on_; }

  // the bit's inputs (the digits' masses made at bit STEP_FIRST_BIT, digit_mass.h)
  void bit_inputs(const Tables& tb, const Lane& L, int k, int c0, i32* x, int& count) {
    if (on_) inputs_.digit_inputs(tb, [&] { return masses(L.steps); }, k, c0, x, count);
  }
  void update(const Tables& tb, int y) {
    if (on_) inputs_.update(tb, y);
  }
  // the lane's numbers after byte c; an ended number's step learned
  void after_byte(Lane& L, int c) {
    if (!on_) return;
    Lane::Steps& S = L.steps;
    if (c >= '0' && c <= '9') {
      if (!S.in) {
        S.in = true, S.value = 0, S.width = 0;
        S.set = S.count < S.above_count && S.above_width[S.count] ? all_steps(S) : 0;
      }
      if (S.width < STEP_DIGITS) S.value = S.value * 10 + u64(c - '0');
      ++S.width;
      S.set = S.width <= STEP_DIGITS ? agreeing(S, S.set) : 0;
      return;
    }
    if (S.in) {
      for (u64 s = S.set; s; s &= s - 1) {  // the first step whose printing is the number
        const int j = __builtin_ctzll(s);
        if (printed_width(S, j) == S.width) {
          counts_.learn(step_class(S), size_t(j));
          break;
        }
      }
      S.same = S.set && candidate(S, STEP_BELOW) == S.value && printed_width(S, STEP_BELOW) == S.width;
      if (S.count < STEP_NUMBERS) {
        S.line_value[S.count] = S.value;
        S.line_width[S.count] = S.width <= STEP_DIGITS ? u8(S.width) : 0;
      }
      ++S.count;
      S.in = false, S.set = 0;
    }
    if (c == '\n') {
      S.above_value = S.line_value, S.above_width = S.line_width;
      S.above_count = std::min<u32>(S.count, STEP_NUMBERS);
      S.count = 0;
      S.same = false;
    }
  }

 private:
  static size_t step_class(const Lane::Steps& S) {
    return std::min<size_t>(S.count, STEP_NUMBERS - 1) * 2 + S.same;
  }
  // the value of step j's candidate (a + j, at least 0: the set holds no other)
  static u64 candidate(const Lane::Steps& S, int j) { return S.above_value[S.count] + u64(i64(j) - STEP_BELOW); }
  static u32 printed_width(const Lane::Steps& S, int j) {
    const u64 a = S.above_value[S.count];
    const u32 w = S.above_width[S.count], n = digit_count(candidate(S, j));
    return w > digit_count(a) ? std::max(w, n) : n;
  }
  // the steps whose candidates are at least 0 (number i = S.count has an above)
  static u64 all_steps(const Lane::Steps& S) {
    const u64 a = S.above_value[S.count];
    const int lowest = a >= u64(STEP_BELOW) ? 0 : STEP_BELOW - int(a);
    return (~u64(0) >> (64 - STEPS)) & ~((u64(1) << lowest) - 1);
  }
  // the steps of `set` whose printing begins with the number's digits so far
  static u64 agreeing(const Lane::Steps& S, u64 set) {
    for (u64 s = set; s; s &= s - 1) {
      const int j = __builtin_ctzll(s);
      const u32 w = printed_width(S, j);
      if (w < S.width || candidate(S, j) / pow10(int(w - S.width)) != S.value) set &= ~(u64(1) << j);
    }
    return set;
  }
  DigitMass masses(const Lane::Steps& S) const {
    DigitMass m;
    u64 set = S.in ? S.set : S.count < S.above_count && S.above_width[S.count] ? all_steps(S) : 0;
    const u32 width = S.in ? S.width : 0;
    if (width >= STEP_DIGITS) return m;
    const u32* counts = counts_.of(step_class(S));
    for (; set; set &= set - 1) {
      const int j = __builtin_ctzll(set);
      const u32 w = printed_width(S, j);
      if (w > width) m.add(candidate(S, j) / pow10(int(w - width - 1)) % 10, counts[j]);
    }
    m.close();
    return m;
  }

  bool on_ = false;
  CandidateCounts counts_;  // the steps' counts by the number's place in its line and `same`
  DigitInputs inputs_;
};

}  // namespace shazip::stage
