// Malformed models: every file in tests/errors names the diagnostics it must produce in its leading
// `// expect: LINE:COL: <substring of the message>` lines, exactly those and no others. Also: inputs
// nested too deeply to check recursively, and dim overrides that name no dim.
#include <cstdio>

#include "lang/parser.h"
#include "lang_test_util.h"

namespace acrobat::test {
namespace {

struct Expected {
  uint32_t line = 0, col = 0;
  std::string text;  // a substring of the message
};

// Parses "LINE:COL: text" (after the `// expect: ` prefix); false if the line is not of that form.
bool parse_expectation(const std::string& rest, Expected& e) {
  unsigned line = 0, col = 0;
  int used = 0;
  if (std::sscanf(rest.c_str(), "%u:%u: %n", &line, &col, &used) != 2 || used == 0 ||
      static_cast<size_t>(used) >= rest.size())
    return false;
  e = Expected{line, col, rest.substr(used)};
  return true;
}

// The `// expect:` lines at the top of a file (before its first other line).
std::vector<Expected> read_expectations(const std::string& text) {
  const std::string prefix = "// expect: ";
  std::vector<Expected> out;
  std::istringstream in(text);
  std::string line;
  Expected e;
  while (std::getline(in, line) && line.rfind(prefix, 0) == 0) {
    if (parse_expectation(line.substr(prefix.size()), e))
      out.push_back(e);
    else
      ADD_FAILURE() << "malformed line (expected `// expect: LINE:COL: message`): " << line;
  }
  return out;
}

std::string show(const std::vector<Diagnostic>& ds) {
  std::string s;
  for (const auto& d : ds) s += "\n    " + d.str();
  return s.empty() ? "\n    (none)" : s;
}

class ErrorFile : public ::testing::TestWithParam<std::string> {};

TEST_P(ErrorFile, ReportsExactlyTheExpectedDiagnostics) {
  const std::string path = GetParam();
  const auto expected = read_expectations(read_text(path));
  ASSERT_FALSE(expected.empty()) << path << " has no `// expect: LINE:COL: message` line";

  UserError error = user_error_of([&] { parse_model_file(path, {}); });
  const auto& got = error.diagnostics();

  // Every diagnostic names the file, with a position in it.
  for (const auto& d : got) {
    EXPECT_EQ(d.loc.file, path) << d.str();
    EXPECT_EQ(d.str().rfind(path + ":", 0), 0u) << d.str();
    EXPECT_GT(d.loc.line, 0u) << d.str();
  }
  // Each expectation takes a distinct diagnostic at its position whose message contains its text.
  std::vector<bool> used(got.size());
  for (const auto& e : expected) {
    bool found = false;
    for (size_t i = 0; i < got.size() && !found; ++i) {
      if (used[i] || got[i].loc.line != e.line || got[i].loc.col != e.col ||
          got[i].message.find(e.text) == std::string::npos)
        continue;
      used[i] = found = true;
    }
    EXPECT_TRUE(found) << "missing diagnostic " << e.line << ":" << e.col << ": " << e.text
                       << "\n  got:" << show(got);
  }
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(used[i]) << "unexpected diagnostic " << got[i].str() << "\n  got:" << show(got);
}

INSTANTIATE_TEST_SUITE_P(Errors, ErrorFile, ::testing::ValuesIn(files_in("tests/errors", ".acr")),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return std::filesystem::path(info.param).stem().string();
                         });

TEST(ErrorFiles, CoverEnoughMistakes) {
  EXPECT_GE(files_in("tests/errors", ".acr").size(), 40u);
}

TEST(ErrorFiles, ExpectationsParse) {
  auto e = read_expectations("// expect: 3:14: unknown name 'x'\n// expect: 4:1: other\n// note\n"
                             "// expect: 9:9: too late\n");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].line, 3u);
  EXPECT_EQ(e[0].col, 14u);
  EXPECT_EQ(e[0].text, "unknown name 'x'");
  EXPECT_EQ(e[1].text, "other");
}

// ---- nesting: a hostile file must become an error, not a stack overflow ----------------------

std::string repeat(const std::string& s, int n) {
  std::string out;
  out.reserve(s.size() * n);
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

void expect_too_deep(const std::string& text) {
  UserError e = user_error_of([&] { parse_model_text("deep.acr", text, {}); });
  ASSERT_EQ(e.diagnostics().size(), 1u) << e.what();
  EXPECT_NE(e.diagnostics()[0].message.find("nested deeper than"), std::string::npos) << e.what();
  EXPECT_EQ(e.diagnostics()[0].loc.file, "deep.acr");
  EXPECT_EQ(e.diagnostics()[0].loc.line, 1u);
}

constexpr int kHuge = 100000;

TEST(Nesting, Parentheses) {
  expect_too_deep("def main(x: int) -> int { " + repeat("(", kHuge) + "x" + repeat(")", kHuge) +
                  " }");
}
TEST(Nesting, Blocks) {
  expect_too_deep("def main(x: int) -> int { " + repeat("{", kHuge) + "x" + repeat("}", kHuge) +
                  " }");
}
TEST(Nesting, UnaryOperators) {
  expect_too_deep("def main(x: int) -> int { " + repeat("-", kHuge) + "x }");
}
TEST(Nesting, LongCallChain) {
  expect_too_deep("def main(x: int) -> int { x" + repeat("(1)", kHuge) + " }");
}
TEST(Nesting, LongProjectionChain) {
  expect_too_deep("def main(x: int) -> int { x" + repeat(".0", kHuge) + " }");
}
TEST(Nesting, CallChainsInsideParentheses) {
  // 100 levels of parentheses, each a chain of 100 calls whose callee is the next level: neither
  // the parentheses nor any one chain is deep, but the tree is 10000 levels deep.
  expect_too_deep("def main(x: int) -> int { " + repeat("(", 100) + "x" +
                  repeat(repeat("(1)", 100) + ")", 100) + " }");
}
TEST(Nesting, Types) {
  expect_too_deep("def main(x: " + repeat("List[", kHuge) + "int" + repeat("]", kHuge) +
                  ") -> int { 1 }");
}
TEST(Nesting, Patterns) {
  expect_too_deep("def main(x: Tree) -> int { match x { " + repeat("Node(", kHuge) + "_" +
                  repeat(", _)", kHuge) + " => 1, _ => 0 } }");
}
TEST(Nesting, SizeExpressions) {
  expect_too_deep("dim H = " + repeat("(", kHuge) + "1" + repeat(")", kHuge) + "\n");
}

// The function's body is one level and each parenthesis one more: what follows the 256th
// parenthesis is the 257th level.
TEST(Nesting, TheMessageSaysWhatCounts) {
  UserError e = user_error_of([&] {
    parse_model_text("deep.acr", "def main(x: int) -> int { " + repeat("(", 300) + "x" +
                                     repeat(")", 300) + " }", {});
  });
  ASSERT_EQ(e.diagnostics().size(), 1u);
  EXPECT_EQ(e.diagnostics()[0].str(),
            "deep.acr:1:283: error: expression nested deeper than 256 levels (parentheses, blocks, "
            "arguments, unary operators and chains of calls, indexes or .N count as levels; "
            "sequences of lets, else-if chains and chains of binary operators do not); bind inner "
            "parts to names with let");
}

// ---- long sequences are not nesting: parsed, checked and lowered by loops --------------------

// `let x = x + 1;` n times.
std::string lets(int n) { return repeat("let x = x + 1; ", n); }
// "if x == 0 { 0 } else if x == 1 { 10 } else ... ", n arms each ending in `else `.
std::string arms(int n) {
  std::string s;
  for (int i = 0; i < n; ++i)
    s += "if x == " + std::to_string(i) + " { " + std::to_string(10 * i) + " } else ";
  return s;
}
// The chain of n arms that gives -1 when no arm's condition holds.
std::string else_if_chain(int n) { return arms(n) + "{ -1 }"; }

TEST(LongSequences, TenThousandLetsRun) {
  auto m = compile_text("def main(x: int) -> int { " + lets(10000) + "x }");
  EXPECT_EQ(run_json(m, {3, -5}), nlohmann::json({10003, 9995}));
}

TEST(LongSequences, AThousandArmElseIfChainRuns) {
  auto m = compile_text("def main(x: int) -> int { " + else_if_chain(1000) + " }");
  EXPECT_EQ(run_json(m, {0, 1, 517, 999, 1000}), nlohmann::json({0, 10, 5170, 9990, -1}));
}

TEST(LongSequences, TenThousandTermSumRuns) {
  auto m = compile_text("def main(x: int) -> int { x" + repeat(" + x", 9999) + " }");
  EXPECT_EQ(run_json(m, {3}), nlohmann::json({30000}));
  // Mixed operators and precedence along one chain: x - 1 + 2 * x - 1 + 2 * x ...
  auto mixed = compile_text("def main(x: int) -> int { x" + repeat(" - 1 + 2 * x", 5000) + " }");
  EXPECT_EQ(run_json(mixed, {3}), nlohmann::json({3 + 5000 * 5}));
}

TEST(LongSequences, TensorSumsAndBooleanChains) {
  // A long chain of tensor operators with literals in it, and a long && chain.
  auto m = compile_text("def main(x: f32[1, 2]) -> f32[1, 2] { 1.0 + x" + repeat(" + x * 2.0", 2000) +
                        " }");
  EXPECT_EQ(run_json(m, {nlohmann::json::array({nlohmann::json::array({1.0, 0.5})})})[0]["data"],
            nlohmann::json({1.0 + 4001.0, 1.0 + 0.5 * 4001}));
  auto b = compile_text("def main(x: int) -> bool { x > 0" + repeat(" && x > 0", 3000) + " }");
  EXPECT_EQ(run_json(b, {1, -1}), nlohmann::json({true, false}));
}

TEST(LongSequences, LetsThatTakeADataTypeApart) {
  // Each opens a match over the rest: 1000 of them nest 1000 blocks.
  auto m = compile_text("type P = P(int, int)\ndef main(x: int) -> int { " +
                        repeat("let P(x, y) = P(x + 1, x); ", 1000) + "x }");
  EXPECT_EQ(run_json(m, {5}), nlohmann::json({1005}));
}

TEST(LongSequences, LongSizeExpression) {
  auto m = compile_text("dim H = 1" + repeat(" + 1", 10000) + "\ndef main(x: int) -> int { H }");
  EXPECT_EQ(run_json(m, {0}), nlohmann::json({10001}));
}

// A hostile file far beyond any real program still ends in a result or an error, not a crash.
TEST(LongSequences, HundredThousandLetsCompile) {
  auto m = compile_text("def main(x: int) -> int { " + lets(kHuge) + "x }");
  EXPECT_EQ(run_json(m, {0}), nlohmann::json({kHuge}));
}

// An else-if chain nests one IR block per arm, and the passes and engines walk blocks recursively:
// beyond 5000 nested blocks lowering reports it.
TEST(LongSequences, ElseIfChainBeyondTheBlockBound) {
  EXPECT_EQ(run_one("def main(x: int) -> int { " + else_if_chain(4999) + " }", 4998), 49980);
  UserError e = user_error_of([&] {
    compile_text("def main(x: int) -> int {\n  " + else_if_chain(kHuge) + "\n}\n", {}, "chain.acr");
  });
  ASSERT_EQ(e.diagnostics().size(), 1u) << e.what();
  // The function's body is one block, each arm's else another, and arm k's then-branch is one
  // level deeper than its condition: arm 4999's (from 0) is the 5001st.
  std::string before = "  " + arms(4999) + "if x == 4999 { ";
  EXPECT_EQ(e.diagnostics()[0].loc.str(), "chain.acr:2:" + std::to_string(before.size() + 1));
  EXPECT_EQ(e.diagnostics()[0].message.rfind("blocks nested deeper than 5000 levels: each arm of "
                                             "an else-if chain, each match clause, ",
                                             0),
            0u)
      << e.what();
}

TEST(Nesting, ReasonableDepthsAreAccepted) {
  // 40 nested parentheses around a 150-term sum, and 50 chained lets.
  auto m = compile_text("def main(x: int) -> int { " + repeat("(", 40) + "x" + repeat(")", 40) +
                        repeat(" + x", 150) + " }");
  EXPECT_EQ(run_json(m, {3})[0], 3 * 151);
  std::string lets;
  for (int i = 0; i < 50; ++i) lets += "let x = x + 1; ";
  EXPECT_EQ(run_one("def main(x: int) -> int { " + lets + "x }", 1), 51);
}

// ---- dim overrides ------------------------------------------------------------------------------

// Parses `text` after the prelude, then checks it with `overrides`.
UserError check_error(const std::string& text, const DimOverrides& overrides) {
  return user_error_of([&] {
    ast::Module module;
    DiagnosticSink sink;
    parse_into(module, "<prelude>", prelude_source(), sink);
    parse_into(module, "dims.acr", text, sink);
    sink.throw_if_errors();
    check_module(module, overrides, sink);
  });
}

constexpr const char* kDims = "dim H = 4\ndim C = 2\ndef main(x: f32[1, H]) -> f32[1, H] { x }\n";

TEST(DimOverrides, UnknownDimIsReportedWithTheKnownOnes) {
  UserError e = check_error(kDims, {{"X", 3}});
  ASSERT_EQ(e.diagnostics().size(), 1u) << e.what();
  EXPECT_FALSE(e.diagnostics()[0].loc.known());
  EXPECT_EQ(e.diagnostics()[0].message,
            "--set 'X=3': the model has no dim 'X' (its dims are: H, C)");
}

TEST(DimOverrides, EveryUnknownDimIsReported) {
  UserError e = check_error(kDims, {{"X", 3}, {"Y", 5}, {"H", 8}});
  ASSERT_EQ(e.diagnostics().size(), 2u) << e.what();
  EXPECT_NE(std::string(e.what()).find("--set 'X=3'"), std::string::npos);
  EXPECT_NE(std::string(e.what()).find("--set 'Y=5'"), std::string::npos);
}

TEST(DimOverrides, NonPositiveOverrideIsReported) {
  UserError e = check_error(kDims, {{"H", 0}});
  ASSERT_EQ(e.diagnostics().size(), 1u) << e.what();
  EXPECT_NE(e.diagnostics()[0].message.find("dim 'H' must be positive, found 0"), std::string::npos);
}

TEST(DimOverrides, KnownDimChangesEveryShapeThatUsesIt) {
  auto m = compile_text("dim H = 4\ndim G = 2 * H\nparam W: f32[H, G]\n"
                        "def main(x: f32[1, H]) -> f32[1, G] { x @ W }\n",
                        {{"H", 3}});
  EXPECT_EQ(m->params[0].shape, (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(type_str(m->functions[0].ret), "f32[1, 6]");
}

}  // namespace
}  // namespace acrobat::test
