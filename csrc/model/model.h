// The SHA-RNN int8 step (quant.IntModel.step, "the twin", in C++): the same integers, on any
// kernel path, lane split and thread count.
//
// A Model holds a model's integer constants (numerics.IntWeights), its weights packed for its
// kernel path; a State holds lanes' recurrent state. `step` runs one step for the first `active`
// lanes in one parallel region: each member of the thread pool runs the whole step for its own
// contiguous slice of lanes. Lanes are independent and every sum is exact, so how they are split
// cannot change a result.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "kernels/kernels.h"
#include "threads.h"

namespace shazip::model {

using kernels::Kernels;

// A named constant as the constructor takes it: int8 or int64 values, C order, with a shape.
struct Array {
  std::vector<i64> shape;
  bool int8 = false;       // else int64
  std::vector<i8> i8s;     // when int8
  std::vector<i64> i64s;   // when int64
  i64 size() const;
};
using Arrays = std::map<std::string, Array>;

// The constructor's input (numerics.IntWeights, as core.py passes it): per block the arrays named
// by BLOCK_TENSORS (and ATTN_TENSORS for the attention block) with shifts {"lstm", "boom"(, "q")},
// the output layer (OUT_TENSORS), the tables (TABLES).
struct Spec {
  i64 d_model = 0, d_boom = 0, mem_len = 0;
  Array embed;  // int64 [256, d]
  std::vector<Arrays> blocks;
  std::vector<std::map<std::string, i64>> shifts;
  Arrays out;
  i64 out_shift = 0;
  Arrays tables;
};

const std::vector<std::string>& block_tensor_names();
const std::vector<std::string>& attn_tensor_names();
const std::vector<std::string>& out_tensor_names();
const std::vector<std::string>& table_names();

// 64-byte aligned bytes (the kernels' packed weights and scratch)
class Aligned {
 public:
  Aligned() = default;
  Aligned(const Aligned&) = delete;  // a copy would point into the original's buffer
  Aligned& operator=(const Aligned&) = delete;
  Aligned(Aligned&&) noexcept = default;
  Aligned& operator=(Aligned&&) noexcept = default;
  void resize(i64 bytes) {
    buf_.assign(static_cast<size_t>(bytes + 64), 0);
    const auto addr = reinterpret_cast<uintptr_t>(buf_.data());
    ptr_ = buf_.data() + ((64 - addr % 64) % 64);
    size_ = bytes;
  }
  u8* data() const { return ptr_; }
  i64 size() const { return size_; }

 private:
  std::vector<u8> buf_;
  u8* ptr_ = nullptr;
  i64 size_ = 0;
};

struct Scratch;  // one pool member's working memory (model.cpp)

// Per-lane state: h int8 [layers][lanes][d] (LSTM state * 127), c int64 [layers][lanes][d] (Q15),
// the attention ring int8 [lanes][M][d] with its row scales int64 [lanes][M], and pos (bytes
// consumed by every lane; ring slots < min(pos, M) are filled).
struct State {
  State();
  ~State();
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  i64 lanes = 0, pos = 0;
  std::vector<i8> h;
  std::vector<i64> c;
  std::vector<i8> ring;
  std::vector<i64> ring_e;
  const void* owner = nullptr;  // the Model that made it
  std::vector<std::unique_ptr<Scratch>> scratch;  // per pool member, made on the first step
  i64 scratch_rows = 0;                           // lanes each scratch holds
};

class Model {
 public:
  Model(const Spec& spec, const Kernels& k);
  std::unique_ptr<State> new_state(i64 lanes) const;  // zeros, pos 0
  // One step for lanes [0, active): prev[b] is lane b's previous byte (0 at the start); writes
  // freq[b * 256 + j] (every entry >= 1) for b < active, and advances pos by one. Lanes >= active
  // are not computed (finished lanes: the caller never asks for them again).
  void step(State& s, const u8* prev, i64 active, i64* freq, ThreadPool& pool) const {
    step_lanes(s, s.pos, prev, 0, active, freq, pool);
    s.pos += 1;
  }
  // Step t of lanes [lo, hi) alone (prev and freq indexed by lane, as above), every one of which
  // has had steps 0 .. t - 1: the lanes are independent, so the rows are step's. s.pos is neither
  // read nor moved (a caller that steps lane ranges each at its own pace keeps the count). Calls
  // may run at once from several threads on disjoint lane ranges, each pool's members using
  // working memory first_member .. first_member + pool.size() - 1, once reserve() has made it.
  void step_lanes(State& s, i64 t, const u8* prev, i64 lo, i64 hi, i64* freq, ThreadPool& pool,
                  int first_member = 0) const;
  // Working memory for `members` pool members in all, each for any number of lanes (what
  // step_lanes would otherwise make on its first call, which must not happen on two threads at once).
  void reserve(State& s, int members) const { ensure_scratch(s, s.lanes, members); }
  const Kernels& kernels() const { return k_; }
  i64 d_model() const { return d_; }
  i64 d_boom() const { return db_; }
  i64 mem_len() const { return M_; }
  i64 n_layers() const { return static_cast<i64>(blocks_.size()); }

 private:
  struct Norm {
    std::vector<i64> gain, bias;
  };
  struct Linear {
    std::vector<Aligned> w;  // packed, one per input
    std::vector<std::vector<i64>> m;
    std::vector<i64> bias;
    int shift = 0;
    i64 K = 0, N = 0;
  };
  struct Block {
    Norm ln_start, ln_ff, ln_xff, ln_mem, ln_mid, q_ln;
    Linear lstm, boom, q;
    std::vector<i64> vs;
    bool attn = false;
  };

  void lanes(State& s, i64 t, i64 lo, i64 hi, const u8* prev, i64* freq, Scratch& w) const;
  void attend(const Block& blk, State& s, i64 pos, i64 lo, i64 B, Scratch& w) const;
  void ensure_scratch(State& s, i64 rows, int members) const;
  Linear linear(const Arrays& t, const std::string& name, int parts, i64 shift, i64 K, i64 N, const std::string& where);
  void gemm(const i8* a, i64 rows, const Linear& l, int part, i32* c, Scratch& w) const;

  // The first block reads nothing but the previous byte up to its LSTM's input matmul, so that
  // part of a step is computed once per byte value, when the model is built: the row after
  // ln_start (the residual), its quantized scale, and the matmul's row.
  struct ByteRows {
    std::vector<i64> h;    // [256][d]
    std::vector<i64> e;    // [256]
    std::vector<i32> acc;  // [256][4d]
  };
  void first_rows(const std::vector<i64>& embed);  // from the embedding int64 [256][d]

  const Kernels& k_;
  i64 d_, db_, M_;
  std::vector<Block> blocks_;
  ByteRows first_;
  Linear out_;
  std::vector<i32> sig_, tanh_, gelu_, exp_att_, exp_out_;
};

}  // namespace shazip::model
