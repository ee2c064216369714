// Concurrent independent calls inside an instance: fork and join on the instance fibers (children
// waiting independently, errors, nesting, a flush failing under them), and both batched engines on
// programs whose independent calls read tensors: outputs equal the reference engine's (which runs
// the calls one after the other), the errors are the ones a sequential run meets, and the tree
// decoder's nodes batch across subtrees.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

#include "compiler/pipeline.h"
#include "lang/frontend.h"
#include "engines/aot_engine.h"
#include "engines/batched_engine.h"
#include "runtime/fibers.h"
#include "engines/inputs.h"
#include "engines/reference_engine.h"
#include "expect_values.h"
#include "loaded_model.h"

namespace acrobat {
namespace {

TEST(ForkJoin, ChildrenWaitIndependentlyAndTheParentResumesAfterAll) {
  InstanceFibers fibers;
  std::vector<std::string> log;
  int flushes_seen = 0;
  fibers.run(
      2,
      [&](size_t i) {
        // Instance i forks 3 members (member 0 on its own fiber, 1 and 2 on children); member k
        // waits k + i times. Waiting members do not hold up the others: the instance needs the
        // most waits of one member in flushes, not their sum.
        fibers.fork(3, [&, i](size_t k) {
          for (size_t w = 0; w < k + i; ++w) fibers.wait();
          log.push_back(std::to_string(i) + "." + std::to_string(k) + "@" + std::to_string(flushes_seen));
        });
        log.push_back(std::to_string(i) + " joined@" + std::to_string(flushes_seen));
      },
      [&] { ++flushes_seen; });
  EXPECT_EQ(fibers.flushes(), 3);
  EXPECT_EQ(fibers.forks(), 4);
  EXPECT_EQ(fibers.live(), 0u);
  EXPECT_EQ(log, (std::vector<std::string>{"0.0@0", "0.1@1", "1.0@1", "0.2@2", "0 joined@2",
                                           "1.1@2", "1.2@3", "1 joined@3"}));
}

TEST(ForkJoin, TheLowestMembersErrorReachesTheForkAfterAllMembersEnd) {
  InstanceFibers fibers;
  int finished = 0;
  std::string caught;
  fibers.run(
      1,
      [&](size_t) {
        try {
          fibers.fork(4, [&](size_t k) {
            fibers.wait();
            if (k == 3) throw std::runtime_error("child 3");
            fibers.wait();
            if (k == 1) throw std::runtime_error("child 1");
            ++finished;
          });
        } catch (const std::runtime_error& e) {
          caught = e.what();
        }
      },
      [] {});
  EXPECT_EQ(caught, "child 1");
  EXPECT_EQ(finished, 2);
}

TEST(ForkJoin, NestsAndSurvivesAFailingFlush) {
  InstanceFibers fibers;
  // A binary tree of forks 5 levels deep: 31 forks of one child each (the first member of every
  // fork runs on the forking fiber), each of the 32 leaves waiting once.
  std::function<int(int)> tree = [&](int depth) -> int {
    if (depth == 0) {
      fibers.wait();
      return 1;
    }
    int sums[2];
    fibers.fork(2, [&](size_t k) { sums[k] = tree(depth - 1); });
    return sums[0] + sums[1];
  };
  int leaves = 0;
  fibers.run(1, [&](size_t) { leaves = tree(5); }, [] {});
  EXPECT_EQ(leaves, 32);
  EXPECT_EQ(fibers.forks(), 31);
  EXPECT_EQ(fibers.flushes(), 1);
  // A flush that throws while children wait unwinds them all; the fibers work afterwards.
  EXPECT_THROW(fibers.run(2, [&](size_t) { tree(3); }, [] { throw std::runtime_error("flush"); }),
               std::runtime_error);
  EXPECT_EQ(fibers.live(), 0u);
  fibers.run(1, [&](size_t) { leaves = tree(2); }, [] {});
  EXPECT_EQ(leaves, 4);
}

std::shared_ptr<const ir::Module> compile_file(const std::string& model, bool concurrent) {
  CompileOptions o;
  o.dims["H"] = 16;
  o.analysis.concurrent = concurrent;
  return compile_model(std::string(ACROBAT_SOURCE_DIR) + "/models/" + model, o);
}

std::unique_ptr<Engine> make_engine(const std::string& name, std::shared_ptr<const ir::Module> m,
                                    std::shared_ptr<const ParamStore> p, Scheduler s) {
  if (name == "batched") return std::make_unique<BatchedEngine>(m, p, s);
  AotOptions o;
  o.cache_dir = ACROBAT_TEST_CACHE_DIR;
  o.scheduler = s;
  return std::make_unique<AotEngine>(m, p, o);
}

TEST(ConcurrentCalls, TheTreeDecodersSubtreesBatchTogether) {
  auto with = compile_file("drnn.acr", true);
  auto without = compile_file("drnn.acr", false);
  ASSERT_GT(with->plan->concurrency.num_groups, 0);
  auto params = std::make_shared<ParamStore>(init_params(*with, 4));
  auto inputs = random_tensor_inputs(*with, 64, 11);
  RunResult want = ReferenceEngine(with, params).run(inputs);
  int64_t nodes = 0;
  for (const auto& v : want.outputs) nodes += v.agg->fields[1].i;
  ASSERT_GT(nodes, 64 * 4) << "the test needs trees of several nodes";
  for (const std::string engine : {"batched", "aot"})
    for (Scheduler s : {Scheduler::InlineDepth, Scheduler::Depth, Scheduler::Agenda}) {
      std::string label = engine + " " + scheduler_name(s);
      RunResult got = make_engine(engine, with, params, s)->run(inputs);
      RunResult seq = make_engine(engine, without, params, s)->run(inputs);
      for (size_t i = 0; i < inputs.size(); ++i) {
        expect_values_close(got.outputs[i], want.outputs[i], label + ", instance " + std::to_string(i), 1e-4f, 1e-5f);
        expect_values_close(seq.outputs[i], want.outputs[i], label + " sequential, instance " + std::to_string(i), 1e-4f, 1e-5f);
      }
      EXPECT_EQ(got.stats.nodes, seq.stats.nodes) << label;
      // Sequentially an instance decides one node at a time; concurrently all nodes at the same
      // distance from the root (through parents and earlier siblings) decide in one round.
      EXPECT_LT(got.stats.batches * 4, seq.stats.batches) << label;
    }
  // One instance alone batches its own subtrees.
  RunResult one = make_engine("aot", with, params, Scheduler::InlineDepth)->run({inputs[0]});
  expect_values_close(one.outputs[0], want.outputs[0], "one instance", 1e-4f, 1e-5f);
  EXPECT_GT(one.stats.mean_batch_size(), 1.5);
}

// Runs `text` on `n` int instances on the reference engine and both batched engines; each must
// fail with a message containing `expected`.
void expect_same_error(const std::string& text, size_t n, const std::string& expected) {
  auto m = compile_checked(parse_model_text("calls.acr", text, {}), CompileOptions{});
  ASSERT_GT(m->plan->concurrency.num_groups, 0);
  auto params = std::make_shared<ParamStore>(init_params(*m, 1));
  const auto& f = m->functions[entry_function(*m, "main")];
  std::vector<Value> inputs;
  for (size_t i = 0; i < n; ++i)
    inputs.push_back(value_from_json(static_cast<int64_t>(i), f.vars[f.params[0]].type, SourceLoc{"test"}));
  ReferenceEngine reference(m, params);
  auto batched = make_engine("batched", m, params, Scheduler::InlineDepth);
  auto aot = make_engine("aot", m, params, Scheduler::InlineDepth);
  for (Engine* e : {static_cast<Engine*>(&reference), batched.get(), aot.get()}) {
    try {
      e->run(inputs);
      ADD_FAILURE() << e->name() << ": no error";
    } catch (const UserError& err) {
      EXPECT_NE(std::string(err.what()).find(expected), std::string::npos) << e->name() << ": " << err.what();
    }
  }
}

TEST(ConcurrentCalls, TheEarliestMembersErrorWins) {
  // Both members may read tensors and both fail: the second at once (it does not reach its read),
  // the first after its read. The first one's error is the one a sequential run meets.
  expect_same_error(R"(dim H = 8
param W: f32[H, H]
param E[3]: f32[1, H]
def early(n: int) -> int {
  if n >= 0 { 10 / (n - n) } else { let y = item(sum(ones(1, H) @ W)); if y > 0.0 { 1 } else { 2 } }
}
def late(n: int) -> float { let x = item(sum(tanh(ones(1, H) @ W))); item(sum(E[n + 5])) + x }
def main(n: int) -> int {
  let a = late(n);
  let b = early(n);
  if a > 0.0 { b } else { b + 1 }
}
)", 3, "instance 0: index 5 is out of range for param 'E'");
}

TEST(ConcurrentCalls, EachMemberCountsItsOwnCallDepth) {
  // Every level forks two reads and recurses in one of them: the recursion is 6000 calls deep on
  // one chain of members (beyond the fiber limit the forks run one after the other), which is too
  // deep however the members interleave.
  expect_same_error(R"(dim H = 4
param W: f32[H, H]
def down(x: f32[1, H], k: int) -> int {
  let a = item(sum(x)) > 0.0;
  let b = if k == 0 { 0 } else { down(tanh(x @ W), k - 1) };
  if a { b } else { b + 1 }
}
def main(n: int) -> int { down(ones(1, H), 6000 + n) }
)", 2, "instance 0: recursion deeper than 5000 calls (in 'down')");
}

}  // namespace
}  // namespace acrobat
