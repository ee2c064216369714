// The ahead-of-time engine: every model gives the interpreter path's outputs (the batched engine, same
// batches) and the reference engine's, with one and two threads; small programs cover the rest of the
// host language (data types out, closures, tensor reads in control flow, generic functions), the
// schedule (same nodes and batches as the batched engine, ghosts and phases included), user errors
// (same messages), the compile cache, and objects that do not belong to the module.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "codegen/build.h"
#include "codegen/emit_cpp.h"
#include "compiler/pipeline.h"
#include "lang/frontend.h"
#include "engines/aot_engine.h"
#include "engines/batched_engine.h"
#include "engines/inputs.h"
#include "engines/reference_engine.h"
#include "expect_values.h"
#include "loaded_model.h"

namespace acrobat {
namespace {

const std::string kSource = ACROBAT_SOURCE_DIR;
const std::string kCache = ACROBAT_TEST_CACHE_DIR;

AotOptions aot_options(int threads = 1) {
  AotOptions o;
  o.cache_dir = kCache;
  o.threads = threads;
  return o;
}

std::shared_ptr<const ir::Module> compile_text(const std::string& text, CompileOptions o = {}) {
  return compile_checked(parse_model_text("test.acr", text, o.dims), o);
}

// Tensors equal to a relative 1e-6 (the same kernels on the same rows; a GEMM split across threads
// may sum in another order) or `rel`, anything else exactly.
void expect_same(const Value& a, const Value& e, const std::string& where, float rel = 1e-6f) {
  expect_values_close(a, e, where, rel);
}

struct ModelCase {
  const char* model;
  const char* input_kind;
  int64_t hidden;
};

void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.model << " H=" << c.hidden; }

class AotEqualsInterpreter : public ::testing::TestWithParam<ModelCase> {};

// The model's `main` inputs from the SST test set (limit 0: all of it).
std::vector<Value> sst_inputs(const ir::Module& module, const ModelCase& c, size_t limit) {
  const auto& f = module.functions[entry_function(module, "main")];
  return load_inputs(parse_input_spec(std::string(c.input_kind) + ":" + kSource + "/data/sst/test.txt"),
                     f.vars[f.params[0]].type, kSource + "/data/sst/vocab.txt", limit);
}

TEST_P(AotEqualsInterpreter, OnTheSstTestSet) {
  const ModelCase& c = GetParam();
  CompileOptions options;
  options.dims["H"] = c.hidden;
  auto module = compile_model(kSource + "/models/" + c.model + ".acr", options);
  auto params = std::make_shared<ParamStore>(init_params(*module, 11));
  auto inputs = sst_inputs(*module, c, kSstTrees);
  BatchedEngine interpreter(module, params);
  ReferenceEngine reference(module, params);
  std::vector<Value> first64(inputs.begin(), inputs.begin() + 64);
  RunResult unbatched = reference.run(first64);
  for (int threads : {1, 2}) {
    AotEngine aot(module, params, aot_options(threads));
    for (size_t batch : {size_t{1}, size_t{8}, size_t{64}, inputs.size()}) {
      size_t count = batch == 1 ? 16 : inputs.size();
      std::vector<Value> part(inputs.begin(), inputs.begin() + count);
      RunResult want = interpreter.run_batches(part, batch);
      RunResult got = aot.run_batches(part, batch);
      ASSERT_EQ(got.outputs.size(), want.outputs.size());
      for (size_t i = 0; i < want.outputs.size(); ++i)
        expect_same(got.outputs[i], want.outputs[i],
                    fmt::format("{} threads, batch {}, instance {}", threads, batch, i));
      // The same dataflow graph and the same schedule.
      EXPECT_EQ(got.stats.nodes, want.stats.nodes);
      EXPECT_EQ(got.stats.batches, want.stats.batches);
      EXPECT_EQ(got.stats.flops, want.stats.flops);
    }
    RunResult got = aot.run_batches(first64, 64);
    for (size_t i = 0; i < first64.size(); ++i)
      expect_same(got.outputs[i], unbatched.outputs[i],
                  fmt::format("instance {} against the reference engine", i), 1e-5f);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, AotEqualsInterpreter,
                         ::testing::Values(ModelCase{"treelstm", "sst", 256},
                                           ModelCase{"treelstm", "sst", 40},
                                           ModelCase{"mvrnn", "sst", 64},
                                           ModelCase{"birnn", "sst-tokens", 256},
                                           ModelCase{"birnn", "sst-tokens", 24},
                                           // Decisions by argmax: fibers, demand-driven flushes.
                                           ModelCase{"stackrnn", "sst-tokens", 32}),
                         [](const ::testing::TestParamInfo<ModelCase>& info) {
                           return std::string(info.param.model) + "_H" +
                                  std::to_string(info.param.hidden);
                         });

// With each analysis switched off (the ablation configurations) both paths still compute the
// reference engine's outputs.
TEST(AotEngine, EqualsTheInterpreterWithEachAnalysisOff) {
  const std::vector<std::vector<std::string>> ablations = {
      {}, {"reuse"}, {"ghosts"}, {"phases"}, {"clone"}, {"specialise", "reuse", "ghosts", "phases"}};
  for (const ModelCase& c : {ModelCase{"treelstm", "sst", 32}, ModelCase{"mvrnn", "sst", 16},
                             ModelCase{"birnn", "sst-tokens", 32}}) {
    for (const auto& disabled : ablations) {
      CompileOptions options;
      options.dims["H"] = c.hidden;
      for (const auto& d : disabled) {
        if (d == "reuse") options.analysis.reuse = false;
        if (d == "ghosts") options.analysis.ghosts = false;
        if (d == "phases") options.analysis.phases = false;
        if (d == "clone") options.analysis.clone = false;
        if (d == "specialise") options.analysis.specialise = false;
      }
      auto module = compile_model(kSource + "/models/" + c.model + ".acr", options);
      auto params = std::make_shared<ParamStore>(init_params(*module, 3));
      auto inputs = sst_inputs(*module, c, 150);
      BatchedEngine interpreter(module, params);
      AotEngine aot(module, params, aot_options(2));
      RunResult want = ReferenceEngine(module, params).run(inputs);
      RunResult a = interpreter.run_batches(inputs, 64);
      RunResult b = aot.run_batches(inputs, 64);
      std::string label = std::string(c.model) + " without";
      for (const auto& d : disabled) label += " " + d;
      for (size_t i = 0; i < inputs.size(); ++i) {
        const Tensor& e = *want.outputs[i].tensor;
        for (const RunResult* r : {&a, &b})
          for (int64_t j = 0; j < e.size(); ++j)
            ASSERT_LE(std::fabs(r->outputs[i].tensor->data[j] - e.data[j]),
                      1e-5f * std::fabs(e.data[j]) + 1e-6f)
                << label << ", instance " << i << (r == &a ? " (interpreter)" : " (aot)");
      }
      EXPECT_EQ(a.stats.batches, b.stats.batches) << label;
    }
  }
}

std::vector<Value> json_inputs(const ir::Module& m, const std::vector<nlohmann::json>& rows) {
  const auto& f = m.functions[entry_function(m, "main")];
  std::vector<Value> out;
  for (const auto& r : rows) out.push_back(value_from_json(r, f.vars[f.params[0]].type, SourceLoc{"test"}));
  return out;
}

// Runs `text` on the batched engine and the AOT engine; expects the same outputs and schedule.
void expect_same_runs(const std::string& text, const std::vector<nlohmann::json>& rows,
                      CompileOptions options = {}) {
  auto m = compile_text(text, options);
  auto params = std::make_shared<ParamStore>(init_params(*m, 5));
  auto inputs = json_inputs(*m, rows);
  RunResult want = BatchedEngine(m, params).run(inputs);
  RunResult got = AotEngine(m, params, aot_options()).run(inputs);
  ASSERT_EQ(got.outputs.size(), want.outputs.size());
  for (size_t i = 0; i < want.outputs.size(); ++i)
    expect_same(got.outputs[i], want.outputs[i], "instance " + std::to_string(i));
  EXPECT_EQ(got.stats.nodes, want.stats.nodes);
  EXPECT_EQ(got.stats.batches, want.stats.batches);
  for (const auto& [name, counts] : want.stats.blocks) {
    ASSERT_TRUE(got.stats.blocks.count(name)) << name;
    EXPECT_EQ(got.stats.blocks.at(name).batches, counts.batches) << name;
  }
}

TEST(AotEngine, ReturnsDataTypesTuplesAndHostValues) {
  expect_same_runs(R"(dim H = 4
param W: f32[H, H]
type Shape = Small(int) | Big(f32[1, H], float)
def describe(n: int) -> Shape {
  if n < 3 { Small(n * 10) } else { Big(tanh(ones(1, H) * 0.25 @ W), 1.5) }
}
def main(n: int) -> (List[Shape], bool, float) {
  (Cons(describe(n), Cons(describe(n + 2), Nil)), n % 2 == 0, 2.5 * 2.0)
}
)",
                   {0, 1, 2, 3, 4, 5});
}

TEST(AotEngine, CallsClosuresTheSpecialiserLeavesAlone) {
  // A function kept in a tuple is called through a closure in generated code too.
  expect_same_runs(R"(dim H = 8
param W: f32[H, H]
def pick(n: int) -> (fn(f32[1, H]) -> f32[1, H], int) {
  if n % 2 == 0 { (fn(x: f32[1, H]) { tanh(x @ W) }, n) } else { (fn(x: f32[1, H]) { sigmoid(x @ W) * 2.0 }, n + 1) }
}
def main(n: int) -> f32[1, H] {
  let (f, k) = pick(n);
  let xs = map(fn(i) { ones(1, H) * 0.1 }, Cons(k, Cons(n, Nil)));
  foldl(fn(acc, x) { f(acc + x) }, zeros(1, H), xs)
}
)",
                   {1, 2, 3, 4, 5});
}

TEST(AotEngine, ReadsTensorsInControlFlow) {
  // The decision depends on a tensor's value: the host program waits for it.
  expect_same_runs(R"(dim H = 6
param W: f32[H, H]
def grow(x: f32[1, H], steps: int) -> (f32[1, H], int) {
  let y = tanh(x @ W);
  if steps == 0 || argmax(y) == 0 { (y, steps) } else { grow(y, steps - 1) }
}
def main(n: int) -> (f32[1, H], int) { grow(ones(1, H) * 0.1, n) }
)",
                   {1, 2, 3, 4, 5, 6, 7, 8});
}

// argmax over values with NaNs (log of negative numbers) picks the same index on every engine.
TEST(AotEngine, ArgmaxFollowsOneRuleWithNaNs) {
  expect_same_runs(R"(dim H = 40
param E[8]: f32[1, H]
param W: f32[H, H]
def main(n: int) -> (int, int) {
  let y = log(E[n] @ W);
  (argmax(y), argmax(E[n]))
}
)",
                   {0, 1, 2, 3, 4, 5, 6, 7});
}

TEST(AotEngine, KeepsGhostsAndPhases) {
  expect_same_runs(R"(dim H = 8
param W: f32[H, H]
param V: f32[H, H]
def g(x: f32[1, H]) -> f32[1, H] { tanh(x @ W) }
def chain(x: f32[1, H], n: int) -> f32[1, H] { if n == 0 { x } else { chain(g(x), n - 1) } }
def main(n: int) -> f32[1, H] {
  let x = ones(1, H) * 0.5;
  let y = if n % 2 == 0 { g(g(x)) } else { g(x) };
  let z = chain(y, n);
  sigmoid(z @ V + y)
}
)",
                   {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST(AotEngine, RunsGenericAndMutuallyRecursiveFunctions) {
  expect_same_runs(R"(dim H = 4
param A: f32[H, H]
param B: f32[H, H]
def even(x: f32[1, H], n: int) -> f32[1, H] { if n == 0 { x } else { odd(tanh(x @ A), n - 1) } }
def odd(x: f32[1, H], n: int) -> f32[1, H] { if n == 0 { x } else { even(sigmoid(x @ B), n - 1) } }
def twice[a](f: fn(a) -> a, x: a) -> a { f(f(x)) }
def main(n: int) -> f32[1, H] {
  let xs = zip_with(fn(a, b) { a + b }, Cons(1, Cons(2, Nil)), reverse(Cons(n, Cons(3, Nil))));
  twice(fn(x) { even(x, length(xs) + n) }, ones(1, H) * 0.3)
}
)",
                   {0, 1, 2, 5});
}

// The same user error, with the same message and position, on both engines.
std::string error_of(Engine& engine, const std::vector<Value>& inputs) {
  try {
    engine.run(inputs);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

// With two threads, consecutive batches overlap (graph_engine.h): batch k + 1's host programs run
// while batch k's kernels do. The outputs and schedule are one thread's, the error named is the
// earliest failing instance's, whichever batch fails first in time, and the engine runs on after it.
// Batches side by side on solo lanes (and the pooled lane for what is left) give one run() per
// batch's outputs and counts and the earliest failing instance's error, for a program that reads
// tensors (fibers on every lane) as for one that does not, with 2 and 3 threads.
TEST(AotEngine, ParallelBatchesKeepResultsAndErrorOrder) {
  const char* sources[] = {
      "dim H = 48\nparam E[5]: f32[1, H]\nparam W: f32[H, H]\n"
      "def main(n: int) -> f32[1, H] { tanh(matmul(tanh(matmul(E[n], W)), W)) }\n",
      "dim H = 48\nparam E[5]: f32[1, H]\nparam W: f32[H, H]\n"
      "def main(n: int) -> f32[1, H] {\n"
      "  let h = tanh(matmul(E[n], W));\n"
      "  if item(sum(h)) > 0.0 { tanh(matmul(h, W)) } else { h }\n"
      "}\n"};
  for (const char* source : sources) {
    auto m = compile_text(source);
    SCOPED_TRACE(m->plan->tensor_reads ? "reads tensors" : "reads no tensors");
    auto params = std::make_shared<ParamStore>(init_params(*m, 3));
    std::vector<nlohmann::json> rows;
    for (int i = 0; i < 200; ++i) rows.push_back(i * 7 % 5);
    auto good = json_inputs(*m, rows);
    for (size_t batch : {16, 7}) {
      BatchedEngine one(m, params, Scheduler::InlineDepth, 1);
      RunResult want = one.run_batches(good, batch);
      for (int threads : {2, 3}) {
        BatchedEngine interpreter(m, params, Scheduler::InlineDepth, threads);
        AotEngine aot(m, params, aot_options(threads));
        for (Engine* engine : {static_cast<Engine*>(&interpreter), static_cast<Engine*>(&aot)}) {
          SCOPED_TRACE(std::string(engine->name()) + ", batch " + std::to_string(batch) + ", " +
                       std::to_string(threads) + " threads");
          for (auto bad : {std::vector<int>{37}, std::vector<int>{20, 37}, std::vector<int>{37, 199},
                           std::vector<int>{0, 199}, std::vector<int>{199}}) {
            auto inputs = good;
            for (int i : bad) inputs[i] = json_inputs(*m, {100})[0];
            try {
              engine->run_batches(inputs, batch);
              ADD_FAILURE() << "expected a UserError";
            } catch (const UserError& e) {
              EXPECT_NE(std::string(e.what()).find("instance " + std::to_string(bad[0]) +
                                                   ": index 100 "),
                        std::string::npos)
                  << e.what();
            }
            RunResult got = engine->run_batches(good, batch);
            ASSERT_EQ(got.outputs.size(), good.size());
            for (size_t i = 0; i < good.size(); ++i)
              expect_same(got.outputs[i], want.outputs[i], "instance " + std::to_string(i));
            EXPECT_EQ(got.stats.nodes, want.stats.nodes);
            EXPECT_EQ(got.stats.batches, want.stats.batches);
            EXPECT_EQ(got.stats.instances, 200);
          }
        }
      }
    }
  }
}

// A list of 300 000 elements goes in and out of every engine and is freed without a recursion as
// deep as the list (each would overflow the stack).
TEST(AotEngine, LongListsPassInAndOutOfEveryEngine) {
  auto m = compile_text("def main(xs: List[int]) -> List[int] { xs }\n");
  auto params = std::make_shared<ParamStore>(init_params(*m, 1));
  nlohmann::json row = nlohmann::json::array();
  for (int i = 0; i < 300000; ++i) row.push_back(i % 7);
  auto inputs = json_inputs(*m, {row});
  const auto& f = m->functions[entry_function(*m, "main")];
  ReferenceEngine reference(m, params);
  BatchedEngine interpreter(m, params);
  AotEngine aot(m, params, aot_options());
  for (Engine* e : std::initializer_list<Engine*>{&reference, &interpreter, &aot}) {
    RunResult r = e->run(inputs);
    ASSERT_EQ(r.outputs.size(), 1u);
    EXPECT_EQ(value_to_json(r.outputs[0], f.ret), row) << e->name();
  }
}

// A loop written as tail recursion runs in constant stack and beyond the recursion limit on every
// engine: a million iterations of host arithmetic, and 20 000 steps of a recurrence over a tensor
// that reads it (fibers) on the way.
TEST(AotEngine, TailCallsRunInConstantStack) {
  const char* text = R"(dim H = 4
param W: f32[H, H]
def loop(i: int, acc: int) -> int { if i == 0 { acc } else { loop(i - 1, acc + i % 7) } }
def walk(x: f32[1, H], i: int, hits: int) -> (f32[1, H], int) {
  if i == 0 { (x, hits) } else { walk(tanh(x @ W) + x * 0.5, i - 1, hits + argmax(x)) }
}
def main(n: int) -> (int, f32[1, H], int) {
  let (x, hits) = walk(ones(1, H) * 0.1, n / 50, 0);
  (loop(n, 0), x, hits)
}
)";
  auto m = compile_text(text);
  auto params = std::make_shared<ParamStore>(init_params(*m, 3));
  auto inputs = json_inputs(*m, {1000000, 3, 250000});
  RunResult want = ReferenceEngine(m, params).run(inputs);
  int64_t sum = 0;
  for (int64_t i = 1; i <= 1000000; ++i) sum += i % 7;
  EXPECT_EQ(want.outputs[0].agg->fields[0].i, sum);
  for (auto* engine : {static_cast<Engine*>(new BatchedEngine(m, params)),
                       static_cast<Engine*>(new AotEngine(m, params, aot_options()))}) {
    std::unique_ptr<Engine> e(engine);
    RunResult got = e->run(inputs);
    for (size_t i = 0; i < inputs.size(); ++i)
      expect_same(got.outputs[i], want.outputs[i], std::string(e->name()) + " instance " + std::to_string(i));
  }
}

// Host integer arithmetic that leaves int64 is an error naming the instance and the place, on every
// engine, never a wrapped number.
TEST(AotEngine, IntegerOverflowIsAnErrorOnEveryEngine) {
  const std::pair<const char*, const char*> programs[] = {
      {"def main(n: int) -> int {\n  if n == 1 { n + 9223372036854775807 } else { n }\n}\n", "test.acr:2:15"},
      {"def main(n: int) -> int {\n  if n == 1 { (0 - n) - 9223372036854775807 - 1 } else { n }\n}\n",
       "test.acr:2:16"},
      {"def main(n: int) -> int {\n  if n == 1 { n * 4611686018427387904 * 2 } else { n }\n}\n", "test.acr:2:15"},
      {"def main(n: int) -> int {\n  let m = 0 - 9223372036854775807 - n;\n  if n == 1 { -m } else { m }\n}\n",
       "test.acr:3:15"},
  };
  for (const auto& [text, where] : programs) {
    auto m = compile_text(text);
    auto params = std::make_shared<ParamStore>(init_params(*m, 1));
    auto inputs = json_inputs(*m, {0, 1, 2});
    ReferenceEngine reference(m, params);
    BatchedEngine interpreter(m, params);
    AotEngine aot(m, params, aot_options());
    std::string want = error_of(reference, inputs);
    EXPECT_NE(want.find("instance 1: integer overflow: the result does not fit in 64 bits"), std::string::npos)
        << text << want;
    EXPECT_NE(want.find(where), std::string::npos) << text << want;
    EXPECT_EQ(error_of(interpreter, inputs), want) << text;
    EXPECT_EQ(error_of(aot, inputs), want) << text;
  }
}

// float(i), int(f) (toward zero) and topk (argmax's order: NaNs first, then the largest, ties by
// position) give the same values on every engine; int of a NaN or of a float beyond 64 bits stops the
// instance at the conversion.
TEST(AotEngine, ConversionsAndTopKAgreeOnEveryEngine) {
  auto m = compile_text(
      "def main(x: (f32[1, 6], int)) -> (List[int], List[int], float, int, int) {\n"
      "  let (s, n) = x;\n"
      "  let f = float(n) / 4.0;\n"
      "  (topk(s, 6), topk(s * 0.0, 3), f, int(f), int(0.0 - f))\n}\n");
  auto params = std::make_shared<ParamStore>(init_params(*m, 1));
  using nlohmann::json;
  const auto inputs = json_inputs(*m, {json::parse(R"([[[1, 5, 3, "NaN", 5, -2]], 10])"),
                                       json::parse(R"([[[1, 2, 3, 4, 5, 6]], -7])"),
                                       json::parse(R"([[[0, 0, -1, 0, 2, 0]], 9007199254740993])")});
  RunResult want = ReferenceEngine(m, params).run(inputs);
  const auto& f = m->functions[entry_function(*m, "main")];
  auto to_json = [&](const Value& v) { return value_to_json(v, f.ret); };
  EXPECT_EQ(to_json(want.outputs[0]), json::parse(R"([[3, 1, 4, 2, 0, 5], [3, 0, 1], 2.5, 2, -2])"));
  EXPECT_EQ(to_json(want.outputs[1]), json::parse(R"([[5, 4, 3, 2, 1, 0], [0, 1, 2], -1.75, -1, 1])"));
  // 2^53 + 1 rounds to the nearest double.
  EXPECT_EQ(to_json(want.outputs[2]),
            json::parse(R"([[4, 0, 1, 3, 5, 2], [0, 1, 2], 2251799813685248.0, 2251799813685248, -2251799813685248])"));
  BatchedEngine interpreter(m, params);
  AotEngine aot(m, params, aot_options());
  for (Engine* e : {static_cast<Engine*>(&interpreter), static_cast<Engine*>(&aot)}) {
    RunResult got = e->run(inputs);
    for (size_t i = 0; i < inputs.size(); ++i)
      expect_same(got.outputs[i], want.outputs[i], std::string(e->name()) + " instance " + std::to_string(i));
  }
  auto bad = compile_text("def main(x: f32[1, 1]) -> int {\n  int(item(x) * 1.0e30)\n}\n");
  auto bad_params = std::make_shared<ParamStore>(init_params(*bad, 1));
  const auto bad_inputs = json_inputs(*bad, {nlohmann::json::parse("[[1]]"), nlohmann::json::parse(R"([["NaN"]])"),
                                             nlohmann::json::parse("[[0]]")});
  ReferenceEngine reference(bad, bad_params);
  BatchedEngine bad_interpreter(bad, bad_params);
  AotEngine bad_aot(bad, bad_params, aot_options());
  std::string error = error_of(reference, bad_inputs);
  EXPECT_NE(error.find("test.acr:2:3: error: instance 0: int(x) of a NaN or of a float beyond 64 bits"),
            std::string::npos) << error;
  EXPECT_EQ(error_of(bad_interpreter, bad_inputs), error);
  EXPECT_EQ(error_of(bad_aot, bad_inputs), error);
}

// A step budget (Engine::limit_steps) counts an instance's calls, a loop's iterations (tail calls)
// included: the instance that makes one more fails at that call with the same message on every
// engine, the budget's exact edge the same; the others run on (OnError::Skip), and no budget lets
// a long loop finish.
TEST(AotEngine, AStepBudgetStopsALoopThatNeverEndsOnEveryEngine) {
  auto m = compile_text(
      "dim H = 4\nparam W: f32[H, H]\n"
      "def spin(k: int) -> int { if k == 0 { 0 } else { spin(k + 1) } }\n"
      "def count(k: int) -> int { if k == 0 { 0 } else { 1 + count(k - 1) } }\n"
      "def main(k: int) -> (f32[1, H], int) {\n"
      "  (tanh(ones(1, H) @ W), if k > 0 { spin(k) } else { count(0 - k) })\n}\n");
  auto params = std::make_shared<ParamStore>(init_params(*m, 2));
  ReferenceEngine reference(m, params);
  BatchedEngine interpreter(m, params);
  AotEngine aot(m, params, aot_options());
  const std::vector<Engine*> engines{&reference, &interpreter, &aot};
  const auto looping = json_inputs(*m, {nlohmann::json(-2), nlohmann::json(3), nlohmann::json(-1)});
  std::string first;
  for (Engine* e : engines) {
    e->limit_steps(1000);
    const std::string error = error_of(*e, looping);
    EXPECT_NE(error.find("test.acr:3:50: error: instance 1: more than 1000 calls (the instance's step budget; "
                         "a loop's iterations count) at this call of 'spin': a loop that does not end?"),
              std::string::npos)
        << e->name() << ": " << error;
    if (first.empty()) first = error;
    EXPECT_EQ(error, first) << e->name();
    const RunResult skipped = run_batches(*e, looping, 0, "main", OnError::Skip);
    ASSERT_EQ(skipped.failures.size(), 1u) << e->name();
    EXPECT_EQ(skipped.failures[0].instance, 1u);
    EXPECT_EQ(skipped.outputs[0].agg->fields[1].i, 2) << e->name();
    EXPECT_EQ(skipped.outputs[2].agg->fields[1].i, 1) << e->name();
    // count(-k) makes k + 1 calls: 5 fit a budget of 5, not of 4.
    const auto five = json_inputs(*m, {nlohmann::json(-4)});
    e->limit_steps(5);
    EXPECT_EQ(e->run(five).outputs[0].agg->fields[1].i, 4) << e->name();
    e->limit_steps(4);
    EXPECT_NE(error_of(*e, five).find("instance 0: more than 4 calls"), std::string::npos) << e->name();
    e->limit_steps(0);  // none: 3000 nested calls run
    EXPECT_EQ(e->run(json_inputs(*m, {nlohmann::json(-3000)})).outputs[0].agg->fields[1].i, 3000) << e->name();
  }
}

TEST(AotEngine, ReportsUserErrorsLikeTheInterpreter) {
  const char* programs[] = {
      // An index out of range in instance 2.
      "dim H = 4\nparam E[5]: f32[1, H]\ndef main(n: int) -> f32[1, H] { tanh(E[n * 2]) }\n",
      // Division by zero.
      "def main(n: int) -> int { 10 / (n - 1) }\n",
      // Integer overflow in a division.
      "def main(n: int) -> int {\n"
      "  if n == 1 { (n - 9223372036854775807 - 2) / (0 - n) } else { n }\n}\n",
      // Recursion too deep.
      "def down(n: int) -> int { if n == 0 { 0 } else { 1 + down(n - 1) } }\n"
      "def main(n: int) -> int { down(n * 10000) }\n",
  };
  for (const char* text : programs) {
    auto m = compile_text(text);
    auto params = std::make_shared<ParamStore>(init_params(*m, 1));
    auto inputs = json_inputs(*m, {0, 1, 2, 3});
    BatchedEngine interpreter(m, params);
    AotEngine aot(m, params, aot_options());
    std::string want = error_of(interpreter, inputs);
    EXPECT_NE(want, "(no error)") << text;
    EXPECT_EQ(error_of(aot, inputs), want) << text;
  }
}

TEST(AotEngine, LoadsFromTheCacheAndRefusesAnotherModelsObject) {
  CompileOptions small;
  small.dims["H"] = 16;
  auto m = compile_model(kSource + "/models/treelstm.acr", small);
  auto params = std::make_shared<ParamStore>(init_params(*m, 1));
  AotEngine first(m, params, aot_options());
  auto t0 = std::chrono::steady_clock::now();
  AotEngine second(m, params, aot_options());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(second.build_info().cached);
  EXPECT_LT(seconds, 1.0);  // a correctness bound (no compiler run), far above the milliseconds taken
  // The object built for H=16 does not belong to the H=24 module.
  CompileOptions other;
  other.dims["H"] = 24;
  auto m24 = compile_model(kSource + "/models/treelstm.acr", other);
  auto p24 = std::make_shared<ParamStore>(init_params(*m24, 1));
  AotOptions o = aot_options();
  o.object = first.build_info().object_path;
  try {
    AotEngine wrong(m24, p24, o);
    FAIL() << "loaded another model's object";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("compiled from a different model, dims or analyses"),
              std::string::npos)
        << e.what();
  }
  o.object = kSource + "/README.md";
  try {
    AotEngine wrong(m24, p24, o);
    FAIL() << "loaded a file that is not a shared object";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot load the compiled model"), std::string::npos) << e.what();
  }
}

// An object records the instruction-set extensions it was compiled for; a CPU without one of them
// refuses it (here an object claiming an extension no CPU has).
TEST(AotEngine, RefusesAnObjectForAnotherCpu) {
  CompileOptions small;
  small.dims["H"] = 16;
  auto m = compile_model(kSource + "/models/treelstm.acr", small);
  auto params = std::make_shared<ParamStore>(init_params(*m, 1));
  codegen::GeneratedCpp code = codegen::emit_cpp(*m);
  const std::string isa = "ACROBAT_AOT_ISA,";
  const size_t at = code.source.find(isa);
  ASSERT_NE(at, std::string::npos);
  code.source.replace(at, isa.size(), "\"x86-64 avx2 avx1024\",");
  AotOptions o = aot_options();
  o.object = codegen::build_shared_object(code, kCache + "/other-cpu").path;
  try {
    AotEngine wrong(m, params, o);
    FAIL() << "loaded an object for another CPU";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("compiled for a CPU with avx1024, which this CPU lacks"),
              std::string::npos)
        << e.what();
  }
  // The same model compiled here loads.
  EXPECT_NO_THROW(AotEngine(m, params, aot_options()));
}

TEST(AotEngine, CompilerFailureIsAUserErrorWithTheCommand) {
  codegen::GeneratedCpp broken{"this is not C++\n", "0000000000000bad"};
  try {
    codegen::build_shared_object(broken, kCache + "/broken");
    FAIL() << "compiled nonsense";
  } catch (const UserError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("compiling the generated C++ failed"), std::string::npos) << msg;
    EXPECT_NE(msg.find("error"), std::string::npos) << msg;
  }
}

// Golden C++: the emitted code of a small model, reviewed like golden IR.
TEST(AotEngine, EmitsTheGoldenCpp) {
  std::string model = kSource + "/tests/golden/aot/cell.acr";
  std::string golden = kSource + "/tests/golden/aot/cell.cpp";
  auto m = compile_model(model, CompileOptions{});
  std::string actual = codegen::emit_cpp(*m).source;
  const char* update = std::getenv("ACROBAT_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(golden, std::ios::binary) << actual;
    GTEST_SKIP() << "rewrote " << golden;
  }
  std::ifstream in(golden, std::ios::binary);
  ASSERT_TRUE(in) << golden << " is missing; create it with ACROBAT_UPDATE_GOLDEN=1";
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(actual, expected.str()) << "the generated C++ changed; if intended, regenerate with "
                                       "ACROBAT_UPDATE_GOLDEN=1 and review the diff";
}

}  // namespace
}  // namespace acrobat
