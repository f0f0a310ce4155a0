#include "block/job.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace shazip::block {

Job::Job(std::shared_ptr<const model::Model> model, std::shared_ptr<ThreadPool> pool,
         std::unique_ptr<SymbolCoder> coder, i64 n, i64 lanes, const u8* data, bool measure, i64 ring)
    : model_(std::move(model)), pool_(std::move(pool)), coder_(std::move(coder)), n_(n), lanes_(lanes), ring_(ring),
      encoding_(data != nullptr), measure_(measure) {
  require(n >= 0 && lanes >= 1 && (n == 0 || lanes <= n), "a block needs 1 to n lanes");
  require(ring >= 1, "the model's ring needs at least one step");
  span_ = n ? (n + lanes - 1) / lanes : 0;
  active_ = lanes;
  grid_.assign(size_t(lanes * span_), 0);
  if (data) std::copy(data, data + n, grid_.begin());
  prev_.assign(size_t(lanes), BOS);
  sym_.assign(size_t(lanes), 0);
  freq_.assign(size_t(lanes) * 256, 1);  // without a model: uniform rows, which a stage without its NN input ignores
  if (model_) state_ = model_->new_state(lanes);
  if (model_ && pool_ && pool_->size() >= 2 && n > 0 && (encoding_ || lanes >= 2)) {
    model_pool_ = std::make_unique<ThreadPool>(int(std::min<i64>(lanes, pool_->size() - 1)));
    const i64 slots = encoding_ ? ring_ : 2;
    freq_.assign(size_t(slots * lanes) * 256, 1);
    ring_active_.assign(size_t(slots), 0);
  }
}

Job::~Job() {
  if (!model_thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  model_thread_.join();
}

i64 Job::run(i64 steps) {
  if (model_pool_) return run_pipelined(steps);
  i64 coded = 0;
  for (i64 s = 0; s < steps && t_ < span_; ++s, ++t_) {
    const i64 k = active_ = active_at(t_, active_);
    if (model_) model_->step(*state_, prev_.data(), k, freq_.data(), *pool_);
    if (encoding_)
      for (i64 b = 0; b < k; ++b) sym_[size_t(b)] = grid_[size_t(b * span_ + t_)];
    coder_->code(freq_.data(), sym_.data(), k);
    for (i64 b = 0; b < k; ++b) grid_[size_t(b * span_ + t_)] = prev_[size_t(b)] = sym_[size_t(b)];
    if (measure_ && model_) count_model_bits(freq_.data(), k);
    coded += k;
  }
  return coded;
}

void Job::run_model() {
  try {
    const i64 row = lanes_ * 256;
    std::vector<u8> prev(size_t(lanes_), BOS);
    i64 k = lanes_;
    for (i64 t = 0; t < span_; ++t) {
      k = active_at(t, k);
      for (i64 b = 0; b < k; ++b) prev[size_t(b)] = t ? grid_[size_t(b * span_ + t - 1)] : BOS;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || made_ - used_ < ring_; });
        if (stop_) return;
      }
      model_->step(*state_, prev.data(), k, &freq_[size_t((t % ring_) * row)], *model_pool_);
      {
        std::lock_guard<std::mutex> lock(mu_);
        ring_active_[size_t(t % ring_)] = k;
        ++made_;
      }
      cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    failed_ = std::current_exception();
    cv_.notify_all();
  }
}

i64 Job::run_pipelined(i64 steps) {
  if (!encoding_) return run_groups(steps);
  if (!model_thread_.joinable() && t_ < span_) model_thread_ = std::thread([this] { run_model(); });
  const i64 t1 = std::min(span_, t_ + steps), row = lanes_ * 256;
  i64 coded = 0;
  for (; t_ < t1; ++t_) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return made_ > t_ || failed_; });
      if (made_ <= t_) std::rethrow_exception(failed_);  // the model failed
      active_ = ring_active_[size_t(t_ % ring_)];
    }
    const i64 k = active_;
    const i64* f = &freq_[size_t((t_ % ring_) * row)];
    for (i64 b = 0; b < k; ++b) sym_[size_t(b)] = grid_[size_t(b * span_ + t_)];
    coder_->code(f, sym_.data(), k);
    if (measure_) count_model_bits(f, k);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++used_;
    }
    cv_.notify_all();
    coded += k;
  }
  return coded;
}

void Job::run_model_groups() {
  try {
    const i64 row = lanes_ * 256, half = (lanes_ + 1) / 2;
    std::vector<u8> prev(size_t(lanes_), BOS);
    i64 k = lanes_;
    for (i64 t = 0; t < span_; ++t) {
      k = active_at(t, k);
      const i64 cut = std::min(half, k);
      for (int g = 0; g < 2; ++g) {
        const i64 lo = g ? cut : 0, hi = g ? k : cut;
        {
          std::unique_lock<std::mutex> lock(mu_);  // group g's bytes of step t - 1 decoded
          cv_.wait(lock, [&] { return stop_ || group_coded_[g] >= t; });
          if (stop_) return;
          if (g == 0) ring_active_[size_t(t % 2)] = k;
        }
        for (i64 b = lo; b < hi; ++b) prev[size_t(b)] = t ? grid_[size_t(b * span_ + t - 1)] : BOS;
        model_->step_lanes(*state_, prev.data(), lo, hi, &freq_[size_t((t % 2) * row)], *model_pool_);
        {
          std::lock_guard<std::mutex> lock(mu_);
          ++group_made_[g];
        }
        cv_.notify_all();
      }
      model_->end_step(*state_);
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    failed_ = std::current_exception();
    cv_.notify_all();
  }
}

i64 Job::run_groups(i64 steps) {
  if (!model_thread_.joinable() && t_ < span_) model_thread_ = std::thread([this] { run_model_groups(); });
  const i64 t1 = std::min(span_, t_ + steps), row = lanes_ * 256, half = (lanes_ + 1) / 2;
  i64 coded = 0;
  for (; t_ < t1; ++t_) {
    const i64* f = &freq_[size_t((t_ % 2) * row)];
    for (int g = 0; g < 2; ++g) {
      i64 k;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return group_made_[g] > t_ || failed_; });
        if (group_made_[g] <= t_) std::rethrow_exception(failed_);  // the model failed
        k = ring_active_[size_t(t_ % 2)];
      }
      const i64 cut = std::min(half, k), lo = g ? cut : 0, hi = g ? k : cut;
      coder_->code_lanes(f, sym_.data(), lo, hi);
      for (i64 b = lo; b < hi; ++b) grid_[size_t(b * span_ + t_)] = sym_[size_t(b)];
      if (g == 1) {
        coder_->end_step(k);
        active_ = k;
        if (measure_) count_model_bits(f, k);
        coded += k;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++group_coded_[g];
      }
      cv_.notify_all();
    }
  }
  return coded;
}

i64 Job::active_at(i64 t, i64 k) const {
  while (k > 0 && std::min(span_, n_ - (k - 1) * span_) <= t) --k;  // lane k - 1 has ended
  return k;
}

void Job::count_model_bits(const i64* freq, i64 k) {
  for (i64 b = 0; b < k; ++b) {
    const i64* f = freq + b * 256;
    i64 sum = 0;
    for (int j = 0; j < 256; ++j) sum += f[j];
    model_bits_ -= std::log2(double(f[sym_[size_t(b)]]) / double(sum));
  }
}

std::string Job::result() {
  require(done(), "the block is not finished");
  if (encoding_) return coder_->finish();
  return std::string(reinterpret_cast<const char*>(grid_.data()), size_t(n_));
}

}  // namespace shazip::block
