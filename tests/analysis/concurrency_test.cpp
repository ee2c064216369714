// Grouping of independent calls that may wait for tensors (analysis/concurrency.h): which bindings
// form groups, how the pass reorders the bindings around them, and where it must not.
#include <gtest/gtest.h>

#include "analysis/explain.h"
#include "analysis/plan.h"
#include "compiler/pipeline.h"
#include "lang/frontend.h"

namespace acrobat::analysis {
namespace {

std::shared_ptr<const ir::Module> compile(const std::string& text, AnalysisOptions a = {}) {
  CompileOptions o;
  o.analysis = a;
  return compile_checked(parse_model_text("test.acr", text, {}), o);
}

const ir::Function& function(const ir::Module& m, const std::string& name) {
  for (const auto& f : m.functions)
    if (f.name == name) return f;
  ADD_FAILURE() << "no function " << name;
  return m.functions[0];
}

int index_of(const ir::Module& m, const std::string& name) {
  return static_cast<int>(&function(m, name) - m.functions.data());
}

// The source names of a block's bindings, in order ("" for temporaries left out).
std::vector<std::string> named_bindings(const ir::Function& f, const ir::Block& b) {
  std::vector<std::string> out;
  for (const auto& bind : b.bindings)
    if (!f.vars[bind.var].name.empty()) out.push_back(f.vars[bind.var].name);
  return out;
}

// The sizes of the groups that start in `b` (not in nested blocks), in order.
std::vector<int> group_sizes(const ir::Module& m, const ir::Block& b) {
  std::vector<int> out;
  for (const auto& bind : b.bindings)
    if (int n = m.plan->concurrency.group_at(*bind.rhs)) out.push_back(n);
  return out;
}

const char* kPrefix = R"(dim H = 8
param W: f32[H, H]
param v: f32[H, 1]
def decide(x: f32[1, H]) -> bool { item(sigmoid(x @ v)) > 0.5 }
def step(x: f32[1, H]) -> f32[1, H] { tanh(x @ W) }
)";

TEST(Concurrency, IndependentReadsAndCallsFormGroupsAroundMovedHostWork) {
  auto m = compile(std::string(kPrefix) + R"(
def main(x: f32[1, H]) -> ((bool, bool), bool, int) {
  let h = step(x);
  let a = decide(h);
  let n = 3 + 4;
  let b = decide(x);
  let pair = (a, b);
  let m = n * 2;
  let c = decide(h);
  let y = if a { decide(step(h)) } else { false };
  let z = if b { decide(h) } else { c };
  (pair, y && z, m)
}
)");
  const ir::Function& f = function(*m, "main");
  // a, b and c are independent reads: n and m read none of them and move before the group, pair
  // reads a and b and moves after it. The ifs read the first group's results, not each other's:
  // a second group.
  EXPECT_EQ(named_bindings(f, f.body),
            (std::vector<std::string>{"h", "n", "m", "a", "b", "c", "pair", "y", "z"}));
  EXPECT_EQ(group_sizes(*m, f.body), (std::vector<int>{3, 2}));
  EXPECT_TRUE(m->plan->concurrency.may_suspend[index_of(*m, "main")]);
  EXPECT_TRUE(m->plan->concurrency.may_suspend[index_of(*m, "decide")]);
  EXPECT_FALSE(m->plan->concurrency.may_suspend[index_of(*m, "step")]);
  std::string text = explain(*m);
  EXPECT_NE(text.find("concurrent on"), std::string::npos);
  EXPECT_NE(text.find("  concurrent: test.acr:9:11, test.acr:11:11, test.acr:14:11\n"),
            std::string::npos)
      << text;
}

TEST(Concurrency, DependentCallsFailingHostWorkAndTensorWorkEndAGroup) {
  auto m = compile(std::string(kPrefix) + R"(
def main(x: f32[1, H]) -> (int, f32[1, H]) {
  let zero = 3 - 3;
  let a = decide(x);
  let b = if a { decide(step(x)) } else { false };
  let c = decide(x);
  let q = 10 / zero;
  let d = decide(x);
  let t = tanh(x);
  let e = decide(x);
  let g = decide(x);
  (if b && c && d && e && g { q } else { 0 }, t)
}
)");
  const ir::Function& f = function(*m, "main");
  // b reads a: no group. b and c are independent: a group. The division may fail, so it cannot
  // move after d (d's error would come first): c and d stay apart. Tensor work ends a group too
  // (it stays in its static block): d and e stay apart; e and g group.
  EXPECT_EQ(group_sizes(*m, f.body), (std::vector<int>{2, 2}));
  EXPECT_EQ(named_bindings(f, f.body),
            (std::vector<std::string>{"zero", "a", "b", "c", "q", "d", "t", "e", "g"}));
}

TEST(Concurrency, NothingGroupsWithoutTensorReadsOrWhenSwitchedOff) {
  auto tree = compile(std::string(kPrefix) + R"(
def main(x: f32[1, H]) -> f32[1, H] { step(x) + step(step(x)) }
)");
  EXPECT_EQ(tree->plan->concurrency.num_groups, 0);
  AnalysisOptions off;
  off.concurrent = false;
  auto m = compile(std::string(kPrefix) + R"(
def main(x: f32[1, H]) -> bool { decide(x) && decide(step(x)) || decide(x) }
)", off);
  EXPECT_EQ(m->plan->concurrency.num_groups, 0);
  EXPECT_NE(explain(*m).find("concurrent off"), std::string::npos);
}

TEST(Concurrency, TheTreeDecoderForksItsTwoDecisionsAndItsTwoSubtrees) {
  CompileOptions o;
  o.dims["H"] = 16;
  auto m = compile_model(std::string(ACROBAT_SOURCE_DIR) + "/models/drnn.acr", o);
  const ir::Function& grow = function(*m, "grow");
  EXPECT_EQ(group_sizes(*m, grow.body), (std::vector<int>{2, 2}));
  std::vector<std::string> names = named_bindings(grow, grow.body);
  EXPECT_EQ(names, (std::vector<std::string>{"h", "has_child", "has_sibling", "below", "below_count",
                                             "after", "after_count"}))
      << "the projections of the first subtree's result move after the second subtree";
}

}  // namespace
}  // namespace acrobat::analysis
