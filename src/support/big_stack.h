// A worker thread with a large stack. The interpreters recurse on the machine stack once per call of
// the model (a tree's depth, a list's length), and the compiler's passes once per nested block, so
// they run where that recursion fits: the memory is reserved, not committed, until it is used. An
// engine keeps one such thread for all its runs; a compilation makes one for itself.
#pragma once

#include <pthread.h>

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>

namespace acrobat {

inline constexpr size_t kInterpreterStackBytes = size_t{512} << 20;

class StackThread {
 public:
  explicit StackThread(size_t stack_bytes = kInterpreterStackBytes);
  ~StackThread();
  StackThread(const StackThread&) = delete;
  StackThread& operator=(const StackThread&) = delete;

  // Runs `fn` on the thread and waits for it; an exception thrown by `fn` is rethrown here.
  void run(std::function<void()> fn) {
    start(std::move(fn));
    wait();
  }
  // Starts `fn` on the thread and returns; wait() waits for it to end and rethrows its exception.
  // One function at a time: start after wait.
  void start(std::function<void()> fn);
  void wait();

 private:
  static void* main_loop(void* self);

  pthread_t thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<void()> job_;  // the function to run, empty when idle
  bool job_done_ = true;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace acrobat
