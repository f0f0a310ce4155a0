// What the block loop drives: a coder of one step's symbols, one a lane, under the model's rows.
// The stage's block coders (stage/block_coder.h) and the categorical coder on the model's rows
// (block/coders.h) are ones; the block loop (block/job.h) holds one and knows no other.
#pragma once

#include <string>

#include "common.h"

namespace shazip::coder {

// Codes one step's symbols of the k active lanes: an encoder reads sym, a decoder writes it. A
// step may be cut in lane ranges: code_lanes for each range of [0, k) in lane order (freq and sym
// indexed by lane), then end_step(k); the same symbols as code(freq, sym, k).
class SymbolCoder {
 public:
  virtual ~SymbolCoder() = default;
  void code(const i64* freq, u8* sym, i64 k) {
    code_lanes(freq, sym, 0, k);
    end_step(k);
  }
  virtual void code_lanes(const i64* freq, u8* sym, i64 lo, i64 hi) = 0;
  virtual void end_step(i64 /*k*/) {}
  virtual std::string finish() { return {}; }  // an encoder's payload
  virtual double bits() const { return 0.0; }  // the ideal code length of what was coded, if measured
};

}  // namespace shazip::coder
