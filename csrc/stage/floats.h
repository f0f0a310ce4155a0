// FLOAT_TAIL: the digits a program prints for a binary double at full precision (C's "%.17g" and
// the JSON writers built on it): "-65.613616999999977", "43.420273000000009". A value computed from
// a short decimal and printed with 17 significant digits ends in a run of 0s or 9s and a tail that
// the context models see as noise (2.3 bits a digit on a GeoJSON file). The tail is the printing
// of a double a few units in the last place (ulps) from the one nearest to the short decimal: this
// model computes the printings of the doubles around it exactly and learns how far from the nearest
// the file's numbers fall (on that file the offset has 4.2 bits of entropy against the tail's 5).
//
// CONTRACT (FLOAT_TAIL, named as in models.def, where its bit and stage version are; the rules every
// model keeps are atop stage.h):
//   decimal        a lane's current number: a digit starts one (not after a letter, digit or '.');
//                  digits and one '.' after a digit go on with it; any other byte ends it. digits =
//                  its digits as an integer (leading zeros add nothing), count = its significant
//                  digits, frac = digits after its point, run = how many of its last digits equal
//                  the last one (the point does not break a run), run_digit = that digit. A number
//                  of more than DECIMAL_DIGITS significant digits is no longer tracked until it ends.
//   candidates     after each byte, in a number with a point whose run of 0s or 9s is RUN_MIN or
//                  longer and shorter than its count when the run is of 0s: the short decimal D =
//                  digits / 10**run + (run_digit == 9) at decimal exponent q = run - frac. Where (D,
//                  q) differs from the lane's last and q is within [Q_MIN, Q_MAX]: m * 2**e, the
//                  double nearest to D * 10**q (round half to even, 2**52 <= m < 2**53), E with 10**16
//                  <= round(m * 2**e * 10**(16 - E)) < 10**17, and for each offset j in [-OFFSETS,
//                  OFFSETS] with 2**52 <= m + j < 2**53 the 17 digits S_j = round((m + j) * 2**e *
//                  10**(16 - E)) (half to even), valid where 10**16 <= S_j < 10**17; all in exact
//                  integer arithmetic (`Wide`). set = the valid offsets whose S_j / 10**sh = digits,
//                  sh = 16 - E - frac (none where sh < 0), class = e & (TAIL_CLASSES - 1).
//                  After each later digit of the number, set keeps the offsets whose S_j / 10**sh =
//                  digits. When a byte ends the number, the smallest offset j of set with S_j % 10**sh
//                  = 0 (its printing, trailing zeros dropped, is the number) is learned (digit_mass.h's
//                  counts, by class).
//   inputs         two after the tables' (CELL_ORDER's, CELL_LEFT's), digit_mass.h's from bit 0: before
//                  a byte of a number with a point and candidates, with sh >= 1, the candidates of set
//                  with S_j % 10**sh != 0 each print the digit S_j / 10**(sh - 1) % 10 next.
#pragma once

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "common.h"
#include "stage/digit_mass.h"
#include "stage/lane.h"
#include "stage/params.h"
#include "stage/state_map.h"
#include "stage/tables.h"

namespace shazip::stage {

constexpr u32 DECIMAL_DIGITS = 18;  // a number's significant digits tracked (10**18 < 2**63)
constexpr u32 RUN_MIN = 3;  // a run of 0s or 9s this long makes candidates
constexpr int Q_MIN = -30, Q_MAX = 25;  // the candidates' decimal exponents (their arithmetic fits `Wide`)
constexpr u32 TAIL_CLASSES = 16;  // the offsets' counts, by the binary exponent's low bits
static_assert(CANDIDATES <= 64, "a lane's set of candidates is a 64-bit mask");

// 10**n for n in [0, 19]
constexpr u64 pow10(int n) { return n == 0 ? 1 : 10 * pow10(n - 1); }

// An unsigned integer of up to 320 bits, least significant limb first: the candidates' exact
// arithmetic. Every value the contract's ranges give stays below 2**260.
struct Wide {
  static constexpr int LIMBS = 10;
  std::array<u32, LIMBS> w{};

  explicit Wide(u64 v = 0) : w{u32(v), u32(v >> 32)} {}
  Wide& mul(u32 m) {
    u64 carry = 0;
    for (u32& x : w) {
      const u64 t = u64(x) * m + carry;
      x = u32(t);
      carry = t >> 32;
    }
    return *this;
  }
  Wide& mul_pow10(int n) {
    for (; n > 0; n -= 9) mul(u32(pow10(std::min(n, 9))));
    return *this;
  }
  Wide& shl(int s) {
    const int limbs = s / 32, bits = s % 32;
    for (int i = LIMBS - 1; i >= 0; --i) {
      const u64 hi = i - limbs >= 0 ? w[size_t(i - limbs)] : 0, lo = i - limbs - 1 >= 0 ? w[size_t(i - limbs - 1)] : 0;
      w[size_t(i)] = u32(hi << bits | lo << bits >> 32);
    }
    return *this;
  }
  Wide& shr1() {
    for (int i = 0; i < LIMBS; ++i) w[size_t(i)] = w[size_t(i)] >> 1 | (i + 1 < LIMBS ? w[size_t(i + 1)] << 31 : 0);
    return *this;
  }
  Wide& add(const Wide& o) {
    u64 carry = 0;
    for (int i = 0; i < LIMBS; ++i) {
      const u64 t = u64(w[size_t(i)]) + o.w[size_t(i)] + carry;
      w[size_t(i)] = u32(t);
      carry = t >> 32;
    }
    return *this;
  }
  Wide& sub(const Wide& o) {  // *this >= o
    u64 borrow = 0;
    for (int i = 0; i < LIMBS; ++i) {
      const u64 t = u64(w[size_t(i)]) - o.w[size_t(i)] - borrow;
      w[size_t(i)] = u32(t);
      borrow = t >> 63;
    }
    return *this;
  }
  int bits() const {
    for (int i = LIMBS - 1; i >= 0; --i)
      if (w[size_t(i)]) return 32 * i + 32 - __builtin_clz(w[size_t(i)]);
    return 0;
  }
  int cmp(const Wide& o) const {
    for (int i = LIMBS - 1; i >= 0; --i)
      if (w[size_t(i)] != o.w[size_t(i)]) return w[size_t(i)] < o.w[size_t(i)] ? -1 : 1;
    return 0;
  }
};

// floor(num / den) for a quotient below 2**63 (num, den < 2**256, den > 0); num becomes the remainder
inline u64 divide(Wide& num, const Wide& den) {
  Wide d = den;
  d.shl(62);
  u64 q = 0;
  for (int i = 62; i >= 0; --i) {
    if (num.cmp(d) >= 0) {
      num.sub(d);
      q |= u64(1) << i;
    }
    if (i > 0) d.shr1();
  }
  return q;
}
// whether quotient q with remainder r of a division by den rounds up (half to even)
inline bool rounds_up(u64 q, Wide r, const Wide& den) {
  const int c = r.shl(1).cmp(den);
  return c > 0 || (c == 0 && (q & 1));
}

// The double nearest to d * 10**q (1 <= d < 10**18, q in [Q_MIN, Q_MAX]) as m * 2**e, 2**52 <= m < 2**53
inline std::pair<u64, int> nearest_double(u64 d, int q) {
  Wide num(d), den(1);
  if (q >= 0) num.mul_pow10(q);
  else den.mul_pow10(-q);
  int e = num.bits() - den.bits() - 53;  // the quotient in [2**51, 2**54): adjusted below
  for (;;) {
    Wide a = num, b = den;
    if (e < 0) a.shl(-e);
    else b.shl(e);
    const u64 m = divide(a, b);
    const bool up = rounds_up(m, a, b);
    if (m >= u64(1) << 53) ++e;
    else if (m < u64(1) << 52) --e;
    else return m + up == u64(1) << 53 ? std::pair{u64(1) << 52, e + 1} : std::pair{m + up, e};
  }
}

// m * 2**e * 10**(16 - E) as num / den
inline std::pair<Wide, Wide> scaled(u64 m, int e, int E) {
  const int p = 16 - E;
  Wide num(m), den(1);
  if (e >= 0) num.shl(e);
  else den.shl(-e);
  if (p >= 0) num.mul_pow10(p);
  else den.mul_pow10(-p);
  return {num, den};
}

// E with 10**16 <= round(m * 2**e * 10**(16 - E)) < 10**17 (half to even)
inline int decimal_exponent(u64 m, int e) {
  int E = int((i64(64 - __builtin_clzll(m)) + e - 1) * 78913 >> 18);  // floor(log10 2**(bits - 1)): E or E - 1
  for (;;) {
    auto [num, den] = scaled(m, e, E);
    const u64 S = divide(num, den);
    const u64 r = S + rounds_up(S, num, den);
    if (r >= pow10(17)) ++E;
    else if (r < pow10(16)) --E;
    else return E;
  }
}

// The candidates of the short decimal d * 10**q (the contract's): S[j + OFFSETS] (0: not valid),
// E and the class; false outside the candidates' range
inline bool float_candidates(u64 d, int q, std::array<u64, CANDIDATES>& S, int& E, u32& cls) {
  if (d == 0 || d >= pow10(DECIMAL_DIGITS) || q < Q_MIN || q > Q_MAX) return false;
  const auto [m, e] = nearest_double(d, q);
  E = decimal_exponent(m, e);
  cls = u32(e) & (TAIL_CLASSES - 1);
  const u64 first = std::max<u64>(m - OFFSETS, u64(1) << 52), last = std::min<u64>(m + OFFSETS, (u64(1) << 53) - 1);
  auto [num, den] = scaled(first, e, E);  // (m + j) * 2**e * 10**(16 - E), one step at a time
  auto [step_num, step_den] = scaled(1, e, E);
  u64 s = divide(num, den);
  const u64 step = divide(step_num, step_den);  // num and step_num now hold the remainders
  S.fill(0);
  for (u64 v = first; v <= last; ++v) {
    if (v > first) {
      s += step;
      num.add(step_num);
      if (num.cmp(den) >= 0) {
        num.sub(den);
        ++s;
      }
    }
    const u64 r = s + rounds_up(s, num, den);
    if (r >= pow10(16) && r < pow10(17)) S[size_t(i64(v - m) + OFFSETS)] = r;
  }
  return true;
}

// No number: the state cleared but the candidates' digits, which only `set` reads (a byte outside a
// number costs no copy of them)
inline void clear(Lane::Decimal& N) {
  N.digits = N.key_d = N.set = 0;
  N.count = N.frac = N.run = N.run_digit = 0;
  N.key_q = 0;
  N.on = N.point = N.lost = false;
}

// The number's decimal state after byte c, which followed `before` (the contract's `decimal`)
inline void track_decimal(Lane::Decimal& N, int c, int before) {
  const bool digit = c >= '0' && c <= '9';
  const bool word = (before >= '0' && before <= '9') || before == '.' || (before >= 'a' && before <= 'z') ||
                    (before >= 'A' && before <= 'Z');
  if (digit && N.lost) return;
  if (digit && N.on) {
    const u32 v = u32(c - '0');
    if (N.count || v) ++N.count;
    if (N.count > DECIMAL_DIGITS) {
      clear(N);
      N.lost = true;
      return;
    }
    N.digits = N.digits * 10 + v;
    N.frac += N.point;
    N.run = v == N.run_digit ? N.run + 1 : 1;
    N.run_digit = v;
  } else if (digit && !word) {
    clear(N);
    N.on = true;
    N.digits = N.run_digit = u32(c - '0');
    N.count = N.digits != 0;
    N.run = 1;
  } else if (c == '.' && N.on && !N.point) {
    N.point = true;
  } else if (!digit && (N.on || N.lost)) {
    clear(N);
  }
}

class FloatTail {
 public:
  FloatTail() = default;
  explicit FloatTail(const Params& p)
      : on_(p.has(FLOAT_TAIL)), counts_(on_ ? TAIL_CLASSES : 0, CANDIDATES), inputs_(0) {}
  int inputs() const { return 2 * on_; }

  DigitMass predict(const Lane& L) const {
    DigitMass t;
    const Lane::Decimal& N = L.decimal;
    if (!on_ || !N.on || !N.point || !N.set) return t;
    const int sh = 16 - N.E - int(N.frac);
    if (sh < 1) return t;
    const u32* counts = counts_.of(N.cls);
    for (u64 set = N.set; set; set &= set - 1) {
      const int j = __builtin_ctzll(set);
      const u64 S = N.S[size_t(j)];
      if (S % pow10(sh)) t.add(S / pow10(sh - 1) % 10, counts[j]);
    }
    t.close();
    return t;
  }
  void bit_inputs(const Tables& tb, const DigitMass& t, int k, int c0, i32* x, int& count) {
    if (on_) inputs_.bit_inputs(tb, t, k, c0, x, count);
  }
  void update(const Tables& tb, int y) {
    if (on_) inputs_.update(tb, y);
  }
  // the lane's number and candidates after byte c, which followed `before`; an ended number's offset learned
  void after_byte(Lane& L, int c, int before) {
    if (!on_) return;
    Lane::Decimal& N = L.decimal;
    const bool digit = c >= '0' && c <= '9';
    if (!digit && N.set) learn(N);  // a set is made after the point: any other byte ends the number
    track_decimal(N, c, before);
    if (!N.on || !N.point) return;
    if (N.set && digit) N.set = agreeing(N, N.set);
    if (N.run < RUN_MIN || (N.run_digit != 0 && N.run_digit != 9) || (N.run_digit == 0 && N.run >= N.count)) return;
    const u64 d = N.digits / pow10(int(N.run)) + (N.run_digit == 9);
    const int q = int(N.run) - int(N.frac);
    if (d == N.key_d && q == N.key_q) return;
    N.key_d = d, N.key_q = q;
    N.set = float_candidates(d, q, N.S, N.E, N.cls) ? agreeing(N, (u64(1) << CANDIDATES) - 1) : 0;
  }

 private:
  // the offsets of `set` whose printing begins with the number's digits
  static u64 agreeing(const Lane::Decimal& N, u64 set) {
    const int sh = 16 - N.E - int(N.frac);
    for (u64 s = set; s; s &= s - 1) {
      const int j = __builtin_ctzll(s);
      if (sh < 0 || N.S[size_t(j)] / pow10(sh) != N.digits) set &= ~(u64(1) << j);
    }
    return set;
  }
  // the ended number's offset: the first of its set whose printing it is
  void learn(const Lane::Decimal& N) {
    const int sh = 16 - N.E - int(N.frac);
    for (u64 s = N.set; s && sh >= 0; s &= s - 1) {
      const int j = __builtin_ctzll(s);
      if (N.S[size_t(j)] % pow10(sh) == 0) return counts_.learn(N.cls, size_t(j));
    }
  }

  bool on_ = false;
  CandidateCounts counts_;  // the offsets' counts by class
  DigitInputs inputs_;
};

}  // namespace shazip::stage
