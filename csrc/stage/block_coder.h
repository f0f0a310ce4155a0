// Coding one block through the stage: the block's lanes, the checks on the model's rows, and the
// binary coder; a symbol coder the block loop drives (coder/symbols.h), and the per-step coders of
// external engines (stage/bind.cpp). The stage's tables outlive the block; this object lives for
// one block.
//
// Lane i of a block holds the block's bytes [i * span, (i + 1) * span). At every step the k
// active lanes (always a prefix: only the last lanes are shorter) code one byte each, lane 0
// first: that order is part of the format, since the lanes share every table.
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "coder/binary.h"
#include "coder/symbols.h"
#include "common.h"
#include "stage/stage.h"

namespace shazip::stage {

class BlockCoder : public coder::SymbolCoder {
 public:
  BlockCoder(std::shared_ptr<Stage> st, i64 lanes, i64 span) : st_(std::move(st)) {
    require(lanes >= 1 && lanes <= MAX_LANES && span >= 1 && span <= MAX_SPAN,
            "lanes must be in [1, 65536] and span in [1, 2**31]");
    lanes_.resize(size_t(lanes));
    at_ = Where{st_->position(), u64(span), u64(lanes), &lanes_};
  }
  i64 lanes() const { return i64(lanes_.size()); }
  void end_step(i64 k) override { st_->advance(u64(k)); }

 protected:
  // the rows of active lanes [lo, hi) (freq indexed by lane): none full, each entry in [1, 2**30]
  void check(const i64* freq, i64 lo, i64 hi) const {
    require(lo >= 0 && lo <= hi && hi <= i64(lanes_.size()), "more rows than lanes");
    u64 off = 0;  // f in [1, 2**30] iff f - 1 (as u64) is below 2**30: no bit above 29 in any
    for (i64 i = lo * 256; i < hi * 256; ++i) off |= u64(freq[i]) - 1;
    require(off >> 30 == 0, "frequencies must be in [1, 2**30]");
    for (i64 b = lo; b < hi; ++b) require(lanes_[size_t(b)].coded < at_.span, "a lane is already full");
  }
  std::shared_ptr<Stage> st_;
  std::vector<Lane> lanes_;
  Where at_{};
};

class Encoder : public BlockCoder {
 public:
  Encoder(std::shared_ptr<Stage> st, i64 lanes, i64 span, bool measure)
      : BlockCoder(std::move(st), lanes, span), measure_(measure) {}
  // codes sym[b] of lanes [lo, hi) under the model's rows freq[b * 256 ...]
  void code_lanes(const i64* freq, u8* sym, i64 lo, i64 hi) override {
    check(freq, lo, hi);
    auto io = [this](int p, int y) {
      enc_.encode(y, p);
      if (measure_) bits_ -= std::log2(y ? p / 65536.0 : 1.0 - p / 65536.0);
      return y;
    };
    for (i64 b = lo; b < hi; ++b) st_->code_byte(lanes_, size_t(b), at_, freq + b * 256, int(sym[b]), io);
  }
  std::string finish() override {
    const std::vector<u8> out = enc_.finish();
    return std::string(reinterpret_cast<const char*>(out.data()), out.size());
  }
  // the ideal code length of what was coded, if measured (never read by the model)
  double bits() const override { return bits_; }

 private:
  coder::RangeEncoder enc_;
  bool measure_;
  double bits_ = 0.0;
};

class Decoder : public BlockCoder {
 public:
  Decoder(std::shared_ptr<Stage> st, i64 lanes, i64 span, std::string payload, i64 max_overrun = -1)
      : BlockCoder(std::move(st), lanes, span), dec_(std::move(payload), max_overrun) {}
  // decodes the bytes of lanes [lo, hi) into sym; a damaged payload gives wrong bytes (which the
  // block's checksum catches), never a fault
  void code_lanes(const i64* freq, u8* sym, i64 lo, i64 hi) override {
    check(freq, lo, hi);
    auto io = [this](int p, int) { return dec_.decode(p); };
    for (i64 b = lo; b < hi; ++b) sym[b] = u8(st_->code_byte(lanes_, size_t(b), at_, freq + b * 256, -1, io));
  }

 private:
  coder::RangeDecoder dec_;
};

}  // namespace shazip::stage
