#include "runtime/thread_pool.h"

#include <sched.h>

#include <chrono>

#include "support/diagnostics.h"

namespace acrobat {

int default_threads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  start_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {
// How long a worker keeps polling for the next job before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(200);

inline void pause() { __builtin_ia32_pause(); }
}  // namespace

void ThreadPool::run(int tasks, const std::function<void(int)>& fn) {
  ACROBAT_ASSERT(tasks >= 1 && tasks <= size(), "thread pool task count");
  if (tasks == 1) return fn(0);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    tasks_ = tasks;
    error_ = nullptr;
    pending_.store(tasks - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_.notify_all();
  std::exception_ptr mine;
  try {
    fn(0);
  } catch (...) {
    mine = std::current_exception();
  }
  while (pending_.load(std::memory_order_acquire) != 0) pause();
  std::lock_guard<std::mutex> lock(mutex_);
  job_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Poll first, then sleep.
    auto until = std::chrono::steady_clock::now() + kSpin;
    while (generation_.load(std::memory_order_acquire) == seen && !stop_.load()) {
      pause();
      if (std::chrono::steady_clock::now() > until) {
        std::unique_lock<std::mutex> lock(mutex_);
        start_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
        break;
      }
    }
    if (stop_.load()) return;
    const std::function<void(int)>* job;
    int tasks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      seen = generation_.load();
      job = job_;
      tasks = tasks_;
    }
    if (index >= tasks) continue;
    std::exception_ptr error;
    try {
      (*job)(index);
    } catch (...) {
      error = std::current_exception();
    }
    if (error) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = error;
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace acrobat
