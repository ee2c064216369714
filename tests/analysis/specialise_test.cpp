// specialise_higher_order on small programs and on the BiRNN: which copies it makes, that the calls
// it leaves are direct, that it leaves escaping function values alone, and that the specialised
// module computes exactly what the original does.
#include <functional>
#include <set>

#include "ir/verify.h"
#include "ir/walk.h"
#include "lang/lang_test_util.h"
#include "transforms/specialise.h"

namespace acrobat::test {
namespace {

using ir::for_each_block;

// The module as lowering leaves it (compile_text runs the whole pipeline, this pass included).
std::shared_ptr<ir::Module> lower_text(const std::string& text) {
  return std::make_shared<ir::Module>(lower_to_ir(parse_model_text("test.acr", text, {})));
}

void for_each_rhs(const ir::Function& f, const std::function<void(const ir::Rhs&)>& fn) {
  for_each_block(f.body, [&](const ir::Block& block) {
    for (const auto& b : block.bindings) fn(*b.rhs);
  });
}

const ir::Function& function(const ir::Module& m, const std::string& name) {
  int f = m.find_function(name);
  if (f < 0) throw std::runtime_error("no function " + name);
  return m.functions[f];
}

// Functions reachable from `entry` through direct calls, closures and function values.
std::set<std::string> reachable(const ir::Module& m, const std::string& entry) {
  std::set<int> seen;
  std::vector<int> stack = {m.find_function(entry)};
  while (!stack.empty()) {
    int f = stack.back();
    stack.pop_back();
    if (!seen.insert(f).second) continue;
    for_each_rhs(m.functions[f], [&](const ir::Rhs& r) {
      if (r.callee_func >= 0) stack.push_back(r.callee_func);
      for (const auto& a : r.args)
        if (a.kind == ir::Atom::Func) stack.push_back(a.func);
    });
  }
  std::set<std::string> names;
  for (int f : seen) names.insert(m.functions[f].name);
  return names;
}

int count_rhs(const ir::Function& f, const std::function<bool(const ir::Rhs&)>& pred) {
  int n = 0;
  for_each_rhs(f, [&](const ir::Rhs& r) { n += pred(r) ? 1 : 0; });
  return n;
}

bool is_indirect_call(const ir::Rhs& r) { return r.kind == ir::RhsKind::Call && r.callee_func < 0; }
bool is_closure(const ir::Rhs& r) { return r.kind == ir::RhsKind::MakeClosure; }

void expect_no_indirect_calls_from(const ir::Module& m, const std::string& entry) {
  for (const auto& name : reachable(m, entry))
    EXPECT_EQ(count_rhs(function(m, name), is_indirect_call), 0) << "indirect call in " << name;
}

// The names of the functions `caller` calls directly, in order.
std::vector<std::string> direct_callees(const ir::Module& m, const std::string& caller) {
  std::vector<std::string> out;
  for_each_rhs(function(m, caller), [&](const ir::Rhs& r) {
    if (r.kind == ir::RhsKind::Call && r.callee_func >= 0)
      out.push_back(m.functions[r.callee_func].name);
  });
  return out;
}

// The direct calls of `callee` in `caller`.
std::vector<const ir::Rhs*> calls_of(const ir::Module& m, const std::string& caller,
                                     const std::string& callee) {
  std::vector<const ir::Rhs*> out;
  int target = m.find_function(callee);
  for_each_rhs(function(m, caller), [&](const ir::Rhs& r) {
    if (r.kind == ir::RhsKind::Call && r.callee_func == target) out.push_back(&r);
  });
  return out;
}

std::string var_name(const ir::Function& f, const ir::Atom& a) {
  return a.kind == ir::Atom::Var ? f.vars[a.var].name : "<not a variable>";
}

bool has_record(const std::vector<SpecialisationRecord>& records, const std::string& callee,
                const std::string& argument, const std::string& specialised) {
  for (const auto& r : records)
    if (r.callee == callee && r.argument == argument && r.specialised == specialised) return true;
  return false;
}

// Specialises a copy of `original` and checks that both give identical outputs on `instances`.
std::vector<SpecialisationRecord> specialise_and_compare(
    const std::shared_ptr<ir::Module>& module, const std::vector<nlohmann::json>& instances) {
  auto original = std::make_shared<const ir::Module>(*module);
  Specialised s = specialise_higher_order(std::move(*module));
  *module = std::move(s.module);
  auto records = std::move(s.records);
  // Well formed: variables in scope, call arities, no node shared between functions, ...
  EXPECT_EQ(ir::find_ir_problem(*module, "specialise"), "");
  auto params = std::make_shared<ParamStore>(init_params(*original, 7));
  EXPECT_EQ(run_json(original, instances, params), run_json(module, instances, params));
  return records;
}

TEST(Specialise, BiRnnFoldsBecomeDirectCalls) {
  auto m = std::make_shared<ir::Module>(
      lower_to_ir(parse_model_file(source_path("models/birnn.acr"), {{"H", 8}})));
  auto records = specialise_and_compare(
      m, {nlohmann::json::array({1, 2, 3}), nlohmann::json::array({5}), nlohmann::json::array(),
          nlohmann::json::array({7, 8, 9, 10, 11, 12, 13})});
  EXPECT_EQ(records.size(), 2u);
  EXPECT_TRUE(has_record(records, "foldl", "forward", "foldl$forward"));
  EXPECT_TRUE(has_record(records, "foldl", "backward", "foldl$backward"));
  expect_no_indirect_calls_from(*m, "main");

  auto from_main = reachable(*m, "main");
  EXPECT_TRUE(from_main.count("foldl$forward") && from_main.count("foldl$backward"));
  EXPECT_FALSE(from_main.count("foldl"));  // still in the module, no longer used
  EXPECT_GE(m->find_function("foldl"), 0);
  // The copy lost its function parameter; it calls forward and itself.
  EXPECT_EQ(function(*m, "foldl$forward").params.size(), 2u);
  EXPECT_EQ(direct_callees(*m, "foldl$forward"),
            (std::vector<std::string>{"forward", "foldl$forward"}));
  EXPECT_EQ(count_rhs(function(*m, "main"), is_closure), 0);
}

TEST(Specialise, LambdaCapturesBecomeLeadingArguments) {
  auto m = lower_text(R"(
dim H = 4
param emb[10]: f32[1, 4]
param W1: f32[4, 4]
def step(U: f32[4, 4], h: f32[1, 4], w: int) -> f32[1, 4] { tanh(emb[w] + h @ U) }
def main(words: List[int]) -> f32[1, 4] {
  let U = W1;
  let k = 2;
  foldl(fn(h, w) { step(U, h, (w + k) % 10) }, zeros(1, 4), words)
}
)");
  auto records = specialise_and_compare(
      m, {nlohmann::json::array({1, 2, 3}), nlohmann::json::array({9, 0}),
          nlohmann::json::array()});
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(has_record(records, "foldl", "main$lambda0", "foldl$main$lambda0"));
  expect_no_indirect_calls_from(*m, "main");

  // main passes the captured U and k first, and builds no closure any more.
  const auto& main = function(*m, "main");
  EXPECT_EQ(count_rhs(main, is_closure), 0);
  auto sites = calls_of(*m, "main", "foldl$main$lambda0");
  ASSERT_EQ(sites.size(), 1u);
  ASSERT_EQ(sites[0]->args.size(), 4u);
  std::set<std::string> captured = {var_name(main, sites[0]->args[0]),
                                    var_name(main, sites[0]->args[1])};
  EXPECT_EQ(captured, (std::set<std::string>{"U", "k"}));

  // The copy takes the captures as leading parameters and threads them through its recursion.
  const auto& fold = function(*m, "foldl$main$lambda0");
  EXPECT_EQ(fold.num_captures, 2);
  ASSERT_EQ(fold.params.size(), 4u);
  for (const char* callee : {"main$lambda0", "foldl$main$lambda0"}) {
    SCOPED_TRACE(callee);
    auto calls = calls_of(*m, "foldl$main$lambda0", callee);
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0]->args[0].var, fold.params[0]);
    EXPECT_EQ(calls[0]->args[1].var, fold.params[1]);
  }
}

TEST(Specialise, MapAndFoldWithLambdas) {
  auto m = lower_text(R"(
dim H = 4
param emb[10]: f32[1, 4]
param W1: f32[4, 4]
def main(words: List[int]) -> f32[1, 4] {
  let U = W1;
  let hs = map(fn(w) { emb[w] @ U }, words);
  foldl(fn(acc, h) { acc + h }, zeros(1, 4), hs)
}
)");
  auto records = specialise_and_compare(
      m, {nlohmann::json::array({4, 2}), nlohmann::json::array({9}), nlohmann::json::array()});
  EXPECT_EQ(records.size(), 2u);
  EXPECT_TRUE(has_record(records, "map", "main$lambda0", "map$main$lambda0"));
  EXPECT_TRUE(has_record(records, "foldl", "main$lambda1", "foldl$main$lambda1"));
  EXPECT_EQ(function(*m, "map$main$lambda0").num_captures, 1);
  EXPECT_EQ(function(*m, "foldl$main$lambda1").num_captures, 0);
  expect_no_indirect_calls_from(*m, "main");
}

// Specialising a body exposes more: map inside a folded lambda, a user function that hands its
// function parameter on to map, and a lambda inside a lambda that captures the outer one's value.
TEST(Specialise, NestedHigherOrderCalls) {
  auto m = lower_text(R"(
def inc(x: int) -> int { x + 1 }
def apply_all(f: fn(int) -> int, xs: List[int]) -> List[int] { map(f, xs) }
def total(xs: List[int]) -> int { foldl(fn(a, x) { a + x }, 0, xs) }
def main(xss: List[List[int]]) -> int {
  let k = 3;
  foldl(fn(acc, xs) { acc + total(map(fn(x) { x * k }, xs)) + total(apply_all(inc, xs)) }, 0, xss)
}
)");
  auto records = specialise_and_compare(
      m, {nlohmann::json::parse("[[1, 2], [3], []]"), nlohmann::json::parse("[]"),
          nlohmann::json::parse("[[5, 6, 7]]")});
  EXPECT_TRUE(has_record(records, "foldl", "main$lambda0", "foldl$main$lambda0"));
  EXPECT_TRUE(has_record(records, "map", "main$lambda0$lambda0", "map$main$lambda0$lambda0"));
  EXPECT_TRUE(has_record(records, "apply_all", "inc", "apply_all$inc"));
  EXPECT_TRUE(has_record(records, "map", "inc", "map$inc"));
  EXPECT_TRUE(has_record(records, "foldl", "total$lambda0", "foldl$total$lambda0"));
  EXPECT_EQ(records.size(), 5u);
  expect_no_indirect_calls_from(*m, "main");
  EXPECT_EQ(direct_callees(*m, "apply_all$inc"), (std::vector<std::string>{"map$inc"}));
}

// Repeated sites share one copy; a closure called where it is built becomes a direct call.
TEST(Specialise, MemoisedCopiesAndDirectClosureCalls) {
  auto m = lower_text(R"(
def twice(f: fn(int) -> int, x: int) -> int { f(f(x)) }
def inc(x: int) -> int { x + 1 }
def main(x: int) -> int {
  let k = x * 2;
  let add = fn(y: int) { y + k };
  twice(inc, x) + twice(inc, 2) + twice(add, x) + add(1)
}
)");
  auto records = specialise_and_compare(m, {0, 1, 5, -3});
  ASSERT_EQ(records.size(), 2u);
  EXPECT_TRUE(has_record(records, "twice", "inc", "twice$inc"));
  EXPECT_TRUE(has_record(records, "twice", "main$lambda0", "twice$main$lambda0"));
  EXPECT_EQ(calls_of(*m, "main", "twice$inc").size(), 2u);
  EXPECT_EQ(calls_of(*m, "main", "main$lambda0").size(), 1u);  // add(1), with k first
  EXPECT_EQ(count_rhs(function(*m, "main"), is_closure), 0);
  EXPECT_EQ(direct_callees(*m, "twice$main$lambda0"),
            (std::vector<std::string>{"main$lambda0", "main$lambda0"}));
  expect_no_indirect_calls_from(*m, "main");
}

TEST(Specialise, MutualRecursionPassingTheFunction) {
  auto m = lower_text(R"(
def ping(f: fn(int) -> int, n: int) -> int { if n <= 0 { 0 } else { f(n) + pong(f, n - 1) } }
def pong(f: fn(int) -> int, n: int) -> int { if n <= 0 { 1 } else { f(n) * 2 + ping(f, n - 1) } }
def main(n: int) -> int {
  let k = n;
  ping(fn(x) { x + k }, n)
}
)");
  auto records = specialise_and_compare(m, {0, 1, 2, 5});
  EXPECT_EQ(records.size(), 2u);
  EXPECT_EQ(direct_callees(*m, "ping$main$lambda0"),
            (std::vector<std::string>{"main$lambda0", "pong$main$lambda0"}));
  EXPECT_EQ(direct_callees(*m, "pong$main$lambda0"),
            (std::vector<std::string>{"main$lambda0", "ping$main$lambda0"}));
  expect_no_indirect_calls_from(*m, "main");
}

// A function parameter that is stored in a tuple, returned, or chosen between is left alone, and
// so is the call that passes a function to it.
TEST(Specialise, EscapingFunctionParametersAreLeftAlone) {
  auto m = lower_text(R"(
def inc(x: int) -> int { x + 1 }
def keep(f: fn(int) -> int, x: int) -> (fn(int) -> int, int) { (f, f(x)) }
def pick(f: fn(int) -> int, g: fn(int) -> int, c: bool) -> fn(int) -> int { if c { f } else { g } }
def ident(f: fn(int) -> int) -> fn(int) -> int { f }
def main(x: int) -> int {
  let p = keep(inc, x);
  let g = p.0;
  let h = pick(inc, fn(y) { y * 2 }, x > 2);
  let i = ident(inc);
  p.1 + g(x) + h(x) + i(x)
}
)");
  auto records = specialise_and_compare(m, {0, 2, 3, 10});
  EXPECT_TRUE(records.empty());
  EXPECT_EQ(direct_callees(*m, "main"), (std::vector<std::string>{"keep", "pick", "ident"}));
  EXPECT_EQ(count_rhs(function(*m, "main"), is_indirect_call), 3);
  EXPECT_EQ(count_rhs(function(*m, "main"), is_closure), 1);  // still passed to pick
}

TEST(Specialise, NothingToDoLeavesTheModuleAsItIs) {
  auto m = std::make_shared<ir::Module>(
      lower_to_ir(parse_model_file(source_path("models/treelstm.acr"), {{"H", 8}})));
  std::string before = ir::print_module(*m);
  Specialised s = specialise_higher_order(std::move(*m));
  *m = std::move(s.module);
  EXPECT_TRUE(s.records.empty());
  EXPECT_EQ(ir::print_module(*m), before);
}

}  // namespace
}  // namespace acrobat::test
