// The runtime's threads: a fixed set of workers that split one batched kernel call between them.
// Libraries (OpenBLAS, libxsmm) stay single-threaded inside each worker.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace acrobat {

class ThreadPool {
 public:
  // `threads` in all, the calling thread included (so threads - 1 workers).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs fn(0) .. fn(tasks - 1), task 0 on the calling thread, the others on workers (tasks <=
  // size()), and waits for all; the first exception thrown is rethrown here.
  void run(int tasks, const std::function<void(int)>& fn);

 private:
  void worker(int index);

  // A job is published by bumping generation_; workers spin on it for a while before they sleep on
  // the condition variable (batches come back to back: a sleeping worker would add its wake-up
  // latency to every one), and the caller spins on pending_ until the workers are done.
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_;
  const std::function<void(int)>* job_ = nullptr;
  int tasks_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;  // guarded by mutex_
};

// The number of threads to use by default: every core this process may run on.
int default_threads();

}  // namespace acrobat
