// The context models at work: for each, a hashed table of bit histories (order 1: a direct one)
// and a state map from history to probability; with RUNS, a run table beside each hashed one.
// Per byte the contexts are hashed; per bit each model gives its inputs and learns the bit.
#pragma once

#include <algorithm>
#include <vector>

#include "common.h"
#include "stage/big_vector.h"
#include "stage/bucket_table.h"
#include "stage/contexts.h"
#include "stage/hash.h"
#include "stage/params.h"
#include "stage/runs.h"
#include "stage/state_map.h"
#include "stage/tables.h"

namespace shazip::stage {

class ContextMaps {
 public:
  ContextMaps() = default;
  ContextMaps(const Params& p, const Tables& tb) : table_bits_(p.table_bits), field_eq_(p.has(FIELD_EQ)) {
    std::vector<u32> init(256);  // a state's cell starts at the probability its counts give
    for (int s = 0; s < 256; ++s) {
      const int n0 = tb.history.n0(s), n1 = tb.history.n1(s);
      init[s] = u32((i64(2 * n1 + 1) << P22_BITS) / (2 * (n0 + n1) + 2)) << COUNT_BITS;
    }
    for (int o : context_models(p)) {
      if (o == 1 && direct_.empty()) {
        direct_.assign(65536, 0);
        direct_model_ = int(models_.size());
        models_.push_back({o, -1});
      } else {
        models_.push_back({o, int(tables_.size())});
        tables_.emplace_back(p.table_bits);
      }
    }
    maps_ = StateMap(models_.size() * 256, 0);  // model i's cells at i * 256
    for (size_t i = 0; i < models_.size(); ++i) std::copy(init.begin(), init.end(), maps_.cells().begin() + i * 256);
    if (p.has(RUNS)) {
      runs_.assign(tables_.size(), BigVector<u32>(size_t(1) << (p.table_bits - RUN_BITS_BELOW), 0));
      run_map_ = StateMap(tables_.size() * 256, u32(1) << (P22_BITS - 1 + COUNT_BITS));
    }
  }
  // the inputs they give each bit
  int inputs() const { return int(models_.size() + runs_.size()); }
  size_t bytes() const {
    size_t n = direct_.size();
    for (const auto& t : tables_) n += t.bytes();
    for (const auto& r : runs_) n += r.size() * sizeof(u32);
    return n;
  }

  // hashes each model's context for the lane's next byte; fetches the first nibble's buckets and
  // the run entries (a hint only: it changes no value)
  void begin_byte(const Lane& L, const Looking& to) {
    const int nm = int(models_.size());
    for (int i = 0; i < nm; ++i) {
      const int o = models_[i].order;
      ctx_[i] = hash64(context_bytes(o, L, to, field_eq_), u64(o));
      if (models_[i].table >= 0) tables_[models_[i].table].prefetch(bucket_hash(ctx_[i], 1));
    }
    for (int i = 0; i < nm && !runs_.empty(); ++i) {
      run_[i] = nullptr;
      if (models_[i].table < 0) continue;
      run_[i] = &runs_[size_t(models_[i].table)][ctx_[i] >> (32 - table_bits_ + RUN_BITS_BELOW)];
      run_chk_[i] = (ctx_[i] >> 2) & 255;
      __builtin_prefetch(run_[i]);
    }
    c1_ = u32(L.hist & 0xFF);
  }

  // the inputs at bit k (c0: 1 followed by the bits so far), appended to x; returns how many
  // models have seen their context's node before
  int bit_inputs(const Tables& tb, int k, int c0, i32* x, int& count) {
    const int nm = int(models_.size());
    int n = count;  // a local: x's stores cannot then alias it
    if (k == 3)  // the second nibble's buckets are one of two: fetch both ahead (a hint only)
      for (int i = 0; i < nm; ++i)
        if (models_[i].table >= 0)
          for (int y = 0; y < 2; ++y) tables_[models_[i].table].prefetch(bucket_hash(ctx_[i], c0 * 2 + y));
    if (k == 0 || k == 4) {  // a new nibble: each context's bucket (order 1: its direct row)
      j_ = 1;
      for (int i = 0; i < nm; ++i)
        node_[i] = models_[i].table < 0 ? &direct_[c1_ << 8] : tables_[models_[i].table].find(bucket_hash(ctx_[i], c0));
    }
    int seen = 0;
    for (int i = 0; i < nm; ++i) state_[i] = node_[i] + j_;
    if (direct_model_ >= 0) state_[direct_model_] = node_[direct_model_] + c0;  // order 1's row: by c0 (1..255)
    for (int i = 0; i < nm; ++i) {
      const int st = *state_[i];
      x[n++] = tb.st(maps_.p16(size_t(i) * 256 + size_t(st)));
      seen += st != 0;
    }
    if (!runs_.empty()) {
      if (k == 0) {  // each run entry, fetched by now, read once for the byte; those with a guess go on
        live_n_ = 0;
        for (int i = 0, slot = 0; i < nm; ++i) {
          if (!run_[i]) continue;
          guess_[i] = run_guess(*run_[i], run_chk_[i], models_[i].table);
          if (guess_[i].byte >= 0) live_[live_n_++] = {i, slot, 0};
          ++slot;
        }
      }
      const int runs = int(runs_.size());
      std::fill(x + n, x + n + runs, 0);
      const int group = k == 0 ? 0 : k == 1 ? 1 : k < 5 ? 2 : 3;  // the bit position's group
      int kept = 0;
      for (int l = 0; l < live_n_; ++l) {  // a guess the bits so far contradict is off for the byte
        Live r = live_[l];
        const RunGuess& g = guess_[r.model];
        if (((g.byte | 256) >> (8 - k)) != c0) continue;
        r.ctx = g.base + group * 4 + (g.byte >> (7 - k) & 1);
        x[n + r.slot] = tb.st(run_map_.p16(size_t(r.ctx))) >> g.shift;
        live_[kept++] = r;
      }
      live_n_ = kept;
      n += runs;
    }
    count = n;
    return seen;
  }

  void update(const Tables& tb, int y) {
    const int nm = int(models_.size());
    for (int l = 0; l < live_n_; ++l) run_map_.update(tb, size_t(live_[l].ctx), y, COUNT_LIMIT_MAX);
    for (int i = 0; i < nm; ++i) {
      maps_.update(tb, size_t(i) * 256 + *state_[i], y, COUNT_LIMIT_MAX);
      *state_[i] = tb.history.next(*state_[i], y);
    }
    j_ = j_ * 2 + y;
  }

  // the run entries after the byte c
  void end_byte(int c) {
    for (int i = 0; i < int(models_.size()) && !runs_.empty(); ++i)
      if (run_[i]) *run_[i] = run_after(*run_[i], run_chk_[i], c);
  }

 private:
  static u32 bucket_hash(u32 ctx, int c0) { return hash32(ctx + u32(c0) * 0x9E3779B1u); }
  // a context model: its kind (contexts.h) and hashed table (-1: direct)
  struct Model {
    int order, table;
  };
  int table_bits_ = 10;
  bool field_eq_ = false;
  std::vector<Model> models_;
  std::vector<BucketTable> tables_;
  std::vector<u8> direct_;  // order 1: c1 << 8 | c0 -> bit-history state
  int direct_model_ = -1;  // order 1's place among the models (-1: none)
  StateMap maps_;  // each model's state map: model i's cells at i * 256
  std::vector<BigVector<u32>> runs_;  // RUNS: each hashed model's run table (as tables_)
  StateMap run_map_;  // RUNS: by the model, the run's length, the bit position, b2 != b1 and b1's bit
  // RUNS: a model whose guess the bits so far agree with: its place among the models and the run
  // inputs, and its run map context at this bit
  struct Live {
    int model, slot, ctx;
  };
  // the byte's and the bit's: contexts, run entries, their checks and guesses, buckets, states, live guesses
  u32 ctx_[MAX_INPUTS] = {};
  u32* run_[MAX_INPUTS] = {};
  u32 run_chk_[MAX_INPUTS] = {};
  RunGuess guess_[MAX_INPUTS];
  u8* node_[MAX_INPUTS] = {};
  u8* state_[MAX_INPUTS] = {};
  Live live_[MAX_INPUTS] = {};
  int live_n_ = 0;
  u32 c1_ = 0;
  int j_ = 1;  // 1 followed by the bits so far within the nibble: a bucket's node (1..15)
};


}  // namespace shazip::stage
