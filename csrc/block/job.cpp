#include "block/job.h"

#include <algorithm>
#include <cmath>

namespace shazip::block {

Job::Job(std::shared_ptr<const model::Model> model, std::shared_ptr<ThreadPool> pool,
         std::unique_ptr<SymbolCoder> coder, i64 n, i64 lanes, const u8* data, bool measure)
    : model_(std::move(model)), pool_(std::move(pool)), coder_(std::move(coder)), n_(n), lanes_(lanes),
      encoding_(data != nullptr), measure_(measure) {
  require(n >= 0 && lanes >= 1 && (n == 0 || lanes <= n), "a block needs 1 to n lanes");
  span_ = n ? (n + lanes - 1) / lanes : 0;
  active_ = lanes;
  grid_.assign(size_t(lanes * span_), 0);
  if (data) std::copy(data, data + n, grid_.begin());
  prev_.assign(size_t(lanes), BOS);
  sym_.assign(size_t(lanes), 0);
  freq_.assign(size_t(lanes) * 256, 1);  // without a model: uniform rows, which a stage without its NN input ignores
  if (model_) state_ = model_->new_state(lanes);
}

i64 Job::run(i64 steps) {
  i64 coded = 0;
  for (i64 s = 0; s < steps && t_ < span_; ++s, ++t_) {
    while (active_ > 0 && std::min(span_, n_ - (active_ - 1) * span_) <= t_) --active_;  // lane lengths
    const i64 k = active_;
    if (model_) model_->step(*state_, prev_.data(), k, freq_.data(), *pool_);
    if (encoding_)
      for (i64 b = 0; b < k; ++b) sym_[size_t(b)] = grid_[size_t(b * span_ + t_)];
    coder_->code(freq_.data(), sym_.data(), k);
    for (i64 b = 0; b < k; ++b) {
      grid_[size_t(b * span_ + t_)] = prev_[size_t(b)] = sym_[size_t(b)];
      if (measure_ && model_) {
        const i64* f = &freq_[size_t(b * 256)];
        i64 sum = 0;
        for (int j = 0; j < 256; ++j) sum += f[j];
        model_bits_ -= std::log2(double(f[sym_[size_t(b)]]) / double(sum));
      }
    }
    coded += k;
  }
  return coded;
}

std::string Job::result() {
  require(done(), "the block is not finished");
  if (encoding_) return coder_->finish();
  return std::string(reinterpret_cast<const char*>(grid_.data()), size_t(n_));
}

}  // namespace shazip::block
