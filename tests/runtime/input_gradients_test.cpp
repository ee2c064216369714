// Gradients with respect to the instances' tensors (GradWrt::ParamsAndInputs): the batched
// backward (both batched engines) equals the reference engine's tape, and the reference gradient
// equals central finite differences of the summed loss. The models give the tensors as a ragged
// sequence with its label (models/encoder.acr's loss), as the leaves of a tree, and as a list of
// rows beside a per-instance matrix and an int choosing a param's matrix; a tensor given at
// several places has the gradient of all its uses at each.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "compiler/pipeline.h"
#include "engines/aot_engine.h"
#include "engines/batched_engine.h"
#include "engines/inputs.h"
#include "engines/reference_engine.h"
#include "gradients_on_threads.h"
#include "lang/frontend.h"

namespace acrobat {
namespace {

const std::string kCache = ACROBAT_TEST_CACHE_DIR;

// A tree whose leaves are vectors the instance gives.
const char* kVectorTree = R"(dim H = 4
param W: f32[2 * H, H]
param b: f32[1, H]
param out: f32[H, 3]
type VTree = VLeaf(f32[1, H]) | VNode(VTree, VTree)
def enc(t: VTree) -> f32[1, H] {
  match t {
    VLeaf(x) => tanh(x),
    VNode(l, r) => tanh(concat(enc(l), enc(r)) @ W + b),
  }
}
def loss(t: VTree) -> f32[1, 1] { -sum(log_softmax(enc(t) @ out)) }
)";

// A recurrence over a list of rows through a matrix of the instance's own, ended by the matrix of
// an indexed param the instance picks.
const char* kSequence = R"(dim H = 4
param W[3]: f32[H, H]
param U: f32[H, H]
def run(h: f32[1, H], xs: List[f32[1, H]], M: f32[H, H]) -> f32[1, H] {
  match xs {
    Nil => h,
    Cons(x, rest) => run(tanh(h @ U + x @ M), rest, M),
  }
}
def loss(i: (int, f32[H, H], List[f32[1, H]])) -> f32[1, 1] {
  let (k, M, xs) = i;
  let h = run(zeros(1, H), xs, M);
  sum(h @ W[k] * h)
}
)";

// models/encoder.acr (small): its loss is the cross-entropy of a classifier of the mean of the
// layer's rows against a one-hot label, on pairs (y, x).
std::string encoder_text() {
  std::ifstream f(std::string(ACROBAT_SOURCE_DIR) + "/models/encoder.acr");
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

std::shared_ptr<const ir::Module> compile(const std::string& text, const std::map<std::string, int64_t>& dims = {}) {
  return compile_checked(parse_model_text("input_grad.acr", text, dims), CompileOptions{});
}

const Type& loss_input(const ir::Module& m) {
  const ir::Function& f = m.functions[m.find_function("loss")];
  return f.vars[f.params[0]].type;
}

nlohmann::json random_rows(std::mt19937_64& rng, int64_t n, int64_t width) {
  std::uniform_real_distribution<float> x(-1, 1);
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t r = 0; r < n; ++r) {
    nlohmann::json row = nlohmann::json::array();
    for (int64_t c = 0; c < width; ++c) row.push_back(x(rng));
    rows.push_back(row);
  }
  return rows;
}

nlohmann::json random_vtree(std::mt19937_64& rng, int leaves) {
  using nlohmann::json;
  if (leaves == 1) return json::object({{"VLeaf", json::array({random_rows(rng, 1, 4)})}});
  const int left = 1 + static_cast<int>(rng() % static_cast<uint64_t>(leaves - 1));
  return json::object({{"VNode", json::array({random_vtree(rng, left), random_vtree(rng, leaves - left)})}});
}

// `n` instances of the model's loss entry, each from make(rng, i) as JSON.
template <class Make>
std::vector<Value> instances(const ir::Module& m, size_t n, Make&& make) {
  std::mt19937_64 rng(11);
  std::vector<Value> out;
  for (size_t i = 0; i < n; ++i) out.push_back(value_from_json(make(rng, i), loss_input(m), SourceLoc{"gen", 1, 1}));
  return out;
}

std::vector<Value> vtrees(const ir::Module& m, size_t n) {
  return instances(m, n, [](std::mt19937_64& rng, size_t i) { return random_vtree(rng, 1 + int(i % 7)); });
}

std::vector<Value> sequences(const ir::Module& m, size_t n) {
  return instances(m, n, [](std::mt19937_64& rng, size_t i) {
    nlohmann::json xs = nlohmann::json::array();
    for (size_t k = 0; k <= i % 4; ++k) xs.push_back(random_rows(rng, 1, 4));
    return nlohmann::json::array({static_cast<int>(i % 3), random_rows(rng, 4, 4), xs});
  });
}

// Pairs (y, x) of a one-hot label of 3 classes and 1 + (i * stride) % max_rows rows of `width`
// (instance i; by default 1 to 5 rows).
std::vector<Value> labelled_rows(const ir::Module& m, size_t n, int64_t width, int64_t max_rows = 5,
                                 int64_t stride = 1) {
  return instances(m, n, [=](std::mt19937_64& rng, size_t i) {
    nlohmann::json y = {{0.0, 0.0, 0.0}};
    y[0][i % 3] = 1.0;
    const int64_t rows = 1 + int64_t(i) * stride % max_rows;
    return nlohmann::json{y, {{"shape", {rows, width}}, {"data", random_rows(rng, 1, rows * width)[0]}}};
  });
}

// Input gradients equal to a relative 1e-4 of the largest entry of each instance's, shaped as the
// instances' tensors; the params' gradients as in gradients_test.
void expect_same_input_grads(const GradResult& a, const GradResult& e, const std::vector<Value>& inputs,
                             const std::string& what) {
  ASSERT_EQ(a.input_grads.size(), inputs.size()) << what;
  ASSERT_EQ(e.input_grads.size(), inputs.size()) << what;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto tensors = instance_tensors(inputs[i]);
    ASSERT_EQ(a.input_grads[i].size(), tensors.size()) << what << ", instance " << i;
    ASSERT_EQ(e.input_grads[i].size(), tensors.size()) << what << ", instance " << i;
    float scale = 0;
    for (const Tensor& g : e.input_grads[i])
      for (int64_t j = 0; j < g.size(); ++j) scale = std::max(scale, std::abs(g.data[j]));
    EXPECT_GT(scale, 0.0f) << what << ": the gradient reaches instance " << i;
    for (size_t t = 0; t < tensors.size(); ++t) {
      ASSERT_EQ(a.input_grads[i][t].shape, tensors[t]->shape);
      ASSERT_EQ(e.input_grads[i][t].shape, tensors[t]->shape);
      for (int64_t j = 0; j < tensors[t]->size(); ++j)
        ASSERT_NEAR(a.input_grads[i][t].data[j], e.input_grads[i][t].data[j], 1e-4f * (scale + 1e-6f))
            << what << ", instance " << i << ", tensor " << t << ", entry " << j;
    }
  }
  ASSERT_EQ(a.grads.size(), e.grads.size());
  for (size_t k = 0; k < e.grads.size(); ++k) {
    float scale = 0;
    for (int64_t j = 0; j < e.grads[k].size(); ++j) scale = std::max(scale, std::abs(e.grads[k].data[j]));
    for (int64_t j = 0; j < e.grads[k].size(); ++j)
      ASSERT_NEAR(a.grads[k].data[j], e.grads[k].data[j], 1e-4f * (scale + 1e-6f)) << what << ", param " << k;
  }
}

// Both batched engines (1 and 2 threads) against the reference engine; the params' gradients are
// those of a gradient of the params alone.
void batched_equals_reference(const std::shared_ptr<const ir::Module>& module, const std::vector<Value>& inputs) {
  auto params = std::make_shared<ParamStore>(init_params(*module, 5));
  ReferenceEngine reference(module, params);
  const GradResult expected = reference.gradients(inputs, "loss", 0, {}, GradWrt::ParamsAndInputs);
  const GradResult params_only = reference.gradients(inputs);
  EXPECT_TRUE(params_only.input_grads.empty());
  for (size_t k = 0; k < expected.grads.size(); ++k)
    for (int64_t j = 0; j < expected.grads[k].size(); ++j)
      ASSERT_EQ(expected.grads[k].data[j], params_only.grads[k].data[j]);
  for (int threads : {1, 2}) {
    BatchedEngine batched(module, params, Scheduler::InlineDepth, threads);
    expect_same_input_grads(batched.gradients(inputs, "loss", 0, {}, GradWrt::ParamsAndInputs), expected, inputs,
                            "batched");
    AotOptions o;
    o.cache_dir = kCache;
    o.threads = threads;
    AotEngine aot(module, params, o);
    expect_same_input_grads(aot.gradients(inputs, "loss", 0, {}, GradWrt::ParamsAndInputs), expected, inputs, "aot");
  }
}

TEST(InputGradients, BatchedEqualsReferenceOnTensorLeavesOfATree) {
  auto module = compile(kVectorTree);
  for (size_t n : {1, 9, 40}) {
    SCOPED_TRACE("batch of " + std::to_string(n));
    batched_equals_reference(module, vtrees(*module, n));
  }
}

TEST(InputGradients, BatchedEqualsReferenceOnListsOfRowsAndMatrices) {
  auto module = compile(kSequence);
  for (size_t n : {1, 9, 40}) {
    SCOPED_TRACE("batch of " + std::to_string(n));
    batched_equals_reference(module, sequences(*module, n));
  }
}

TEST(InputGradients, BatchedEqualsReferenceOnARaggedEncoder) {
  auto module = compile(encoder_text(), {{"D", 16}, {"NH", 2}, {"FF", 32}});
  for (size_t n : {1, 7}) {
    SCOPED_TRACE("batch of " + std::to_string(n));
    batched_equals_reference(module, labelled_rows(*module, n, 16));
  }
}

// The encoder's gradients on 24 sequences of 1 to 300 rows (3700 in all): the forward runs in
// pieces of about 512 rows, shared between two threads, and W2 [1024, 32]'s gradient in two blocks
// of rows; on 5 sequences of 1 to 150 rows, one piece whose products by W1 [32, 1024] the threads
// share by columns. Each batched engine gives the same bits with 1 and 2 threads.
TEST(InputGradients, TheEncodersGradientsHaveTheSameBitsOnAnyThreads) {
  auto module = compile(encoder_text(), {{"D", 32}, {"NH", 2}, {"FF", 1024}});
  for (const auto& [n, rows] : {std::pair{24, 300}, std::pair{5, 150}}) {
    SCOPED_TRACE(std::to_string(n) + " sequences");
    const std::vector<Value> inputs = labelled_rows(*module, n, 32, rows, 53);
    expect_same_bits(gradients_on_threads(module, std::make_shared<ParamStore>(init_params(*module, 5)), inputs));
  }
}

// The reference gradient of the inputs against central differences of the summed loss (h = 1e-2
// in float, the loss summed in double), on a few entries of every tensor of every instance.
void reference_matches_finite_differences(const std::shared_ptr<const ir::Module>& module,
                                          const std::vector<Value>& inputs) {
  ReferenceEngine engine(module, std::make_shared<ParamStore>(init_params(*module, 5)));
  const GradResult g = engine.gradients(inputs, "loss", 0, {}, GradWrt::ParamsAndInputs);
  auto loss = [&] {
    double total = 0;
    for (const Value& v : engine.run(inputs, "loss").outputs) total += v.tensor->data[0];
    return total;
  };
  std::mt19937_64 rng(9);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto tensors = instance_tensors(inputs[i]);
    for (size_t t = 0; t < tensors.size(); ++t)
      for (int trial = 0; trial < 3; ++trial) {
        const int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(tensors[t]->size()));
        float& x = tensors[t]->data[j];  // moved in place and put back
        const float h = 1e-2f, x0 = x;
        x = x0 + h;
        const double up = loss();
        x = x0 - h;
        const double down = loss();
        x = x0;
        const double numeric = (up - down) / (2 * h);
        EXPECT_NEAR(g.input_grads[i][t].data[j], numeric, 2e-3 + 2e-2 * std::abs(numeric))
            << "instance " << i << ", tensor " << t << ", entry " << j;
      }
  }
}

TEST(InputGradients, ReferenceMatchesFiniteDifferences) {
  for (const char* text : {kVectorTree, kSequence}) {
    auto module = compile(text);
    reference_matches_finite_differences(module, text == kVectorTree ? vtrees(*module, 6) : sequences(*module, 6));
  }
  auto encoder = compile(encoder_text(), {{"D", 16}, {"NH", 2}, {"FF", 32}});
  reference_matches_finite_differences(encoder, labelled_rows(*encoder, 4, 16));
}

// A tensor at several places: the same instance twice in the batch, and one tensor at two leaves
// of a tree. Each place has the gradient of all the tensor's uses: twice that of one use.
TEST(InputGradients, ATensorAtSeveralPlacesHasTheGradientOfAllItsUses) {
  auto module = compile(kVectorTree);
  auto params = std::make_shared<ParamStore>(init_params(*module, 5));
  const std::vector<Value> one = vtrees(*module, 3);
  const std::vector<Value> twice = {one[2], one[0], one[1], one[2]};
  // A tree of two leaves that are one tensor, and the same tree with a copy at its right leaf.
  const AdtDef* vtree = loss_input(*module)->adt;
  const CtorDef* vleaf = vtree->ctors[0].get();
  const CtorDef* vnode = vtree->ctors[1].get();
  ASSERT_EQ(vleaf->name, "VLeaf");
  const auto x = instance_tensors(one[0]);  // a tree of one leaf
  ASSERT_EQ(x.size(), 1u);
  Tensor copy = Tensor::allocate(x[0]->shape);
  std::copy_n(x[0]->data.get(), copy.size(), copy.data.get());
  Value xv;
  xv.kind = Value::Kind::Tensor;
  xv.tensor = x[0];
  const Value shared = Value::adt(vnode, {Value::adt(vleaf, {xv}), Value::adt(vleaf, {xv})});
  const Value copied = Value::adt(vnode, {Value::adt(vleaf, {xv}), Value::adt(vleaf, {Value::of_tensor(std::move(copy))})});

  std::vector<std::unique_ptr<Engine>> engines;
  engines.push_back(std::make_unique<ReferenceEngine>(module, params));
  engines.push_back(std::make_unique<BatchedEngine>(module, params, Scheduler::InlineDepth, 1));
  AotOptions o;
  o.cache_dir = kCache;
  engines.push_back(std::make_unique<AotEngine>(module, params, o));
  for (auto& engine : engines) {
    SCOPED_TRACE(engine->name());
    const GradResult g1 = engine->gradients(one, "loss", 0, {}, GradWrt::ParamsAndInputs);
    const GradResult g2 = engine->gradients(twice, "loss", 0, {}, GradWrt::ParamsAndInputs);
    const auto& a = g1.input_grads[2];
    for (size_t place : {0u, 3u}) {
      ASSERT_EQ(g2.input_grads[place].size(), a.size());
      for (size_t t = 0; t < a.size(); ++t)
        for (int64_t j = 0; j < a[t].size(); ++j)
          EXPECT_NEAR(g2.input_grads[place][t].data[j], 2 * a[t].data[j], 1e-5f * (1 + std::abs(a[t].data[j])));
    }
    // The others are as in a batch without the repeat.
    for (int64_t j = 0; j < g1.input_grads[0][0].size(); ++j)
      EXPECT_NEAR(g2.input_grads[1][0].data[j], g1.input_grads[0][0].data[j], 1e-5f);

    const GradResult s = engine->gradients({shared}, "loss", 0, {}, GradWrt::ParamsAndInputs);
    const GradResult c = engine->gradients({copied}, "loss", 0, {}, GradWrt::ParamsAndInputs);
    ASSERT_EQ(s.input_grads[0].size(), 2u);
    for (int64_t j = 0; j < 4; ++j) {
      const float total = c.input_grads[0][0].data[j] + c.input_grads[0][1].data[j];
      EXPECT_NEAR(s.input_grads[0][0].data[j], total, 1e-5f);
      EXPECT_NEAR(s.input_grads[0][1].data[j], total, 1e-5f);
    }
    EXPECT_NE(c.input_grads[0][0].data[0], c.input_grads[0][1].data[0]);  // the two uses differ
  }
}

// A tensor in a param's memory: its gradient and the param's could not be told apart.
TEST(InputGradients, AnInputInAParamsMemoryIsRefused) {
  auto module = compile(kVectorTree);
  auto params = std::make_shared<ParamStore>(init_params(*module, 5));
  Tensor row;
  row.shape = {1, 4};
  row.data = params->params[1].tensor.data;  // b
  const Value leaf = Value::adt(loss_input(*module)->adt->ctors[0].get(), {Value::of_tensor(std::move(row))});  // VLeaf
  for (int e = 0; e < 2; ++e) {
    std::unique_ptr<Engine> engine;
    if (e == 0)
      engine = std::make_unique<ReferenceEngine>(module, params);
    else
      engine = std::make_unique<BatchedEngine>(module, params, Scheduler::InlineDepth, 1);
    try {
      engine->gradients({leaf}, "loss", 0, {}, GradWrt::ParamsAndInputs);
      ADD_FAILURE() << "no error";
    } catch (const UserError& err) {
      EXPECT_NE(std::string(err.what()).find("lies in the memory of param 'b'"), std::string::npos) << err.what();
    }
    EXPECT_EQ(engine->gradients({leaf}).grads.size(), 3u);  // without input gradients it is an input as any
  }
}

}  // namespace
}  // namespace acrobat
