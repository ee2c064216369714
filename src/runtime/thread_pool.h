// The runtime's threads: a fixed set of workers that share one batched kernel call with the calling
// thread. Libraries (OpenBLAS, libxsmm) stay single-threaded inside each worker.
//
// Work is split dynamically: a call is cut into pieces, and every thread, the caller included, takes
// the next piece nobody has taken until none is left. A worker that is descheduled (another process
// on its core) simply takes fewer pieces; the caller never waits for a worker that has not started,
// only for pieces already running, and it waits without holding its core (it yields it).
//
// Between calls a worker may run background work (attach): short units the caller hands out while
// it runs serial code, for a core that would otherwise only wait for the next call.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "support/function_ref.h"

namespace acrobat {

class ThreadPool {
 public:
  // `threads` in all, the calling thread included (so threads - 1 workers).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Largest number of pieces one call may have.
  static constexpr int64_t kMaxPieces = (int64_t{1} << 16) - 1;

  // Runs fn(piece, thread) for every piece in [0, pieces) (1 <= pieces <= kMaxPieces), each exactly
  // once, on whichever threads are free: `thread` is 0 for the caller and 1..size()-1 for the
  // workers, so per-thread state can be indexed by it. Returns when every piece has finished. When
  // pieces throw, the exception of the lowest such piece is rethrown here (the others still run).
  void run(int64_t pieces, FunctionRef<void(int64_t, int)> fn);

  // Work for workers that no call needs: while no call has a piece for them, they call step(thread)
  // (several workers at once when there are several). A step runs one short unit (a millisecond or
  // so: a call published meanwhile runs without that worker until it returns) and returns false
  // when no unit is ready. It must not throw.
  class Background {
   public:
    virtual bool step(int thread) noexcept = 0;

   protected:
    ~Background() = default;
  };
  // Workers run b's units from now on (one Background at a time; none when the pool has no workers).
  void attach(Background* b);
  // New units are ready: wakes a sleeping worker.
  void notify();
  // No worker starts a unit of b after this (when b is the one attached); returns once none runs one.
  void detach(Background* b);

 private:
  void worker(int thread);
  // Runs one unit of the attached background work; false when there is none or no unit is ready.
  bool run_background(int thread);
  // Takes the next piece of the current call and runs it; false when none is left.
  bool run_one(int thread);

  // The current call as one word: call number (32 bits) | pieces (16) | next piece to take (16).
  // A piece is taken by a compare-exchange that advances `next`, so a thread holding a piece knows
  // the call cannot end (and fn_ cannot change) until it has finished it.
  std::atomic<uint64_t> state_{0};
  FunctionRef<void(int64_t, int)>* fn_ = nullptr;  // written before the call is published
  std::atomic<uint32_t> done_{0};                  // pieces finished in the current call (futex word)
  std::atomic<uint32_t> wake_{0};                  // bumped when a call is published (futex word)
  std::atomic<int> sleepers_{0};                   // workers asleep on wake_
  std::atomic<bool> stop_{false};
  std::atomic<Background*> background_{nullptr};
  std::atomic<int> in_background_{0};  // workers inside a step, or about to read background_
  std::atomic<uint64_t> posted_{0};    // bumped by notify (workers sleep only while it stays)
  std::mutex error_mutex_;
  std::exception_ptr error_;  // of the lowest failing piece so far, guarded by error_mutex_
  int64_t error_piece_ = -1;
  std::vector<std::thread> workers_;
};

// fn(piece, thread) for every piece in [0, pieces): shared among the threads of `pool` when there is
// one and more than one piece (and no more than it takes in one call), else one after another on
// the calling thread (thread 0).
void for_each_piece(ThreadPool* pool, int64_t pieces, FunctionRef<void(int64_t, int)> fn);

// The number of threads to use by default: every core this process may run on.
int default_threads();

}  // namespace acrobat
