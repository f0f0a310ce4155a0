// The stage's model components: hashed bucket tables, state maps, mixers, APMs, hashing.
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
#include "kernels/kernels.h"
#include "stage/tables.h"

namespace shazip::stage {


// A hash table of 16-byte buckets, one per (context, nibble): byte 0 is a check byte, bytes
// 1..15 the bit-history states of the nibble's 15 binary-tree nodes (byte 1, the nibble's
// first node, doubles as the bucket's priority). A lookup probes 3 buckets of one 64-byte
// line and, on a miss, clears the one of lowest priority.
class BucketTable {
 public:
  explicit BucketTable(int bits) : lines_(size_t(1) << (bits - 6)), mask_((u32(1) << (bits - 4)) - 1) {}
  u8* find(u32 h) {
    const u8 check = u8(h >> 24);
    const u32 i = h & mask_;
    u8* b[3] = {bucket(i), bucket(i ^ 1), bucket(i ^ 2)};
    for (u8* p : b)
      if (p[0] == check) return p;
    u8* victim = b[0];
    if (b[1][1] < victim[1]) victim = b[1];
    if (b[2][1] < victim[1]) victim = b[2];
    std::memset(victim, 0, 16);
    victim[0] = check;
    return victim;
  }
  size_t bytes() const { return lines_.size() * sizeof(Line); }
  void prefetch(u32 h) const { __builtin_prefetch(&lines_[(h & mask_) >> 2]); }

 private:
  struct alignas(64) Line {
    u8 b[64];
  };
  u8* bucket(u32 i) { return lines_[i >> 2].b + (i & 3) * 16; }
  std::vector<Line> lines_;
  u32 mask_;
};

// P22 counters indexed by a small context (a bit-history state, or a match state)
class StateMap {
 public:
  StateMap() = default;
  StateMap(size_t n, u32 init) : t_(n, init) {}
  int p16(size_t cx) const { return int(t_[cx] >> (COUNT_BITS + 6)); }
  void update(const Tables& tb, size_t cx, int y, int limit) { tb.update(t_[cx], y, limit); }
  std::vector<u32>& cells() { return t_; }

 private:
  std::vector<u32> t_;
};

// Logistic mixing of stretched inputs with one weight vector per selecting context. The dot
// product and the training run on the kernel path chosen at run time (kernels.h): integers
// only, so every path gives the same weights.
class Mixer {
 public:
  Mixer() = default;
  // warm > 0: each weight set learns faster while young, at lr + floor(3 lr warm / (warm + n))
  // after n updates of the set; 0: always at lr. With lr <= 64 the rate is at most 4 lr = 256
  // and the error below 2**16 in magnitude, so their product stays below 2**24 (mixer_train's bound).
  Mixer(const kernels::Kernels& k, int inputs, int sets, int lr, const std::vector<i32>& init, int warm = 0)
      : k_(&k), n_(inputs), lr_(lr), warm_(warm), top_(i64(lr) * 3 * warm), w_(size_t(inputs) * sets),
        seen_(warm ? sets : 0, 0) {
    if (lr < 1 || lr > 64) throw std::invalid_argument("mixer_lr must be in [1, 64]");
    for (int s = 0; s < sets; ++s) std::copy(init.begin(), init.end(), w_.begin() + size_t(s) * inputs);
  }
  // returns x_mix (the clamped stretch-domain output)
  int dot(const i32* x, int set) const {
    return clampi(k_->mixer_dot(&w_[size_t(set) * n_], x, n_) >> 16, -ST_MAX, ST_MAX);
  }
  void update(const i32* x, int set, int y, int p16) {
    const i64 err = (i64(y) << 16) - p16;
    i64 lr = lr_;
    if (warm_) {  // the boost is 0 once warm + n > top: the count (and the division) stop there
      u32& n = seen_[size_t(set)];
      if (warm_ + i64(n) <= top_) lr += top_ / (warm_ + i64(n++));
    }
    k_->mixer_train(&w_[size_t(set) * n_], x, n_, err * lr);
  }
  std::vector<i32>& weights() { return w_; }
  const i32* set_weights(int set) const { return &w_[size_t(set) * n_]; }
  void prefetch(int set) const {  // a set's weights (a hint only: a row is several cache lines)
    const char* row = reinterpret_cast<const char*>(&w_[size_t(set) * n_]);
    for (size_t b = 0; b < size_t(n_) * sizeof(i32); b += 64) __builtin_prefetch(row + b);
    if (!seen_.empty()) __builtin_prefetch(&seen_[size_t(set)]);
  }
  // SEED_SETS: a set never updated (while warm: the counts tell) takes the weights at `from`
  // (another set's, of a mixer over the same inputs) in place of the initial ones
  void seed(int set, const i32* from) {
    i32* w = &w_[size_t(set) * n_];
    if (!seen_.empty() && seen_[size_t(set)] == 0 && from != w) std::copy(from, from + n_, w);
  }
  size_t bytes() const { return w_.size() * sizeof(i32) + seen_.size() * sizeof(u32); }

 private:
  const kernels::Kernels* k_ = nullptr;
  int n_ = 0, lr_ = 0, warm_ = 0;
  i64 top_ = 0;  // 3 lr warm
  std::vector<i32> w_;
  std::vector<u32> seen_;  // updates of each set (while warm_), until its boost is 0
};

// Adaptive probability map: refines a probability given a context by interpolating
// between 33 cells spaced one nat apart over the stretch domain
class APM {
 public:
  APM() = default;
  APM(const Tables& tb, size_t contexts) : t_(contexts * APM_CELLS) {
    for (size_t c = 0; c < contexts; ++c)
      for (int j = 0; j < APM_CELLS; ++j) t_[c * APM_CELLS + j] = tb.sq(256 * (j - 16)) << 6;
  }
  // P16 of context cx for stretch-domain input x; remembers the cell to train
  int p16(int x, size_t cx) {
    const int u = clampi(x, -ST_MAX, ST_MAX) + 4096;
    const int j = u >> 8, w = u & 255;
    const i32* c = &t_[cx * APM_CELLS + j];
    last_ = cx * APM_CELLS + j + (w >> 7);
    return int(((i64(c[0]) * (256 - w) + i64(c[1]) * w) >> 8) >> 6);
  }
  void prefetch(size_t cx) const {  // the row's 132 bytes span at most 3 cache lines
    const char* row = reinterpret_cast<const char*>(&t_[cx * APM_CELLS]);
    for (int b : {0, 64, APM_CELLS * 4 - 1}) __builtin_prefetch(row + b);
  }
  void update(int y) {
    i32& c = t_[last_];
    c += i32((((i64(y) << P22_BITS) - c)) >> APM_RATE);
  }
  std::vector<i32>& cells() { return t_; }
  size_t bytes() const { return t_.size() * sizeof(i32); }

 private:
  std::vector<i32> t_;
  size_t last_ = 0;
};

// ----------------------------------------------------------------------------------------
// Hashing (uint32/uint64 arithmetic wraps: defined)
inline u32 hash64(u64 x, u64 seed) {
  x ^= seed * 0x9E3779B97F4A7C15ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 32;
  return u32(x);
}
inline u32 hash32(u32 x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}


}  // namespace shazip::stage
