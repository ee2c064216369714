// The runtime's threads: the pool's contract (every task once, task 0 on the caller, what the
// caller wrote visible to the tasks and what they wrote visible after run(), errors rethrown, idle
// workers woken), and a model that splits its kernels across two threads while its instances wait
// on fibers and fork. scripts/sanitize.sh runs these under ThreadSanitizer.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "expect_values.h"
#include "ir/pipeline.h"
#include "runtime/aot_engine.h"
#include "runtime/batched_engine.h"
#include "runtime/reference_engine.h"
#include "runtime/thread_pool.h"

namespace acrobat {
namespace {

// Task t of `tasks` sums input[i] for i = t, t + tasks, ...
int64_t strided_sum(const std::vector<int64_t>& input, int t, int tasks) {
  int64_t s = 0;
  for (size_t i = static_cast<size_t>(t); i < input.size(); i += static_cast<size_t>(tasks)) s += input[i];
  return s;
}

TEST(ThreadPool, RunsEachTaskOnceOnItsOwnThread) {
  for (int threads : {2, 3, 4}) {
    ThreadPool pool(threads);
    ASSERT_EQ(pool.size(), threads);
    std::vector<int64_t> input(1000);
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<int64_t>(i);
    for (int round = 0; round < 300; ++round) {
      const int tasks = 1 + round % threads;
      for (auto& x : input) x += 1;  // written here, read by the tasks
      std::vector<int64_t> sums(static_cast<size_t>(tasks), -1);
      std::vector<int> runs(static_cast<size_t>(tasks), 0);
      std::vector<std::thread::id> ids(static_cast<size_t>(tasks));
      pool.run(tasks, [&](int t) {
        sums[t] = strided_sum(input, t, tasks);
        ++runs[t];
        ids[t] = std::this_thread::get_id();
      });
      for (int t = 0; t < tasks; ++t) {
        // input[i] == i + round + 1 now.
        int64_t want = 0;
        for (int64_t i = t; i < 1000; i += tasks) want += i + round + 1;
        ASSERT_EQ(sums[t], want) << threads << " threads, round " << round << ", task " << t;
        ASSERT_EQ(runs[t], 1) << threads << " threads, round " << round << ", task " << t;
      }
      EXPECT_EQ(ids[0], std::this_thread::get_id()) << "task 0 runs on the calling thread";
      EXPECT_EQ(std::set<std::thread::id>(ids.begin(), ids.end()).size(), ids.size())
          << threads << " threads, round " << round << ": two tasks shared a thread";
    }
  }
}

TEST(ThreadPool, RethrowsATasksErrorAndRunsOn) {
  ThreadPool pool(2);
  for (int failing : {0, 1}) {
    std::vector<int> done(2, 0);
    try {
      pool.run(2, [&](int t) {
        if (t == failing) throw std::runtime_error("task " + std::to_string(t));
        done[t] = 1;
      });
      FAIL() << "no exception from task " << failing;
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "task " + std::to_string(failing));
    }
    // The other task ran to its end before run() returned.
    EXPECT_EQ(done[1 - failing], 1) << "failing task " << failing;
  }
  std::vector<int64_t> sums(2, 0);
  std::vector<int64_t> input{1, 2, 3, 4, 5};
  pool.run(2, [&](int t) { sums[t] = strided_sum(input, t, 2); });
  EXPECT_EQ(sums, (std::vector<int64_t>{9, 6}));
}

// Workers poll for a while after a job, then sleep on a condition variable; a job that comes
// after that must wake them.
TEST(ThreadPool, SleepingWorkersWakeForTheNextJob) {
  ThreadPool pool(3);
  std::vector<int64_t> input(300, 2);
  for (int round = 0; round < 4; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    input[0] = round;
    std::vector<int64_t> sums(3, -1);
    pool.run(3, [&](int t) { sums[t] = strided_sum(input, t, 3); });
    EXPECT_EQ(sums, (std::vector<int64_t>{2 * 99 + round, 2 * 100, 2 * 100})) << "round " << round;
  }
}

TEST(ThreadPool, StartsAndStopsIdleOrJustUsed) {
  for (int i = 0; i < 20; ++i) {
    ThreadPool pool(2 + i % 3);
    if (i % 2 == 0) continue;  // destroyed without a job
    std::vector<int> ran(static_cast<size_t>(pool.size()), 0);
    pool.run(pool.size(), [&](int t) { ran[t] = t + 1; });
    for (int t = 0; t < pool.size(); ++t) EXPECT_EQ(ran[t], t + 1) << "pool " << i;
  }
}

std::vector<Value> random_seeds(const ir::Module& m, size_t n) {
  const auto& f = m.functions[entry_function(m, "main")];
  const Type& type = f.vars[f.params[0]].type;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<Value> out;
  for (size_t i = 0; i < n; ++i) {
    Tensor t = Tensor::allocate(type->shape);
    for (int64_t j = 0; j < t.size(); ++j) t.data[j] = normal(rng);
    out.push_back(Value::of_tensor(std::move(t)));
  }
  return out;
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
  auto inputs = random_seeds(*module, 64);
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
