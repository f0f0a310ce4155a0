// NUMBER_ECHO: a number's digits as those of a recent number. Logs and records print a value again
// under another label and in another shape: a GC log's pause at "6414.452" s starts its workers at
// "6414452.2" ms three lines on, and its end is that start plus a little; an id, a port or a size
// comes back a few fields later. The match models need the bytes before a number to find it again,
// and the context models see a number's own digits only: neither knows that a number begun as
// "64" may go on as the "6414452" of a few numbers ago. This model keeps the lane's last numbers'
// digits (their points left out) and learns, by how many digits agree so far and by the text before
// the number, which of them the file's numbers go on as.
//
// CONTRACT (NUMBER_ECHO, named as in models.def, where its bit and stage version are; the rules every
// model keeps are atop stage.h):
//   numbers        a number is a run of digits in which a '.' followed by a digit is passed over (its
//                  digits are the run's with every such '.' left out: "6414.452" is 6414452; "10.0.0.1"
//                  is 10001); a byte that neither is a digit nor is a '.' after a digit, or a second
//                  '.' in a row, ends it (a '.' that ends it is not read again). A lane keeps the
//                  digits of its last ECHO_NUMBERS numbers ended, the first ECHO_DIGITS of each, ranked
//                  from 0 (the latest); a number's digits so far are counted past ECHO_DIGITS.
//   label          a lane's label is 0 where a number ends (the hash of '.' where a '.' ended it), and
//                  each byte outside a number makes it (label + byte + 1) * 0x9E3779B1 mod 2**32: the
//                  text since the last number (its header's, its field's name) hashed.
//   candidates     at a number's m-th digit (m >= 1 digits before it, m < ECHO_DIGITS): set = the
//                  ranks r whose number's first m digits are the number's so far; those of them
//                  with more than m digits are the candidates, each printing its (m+1)-th digit (the
//                  first digit has none: on prose they cost more than they saved). When the digit is
//                  read, where there were candidates, the least rank among them that printed it is
//                  learned, or ECHO_MISS where none did (digit_mass.h's counts, class
//                  (min(m, ECHO_PLACES) - 1) * 2**ECHO_LABEL_BITS + label's top ECHO_LABEL_BITS bits).
//   inputs         two after LINE_STEP's, digit_mass.h's from bit ECHO_FIRST_BIT, with c0 the bits
//                  so far: before a byte within a number (m >= 1 digits; the byte before a digit or
//                  a '.' passed over) with candidates, mass[d] = the sum of the class's counts of the
//                  candidates that print d, plus (its count of ECHO_MISS + 9) / 10 for each d.
#pragma once

#include <algorithm>
#include <array>

#include "common.h"
#include "stage/digit_mass.h"
#include "stage/lane.h"
#include "stage/params.h"
#include "stage/tables.h"

namespace shazip::stage {

constexpr size_t ECHO_MISS = ECHO_NUMBERS;  // the count of a digit no candidate printed
constexpr u32 ECHO_PLACES = 8;  // the counts by the digits so far, 1 .. 8 or more...
constexpr u32 ECHO_LABEL_BITS = 8;  // ... and by the text between the number and the one before
constexpr int ECHO_FIRST_BIT = 4;  // the inputs start once the bits so far are a digit's first four
static_assert(ECHO_NUMBERS <= 64, "a lane's set of ranks is a 64-bit mask");

class NumberEcho {
 public:
  NumberEcho() = default;
  explicit NumberEcho(const Params& p)
      : on_(p.has(NUMBER_ECHO)), counts_(on_ ? ECHO_PLACES << ECHO_LABEL_BITS : 0, ECHO_NUMBERS + 1),
        inputs_(ECHO_FIRST_BIT) {}
  int inputs() const { return 2 * on_; }

  // the bit's inputs (the digits' masses made at bit ECHO_FIRST_BIT, digit_mass.h)
  void bit_inputs(const Tables& tb, const Lane& L, int k, int c0, i32* x, int& count) {
    if (on_) inputs_.digit_inputs(tb, [&] { return masses(L.echoes); }, k, c0, x, count);
  }
  void update(const Tables& tb, int y) {
    if (on_) inputs_.update(tb, y);
  }
  // the lane's numbers after byte c; a digit's candidate learned
  void after_byte(Lane& L, int c) {
    if (!on_) return;
    Lane::Echoes& E = L.echoes;
    if (c >= '0' && c <= '9') {
      const u8 d = u8(c - '0');
      if (!E.in) E.in = true, E.set = E.kept;
      if (E.count < ECHO_DIGITS) {
        const u64 cand = candidates(E);
        if (cand) {
          u64 hit = 0;
          for (u64 s = cand; s && !hit; s &= s - 1)
            if (digit(E, __builtin_ctzll(s), E.count) == d) hit = s & -s;
          counts_.learn(echo_class(E), hit ? size_t(__builtin_ctzll(hit)) : ECHO_MISS);
        }
      }
      E.point = false;
      if (E.count < ECHO_DIGITS) {
        for (u64 s = E.set; s; s &= s - 1) {
          const int r = __builtin_ctzll(s);
          if (E.width[slot(E, r)] <= E.count || digit(E, r, E.count) != d) E.set &= ~(u64(1) << r);
        }
        E.digits[E.count] = d;
      }
      ++E.count;
      return;
    }
    if (c == '.' && E.in && !E.point) {
      E.point = true;
      return;
    }
    if (E.in) {  // the number is kept as rank 0
      E.head = (E.head + 1) % ECHO_NUMBERS;
      E.numbers[E.head] = E.digits;
      E.width[E.head] = u8(std::min(E.count, ECHO_DIGITS));
      E.kept = E.kept << 1 | 1;
      E.kept &= ~u64(0) >> (64 - ECHO_NUMBERS);  // the ranks kept
      E.label = E.point ? label_step(0, '.') : 0;  // the text after it begins with a '.' that ended it
      E.in = false, E.point = false, E.set = 0, E.count = 0;
    }
    E.label = label_step(E.label, c);
  }

 private:
  static size_t slot(const Lane::Echoes& E, int r) { return (E.head + ECHO_NUMBERS - u32(r)) % ECHO_NUMBERS; }
  static u8 digit(const Lane::Echoes& E, int r, u32 i) { return E.numbers[slot(E, r)][i]; }
  static u32 label_step(u32 h, int c) { return (h + u32(c) + 1) * 0x9E3779B1u; }
  static size_t echo_class(const Lane::Echoes& E) {
    return (std::min(E.count, ECHO_PLACES) - 1) << ECHO_LABEL_BITS | E.label >> (32 - ECHO_LABEL_BITS);
  }
  // the ranks of set with a digit after the number's so far (none outside a number, or before its first digit)
  static u64 candidates(const Lane::Echoes& E) {
    if (E.count == 0 || E.count >= ECHO_DIGITS) return 0;
    u64 cand = 0;
    for (u64 s = E.set; s; s &= s - 1)
      if (E.width[slot(E, __builtin_ctzll(s))] > E.count) cand |= s & -s;
    return cand;
  }
  DigitMass masses(const Lane::Echoes& E) const {
    DigitMass m;
    const u64 cand = candidates(E);
    if (!cand) return m;
    const u32* counts = counts_.of(echo_class(E));
    for (u64 s = cand; s; s &= s - 1) {
      const int r = __builtin_ctzll(s);
      m.add(digit(E, r, E.count), counts[r]);
    }
    for (u64 d = 0; d < 10; ++d) m.add(d, (counts[ECHO_MISS] + 9) / 10);
    m.close();
    return m;
  }

  bool on_ = false;
  CandidateCounts counts_;  // the ranks' counts (and ECHO_MISS's) by the digits so far and the label
  DigitInputs inputs_;
};

}  // namespace shazip::stage
