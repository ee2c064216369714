// One graph runtime under both engines: every model, through the interpreter and through compiled
// C++, under every scheduler, at batch sizes 1, 7 and 64, gives the reference engine's outputs.
// Models on tree and token data read SST test sentences; the others (nested sequences, seeds of
// the tree decoder, sequences of the early-exit encoder) read inputs drawn from a fixed seed.
// Dims are small so that the 126 configurations run in a minute; the PyTorch tests cover the full
// sizes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

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
constexpr size_t kInstances = 128;

struct ModelCase {
  const char* model;
  const char* input_kind;  // "sst", "sst-tokens", or "random"
  std::map<std::string, int64_t> dims;
};

// Instances of `type` drawn from `rng`: token lists of 1..12 ids below `vocab`, lists of 1..4 such
// lists, tensors of N(0, 1) (an attention mask: 0 for the first 1..S positions, -10000 after; a
// size variable 1..40, one length in four 1).
Value random_value(const Type& type, std::mt19937& rng, int64_t vocab) {
  if (type->kind == TypeKind::Tensor) {
    std::vector<int64_t> shape = type->shape;
    for (int64_t& d : shape)
      if (is_size_var(d))
        d = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? 1 : std::uniform_int_distribution<int64_t>(1, 40)(rng);
    Tensor t = Tensor::allocate(shape);
    std::normal_distribution<float> normal;
    for (int64_t i = 0; i < t.size(); ++i) t.data[i] = normal(rng);
    return Value::of_tensor(std::move(t));
  }
  if (type->kind == TypeKind::Tuple) {
    std::vector<Value> fields;
    for (const auto& e : type->args) fields.push_back(random_value(e, rng, vocab));
    if (fields.size() == 2 && type->args[1]->kind == TypeKind::Tensor && type->args[1]->shape[0] == 1) {
      // (tokens, mask): the mask keeps a prefix.
      Tensor mask = Tensor::allocate(type->args[1]->shape);
      int64_t s = mask.size();
      int64_t keep = std::uniform_int_distribution<int64_t>(1, s)(rng);
      for (int64_t i = 0; i < s; ++i) mask.data[i] = i < keep ? 0.0f : -10000.0f;
      fields[1] = Value::of_tensor(std::move(mask));
    }
    return Value::tuple(std::move(fields));
  }
  // A List: of ints or of lists.
  nlohmann::json j = nlohmann::json::array();
  const Type& elem = type->args[0];
  int n = std::uniform_int_distribution<int>(1, elem->kind == TypeKind::Int ? 12 : 4)(rng);
  for (int i = 0; i < n; ++i) {
    if (elem->kind == TypeKind::Int) {
      j.push_back(std::uniform_int_distribution<int64_t>(0, vocab - 1)(rng));
    } else {
      nlohmann::json inner = nlohmann::json::array();
      int m = std::uniform_int_distribution<int>(1, 12)(rng);
      for (int k = 0; k < m; ++k) inner.push_back(std::uniform_int_distribution<int64_t>(0, vocab - 1)(rng));
      j.push_back(inner);
    }
  }
  return value_from_json(j, type, SourceLoc{"random", 1, 1});
}

const LoadedModel& load(const ModelCase& c) {
  static std::map<std::string, LoadedModel> cache;
  auto it = cache.find(c.model);
  if (it != cache.end()) return it->second;
  return cache[c.model] = load_model(
             kSource + "/models/" + c.model + ".acr", c.dims, 5, [&](const Type& type) {
               if (std::string(c.input_kind) != "random")
                 return load_inputs(parse_input_spec(std::string(c.input_kind) + ":" + kSource +
                                                     "/data/sst/test.txt"),
                                    type, kSource + "/data/sst/vocab.txt", kInstances);
               std::mt19937 rng(17);
               std::vector<Value> inputs;
               for (size_t i = 0; i < kInstances; ++i) inputs.push_back(random_value(type, rng, 1000));
               return inputs;
             });
}

// Tensors to a relative 1e-4 (batched GEMMs sum in another order than one-row ones), anything
// else exactly: the decisions a model takes from tensor values are the same.
void expect_close(const Value& a, const Value& e, const std::string& where) {
  expect_values_close(a, e, where, 1e-4f, 1e-5f);
}

using Param = std::tuple<ModelCase, std::string, Scheduler>;

class EveryEngineAndScheduler : public ::testing::TestWithParam<Param> {};

TEST_P(EveryEngineAndScheduler, EqualsTheReferenceAtBatch1_7_64) {
  const auto& [c, engine_name, scheduler] = GetParam();
  const LoadedModel& l = load(c);
  std::unique_ptr<Engine> engine;
  if (engine_name == "aot") {
    AotOptions o;
    o.cache_dir = kCache;
    o.scheduler = scheduler;
    engine = std::make_unique<AotEngine>(l.module, l.params, o);
  } else {
    engine = std::make_unique<BatchedEngine>(l.module, l.params, scheduler);
  }
  for (size_t batch : {size_t{1}, size_t{7}, size_t{64}}) {
    size_t count = batch == 1 ? 16 : l.inputs.size();
    std::vector<Value> part(l.inputs.begin(), l.inputs.begin() + count);
    RunResult got = engine->run_batches(part, batch);
    ASSERT_EQ(got.outputs.size(), count);
    for (size_t i = 0; i < count; ++i)
      expect_close(got.outputs[i], l.expected[i], fmt::format("batch {}, instance {}", batch, i));
    if (batch == 64) {
      EXPECT_LT(got.stats.batches, got.stats.nodes) << "nothing was batched";
    }
  }
}

const ModelCase kModels[] = {
    {"treelstm", "sst", {{"H", 32}}},
    {"mvrnn", "sst", {{"H", 16}}},
    {"birnn", "sst-tokens", {{"H", 32}}},
    {"nestedrnn", "random", {{"H", 32}}},
    {"stackrnn", "sst-tokens", {{"H", 32}}},
    {"drnn", "random", {{"H", 32}}},
    {"berxit_padded", "random", {{"D", 64}, {"NH", 1}, {"S", 16}, {"L", 3}}},
    {"berxit", "sst-tokens", {{"D", 64}, {"NH", 1}, {"L", 3}}},
    {"encoder", "random", {{"D", 128}, {"NH", 2}, {"FF", 256}}},
};

INSTANTIATE_TEST_SUITE_P(Models, EveryEngineAndScheduler,
                         ::testing::Combine(::testing::ValuesIn(kModels),
                                            ::testing::Values("interpreter", "aot"),
                                            ::testing::Values(Scheduler::InlineDepth, Scheduler::Depth,
                                                              Scheduler::Agenda)),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           std::string s = scheduler_name(std::get<2>(info.param));
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return std::string(std::get<0>(info.param).model) + "_" +
                                  std::get<1>(info.param) + "_" + s;
                         });

}  // namespace
}  // namespace acrobat

namespace acrobat {
namespace {

// A model whose if/else branches differ by `blocks` - 1 static blocks: one branch runs a chain of
// `blocks` blocks (functions that call their predecessor twice, f_k(x) = f_{k-1}(f_{k-1}(x)),
// compose it), the other one block. Ghost padding lines up the block after the branch, up to its
// cap of 256 levels.
std::string long_branch_model(int blocks) {
  std::string s = "dim H = 8\nparam W: f32[H, H]\n";
  s += "def f0(x: f32[1, H]) -> f32[1, H] { tanh(x @ W) }\n";
  for (int k = 1; k < 9; ++k)
    s += fmt::format("def f{}(x: f32[1, H]) -> f32[1, H] {{ f{}(f{}(x)) }}\n", k, k - 1, k - 1);
  // `blocks` in binary: the chain applies f_k for each set bit k.
  std::string chain = "x";
  for (int k = 0; k < 9; ++k)
    if (blocks & (1 << k)) chain = fmt::format("f{}({})", k, chain);
  s += "def chain(x: f32[1, H]) -> f32[1, H] { " + chain + " }\n";
  s += "def main(inp: (f32[1, H], int)) -> f32[1, H] {\n"
       "  let (x, n) = inp;\n"
       "  let y = if n > 0 { chain(x) } else { tanh(x @ W) };\n"
       "  tanh(y @ W)\n"
       "}\n";
  return s;
}

TEST(LongBranches, GhostPaddingIsCorrectOnEveryEngineAndScheduler) {
  for (int blocks : {200, 300}) {
    auto module = compile_checked(parse_model_text("long.acr", long_branch_model(blocks), {}), {});
    auto params = std::make_shared<ParamStore>(init_params(*module, 3));
    std::vector<Value> inputs;
    std::mt19937 rng(5);
    for (int i = 0; i < 24; ++i) {
      Tensor x = Tensor::allocate({1, 8});
      std::normal_distribution<float> normal;
      for (int64_t j = 0; j < 8; ++j) x.data[j] = normal(rng);
      inputs.push_back(Value::tuple({Value::of_tensor(std::move(x)), Value::of_int(i % 3)}));
    }
    ReferenceEngine reference(module, params);
    std::vector<Value> expected = reference.run(inputs).outputs;
    for (Scheduler scheduler : {Scheduler::InlineDepth, Scheduler::Depth, Scheduler::Agenda}) {
      AotOptions o;
      o.cache_dir = kCache;
      o.scheduler = scheduler;
      std::vector<std::unique_ptr<Engine>> engines;
      engines.push_back(std::make_unique<BatchedEngine>(module, params, scheduler));
      engines.push_back(std::make_unique<AotEngine>(module, params, o));
      for (auto& engine : engines) {
        std::string where = fmt::format("{} blocks, {} engine, {}", blocks, engine->name(),
                                        scheduler_name(scheduler));
        RunResult got = engine->run(inputs);
        for (size_t i = 0; i < inputs.size(); ++i)
          expect_close(got.outputs[i], expected[i], fmt::format("{}, instance {}", where, i));
        // Inline depth: the long branch in `blocks` batches, the short one in one, and the block
        // after the branch in one when the padding covers the difference, else in two.
        if (scheduler == Scheduler::InlineDepth) {
          EXPECT_EQ(got.stats.batches, blocks + 1 + (blocks - 1 <= 256 ? 1 : 2)) << where;
        }
      }
    }
  }
}

}  // namespace
}  // namespace acrobat

namespace acrobat {
namespace {

// An operator nothing reads, outside any fused loop (a broadcast the loops do not take), still gets
// memory in the kernel plan: both executors write it somewhere.
TEST(KernelPlans, AnUnreadOperatorOutsideAFusedLoopHasABuffer) {
  auto module = compile_checked(parse_model_text("dead.acr", R"(
dim H = 4
param W: f32[H, H]
param c: f32[3, 1]
def main(x: f32[1, H]) -> f32[1, H] {
  let h = x @ W;
  let unused = c + h;
  tanh(h)
}
)", {}), {});
  auto params = std::make_shared<ParamStore>(init_params(*module, 2));
  std::vector<Value> inputs;
  for (int i = 0; i < 5; ++i) {
    Tensor x = Tensor::allocate({1, 4});
    for (int64_t j = 0; j < 4; ++j) x.data[j] = 0.1f * static_cast<float>(i + j);
    inputs.push_back(Value::of_tensor(std::move(x)));
  }
  std::vector<Value> expected = ReferenceEngine(module, params).run(inputs).outputs;
  AotOptions o;
  o.cache_dir = kCache;
  BatchedEngine interpreter(module, params);
  AotEngine aot(module, params, o);
  for (Engine* engine : std::initializer_list<Engine*>{&interpreter, &aot}) {
    RunResult got = engine->run(inputs);
    for (size_t i = 0; i < inputs.size(); ++i)
      expect_close(got.outputs[i], expected[i], fmt::format("{} engine, instance {}", engine->name(), i));
  }
}

}  // namespace
}  // namespace acrobat
