// Gradients of whole models: the batched backward (ReverseMode, both batched engines) equals the
// reference engine's tape, and the reference gradient equals central finite differences of the
// loss. The models here reach what the SST models do not: per-instance matrices (matmuls by a
// matrix each instance computed), transposes, reductions and concatenation along the first axis,
// leaves that are param rows themselves, shared constants, and decisions taken from tensor values
// (fixed by the forward run, not differentiated). tests/reference/check_grad.py checks the SST
// models against PyTorch autograd.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "compiler/pipeline.h"
#include "lang/frontend.h"
#include "engines/aot_engine.h"
#include "engines/batched_engine.h"
#include "engines/inputs.h"
#include "engines/reference_engine.h"
#include "gradients_on_threads.h"

namespace acrobat {
namespace {

const std::string kCache = ACROBAT_TEST_CACHE_DIR;

// Per-instance matrices, transposes, layer norm, reductions and concatenation along axis 0.
const char* kMatrixTree = R"(dim H = 4
param emb[12]: f32[1, H]
param mats[12]: f32[H, H]
param W: f32[2 * H, H]
param b: f32[1, H]
param WM: f32[H, 2 * H]
param g: f32[1, H]
param bt: f32[H]
param out: f32[H, 3]
def enc(t: Tree) -> (f32[1, H], f32[H, H]) {
  match t {
    Leaf(w) => (emb[w], mats[w]),
    Node(l, r) => {
      let (a, A) = enc(l);
      let (c, C) = enc(r);
      let p = tanh(concat(a @ C, c @ A) @ W + b);
      let P = WM @ concat(A, transpose(C), axis=0);
      (layer_norm(p, g, bt), P)
    },
  }
}
def loss(t: Tree) -> f32[1, 1] {
  let (p, P) = enc(t);
  let q = sum(P, axis=0) / (ones(1, H) + exp(mean(P, axis=0)));
  let z = log_softmax(relu(p) @ out + max(P, axis=0) @ out);
  sum(sigmoid(q)) - sum(z * softmax(q @ out))
}
)";

// A loop that stops when a classifier of its state says so (argmax: a decision from a tensor).
const char* kEarlyExit = R"(dim H = 4
param emb[12]: f32[1, H]
param W: f32[H, H]
param v: f32[H, 2]
def go(x: f32[1, H], n: int, acc: f32[1, 1]) -> f32[1, 1] {
  let y = tanh(x @ W);
  let acc2 = acc + sum(y * y);
  if n == 0 || argmax(y @ v) == 0 { acc2 } else { go(y, n - 1, acc2) }
}
def loss(ws: List[int]) -> f32[1, 1] {
  match ws {
    Nil => zeros(1, 1),
    Cons(w, rest) => go(emb[w], length(rest) + 2, zeros(1, 1)),
  }
}
)";

// Host numbers as tensor scalars: a float computed from the step count and one read from a tensor
// (item), an int; a host number is not differentiated (as a decision taken from a tensor is not).
const char* kHostScalars = R"(dim H = 4
param emb[12]: f32[1, H]
param W: f32[H, H]
def go(x: f32[1, H], n: int, acc: f32[1, 1]) -> f32[1, 1] {
  let y = tanh(x @ W) * (1.0 / float(n + 1));
  let s = item(sum(y));
  let acc2 = acc + sum(y * y) * s - n;
  if n == 0 { acc2 } else { go(y + s, n - 1, acc2) }
}
def loss(ws: List[int]) -> f32[1, 1] {
  match ws {
    Nil => zeros(1, 1),
    Cons(w, rest) => go(emb[w] * (length(rest) + 1), length(rest) + 2, zeros(1, 1)),
  }
}
)";

// Weights wide enough (U: 256 x 640) that the backward packs U^T for dX and cuts dU's GEMM into
// blocks of columns.
const char* kWideTree = R"(dim H = 128
param emb[12]: f32[1, H]
param U: f32[2 * H, 5 * H]
param b: f32[1, 5 * H]
param out: f32[H, 3]
def enc(t: Tree) -> f32[1, H] {
  match t {
    Leaf(w) => tanh(emb[w]),
    Node(l, r) => {
      let (i, f, g, o, u) = split(concat(enc(l), enc(r)) @ U + b, 5);
      sigmoid(i) * tanh(u) + sigmoid(f) * sigmoid(g) * tanh(o)
    },
  }
}
def loss(t: Tree) -> f32[1, 1] { -sum(log_softmax(enc(t) @ out)) }
)";

// Per-child matrices: each child's h through its own matrix of the indexed param U, in a call of
// its own, so that a batch holds the products of left and right children (two matrices, each a
// run of the batch's rows) and a leaf's product is one node per word (shared). Wide enough (U[k]:
// 128 x 384) that dX takes U[k]^T packed. All products are by U's matrices.
const char* kPerChildWeights = R"(dim H = 128
param emb[12]: f32[1, H]
param U[2]: f32[H, 3 * H]
param b: f32[1, 3 * H]
def child(h: f32[1, H], k: int) -> f32[1, 3 * H] { h @ U[k] }
def enc(t: Tree) -> f32[1, H] {
  match t {
    Leaf(w) => tanh(emb[w]),
    Node(l, r) => {
      let (i, f, g) = split(child(enc(l), 0) + child(enc(r), 1) + b, 3);
      sigmoid(i) * tanh(g) + sigmoid(f)
    },
  }
}
def loss(t: Tree) -> f32[1, 1] { let h = enc(t); sum(h * h) }
)";

// Every elementwise operator in fused loops, with their operands read every way a fused loop reads
// them: whole rows (20 floats: a partial last register), one number shared by the batch (s, exp(s)),
// and a row [1, 16] broadcast down a [2, 16] matrix (r, exp(r)).
const char* kElementwise = R"(dim H = 20
param emb[12]: f32[1, H]
param s: f32[1, 1]
param r: f32[1, 16]
param W: f32[2 * H, H]
param b: f32[1, H]
param V1: f32[H, 16]
param V2: f32[H, 16]
param out: f32[H, 3]
def enc(t: Tree) -> f32[1, H] {
  match t {
    Leaf(w) => tanh(emb[w] - s) * sigmoid(emb[w]),
    Node(l, r2) => {
      let x = concat(enc(l), enc(r2)) @ W + b;
      let y = sigmoid(x) * tanh(x - s) + relu(x) / (exp(x * s) + exp(s));
      log(exp(-y) + exp(s))
    },
  }
}
def loss(t: Tree) -> f32[1, 1] {
  let h = enc(t);
  let P = concat(h @ V1, h @ V2, axis=0);
  let q = sigmoid(P * r - r) / (exp(P) + exp(r));
  sum(sum(q, axis=1), axis=0) - sum(log_softmax(h @ out))
}
)";

nlohmann::json random_tree(std::mt19937_64& rng, int leaves) {
  if (leaves == 1) return {{"Leaf", {static_cast<int>(rng() % 12)}}};
  const int left = 1 + static_cast<int>(rng() % static_cast<uint64_t>(leaves - 1));
  return {{"Node", {random_tree(rng, left), random_tree(rng, leaves - left)}}};
}

struct Loaded {
  std::shared_ptr<const ir::Module> module;
  std::vector<Value> inputs;
};

Loaded setup(const char* text, size_t n, bool trees) {
  Loaded s;
  s.module = compile_checked(parse_model_text("grad.acr", text, {}), CompileOptions{});
  const ir::Function& f = s.module->functions[s.module->find_function("loss")];
  std::mt19937_64 rng(3);
  for (size_t i = 0; i < n; ++i) {
    nlohmann::json j;
    if (trees) {
      j = random_tree(rng, 1 + static_cast<int>(i % 9));
    } else {
      j = nlohmann::json::array();
      for (size_t k = 0; k <= i % 5; ++k) j.push_back(static_cast<int>(rng() % 12));
    }
    s.inputs.push_back(value_from_json(j, f.vars[f.params[0]].type, SourceLoc{"gen", 1, 1}));
  }
  return s;
}

// `base` with entry `entry` of param `param` moved by `delta` (param -1: unchanged), as new params.
std::shared_ptr<ParamStore> perturbed(const ir::Module& m, const ParamStore& base, int param, int64_t entry,
                                      float delta) {
  std::vector<Tensor> ts = copy_tensors(base);
  if (param >= 0) ts[param].data[entry] += delta;
  return std::make_shared<ParamStore>(make_params(m, std::move(ts), "perturbed"));
}

// `run` throws a UserError whose message holds `text`.
template <class Run>
void expect_user_error(Run&& run, const std::string& text) {
  try {
    run();
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

// Gradients equal to a relative 1e-4 of the largest entry of each param's gradient.
void expect_same_grads(const GradResult& a, const GradResult& e, const std::string& what) {
  ASSERT_EQ(a.grads.size(), e.grads.size());
  // The chunks an engine says it wrote hold every non-zero entry (the optimiser skips the others).
  if (!a.written.empty()) {
    ASSERT_EQ(a.written.size(), a.grads.size());
    for (size_t k = 0; k < a.grads.size(); ++k)
      for (int64_t j = 0; j < a.grads[k].size(); ++j)
        if (a.grads[k].data[j] != 0) {
          ASSERT_TRUE(a.written[k][size_t(j / kGradChunk)]) << what << ", param " << k << ", entry " << j;
        }
  }
  for (size_t k = 0; k < e.grads.size(); ++k) {
    float scale = 0;
    for (int64_t j = 0; j < e.grads[k].size(); ++j) scale = std::max(scale, std::abs(e.grads[k].data[j]));
    for (int64_t j = 0; j < e.grads[k].size(); ++j)
      ASSERT_NEAR(a.grads[k].data[j], e.grads[k].data[j], 1e-4f * (scale + 1e-6f)) << what << ", param " << k << ", entry " << j;
  }
  ASSERT_EQ(a.outputs.size(), e.outputs.size());
  for (size_t i = 0; i < e.outputs.size(); ++i)
    EXPECT_NEAR(a.outputs[i].tensor->data[0], e.outputs[i].tensor->data[0],
                1e-5f * (1 + std::abs(e.outputs[i].tensor->data[0])));
}

void batched_equals_reference(const char* text, bool trees) {
  for (size_t n : {1, 7, 40}) {
    SCOPED_TRACE("batch of " + std::to_string(n));
    Loaded s = setup(text, n, trees);
    auto params = std::make_shared<ParamStore>(init_params(*s.module, 5));
    ReferenceEngine reference(s.module, params);
    const GradResult expected = reference.gradients(s.inputs);
    double norm = 0;
    for (const Tensor& g : expected.grads)
      for (int64_t j = 0; j < g.size(); ++j) norm += double(g.data[j]) * g.data[j];
    EXPECT_GT(norm, 0.0);  // the gradient reaches the params
    for (int threads : {1, 2}) {
      BatchedEngine batched(s.module, params, Scheduler::InlineDepth, threads);
      expect_same_grads(batched.gradients(s.inputs), expected, "batched");
      AotOptions o;
      o.cache_dir = kCache;
      o.threads = threads;
      AotEngine aot(s.module, params, o);
      const GradResult a1 = aot.gradients(s.inputs);
      expect_same_grads(a1, expected, "aot");
      EXPECT_FALSE(a1.written.empty());  // the batched engines say where they wrote
      // Deterministic: a second run gives the same bits.
      const GradResult a2 = aot.gradients(s.inputs);
      for (size_t k = 0; k < a1.grads.size(); ++k)
        for (int64_t j = 0; j < a1.grads[k].size(); ++j) ASSERT_EQ(a1.grads[k].data[j], a2.grads[k].data[j]);
    }
  }
}

TEST(Gradients, BatchedEqualsReferenceOnMatrixTrees) { batched_equals_reference(kMatrixTree, true); }

TEST(Gradients, BatchedEqualsReferenceWithDecisionsFromTensors) { batched_equals_reference(kEarlyExit, false); }

TEST(Gradients, BatchedEqualsReferenceWithHostScalars) { batched_equals_reference(kHostScalars, false); }

TEST(Gradients, BatchedEqualsReferenceWithWideWeights) { batched_equals_reference(kWideTree, true); }

TEST(Gradients, BatchedEqualsReferenceWithPerChildMatrices) { batched_equals_reference(kPerChildWeights, true); }

// A batch picking both matrices of U is differentiated by matrix: every product by U[k] takes the
// weights' path (one dX GEMM per run, dW deferred), none a matrix per instance.
TEST(Gradients, ProductsByIndexedMatricesTakeTheWeightsPath) {
  Loaded s = setup(kPerChildWeights, 40, true);
  auto params = std::make_shared<ParamStore>(init_params(*s.module, 5));
  BatchedEngine batched(s.module, params, Scheduler::InlineDepth, 1);
  const GradResult g = batched.gradients(s.inputs);
  // The trees of up to 9 leaves are at most 8 levels deep; every level's products by U are one
  // or two runs (left and right children), each one weight product.
  EXPECT_GE(g.stats.weight_products, 2);
  EXPECT_LE(g.stats.weight_products, 16);
  // No matrix of U stacked per instance: the backward's memory stays below 40 copies of one.
  EXPECT_LT(g.stats.peak_bytes, 40 * 128 * 384 * int64_t(sizeof(float)));
}

TEST(Gradients, BatchedEqualsReferenceThroughEveryElementwiseOperator) {
  batched_equals_reference(kElementwise, true);
}

// The AOT engine's gradient of the instances of `s`.
GradResult aot_gradients(const Loaded& s, const std::shared_ptr<ParamStore>& params) {
  AotOptions o;
  o.cache_dir = kCache;
  return AotEngine(s.module, params, o).gradients(s.inputs);
}

// The AOT engine differentiates fused loops with their compiled adjoints (here every loop of the
// model), the interpreter operator by operator; the gradients agree (above).
TEST(Gradients, TheAotEngineRunsCompiledAdjoints) {
  Loaded s = setup(kElementwise, 20, true);
  auto params = std::make_shared<ParamStore>(init_params(*s.module, 5));
  const GradResult a = aot_gradients(s, params);
  EXPECT_GT(a.stats.compiled_adjoints, 0);
  const GradResult i = BatchedEngine(s.module, params, Scheduler::InlineDepth, 1).gradients(s.inputs);
  EXPECT_EQ(i.stats.compiled_adjoints, 0);
}

// A fused loop whose stored value the views after it slice (the sum of the children's parts,
// split into gates) runs as a compiled adjoint too: both loops of every node batch do.
TEST(Gradients, ALoopSlicedByTheViewsAfterItRunsCompiled) {
  Loaded s = setup(kPerChildWeights, 20, true);
  const GradResult a = aot_gradients(s, std::make_shared<ParamStore>(init_params(*s.module, 5)));
  // One loop per batch of the leaf (tanh) and of the loss (h * h), two per batch of the node.
  const auto& blocks = a.stats.blocks;
  ASSERT_TRUE(blocks.count("grad.acr:8:16") && blocks.count("grad.acr:10:29") && blocks.count("grad.acr:15:54"));
  EXPECT_GT(blocks.at("grad.acr:10:29").batches, 1);
  EXPECT_EQ(a.stats.compiled_adjoints, blocks.at("grad.acr:8:16").batches + 2 * blocks.at("grad.acr:10:29").batches +
                                           blocks.at("grad.acr:15:54").batches);
}

// The same bits with 1 and 2 threads on each batched engine (gradients_on_threads.h). The engines
// differ in their last bits (the AOT engine's fused loops have compiled adjoints, the interpreter's
// run operator by operator), within the 1e-4 of batched_equals_reference.
TEST(Gradients, SameBitsOnAnyThreadsOnEachBatchedEngine) {
  Loaded s = setup(kWideTree, 300, true);  // batches of over 256 rows: dX in blocks too
  const OnThreads r =
      gradients_on_threads(s.module, std::make_shared<ParamStore>(init_params(*s.module, 5)), s.inputs);
  expect_same_bits(r);
  expect_same_grads(r.aot[0], r.batched[0], "aot against batched");
}

// A param both the matrix of products on stacked rows (whose dW a worker may be adding while the
// backward goes on) and read by another path later in the backward (a leaf's slice of U): that
// path's adjoint is added after every row kept so far, on any number of threads. Batches of over
// 256 rows: several chunks of rows.
TEST(Gradients, SameBitsWhenAWeightIsAlsoReadElsewhere) {
  std::string text = kWideTree;
  text.replace(text.find("tanh(emb[w])"), 12, "tanh(emb[w] + slice(slice(U, 0, 1, axis=0), 0, H, axis=1))");
  Loaded s = setup(text.c_str(), 300, true);
  auto params = std::make_shared<ParamStore>(init_params(*s.module, 5));
  const OnThreads r = gradients_on_threads(s.module, params, s.inputs);
  expect_same_bits(r);
  const GradResult expected = ReferenceEngine(s.module, params).gradients(s.inputs);
  expect_same_grads(r.aot[1], expected, "aot, 2 threads");
  expect_same_grads(r.batched[1], expected, "batched, 2 threads");
}

// The reference gradient against central differences of the summed loss, entry by entry of every
// param (h = 1e-2 in float; the loss is summed in double), on the matrix-tree model made smooth
// (relu and max have kinks a step of h may cross; their adjoints are checked in adjoints_test).
TEST(Gradients, ReferenceMatchesFiniteDifferences) {
  std::string text = kMatrixTree;
  text.replace(text.find("relu(p)"), 7, "tanh(p)");
  text.replace(text.find("max(P, axis=0)"), 14, "mean(P, axis=0)");
  Loaded s = setup(text.c_str(), 6, true);
  const ParamStore base = init_params(*s.module, 5);
  auto copy = [&](int param, int64_t entry, float delta) { return perturbed(*s.module, base, param, entry, delta); };
  ReferenceEngine engine(s.module, copy(-1, 0, 0));
  const GradResult g = engine.gradients(s.inputs);
  auto loss = [&](int param, int64_t entry, float delta) {
    ReferenceEngine e(s.module, copy(param, entry, delta));
    double total = 0;
    for (const Value& v : e.run(s.inputs, "loss").outputs) total += v.tensor->data[0];
    return total;
  };
  std::mt19937_64 rng(9);
  for (size_t k = 0; k < base.params.size(); ++k)
    for (int trial = 0; trial < 6; ++trial) {
      const int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(base.params[k].tensor.size()));
      const float h = 1e-2f;
      const double numeric = (loss(static_cast<int>(k), j, h) - loss(static_cast<int>(k), j, -h)) / (2 * h);
      EXPECT_NEAR(g.grads[k].data[j], numeric, 2e-3 + 2e-2 * std::abs(numeric))
          << s.module->params[k].name << " entry " << j;
    }
}

// Blocks with size variables (ragged: each instance its own n): a gather of n embedding rows, a
// slice of a param to n rows, heads, a transpose, attention over n x n scores, a residual and a
// layer norm, reductions over the n rows; the instances' lengths 1 to 5 (setup). The batched
// engines differentiate a ragged batch at once, its instances' values one after another, and must
// equal the reference engine's tape.
const char* kRagged = R"(dim D = 8
param emb[12]: f32[1, D]
param pos: f32[6, D]
param Wqkv: f32[D, 3 * D]
param Wo: f32[D, D]
param g: f32[1, D]
param bt: f32[1, D]
param out: f32[D, 3]
def attend(x: f32[n, D]) -> f32[n, D] {
  let (q, k, v) = split(x @ Wqkv, 3);
  let a = softmax(heads(q, 2) @ transpose(heads(k, 2)) * 0.5);
  layer_norm(x + merge_heads(a @ heads(v, 2)) @ Wo, g, bt)
}
def score(x: f32[n, D]) -> f32[1, 1] {
  let y = attend(attend(x + slice(pos, 0, n, axis=0)));
  -sum(log_softmax(mean(y, axis=0) @ out)) + sum(tanh(slice(y, 0, 1, axis=0)))
}
def loss(ws: List[int]) -> f32[1, 1] { score(emb[ws]) }
)";

TEST(Gradients, BatchedEqualsReferenceOnRaggedBlocks) { batched_equals_reference(kRagged, false); }

// A ragged batch's products by a param's matrix take the weights' path over all its instances'
// rows: dX one GEMM per product and batch (Wqkv and Wo in each batch of attend, out in score's),
// not one per instance; the same bits on 1 and 2 threads on each batched engine.
TEST(Gradients, RaggedBatchesTakeTheWeightsPathOverAllRows) {
  Loaded s = setup(kRagged, 40, false);
  const OnThreads r =
      gradients_on_threads(s.module, std::make_shared<ParamStore>(init_params(*s.module, 5)), s.inputs);
  for (const GradResult& g : {r.batched[0], r.aot[0]}) {
    EXPECT_GE(g.stats.weight_products, 5);
    EXPECT_LE(g.stats.weight_products, 12) << "a product per instance (at least 160) or per batch";
  }
  expect_same_bits(r);
}

// The reference gradient of a loss over token lists against central differences (as above).
void reference_matches_finite_differences(const char* text) {
  Loaded s = setup(text, 5, false);
  const ParamStore base = init_params(*s.module, 5);
  ReferenceEngine engine(s.module, perturbed(*s.module, base, -1, 0, 0));
  const GradResult g = engine.gradients(s.inputs);
  std::mt19937_64 rng(9);
  for (size_t k = 0; k < base.params.size(); ++k)
    for (int trial = 0; trial < 6; ++trial) {
      const int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(base.params[k].tensor.size()));
      double l[2];
      for (int side = 0; side < 2; ++side) {
        ReferenceEngine e(s.module, perturbed(*s.module, base, static_cast<int>(k), j, side ? -1e-2f : 1e-2f));
        l[side] = 0;
        for (const Value& v : e.run(s.inputs, "loss").outputs) l[side] += v.tensor->data[0];
      }
      const double numeric = (l[0] - l[1]) / 2e-2;
      EXPECT_NEAR(g.grads[k].data[j], numeric, 2e-3 + 2e-2 * std::abs(numeric)) << s.module->params[k].name << " entry " << j;
    }
}

TEST(Gradients, RaggedReferenceMatchesFiniteDifferences) { reference_matches_finite_differences(kRagged); }

// Sizes that grow while an instance runs: a [CLS] row before the gathered rows (`n + 1`), then a
// loop that attends over a cache and appends a row per step (`t + 1`, each call binding t afresh),
// the cache kept in a list of two layers' caches; a loss per step over the instance's own tokens.
const char* kGrowing = R"(dim D = 8
param emb[12]: f32[1, D]
param cls: f32[1, D]
param Wk: f32[D, D]
param Wq: f32[D, D]
param out: f32[D, 12]
def append(ks: List[f32[t, D]], x: f32[1, D]) -> List[f32[t + 1, D]] {
  match ks { Nil => Nil, Cons(k, rest) => Cons(concat(k, tanh(x @ Wk), axis=0), append(rest, x)) }
}
def attend(ks: List[f32[t, D]], x: f32[1, D]) -> f32[1, D] {
  match ks { Nil => x, Cons(k, rest) => attend(rest, softmax((x @ Wq) @ transpose(k) * 0.5) @ k + x) }
}
def decode(ks: List[f32[t, D]], ws: List[int], acc: f32[1, 1]) -> f32[1, 1] {
  match ws {
    Nil => acc,
    Cons(w, rest) => {
      let x = emb[w];
      let ks2 = append(ks, x);
      let l = sum(tanh(attend(ks2, x) @ out), axis=-1);
      decode(ks2, rest, acc + l)
    }
  }
}
def start(x: f32[n, D]) -> List[f32[n + 1, D]] {
  let y: f32[n + 1, D] = concat(cls, x, axis=0);
  Cons(y, Cons(y @ Wk, Nil))
}
def loss(ws: List[int]) -> f32[1, 1] { decode(start(emb[ws]), ws, zeros(1, 1)) }
)";

TEST(Gradients, BatchedEqualsReferenceWhereSizesGrow) { batched_equals_reference(kGrowing, false); }
TEST(Gradients, GrowingReferenceMatchesFiniteDifferences) { reference_matches_finite_differences(kGrowing); }

// Functions that return sizes they make: a gather's rows returned from the function that gathers,
// and a loop returning the rows it appended (a size per instance its caller never names).
const char* kMadeSizes = R"(dim D = 8
param emb[12]: f32[1, D]
param Wq: f32[D, D]
param out: f32[D, 1]
def pick(ws: List[int]) -> f32[m, D] { emb[ws] }
def grow(c: f32[t, D], k: int) -> f32[m, D] {
  if k == 0 { c } else {
    let q = softmax(slice(c, 0, 1, axis=0) @ Wq @ transpose(c)) @ c;
    grow(concat(c, tanh(q @ Wq), axis=0), k - 1)
  }
}
def loss(ws: List[int]) -> f32[1, 1] {
  let rows = grow(pick(ws), length(ws) % 3 + 1);
  sum(tanh(rows @ out), axis=0)
}
)";

// Softmax and log_softmax across a stack's matrices (axis 0 of [heads, n, n]: weights across the
// heads), which lowering writes with reductions along that axis.
const char* kAcrossHeads = R"(dim D = 8
param emb[12]: f32[1, D]
param Wq: f32[D, D]
def loss(ws: List[int]) -> f32[1, 1] {
  let x = emb[ws];
  let s = heads(x @ Wq, 2) @ transpose(heads(x, 2));
  let y = merge_heads(softmax(s, axis=0) @ heads(x, 2)) + merge_heads(log_softmax(s, axis=0) @ heads(x, 2)) * 0.1;
  sum(sum(tanh(y), axis=0), axis=1)
}
)";

TEST(Gradients, BatchedEqualsReferenceAcrossHeads) { batched_equals_reference(kAcrossHeads, false); }
TEST(Gradients, AcrossHeadsReferenceMatchesFiniteDifferences) { reference_matches_finite_differences(kAcrossHeads); }

TEST(Gradients, BatchedEqualsReferenceThroughMadeSizes) { batched_equals_reference(kMadeSizes, false); }
TEST(Gradients, MadeSizesReferenceMatchesFiniteDifferences) { reference_matches_finite_differences(kMadeSizes); }

// A mixture of experts: each instance multiplies by the matrix of W it picks (given with the
// instance, or by argmax of its own scores), then one elementwise operator, then another with a
// param, an instance's value or itself. The backward splits the batch into runs by matrix and
// rows of the fused loops' values lie from each run's first row, including values the forward
// held in registers only (a run after the first once read memory at a null output plus its row).
// Every unary operator, followed by a binary one, and every binary one on both routes and both
// batched engines: route r pairs unary i with binary (i + 3r) mod 7, so each unary meets two binaries
// and each binary two unaries (the full product compiled 98 models for the same rules).
TEST(Gradients, BatchedEqualsReferenceOnPerInstanceChoicesOfIndexedParams) {
  const std::vector<std::string> unaries = {"tanh(z)",     "sigmoid(z)", "relu(z)", "exp(z)",
                                            "log(exp(z))", "-z",         "z"};
  const std::vector<std::string> binaries = {"y + b", "y - b", "b - y", "y * b", "y / exp(b)", "y * y", "y * s"};
  ASSERT_EQ(unaries.size(), binaries.size());
  const std::vector<std::string> routes = {"k", "argmax(s @ G)"};
  for (size_t r = 0; r < routes.size(); ++r) {
    const char* route = routes[r].c_str();
    for (size_t i = 0; i < unaries.size(); ++i) {
      const std::string& u = unaries[i];
      const std::string& f = binaries[(i + 3 * r) % binaries.size()];
      const std::string what = std::string("route ") + route + ", " + u + ", " + f;
      SCOPED_TRACE(what);
      const std::string text = "dim H = 4\nparam W[3]: f32[H, H]\nparam b: f32[1, H]\nparam G: f32[H, 3]\n"
                               "def loss(x: (int, f32[1, H])) -> f32[1, 1] {\n  let (k, s) = x;\n  let z = s @ W[" +
                               std::string(route) + "];\n  let y = " + u + ";\n  sum(" + f + ", axis=-1)\n}\n";
      auto module = compile_checked(parse_model_text("moe.acr", text, {}), CompileOptions{});
      const ir::Function& fn = module->functions[module->find_function("loss")];
      std::mt19937_64 rng(7);
      std::uniform_real_distribution<float> x(-1, 1);
      std::vector<Value> inputs;
      for (int n = 0; n < 9; ++n) {
        const nlohmann::json j = {static_cast<int>(rng() % 3), {{x(rng), x(rng), x(rng), x(rng)}}};
        inputs.push_back(value_from_json(j, fn.vars[fn.params[0]].type, SourceLoc{"gen", 1, 1}));
      }
      auto params = std::make_shared<ParamStore>(init_params(*module, 5));
      const GradResult expected = ReferenceEngine(module, params).gradients(inputs);
      expect_same_grads(BatchedEngine(module, params, Scheduler::InlineDepth, 1).gradients(inputs), expected,
                        "batched");
      AotOptions o;
      o.cache_dir = kCache;
      o.threads = 1;
      expect_same_grads(AotEngine(module, params, o).gradients(inputs), expected, "aot");
    }
  }
}

TEST(Gradients, LossMustBeOneNumber) {
  auto m = compile_checked(parse_model_text("bad.acr", "param W: f32[2, 3]\ndef loss(x: f32[1, 2]) -> f32[1, 3] { x @ W }\n", {}),
                           CompileOptions{});
  auto params = std::make_shared<ParamStore>(init_params(*m, 0));
  for (int e = 0; e < 2; ++e) {
    std::unique_ptr<Engine> engine;
    if (e == 0)
      engine = std::make_unique<ReferenceEngine>(m, params);
    else
      engine = std::make_unique<BatchedEngine>(m, params, Scheduler::InlineDepth, 1);
    expect_user_error([&] { engine->gradients({}); },
                      "bad.acr:2:1: error: the loss entry 'loss' returns f32[1, 3]; gradients need one number per "
                      "instance");
  }
}

}  // namespace
}  // namespace acrobat
