// Fibers for tensor-dependent control flow: the scheduler itself (rounds, flushes, deep recursion on
// a fiber, errors), and both batched engines on programs that decide from tensor values: the same
// outputs as the reference engine with and without fibers, and with fibers the instances batch
// across their decisions.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>
#include <stdexcept>
#include <thread>

#include "compiler/pipeline.h"
#include "lang/frontend.h"
#include "engines/aot_engine.h"
#include "engines/batched_engine.h"
#include "runtime/fibers.h"
#include "engines/inputs.h"
#include "engines/reference_engine.h"

namespace acrobat {
namespace {

TEST(InstanceFibers, FlushesOnceEveryFiberWaits) {
  InstanceFibers fibers;
  std::vector<int> progress(5, 0);
  int flushes_seen = 0;
  std::vector<std::string> log;
  fibers.run(
      5,
      [&](size_t i) {
        // Instance i waits i times; each wait must see one more flush.
        for (size_t w = 0; w < i; ++w) {
          int before = flushes_seen;
          fibers.wait();
          EXPECT_EQ(flushes_seen, before + 1) << "instance " << i;
          ++progress[i];
        }
      },
      [&] {
        EXPECT_FALSE(fibers.inside());
        ++flushes_seen;
      });
  EXPECT_EQ(flushes_seen, 4);
  EXPECT_EQ(fibers.flushes(), 4);
  EXPECT_EQ(progress, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_FALSE(fibers.inside());
}

TEST(InstanceFibers, RecursesDeepOnAFiberStack) {
  InstanceFibers fibers;
  std::function<int(int)> down = [&](int n) -> int {
    volatile char pad[512];
    pad[0] = static_cast<char>(n);
    return n == 0 ? pad[0] : 1 + down(n - 1);
  };
  std::vector<int> out(3);
  fibers.run(3, [&](size_t i) { out[i] = down(20000 + static_cast<int>(i)); }, [] {});
  EXPECT_EQ(out, (std::vector<int>{20000, 20001, 20002}));
}

// call(): on the calling thread, deeper than a thread's default stack (20000 frames of over 512
// bytes: 10 MiB and more), the function's exception rethrown, and the fibers usable again after it.
TEST(InstanceFibers, CallRunsOnTheCallingThreadOnAStackOfItsOwn) {
  InstanceFibers fibers(size_t{64} << 20);
  std::function<int(int)> down = [&](int n) -> int {
    volatile char pad[512];
    pad[0] = static_cast<char>(n);
    return n == 0 ? pad[0] : 1 + down(n - 1);
  };
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  int depth = 0;
  fibers.call([&] {
    ran_on = std::this_thread::get_id();
    EXPECT_FALSE(fibers.inside());
    depth = down(20000);
  });
  EXPECT_EQ(ran_on, caller);
  EXPECT_EQ(depth, 20000);
  try {
    fibers.call([] { throw std::runtime_error("the message"); });
    ADD_FAILURE() << "call() returned instead of rethrowing";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "the message");
  }
  std::vector<int> out(2);
  fibers.run(2, [&](size_t i) { out[i] = down(100 + static_cast<int>(i)); }, [] {});
  EXPECT_EQ(out, (std::vector<int>{100, 101}));
}

// An open run: instances join between rounds (ids the caller chooses), each is reported ended as
// soon as its fiber ends, errors per instance; a cancelled instance ends where it waits, the
// fibers it forked first, without an error and without disturbing the others.
TEST(InstanceFibers, AnOpenRunTakesInstancesBetweenRoundsAndEndsTheCancelledOnes) {
  InstanceFibers fibers;
  std::vector<std::string> log;
  std::vector<int> waits_done(8, 0);
  int round = 0;
  std::set<size_t> cancel;
  InstanceFibers::Open open;
  open.admit = [&](bool idle) -> std::vector<size_t> {
    ++round;
    if (round == 1) return {10, 11};
    if (round == 3) return {12, 13};
    EXPECT_FALSE(idle && round < 3);
    return {};
  };
  open.body = [&](size_t id) {
    const size_t k = id - 10;
    if (k == 3) throw std::runtime_error("thirteen fails");
    auto waits = [&](size_t n) {
      for (size_t w = 0; w < n; ++w) {
        fibers.wait();
        ++waits_done[k];
      }
    };
    if (k == 1) {
      fibers.fork(3, [&](size_t c) { waits(2 + c); });  // children of 11 wait 2, 3, 4 times
      log.push_back("11 joined its children");
    } else {
      waits(k == 0 ? 2 : 6);
    }
  };
  open.ended = [&](size_t id, std::exception_ptr e) {
    std::string what;
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        what = std::string(": ") + x.what();
      }
    }
    log.push_back(std::to_string(id) + " ended in round " + std::to_string(round) + what);
  };
  open.flush = [&] {
    if (round == 3) cancel.insert(11);  // while its children wait
  };
  open.cancelled = [&](size_t id) { return cancel.count(id) > 0; };
  fibers.run_open(open);
  EXPECT_EQ(log, (std::vector<std::string>{"10 ended in round 3", "13 ended in round 3: thirteen fails",
                                            "11 ended in round 4", "12 ended in round 9"}));
  EXPECT_EQ(waits_done[0], 2);
  EXPECT_EQ(waits_done[2], 6);
  EXPECT_EQ(fibers.live(), 0u);
}

TEST(InstanceFibers, RethrowsTheLowestInstancesError) {
  InstanceFibers fibers;
  int finished = 0;
  try {
    fibers.run(
        6,
        [&](size_t i) {
          fibers.wait();
          if (i == 4 || i == 2) throw std::runtime_error("instance " + std::to_string(i));
          fibers.wait();
          ++finished;
        },
        [] {});
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "instance 2");
  }
  EXPECT_EQ(finished, 4);
  // The scheduler is usable again afterwards.
  int ran = 0;
  fibers.run(2, [&](size_t) { ++ran; }, [] {});
  EXPECT_EQ(ran, 2);
}

std::shared_ptr<const ir::Module> compile_text(const std::string& text) {
  return compile_checked(parse_model_text("fibers.acr", text, {}), CompileOptions{});
}

std::vector<Value> int_inputs(const ir::Module& m, int n) {
  const auto& f = m.functions[entry_function(m, "main")];
  std::vector<Value> out;
  for (int i = 0; i < n; ++i)
    out.push_back(value_from_json(i, f.vars[f.params[0]].type, SourceLoc{"test"}));
  return out;
}

void expect_equal_outputs(const RunResult& got, const RunResult& want, const std::string& label) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size()) << label;
  for (size_t i = 0; i < want.outputs.size(); ++i) {
    const auto& g = got.outputs[i].agg->fields;
    const auto& w = want.outputs[i].agg->fields;
    EXPECT_EQ(g[1].i, w[1].i) << label << ", instance " << i << ": decisions differ";
    const Tensor& a = *g[0].tensor;
    const Tensor& b = *w[0].tensor;
    for (int64_t j = 0; j < b.size(); ++j)
      ASSERT_LE(std::fabs(a.data[j] - b.data[j]), 1e-5f * std::fabs(b.data[j]) + 1e-6f)
          << label << ", instance " << i;
  }
}

// Each instance keeps transforming its state until the state's argmax says stop (at most 12
// steps): how many steps it takes depends on tensor values.
const char* kGrow = R"(dim H = 16
param W: f32[H, H]
param U[4]: f32[H, H]
param S[64]: f32[1, H]
def grow(x: f32[1, H], steps: int) -> (f32[1, H], int) {
  let y = tanh(x @ W + x @ U[steps % 4]);
  if steps == 12 || argmax(y) < 3 { (y, steps) } else { grow(y, steps + 1) }
}
def main(n: int) -> (f32[1, H], int) { grow(S[n] * 2.0, 0) }
)";

TEST(Fibers, InstancesBatchAcrossTheirDecisions) {
  auto m = compile_text(kGrow);
  ASSERT_TRUE(m->plan->tensor_reads);
  auto params = std::make_shared<ParamStore>(init_params(*m, 2));
  auto inputs = int_inputs(*m, 64);
  RunResult want = ReferenceEngine(m, params).run(inputs);
  int64_t steps = 0, longest = 0;
  for (const auto& v : want.outputs) {
    steps += v.agg->fields[1].i + 1;
    longest = std::max(longest, v.agg->fields[1].i + 1);
  }
  ASSERT_GT(longest, 2) << "the test needs instances that take several steps";
  ASSERT_LT(steps, 64 * 13) << "the test needs instances that stop at different steps";

  RunResult with = BatchedEngine(m, params).run(inputs);
  RunResult without = BatchedEngine(m, params, Scheduler::InlineDepth, 1, false).run(inputs);
  expect_equal_outputs(with, want, "batched with fibers");
  expect_equal_outputs(without, want, "batched without fibers");
  // With fibers the starts form one batch and the k-th steps of all instances still running
  // another: 1 + the longest instance's steps. Without, every read runs what it waits for there
  // and then: each step that is read is a batch of its own (only the last steps of instances
  // stopped by the step limit, never read, wait for the end and run together).
  EXPECT_EQ(with.stats.nodes, steps + 64);
  EXPECT_EQ(with.stats.batches, longest + 1);
  EXPECT_GE(without.stats.batches, steps);
  EXPECT_NEAR(with.stats.mean_batch_size(), double(steps + 64) / double(longest + 1), 1e-9);

  AotOptions ao;
  ao.cache_dir = ACROBAT_TEST_CACHE_DIR;
  RunResult aot = AotEngine(m, params, ao).run(inputs);
  expect_equal_outputs(aot, want, "aot with fibers");
  EXPECT_EQ(aot.stats.batches, longest + 1);
  ao.fibers = false;
  RunResult aot_without = AotEngine(m, params, ao).run(inputs);
  expect_equal_outputs(aot_without, want, "aot without fibers");
  EXPECT_EQ(aot_without.stats.batches, without.stats.batches);
}

// Runs `text` on 64 instances with both batched engines (fibers on) and checks the int outputs
// against the reference engine; returns the batched engine's and the AOT engine's stats.
std::pair<RunStats, RunStats> run_int_program(const std::string& text) {
  auto m = compile_text(text);
  EXPECT_TRUE(m->plan->tensor_reads);
  auto params = std::make_shared<ParamStore>(init_params(*m, 3));
  auto inputs = int_inputs(*m, 64);
  RunResult want = ReferenceEngine(m, params).run(inputs);
  RunResult batched = BatchedEngine(m, params).run(inputs);
  AotOptions ao;
  ao.cache_dir = ACROBAT_TEST_CACHE_DIR;
  RunResult aot = AotEngine(m, params, ao).run(inputs);
  for (size_t i = 0; i < want.outputs.size(); ++i) {
    EXPECT_EQ(batched.outputs[i].i, want.outputs[i].i) << "batched, instance " << i;
    EXPECT_EQ(aot.outputs[i].i, want.outputs[i].i) << "aot, instance " << i;
  }
  return {batched.stats, aot.stats};
}

TEST(Fibers, ABatchTakesAlongReadyNodesOfItsBlock) {
  // Six encodings per instance, computed up front (they read nothing pending), then read one per
  // round: the first read's batch takes all 384 along, so nothing else ever runs.
  auto [batched, aot] = run_int_program(R"(dim H = 16
param E[64]: f32[1, H]
param W: f32[H, H]
def encs(n: int, k: int) -> List[f32[1, H]] {
  if k == 0 { Nil } else { Cons(tanh(E[(n + k) % 64] @ W), encs(n, k - 1)) }
}
def walk(xs: List[f32[1, H]], count: int) -> int {
  match xs {
    Nil => count,
    Cons(x, rest) => {
      let c = if argmax(x) < 8 { 1 } else { 0 };
      walk(rest, count + c)
    },
  }
}
def main(n: int) -> int { walk(encs(n, 6), 0) }
)");
  for (const RunStats& s : {batched, aot}) {
    EXPECT_EQ(s.nodes, 64 * 6);
    EXPECT_EQ(s.batches, 1);
  }
}

TEST(Fibers, ABatchTakesAlongDeeperReadyNodesOfItsBlock) {
  // Each round every instance reads its state's argmax; some then put the state itself in a list,
  // the others a transform of it (one block more: lists carry no ghost levels), and every instance
  // steps from the list's head. A stepped state whose input an earlier flush computed lies a
  // level shallower than one whose transform is pending, yet each round's steps run as one batch.
  // The read of step k runs the transforms of step k - 1 and then all k-th steps: after the
  // starts, two batches for each of the six steps (three if the steps split by depth).
  auto [batched, aot] = run_int_program(R"(dim H = 16
param S[64]: f32[1, H]
param W: f32[H, H]
param G: f32[H, H]
def head(xs: List[f32[1, H]]) -> f32[1, H] {
  match xs { Cons(x, _) => x, Nil => zeros(1, H) }
}
def run(s: f32[1, H], k: int) -> int {
  let a = argmax(s);
  if k == 6 { a } else {
    let xs = if a % 2 == 0 { Cons(s, Nil) } else { Cons(tanh(s @ G), Nil) };
    run(tanh(head(xs) @ W), k + 1)
  }
}
def main(n: int) -> int { run(tanh(S[n] @ W), 0) }
)");
  for (const RunStats& s : {batched, aot}) {
    EXPECT_GT(s.nodes, 64 + 64 * 6) << "the test needs instances that transform";
    EXPECT_LT(s.nodes, 64 + 2 * 64 * 6) << "the test needs instances that do not transform";
    EXPECT_EQ(s.batches, 1 + 2 * 6);
  }
}

TEST(Fibers, AnErrorNamesTheLowestFailingInstance) {
  // Instances 5 and 9 index out of range after their first decision.
  auto m = compile_text(R"(dim H = 8
param W: f32[H, H]
param E[3]: f32[1, H]
def main(n: int) -> f32[1, H] {
  let y = tanh(ones(1, H) @ W);
  let k = if argmax(y) >= 0 && (n == 5 || n == 9) { 7 } else { n % 3 };
  y + E[k]
}
)");
  auto params = std::make_shared<ParamStore>(init_params(*m, 1));
  auto inputs = int_inputs(*m, 12);
  for (bool fibers : {true, false}) {
    AotOptions ao;
    ao.cache_dir = ACROBAT_TEST_CACHE_DIR;
    ao.fibers = fibers;
    BatchedEngine batched(m, params, Scheduler::InlineDepth, 1, fibers);
    AotEngine aot(m, params, ao);
    for (Engine* engine : {static_cast<Engine*>(&batched), static_cast<Engine*>(&aot)}) {
      try {
        engine->run(inputs);
        FAIL() << "no error";
      } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("instance 5: index 7 is out of range for param 'E'"),
                  std::string::npos)
            << engine->name() << (fibers ? " with" : " without") << " fibers: " << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace acrobat
