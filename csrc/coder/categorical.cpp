// The categorical range coder: constriction's queue RangeEncoder<u32, u64> / RangeDecoder with
// its lazy "fast" categorical model (PRECISION 24) on float64 rows, reimplemented bit for bit.
// (Written from a reading of constriction 0.5.0: src/stream/queue.rs and
// src/stream/model/categorical/lazy_contiguous.rs; 0.4.0 to 0.5.0 do not differ in either.)
//
// Floating point: every float64 operation below is one IEEE operation in the order constriction
// (Rust, which never reassociates or contracts) performs it: sequential sums, one division for
// the scale, one product per cumulative followed by a truncating conversion. No product is ever
// added to anything in floating point, so FMA contraction has nothing to fuse on any target; the
// checks below refuse builds whose float semantics would differ (x87 excess precision,
// -ffast-math's reassociation).
#include "coder/categorical.h"

#include <cfloat>
#include <utility>

#if defined(__FAST_MATH__)
#error "csrc/coder/categorical.cpp must not be compiled with -ffast-math: the coder's floats must be exact IEEE"
#endif
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error "csrc/coder/categorical.cpp needs FLT_EVAL_METHOD == 0 (no excess precision, e.g. SSE2 not x87)"
#endif
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace shazip::coder {
namespace {

constexpr u32 kTotal = kCategoricalTotal;
constexpr int kN = kCategoricalSymbols;
constexpr int kPrecision = kCategoricalPrecision;
constexpr u64 kWordBits = 32;
constexpr u64 kRangeFloor = u64(1) << 32;  // State::BITS - Word::BITS: range stays >= 2^32
// The weight left to distribute after every symbol's guaranteed 1: 2^24 - 256, as a float64.
constexpr double kFreeWeight = double(kTotal - u32(kN));

// Rust's `f64 as u32`: truncation toward zero, saturating at both ends, NaN -> 0.
inline u32 to_u32(double x) {
  if (!(x > 0.0)) return 0;
  if (x >= 4294967296.0) return ~u32(0);
  return u32(x);
}

// Checks one entry: finite and >= 0 (-0.0 passes; NaN, inf and negatives fail).
inline bool ok_entry(double p) { return p >= 0.0 && p <= DBL_MAX; }

// scale = (2^24 - 256) / sum, after constriction's check (sum a positive normal float64) and
// ours (scale finite: sums below ~9.4e-302 overflow it, where constriction could panic).
inline double scale_of(double sum) {
  if (!(sum >= DBL_MIN && sum <= DBL_MAX))
    throw ArgumentError("categorical row does not sum to a positive normal float64");
  const double scale = kFreeWeight / sum;
  if (!(scale <= DBL_MAX)) throw ArgumentError("categorical row sums to too small a value to quantize");
  return scale;
}

[[noreturn]] void bad_entry() {
  throw ArgumentError("categorical row must hold 256 finite, non-negative float64 probabilities");
}

struct Interval {
  u32 left;
  u32 prob;
};

// The row's running sums pre[0] = 0, pre[i + 1] = pre[i] + p[i] (Rust's left-to-right sums:
// pre[s] is constriction's L_s, pre[256] its total), checking each entry; returns the scale.
inline double prefix_sums(const double* p, double* pre) {
  double sum = 0.0;
  pre[0] = sum;
  for (int i = 0; i < kN; ++i) {
    const double x = p[i];
    if (!ok_entry(x)) bad_entry();
    sum = sum + x;
    pre[i + 1] = sum;
  }
  return scale_of(sum);
}

// constriction's LazyContiguousCategoricalEntropyModel::quantile_function, step for step: a
// cheap float pass skips symbols that must lie left of `quantile` (with a slightly enlarged
// scale so rounding only makes it conservative), then the exact search with the encoder's
// conversions. It recomputes the running sums as it goes; they are pre[] (same additions in the
// same order), so here they are read instead. Returns the symbol and its interval.
inline int quantile_function(const double* pre, double scale, u32 quantile, Interval* out) {
  const double enlarged_scale = (1.0 + DBL_EPSILON + DBL_EPSILON) * scale;
  const u32 q_minus = quantile > u32(kN) ? quantile - u32(kN) : 0;  // saturating_sub(len)
  const double lower_bound = double(q_minus) / enlarged_scale;

  // Skip: next_symbol is the first i + 1 with pre[i + 1] >= lower_bound (or 256 if none); the
  // float cumulatives are then left_f = pre[next_symbol - 1], right_f = pre[next_symbol].
  int next_symbol = 0;
  while (next_symbol < kN) {
    ++next_symbol;
    if (pre[next_symbol] >= lower_bound) break;
  }

  const double left_scaled = pre[next_symbol - 1] * scale;
  u32 left = to_u32(left_scaled) + u32(next_symbol - 1);

  // Exact: while a symbol after next_symbol - 1 remains, its right end decides.
  while (next_symbol < kN) {
    const double right_scaled = pre[next_symbol] * scale;
    const u32 right = to_u32(right_scaled) + u32(next_symbol);
    if (right > quantile) {
      out->left = left;
      out->prob = right - left;
      return next_symbol - 1;
    }
    left = right;
    ++next_symbol;
  }

  // The last symbol ends at 2^24 exactly (so rounding cannot leave the top quantile unreachable).
  out->left = left;
  out->prob = kTotal - left;
  return next_symbol - 1;
}

}  // namespace

void quantize_row(const double* probs, u32* cdf) {
  double pre[kN + 1];
  const double scale = prefix_sums(probs, pre);
  for (int s = 0; s < kN; ++s) {
    const double scaled = pre[s] * scale;
    cdf[s] = to_u32(scaled) + u32(s);
  }
  cdf[kN] = kTotal;
}

// ---------------------------------------------------------------------------------------------
// Encoder

void CategoricalEncoder::put(u32 w) {
  const char b[4] = {char(w & 0xff), char((w >> 8) & 0xff), char((w >> 16) & 0xff), char(w >> 24)};
  out_.append(b, 4);
}

void CategoricalEncoder::encode(const double* probs, int symbol) {
  if (finished_) throw ArgumentError("CategoricalEncoder: encode() after finish()");
  if (symbol < 0 || symbol >= kN) throw ArgumentError("categorical symbol must be in [0, 256)");

  // One pass: check every entry, the total, and the two partial sums around the symbol
  // (constriction: L = sum(p[..s]), R = L + p[s], both the running sums' values).
  double sum = 0.0;
  double left_f = 0.0;
  double right_f = 0.0;
  for (int i = 0; i < kN; ++i) {
    const double x = probs[i];
    if (!ok_entry(x)) bad_entry();
    if (i == symbol) left_f = sum;
    sum = sum + x;
    if (i == symbol) right_f = sum;
  }
  const double scale = scale_of(sum);

  const double left_scaled = left_f * scale;
  const u32 left = to_u32(left_scaled) + u32(symbol);
  u32 right;
  if (symbol == kN - 1) {
    right = kTotal;
  } else {
    const double right_scaled = right_f * scale;
    right = to_u32(right_scaled) + u32(symbol) + 1;
  }
  const u32 prob = right - left;
  // Cannot happen for a row that passed the checks (the partial sums never decrease, and the
  // last left end is at most 2^24 - 1); constriction would panic here.
  if (prob == 0 || prob > kTotal) throw ArgumentError("categorical row quantizes to an empty interval");
  code_interval(left, prob);
}

void CategoricalEncoder::code_interval(u32 left, u32 prob) {
  const u64 scale = range_ >> kPrecision;
  range_ = scale * u64(prob);  // nonzero: scale >= 2^8, prob >= 1
  const u64 new_lower = lower_ + scale * u64(left);  // wrapping

  if (inverted_) {
    if (new_lower + range_ > new_lower) {
      // The carry is decided: new_lower < lower_ means it happened.
      u32 first, rest;
      if (new_lower < lower_) {
        first = first_inverted_ + 1;
        rest = 0;
      } else {
        first = first_inverted_;
        rest = ~u32(0);
      }
      put(first);
      for (size_t j = 1; j < inverted_; ++j) put(rest);
      inverted_ = 0;
    }
  }
  lower_ = new_lower;

  if (range_ < kRangeFloor) {
    range_ <<= kWordBits;
    const u32 lower_word = u32(lower_ >> kWordBits);
    lower_ <<= kWordBits;
    if (inverted_) {
      ++inverted_;
    } else if (lower_ + range_ > lower_) {
      put(lower_word);  // the common case
    } else {
      inverted_ = 1;
      first_inverted_ = lower_word;
    }
  }
}

void CategoricalEncoder::encode_batch(const double* probs, const i64* symbols, size_t k) {
  if (finished_) throw ArgumentError("CategoricalEncoder: encode() after finish()");
  // Everything the coding of a symbol touches, to undo a batch that fails part way.
  const size_t out_size = out_.size();
  const u64 lower = lower_, range = range_;
  const size_t inverted = inverted_;
  const u32 first_inverted = first_inverted_;
  try {
    for (size_t i = 0; i < k; ++i) {
      const i64 s = symbols[i];
      if (s < 0 || s >= kN) throw ArgumentError("categorical symbol must be in [0, 256)");
      encode(probs + i * kN, int(s));
    }
  } catch (...) {
    out_.resize(out_size);
    lower_ = lower;
    range_ = range;
    inverted_ = inverted;
    first_inverted_ = first_inverted;
    throw;
  }
}

std::string CategoricalEncoder::finish() {
  if (finished_) throw ArgumentError("CategoricalEncoder: finish() called twice");
  finished_ = true;
  // The seal. range_ is u64 max only before the first symbol (coding shrinks it and shifts
  // zeros in): an empty message is an empty stream.
  if (range_ != ~u64(0)) {
    // The point the decoder will see: lower + 2^32 - 1 (wrapping), whose top word lies in
    // [lower, lower + range) as long as the next word is read as zeros...
    const u64 point = lower_ + (kRangeFloor - 1);
    if (inverted_) {
      u32 first, rest;
      if (point >= lower_) {
        first = first_inverted_;
        rest = ~u32(0);
      } else {  // the addition wrapped: the carry happens
        first = first_inverted_ + 1;
        rest = 0;
      }
      put(first);
      for (size_t j = 1; j < inverted_; ++j) put(rest);
    }
    const u32 point_word = u32(point >> kWordBits);
    put(point_word);
    // ...unless the interval's upper end has the same top word: then one zero word more.
    const u32 upper_word = u32((lower_ + range_) >> kWordBits);
    if (upper_word == point_word) put(0);
  }
  return std::move(out_);
}

// ---------------------------------------------------------------------------------------------
// Decoder

CategoricalDecoder::CategoricalDecoder(const u8* data, size_t n, i64 max_overrun)
    : max_overrun_(max_overrun < 0 ? -1 : max_overrun / 4) {  // counted in words
  if (n % 4 != 0) throw DataError("categorical payload is not a whole number of 32-bit words");
  data_.assign(data, data + n);
  words_ = n / 4;
  // The first two words (fewer if the payload is shorter, then left-aligned).
  int num_read = 0;
  u64 point = 0;
  while (num_read < 2 && pos_ < words_) {
    point = (point << kWordBits) | next_word();
    ++num_read;
  }
  if (num_read == 1) point <<= kWordBits;
  point_ = point;
  overrun_ = 2 - num_read;  // words taken as zeros
  if (max_overrun_ >= 0 && overrun_ > max_overrun_)
    throw DataError("categorical payload ends before its code does: the decoder read past its end");
}

u32 CategoricalDecoder::next_word() {
  const u8* b = data_.data() + 4 * pos_++;
  return u32(b[0]) | (u32(b[1]) << 8) | (u32(b[2]) << 16) | (u32(b[3]) << 24);
}

int CategoricalDecoder::decode(const double* probs) {
  // constriction builds the model (checking the row) before it looks at the stream.
  double pre[kN + 1];
  const double scale_f = prefix_sums(probs, pre);

  const u64 scale = range_ >> kPrecision;
  const u64 quantile = (point_ - lower_) / scale;  // wrapping difference; scale >= 2^8
  if (quantile >= u64(kTotal)) throw DataError("categorical payload is damaged (invalid range-coded data)");

  Interval iv;
  const int symbol = quantile_function(pre, scale_f, u32(quantile), &iv);
  // Cannot happen for a row that passed the checks (see encode); constriction would panic.
  if (iv.prob == 0 || iv.prob > kTotal) throw ArgumentError("categorical row quantizes to an empty interval");

  lower_ = lower_ + scale * u64(iv.left);
  range_ = scale * u64(iv.prob);
  if (range_ < kRangeFloor) {
    lower_ <<= kWordBits;
    range_ <<= kWordBits;
    point_ <<= kWordBits;
    if (pos_ < words_) {
      point_ |= next_word();
    } else if (max_overrun_ >= 0 && ++overrun_ > max_overrun_) {  // past the end: zeros, a bounded number
      throw DataError("categorical payload ends before its code does: the decoder read past its end");
    }
  }
  return symbol;
}

void CategoricalDecoder::decode_batch(const double* probs, size_t k, i64* out) {
  const size_t pos = pos_;
  const u64 lower = lower_, range = range_, point = point_;
  try {
    for (size_t i = 0; i < k; ++i) out[i] = decode(probs + i * kN);
  } catch (...) {
    pos_ = pos;
    lower_ = lower;
    range_ = range;
    point_ = point;
    throw;
  }
}

bool CategoricalDecoder::maybe_exhausted() const {
  // The largest point - lower an encoder's seal can leave (even with one bits appended).
  const u64 max_difference = (kRangeFloor << 1) - 1;
  return pos_ >= words_ && (range_ == ~u64(0) || point_ - lower_ < max_difference);
}

}  // namespace shazip::coder
