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
TEST(Nesting, Lets) {
  expect_too_deep("def main(x: int) -> int { " + repeat("let y = x; ", kHuge) + "x }");
}
TEST(Nesting, ElseIfChain) {
  expect_too_deep("def main(x: int) -> int { " + repeat("if x > 0 { 1 } else ", kHuge) +
                  "{ 2 } }");
}
// Left-associative chains are parsed by a loop, but still nest the tree the checker walks.
TEST(Nesting, LongBinaryChain) {
  expect_too_deep("def main(x: int) -> int { x" + repeat(" + 1", kHuge) + " }");
}
TEST(Nesting, LongCallChain) {
  expect_too_deep("def main(x: int) -> int { x" + repeat("(1)", kHuge) + " }");
}
TEST(Nesting, LongProjectionChain) {
  expect_too_deep("def main(x: int) -> int { x" + repeat(".0", kHuge) + " }");
}
TEST(Nesting, ChainsInsideParentheses) {
  // 100 levels of parentheses, each a chain of 100 links whose first operand is the next level:
  // neither the parentheses nor any one chain is deep, but the tree is 10000 levels deep.
  expect_too_deep("def main(x: int) -> int { " + repeat("(", 100) + "x" +
                  repeat(repeat(" + 1", 100) + ")", 100) + " }");
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
  expect_too_deep("dim H = 1" + repeat(" + 1", kHuge) + "\n");
  expect_too_deep("dim H = " + repeat("(", kHuge) + "1" + repeat(")", kHuge) + "\n");
}

TEST(Nesting, ReasonableDepthsAreAccepted) {
  // 40 nested parentheses, a 150-term sum and 50 chained lets are ordinary programs.
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
            "--set X=3: the model has no dim 'X' (its dims are: H, C)");
}

TEST(DimOverrides, EveryUnknownDimIsReported) {
  UserError e = check_error(kDims, {{"X", 3}, {"Y", 5}, {"H", 8}});
  ASSERT_EQ(e.diagnostics().size(), 2u) << e.what();
  EXPECT_NE(std::string(e.what()).find("--set X=3"), std::string::npos);
  EXPECT_NE(std::string(e.what()).find("--set Y=5"), std::string::npos);
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
