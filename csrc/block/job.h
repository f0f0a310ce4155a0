// The block loop: one block coded by the int8 model and a symbol coder, every lane, every step.
//
// A block of n bytes is cut into `lanes` contiguous slices of span = ceil(n / lanes) bytes (the
// last ones shorter, possibly empty). The lanes run in lockstep: at step t the model turns each
// active lane's previous byte into 256 frequencies, and the symbol coder codes byte t of every
// lane that still has one (a prefix of the lanes). Encoder and decoder run this same loop and
// differ only in the symbol coder, so both see the same rows by construction.
//
// Python runs a job a chunk of steps at a time (`run`), with the GIL released, so progress bars
// and Ctrl-C keep working between chunks.
//
// With two threads or more the model runs on threads of its own (the pool but the coder's
// thread) beside the coder. Encoding, every byte is known in advance, so the model runs ahead
// into a ring of rows, up to `ring` steps. Decoding, a step needs the bytes of the step before,
// so the lanes are cut in two groups: the model steps one group while the coder decodes the
// other, in the coder's own order (group A's lanes, then B's, then the step's end), so the
// symbols are the same. The model's thread lives as long as the job and runs across `run`
// calls, so Python's chunks do not cut the pipeline. The rows are the same, so the payload is too.
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common.h"
#include "model/model.h"
#include "threads.h"

namespace shazip::block {

constexpr u8 BOS = 0;  // the "previous byte" fed to every lane at its start
constexpr i64 RING_STEPS = 16;  // pipelined: how many steps' rows the model may run ahead, by default

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

class Job {
 public:
  // data: the block's bytes (encoding) or nullptr (decoding, n bytes to produce). model: nullptr
  // for a stage without the NN input (its rows are then uniform and never read). ring: pipelined,
  // how many steps' rows the model may run ahead (>= 1; the bytes do not depend on it)
  Job(std::shared_ptr<const model::Model> model, std::shared_ptr<ThreadPool> pool, std::unique_ptr<SymbolCoder> coder,
      i64 n, i64 lanes, const u8* data, bool measure, i64 ring = RING_STEPS);
  ~Job();  // stops and joins the model's thread, if any
  Job(const Job&) = delete;  // the model's thread holds `this`
  Job& operator=(const Job&) = delete;
  // Runs at most `steps` steps; returns the bytes coded by them (all lanes together).
  i64 run(i64 steps);
  // whether the model runs ahead of the coder (see above)
  bool pipelined() const { return model_pool_ != nullptr; }
  bool done() const { return t_ >= span_; }
  // The encoder's payload, or the decoder's bytes; once done.
  std::string result();
  // -log2 of the model's own probability of every coded byte (if measured), and the coder's
  double model_bits() const { return model_bits_; }
  double coded_bits() const { return coder_->bits(); }

 private:
  i64 run_pipelined(i64 steps);
  // the model's thread: every step of the block into the ring, at most ring_ steps ahead
  void run_model();
  // decoding: the coder's side and the model's of the two lane groups' alternation
  i64 run_groups(i64 steps);
  void run_model_groups();
  // the lanes still active at step t (a prefix), from k, those active before it
  i64 active_at(i64 t, i64 k) const;
  // adds -log2 of the model's probability of each of the step's k coded bytes (sym_) under its rows
  void count_model_bits(const i64* freq, i64 k);
  std::shared_ptr<const model::Model> model_;
  std::shared_ptr<ThreadPool> pool_;
  std::unique_ptr<SymbolCoder> coder_;
  std::unique_ptr<model::State> state_;
  i64 n_, lanes_, span_, t_ = 0, active_, ring_;
  bool encoding_, measure_;
  std::vector<u8> grid_;   // lane-major: lane b's bytes at [b * span, (b + 1) * span)
  std::vector<u8> prev_, sym_;
  std::vector<i64> freq_;  // the step's rows; pipelined: a ring of ring_ steps' rows (decoding: 2)
  std::unique_ptr<ThreadPool> model_pool_;  // pipelined: the model's team (the rest of the pool but the coder's thread)
  // pipelined: the ring's state, shared with the model's thread under mu_
  std::mutex mu_;
  std::condition_variable cv_;
  i64 made_ = 0, used_ = 0;        // steps whose rows are in the ring, and that the coder has coded
  i64 group_made_[2] = {0, 0};     // decoding: steps whose group g rows are in, and that are decoded
  i64 group_coded_[2] = {0, 0};
  std::vector<i64> ring_active_;   // each ring slot's active lanes
  bool stop_ = false;
  std::exception_ptr failed_;
  std::thread model_thread_;
  double model_bits_ = 0.0;
};

}  // namespace shazip::block
