// The stage's logistic mixer: one weight vector per selecting context, on the run-time kernel path.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <vector>
#include "common.h"
#include "kernels/kernels.h"
#include "stage/big_vector.h"
#include "stage/constants.h"

namespace shazip::stage {

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
  // x_mix (the clamped stretch-domain output) of a row's dot product
  static int output(i64 dot) { return clampi(dot >> 16, -ST_MAX, ST_MAX); }
  // x_mix of set `set` (Mixers computes all of a bit's rows in one kernel call)
  int dot(const i32* x, int set) const {
    const i32* row = set_weights(set);
    i64 sum;
    k_->mixer_dot(&row, 1, x, n_, &sum);
    return output(sum);
  }
  // the error of the set's prediction p16 of bit y, times the set's rate (counting the update
  // while the set is warm): what its row learns, by mixer_train
  i64 error(int set, int y, int p16) {
    const i64 err = (i64(y) << 16) - p16;
    i64 lr = lr_;
    if (warm_) {  // the boost is 0 once warm + n > top: the count (and the division) stop there
      u32& n = seen_[size_t(set)];
      if (warm_ + i64(n) <= top_) lr += top_ / (warm_ + i64(n++));
    }
    return err * lr;
  }
  void update(const i32* x, int set, int y, int p16) {
    i32* row = set_row(set);
    const i64 e = error(set, y, p16);
    k_->mixer_train(&row, &e, 1, x, n_);
  }
  BigVector<i32>& weights() { return w_; }
  const i32* set_weights(int set) const { return &w_[size_t(set) * n_]; }
  i32* set_row(int set) { return &w_[size_t(set) * n_]; }
  void prefetch(int set) const {  // a set's weights and count (a hint only: a row is several cache lines)
    const char* row = reinterpret_cast<const char*>(&w_[size_t(set) * n_]);
    const size_t last = size_t(n_) * sizeof(i32) - 1;
    for (size_t b = 0; b < last; b += 64) __builtin_prefetch(row + b);
    __builtin_prefetch(row + last);
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
  BigVector<i32> w_;
  BigVector<u32> seen_;  // updates of each set (while warm_), until its boost is 0
};

}  // namespace shazip::stage
