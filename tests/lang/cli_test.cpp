// The command line: errors reach stderr as file:line:col messages with a non-zero exit status.
#include "cli_util.h"

namespace acrobat::test {
namespace {

TEST(Cli, MalformedModelReportsFileLineColumn) {
  std::string model = source_path("tests/errors/syntax_missing_rparen.acr");
  CliResult r = run_cli({"check", model});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, model + ":3:34: error: expected ')' closing the parenthesis, found '}'"))
      << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(Cli, EveryErrorOfAModelIsPrinted) {
  std::string model = source_path("tests/errors/syntax_three_declarations.acr");
  CliResult r = run_cli({"emit", "ir", model});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, model + ":5:35: error: ")) << r.err;
  EXPECT_TRUE(contains(r.err, model + ":6:24: error: ")) << r.err;
  EXPECT_TRUE(contains(r.err, model + ":7:38: error: ")) << r.err;
}

TEST(Cli, ValidModelChecks) {
  CliResult r = run_cli({"check", source_path("models/treelstm.acr")});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, ": ok (")) << r.out;
}

TEST(Cli, EmitIrMatchesTheGoldenFile) {
  std::string model = source_path("tests/golden/tree_split_concat.acr");
  CliResult r = run_cli({"emit", "ir", model});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, read_text(source_path("tests/golden/tree_split_concat.ir")));
}

// `emit` prints every stage of the pipeline.
TEST(Cli, EmitPrintsEveryStage) {
  std::string model = source_path("models/treelstm.acr");
  for (const std::string& name : pipeline_stages()) {
    CliResult r = run_cli({"emit", name, model});
    EXPECT_EQ(r.status, 0) << name << ": " << r.err;
    EXPECT_FALSE(r.out.empty()) << name;
  }
  CliResult r = run_cli({"emit", "depth", model});
  EXPECT_TRUE(contains(r.out, "call of @cell at " + model + ":50:16 ends phase 0")) << r.out;
}

TEST(Cli, UnknownInputKind) {
  CliResult r = run_cli({"run", source_path("tests/golden/if_and_or.acr"), "--input", "csv:x.csv"});
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.err, "unknown input kind 'csv'")) << r.err;
  EXPECT_TRUE(contains(r.err, "sst, sst-tokens, tokens, json")) << r.err;
}

TEST(Cli, SetZeroIsRejected) {
  CliResult r = run_cli({"check", source_path("models/birnn.acr"), "--set", "H=0"});
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.err, "--set 'H=0': expected NAME=VALUE with a positive integer VALUE"))
      << r.err;
}

TEST(Cli, SetOfAnUnknownDim) {
  CliResult r = run_cli({"check", source_path("models/birnn.acr"), "--set", "X=3"});
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.err, "--set 'X=3': the model has no dim 'X' (its dims are: H, E, V, C)"))
      << r.err;
}

TEST(Cli, RuntimeErrorNamesPositionAndInstance) {
  TempDir dir;
  std::string model = dir.write("div.acr", "def main(x: int) -> int {\n  12 / x\n}\n");
  std::string input = dir.write("in.jsonl", "4\n0\n");
  CliResult r = run_cli({"run", model, "--input", "json:" + input});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, model + ":2:3: error: instance 1: integer division by zero")) << r.err;
}

TEST(Cli, RunPrintsOutputs) {
  TempDir dir;
  std::string input = dir.write("in.jsonl", "[1, 2]\n[-1, 5]\n");
  CliResult r = run_cli({"run", source_path("tests/golden/if_and_or.acr"), "--input", "json:" + input});
  EXPECT_EQ(r.status, 0) << r.err;
  // One line per instance, "#N" then the output.
  std::istringstream lines(r.out);
  std::vector<std::string> shown;
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("#", 0) == 0) shown.push_back(line);
  ASSERT_EQ(shown.size(), 2u) << r.out;
  EXPECT_EQ(shown[0].rfind("#0 ", 0), 0u) << r.out;
  EXPECT_EQ(shown[0].substr(shown[0].size() - 3), " 11") << r.out;
  EXPECT_EQ(shown[1].rfind("#1 ", 0), 0u) << r.out;
  EXPECT_EQ(shown[1].substr(shown[1].size() - 3), " -9") << r.out;
}

}  // namespace
}  // namespace acrobat::test
