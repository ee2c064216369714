// The runtime's thread pool (dynamic pieces) and the guard that decides whether splitting pays.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/graph.h"
#include "runtime/thread_pool.h"

namespace acrobat {
namespace {

// Every piece of every call runs exactly once, on a thread index in range, whatever the piece
// count (1, fewer than the threads, many) and however often the pool is reused.
TEST(ThreadPool, RunsEveryPieceOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t pieces : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{64}, int64_t{1000}}) {
      for (int call = 0; call < 50; ++call) {
        std::vector<std::atomic<int>> runs(static_cast<size_t>(pieces));
        std::atomic<int> bad_thread{0};
        pool.run(pieces, [&](int64_t piece, int thread) {
          runs[static_cast<size_t>(piece)].fetch_add(1);
          if (thread < 0 || thread >= threads) bad_thread.fetch_add(1);
        });
        for (int64_t p = 0; p < pieces; ++p) ASSERT_EQ(runs[p].load(), 1) << "piece " << p;
        EXPECT_EQ(bad_thread.load(), 0);
      }
    }
  }
}

// Per-thread state indexed by the thread argument is never used by two pieces at once.
TEST(ThreadPool, ThreadIndexIsExclusive) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> inside(3);
  std::atomic<int> overlaps{0};
  for (int call = 0; call < 200; ++call)
    pool.run(30, [&](int64_t, int thread) {
      if (inside[thread].fetch_add(1) != 0) overlaps.fetch_add(1);
      std::this_thread::yield();
      inside[thread].fetch_sub(1);
    });
  EXPECT_EQ(overlaps.load(), 0);
}

// A piece that throws: the other pieces still run, the exception of the lowest failing piece is
// rethrown, and the pool works afterwards.
TEST(ThreadPool, RethrowsTheLowestPiecesError) {
  ThreadPool pool(2);
  for (int call = 0; call < 20; ++call) {
    std::atomic<int> ran{0};
    try {
      pool.run(40, [&](int64_t piece, int) {
        ran.fetch_add(1);
        if (piece == 7 || piece == 31) throw std::runtime_error("piece " + std::to_string(piece));
      });
      FAIL() << "expected an exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "piece 7");
    }
    EXPECT_EQ(ran.load(), 40);
  }
  std::atomic<int> ran{0};
  pool.run(10, [&](int64_t, int) { ran.fetch_add(1); });
  EXPECT_EQ(ran.load(), 10);
}

// A worker that is slow (as one descheduled behind another process) takes fewer pieces; the
// caller takes the rest instead of waiting for a fixed share to be done by it.
TEST(ThreadPool, SlowWorkerTakesFewerPieces) {
  ThreadPool pool(2);
  std::atomic<int> by_caller{0}, by_worker{0};
  pool.run(40, [&](int64_t, int thread) {
    if (thread == 0) {
      by_caller.fetch_add(1);
    } else {
      by_worker.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  EXPECT_EQ(by_caller.load() + by_worker.load(), 40);
  // The worker sleeps 100 ms per piece; the caller's pieces take microseconds.
  EXPECT_LE(by_worker.load(), 3);
}

// The guard: rounds in which splitting saved nothing switch splitting off for a back-off that
// doubles up to its limit; a round that pays resets it.
TEST(SplitGuard, BacksOffWhenSplittingDoesNotPay) {
  SplitGuard g;
  auto round = [&](double wall, double alone) {
    for (int i = 0; i < SplitGuard::kRound; ++i) {
      ASSERT_TRUE(g.split());
      g.record(wall, alone, true);
    }
  };
  auto serial_batches = [&] {
    int64_t n = 0;
    while (!g.split()) ++n;
    return n;
  };
  round(1.0, 1.8);  // saves: splitting stays on
  EXPECT_EQ(serial_batches(), 0);
  round(1.0, 1.0);  // saves less than 5%: off for kBackoff batches
  EXPECT_EQ(serial_batches(), SplitGuard::kBackoff);
  round(1.2, 1.0);
  EXPECT_EQ(serial_batches(), 2 * SplitGuard::kBackoff);
  for (int i = 0; i < 10; ++i) {
    round(1.2, 1.0);
    EXPECT_LE(serial_batches(), SplitGuard::kMaxBackoff);
  }
  round(1.0, 2.0);  // pays again: the next losing round backs off by kBackoff again
  EXPECT_EQ(serial_batches(), 0);
  round(1.2, 1.0);
  EXPECT_EQ(serial_batches(), SplitGuard::kBackoff);
  // Batches without an estimate (the caller ran no piece) do not count towards a round.
  for (int i = 0; i < 3 * SplitGuard::kRound; ++i) g.record(5.0, 1.0, false);
  EXPECT_EQ(serial_batches(), 0);
}

}  // namespace
}  // namespace acrobat
