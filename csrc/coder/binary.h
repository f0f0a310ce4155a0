// The binary arithmetic coder of the adaptive stage: a carry-propagating range coder on 16-bit
// probabilities (the "coder" lines of the contract at the top of stage/stage.h).
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

namespace shazip::coder {

// The encoder drops at most this many trailing zero bytes (the decoder reads zeros past the
// end), so a decoder given a bound reads at most that many past its payload: beyond, the
// payload is provably damaged (format 4 bounds the work a small damaged archive can ask for).
constexpr int MAX_TRIM = 5;

class RangeEncoder {
 public:
  void encode(int y, int p16) {
    const u32 bound = u32((u64(range_) * u32(p16)) >> 16);
    if (y) {
      range_ = bound;
    } else {
      low_ += bound;
      range_ -= bound;
    }
    while (range_ < (1u << 24)) {
      range_ <<= 8;
      shift();
    }
  }
  std::vector<u8> finish() {
    const u64 last = low_ + range_ - 1;  // the interval is [low, last]
    for (int k = 32; k >= 0; --k) {      // the value in it with the most trailing zero bits
      const u64 m = (u64(1) << k) - 1;
      const u64 v = (low_ + m) & ~m;
      if (v <= last) {
        low_ = v;
        break;
      }
    }
    for (int i = 0; i < 5; ++i) shift();
    for (int i = 0; i < MAX_TRIM && !out_.empty() && out_.back() == 0; ++i) out_.pop_back();
    return std::move(out_);
  }

 private:
  void shift() {  // moves low's top byte out, resolving a pending carry
    if (u32(low_) < 0xFF000000u || (low_ >> 32) != 0) {
      const u8 carry = u8(low_ >> 32);
      emit(u8(cache_ + carry));
      for (; pending_; --pending_) emit(u8(0xFF + carry));
      cache_ = u8(low_ >> 24);
    } else {
      ++pending_;
    }
    low_ = (low_ & 0x00FFFFFFull) << 8;
  }
  void emit(u8 b) {
    if (started_) out_.push_back(b);
    started_ = true;  // the first byte is always 0 and is not written
  }
  u64 low_ = 0;
  u32 range_ = 0xFFFFFFFFu;
  u8 cache_ = 0;
  u64 pending_ = 0;
  bool started_ = false;
  std::vector<u8> out_;
};

class RangeDecoder {
 public:
  // max_overrun: the most zero bytes it may read past the data's end (-1: any number, as
  // formats 1-3 allow); one more is a DataError.
  explicit RangeDecoder(std::string data, i64 max_overrun = -1) : data_(std::move(data)), max_overrun_(max_overrun) {
    for (int i = 0; i < 4; ++i) code_ = (code_ << 8) | next();
  }
  // any input decodes to some bits: a damaged payload gives wrong bytes, never a fault
  int decode(int p16) {
    const u32 bound = u32((u64(range_) * u32(p16)) >> 16);
    int y;
    if (code_ < bound) {
      range_ = bound;
      y = 1;
    } else {
      code_ -= bound;
      range_ -= bound;
      y = 0;
    }
    while (range_ < (1u << 24)) {
      range_ <<= 8;
      code_ = (code_ << 8) | next();
    }
    return y;
  }

 private:
  u32 next() {
    if (pos_ < data_.size()) return u8(data_[pos_++]);
    if (max_overrun_ >= 0 && ++overrun_ > max_overrun_)
      throw DataError("the payload ends before its code does: the decoder read past its end");
    return 0u;
  }
  std::string data_;
  size_t pos_ = 0;
  i64 max_overrun_, overrun_ = 0;
  u32 code_ = 0, range_ = 0xFFFFFFFFu;
};


}  // namespace shazip::coder
