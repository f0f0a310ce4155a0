// The categorical range coder on the model's own rows (MODEL blocks) as a symbol coder the block
// loop drives; the stage's (MIXED and stage blocks) are its block coders (stage/block_coder.h).
#pragma once

#include <cmath>
#include <string>

#include "coder/categorical.h"
#include "coder/symbols.h"

namespace shazip::block {

// The model's rows as the categorical coder takes them: each integer frequency over the row's
// sum, one correctly rounded float64 division (exact operands: sums stay below 2**53).
inline void probabilities(const i64* f, double* p) {
  i64 sum = 0;
  for (int j = 0; j < 256; ++j) sum += f[j];
  for (int j = 0; j < 256; ++j) p[j] = double(f[j]) / double(sum);
}

class CategoricalEncode : public coder::SymbolCoder {
 public:
  explicit CategoricalEncode(bool measure) : measure_(measure) {}
  void code_lanes(const i64* freq, u8* sym, i64 lo, i64 hi) override {
    double p[256];
    for (i64 b = lo; b < hi; ++b) {
      probabilities(freq + b * 256, p);
      enc_.encode(p, sym[b]);
      if (measure_) bits_ -= std::log2(p[sym[b]]);
    }
  }
  std::string finish() override { return enc_.finish(); }
  double bits() const override { return bits_; }

 private:
  coder::CategoricalEncoder enc_;
  bool measure_;
  double bits_ = 0.0;
};

class CategoricalDecode : public coder::SymbolCoder {
 public:
  CategoricalDecode(const std::string& payload, i64 max_overrun)
      : payload_(payload), dec_(reinterpret_cast<const u8*>(payload_.data()), payload_.size(), max_overrun) {}
  void code_lanes(const i64* freq, u8* sym, i64 lo, i64 hi) override {
    double p[256];
    for (i64 b = lo; b < hi; ++b) {
      probabilities(freq + b * 256, p);
      sym[b] = u8(dec_.decode(p));
    }
  }

 private:
  std::string payload_;
  coder::CategoricalDecoder dec_;
};

}  // namespace shazip::block
