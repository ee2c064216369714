// The IR verifier: every bundled model keeps the invariants after every stage (with each analysis
// on and off), and hand-built broken modules are rejected with a message that names the stage, the
// function and what is wrong.
#include "ir/verify.h"
#include "ir/walk.h"

#include <cctype>

#include "analysis/concurrency.h"
#include "analysis/plan.h"
#include "analysis/verify_plan.h"
#include "analysis/reuse.h"
#include "lang/lang_test_util.h"
#include "transforms/specialise.h"

namespace acrobat::test {
namespace {

using ir::Atom;
using ir::HostOp;

// ---- the bundled models ----

class VerifyModel : public ::testing::TestWithParam<std::string> {};

// The stages one at a time, as compile_checked runs them, each followed by the verifier; then the
// whole pipeline (which verifies after every stage itself) under each ablation, plan included.
TEST_P(VerifyModel, ValidAfterEveryStage) {
  const std::string& path = GetParam();
  ir::Module m = lower_to_ir(parse_model_file(path, {}));
  EXPECT_EQ(ir::find_ir_problem(m, "lower"), "");
  m = specialise_higher_order(std::move(m)).module;
  EXPECT_EQ(ir::find_ir_problem(m, "specialise"), "");
  m = analysis::analyse_param_reuse(std::move(m)).module;
  EXPECT_EQ(ir::find_ir_problem(m, "reuse"), "");
  m = analysis::group_concurrent_calls(std::move(m)).module;
  EXPECT_EQ(ir::find_ir_problem(m, "concurrent"), "");

  for (const char* off : {"", "specialise", "reuse", "clone", "ghosts", "phases", "concurrent"}) {
    SCOPED_TRACE(std::string("off: ") + off);
    CompileOptions o;
    o.analysis.specialise = std::string(off) != "specialise";
    o.analysis.reuse = std::string(off) != "reuse";
    o.analysis.clone = std::string(off) != "clone";
    o.analysis.ghosts = std::string(off) != "ghosts";
    o.analysis.phases = std::string(off) != "phases";
    o.analysis.concurrent = std::string(off) != "concurrent";
    auto compiled = compile_model(path, o);
    EXPECT_EQ(analysis::find_plan_problem(*compiled, "depth"), "");
  }
}

std::vector<std::string> bundled_models() {
  std::vector<std::string> out = files_in("models", ".acr");
  for (const auto& f : files_in("tests/golden", ".acr")) out.push_back(f);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Models, VerifyModel, ::testing::ValuesIn(bundled_models()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = std::filesystem::path(info.param).stem().string();
                           std::replace_if(
                               name.begin(), name.end(), [](char c) { return !std::isalnum(c); },
                               '_');
                           return name;
                         });

// ---- broken modules ----

Span line(uint32_t n) {
  Span s;
  s.begin = SourceLoc{"t.acr", n, 3};
  return s;
}

// def @f(%x.0: int) -> int {          line 1
//   %1: int = host.add(%x.0, 1)       line 2
//   %2: int = host.mul(%1, %1)        line 3
//   %2
// }
// def @main(%n.0: int) -> int {       line 5
//   %1: int = call @f(%n.0)           line 6
//   %1
// }
ir::Module small_module() {
  ir::Module m;
  ir::Function f;
  f.name = "f";
  f.vars = {{"x", int_type(), line(1)}, {"", int_type(), line(2)}, {"", int_type(), line(3)}};
  f.params = {0};
  f.ret = int_type();
  f.span = line(1);
  f.body.bindings = {
      {1, ir::make_host(HostOp::Add, {Atom::variable(0), Atom::integer(1)}, int_type(), line(2))},
      {2, ir::make_host(HostOp::Mul, {Atom::variable(1), Atom::variable(1)}, int_type(), line(3))}};
  f.body.result = Atom::variable(2);
  ir::Function main;
  main.name = "main";
  main.vars = {{"n", int_type(), line(5)}, {"", int_type(), line(6)}};
  main.params = {0};
  main.ret = int_type();
  main.span = line(5);
  main.body.bindings = {{1, ir::make_call(0, {Atom::variable(0)}, int_type(), line(6))}};
  main.body.result = Atom::variable(1);
  m.functions = {std::move(f), std::move(main)};
  return m;
}

// The verifier's message for `m` is exactly "IR verifier: after stage '<stage>', <what>".
void expect_problem(const ir::Module& m, const std::string& stage, const std::string& what) {
  EXPECT_EQ(ir::find_ir_problem(m, stage), "IR verifier: after stage '" + stage + "', " + what);
}

// A new int temporary of `f`, defined at `at`.
int new_var(ir::Function& f, uint32_t at) {
  f.vars.push_back({"", int_type(), line(at)});
  return static_cast<int>(f.vars.size()) - 1;
}

ir::Block constant_block(int64_t value) {
  ir::Block b;
  b.result = Atom::integer(value);
  return b;
}

TEST(Verify, AcceptsTheSmallModule) { EXPECT_EQ(ir::find_ir_problem(small_module(), "lower"), ""); }

TEST(Verify, UseBeforeDefinition) {
  ir::Module m = small_module();
  auto& b = m.functions[0].body.bindings;
  std::swap(b[0], b[1]);
  EXPECT_EQ(ir::find_ir_problem(m, "concurrent"),
            "IR verifier: after stage 'concurrent', function @f: %1 is used before its definition "
            "(in a host operation at t.acr:3:3)");
}

TEST(Verify, DuplicateDefinition) {
  ir::Module m = small_module();
  m.functions[0].body.bindings[1].var = 1;
  expect_problem(m, "specialise",
                 "function @f: %1 is defined twice, the second time by a binding (in a host "
                 "operation at t.acr:3:3)");
  m = small_module();
  m.functions[1].params.push_back(0);
  expect_problem(m, "lower",
                 "function @main: %n.0 is defined twice, the second time by a parameter");
}

TEST(Verify, SharedNode) {
  ir::Module m = small_module();
  ir::Function& main = m.functions[1];
  main.body.bindings.push_back({new_var(main, 7), m.functions[0].body.bindings[0].rhs});
  expect_problem(
      m, "reuse",
      "function @main: the node bound to %2 is also bound in @f (passes key their results "
      "by node) (in a host operation at t.acr:2:3)");
}

TEST(Verify, CalleeArity) {
  ir::Module m = small_module();
  ir::RhsPtr& call = m.functions[1].body.bindings[0].rhs;
  call = ir::make_call(0, {Atom::variable(0), Atom::integer(2)}, int_type(), line(6));
  expect_problem(
      m, "specialise",
      "function @main: call of @f with 2 arguments; it takes 1 (in a call at t.acr:6:3)");
  call = ir::make_call(7, {Atom::variable(0)}, int_type(), line(6));
  expect_problem(m, "reuse",
                 "function @main: callee 7 is out of range (the module has 2 functions) (in a call "
                 "at t.acr:6:3)");
}

// A variable of an if's branch read after the if.
TEST(Verify, UseOutsideItsBlock) {
  ir::Module m = small_module();
  ir::Function& f = m.functions[0];
  int v = new_var(f, 4);
  ir::Block then_block = f.body;  // defines %1 and %2, returns %2
  f.body.bindings = {
      {v, ir::make_if(Atom::boolean(true), then_block, constant_block(0), int_type(), line(4))}};
  f.body.result = Atom::variable(v);
  EXPECT_EQ(ir::find_ir_problem(m, "lower"), "");
  f.body.result = Atom::variable(2);
  expect_problem(m, "lower",
                 "function @f: %2 is used as a block's result outside the block that defines it");
}

TEST(Verify, IfConditionAndProjection) {
  ir::Module m = small_module();
  ir::Function& f = m.functions[0];
  int v = new_var(f, 4);
  f.body.bindings.push_back({v, ir::make_if(Atom::variable(2), constant_block(1), constant_block(2),
                                            int_type(), line(4))});
  expect_problem(m, "lower", "function @f: the condition is not a bool (in an if at t.acr:4:3)");
  f.body.bindings.back().rhs = ir::make_proj(Atom::variable(2), 0, int_type(), line(4));
  expect_problem(m, "lower",
                 "function @f: field .0 of a value of type int, not a tuple (in a projection at "
                 "t.acr:4:3)");
}

TEST(Verify, PlanKeyedByASiteNoNodeHas) {
  ir::Module m = small_module();
  auto plan = std::make_shared<analysis::Plan>();
  plan->options.reuse = false;
  plan->depth.chain_length = {0, 0};
  plan->depth.in_recursion = {false, false};
  m.plan = plan;
  EXPECT_EQ(analysis::find_plan_problem(m, "depth"), "");
  plan->depth.ghosts[7] = {0, 1};
  EXPECT_EQ(ir::find_ir_problem(m, "depth"), "");  // the IR itself is sound
  EXPECT_EQ(analysis::find_plan_problem(m, "depth"),
            "IR verifier: after stage 'depth', the plan keys ghost padding by site 7, which no node of the module has");
}

TEST(Verify, TailCallThatIsNotABlocksLastCall) {
  ir::Module m = small_module();
  ir::number_new_sites(m);
  auto plan = std::make_shared<analysis::Plan>();
  plan->options.reuse = false;
  plan->options.concurrent = false;
  plan->depth.chain_length = {0, 0};
  plan->depth.in_recursion = {false, false};
  plan->block_at_site.assign(static_cast<size_t>(m.num_sites), -1);
  plan->tail_call.assign(static_cast<size_t>(m.num_sites), 0);
  m.plan = plan;
  EXPECT_EQ(analysis::find_plan_problem(m, "depth"), "");
  plan->tail_call[static_cast<size_t>(m.functions[0].body.bindings[0].rhs->site)] = 1;
  EXPECT_NE(analysis::find_plan_problem(m, "depth").find("a tail call at"), std::string::npos)
      << analysis::find_plan_problem(m, "depth");
}

TEST(Verify, TwoNodesWithOneSite) {
  ir::Module m = small_module();
  ir::number_new_sites(m);
  EXPECT_EQ(ir::find_ir_problem(m, "lower"), "");
  ir::RhsPtr& second = m.functions[1].body.bindings[0].rhs;
  auto copy = std::make_shared<ir::Rhs>(*second);
  copy->site = m.functions[0].body.bindings[0].rhs->site;
  second = copy;
  EXPECT_NE(ir::find_ir_problem(m, "reuse").find(
                "function @main: the node bound to %1 has site 0, as another node (analyses key "
                "their results by site)"),
            std::string::npos)
      << ir::find_ir_problem(m, "reuse");
}

TEST(Verify, VerifyModuleThrowsAnInternalError) {
  ir::Module m = small_module();
  std::swap(m.functions[0].body.bindings[0], m.functions[0].body.bindings[1]);
  ir::verify_module(small_module(), "lower");  // a valid module passes
  try {
    ir::verify_module(m, "concurrent");
    ADD_FAILURE() << "no InternalError";
  } catch (const InternalError& e) {
    EXPECT_EQ(e.file(), "src/ir/verify.cpp");
    EXPECT_NE(std::string(e.what()).find("acrobat internal error at src/ir/verify.cpp:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(": IR verifier: after stage 'concurrent', function @f: %1 is used before its "
                                         "definition (in a host operation at t.acr:3:3) (a bug in acrobat"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace acrobat::test
