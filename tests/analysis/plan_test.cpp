// Static blocks, depth and phases on small programs and the bundled models: the plan the compiler
// makes (blocks, argument modes, ghost padding, phase ends), the bucket counts and mean batch sizes
// the batched engine gets from it, with each analysis on and off, and outputs equal to the reference
// engine's in every configuration.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <set>

#include "analysis/explain.h"
#include "analysis/plan.h"
#include "io/ptb.h"
#include "compiler/pipeline.h"
#include "lang/frontend.h"
#include "engines/batched_engine.h"
#include "engines/inputs.h"
#include "engines/reference_engine.h"

namespace acrobat::analysis {
namespace {

std::string source(const std::string& relative) {
  return std::string(ACROBAT_SOURCE_DIR) + "/" + relative;
}

std::shared_ptr<const ir::Module> compile(const std::string& text, AnalysisOptions a = {}) {
  CompileOptions o;
  o.analysis = a;
  return compile_checked(parse_model_text("test.acr", text, {}), o);
}

std::shared_ptr<const ir::Module> compile_file(const std::string& path, AnalysisOptions a = {}) {
  CompileOptions o;
  o.analysis = a;
  o.dims["H"] = 32;
  return compile_model(path, o);
}

std::vector<const StaticBlock*> blocks_of(const ir::Module& m, const std::string& fn) {
  std::vector<const StaticBlock*> out;
  for (const auto& s : m.plan->blocks)
    if (m.functions[s.function].name == fn && !s.ops.empty()) out.push_back(&s);
  return out;
}

std::string var_name(const ir::Module& m, const StaticBlock& s, const BlockArg& a) {
  return m.functions[s.function].vars[a.var].name;
}

// The modes of a block's parameter arguments, as "param:mode".
std::set<std::string> param_modes(const ir::Module& m, const StaticBlock& s) {
  std::set<std::string> out;
  for (const auto& a : s.args)
    if (a.param >= 0) out.insert(m.params[a.param].name + ":" + arg_mode_name(a.mode));
  return out;
}

struct Runs {
  RunResult reference, batched;
};

Runs run_both(const std::shared_ptr<const ir::Module>& m, const std::vector<Value>& inputs,
              uint64_t seed = 1) {
  auto params = std::make_shared<ParamStore>(init_params(*m, seed));
  Runs r{ReferenceEngine(m, params).run(inputs), BatchedEngine(m, params).run(inputs)};
  EXPECT_EQ(r.reference.outputs.size(), r.batched.outputs.size());
  for (size_t i = 0; i < r.reference.outputs.size(); ++i) {
    const Tensor& want = *r.reference.outputs[i].tensor;
    const Tensor& got = *r.batched.outputs[i].tensor;
    EXPECT_EQ(want.shape, got.shape);
    for (int64_t j = 0; j < want.size(); ++j)
      EXPECT_NEAR(got.data[j], want.data[j], 1e-5 + 1e-5 * std::fabs(want.data[j]))
          << "instance " << i << " element " << j;
  }
  return r;
}

std::vector<Value> int_inputs(const ir::Module& m, std::vector<int> values) {
  const ir::Function& f = m.functions[entry_function(m, "main")];
  std::vector<Value> out;
  for (int v : values) out.push_back(value_from_json(v, f.vars[f.params[0]].type, SourceLoc{"test"}));
  return out;
}

// Batches and nodes of the block that starts at `line` of test.acr.
RunStats::BlockCounts counts_at(const RunStats& s, int line) {
  // Appended piecewise: GCC 12 warns falsely (-Wrestrict) about "literal" + std::string.
  std::string key = ":";
  key += std::to_string(line);
  key += ':';
  for (const auto& [name, c] : s.blocks)
    if (name.find(key) != std::string::npos) return c;
  ADD_FAILURE() << "no block at line " << line;
  return {};
}

TEST(StaticBlocks, TreeLstmHasOneBlockPerStraightLineRegion) {
  auto m = compile_file(source("models/treelstm.acr"));
  // The leaf and the internal-node computations (a child's product by its matrix, the cell), and
  // the classifier.
  ASSERT_EQ(blocks_of(*m, "leaf_cell").size(), 1u);
  ASSERT_EQ(blocks_of(*m, "child_gates").size(), 1u);
  ASSERT_EQ(blocks_of(*m, "node_cell").size(), 1u);
  ASSERT_EQ(blocks_of(*m, "classify").size(), 1u);
  EXPECT_TRUE(blocks_of(*m, "cell").empty());
  EXPECT_TRUE(blocks_of(*m, "main").empty());
  const StaticBlock& leaf = *blocks_of(*m, "leaf_cell")[0];
  const StaticBlock& node = *blocks_of(*m, "node_cell")[0];
  EXPECT_EQ(param_modes(*m, leaf),
            (std::set<std::string>{"emb:indexed", "W_leaf:reuse", "b_leaf:reuse"}));
  EXPECT_EQ(param_modes(*m, *blocks_of(*m, "child_gates")[0]), (std::set<std::string>{"U_node:indexed"}));
  EXPECT_EQ(param_modes(*m, node), (std::set<std::string>{"b_node:reuse"}));
  // The leaf block reads nothing the graph computes: its depth is fixed. The node block reads
  // both children's (h, c).
  EXPECT_EQ(leaf.static_depth, 1);
  EXPECT_EQ(node.static_depth, 0);
  int scatter = 0;
  for (const auto& a : node.args) scatter += a.mode == ArgMode::Scatter ? 1 : 0;
  EXPECT_EQ(scatter, 4);  // the children's parts of the gates, cl, cr
  // The matmul takes the bias add; the split's slices are views; only h and c escape.
  EXPECT_GE(leaf.ops[0].bias_arg, 0);
  EXPECT_TRUE(leaf.ops[1].fused);
  int views = 0, escaping = 0;
  for (const auto& op : leaf.ops) {
    views += op.view;
    escaping += op.escapes && !op.view;
  }
  EXPECT_EQ(views, 3);
  EXPECT_GE(escaping, 2);
}

TEST(StaticBlocks, WithoutTheReuseAnalysisModesAreCheckedPerBatch) {
  AnalysisOptions off;
  off.reuse = false;
  auto m = compile_file(source("models/treelstm.acr"), off);
  for (const auto& s : m->plan->blocks)
    for (const auto& a : s.args) EXPECT_FALSE(a.known);
}

TEST(StaticBlocks, MvRnnReadsPerNodeMatricesAsScatterAndHashedWordMatricesAsIndexed) {
  auto m = compile_file(source("models/mvrnn.acr"));
  EXPECT_TRUE(blocks_of(*m, "leaf").empty());  // the leaf only loads parameters: no tensor work
  auto compose = blocks_of(*m, "node");
  ASSERT_EQ(compose.size(), 1u);
  std::set<std::string> modes;
  for (const auto& a : compose[0]->args)
    modes.insert(var_name(*m, *compose[0], a) + ":" + arg_mode_name(a.mode));
  EXPECT_TRUE(modes.count("A:scatter"));
  EXPECT_TRUE(modes.count("B:scatter"));
}

TEST(Phases, TheClassifierAfterATreeRecursionRunsAsOneBatch) {
  for (bool phases : {true, false}) {
    AnalysisOptions a;
    a.phases = phases;
    auto m = compile_file(source("models/treelstm.acr"), a);
    // One phase end in main (after the tree's recursion) and one in loss.
    EXPECT_EQ(m->plan->depth.phase_ends.size(), phases ? 2u : 0u);
    const ir::Function& f = m->functions[entry_function(*m, "main")];
    auto inputs = load_inputs(InputSpec{InputKind::Sst, source("data/sst/test.txt")},
                              f.vars[f.params[0]].type, source("data/sst/vocab.txt"), 64);
    Runs r = run_both(m, inputs);
    auto main_block = blocks_of(*m, "classify")[0];  // the classifier of main
    const auto& c = r.batched.stats.blocks.at(main_block->name);
    EXPECT_EQ(c.nodes, 64);
    if (phases) {
      EXPECT_EQ(c.batches, 1);  // every tree's classifier in phase 1, depth 1
    } else {
      EXPECT_GT(c.batches, 5);  // one batch per distinct tree height
    }
  }
}

// Two independent recursions in top-level code: their steps share batches (no phase or program
// order separates them); the sum after both runs once for all instances.
const char* kIndependent = R"(dim H = 8
param W: f32[H, H]
def chain(x: f32[1, H], n: int) -> f32[1, H] {
  if n == 0 { x } else { chain(tanh(x @ W), n - 1) }
}
def main(n: int) -> f32[1, H] {
  let a = chain(ones(1, H), n);
  let b = chain(zeros(1, H), n + 1);
  a * b + a
}
)";

TEST(Phases, IndependentCallsStartAtTheSameDepth) {
  for (bool phases : {true, false}) {
    AnalysisOptions a;
    a.phases = phases;
    a.share = false;  // the instances' chains are the same computations: counted here unshared
    auto m = compile(kIndependent, a);
    auto inputs = int_inputs(*m, {1, 2, 3, 4, 5, 6, 7, 8});
    Runs r = run_both(m, inputs);
    auto step = counts_at(r.batched.stats, 4);
    auto sum = counts_at(r.batched.stats, 9);
    // Steps: depth k holds every chain with more than k - 1 steps left: 9 depths in all.
    EXPECT_EQ(step.nodes, (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8) + (2 + 3 + 4 + 5 + 6 + 7 + 8 + 9));
    EXPECT_EQ(step.batches, 9);
    EXPECT_EQ(sum.nodes, 8);
    EXPECT_EQ(sum.batches, phases ? 1 : 8);
  }
}

// A branch adding two blocks on one side and one on the other: with ghost operations the work
// after it falls at one depth for every instance.
const char* kGhost = R"(dim H = 8
param W: f32[H, H]
param V: f32[H, H]
def g(x: f32[1, H]) -> f32[1, H] { tanh(x @ W) }
def h(x: f32[1, H]) -> f32[1, H] { sigmoid(x @ V) }
def main(n: int) -> f32[1, H] {
  let x = ones(1, H) * 0.5;
  let y = if n % 2 == 0 { g(g(x)) } else { g(x) };
  h(y)
}
)";

TEST(Ghosts, PadTheShorterBranchSoLaterWorkAligns) {
  for (bool ghosts : {true, false}) {
    AnalysisOptions a;
    a.ghosts = ghosts;
    a.share = false;  // every instance starts from the same x: counted here unshared
    auto m = compile(kGhost, a);
    EXPECT_EQ(m->plan->depth.ghosts.size(), ghosts ? 1u : 0u);
    if (ghosts) {
      EXPECT_EQ(m->plan->depth.ghosts.begin()->second, (std::vector<int>{0, 1}));
    }
    EXPECT_EQ(m->plan->depth.chain_length[m->find_function("main")], 4);  // x, g, g, h
    auto inputs = int_inputs(*m, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    Runs r = run_both(m, inputs);
    auto g = counts_at(r.batched.stats, 4);
    auto h = counts_at(r.batched.stats, 5);
    EXPECT_EQ(g.nodes, 15);
    EXPECT_EQ(g.batches, 2);
    EXPECT_EQ(h.nodes, 10);
    EXPECT_EQ(h.batches, ghosts ? 1 : 2);
  }
}

// Shared nodes (runtime/graph.h): instances whose chains start from the same tensors compute the
// same steps; each step runs once, with the values and gradients of running it for each instance.
TEST(SharedNodes, ARepeatedComputationRunsOnce) {
  AnalysisOptions a;
  auto shared = compile(kIndependent, a);
  a.share = false;
  auto unshared = compile(kIndependent, a);
  auto inputs = int_inputs(*shared, {1, 2, 3, 4, 5, 6, 7, 8});
  Runs r = run_both(shared, inputs);
  // chain(ones, n) is a prefix of one chain of 8 steps for every n, chain(zeros, n + 1) of one of 9.
  EXPECT_EQ(counts_at(r.batched.stats, 4).nodes, 8 + 9);
  EXPECT_EQ(r.batched.stats.shared_nodes, (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8) + (2 + 3 + 4 + 5 + 6 + 7 + 8 + 9) - 17);
  EXPECT_EQ(counts_at(r.batched.stats, 9).nodes, 8);  // a * b + a differs per instance
  // The FLOPs are the model's, as if every node ran.
  EXPECT_EQ(r.batched.stats.flops, r.reference.stats.flops);
  auto params = std::make_shared<ParamStore>(init_params(*shared, 1));
  RunResult off = BatchedEngine(unshared, params).run(inputs);
  EXPECT_EQ(off.stats.shared_nodes, 0);
  RunResult on = BatchedEngine(shared, params).run(inputs);
  for (size_t i = 0; i < inputs.size(); ++i)
    for (int64_t j = 0; j < on.outputs[i].tensor->size(); ++j)
      EXPECT_EQ(on.outputs[i].tensor->data[j], off.outputs[i].tensor->data[j]) << i << " " << j;
}

// A record can repeat only one that read the same outputs: one reading an output nothing has read
// yet is not looked up, and a later record reading the same is found by that output's first
// reader (NodeStore::find_repeated); records of outputs read before are found by hash.
const char* kReadTwice = R"(dim H = 8
param E[8]: f32[1, H]
param W: f32[H, H]
param U: f32[H, H]
def f(x: f32[1, H], n: int) -> f32[1, H] {
  if n == 0 { x } else { f(tanh(x @ W), n - 1) }
}
def g(x: f32[1, H], n: int) -> f32[1, H] {
  if n == 0 { x } else { g(sigmoid(x @ U), n - 1) }
}
def main(n: int) -> f32[1, H] {
  let a = f(E[n], 1);
  let b = f(a, 1);
  let c = f(a, 1);
  let d = g(a, 1);
  let e = g(a, 1);
  b * c + d * e
}
)";

TEST(SharedNodes, ARecordOfOutputsReadOnceBeforeIsFoundByTheirFirstReader) {
  AnalysisOptions a;
  auto shared = compile(kReadTwice, a);
  a.share = false;
  auto unshared = compile(kReadTwice, a);
  auto inputs = int_inputs(*shared, {0, 1, 2, 3, 4, 5, 6, 7});
  auto params = std::make_shared<ParamStore>(init_params(*shared, 3));
  RunResult on = BatchedEngine(shared, params).run(inputs);
  RunResult off = BatchedEngine(unshared, params).run(inputs);
  // Per instance (each of its own word): c repeats b, found as a's first reader; e repeats d, found
  // by hash (a's first reader is b, of another block).
  EXPECT_EQ(on.stats.shared_nodes, 2 * 8);
  EXPECT_EQ(counts_at(on.stats, 6).nodes, 8 + 8);   // f's step: a's and b's
  EXPECT_EQ(counts_at(on.stats, 9).nodes, 8);       // g's step: d's
  EXPECT_EQ(off.stats.shared_nodes, 0);
  for (size_t i = 0; i < inputs.size(); ++i)
    for (int64_t j = 0; j < on.outputs[i].tensor->size(); ++j)
      EXPECT_EQ(on.outputs[i].tensor->data[j], off.outputs[i].tensor->data[j]) << i << " " << j;
}

TEST(SharedNodes, ALeafOfAWordThatRepeatsRunsOnceAndGetsEveryUsesGradient) {
  AnalysisOptions a;
  auto shared = compile_file(source("models/treelstm.acr"), a);
  a.share = false;
  auto unshared = compile_file(source("models/treelstm.acr"), a);
  const ir::Function& f = shared->functions[entry_function(*shared, "loss")];
  auto inputs = load_inputs(InputSpec{InputKind::Sst, source("data/sst/test.txt")},
                            f.vars[f.params[0]].type, source("data/sst/vocab.txt"), 32);
  auto params = std::make_shared<ParamStore>(init_params(*shared, 2));
  GradResult on = BatchedEngine(shared, params).gradients(inputs);
  GradResult off = BatchedEngine(unshared, params).gradients(inputs);
  // Every leaf after the first of its word, and the classifier of its h, repeat a node; so does
  // the product of a leaf by its parent's matrix for its side (child_gates) after the first of
  // that word on that side.
  std::set<std::string> words;
  std::set<std::pair<std::string, int>> word_sides;
  int64_t leaves = 0, leaf_children = 0;
  std::vector<io::PtbTree> trees = io::read_ptb_file(source("data/sst/test.txt"));
  trees.resize(32);
  auto walk = [&](const io::PtbTree& t, auto&& self) -> void {
    if (t.children.empty()) {
      words.insert(t.word);
      ++leaves;
      return;
    }
    for (int side = 0; side < 2; ++side) {
      const io::PtbTree& c = t.children[size_t(side)];
      if (c.children.empty()) {
        word_sides.insert({c.word, side});
        ++leaf_children;
      }
      self(c, self);
    }
  };
  for (const io::PtbTree& t : trees) walk(t, walk);
  EXPECT_EQ(on.stats.shared_nodes, 2 * (leaves - static_cast<int64_t>(words.size())) +
                                       (leaf_children - static_cast<int64_t>(word_sides.size())));
  EXPECT_EQ(off.stats.shared_nodes, 0);
  for (size_t i = 0; i < inputs.size(); ++i)
    EXPECT_EQ(on.outputs[i].tensor->data[0], off.outputs[i].tensor->data[0]) << i;
  ASSERT_EQ(on.grads.size(), off.grads.size());
  for (size_t p = 0; p < on.grads.size(); ++p)
    for (int64_t j = 0; j < on.grads[p].size(); ++j)
      EXPECT_NEAR(on.grads[p].data[j], off.grads[p].data[j], 1e-5 + 1e-4 * std::fabs(off.grads[p].data[j]))
          << shared->params[p].name << " " << j;
}

TEST(Ghosts, AreNotAddedWhereABranchIsUnbounded) {
  auto m = compile_file(source("models/treelstm.acr"));
  EXPECT_TRUE(m->plan->depth.ghosts.empty());  // Node recurses: no fixed length to pad to
  EXPECT_EQ(m->plan->depth.chain_length[m->find_function("cell")], -1);
  EXPECT_TRUE(m->plan->depth.in_recursion[m->find_function("cell")]);
  EXPECT_FALSE(m->plan->depth.in_recursion[m->find_function("main")]);
}

TEST(Explain, ListsBlocksModesPhasesAndGhosts) {
  auto m = compile(kGhost);
  std::string text = explain(*m);
  EXPECT_NE(text.find("function @g  (chain of 1 block, top level)"), std::string::npos) << text;
  EXPECT_NE(text.find("[8, 8]: reuse @W\n"), std::string::npos) << text;
  EXPECT_NE(text.find("if at test.acr:8:11: ghost operations per branch +0 +1"), std::string::npos)
      << text;
  auto t = compile_file(source("models/treelstm.acr"));
  text = explain(*t);
  EXPECT_NE(text.find("ends phase 0"), std::string::npos) << text;
  EXPECT_NE(text.find("indexed @emb"), std::string::npos) << text;
  EXPECT_NE(text.find("matmul+bias"), std::string::npos) << text;
}

}  // namespace
}  // namespace acrobat::analysis

namespace acrobat::analysis {
namespace {

// `listing` equals the file tests/golden/<relative>; with ACROBAT_UPDATE_GOLDEN=1 it is written there
// instead (review the diff before keeping it).
void expect_golden(const std::string& relative, const std::string& listing) {
  std::string golden = source("tests/golden/" + relative);
  const char* update = std::getenv("ACROBAT_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(golden, std::ios::binary) << listing;
    return;
  }
  std::ifstream in(golden, std::ios::binary);
  ASSERT_TRUE(in) << golden << " is missing; create it with ACROBAT_UPDATE_GOLDEN=1";
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(listing, expected.str()) << relative << " changed; if intended, regenerate with "
                                     << "ACROBAT_UPDATE_GOLDEN=1 and review the diff";
}

// The kernel plans of the Tree-LSTM and Stack-RNN blocks, checked as data (no C++ is generated or
// compiled): a golden listing per model, and the decisions that make the cells fast stated directly.
TEST(KernelPlan, TreeLstmAndStackRnnBlocks) {
  for (const std::string model : {"treelstm", "stackrnn"}) {
    auto m = compile_file(source("models/" + model + ".acr"));
    std::string listing;
    for (const auto& s : m->plan->blocks)
      listing += fmt::format("block #{} at {}\n", s.id, s.name.substr(s.name.find_last_of('/') + 1)) +
                 kernel_plan_str(s, m->plan->kernels[s.id]);
    expect_golden("kernel_plan/" + model + ".txt", listing);
    for (const auto& s : m->plan->blocks) {
      const KernelPlan& k = m->plan->kernels[s.id];
      ASSERT_EQ(k.loc.size(), s.ops.size());
      int gemms = 0, fused = 0, matmuls = 0;
      for (const auto& op : s.ops) matmuls += op.rhs->op == OpId::MatMul;
      for (const KernelStep& st : k.steps) {
        gemms += st.kind == StepKind::Gemm;
        fused += st.kind == StepKind::Fused;
        // A fused loop stores only what escapes or is read outside it.
        if (st.kind == StepKind::Fused)
          for (int i = st.begin; i < st.end; ++i) {
            if (k.group[i] < 0 || !k.stored[i]) continue;
            bool read_outside = s.ops[i].escapes;
            for (size_t j = 0; j < s.ops.size(); ++j)
              for (const auto& o : s.ops[j].operands)
                read_outside = read_outside || (o.local && k.owner[o.index] == i && k.group[j] != k.group[i]);
            EXPECT_TRUE(read_outside) << model << " block " << s.id << " stores op " << i;
          }
      }
      // Every matmul of these cells multiplies by a weight matrix every instance shares: a GEMM.
      EXPECT_EQ(gemms, matmuls) << model << " block " << s.id;
      // The gates of an LSTM cell (sigmoid, tanh, products, sums) are one fused loop per size.
      if (matmuls > 0 && s.ops.size() > 6) {
        EXPECT_GE(fused, 1) << model << " block " << s.id;
      }
    }
  }
}

// MV-RNN's `WM @ concat(A, B, axis=0)`: the product reads A and B where they lie, and the concat's
// own step runs only in a run that keeps its value for the backward pass (the engines' outputs and
// gradients against the reference engine and PyTorch are the model tests'). A concat something
// else reads too, or one of pieces thinner than a vector, is stored and multiplied whole.
const char* kConcats = R"(dim H = 32
param W: f32[H, 2 * H]
param V: f32[H, 2]
def f(a: f32[H, H], b: f32[H, H], r: f32[1, H], q: f32[1, H]) -> (f32[H, H], f32[2 * H, H], f32[H, H], f32[H, H]) {
  let x = concat(a, b, axis=0);
  let y = concat(r, q, axis=0);
  (W @ x, x, V @ y, W @ concat(tanh(a), b, axis=0))
}
def main(n: int) -> f32[H, H] {
  let (p, x, t, u) = f(ones(H, H), zeros(H, H), ones(1, H), zeros(1, H));
  p + t + u
}
)";

TEST(KernelPlan, ConcatReadInPiecesByItsMatmul) {
  auto pieces_of = [](const ir::Module& m) {
    std::vector<std::pair<const StaticBlock*, int>> out;  // (block, matmul)
    for (const auto& s : m.plan->blocks) {
      const KernelPlan& k = m.plan->kernels[s.id];
      for (size_t i = 0; i < s.ops.size(); ++i) {
        if (k.concat_pieces.empty() || k.concat_pieces[i] < 0) continue;
        const int j = k.concat_pieces[i];
        EXPECT_EQ(s.ops[i].rhs->op, OpId::MatMul);
        EXPECT_EQ(s.ops[j].rhs->op, OpId::Concat);
        EXPECT_TRUE(k.only_when_kept[j]);
        out.emplace_back(&s, static_cast<int>(i));
      }
      for (size_t j = 0; j < s.ops.size(); ++j) {
        if (!k.only_when_kept.empty() && k.only_when_kept[j]) {
          EXPECT_TRUE(std::find(k.concat_pieces.begin(), k.concat_pieces.end(), static_cast<int>(j)) !=
                      k.concat_pieces.end());
        }
      }
    }
    return out;
  };
  auto mvrnn = compile_file(source("models/mvrnn.acr"));
  std::string listing;
  for (const auto& s : mvrnn->plan->blocks)
    listing += fmt::format("block #{} at {}\n", s.id, s.name.substr(s.name.find_last_of('/') + 1)) +
               kernel_plan_str(s, mvrnn->plan->kernels[s.id]);
  expect_golden("kernel_plan/mvrnn.txt", listing);
  auto found = pieces_of(*mvrnn);
  ASSERT_EQ(found.size(), 1u);
  // WM [H, 2H] by the phrase matrices A and B, [H, H] each.
  const BlockOp& mm = found[0].first->ops[size_t(found[0].second)];
  EXPECT_EQ(mm.shape, (std::vector<int64_t>{32, 32}));
  // Only the product by the concat of tanh(a) and b: x escapes, and y's pieces are single rows.
  auto m = compile(kConcats);
  found = pieces_of(*m);
  ASSERT_EQ(found.size(), 1u);
  const StaticBlock& s = *found[0].first;
  const BlockOp& cat = s.ops[size_t(m->plan->kernels[s.id].concat_pieces[size_t(found[0].second)])];
  ASSERT_TRUE(cat.operands[0].local);
  EXPECT_EQ(s.ops[size_t(cat.operands[0].index)].rhs->op, OpId::Tanh);
}

// `acrobat emit depth` on the Tree-LSTM (its classifier in a phase after the tree recursion) and the
// Stack-RNN (ghost padding on a match and an if), as the pipeline prints it after its last stage.
// The models are read under their relative names, so the listings do not depend on the checkout.
TEST(DepthPlan, EmitDepthOfTreeLstmAndStackRnn) {
  for (const std::string model : {"treelstm", "stackrnn"}) {
    std::ifstream in(source("models/" + model + ".acr"), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    std::ostringstream dump;
    CompileOptions o;
    o.print_after = "depth";
    o.dump = &dump;
    compile_checked(parse_model_text("models/" + model + ".acr", text.str(), {}), o);
    expect_golden("depth/" + model + ".txt", dump.str());
  }
}

}  // namespace
}  // namespace acrobat::analysis
