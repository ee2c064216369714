#include "runtime/thread_pool.h"

#include <sched.h>

#include <chrono>

#include "support/diagnostics.h"
#include "support/clock.h"

namespace acrobat {

void for_each_piece(ThreadPool* pool, int64_t pieces, FunctionRef<void(int64_t, int)> fn) {
  if (pool && pieces > 1 && pieces <= ThreadPool::kMaxPieces) {
    pool->run(pieces, fn);
    return;
  }
  for (int64_t i = 0; i < pieces; ++i) fn(i, 0);
}

int default_threads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace {

// How long a worker polls for the next call before it sleeps: batches come back to back, separated
// by the host program's work, and a sleeping worker would add its wake-up latency to every one.
constexpr auto kWorkerSpin = std::chrono::microseconds(100);
// How long the caller polls for running pieces before it yields its core: a piece left is usually
// one about to finish on another core; when it is not, the thread running it may be waiting for
// this very core.
constexpr auto kCallerSpin = std::chrono::microseconds(20);

inline void pause() { __builtin_ia32_pause(); }

constexpr int kPieceBits = 16;
constexpr uint64_t kPieceMask = (uint64_t{1} << kPieceBits) - 1;
inline uint64_t call_of(uint64_t s) { return s >> (2 * kPieceBits); }
inline int64_t pieces_of(uint64_t s) { return static_cast<int64_t>((s >> kPieceBits) & kPieceMask); }
inline int64_t next_of(uint64_t s) { return static_cast<int64_t>(s & kPieceMask); }
inline bool has_piece(uint64_t s) { return next_of(s) < pieces_of(s); }

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  wake_.fetch_add(1);
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

bool ThreadPool::run_one(int thread) {
  uint64_t s = state_.load(std::memory_order_acquire);
  do {
    if (!has_piece(s)) return false;
  } while (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel));
  // The piece is ours: the call cannot end before done_ counts it, so fn_ is the call's.
  const int64_t piece = next_of(s);
  try {
    (*fn_)(piece, thread);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_ || piece < error_piece_) {
      error_ = std::current_exception();
      error_piece_ = piece;
    }
  }
  done_.fetch_add(1, std::memory_order_acq_rel);
  return true;
}

void ThreadPool::run(int64_t pieces, FunctionRef<void(int64_t, int)> fn) {
  ACROBAT_ASSERT(pieces >= 1 && pieces <= kMaxPieces, "thread pool piece count");
  if (workers_.empty() || pieces == 1) {
    for (int64_t p = 0; p < pieces; ++p) fn(p, 0);
    return;
  }
  // Publish: the previous call has ended (every piece done), so nobody reads fn_ or done_ now.
  fn_ = &fn;
  done_.store(0, std::memory_order_relaxed);
  error_ = nullptr;
  error_piece_ = -1;
  const uint64_t call = call_of(state_.load(std::memory_order_relaxed)) + 1;
  state_.store((call << (2 * kPieceBits)) | (static_cast<uint64_t>(pieces) << kPieceBits),
               std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    wake_.fetch_add(1, std::memory_order_seq_cst);
    wake_.notify_all();
  }

  while (run_one(0)) {
  }
  // Only pieces running on other threads are left: poll briefly, then yield the core (to the
  // thread holding the last piece, if it waits for this core behind us).
  const auto until = Clock::now() + kCallerSpin;
  while (done_.load(std::memory_order_acquire) != pieces) {
    if (Clock::now() < until) pause();
    else sched_yield();
  }
  fn_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::attach(Background* b) {
  background_.store(b, std::memory_order_seq_cst);
  notify();
}

void ThreadPool::notify() {
  if (workers_.empty()) return;
  posted_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    wake_.fetch_add(1, std::memory_order_seq_cst);
    wake_.notify_all();
  }
}

void ThreadPool::detach(Background* b) {
  background_.compare_exchange_strong(b, nullptr, std::memory_order_seq_cst);
  // A worker counts itself in before it reads background_: one that read the old value is counted.
  while (in_background_.load(std::memory_order_seq_cst) != 0) sched_yield();
}

bool ThreadPool::run_background(int thread) {
  in_background_.fetch_add(1, std::memory_order_seq_cst);
  Background* b = background_.load(std::memory_order_seq_cst);
  const bool ran = b && b->step(thread);
  in_background_.fetch_sub(1, std::memory_order_seq_cst);
  return ran;
}

void ThreadPool::worker(int thread) {
  for (;;) {
    while (run_one(thread)) {
    }
    // Read before the step looks for units: a unit posted after it is seen by the polls below.
    const uint64_t posted = posted_.load(std::memory_order_seq_cst);
    if (run_background(thread)) continue;
    // Poll for the next call or units, then sleep until either is published.
    auto until = Clock::now() + kWorkerSpin;
    for (;;) {
      if (stop_.load(std::memory_order_relaxed)) return;
      if (has_piece(state_.load(std::memory_order_acquire))) break;
      if (posted_.load(std::memory_order_acquire) != posted) break;
      if (Clock::now() < until) {
        pause();
        continue;
      }
      uint32_t seen = wake_.load(std::memory_order_seq_cst);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      // Checked again after announcing the sleep: a call or units published before this point are
      // seen here, ones published after it bump wake_ (the publisher reads sleepers_ after).
      if (!stop_.load() && !has_piece(state_.load(std::memory_order_seq_cst)) &&
          posted_.load(std::memory_order_seq_cst) == posted)
        wake_.wait(seen);
      sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      until = Clock::now() + kWorkerSpin;
    }
  }
}

}  // namespace acrobat
