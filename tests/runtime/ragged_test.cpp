// Ragged models (size variables) on every engine: instances of different lengths batched together
// through calls that bind sizes, lambdas that capture them, gathers of token lists, sized
// constants and slices, tensor-dependent loops, give the reference engine's outputs under every
// scheduler; what only an instance can break (a slice beyond its length, a gather of a bad list)
// fails that instance with the same message on every engine.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "analysis/explain.h"
#include "compiler/pipeline.h"
#include "lang/frontend.h"
#include "engines/aot_engine.h"
#include "engines/batched_engine.h"
#include "engines/inputs.h"
#include "runtime/params.h"
#include "engines/reference_engine.h"
#include "expect_values.h"

namespace acrobat {
namespace {

const std::string kCache = ACROBAT_TEST_CACHE_DIR;

// Token lists -> gathered embeddings [len, D] with positions; a sized function called on them and
// on a slice of their rows; a lambda that captures the length through map; a loop that decides
// from a tensor read how often to mix; a per-instance product [len, len]; attention pooling, a
// softmax along the rows (axis 0), scaled by a host number per instance.
const char* kModel = R"(
dim D = 16
param W: f32[D, D]
param emb[40]: f32[1, D]
param pos: f32[64, D]

def mix(x: f32[n, D]) -> f32[n, D] {
  let a = softmax(x @ transpose(x) * 0.25);
  tanh(a @ x @ W + zeros(n, D)) + slice(pos, 0, n, axis=0)
}

def steps(x: f32[n, D], k: int) -> f32[n, D] {
  let y = mix(x);
  if k == 0 { y } else if item(mean(sum(y, axis=0), axis=1)) > 0.5 { y } else { steps(y, k - 1) }
}

def main(ids: List[int]) -> (f32[1, D], f32[1, D], int, f32[1, D]) {
  let x = emb[ids];
  let ys = map(fn(k: int) { steps(x, k) }, Cons(0, Cons(2, Nil)));
  let total = foldl(fn(acc: f32[1, D], y) { acc + max(y, axis=0) }, zeros(1, D), ys);
  let pool = softmax(sum(x @ W, axis=1), axis=0);  // f32[n, 1]
  (total, slice(mix(x), 0, 1, axis=0), length(ids), transpose(pool) @ x * (1.0 / float(length(ids))))
}
)";

struct Loaded {
  std::shared_ptr<const ir::Module> module;
  std::shared_ptr<const ParamStore> params;
  std::vector<Value> inputs;
  std::vector<Value> expected;
  // The reference engine's FLOP count of the first `count` instances.
  int64_t flops(size_t count) const {
    std::vector<Value> part(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(count));
    return ReferenceEngine(module, params).run(part).stats.flops;
  }
};

const Loaded& loaded() {
  static Loaded l = [] {
    Loaded out;
    out.module = compile_checked(parse_model_text("ragged.acr", kModel, {}), {});
    out.params = std::make_shared<ParamStore>(init_params(*out.module, 3));
    const auto& f = out.module->functions[entry_function(*out.module, "main")];
    std::mt19937 rng(11);
    for (int i = 0; i < 70; ++i) {
      // Lengths 1..64, a quarter of them 1.
      int n = i % 4 == 0 ? 1 : std::uniform_int_distribution<int>(1, 64)(rng);
      nlohmann::json ids = nlohmann::json::array();
      for (int k = 0; k < n; ++k) ids.push_back(std::uniform_int_distribution<int>(0, 39)(rng));
      out.inputs.push_back(value_from_json(ids, f.vars[f.params[0]].type, SourceLoc{"ids", 1, 1}));
    }
    out.expected = ReferenceEngine(out.module, out.params).run(out.inputs).outputs;
    return out;
  }();
  return l;
}

// `count` lists of random ids in [0, vocab), list i of 1 + i % cycle of them.
std::vector<nlohmann::json> id_lists(int count, int cycle, int vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<nlohmann::json> out;
  for (int i = 0; i < count; ++i) {
    nlohmann::json ids = nlohmann::json::array();
    for (int k = 0, n = 1 + i % cycle; k < n; ++k) ids.push_back(std::uniform_int_distribution<int>(0, vocab - 1)(rng));
    out.push_back(std::move(ids));
  }
  return out;
}

// Model `text` with params from `param_seed`, its instances id_lists(count, cycle, vocab, seed)
// (main's parameter a List[int]), and the reference engine's outputs.
Loaded load_with(const char* name, const char* text, uint64_t param_seed, const std::vector<nlohmann::json>& instances) {
  Loaded l;
  l.module = compile_checked(parse_model_text(name, text, {}), {});
  l.params = std::make_shared<ParamStore>(init_params(*l.module, param_seed));
  const auto& f = l.module->functions[entry_function(*l.module, "main")];
  for (const nlohmann::json& j : instances)
    l.inputs.push_back(value_from_json(j, f.vars[f.params[0]].type, SourceLoc{"in", 1, 1}));
  l.expected = ReferenceEngine(l.module, l.params).run(l.inputs).outputs;
  return l;
}
Loaded load_with_ids(const char* name, const char* text, uint64_t param_seed, int count, int cycle, int vocab,
                     unsigned seed) {
  return load_with(name, text, param_seed, id_lists(count, cycle, vocab, seed));
}

// [lists[i], second(i)] for every list: main's parameter a pair (a prompt and a number).
std::vector<nlohmann::json> with_numbers(const std::vector<nlohmann::json>& lists, int64_t (*second)(size_t)) {
  std::vector<nlohmann::json> out;
  for (size_t i = 0; i < lists.size(); ++i) out.push_back(nlohmann::json::array({lists[i], second(i)}));
  return out;
}

std::vector<std::unique_ptr<Engine>> batched_engines(const std::shared_ptr<const ir::Module>& m,
                                                     const std::shared_ptr<const ParamStore>& p,
                                                     Scheduler scheduler, int threads = 1) {
  std::vector<std::unique_ptr<Engine>> out;
  out.push_back(std::make_unique<BatchedEngine>(m, p, scheduler, threads));
  AotOptions o;
  o.cache_dir = kCache;
  o.scheduler = scheduler;
  o.threads = threads;
  out.push_back(std::make_unique<AotEngine>(m, p, o));
  return out;
}

// Every batched engine under the inline-depth and agenda schedulers, 1 and 2 threads, each batch
// size in `batches`: the reference engine's outputs, within rtol and atol.
void expect_engines_equal_reference(const Loaded& l, std::initializer_list<size_t> batches, float rtol, float atol) {
  for (Scheduler scheduler : {Scheduler::InlineDepth, Scheduler::Agenda})
    for (int threads : {1, 2})
      for (auto& engine : batched_engines(l.module, l.params, scheduler, threads))
        for (size_t batch : batches) {
          RunResult r = engine->run_batches(l.inputs, batch);
          ASSERT_EQ(r.outputs.size(), l.inputs.size());
          for (size_t i = 0; i < l.inputs.size(); ++i)
            expect_values_close(r.outputs[i], l.expected[i],
                                fmt::format("{} {} threads {} batch {} instance {}", engine->name(),
                                            scheduler_name(scheduler), threads, batch, i),
                                rtol, atol);
        }
}

TEST(Ragged, EveryEngineAndSchedulerEqualsTheReference) {
  const Loaded& l = loaded();
  for (Scheduler scheduler : {Scheduler::InlineDepth, Scheduler::Depth, Scheduler::Agenda})
    for (auto& engine : batched_engines(l.module, l.params, scheduler))
      for (size_t batch : {size_t{1}, size_t{7}, size_t{64}}) {
        const size_t count = batch == 1 ? 12 : l.inputs.size();
        std::vector<Value> part(l.inputs.begin(), l.inputs.begin() + count);
        RunResult r = engine->run_batches(part, batch);
        ASSERT_EQ(r.outputs.size(), count);
        for (size_t i = 0; i < count; ++i)
          expect_values_close(r.outputs[i], l.expected[i],
                              fmt::format("{} {} batch {} instance {}", engine->name(),
                                          scheduler_name(scheduler), batch, i),
                              1e-4f, 1e-5f);
        if (batch == 64) {
          EXPECT_LT(r.stats.batches, r.stats.nodes) << "nothing was batched";
        }
        // The same work counted: every operator once per instance, at its shapes.
        EXPECT_EQ(r.stats.flops, l.flops(count)) << engine->name() << " batch " << batch;
      }
}

TEST(Ragged, TwoThreadsGiveTheOneThreadOutputs) {
  const Loaded& l = loaded();
  for (auto& engine : batched_engines(l.module, l.params, Scheduler::InlineDepth, 2)) {
    RunResult r = engine->run_batches(l.inputs, 16);
    for (size_t i = 0; i < l.inputs.size(); ++i)
      expect_values_close(r.outputs[i], l.expected[i], fmt::format("{} instance {}", engine->name(), i),
                          1e-4f, 1e-5f);
  }
}

// Every engine's message for an instance's user error, or "" when the run succeeds.
std::vector<std::string> errors_on_every_engine(const std::string& text, const std::vector<nlohmann::json>& instances) {
  auto module = compile_checked(parse_model_text("bad.acr", text, {}), {});
  auto params = std::make_shared<ParamStore>(init_params(*module, 1));
  const auto& f = module->functions[entry_function(*module, "main")];
  std::vector<Value> inputs;
  for (const auto& j : instances)
    inputs.push_back(value_from_json(j, f.vars[f.params[0]].type, SourceLoc{"in", 1, 1}));
  std::vector<std::unique_ptr<Engine>> engines;
  engines.push_back(std::make_unique<ReferenceEngine>(module, params));
  for (auto& e : batched_engines(module, params, Scheduler::InlineDepth)) engines.push_back(std::move(e));
  std::vector<std::string> out;
  for (auto& e : engines) {
    try {
      e->run(inputs);
      out.push_back("");
    } catch (const UserError& err) {
      out.push_back(err.what());
    }
  }
  return out;
}

TEST(Ragged, ASliceBeyondAnInstancesLengthFailsThatInstanceOnEveryEngine) {
  const std::string text = "def main(x: f32[n, 4]) -> f32[1, 4] { sum(slice(x, 0, 2, axis=0), axis=0) }\n";
  nlohmann::json three = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}}, one = {{1, 2, 3, 4}};
  for (const std::string& e : errors_on_every_engine(text, {three, one, three})) {
    EXPECT_NE(e.find("bad.acr:1:43: error: instance 1: slice [0, 2) is not a non-empty range within 0..1 "
                     "of axis 0 (with this instance's sizes n = 1)"),
              std::string::npos)
        << e;
  }
}

TEST(Ragged, ASliceOfPositionsLongerThanTheTableFailsOnEveryEngine) {
  const std::string text = "param pos: f32[3, 4]\n"
                           "def main(x: f32[n, 4]) -> f32[n, 4] { x + slice(pos, 0, n, axis=0) }\n";
  nlohmann::json four = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}, {1, 1, 1, 1}}, one = {{1, 2, 3, 4}};
  for (const std::string& e : errors_on_every_engine(text, {one, four})) {
    EXPECT_NE(e.find("bad.acr:2:43: error: instance 1: slice [0, 4) is not a non-empty range within 0..3 "
                     "of axis 0 (with this instance's sizes n = 4)"),
              std::string::npos)
        << e;
  }
}

// Bounds at sizes (a position n - 3, a length n - 1) are checked per instance: at least 0, at least
// one row, within the axis.
TEST(Ragged, ASliceAtSizesFailsTheInstanceItDoesNotFitOnEveryEngine) {
  const std::string text = "def main(x: f32[n, 2]) -> (f32[1, 2], f32[1, 2]) {\n"
                           "  (sum(slice(x, n - 3, n - 1, axis=0), axis=0), sum(slice(x, 1, n, axis=0), axis=0))\n}\n";
  nlohmann::json four = {{1, 2}, {3, 4}, {5, 6}, {7, 8}}, two = {{1, 2}, {3, 4}}, one = {{1, 2}};
  for (const std::string& e : errors_on_every_engine(text, {four, four})) EXPECT_EQ(e, "");
  for (const std::string& e : errors_on_every_engine(text, {four, two})) {
    EXPECT_NE(e.find("bad.acr:2:8: error: instance 1: slice [-1, 1) is not a non-empty range within 0..2 "
                     "of axis 0 (with this instance's sizes n = 2, n - 3 = -1, n - 1 = 1)"),
              std::string::npos)
        << e;
  }
  const std::string tail = "def main(x: f32[n, 2]) -> f32[1, 2] { sum(slice(x, 1, n, axis=0), axis=0) }\n";
  for (const std::string& e : errors_on_every_engine(tail, {four, one})) {
    EXPECT_NE(e.find("error: instance 1: slice [1, 1) is not a non-empty range within 0..1 of axis 0"),
              std::string::npos)
        << e;
  }
}

// topk and ranked argmax over a ragged axis (a pointer network's top positions): argmax's order
// (largest first, ties by position) on every engine and batch size, against a stable sort here;
// an instance with fewer entries than the ranks it reads fails with the count and its size.
TEST(Ragged, TopKOverARaggedAxisFollowsAStableSortOnEveryEngine) {
  const std::string text = "def main(x: f32[1, n]) -> (List[int], int) {\n"
                           "  let s = x * 2.0 + 1.0;\n"
                           "  (topk(s, 3), argmax(s, rank=1))\n}\n";
  auto module = compile_checked(parse_model_text("topk.acr", text, {}), {});
  auto params = std::make_shared<ParamStore>(init_params(*module, 1));
  const auto& f = module->functions[entry_function(*module, "main")];
  std::mt19937 rng(21);
  std::vector<Value> inputs;
  std::vector<std::vector<int64_t>> want;
  for (int i = 0; i < 50; ++i) {
    std::vector<float> row(3 + i % 23);
    for (float& v : row) v = static_cast<float>(std::uniform_int_distribution<int>(-4, 4)(rng));  // ties
    std::vector<int64_t> order(row.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int64_t>(k);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return row[a] > row[b]; });
    want.push_back({order[0], order[1], order[2], order[1]});
    inputs.push_back(value_from_json(nlohmann::json::array({row}), f.vars[f.params[0]].type, SourceLoc{"in", 1, 1}));
  }
  std::vector<std::unique_ptr<Engine>> engines;
  engines.push_back(std::make_unique<ReferenceEngine>(module, params));
  for (auto& e : batched_engines(module, params, Scheduler::InlineDepth)) engines.push_back(std::move(e));
  for (auto& engine : engines)
    for (size_t batch : {size_t{1}, size_t{7}, size_t{50}}) {
      RunResult r = engine->run_batches(inputs, batch);
      for (size_t i = 0; i < inputs.size(); ++i) {
        std::vector<int64_t> got;
        for (const Value* v = &r.outputs[i].agg->fields[0]; !v->agg->fields.empty(); v = &v->agg->fields[1])
          got.push_back(v->agg->fields[0].i);
        got.push_back(r.outputs[i].agg->fields[1].i);
        EXPECT_EQ(got, want[i]) << engine->name() << " batch " << batch << " instance " << i;
      }
    }
  nlohmann::json three = {{1, 5, 2}}, two = {{3, 3}};
  for (const std::string& e : errors_on_every_engine(text, {three, three})) EXPECT_EQ(e, "");
  for (const std::string& e : errors_on_every_engine(text, {three, two, three}))
    EXPECT_NE(e.find("bad.acr:3:4: error: instance 1: argmax: rank 2 of a tensor of 2 element(s): the rank must "
                     "be below the count (with this instance's sizes n = 2)"),
              std::string::npos)
        << e;
}

TEST(Ragged, GatherErrorsNameTheIndexAndTheEntryOnEveryEngine) {
  const std::string text = "param E[5]: f32[1, 4]\n"
                           "def main(ids: List[int]) -> f32[1, 4] { sum(E[ids], axis=0) }\n";
  for (const std::string& e : errors_on_every_engine(text, {{1, 2}, {0, 7, 1}})) {
    EXPECT_NE(e.find("bad.acr:2:45: error: instance 1: index 7 (entry 1 of the list) is out of range for "
                     "param 'E' of 5 entries"),
              std::string::npos)
        << e;
  }
  for (const std::string& e : errors_on_every_engine(text, {{1, 2}, {-1}})) {
    EXPECT_NE(e.find("bad.acr:2:45: error: instance 1: index -1 (entry 0 of the list) is out of range for "
                     "param 'E' of 5 entries"),
              std::string::npos)
        << e;
  }
  for (const std::string& e : errors_on_every_engine(text, {{1, 2}, nlohmann::json::array()})) {
    EXPECT_NE(e.find("bad.acr:2:45: error: instance 1: param 'E' gathered by an empty list: a tensor needs "
                     "at least one row"),
              std::string::npos)
        << e;
  }
}

TEST(Ragged, AnInstanceWhoseTensorsDisagreeOnASizeIsAnError) {
  auto module = compile_checked(
      parse_model_text("t.acr", "def main(p: (f32[n, 2], f32[n, 2])) -> f32[n, 2] { p.0 + p.1 }\n", {}), {});
  const auto& f = module->functions[entry_function(*module, "main")];
  UserError e("");
  SizeNamesScope names(module->plan->size_names);
  try {
    value_from_json(nlohmann::json::parse(R"([[[1, 2]], [[1, 2], [3, 4]]])"), f.vars[f.params[0]].type,
                    SourceLoc{"in.jsonl", 3, 1});
    ADD_FAILURE() << "expected an error";
  } catch (const UserError& err) {
    e = err;
  }
  EXPECT_NE(std::string(e.what()).find("in.jsonl:3:1: error: at $[1]: expected an array of 1 elements (dimension 0 of a tensor [n, 2]"), std::string::npos)
      << e.what();
  EXPECT_NE(std::string(e.what()).find("(with n = 1; a size variable is at least 1)"), std::string::npos)
      << e.what();
}

// Generation: a prompt's rows with a [CLS] row before them (`n + 1`), then a decoder that attends
// over its own cache, appends a row per step (`t + 1`: each tail call binds t afresh) and picks the
// next token by argmax, until token 0 or the instance's own step budget: instances stop at
// different steps and their caches differ in length at every step.
const char* kGrowing = R"(
dim D = 16
dim V = 24
param emb[V]: f32[1, D]
param cls: f32[1, D]
param Wq: f32[D, D]
param Wkv: f32[D, 2 * D]
param Wout: f32[D, V]

def step(k: f32[t, D], v: f32[t, D], tok: int, left: int, out: List[int]) -> (List[int], f32[1, D]) {
  let x = emb[tok];
  let (nk, nv) = split(x @ Wkv, 2);
  let k2 = concat(k, nk, axis=0);
  let v2: f32[t + 1, D] = concat(v, nv, axis=0);
  let h = softmax((x @ Wq) @ transpose(k2) * 0.25) @ v2 + x;
  let next = emit(argmax(h @ Wout));
  if next == 0 || left == 1 { (reverse(Cons(next, out)), mean(v2, axis=0)) }
  else { step(k2, v2, next, left - 1, Cons(next, out)) }
}

def main(prompt: List[int]) -> (List[int], f32[1, D]) {
  let x = concat(cls, emb[prompt], axis=0);
  let (k, v) = split(x @ Wkv, 2);
  step(k, v, 1 + length(prompt) % (V - 1), 3 + length(prompt) % 13, Nil)
}
)";

TEST(Ragged, GrowingCachesEqualTheReferenceOnEveryEngine) {
  const Loaded l = load_with_ids("grow.acr", kGrowing, 4, 70, 20, 24, 5);
  const auto& [module, params, inputs, expected] = l;
  std::set<size_t> generated;  // how many tokens the instances generate: they stop apart
  for (const Value& v : expected) {
    size_t n = 0;
    for (const Value* l = &v.agg->fields[0]; !l->agg->fields.empty(); l = &l->agg->fields[1]) ++n;
    generated.insert(n);
  }
  EXPECT_GE(generated.size(), 4u);
  for (Scheduler scheduler : {Scheduler::InlineDepth, Scheduler::Agenda})
    for (int threads : {1, 2})
      for (auto& engine : batched_engines(module, params, scheduler, threads))
        for (size_t batch : {size_t{1}, size_t{7}, size_t{64}}) {
          RunResult r = engine->run_batches(inputs, batch);
          ASSERT_EQ(r.outputs.size(), inputs.size());
          for (size_t i = 0; i < inputs.size(); ++i)
            expect_values_close(r.outputs[i], expected[i],
                                fmt::format("{} {} threads {} batch {} instance {}", engine->name(),
                                            scheduler_name(scheduler), threads, batch, i),
                                1e-4f, 1e-5f);
        }
}

// Growing storage (runtime/batch_outputs.h): a decode that appends a row per step to the cache it
// attends over, for up to 4096 steps, copies a number of floats linear in the steps (the new rows,
// and each cache moved to a store twice as large now and then), not the O(T^2) of a copy per step;
// its peak memory grows with T, not T^2; and it gives the reference engine's outputs.
const char* kLongDecode = R"(
dim D = 16
param W: f32[D, D]
param x0: f32[1, D]
def decode(c: f32[t, D], x: f32[1, D], left: int) -> f32[1, D] {
  if left == 0 { x } else {
    let c2 = concat(c, x, axis=0);
    decode(c2, tanh(softmax(x @ transpose(c2)) @ c2 @ W + x), left - 1)
  }
}
def main(n: int) -> f32[1, D] {
  let x = tanh(x0 * 2.0);
  decode(x, x, n)
}
)";

TEST(Ragged, AppendingMovesFloatsLinearInTheStepsOnEveryEngine) {
  unsetenv("ACROBAT_POISON_RELEASED");  // the peak measured is memory really in use
  auto module = compile_checked(parse_model_text("decode.acr", kLongDecode, {}), {});
  auto params = std::make_shared<ParamStore>(init_params(*module, 3));
  constexpr int64_t kD = 16;
  for (auto& engine : batched_engines(module, params, Scheduler::InlineDepth)) {
    int64_t peak_short = 0;
    for (int64_t T : {1024, 4096}) {
      std::vector<Value> inputs;
      int64_t steps = 0;
      for (int64_t i = 0; i < 4; ++i) {
        inputs.push_back(Value::of_int(T - 7 * i));
        steps += T - 7 * i;
      }
      RunResult r = engine->run(inputs);
      const std::string what = fmt::format("{} T {}", engine->name(), T);
      // Each step's row, plus the moves: a store of capacity 2m moves m rows when full, so the
      // moves add up to less than twice the final rows.
      EXPECT_LE(r.stats.append_copied_floats, 3 * steps * kD + 64 * kD) << what;
      EXPECT_GE(r.stats.append_copied_floats, steps * kD) << what;
      // Every append but the moves (about log2(T) per instance) in place.
      EXPECT_GE(r.stats.appends_in_place, steps - 4 * 16) << what;
      if (T == 1024) {
        peak_short = r.stats.peak_bytes;
        const std::vector<Value> want = ReferenceEngine(module, params).run(inputs).outputs;
        for (size_t i = 0; i < inputs.size(); ++i)
          expect_values_close(r.outputs[i], want[i], what + " instance " + std::to_string(i), 1e-4f, 1e-5f);
      } else {
        // Four times the steps: the caches four times longer, not sixteen times the copies.
        EXPECT_LE(r.stats.peak_bytes, 6 * peak_short) << what;
      }
    }
  }
}

// Hypotheses forked from one cache: two appends onto it in one block (the first extends its store,
// the second copies the prefix), a path chosen by a tensor read, and an append onto a prefix the
// recursion has already extended further (copied, so that the longer value keeps its rows) give
// the reference engine's outputs, with every released buffer poisoned.
const char* kForks = R"(
dim D = 8
param W: f32[D, D]
param emb[16]: f32[1, D]
def walk(c: f32[t, D], x: f32[1, D], left: int) -> f32[1, D] {
  if left == 0 { x } else {
    let a = concat(c, x, axis=0);
    let b = concat(c, tanh(x @ W), axis=0);
    let y = tanh(softmax(x @ transpose(a)) @ a @ W);
    let r = if item(sum(y)) > 0.0 { walk(a, y, left - 1) } else { walk(b, y * 0.5, left - 1) };
    let z = concat(c, r, axis=0);
    softmax(r @ transpose(z)) @ z + r
  }
}
def main(ids: List[int]) -> f32[1, D] {
  let e = emb[ids];
  walk(e, tanh(slice(e, 0, 1, axis=0)), length(ids) + 3)
}
)";

TEST(Ragged, ForkedCachesEqualTheReferenceOnEveryEngine) {
  setenv("ACROBAT_POISON_RELEASED", "1", 1);
  const Loaded l = load_with_ids("forks.acr", kForks, 6, 40, 9, 16, 2);
  const auto& [module, params, inputs, want] = l;
  for (int threads : {1, 2})
    for (auto& engine : batched_engines(module, params, Scheduler::InlineDepth, threads))
      for (size_t batch : {size_t{1}, size_t{40}}) {
        RunResult r = engine->run_batches(inputs, batch);
        ASSERT_EQ(r.outputs.size(), inputs.size());
        EXPECT_GT(r.stats.appends_in_place, 0) << engine->name();
        for (size_t i = 0; i < inputs.size(); ++i)
          expect_values_close(r.outputs[i], want[i],
                              fmt::format("{} threads {} batch {} instance {}", engine->name(), threads, batch, i),
                              1e-4f, 1e-5f);
      }
  unsetenv("ACROBAT_POISON_RELEASED");
}

// Sampling and pointing: a decoder that draws each next token from its logits with a seed of the
// instance's own (sample(x, seed + step)), and picks a position of its prompt by argmax over
// ragged scores [1, n], gives the same tokens on every engine, scheduler, batch size and thread
// count.
const char* kSampling = R"(
dim D = 16
dim V = 24
param emb[V]: f32[1, D]
param Wkv: f32[D, 2 * D]
param Wout: f32[D, V]
param w: f32[D, 1]

def step(k: f32[t, D], v: f32[t, D], tok: int, seed: int, left: int, out: List[int]) -> List[int] {
  let x = emb[tok];
  let (nk, nv) = split(x @ Wkv, 2);
  let k2 = concat(k, nk, axis=0);
  let v2 = concat(v, nv, axis=0);
  let h = softmax(x @ transpose(k2) * 0.25) @ v2 + x;
  let next = sample(h @ Wout * 3.0, seed + left);
  if left == 1 { reverse(Cons(next, out)) } else { step(k2, v2, next, seed, left - 1, Cons(next, out)) }
}

def main(x: (List[int], int)) -> (List[int], int) {
  let (prompt, seed) = x;
  let e = emb[prompt];
  let (k, v) = split(e @ Wkv, 2);
  (step(k, v, 1, seed, 2 + length(prompt) % 9, Nil), argmax(transpose(e @ w)))
}
)";

TEST(Ragged, SamplingAndPointingEqualTheReferenceOnEveryEngine) {
  const Loaded l = load_with("sample.acr", kSampling, 4,
                             with_numbers(id_lists(50, 17, 24, 6), [](size_t i) { return int64_t(1000 + i % 7); }));
  std::set<int64_t> pointed;  // argmax over each prompt's own length
  for (const Value& v : l.expected) pointed.insert(v.agg->fields[1].i);
  EXPECT_GE(pointed.size(), 5u);
  expect_engines_equal_reference(l, {1, 7, 64}, 0, 0);
}

// Functions that return a size they make (`-> f32[m, D]`, m named by no parameter): a gather
// returned from the function that gathers, a decoder returning the rows it grew (tail recursion,
// its own end token), a size per branch (all rows, the first, one more), and an entry whose result
// has such a size.
const char* kMadeSizes = R"(
dim D = 8
dim V = 12
param emb[V]: f32[1, D]
param Wq: f32[D, D]
param Wout: f32[D, V]

def pick(ids: List[int]) -> f32[m, D] { emb[ids] }

def gen(rows: f32[t, D], x: f32[1, D], left: int, toks: List[int]) -> (f32[m, D], List[int]) {
  let h = softmax(x @ Wq @ transpose(rows)) @ rows + x;
  let tok = argmax(h @ Wout);
  let grown = concat(rows, h, axis=0);
  if left == 1 || tok == 0 { (grown, reverse(Cons(tok, toks))) }
  else { gen(grown, emb[tok], left - 1, Cons(tok, toks)) }
}

def head(x: f32[n, D], k: int) -> f32[m, D] {
  if k == 0 { x } else if k == 1 { slice(x, 0, 1, axis=0) } else { concat(x, slice(x, 0, 1, axis=0), axis=0) }
}

def main(x: (List[int], int)) -> (f32[g, D], f32[1, g], List[int], f32[1, D]) {
  let (prompt, budget) = x;
  let p = pick(prompt);
  let (rows, toks) = gen(p, slice(p, 0, 1, axis=0), budget, Nil);
  let kept = head(rows, (length(toks) + budget) % 3);
  (kept, softmax(transpose(sum(kept, axis=1))), toks, sum(rows, axis=0))
}
)";

TEST(Ragged, FunctionsReturnSizesTheyMakeOnEveryEngine) {
  const std::vector<nlohmann::json> lists = id_lists(40, 13, 12, 8);
  const Loaded l = load_with("made.acr", kMadeSizes, 5, with_numbers(lists, [](size_t i) { return int64_t(1 + i % 6); }));
  // The rows each instance returns, by k = (tokens + budget) % 3: all it grew (its prompt and a
  // row per token), the first, or all and the first again.
  std::set<size_t> tokens, kept;
  for (size_t i = 0; i < l.inputs.size(); ++i) {
    const Value& out = l.expected[i];
    size_t n = 0;
    for (const Value* v = &out.agg->fields[2]; v->agg && !v->agg->fields.empty(); v = &v->agg->fields.back()) ++n;
    const size_t budget = 1 + i % 6, k = (n + budget) % 3, grown = lists[i].size() + n;
    const auto rows = static_cast<int64_t>(k == 0 ? grown : k == 1 ? 1 : grown + 1);
    ASSERT_EQ(out.agg->fields[0].tensor->shape, (std::vector<int64_t>{rows, 8})) << i;
    ASSERT_EQ(out.agg->fields[1].tensor->shape, (std::vector<int64_t>{1, rows})) << i;
    tokens.insert(n);
    kept.insert(static_cast<size_t>(rows));
  }
  EXPECT_GE(tokens.size(), 3u);  // instances stopped at different steps
  EXPECT_GE(kept.size(), 8u);
  expect_engines_equal_reference(l, {1, 7, 40}, 1e-5f, 1e-6f);
}

// ---- Open runs (continuous batching, Engine::run_open) ----

// A feed whose instances arrive in a random order at random rounds: at each take a random number
// of the next ones (at least one when nothing runs). It records each instance's answer and the take
// at which it came, and cancels the instances `cancel` names one take after they arrived.
class ArrivalFeed : public InstanceFeed {
 public:
  ArrivalFeed(const std::vector<Value>& inputs, unsigned seed, size_t most_at_once)
      : inputs_(inputs), rng_(seed), most_(most_at_once), answers_(inputs.size()) {
    for (size_t i = 0; i < inputs.size(); ++i) order_.push_back(i);
    std::shuffle(order_.begin(), order_.end(), rng_);
  }
  std::function<bool(size_t)> cancel = [](size_t) { return false; };

  struct Answer {
    enum Kind { None, Finished, Failed, Stopped } kind = None;
    Value output;
    std::string message;
    int arrived = -1, answered = -1;  // takes
    int times = 0;                    // answers given: must be one
    std::vector<int64_t> emits;       // what its program emitted, in order
  };
  const std::vector<Answer>& answers() const { return answers_; }
  int takes() const { return takes_; }
  size_t most_joined() const { return most_joined_; }

  std::vector<Joining> take(bool idle, size_t room) override {
    ++takes_;
    size_t n = std::uniform_int_distribution<size_t>(0, most_)(rng_);
    if (idle && n == 0) n = 1;
    n = std::min({n, room, order_.size() - next_});
    std::vector<Joining> out;
    for (size_t k = 0; k < n; ++k) {
      const size_t i = order_[next_++];
      answers_[i].arrived = takes_;
      out.push_back({i, inputs_[i], i});
    }
    most_joined_ = std::max(most_joined_, n);
    return out;
  }
  bool cancelled(size_t ticket) override { return cancel(ticket) && takes_ > answers_[ticket].arrived; }
  void finished(size_t ticket, Value output) override { answer(ticket, Answer::Finished).output = std::move(output); }
  void failed(size_t ticket, const std::string& message, bool) override {
    answer(ticket, Answer::Failed).message = message;
  }
  void stopped(size_t ticket) override { answer(ticket, Answer::Stopped); }
  void emitted(size_t ticket, const Value& v) override {
    EXPECT_EQ(answers_[ticket].times, 0) << "an emit after the answer";
    answers_[ticket].emits.push_back(v.i);
  }

 private:
  Answer& answer(size_t ticket, Answer::Kind kind) {
    Answer& a = answers_[ticket];
    a.kind = kind;
    a.answered = takes_;
    ++a.times;
    return a;
  }
  const std::vector<Value>& inputs_;
  std::mt19937 rng_;
  size_t most_;
  std::vector<size_t> order_;
  size_t next_ = 0;
  int takes_ = 0;
  size_t most_joined_ = 0;
  std::vector<Answer> answers_;
};

// Every engine (the reference's one at a time too), both schedulers, 1 and 2 threads, three arrival
// orders: each instance answered once, with the output of a whole-batch run, and instances leave
// as they finish (some are answered before others have arrived). The growing decoder reads a
// tensor per step (an instance joins between steps); the ragged model forks its calls.
TEST(Ragged, AnOpenRunAnswersAsARunDoesOverRandomArrivalOrders) {
  const Loaded grow = load_with_ids("grow.acr", kGrowing, 4, 70, 20, 24, 5);
  for (const Loaded* l : {&grow, &loaded()})
    for (Scheduler scheduler : {Scheduler::InlineDepth, Scheduler::Agenda})
      for (int threads : {1, 2}) {
        std::vector<std::unique_ptr<Engine>> engines = batched_engines(l->module, l->params, scheduler, threads);
        engines.push_back(std::make_unique<ReferenceEngine>(l->module, l->params));
        for (auto& engine : engines)
          for (unsigned seed : {1u, 2u, 3u}) {
            ArrivalFeed feed(l->inputs, seed, 6);
            engine->run_open(feed, 32);
            int early = 0;
            for (size_t i = 0; i < l->inputs.size(); ++i) {
              const auto& a = feed.answers()[i];
              const std::string what = fmt::format("{} {} threads {} seed {} instance {}", engine->name(),
                                                   scheduler_name(scheduler), threads, seed, i);
              ASSERT_EQ(a.times, 1) << what;
              ASSERT_EQ(a.kind, ArrivalFeed::Answer::Finished) << what << ": " << a.message;
              expect_values_close(a.output, l->expected[i], what, 1e-4f, 1e-5f);
              early += a.answered < feed.takes() - 1 ? 1 : 0;
              if (l == &grow && engine->name() != std::string("reference")) {
                // The decoder emits each token as it picks it: the tokens of its output, in order.
                std::vector<int64_t> tokens;
                for (const Value* t = &a.output.agg->fields[0]; !t->agg->fields.empty(); t = &t->agg->fields[1])
                  tokens.push_back(t->agg->fields[0].i);
                EXPECT_EQ(a.emits, tokens) << what;
              }
            }
            EXPECT_GE(early, static_cast<int>(l->inputs.size()) / 2) << engine->name();
          }
      }
}

// Cancelling half of a running batch: those instances stop where they wait (each decodes at least
// three steps, so all are still running a take after they arrived), the other half's answers are
// unchanged; and an instance over its step budget fails alone, with the message the reference
// engine gives it, on every engine.
TEST(Ragged, AnOpenRunStopsTheInstancesCancelledAndTheOnesOverBudgetAlone) {
  const Loaded l = load_with_ids("grow.acr", kGrowing, 4, 70, 20, 24, 5);
  for (auto& engine : batched_engines(l.module, l.params, Scheduler::InlineDepth, 1)) {
    ArrivalFeed feed(l.inputs, 7, 9);
    feed.cancel = [](size_t i) { return i % 2 == 1; };
    const RunStats stats = engine->run_open(feed, 64);
    // Each stopped where it waited for a tensor: that node, pending, did not run.
    EXPECT_GE(stats.dropped_nodes, static_cast<int64_t>(l.inputs.size() / 2)) << engine->name();
    for (size_t i = 0; i < l.inputs.size(); ++i) {
      const auto& a = feed.answers()[i];
      const std::string what = fmt::format("{} instance {}", engine->name(), i);
      ASSERT_EQ(a.times, 1) << what;
      if (i % 2 == 1) {
        EXPECT_EQ(a.kind, ArrivalFeed::Answer::Stopped) << what;
      } else {
        ASSERT_EQ(a.kind, ArrivalFeed::Answer::Finished) << what << ": " << a.message;
        expect_values_close(a.output, l.expected[i], what, 1e-4f, 1e-5f);
      }
    }
  }
  std::vector<std::string> want(l.inputs.size());
  ReferenceEngine reference(l.module, l.params);
  reference.limit_steps(25);
  size_t over = 0;
  for (size_t i = 0; i < l.inputs.size(); ++i) {
    try {
      reference.run({l.inputs[i]}, "main", i);
    } catch (const UserError& e) {
      want[i] = e.what();
      ++over;
    }
  }
  ASSERT_GT(over, 5u) << want[0];
  ASSERT_LT(over, l.inputs.size() - 5) << want[0];
  for (auto& engine : batched_engines(l.module, l.params, Scheduler::InlineDepth, 2)) {
    engine->limit_steps(25);
    ArrivalFeed feed(l.inputs, 8, 12);
    engine->run_open(feed, 64);
    for (size_t i = 0; i < l.inputs.size(); ++i) {
      const auto& a = feed.answers()[i];
      const std::string what = fmt::format("{} instance {}", engine->name(), i);
      ASSERT_EQ(a.times, 1) << what;
      if (!want[i].empty()) {
        EXPECT_EQ(a.kind, ArrivalFeed::Answer::Failed) << what;
        EXPECT_EQ(a.message, want[i]) << what;
      } else {
        ASSERT_EQ(a.kind, ArrivalFeed::Answer::Finished) << what << ": " << a.message;
        expect_values_close(a.output, l.expected[i], what, 1e-4f, 1e-5f);
      }
    }
  }
}

// A decoder of `left` steps whatever tokens it picks, D 64: long enough to be stopped mid-way.
const char* kFixedSteps = R"(
dim D = 64
dim V = 24
param emb[V]: f32[1, D]
param cls: f32[1, D]
param Wq: f32[D, D]
param Wkv: f32[D, 2 * D]
param Wout: f32[D, V]

def step(k: f32[t, D], v: f32[t, D], tok: int, left: int, out: List[int]) -> (List[int], f32[1, D]) {
  let x = emb[tok];
  let (nk, nv) = split(x @ Wkv, 2);
  let k2 = concat(k, nk, axis=0);
  let v2: f32[t + 1, D] = concat(v, nv, axis=0);
  let h = softmax((x @ Wq) @ transpose(k2) * 0.125) @ v2 + x;
  let next = argmax(h @ Wout);
  if left == 1 { (reverse(Cons(next, out)), mean(v2, axis=0)) }
  else { step(k2, v2, next, left - 1, Cons(next, out)) }
}

def main(x: (List[int], int)) -> (List[int], f32[1, D]) {
  let (prompt, left) = x;
  let kv = concat(cls, emb[prompt], axis=0) @ Wkv;
  let (k, v) = split(kv, 2);
  step(k, v, 1, left, Nil)
}
)";

// One instance at each take, in order, while there are any; instance i is cancelled `after`
// takes after it arrived when cancel(i) says so.
class StaggeredFeed : public InstanceFeed {
 public:
  StaggeredFeed(const std::vector<Value>& inputs, int after, std::function<bool(size_t)> cancel)
      : inputs_(inputs), after_(after), cancel_(std::move(cancel)), arrived_(inputs.size(), -1),
        answers_(inputs.size()) {}
  std::vector<Joining> take(bool, size_t room) override {
    ++takes_;
    if (next_ == inputs_.size() || room == 0) return {};
    arrived_[next_] = takes_;
    ++next_;
    return {{next_ - 1, inputs_[next_ - 1], next_ - 1}};
  }
  bool cancelled(size_t i) override { return cancel_(i) && takes_ >= arrived_[i] + after_; }
  void finished(size_t i, Value) override { answers_[i] += "finished"; }
  void failed(size_t i, const std::string& message, bool) override { answers_[i] += message; }
  void stopped(size_t i) override { answers_[i] += "stopped"; }
  const std::vector<std::string>& answers() const { return answers_; }

 private:
  const std::vector<Value>& inputs_;
  int after_;
  std::function<bool(size_t)> cancel_;
  std::vector<int> arrived_;
  std::vector<std::string> answers_;
  size_t next_ = 0;
  int takes_ = 0;
};

// A stopped instance's memory goes as soon as it stops, as a finished one's does: decoders of 400
// steps each cancelled 30 takes (decode steps) after it came, one coming at every take, hold no
// more memory at their peak than decoders of 30 steps that finish there (0.69 against 1.09 MB;
// were the stopped ones' caches kept until the run ends, 4.19 MB), and the nodes they were
// waiting for do not run.
TEST(Ragged, AnOpenRunReleasesWhatAStoppedInstanceHeld) {
  unsetenv("ACROBAT_POISON_RELEASED");  // the peak measured is memory really in use
  std::vector<nlohmann::json> prompts = id_lists(120, 9, 24, 11);
  const Loaded finishing = load_with("steps.acr", kFixedSteps, 2, with_numbers(prompts, [](size_t) { return int64_t{30}; }));
  const Loaded stopping = load_with("steps.acr", kFixedSteps, 2, with_numbers(prompts, [](size_t) { return int64_t{400}; }));
  for (auto& engine : batched_engines(finishing.module, finishing.params, Scheduler::InlineDepth, 1)) {
    StaggeredFeed ends(finishing.inputs, 1000, [](size_t) { return false; });
    const RunStats ended = engine->run_open(ends, 1000);
    StaggeredFeed stops(stopping.inputs, 30, [](size_t) { return true; });
    const RunStats stopped = engine->run_open(stops, 1000);
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_EQ(ends.answers()[i], "finished") << engine->name() << " instance " << i;
      ASSERT_EQ(stops.answers()[i], "stopped") << engine->name() << " instance " << i;
    }
    EXPECT_EQ(ended.dropped_nodes, 0) << engine->name();
    EXPECT_GE(stopped.dropped_nodes, static_cast<int64_t>(prompts.size())) << engine->name();
    EXPECT_LT(stopped.peak_bytes, ended.peak_bytes * 3 / 2) << engine->name() << ": " << ended.peak_bytes;
  }
}

// A decoder that emits a first token from its prompt's own block before its steps (a prefill and
// its first output, as gpt.acr's), then a token per step.
const char* kFirstThenSteps = R"(
dim D = 16
dim V = 24
param emb[V]: f32[1, D]
param cls: f32[1, D]
param Wq: f32[D, D]
param Wout: f32[D, V]
param Wfirst: f32[D, V]

def step(k: f32[t, D], tok: int, left: int, out: List[int]) -> (List[int], f32[1, D]) {
  let x = emb[tok];
  let k2 = concat(k, x @ Wq, axis=0);
  let next = emit(argmax(softmax(x @ transpose(k2)) @ k2 @ Wout));
  if left == 1 { (reverse(Cons(next, out)), mean(k2, axis=0)) }
  else { step(k2, next, left - 1, Cons(next, out)) }
}

def main(x: (List[int], int)) -> (List[int], f32[1, D]) {
  let (prompt, left) = x;
  let h = concat(cls, emb[prompt], axis=0);
  let first = emit(argmax(mean(h, axis=0) @ Wfirst));
  step(h @ Wq, first, left, Cons(first, Nil))
}
)";

// Instances arriving at given takes, some of them streamed; every emit numbered in the order made.
class ScriptedFeed : public InstanceFeed {
 public:
  struct Arrival {
    size_t instance;
    int take;
    bool streams;
  };
  ScriptedFeed(const std::vector<Value>& inputs, std::vector<Arrival> arrivals)
      : inputs_(inputs), arrivals_(std::move(arrivals)), answers_(inputs.size()) {}
  struct Answer {
    bool finished = false;
    Value output;
    std::string message;
    std::vector<std::pair<int64_t, size_t>> emits;  // (token, its number among every emit)
  };
  const std::vector<Answer>& answers() const { return answers_; }
  // The number the next emit had when take `t` was made (every emit's after the last take).
  size_t emits_at_take(int t) const {
    return static_cast<size_t>(t) < emits_at_take_.size() ? emits_at_take_[static_cast<size_t>(t)] : SIZE_MAX;
  }

  std::vector<Joining> take(bool idle, size_t) override {
    ++takes_;
    // Idle with nothing due now: the next arrivals come at once.
    if (idle && next_ < arrivals_.size() && arrivals_[next_].take > takes_) takes_ = arrivals_[next_].take;
    while (emits_at_take_.size() <= static_cast<size_t>(takes_)) emits_at_take_.push_back(emits_);
    std::vector<Joining> out;
    for (; next_ < arrivals_.size() && arrivals_[next_].take <= takes_; ++next_) {
      const Arrival& a = arrivals_[next_];
      out.push_back({a.instance, inputs_[a.instance], a.instance, a.streams});
    }
    return out;
  }
  bool cancelled(size_t) override { return false; }
  void finished(size_t ticket, Value output) override {
    answers_[ticket].finished = true;
    answers_[ticket].output = std::move(output);
  }
  void failed(size_t ticket, const std::string& message, bool) override { answers_[ticket].message = message; }
  void stopped(size_t ticket) override { answers_[ticket].message = "stopped"; }
  void emitted(size_t ticket, const Value& v) override { answers_[ticket].emits.push_back({v.i, emits_++}); }

 private:
  const std::vector<Value>& inputs_;
  std::vector<Arrival> arrivals_;
  size_t next_ = 0;
  int takes_ = 0;
  size_t emits_ = 0;
  std::vector<size_t> emits_at_take_;  // by take; [0]: before the first
  std::vector<Answer> answers_;
};

// Ten long decodes run; streamed instances arrive one every third round. Each streamed instance's
// first token comes from a flush of its own prefill: between the flush that follows its arrival
// and its first emit no running decode emits a token (they do without streaming: their steps run
// in that flush too). Every output and every emit equal to a whole-batch run, on both engines.
TEST(Ragged, AnOpenRunComputesAStreamedInstancesFirstOutputAhead) {
  const std::vector<nlohmann::json> prompts = id_lists(34, 11, 24, 9);
  std::vector<nlohmann::json> inputs;
  for (size_t i = 0; i < prompts.size(); ++i)
    inputs.push_back(nlohmann::json::array({prompts[i], i < 10 ? 150 : 1 + int(i % 4)}));
  const Loaded l = load_with("first.acr", kFirstThenSteps, 3, inputs);
  for (bool streams : {true, false}) {
    std::vector<ScriptedFeed::Arrival> arrivals;
    for (size_t i = 0; i < 10; ++i) arrivals.push_back({i, 1, false});
    for (size_t i = 10; i < prompts.size(); ++i) arrivals.push_back({i, 4 + 3 * int(i - 10), streams});
    for (auto& engine : batched_engines(l.module, l.params, Scheduler::InlineDepth, 1)) {
      ScriptedFeed feed(l.inputs, arrivals);
      engine->run_open(feed, 64);
      size_t held = 0;  // streamed instances whose first emit came after a running decode's
      for (size_t i = 0; i < l.inputs.size(); ++i) {
        const auto& a = feed.answers()[i];
        const std::string what = fmt::format("{} streams {} instance {}", engine->name(), streams, i);
        ASSERT_TRUE(a.finished) << what << ": " << a.message;
        expect_values_close(a.output, l.expected[i], what, 1e-4f, 1e-5f);
        std::vector<int64_t> tokens, emitted;
        for (const Value* t = &a.output.agg->fields[0]; !t->agg->fields.empty(); t = &t->agg->fields[1])
          tokens.push_back(t->agg->fields[0].i);
        for (const auto& e : a.emits) emitted.push_back(e.first);
        EXPECT_EQ(emitted, tokens) << what;
        if (i < 10) continue;
        const int arrived = arrivals[i].take;
        const size_t from = feed.emits_at_take(arrived + 1), first = a.emits.at(0).second;
        EXPECT_LT(first, feed.emits_at_take(arrived + 2)) << what << ": the first token a round after it arrived";
        bool before = false;
        for (size_t j = 0; j < 10; ++j)
          for (const auto& e : feed.answers()[j].emits) before = before || (e.second >= from && e.second < first);
        held += before ? 1 : 0;
      }
      if (streams)
        EXPECT_EQ(held, 0u) << engine->name();
      else
        EXPECT_EQ(held, l.inputs.size() - 10) << engine->name() << ": the test cannot tell";
    }
  }
}

TEST(Ragged, ExplainShowsTheRaggedPlan) {
  const std::string text = analysis::explain(*loaded().module);
  EXPECT_NE(text.find("gemm-per-instance"), std::string::npos) << text;
  EXPECT_NE(text.find("view (transposed)"), std::string::npos) << text;
  EXPECT_NE(text.find("check per instance: n <= 64"), std::string::npos) << text;
}

}  // namespace
}  // namespace acrobat
