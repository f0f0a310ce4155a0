// The symbol coders a block job can drive: the adaptive stage (MIXED blocks) and the
// categorical range coder on the model's own rows (MODEL blocks).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "block/job.h"
#include "coder/categorical.h"
#include "stage/block_coder.h"

namespace shazip::block {

class StageEncode : public SymbolCoder {
 public:
  StageEncode(std::shared_ptr<stage::Stage> st, i64 lanes, i64 span, bool measure) : enc_(std::move(st), lanes, span, measure) {}
  void code_lanes(const i64* freq, u8* sym, i64 lo, i64 hi) override { enc_.code_lanes(freq, sym, lo, hi); }
  void end_step(i64 k) override { enc_.end_step(k); }
  std::string finish() override { return enc_.finish(); }
  double bits() const override { return enc_.bits(); }

 private:
  stage::Encoder enc_;
};

class StageDecode : public SymbolCoder {
 public:
  StageDecode(std::shared_ptr<stage::Stage> st, i64 lanes, i64 span, std::string payload, i64 max_overrun)
      : dec_(std::move(st), lanes, span, std::move(payload), max_overrun) {}
  void code_lanes(const i64* freq, u8* sym, i64 lo, i64 hi) override { dec_.code_lanes(freq, sym, lo, hi); }
  void end_step(i64 k) override { dec_.end_step(k); }

 private:
  stage::Decoder dec_;
};

// The model's rows as the categorical coder takes them: each integer frequency over the row's
// sum, one correctly rounded float64 division (exact operands: sums stay below 2**53).
inline void probabilities(const i64* f, double* p) {
  i64 sum = 0;
  for (int j = 0; j < 256; ++j) sum += f[j];
  for (int j = 0; j < 256; ++j) p[j] = double(f[j]) / double(sum);
}

class CategoricalEncode : public SymbolCoder {
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

class CategoricalDecode : public SymbolCoder {
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
