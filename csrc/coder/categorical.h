// The categorical range coder of MODEL blocks: a bit-exact reimplementation of what shazip
// used from the `constriction` package (0.4.x and 0.5.0 code this identically), namely
//   constriction.stream.queue.RangeEncoder / RangeDecoder   (Rust: DefaultRangeEncoder/Decoder)
//   constriction.stream.model.Categorical(perfect=False)   (as a model family, float64 rows)
// so archives written through constriction decode here and the reverse, word for word.
//
// The model (Rust: DefaultLazyContiguousCategoricalEntropyModel<f64>, PRECISION = 24):
//   S     = p[0] + p[1] + ... + p[255]           (float64, left to right)
//   scale = double(2^24 - 256) / S               (one division)
//   cdf[s] = u32(L_s * scale) + s,  L_s = p[0] + ... + p[s-1] (the same left-to-right sums),
//   cdf[256] = 2^24;  symbol s codes as [cdf[s], cdf[s+1]): every symbol gets at least 1/2^24
//   (it is "leaky"), so a symbol whose probability is exactly 0.0 still codes and decodes.
// The coder (Rust: RangeEncoder<u32, u64>): 64-bit state (lower, range), 32-bit words, carries
// held back in an "inverted" situation, and a seal of one or two words at the end; the decoder
// reads zero words past the end and reports damage only where a quantile falls outside 2^24.
// See categorical.cpp for the details.
//
// Rows must be 256 finite, non-negative float64 values whose sum is a normal float64 and gives a
// finite scale (sum > ~9.4e-302); anything else throws ArgumentError (constriction rejected
// NaN/inf/zero/subnormal sums with a ValueError and did not check negative entries or sums
// below ~9.4e-302, where it could panic). Damaged payloads throw DataError.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common.h"

namespace shazip::coder {

constexpr int kCategoricalPrecision = 24;            // bits of the fixed-point probabilities
constexpr u32 kCategoricalTotal = u32(1) << 24;      // they sum to this
constexpr int kCategoricalSymbols = 256;             // alphabet: bytes

// The fixed-point model of one float64 row: cdf[s] is symbol s's left end, cdf[256] = 2^24, so
// symbol s has probability (cdf[s+1] - cdf[s]) / 2^24 >= 1 / 2^24. Throws ArgumentError on a bad
// row. O(256), no allocation. The coders compute only the entries they need, identically.
void quantize_row(const double* probs, u32* cdf /* 257 entries */);

class CategoricalEncoder {
 public:
  CategoricalEncoder() = default;

  // Codes `symbol` (0..255) under the 256-entry row `probs`. Throws ArgumentError (and codes
  // nothing) on a bad row, a symbol out of range, or after finish().
  void encode(const double* probs, int symbol);

  // Codes symbols[i] under row i (probs: k x 256, row-major). All or nothing: if row i or
  // symbol i is bad, ArgumentError is thrown and the encoder is as it was before the call.
  void encode_batch(const double* probs, const i64* symbols, size_t k);

  // The compressed stream: little-endian u32 words, byte for byte what
  // `constriction...RangeEncoder.get_compressed().astype("<u4").tobytes()` gives (empty if
  // nothing was coded). The encoder is done after this: encode/finish then throw ArgumentError.
  std::string finish();

 private:
  void code_interval(u32 left, u32 prob);
  void put(u32 word);

  std::string out_;            // words written so far, little-endian
  u64 lower_ = 0;
  u64 range_ = ~u64(0);        // u64 max only before the first symbol
  // "Inverted" situation: lower + range wrapped past 2^64, so the last words are undecided
  // until the carry resolves: the first of them is first_inverted_, then inverted_-1 more.
  size_t inverted_ = 0;
  u32 first_inverted_ = 0;
  bool finished_ = false;
};

class CategoricalDecoder {
 public:
  // Copies the payload. Its length must be a multiple of 4 (it is u32 words), else DataError.
  // max_overrun: the most bytes it may read past the payload's end, as zero words (-1: any
  // number, as constriction and formats 1-3 allow); more is a DataError (format 4 bounds a
  // block's work).
  CategoricalDecoder(const u8* data, size_t n, i64 max_overrun = -1);

  // Decodes one symbol under the 256-entry row `probs`. Throws ArgumentError on a bad row and
  // DataError where the payload cannot have come from the encoder (the state is then left as it
  // was, so decoding on throws again). Past the payload's end it reads zero words, as
  // constriction does: a truncated payload gives wrong symbols or DataError, never a hang.
  int decode(const double* probs);

  // Decodes k symbols under rows probs[i] (k x 256, row-major) into out. All or nothing: on an
  // exception the decoder is as it was before the call.
  void decode_batch(const double* probs, size_t k, i64* out);

  // constriction's RangeDecoder.maybe_exhausted(): every word has been read and the state is
  // what an encoder's seal leaves (so no further symbols can have been coded).
  bool maybe_exhausted() const;

 private:
  u32 next_word();

  std::vector<u8> data_;
  size_t words_ = 0;   // words in data_
  size_t pos_ = 0;     // next word to read
  u64 lower_ = 0;
  u64 range_ = ~u64(0);
  u64 point_ = 0;
  i64 max_overrun_, overrun_ = 0;
};

}  // namespace shazip::coder
