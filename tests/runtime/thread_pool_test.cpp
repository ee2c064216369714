// The runtime's threads: the pool's contract (every piece once, exclusive thread indices, what the
// caller wrote visible to the pieces and what they wrote visible after run(), errors rethrown,
// sleeping workers woken), the guard that decides whether splitting pays, and a model that splits
// its kernels across two threads while its instances wait on fibers and fork.
// scripts/sanitize.sh runs the ThreadPool, SharedProducts and TwoThreads tests under ThreadSanitizer.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "expect_values.h"
#include "loaded_model.h"
#include "compiler/pipeline.h"
#include "engines/aot_engine.h"
#include "engines/batched_engine.h"
#include "runtime/graph.h"
#include "engines/reference_engine.h"
#include "runtime/shared_products.h"
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

// Plain (non-atomic) data written by the caller before run() is what the pieces read, and what
// the pieces write is what the caller reads after it (TSan checks the ordering).
TEST(ThreadPool, WritesAreVisibleBothWays) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    std::vector<int64_t> input(1000);
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<int64_t>(i);
    for (int round = 0; round < 300; ++round) {
      const int64_t pieces = 1 + round % 7;
      for (auto& x : input) x += 1;
      std::vector<int64_t> sums(static_cast<size_t>(pieces), -1);
      pool.run(pieces, [&](int64_t p, int) {
        int64_t s = 0;
        for (size_t i = static_cast<size_t>(p); i < input.size(); i += static_cast<size_t>(pieces)) s += input[i];
        sums[static_cast<size_t>(p)] = s;
      });
      for (int64_t p = 0; p < pieces; ++p) {
        int64_t want = 0;  // input[i] == i + round + 1 now
        for (int64_t i = p; i < 1000; i += pieces) want += i + round + 1;
        ASSERT_EQ(sums[static_cast<size_t>(p)], want) << threads << " threads, round " << round;
      }
    }
  }
}

// Workers spin for a while after a call, then wait on a futex; a call after that wakes them, and
// they take pieces again.
TEST(ThreadPool, SleepingWorkersWakeForTheNextCall) {
  ThreadPool pool(2);
  for (int round = 0; round < 4; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::atomic<int> by_worker{0}, ran{0};
    pool.run(64, [&](int64_t, int thread) {
      ran.fetch_add(1);
      if (thread != 0) by_worker.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    EXPECT_EQ(ran.load(), 64) << "round " << round;
    EXPECT_GT(by_worker.load(), 0) << "round " << round << ": the sleeping worker never woke";
  }
}

// Background work: units posted while the caller does other things are run by a worker (asleep
// or not when they come), each once, never after detach() has returned; calls still run whole
// meanwhile, and detach() waits for a unit that is running.
class Units : public ThreadPool::Background {
 public:
  explicit Units(int total) : ran_(static_cast<size_t>(total)) {}
  void post(int n) { posted_.fetch_add(n); }
  bool step(int thread) noexcept override {
    if (detached_.load()) after_detach_.fetch_add(1);
    int u = taken_.load();
    do {
      if (u >= posted_.load()) return false;
    } while (!taken_.compare_exchange_weak(u, u + 1));
    if (thread == 0) by_caller_.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    ran_[static_cast<size_t>(u)].fetch_add(1);
    return true;
  }
  int taken() const { return taken_.load(); }
  std::vector<std::atomic<int>> ran_;
  std::atomic<bool> detached_{false};
  std::atomic<int> after_detach_{0}, by_caller_{0};

 private:
  std::atomic<int> posted_{0}, taken_{0};
};

TEST(ThreadPool, WorkersRunBackgroundUnitsBetweenCalls) {
  ThreadPool pool(2);
  Units units(60);
  pool.attach(&units);
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the worker falls asleep
    units.post(20);
    pool.notify();
    std::atomic<int> ran{0};
    pool.run(8, [&](int64_t, int) { ran.fetch_add(1); });  // a call while units are being run
    EXPECT_EQ(ran.load(), 8);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (units.taken() < 20 * (round + 1) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(units.taken(), 20 * (round + 1)) << "round " << round << ": the worker never took the units";
  }
  pool.detach(&units);
  units.detached_.store(true);
  units.post(10);  // no worker takes these
  pool.notify();
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(units.taken(), 60);
  EXPECT_EQ(units.after_detach_.load(), 0);
  for (size_t u = 0; u < 60; ++u) EXPECT_EQ(units.ran_[u].load(), 1) << "unit " << u;
  EXPECT_EQ(units.by_caller_.load(), 0);  // the caller never runs a background unit itself
}

// A product by packed weights made in a ShareProducts scope is cut by column panels among the
// pool's threads, with the bits of the product on one thread; outside a scope, in a scope of no
// pool and below the size that pays, it runs on the calling thread.
TEST(SharedProducts, ThreadsShareAProductWithTheBitsOfOne) {
  const int M = 64, K = 512, N = 1280;  // 84 MFLOP, 10 panels
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> A(size_t(M) * K), B(size_t(K) * N);
  for (float& x : A) x = u(rng);
  for (float& x : B) x = u(rng);
  const auto W = kernels::pack_weights(K, N, B.data(), N);
  std::vector<float> one(size_t(M) * N);
  kernels::gemm_packed(M, A.data(), K, *W, one.data(), N, false);
  auto product = [&](int rows, bool expect_shared) {
    std::vector<float> c(size_t(M) * N, std::nanf(""));
    EXPECT_EQ(gemm_packed_shared(rows, A.data(), K, *W, c.data(), N, false), expect_shared) << rows << " rows";
    if (rows == M) {
      EXPECT_EQ(std::memcmp(c.data(), one.data(), one.size() * sizeof(float)), 0);
    }
  };
  ThreadPool pool(2);
  product(M, false);
  {
    ShareProducts share(&pool);
    for (int round = 0; round < 20; ++round) product(M, true);
    product(1, false);  // 1.3 MFLOP
    {
      ShareProducts none(nullptr);
      product(M, false);
    }
    product(M, true);
  }
  product(M, false);
}

TEST(ThreadPool, StartsAndStopsIdleOrJustUsed) {
  for (int i = 0; i < 20; ++i) {
    ThreadPool pool(2 + i % 3);
    if (i % 2 == 0) continue;  // destroyed without a call
    std::vector<int> ran(static_cast<size_t>(pool.size() * 4), 0);
    pool.run(pool.size() * 4, [&](int64_t p, int) { ran[static_cast<size_t>(p)] = static_cast<int>(p) + 1; });
    for (size_t p = 0; p < ran.size(); ++p) EXPECT_EQ(ran[p], static_cast<int>(p) + 1) << "pool " << i;
  }
}

// DRNN grows each tree by decisions read from tensors: every instance runs on a fiber, its child
// subtree and sibling chain on forked fibers, and at H=256 a batch of its nodes is large enough to
// be split across the threads. Two threads give the reference engine's outputs on both batched
// engines, and the same graph and schedule as one thread.
TEST(TwoThreads, SplitKernelsUnderFibersAndForks) {
  CompileOptions options;
  options.dims["H"] = 256;
  auto module = compile_model(std::string(ACROBAT_SOURCE_DIR) + "/models/drnn.acr", options);
  ASSERT_TRUE(module->plan->tensor_reads);
  ASSERT_GT(module->plan->concurrency.num_groups, 0);
  auto params = std::make_shared<ParamStore>(init_params(*module, 4));
  auto inputs = random_tensor_inputs(*module, 64, 5);
  RunResult want = ReferenceEngine(module, params).run(inputs);
  AotOptions aot1, aot2;
  aot1.cache_dir = aot2.cache_dir = ACROBAT_TEST_CACHE_DIR;
  aot2.threads = 2;
  BatchedEngine batched1(module, params, Scheduler::InlineDepth, 1);
  BatchedEngine batched2(module, params, Scheduler::InlineDepth, 2);
  AotEngine compiled1(module, params, aot1);
  AotEngine compiled2(module, params, aot2);
  for (auto [one, two] : {std::pair<Engine*, Engine*>{&batched1, &batched2}, {&compiled1, &compiled2}}) {
    const std::string label = two->name();
    RunResult a = one->run(inputs);
    RunResult b = two->run(inputs);
    ASSERT_EQ(b.outputs.size(), inputs.size()) << label;
    for (size_t i = 0; i < inputs.size(); ++i)
      expect_values_close(b.outputs[i], want.outputs[i], label + ", instance " + std::to_string(i),
                          1e-4f, 1e-5f);
    EXPECT_EQ(a.stats.nodes, b.stats.nodes) << label;
    EXPECT_EQ(a.stats.batches, b.stats.batches) << label;
    EXPECT_GT(b.stats.mean_batch_size(), 16) << label;
  }
}

}  // namespace
}  // namespace acrobat
