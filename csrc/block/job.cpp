#include "block/job.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace shazip::block {

Job::Job(std::shared_ptr<const model::Model> model, std::shared_ptr<ThreadPool> pool,
         std::unique_ptr<coder::SymbolCoder> coder, i64 n, i64 lanes, const u8* data, bool measure)
    : model_(std::move(model)), pool_(std::move(pool)), coder_(std::move(coder)), n_(n), lanes_(lanes),
      encoding_(data != nullptr), measure_(measure) {
  require(n >= 0 && lanes >= 1 && (n == 0 || lanes <= n), "a block needs 1 to n lanes");
  span_ = n ? (n + lanes - 1) / lanes : 0;
  active_ = lanes;
  grid_.assign(size_t(lanes * span_), 0);
  if (data) std::copy(data, data + n, grid_.begin());
  prev_.assign(size_t(lanes), BOS);
  sym_.assign(size_t(lanes), 0);
  freq_.assign(size_t(lanes) * 256, 1);  // without a model: uniform rows (job.h)
  if (model_) state_ = model_->new_state(lanes);
  if (model_ && pool_ && pool_->size() >= 2 && n > 0 && (encoding_ || lanes >= 2)) {
    model_pool_ = std::make_unique<ThreadPool>(int(std::min<i64>(lanes, pool_->size() - 1)));
    coder_team_ = std::make_unique<ThreadPool>(1);
    model_->reserve(*state_, model_pool_->size() + 1);
    // a start that steer() corrects: with one thread for the model, a quarter of the lanes the coder's
    next_cut_ = model_pool_->size() == 1 ? lanes - lanes / 4 : lanes;
    lay_ring();
    cuts_ = 1;  // step 0's; the coder decides each next one as it begins a step
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

template <class Done>
double Job::wait(std::unique_lock<std::mutex>& lock, Done done) {
  if (done() || stop_ || failed_) return 0.0;
  const auto t0 = std::chrono::steady_clock::now();
  lock.unlock();
  for (int i = 1; !done(); ++i) {
    if (i % 64 == 0 && std::chrono::steady_clock::now() - t0 > SPIN) break;
#if defined(__x86_64__) || defined(_M_X64)
    _mm_pause();
#endif
  }
  lock.lock();
  cv_.wait(lock, [&] { return done() || stop_ || failed_; });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Job::steer() {
  if (cut_seed_) {
    cut_seed_ = cut_seed_ * 6364136223846793005ull + 1442695040888963407ull;  // Knuth's MMIX LCG
    std::lock_guard<std::mutex> lock(mu_);
    next_cut_ = i64((cut_seed_ >> 33) % u64(lanes_ + 1));
    return;
  }
  if (t_ % BALANCE_STEPS != BALANCE_STEPS - 1) return;
  // A lane moved from one side to the other changes the difference of their waits by twice its
  // cost, so it moves only where that difference is more than its cost: the cut never swings
  // back and forth (one lane stays with the model's thread, not with the coder every other time).
  std::lock_guard<std::mutex> lock(mu_);
  const double lane = lane_steps_ ? stepped_ / double(lane_steps_) * double(BALANCE_STEPS) : 0.0;
  if (model_waited_ - coder_waited_ > lane)
    next_cut_ = std::min(lanes_, next_cut_ + 1);  // the model's threads waited: one more lane theirs
  else if (coder_waited_ - model_waited_ > lane)
    next_cut_ = std::max<i64>(0, next_cut_ - 1);  // the coder waited: one more lane its own
  coder_waited_ = model_waited_ = stepped_ = 0.0;
  lane_steps_ = 0;
}

// steps lanes [lo, hi) of step t by `team`, whose members' working memory starts at `first`, their
// bytes of step t - 1 gathered into prev; counts the time and the lanes for steer()
void Job::step_timed(i64 t, std::vector<u8>& prev, i64 lo, i64 hi, ThreadPool& team, int first) {
  if (lo >= hi) return;
  for (i64 b = lo; b < hi; ++b) prev[size_t(b)] = t ? grid_[size_t(b * span_ + t - 1)] : BOS;
  const auto t0 = std::chrono::steady_clock::now();
  const i64 slot = t % i64(ring_cut_.size());
  model_->step_lanes(*state_, t, prev.data(), lo, hi, &freq_[size_t(slot * lanes_ * 256)], team, first);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(mu_);
  stepped_ += took;
  lane_steps_ += hi - lo;
}

void Job::step_own_lanes(i64 t, i64 lo, i64 hi) {
  step_timed(t, prev_, lo, hi, *coder_team_, model_pool_->size());
}

void Job::start_model() {
  model_thread_ = std::thread([this] {
    try {
      if (encoding_)
        run_model();
      else
        run_model_groups();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      failed_ = std::current_exception();
      cv_.notify_all();
    }
  });
}

void Job::run_model() {
  std::vector<u8> prev(size_t(lanes_), BOS);
  i64 k = lanes_, cut = lanes_;
  for (i64 t = 0; t < span_; ++t) {
    k = active_at(t, k);
    {
      std::unique_lock<std::mutex> lock(mu_);
      model_waited_ += wait(lock, [&] { return made_ - used_ < ring_; });
      const i64 was = std::min(cut, k);
      cut = std::min(next_cut_, k);
      // lanes taken back from the coder: their step t - 1 was its own
      if (cut > was) model_waited_ += wait(lock, [&] { return used_ >= t; });
      if (stop_) return;
    }
    step_timed(t, prev, 0, cut, *model_pool_, 0);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ring_active_[size_t(t % ring_)] = k;
      ring_cut_[size_t(t % ring_)] = cut;
      ++made_;
    }
    cv_.notify_all();
  }
}

i64 Job::run_pipelined(i64 steps) {
  if (!encoding_) return run_groups(steps);
  if (!model_thread_.joinable() && t_ < span_) start_model();
  const i64 t1 = std::min(span_, t_ + steps), row = lanes_ * 256;
  i64 coded = 0;
  for (; t_ < t1; ++t_) {
    steer();
    i64 cut;
    {
      std::unique_lock<std::mutex> lock(mu_);
      coder_waited_ += wait(lock, [&] { return made_ > t_; });
      if (made_ <= t_) std::rethrow_exception(failed_);  // the model failed
      active_ = ring_active_[size_t(t_ % ring_)];
      cut = ring_cut_[size_t(t_ % ring_)];
    }
    const i64 k = active_;
    step_own_lanes(t_, cut, k);
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
  const i64 L = lanes_, W = L + 1;  // made_ and used_ count step t's lanes [0, b) as t * W + b
  std::vector<u8> prev(size_t(L), BOS);
  i64 k = L;
  for (i64 t = 0; t < span_; ++t) {
    k = active_at(t, k);
    i64 cut;
    {
      std::unique_lock<std::mutex> lock(mu_);
      model_waited_ += wait(lock, [&] { return cuts_ > t; });
      if (stop_) return;
      cut = std::min(ring_cut_[size_t(t % 2)], k);
    }
    const i64 half = (cut + 1) / 2;
    for (int g = 0; g < 2; ++g) {
      const i64 lo = g ? half : 0, hi = g ? cut : half;
      if (lo < hi) {
        if (t > 0) {  // the group's bytes of step t - 1 decoded
          std::unique_lock<std::mutex> lock(mu_);
          model_waited_ += wait(lock, [&] { return used_ >= (t - 1) * W + hi; });
          if (stop_) return;
        }
        step_timed(t, prev, lo, hi, *model_pool_, 0);
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        made_ = t * W + hi;
      }
      cv_.notify_all();
    }
  }
}

i64 Job::run_groups(i64 steps) {
  const i64 t1 = std::min(span_, t_ + steps), L = lanes_, W = L + 1, row = L * 256;
  if (!model_thread_.joinable() && t_ < span_) {
    const i64 k = active_at(0, L);
    step_own_lanes(0, std::min(ring_cut_[0], k), k);
    start_model();
  }
  i64 coded = 0;
  for (; t_ < t1; ++t_) {
    const i64 k = active_ = active_at(t_, active_), cut = std::min(ring_cut_[size_t(t_ % 2)], k);
    const i64 half = (cut + 1) / 2;
    const i64* f = &freq_[size_t((t_ % 2) * row)];
    steer();
    {
      std::lock_guard<std::mutex> lock(mu_);  // the model's threads read it once this step's first half is decoded
      ring_cut_[size_t((t_ + 1) % 2)] = next_cut_;
      cuts_ = t_ + 2;
    }
    cv_.notify_all();
    const i64 ends[3] = {half, cut, k};
    for (int g = 0; g < 3; ++g) {
      const i64 lo = g ? ends[g - 1] : 0, hi = ends[g];
      if (g < 2) {  // the model's rows
        std::unique_lock<std::mutex> lock(mu_);
        coder_waited_ += wait(lock, [&] { return made_ >= t_ * W + hi; });
        if (made_ < t_ * W + hi) std::rethrow_exception(failed_);  // the model failed
      }
      coder_->code_lanes(f, sym_.data(), lo, hi);
      for (i64 b = lo; b < hi; ++b) grid_[size_t(b * span_ + t_)] = sym_[size_t(b)];
      {
        std::lock_guard<std::mutex> lock(mu_);
        used_ = t_ * W + hi;
      }
      cv_.notify_all();
    }
    coder_->end_step(k);
    if (measure_) count_model_bits(f, k);
    coded += k;
    if (t_ + 1 < span_) {
      const i64 k1 = active_at(t_ + 1, k);
      step_own_lanes(t_ + 1, std::min(ring_cut_[size_t((t_ + 1) % 2)], k1), k1);
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

std::string Job::head(i64 steps) const {
  require(steps >= 0 && steps <= t_, "the head's steps have not run");
  std::string out;
  for (i64 b = 0; b < lanes_; ++b) {
    const i64 len = std::clamp<i64>(n_ - b * span_, 0, span_);
    out.append(reinterpret_cast<const char*>(grid_.data() + b * span_), size_t(std::min(steps, len)));
  }
  return out;
}

}  // namespace shazip::block
