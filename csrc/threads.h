// A team of threads that runs one task split n ways, over and over (once a model step).
//
// The caller is member 0; members 1..n-1 are threads that sleep on a condition variable
// between tasks (passive waiting: a busy machine loses nothing to spinning). A step takes
// about a millisecond, so a wake-up of some microseconds is cheap beside it.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace shazip {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return size_; }
  // Runs task(i) for i in [0, size()) at once, the caller taking i = 0; returns when every
  // member is done. The first exception thrown by a member is rethrown here. Calls from
  // several threads take turns.
  void run(const std::function<void(int)>& task);

 private:
  void work(int member);

  int size_;
  std::vector<std::thread> threads_;
  std::mutex turn_, mu_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* task_ = nullptr;
  unsigned long generation_ = 0;
  int running_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace shazip
