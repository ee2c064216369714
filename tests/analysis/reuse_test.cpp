// analyse_param_reuse on small programs and on the shipped models: the classification of variables
// looked up by function and variable name, the clones made per calling context, and that the cloned
// module computes exactly what the original does.
#include <functional>

#include "analysis/reuse.h"
#include "ir/walk.h"
#include "lang/lang_test_util.h"
#include "transforms/specialise.h"

namespace acrobat::test {
namespace {

using ir::for_each_block;

using analysis::ArgMode;
using analysis::ReuseOptions;

void for_each_binding(const ir::Function& f, const std::function<void(const ir::Binding&)>& fn) {
  for_each_block(f.body, [&](const ir::Block& block) {
    for (const auto& b : block.bindings) fn(b);
  });
}

// A program lowered and specialised (as the pipeline does before this analysis), then analysed.
struct Analysed {
  std::shared_ptr<const ir::Module> before;  // before the analysis
  std::shared_ptr<ir::Module> module;        // after it, clones included
  analysis::ReuseInfo info;

  const ir::Function& function(const std::string& name) const {
    int f = module->find_function(name);
    if (f < 0) throw std::runtime_error("no function " + name);
    return module->functions[f];
  }

  // "reuse @W", "indexed @emb" or "scatter" for the first variable called `var` in `fn`.
  std::string mode(const std::string& fn, const std::string& var) const {
    int f = module->find_function(fn);
    if (f < 0) return "<no function " + fn + ">";
    const auto& vars = module->functions[f].vars;
    for (size_t v = 0; v < vars.size(); ++v)
      if (vars[v].name == var) return describe(info.origins[f][v]);
    return "<no variable " + var + " in " + fn + ">";
  }

  std::string describe(const analysis::Origin& o) const {
    std::string mode = analysis::arg_mode_name(o.mode);
    return o.mode == ArgMode::Scatter ? mode : mode + " @" + module->params[o.param].name;
  }

  std::vector<std::string> clone_names() const {
    std::vector<std::string> out;
    for (const auto& c : info.clones) out.push_back(c.clone);
    return out;
  }

  const analysis::CloneRecord& clone(const std::string& name) const {
    for (const auto& c : info.clones)
      if (c.clone == name) return c;
    throw std::runtime_error("no clone " + name);
  }

  // The names of the functions `caller` calls directly, in order.
  std::vector<std::string> callees(const std::string& caller) const {
    std::vector<std::string> out;
    for_each_binding(function(caller), [&](const ir::Binding& b) {
      if (b.rhs->kind == ir::RhsKind::Call && b.rhs->callee_func >= 0)
        out.push_back(module->functions[b.rhs->callee_func].name);
    });
    return out;
  }

  // Both modules give identical outputs on `instances` (with the same random weights).
  void expect_same_outputs(const std::vector<nlohmann::json>& instances) const {
    auto params = std::make_shared<ParamStore>(init_params(*before, 3));
    EXPECT_EQ(run_json(before, instances, params), run_json(module, instances, params));
  }
};

Analysed analyse_module(ir::Module lowered, const ReuseOptions& options) {
  Analysed a;
  ir::Module specialised = specialise_higher_order(std::move(lowered)).module;
  a.before = std::make_shared<const ir::Module>(specialised);
  analysis::Reused r = analysis::analyse_param_reuse(std::move(specialised), options);
  a.module = std::make_shared<ir::Module>(std::move(r.module));
  a.info = std::move(r.info);
  EXPECT_EQ(a.info.origins.size(), a.module->functions.size());
  for (size_t f = 0; f < a.info.origins.size() && f < a.module->functions.size(); ++f)
    EXPECT_EQ(a.info.origins[f].size(), a.module->functions[f].vars.size())
        << a.module->functions[f].name;
  // Later passes key what they find by node: clones must not share nodes with their originals.
  std::map<const ir::Rhs*, std::string> owner;
  for (const auto& f : a.module->functions)
    for_each_binding(f, [&](const ir::Binding& b) {
      auto [it, fresh] = owner.emplace(b.rhs.get(), f.name);
      EXPECT_TRUE(fresh) << "a node of " << f.name << " is also in " << it->second;
    });
  return a;
}

Analysed analyse(const std::string& text, const ReuseOptions& options = {}) {
  return analyse_module(lower_to_ir(parse_model_text("test.acr", text, {})), options);
}

Analysed analyse_model(const std::string& path, const ReuseOptions& options = {}) {
  return analyse_module(lower_to_ir(parse_model_file(source_path(path), {{"H", 8}})), options);
}

// Declarations shared by the small programs.
const std::string kDecls = R"(
dim H = 4
param emb[10]: f32[1, 4]
param W1: f32[4, 4]
param W2: f32[4, 4]
param W3: f32[4, 4]
param W4: f32[4, 4]
param b1: f32[1, 4]
param b2: f32[1, 4]
)";

nlohmann::json tree(const std::string& text) { return nlohmann::json::parse(text); }

const std::vector<nlohmann::json> kTrees = {
    tree(R"({"Leaf": [3]})"),
    tree(R"({"Node": [{"Leaf": [1]}, {"Leaf": [2]}]})"),
    tree(R"({"Node": [{"Node": [{"Leaf": [4]}, {"Leaf": [5]}]},
                      {"Node": [{"Leaf": [6]}, {"Node": [{"Leaf": [7]}, {"Leaf": [8]}]}]}]})"),
};

TEST(Reuse, ParamLoadAndIndex) {
  auto a = analyse(kDecls + R"(
def main(w: int) -> f32[1, 4] {
  let x = emb[w];
  let V = W1;
  let y = x @ V;
  let z = tanh(y);
  z
}
)");
  EXPECT_EQ(a.mode("main", "x"), "indexed @emb");
  EXPECT_EQ(a.mode("main", "V"), "reuse @W1");
  EXPECT_EQ(a.mode("main", "y"), "scatter");
  EXPECT_EQ(a.mode("main", "z"), "scatter");
  EXPECT_EQ(a.mode("main", "w"), "scatter");
  EXPECT_TRUE(a.info.clones.empty());
}

// A user function called with weights gets a clone for them; the original keeps the context in
// which it is an entry (every parameter scatter).
TEST(Reuse, WeightsPassedAsArguments) {
  auto a = analyse(kDecls + R"(
def cell(U: f32[4, 4], b: f32[1, 4], h: f32[1, 4]) -> f32[1, 4] {
  let z = h @ U + b;
  tanh(z)
}
def main(w: int) -> f32[1, 4] {
  let x = tanh(emb[w]);
  cell(W1, b1, x)
}
)");
  EXPECT_EQ(a.clone_names(), (std::vector<std::string>{"cell$1"}));
  EXPECT_EQ(a.mode("cell$1", "U"), "reuse @W1");
  EXPECT_EQ(a.mode("cell$1", "b"), "reuse @b1");
  EXPECT_EQ(a.mode("cell$1", "h"), "scatter");
  EXPECT_EQ(a.mode("cell$1", "z"), "scatter");
  EXPECT_EQ(a.mode("cell", "U"), "scatter");
  EXPECT_EQ(a.callees("main"), (std::vector<std::string>{"cell$1"}));
  const auto& record = a.clone("cell$1");
  EXPECT_EQ(record.original, "cell");
  EXPECT_EQ(record.reason, "%U = @W1, %b = @b1");
  EXPECT_EQ(record.call_sites, (std::vector<std::string>{"test.acr:17:3"}));
  a.expect_same_outputs({0, 4, 9});
}

const std::string kTwoWeights = kDecls + R"(
def cell(U: f32[4, 4], h: f32[1, 4]) -> f32[1, 4] { tanh(h @ U) }
def main(w: int) -> f32[1, 4] {
  let h1 = cell(W1, tanh(emb[w]));
  cell(W2, h1)
}
)";

TEST(Reuse, TwoWeightsTwoClones) {
  auto a = analyse(kTwoWeights);
  EXPECT_EQ(a.clone_names(), (std::vector<std::string>{"cell$1", "cell$2"}));
  EXPECT_EQ(a.mode("cell$1", "U"), "reuse @W1");
  EXPECT_EQ(a.mode("cell$2", "U"), "reuse @W2");
  EXPECT_EQ(a.mode("cell", "U"), "scatter");
  EXPECT_EQ(a.callees("main"), (std::vector<std::string>{"cell$1", "cell$2"}));
  EXPECT_EQ(a.clone("cell$2").reason, "%U = @W2");
  a.expect_same_outputs({0, 1, 7});
}

TEST(Reuse, WithoutCloningDisagreeingContextsAreScatter) {
  ReuseOptions no_clone;
  no_clone.clone = false;
  auto a = analyse(kTwoWeights, no_clone);
  EXPECT_TRUE(a.info.clones.empty());
  EXPECT_EQ(a.module->functions.size(), a.before->functions.size());
  EXPECT_EQ(a.mode("cell", "U"), "scatter");
  EXPECT_EQ(a.callees("main"), (std::vector<std::string>{"cell", "cell"}));
}

// Past max_clones_per_function, the remaining contexts go to the original, which is scatter.
TEST(Reuse, CloneLimit) {
  ReuseOptions two;
  two.max_clones_per_function = 2;
  auto a = analyse(kDecls + R"(
def cell(U: f32[4, 4], h: f32[1, 4]) -> f32[1, 4] { tanh(h @ U) }
def main(w: int) -> f32[1, 4] { cell(W4, cell(W3, cell(W2, cell(W1, emb[w])))) }
)", two);
  EXPECT_EQ(a.clone_names(), (std::vector<std::string>{"cell$1", "cell$2"}));
  EXPECT_EQ(a.mode("cell$1", "U"), "reuse @W1");
  EXPECT_EQ(a.mode("cell$2", "U"), "reuse @W2");
  EXPECT_EQ(a.mode("cell", "U"), "scatter");
  EXPECT_EQ(a.callees("main"), (std::vector<std::string>{"cell$1", "cell$2", "cell", "cell"}));
  a.expect_same_outputs({2, 5});
}

// A function that is not an entry (a specialised copy) keeps its original for the first key; past
// the limit, the remaining contexts share one merged clone.
TEST(Reuse, CloneLimitWithoutRootContext) {
  ReuseOptions one;
  one.max_clones_per_function = 1;
  auto a = analyse(kDecls + R"(
def act(x: f32[1, 4]) -> f32[1, 4] { tanh(x) }
def run(f: fn(f32[1, 4]) -> f32[1, 4], W: f32[4, 4], x: f32[1, 4]) -> f32[1, 4] { f(x @ W) }
def main(w: int) -> f32[1, 4] {
  let x = emb[w];
  run(act, W1, x) + run(act, W2, x) + run(act, W3, x) + run(act, W4, x)
}
)", one);
  EXPECT_EQ(a.callees("main"),
            (std::vector<std::string>{"run$act", "run$act$1", "run$act$2", "run$act$2"}));
  EXPECT_EQ(a.mode("run$act", "W"), "reuse @W1");
  EXPECT_EQ(a.mode("run$act$1", "W"), "reuse @W2");
  EXPECT_EQ(a.mode("run$act$2", "W"), "scatter");
  EXPECT_EQ(a.mode("run$act$2", "x"), "indexed @emb");  // the contexts agree on x
  EXPECT_EQ(a.clone("run$act$2").reason, "contexts beyond the first 1 clones, joined");
  EXPECT_EQ(a.clone("run$act$2").call_sites.size(), 2u);
  a.expect_same_outputs({1, 6});
}

// Two sites passing the same weight share one clone of a user function; a function that is not an
// entry (here a lambda, after specialisation) is not cloned at all.
TEST(Reuse, SameWeightFromTwoSites) {
  auto a = analyse(kDecls + R"(
def cell(U: f32[4, 4], h: f32[1, 4]) -> f32[1, 4] { tanh(h @ U) }
def main(words: List[int]) -> f32[1, 4] {
  let U = W1;
  let f = fn(h: f32[1, 4], w: int) { tanh(emb[w] + h @ U) };
  let a = foldl(f, zeros(1, 4), words);
  let b = foldl(f, a, reverse(words));
  cell(W2, cell(W2, b))
}
)");
  EXPECT_EQ(a.clone_names(), (std::vector<std::string>{"cell$1"}));
  EXPECT_EQ(a.clone("cell$1").call_sites.size(), 2u);
  EXPECT_EQ(a.mode("cell$1", "U"), "reuse @W2");
  EXPECT_EQ(a.mode("foldl$main$lambda0", "U"), "reuse @W1");
  EXPECT_EQ(a.mode("main$lambda0", "U"), "reuse @W1");
  a.expect_same_outputs({nlohmann::json::array({1, 2, 3}), nlohmann::json::array()});
}

// Mutual recursion over a tree: even depths use (A, B) = (W1, W2), odd depths the swap. One clone
// of each function, calling each other.
TEST(Reuse, MutualRecursionAlternatingWeights) {
  auto a = analyse(kDecls + R"(
def even(A: f32[4, 4], B: f32[4, 4], t: Tree) -> f32[1, 4] {
  match t {
    Leaf(w) => emb[w] @ A,
    Node(l, r) => tanh((odd(B, A, l) + odd(B, A, r)) @ A),
  }
}
def odd(A: f32[4, 4], B: f32[4, 4], t: Tree) -> f32[1, 4] {
  match t {
    Leaf(w) => emb[w] @ A,
    Node(l, r) => tanh((even(B, A, l) + even(B, A, r)) @ A),
  }
}
def main(t: Tree) -> f32[1, 4] { even(W1, W2, t) }
)");
  EXPECT_EQ(a.clone_names(), (std::vector<std::string>{"even$1", "odd$1"}));
  EXPECT_EQ(a.mode("even$1", "A"), "reuse @W1");
  EXPECT_EQ(a.mode("even$1", "B"), "reuse @W2");
  EXPECT_EQ(a.mode("odd$1", "A"), "reuse @W2");
  EXPECT_EQ(a.mode("odd$1", "B"), "reuse @W1");
  EXPECT_EQ(a.callees("even$1"), (std::vector<std::string>{"odd$1", "odd$1"}));
  EXPECT_EQ(a.callees("odd$1"), (std::vector<std::string>{"even$1", "even$1"}));
  EXPECT_EQ(a.clone("even$1").reason, "%A = @W1, %B = @W2");
  a.expect_same_outputs(kTrees);
}

// The same alternation within one function: two clones that call each other, and no more.
TEST(Reuse, SelfRecursionSwappingWeights) {
  auto a = analyse(kDecls + R"(
def alt(A: f32[4, 4], B: f32[4, 4], t: Tree) -> f32[1, 4] {
  match t {
    Leaf(w) => emb[w] @ A,
    Node(l, r) => tanh((alt(B, A, l) + alt(B, A, r)) @ A),
  }
}
def main(t: Tree) -> f32[1, 4] { alt(W1, W2, t) }
)");
  EXPECT_EQ(a.clone_names(), (std::vector<std::string>{"alt$1", "alt$2"}));
  EXPECT_EQ(a.mode("alt$1", "A"), "reuse @W1");
  EXPECT_EQ(a.mode("alt$2", "A"), "reuse @W2");
  EXPECT_EQ(a.callees("alt$1"), (std::vector<std::string>{"alt$2", "alt$2"}));
  EXPECT_EQ(a.callees("alt$2"), (std::vector<std::string>{"alt$1", "alt$1"}));
  a.expect_same_outputs(kTrees);
}

// Two functions that are not entries (specialised copies) call each other, and are entered with
// different weights: each gets a clone for the other's weight, and the clones made on the way (for
// their joined contexts) are gone in the end.
TEST(Reuse, MutualRecursionBetweenNonEntryFunctions) {
  auto a = analyse(kDecls + R"(
def act(x: f32[1, 4]) -> f32[1, 4] { tanh(x) }
def ping(f: fn(f32[1, 4]) -> f32[1, 4], W: f32[4, 4], t: Tree) -> f32[1, 4] {
  match t { Leaf(w) => f(emb[w] @ W), Node(l, r) => pong(f, W, l) + pong(f, W, r) }
}
def pong(f: fn(f32[1, 4]) -> f32[1, 4], W: f32[4, 4], t: Tree) -> f32[1, 4] {
  match t { Leaf(w) => f(emb[w] @ W) * 2.0, Node(l, r) => ping(f, W, l) - ping(f, W, r) }
}
def main(t: Tree) -> f32[1, 4] { ping(act, W1, t) + pong(act, W2, t) }
)");
  EXPECT_EQ(a.callees("main"), (std::vector<std::string>{"ping$act", "pong$act"}));
  EXPECT_EQ(a.mode("ping$act", "W"), "reuse @W1");
  EXPECT_EQ(a.mode("pong$act", "W"), "reuse @W2");
  ASSERT_EQ(a.info.clones.size(), 2u);
  std::string pong_w1 = a.callees("ping$act")[1];
  std::string ping_w2 = a.callees("pong$act")[1];
  EXPECT_EQ(a.clone(pong_w1).original, "pong$act");
  EXPECT_EQ(a.clone(ping_w2).original, "ping$act");
  EXPECT_EQ(a.mode(pong_w1, "W"), "reuse @W1");
  EXPECT_EQ(a.mode(ping_w2, "W"), "reuse @W2");
  EXPECT_EQ(a.callees(pong_w1)[1], "ping$act");
  EXPECT_EQ(a.callees(ping_w2)[1], "pong$act");
  a.expect_same_outputs(kTrees);
}

// A lambda inside a function called with two weights: the function, the specialised fold and the
// lambda each get a clone per weight.
TEST(Reuse, LambdaInsideClonedFunction) {
  auto a = analyse(kDecls + R"(
def encode(U: f32[4, 4], words: List[int]) -> f32[1, 4] {
  foldl(fn(h, w) { tanh(emb[w] + h @ U) }, zeros(1, 4), words)
}
def main(words: List[int]) -> f32[1, 4] { encode(W1, words) + encode(W2, reverse(words)) }
)");
  for (auto [clone, weight] : {std::pair{"encode$1", "W1"}, std::pair{"encode$2", "W2"}}) {
    SCOPED_TRACE(clone);
    EXPECT_EQ(a.mode(clone, "U"), std::string("reuse @") + weight);
    auto fold = a.callees(clone);
    ASSERT_EQ(fold.size(), 1u);
    EXPECT_EQ(a.mode(fold[0], "U"), std::string("reuse @") + weight);
    std::string lambda = a.callees(fold[0])[0];
    EXPECT_EQ(a.clone(lambda).original, "encode$lambda0");
    EXPECT_EQ(a.mode(lambda, "U"), std::string("reuse @") + weight);
  }
  EXPECT_EQ(a.info.clones.size(), 6u);
  a.expect_same_outputs({nlohmann::json::array({1, 2, 3}), nlohmann::json::array({9})});
}

// A weight passed down a tree recursion: one clone, whose recursive calls stay in it.
TEST(Reuse, WeightPassedThroughTreeRecursion) {
  auto a = analyse(kDecls + R"(
def f(W: f32[4, 4], t: Tree) -> f32[1, 4] {
  match t {
    Leaf(w) => emb[w] @ W,
    Node(l, r) => tanh((f(W, l) + f(W, r)) @ W),
  }
}
def main(t: Tree) -> f32[1, 4] { f(W1, t) }
)");
  EXPECT_EQ(a.clone_names(), (std::vector<std::string>{"f$1"}));
  EXPECT_EQ(a.mode("f$1", "W"), "reuse @W1");
  EXPECT_EQ(a.mode("f$1", "w"), "scatter");
  EXPECT_EQ(a.callees("f$1"), (std::vector<std::string>{"f$1", "f$1"}));
  EXPECT_EQ(a.callees("f"), (std::vector<std::string>{"f", "f"}));
  EXPECT_EQ(a.mode("f", "W"), "scatter");
  a.expect_same_outputs(kTrees);
}

// After specialise_higher_order, a weight captured by a folded lambda is reuse inside the lambda,
// and so is one the lambda hands to a user function.
TEST(Reuse, HigherOrderPreludeCalls) {
  auto a = analyse(kDecls + R"(
def step(V: f32[4, 4], h: f32[1, 4]) -> f32[1, 4] { tanh(h @ V) }
def main(words: List[int]) -> f32[1, 4] {
  let U = W1;
  let V = W2;
  let h = foldl(fn(h, w) { let z = h @ U; tanh(emb[w] + z) }, zeros(1, 4), words);
  let hs = map(fn(x) { step(V, x) }, Cons(h, Nil));
  foldl(fn(acc, x) { acc + x }, zeros(1, 4), hs)
}
)");
  EXPECT_EQ(a.mode("main$lambda0", "U"), "reuse @W1");
  EXPECT_EQ(a.mode("main$lambda0", "z"), "scatter");
  EXPECT_EQ(a.mode("foldl$main$lambda0", "U"), "reuse @W1");
  EXPECT_EQ(a.mode("main$lambda1", "V"), "reuse @W2");
  EXPECT_EQ(a.mode("step$1", "V"), "reuse @W2");
  EXPECT_EQ(a.clone_names(), (std::vector<std::string>{"step$1"}));
  a.expect_same_outputs({nlohmann::json::array({1, 2, 3}), nlohmann::json::array({8})});
}

TEST(Reuse, TuplesOfWeights) {
  auto a = analyse(kDecls + R"(
def weights() -> (f32[4, 4], f32[1, 4]) { (W1, b1) }
def cell(wb: (f32[4, 4], f32[1, 4]), h: f32[1, 4]) -> f32[1, 4] {
  let (M, c) = wb;
  tanh(h @ M + c)
}
def main(w: int) -> f32[1, 4] {
  let (Wa, ba) = (W2, b2);
  let h = tanh(emb[w] @ Wa + ba);
  let p = weights();
  let (Mp, cp) = p;
  cell(p, h @ Mp + cp)
}
)");
  EXPECT_EQ(a.mode("main", "Wa"), "reuse @W2");
  EXPECT_EQ(a.mode("main", "ba"), "reuse @b2");
  EXPECT_EQ(a.mode("main", "Mp"), "reuse @W1");
  EXPECT_EQ(a.mode("main", "cp"), "reuse @b1");
  EXPECT_EQ(a.mode("main", "h"), "scatter");
  EXPECT_EQ(a.clone_names(), (std::vector<std::string>{"cell$1"}));
  EXPECT_EQ(a.mode("cell$1", "M"), "reuse @W1");
  EXPECT_EQ(a.mode("cell$1", "c"), "reuse @b1");
  EXPECT_EQ(a.clone("cell$1").reason, "%wb.0 = @W1, %wb.1 = @b1");
  a.expect_same_outputs({0, 3});
}

TEST(Reuse, IfChoosingBetweenWeights) {
  auto a = analyse(kDecls + R"(
def main(w: int) -> f32[1, 4] {
  let V = if w > 4 { W1 } else { W2 };
  let S = if w > 4 { W1 } else { W1 };
  let E = if w > 4 { emb[w] } else { emb[0] };
  E @ V + E @ S
}
)");
  EXPECT_EQ(a.mode("main", "V"), "scatter");
  EXPECT_EQ(a.mode("main", "S"), "reuse @W1");
  EXPECT_EQ(a.mode("main", "E"), "indexed @emb");
}

// Results of operators and whatever comes out of a data type are per-instance values.
TEST(Reuse, PerInstanceTensorsAreScatter) {
  auto a = analyse(kDecls + R"(
type Box = Box(f32[4, 4])
def main(w: int) -> f32[1, 4] {
  let b = Box(W1);
  let M = match b { Box(inner) => inner };
  let xs = Cons(W2, Nil);
  let N = match xs { Cons(m, _) => m, Nil => W2 };
  let P = W1 * 2.0;
  emb[w] @ M + emb[w] @ N + emb[w] @ P
}
)");
  EXPECT_EQ(a.mode("main", "inner"), "scatter");
  EXPECT_EQ(a.mode("main", "M"), "scatter");
  EXPECT_EQ(a.mode("main", "m"), "scatter");
  EXPECT_EQ(a.mode("main", "N"), "scatter");
  EXPECT_EQ(a.mode("main", "P"), "scatter");
}

// ---- the shipped models ----

// For every matmul in `fn`: the origins of its operands that are loaded params.
void expect_param_operands_classified(const Analysed& a) {
  for (size_t f = 0; f < a.module->functions.size(); ++f) {
    const auto& fn = a.module->functions[f];
    std::map<int, const ir::Rhs*> def;
    for_each_binding(fn, [&](const ir::Binding& b) { def[b.var] = b.rhs.get(); });
    for_each_binding(fn, [&](const ir::Binding& b) {
      if (b.rhs->kind != ir::RhsKind::Op || b.rhs->op != OpId::MatMul) return;
      for (const auto& arg : b.rhs->args) {
        const ir::Rhs* d = def.count(arg.var) ? def.at(arg.var) : nullptr;
        if (!d) continue;
        const auto& origin = a.info.origins[f][arg.var];
        if (d->kind == ir::RhsKind::ParamLoad) {
          EXPECT_EQ(origin.mode, ArgMode::Reuse) << fn.name << " %" << arg.var;
          EXPECT_EQ(origin.param, d->index);
        }
        if (d->kind == ir::RhsKind::ParamIndex) {
          EXPECT_EQ(origin.mode, ArgMode::Indexed) << fn.name << " %" << arg.var;
          EXPECT_EQ(origin.param, d->index);
        }
      }
    });
  }
}

// The origin of every matmul's right operand in functions reachable from main.
std::vector<std::string> right_operands(const Analysed& a, const std::string& fn) {
  std::vector<std::string> out;
  int f = a.module->find_function(fn);
  for_each_binding(a.module->functions[f], [&](const ir::Binding& b) {
    if (b.rhs->kind == ir::RhsKind::Op && b.rhs->op == OpId::MatMul)
      out.push_back(a.describe(a.info.origins[f][b.rhs->args[1].var]));
  });
  return out;
}

TEST(Reuse, TreeLstm) {
  auto a = analyse_model("models/treelstm.acr");
  EXPECT_TRUE(a.info.clones.empty());
  expect_param_operands_classified(a);
  EXPECT_EQ(right_operands(a, "leaf_cell"), (std::vector<std::string>{"reuse @W_leaf"}));
  EXPECT_EQ(right_operands(a, "child_gates"), (std::vector<std::string>{"indexed @U_node"}));
  EXPECT_EQ(right_operands(a, "classify"), (std::vector<std::string>{"reuse @W_out"}));
  EXPECT_EQ(a.mode("node_cell", "hl"), "scatter");
  EXPECT_EQ(a.mode("node_cell", "cl"), "scatter");
  a.expect_same_outputs({kTrees[0], kTrees[2]});
}

TEST(Reuse, BiRnn) {
  auto a = analyse_model("models/birnn.acr");
  EXPECT_TRUE(a.info.clones.empty());
  expect_param_operands_classified(a);
  EXPECT_EQ(right_operands(a, "forward"), (std::vector<std::string>{"reuse @Wf_x", "reuse @Wf_h"}));
  EXPECT_EQ(right_operands(a, "backward"),
            (std::vector<std::string>{"reuse @Wb_x", "reuse @Wb_h"}));
  EXPECT_EQ(right_operands(a, "main"), (std::vector<std::string>{"reuse @W_out"}));
  EXPECT_EQ(a.mode("forward", "h"), "scatter");
  EXPECT_EQ(a.mode("main", "hf"), "scatter");
  // emb[w]
  int f = a.module->find_function("forward");
  bool found = false;
  for_each_binding(a.module->functions[f], [&](const ir::Binding& b) {
    if (b.rhs->kind == ir::RhsKind::ParamIndex) {
      EXPECT_EQ(a.describe(a.info.origins[f][b.var]), "indexed @emb");
      found = true;
    }
  });
  EXPECT_TRUE(found);
}

TEST(Reuse, MvRnn) {
  auto a = analyse_model("models/mvrnn.acr");
  // The loss classifies a leaf's vector, a row of emb, as well as computed vectors: one clone of
  // the classifier reads it as an indexed param.
  ASSERT_EQ(a.info.clones.size(), 1u);
  EXPECT_EQ(a.info.clones[0].original, "classify");
  EXPECT_EQ(a.info.clones[0].reason, "%p = @emb[...]");
  expect_param_operands_classified(a);
  // Per-node matrices are per-instance; the word matrix of a leaf is a row of wmat.
  EXPECT_EQ(right_operands(a, "node"),
            (std::vector<std::string>{"scatter", "scatter", "reuse @W", "scatter"}));
  EXPECT_EQ(a.mode("node", "A"), "scatter");
  EXPECT_EQ(a.mode("node", "B"), "scatter");
  EXPECT_EQ(a.mode("node", "P"), "scatter");
  int f = a.module->find_function("leaf");
  std::vector<std::string> indexed;
  for_each_binding(a.module->functions[f], [&](const ir::Binding& b) {
    if (b.rhs->kind == ir::RhsKind::ParamIndex)
      indexed.push_back(a.describe(a.info.origins[f][b.var]));
  });
  EXPECT_EQ(indexed, (std::vector<std::string>{"indexed @emb", "indexed @wmat"}));
  a.expect_same_outputs({kTrees[1], kTrees[2]});
}

}  // namespace
}  // namespace acrobat::test
