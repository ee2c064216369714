// Batched execution equals unbatched execution: every model, every scheduler, batch sizes 1, 7, 8,
// 64 and the whole SST test set, against the reference engine on the same (seeded) parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "compiler/pipeline.h"
#include "engines/batched_engine.h"
#include "engines/inputs.h"
#include "engines/reference_engine.h"
#include "expect_values.h"
#include "loaded_model.h"

namespace acrobat {
namespace {

const std::string kSource = ACROBAT_SOURCE_DIR;

struct ModelCase {
  const char* model;
  const char* input_kind;
  int64_t hidden;
};

void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.model << " H=" << c.hidden; }

// Loads a model on the SST test set (kSstTrees of it) and runs the reference engine once.
const LoadedModel& load(const ModelCase& c) {
  static std::map<std::string, LoadedModel> cache;
  std::string key = std::string(c.model) + std::to_string(c.hidden);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  return cache[key] = load_model(kSource + "/models/" + c.model + ".acr", {{"H", c.hidden}}, 7,
                                 [&](const Type& type) {
                                   return load_inputs(parse_input_spec(std::string(c.input_kind) + ":" +
                                                                       kSource + "/data/sst/test.txt"),
                                                      type, kSource + "/data/sst/vocab.txt", kSstTrees);
                                 });
}

void expect_close(const Value& actual, const Value& expected, size_t instance) {
  expect_values_close(actual, expected, "instance " + std::to_string(instance), 1e-5f);
}

using Param = std::tuple<ModelCase, Scheduler>;

}  // namespace

void PrintTo(Scheduler s, std::ostream* os) { *os << scheduler_name(s); }

namespace {

class BatchedEqualsReference : public ::testing::TestWithParam<Param> {};

TEST_P(BatchedEqualsReference, AtEveryBatchSize) {
  const auto& [model, scheduler] = GetParam();
  const LoadedModel& l = load(model);
  ASSERT_EQ(l.inputs.size(), kSstTrees == 0 ? 2210u : kSstTrees);
  BatchedEngine engine(l.module, l.params, scheduler);
  for (size_t batch : {size_t{1}, size_t{7}, size_t{8}, size_t{64}, l.inputs.size()}) {
    // Batch size 1 and 7 on a prefix keep the test fast; 8, 64 and the whole set cover everything.
    size_t count = batch < 8 ? 64 : l.inputs.size();
    for (size_t begin = 0; begin < count; begin += batch) {
      size_t end = std::min(count, begin + batch);
      std::vector<Value> chunk(l.inputs.begin() + begin, l.inputs.begin() + end);
      RunResult r = engine.run(chunk);
      ASSERT_EQ(r.outputs.size(), chunk.size());
      for (size_t i = 0; i < chunk.size(); ++i) {
        SCOPED_TRACE("batch size " + std::to_string(batch));
        expect_close(r.outputs[i], l.expected[begin + i], begin + i);
      }
      EXPECT_EQ(r.stats.instances, static_cast<int64_t>(chunk.size()));
      EXPECT_GT(r.stats.nodes, 0);
      EXPECT_LE(r.stats.batches, r.stats.nodes);
    }
  }
}

std::string name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [model, scheduler] = info.param;
  std::string s = std::string(model.model) + "_H" + std::to_string(model.hidden) + "_" +
                  scheduler_name(scheduler);
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Models, BatchedEqualsReference,
    ::testing::Combine(::testing::Values(ModelCase{"treelstm", "sst", 256},
                                         ModelCase{"mvrnn", "sst", 64},
                                         ModelCase{"birnn", "sst-tokens", 256}),
                       ::testing::Values(Scheduler::InlineDepth, Scheduler::Depth,
                                         Scheduler::Agenda)),
    name);

// Inline depth puts every tree level in one batch: on SST test trees with batch 64 the mean batch
// is far above one instance's worth.
TEST(BatchedEngine, BatchesAcrossInstances) {
  const LoadedModel& l = load(ModelCase{"treelstm", "sst", 256});
  BatchedEngine engine(l.module, l.params);
  std::vector<Value> chunk(l.inputs.begin(), l.inputs.begin() + 64);
  RunResult r = engine.run(chunk);
  EXPECT_GT(r.stats.mean_batch_size(), 32.0);
  EXPECT_LT(r.stats.kernel_calls * 20, r.stats.tensor_ops);
  EXPECT_GT(r.stats.peak_bytes, 0);
}

// A user error in one instance fails the whole run, names the instance, and returns nothing.
TEST(BatchedEngine, ErrorNamesTheInstance) {
  const LoadedModel& l = load(ModelCase{"treelstm", "sst", 256});
  std::vector<Value> chunk(l.inputs.begin(), l.inputs.begin() + 8);
  // A word id outside the embedding table in instance 5.
  const AdtDef* tree = l.module->source->find_adt("Tree");
  chunk[5] = Value::adt(tree->ctors[0].get(), {Value::of_int(1'000'000)});
  BatchedEngine engine(l.module, l.params);
  try {
    engine.run(chunk);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("instance 5: index 1000000 is out of range for param 'emb'"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("treelstm.acr:"), std::string::npos) << msg;
  }
}

// An entry function the model lacks is named with the model file on every engine, through the
// library as through the command line.
TEST(Engines, UnknownEntryNamesTheModelFile) {
  const LoadedModel& l = load(ModelCase{"treelstm", "sst", 256});
  std::vector<Value> part(l.inputs.begin(), l.inputs.begin() + 3);
  BatchedEngine batched(l.module, l.params, Scheduler::InlineDepth, 1);
  ReferenceEngine reference(l.module, l.params);
  for (Engine* engine : {static_cast<Engine*>(&batched), static_cast<Engine*>(&reference)}) {
    try {
      engine->run_batches(part, 64, "nope");
      FAIL() << "expected a UserError";
    } catch (const UserError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("treelstm.acr"), std::string::npos) << msg;
      EXPECT_NE(msg.find("no function 'nope'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("its functions: "), std::string::npos) << msg;
    }
  }
}

// Kernels split across two threads compute what one thread computes (every model, including
// MV-RNN's grouped per-node matrices).
TEST(BatchedEngine, TwoThreadsGiveTheOneThreadOutputs) {
  for (const ModelCase& c : {ModelCase{"treelstm", "sst", 256}, ModelCase{"mvrnn", "sst", 64},
                             ModelCase{"birnn", "sst-tokens", 256}}) {
    const LoadedModel& l = load(c);
    std::vector<Value> part(l.inputs.begin(), l.inputs.begin() + 512);
    BatchedEngine one(l.module, l.params, Scheduler::InlineDepth, 1);
    BatchedEngine two(l.module, l.params, Scheduler::InlineDepth, 2);
    RunResult a = one.run_batches(part, 64);
    RunResult b = two.run_batches(part, 64);
    for (size_t i = 0; i < part.size(); ++i) {
      SCOPED_TRACE(c.model);
      expect_close(b.outputs[i], a.outputs[i], i);
      expect_close(b.outputs[i], l.expected[i], i);
    }
    EXPECT_EQ(a.stats.batches, b.stats.batches);
  }
}

}  // namespace
}  // namespace acrobat
