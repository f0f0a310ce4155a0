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
// thread) beside the coder, and since the model alone is most of a step, the coder's thread
// shares it: the model's threads step a step's lanes [0, cut), the coder steps [cut, k) itself.
// Encoding, every byte is known in advance, so the model's threads run ahead into a ring of rows,
// up to `ring` steps. Decoding, a step needs the bytes of the step before: the model's threads
// step lanes [0, cut) in two halves, each as soon as the coder has decoded its lanes' bytes of
// the step before, while the coder decodes the other half, and the coder steps its own lanes
// once it has decoded the whole step. The coder codes in its own order (lanes 0 .. k - 1, then
// the step's end), so the symbols are the same. The cut follows the time: every BALANCE_STEPS
// steps it moves a lane toward the side that waited less, where they waited more than a lane's
// stepping apart (a lane changes sides only once the side it leaves has stepped it). The
// model's thread lives as long as the job and runs across `run` calls, so Python's chunks do
// not cut the pipeline. The rows are the same, so the payload is too.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coder/symbols.h"
#include "common.h"
#include "model/model.h"
#include "threads.h"

namespace shazip::block {

constexpr u8 BOS = 0;  // the "previous byte" fed to every lane at its start
constexpr i64 RING_STEPS = 16;  // pipelined: how many steps' rows the model may run ahead, by default
constexpr i64 BALANCE_STEPS = 16;  // pipelined: steps between two moves of the cut
constexpr std::chrono::microseconds SPIN{30};  // pipelined: how long a side spins before it sleeps

class Job {
 public:
  // data: the block's bytes (encoding) or nullptr (decoding, n bytes to produce). model: nullptr
  // for the stage alone: its rows are then uniform, which a stage without the NN input never reads
  // and one with it reads as 1/2 for every bit (format 5's `stage` blocks).
  Job(std::shared_ptr<const model::Model> model, std::shared_ptr<ThreadPool> pool,
      std::unique_ptr<coder::SymbolCoder> coder, i64 n, i64 lanes, const u8* data, bool measure);
  ~Job();  // stops and joins the model's thread, if any
  Job(const Job&) = delete;  // the model's thread holds `this`
  Job& operator=(const Job&) = delete;
  // Runs at most `steps` steps; returns the bytes coded by them (all lanes together).
  i64 run(i64 steps);
  // whether the model runs ahead of the coder (see above)
  bool pipelined() const { return model_pool_ != nullptr; }
  // Tests (shazip._testing), before the first run: how many steps' rows the model may run ahead
  // (ring >= 1; RING_STEPS unless set), and cut_seed: 0 for the cut that follows the time, else
  // every step's cut drawn from a generator with this seed. The bytes depend on neither; tests
  // move both to reach every interleaving of the two sides.
  void set_pipeline(i64 ring, u64 cut_seed) {
    require(t_ == 0 && !model_thread_.joinable(), "a job's pipeline is set before it runs");
    require(ring >= 1, "the model's ring needs at least one step");
    ring_ = ring;
    cut_seed_ = cut_seed;
    if (model_pool_) lay_ring();
  }
  bool done() const { return t_ >= span_; }
  // The encoder's payload, or the decoder's bytes; once done.
  std::string result();
  // Each lane's first `steps` bytes (fewer where it is shorter), lane after lane: what format 5's
  // head check covers; once that many steps have run.
  std::string head(i64 steps) const;
  i64 steps_done() const { return t_; }
  // -log2 of the model's own probability of every coded byte (if measured), and the coder's
  double model_bits() const { return model_bits_; }
  double coded_bits() const { return coder_->bits(); }

 private:
  // pipelined: the ring's slots (ring_ encoding, 2 decoding), each a step's rows, its active lanes
  // and its cut
  void lay_ring() {
    const i64 slots = encoding_ ? ring_ : 2;
    freq_.assign(size_t(slots * lanes_) * 256, 1);
    ring_active_.assign(size_t(slots), 0);
    ring_cut_.assign(size_t(slots), next_cut_);
  }
  i64 run_pipelined(i64 steps);
  // starts the model's thread: run_model (encoding) or run_model_groups (decoding)
  void start_model();
  // encoding: the model's thread: every step's lanes [0, cut) into the ring, at most ring_ steps ahead
  void run_model();
  // decoding: the coder's side and the model's of the lane groups' alternation
  i64 run_groups(i64 steps);
  void run_model_groups();
  // the coder steps lanes [lo, hi) of step t itself (their bytes of t - 1 known), into t's ring slot
  void step_own_lanes(i64 t, i64 lo, i64 hi);
  // either side's step of lanes [lo, hi) (their previous bytes gathered into prev), timed for steer()
  void step_timed(i64 t, std::vector<u8>& prev, i64 lo, i64 hi, ThreadPool& team, int first);
  // the coder, before each step: every BALANCE_STEPS steps, moves the cut a lane toward the side
  // that waited less, where that helps (or draws it, given a seed)
  void steer();
  // waits under `lock` until done() (or the model's thread failed, or stop_), spinning a few
  // microseconds before it sleeps (the other side is often that near, and waking a thread costs
  // about as much); returns the seconds waited. done() reads only atomics.
  template <class Done>
  double wait(std::unique_lock<std::mutex>& lock, Done done);
  // the lanes still active at step t (a prefix), from k, those active before it
  i64 active_at(i64 t, i64 k) const;
  // adds -log2 of the model's probability of each of the step's k coded bytes (sym_) under its rows
  void count_model_bits(const i64* freq, i64 k);
  std::shared_ptr<const model::Model> model_;
  std::shared_ptr<ThreadPool> pool_;
  std::unique_ptr<coder::SymbolCoder> coder_;
  std::unique_ptr<model::State> state_;
  i64 n_, lanes_, span_, t_ = 0, active_, ring_ = RING_STEPS;
  bool encoding_, measure_;
  std::vector<u8> grid_;   // lane-major: lane b's bytes at [b * span, (b + 1) * span)
  std::vector<u8> prev_, sym_;
  std::vector<i64> freq_;  // the step's rows; pipelined: a ring of ring_ steps' rows (decoding: 2)
  std::unique_ptr<ThreadPool> model_pool_;  // pipelined: the model's team (the rest of the pool but the coder's thread)
  std::unique_ptr<ThreadPool> coder_team_;  // pipelined: the coder's thread alone, for the lanes past the cut
  // pipelined: the ring's state, shared with the model's thread under mu_
  std::mutex mu_;
  std::condition_variable cv_;
  // encoding: steps whose rows are in the ring, and that the coder has coded. Decoding, counted in
  // lanes, t * (lanes_ + 1) + b for step t's lanes [0, b) (b <= lanes_, so that no step's count
  // is another's): rows the model's threads have made, and bytes the coder has decoded
  std::atomic<i64> made_{0}, used_{0};
  std::vector<i64> ring_active_, ring_cut_;  // each ring slot's active lanes (encoding) and cut
  i64 next_cut_ = 0;           // the cut steer() chose
  std::atomic<i64> cuts_{0};    // decoding: the steps whose cut is in the ring (the coder's step and the next)
  u64 cut_seed_ = 0;
  // since the cut last moved: the seconds each side waited, and spent stepping lanes, and how many
  double coder_waited_ = 0.0, model_waited_ = 0.0, stepped_ = 0.0;
  i64 lane_steps_ = 0;
  bool stop_ = false;
  std::exception_ptr failed_;
  std::thread model_thread_;
  double model_bits_ = 0.0;
};

}  // namespace shazip::block
