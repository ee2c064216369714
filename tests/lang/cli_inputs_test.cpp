// What a run is given and what it writes, end to end through the command line: empty and missing
// input files, comma-separated --set, the entry function, honest messages about JSON inputs,
// non-finite outputs, inputs nested as deep as the engines recurse, and ragged inputs.
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/files.h"

namespace acrobat::test {
namespace {

TEST(CliInputs, EmptyInputFileIsAnError) {
  TempDir dir;
  std::string empty = dir.write("empty.txt", "");
  std::string vocab = dir.write("vocab.txt", "<unk>\nw\n");
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"models/treelstm.acr", "sst", "one Penn-Treebank tree per line"},
      {"models/birnn.acr", "sst-tokens", "one Penn-Treebank tree per line"},
      {"models/birnn.acr", "tokens", "one line of token ids per instance"},
      {"models/birnn.acr", "json", "one JSON value per line"},
  };
  for (const auto& [model, kind, expected] : cases) {
    CliResult r = run_cli({"run", source_path(model), "--input", kind + ":" + empty, "--vocab", vocab});
    EXPECT_EQ(r.status, 1) << kind;
    EXPECT_TRUE(contains(r.err, empty + ": error: the input file holds no instances (expected " +
                                    expected + ")\n"))
        << kind << ": " << r.err;
    EXPECT_FALSE(contains(r.out, "instances in")) << kind;
  }
  // Blank lines are not instances of json or sst inputs either.
  std::string blank = dir.write("blank.jsonl", "\n  \n\n");
  CliResult r = run_cli({"run", source_path("models/birnn.acr"), "--input", "json:" + blank});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, blank + ": error: the input file holds no instances")) << r.err;
}

// Without a vocabulary beside it, a missing data file is reported as missing, not as a file that
// needs a vocabulary.
TEST(CliInputs, MissingSstFileIsReportedAsMissing) {
  TempDir dir;
  std::string missing = dir.path("nowhere/test.txt");
  CliResult r = run_cli({"run", source_path("models/treelstm.acr"), "--input", "sst:" + missing});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: cannot open " + missing + ": No such file or directory\n");
}

TEST(CliInputs, CommaSeparatedSets) {
  std::string model = source_path("models/berxit.acr");
  CliResult r = run_cli({"check", model, "--set", "D=768,NH=12,FF=3072", "--set", "L=2"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, model + ": ok (")) << r.out;
  // Each piece is checked on its own and named.
  r = run_cli({"check", model, "--set", "D=768,NH=twelve"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: --set 'NH=twelve': expected NAME=VALUE with a positive integer VALUE (at "
                   "most 9223372036854775807)\n");
  // The overrides reach the model.
  r = run_cli({"emit", "ir", model, "--set", "D=768,NH=12"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "f32[1, 768]")) << r.out.substr(0, 400);
}

TEST(CliInputs, MissingEntryFunctionNamesTheModelFile) {
  TempDir dir;
  std::string model = dir.write("lib.acr", "def f(x: int) -> int { x }\ndef g(x: int) -> int { x }\n");
  std::string input = dir.write("in.jsonl", "1\n");
  const std::string expected = model + ": error: the model has no function 'main' to run (its "
                                       "functions: f, g; --entry chooses one)\n";
  CliResult check = run_cli({"check", model});
  EXPECT_EQ(check.status, 1);
  EXPECT_EQ(check.err, expected);
  CliResult run = run_cli({"run", model, "--input", "json:" + input});
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err, expected);
  // --entry chooses another one, in check as in run.
  EXPECT_EQ(run_cli({"check", model, "--entry", "g"}).status, 0);
  EXPECT_EQ(run_cli({"run", model, "--entry", "g", "--input", "json:" + input}).status, 0);
}

TEST(CliInputs, EntryFunctionShapeIsChecked) {
  TempDir dir;
  std::string two = dir.write("two.acr", "def main(x: int, y: int) -> int { x }\n");
  CliResult r = run_cli({"check", two});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, two + ":1:1: error: entry function 'main' must take exactly one parameter (the "
                         "input instance), found 2\n");
  std::string fn = dir.write("fn.acr", "def main(x: int) -> (int, fn(int) -> int) {\n"
                                       "  (x, fn(y: int) { y + x })\n}\n");
  r = run_cli({"check", fn});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, fn + ":1:1: error: entry function 'main' returns (int, fn(int) -> int), which "
                        "may hold a function value: outputs are written as JSON, which has no form "
                        "for functions\n");
}

TEST(CliInputs, JsonNullIsNamedOnce) {
  TempDir dir;
  std::string input = dir.write("in.jsonl", "[1, 2]\nnull\n");
  CliResult r = run_cli({"run", source_path("tests/golden/if_and_or.acr"), "--input", "json:" + input});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, input + ":2:1: error: at $: expected an array of 2 elements for "
                                      "(int, int), found null\n"))
      << r.err;
}

// NaN and infinities have no JSON number: outputs write them as strings, and inputs read them back.
TEST(CliInputs, NonFiniteNumbersAreWrittenAsStrings) {
  TempDir dir;
  std::string model = dir.write("nan.acr",
                                "def main(x: f32[1, 3]) -> (float, f32[1, 3]) {\n"
                                "  (item(sum(x, axis=-1)), x * 2.0)\n}\n");
  std::string input = dir.write("in.jsonl", "[[1.0, \"Infinity\", \"NaN\"]]\n"
                                            "{\"shape\": [1, 3], \"data\": [1, 2, \"-Infinity\"]}\n");
  std::string out = dir.path("out.json");
  for (std::string engine : {"reference", "batched"}) {
    CliResult r = run_cli({"run", model, "--engine", engine, "--input", "json:" + input, "--output", out});
    ASSERT_EQ(r.status, 0) << engine << ": " << r.err;
    nlohmann::json j = nlohmann::json::parse(read_text(out));
    EXPECT_EQ(j["outputs"][0], nlohmann::json::parse(
                                   R"(["NaN", {"shape": [1, 3], "data": [2.0, "Infinity", "NaN"]}])"))
        << engine << ": " << j.dump();
    EXPECT_EQ(j["outputs"][1],
              nlohmann::json::parse(
                  R"(["-Infinity", {"shape": [1, 3], "data": [2.0, 4.0, "-Infinity"]}])"))
        << engine << ": " << j.dump();
  }
  std::string bad = dir.write("bad.jsonl", "[[1.0, \"inf\", 2]]\n");
  CliResult r = run_cli({"run", model, "--input", "json:" + bad});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, bad + ":1:1: error: at $[0][1]: expected a number (or \"NaN\", "
                                    "\"Infinity\", \"-Infinity\"), found string \"inf\"\n"))
      << r.err;
}

// Inputs may nest as deep as the engines recurse (5000 calls): a tree of depth 4990 from SST text
// and a 2490-deep tree from JSON (two JSON levels per tree level) run on every engine.
TEST(CliInputs, DeepInputsRun) {
  TempDir dir;
  std::string model = dir.write("count.acr",
                                "def count(t: Tree) -> int {\n"
                                "  match t { Leaf(w) => 1, Node(l, r) => count(l) + count(r) }\n"
                                "}\n"
                                "def main(t: Tree) -> int { count(t) }\n");
  std::string tree = "(1 (2 a) (3 b))";
  for (int i = 1; i < 4990; ++i) tree = "(1 " + tree + " (2 w))";
  std::string sst = dir.write("deep.txt", tree + "\n");
  std::string vocab = dir.write("vocab.txt", "<unk>\na\nb\nw\n");
  std::string json = "{\"Leaf\": [1]}";
  for (int i = 0; i < 2490; ++i) json = "{\"Node\": [" + json + ", {\"Leaf\": [2]}]}";
  std::string jsonl = dir.write("deep.jsonl", json + "\n");
  for (std::string engine : {"reference", "batched"}) {
    CliResult r = run_cli({"run", model, "--engine", engine, "--input", "sst:" + sst, "--vocab", vocab});
    EXPECT_EQ(r.status, 0) << engine << ": " << r.err;
    EXPECT_TRUE(contains(r.out, "#0     4991\n")) << r.out;
    r = run_cli({"run", model, "--engine", engine, "--input", "json:" + jsonl});
    EXPECT_EQ(r.status, 0) << engine << ": " << r.err;
    EXPECT_TRUE(contains(r.out, "#0     2491\n")) << r.out;
  }
}

// The lengths: input makes one [n, D] instance per line; a bad line is an error at its place, the
// JSON reader takes tensors of any length where the type has a size variable and names it when
// an instance's tensors disagree, and the entry's sizes must be where the instance gives them.
TEST(CliInputs, RaggedInputs) {
  TempDir dir;
  std::string model = dir.write("r.acr", "def main(x: f32[n, 4]) -> f32[1, 4] { sum(x, axis=0) }\n");
  std::string lengths = dir.write("lengths.txt", "3\n1\n5\n");
  CliResult r = run_cli({"run", model, "--input", "lengths:" + lengths, "--output", dir.path("o.json")});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "3 instances in")) << r.out;
  std::string bad = dir.write("bad.txt", "3\n0\n");
  r = run_cli({"run", model, "--input", "lengths:" + bad});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, bad + ":2:1: error: expected one length (an integer >= 1) on the line")) << r.err;
  // lengths: needs a tensor f32[n, ...] with the rest fixed.
  std::string scalar = dir.write("s.acr", "def main(x: f32[4, 4]) -> f32[4, 4] { x }\n");
  r = run_cli({"run", scalar, "--input", "lengths:" + lengths});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "produces tensors f32[n, ...] with n from the file and the rest fixed")) << r.err;
  // For a pair (f32[1, C], f32[n, ...]) (a loss entry's instance): the same rows, with a one-hot label.
  std::string rows = dir.write("rows.acr", "def main(x: f32[n, 4]) -> f32[n, 4] { x }\n");
  std::string labelled = dir.write("l.acr", "def main(p: (f32[1, 3], f32[n, 4])) -> (f32[1, 1], f32[1, 1], f32[n, 4]) "
                                            "{ let (y, x) = p; (sum(y), sum(y * (y - 1.0)), x) }\n");
  r = run_cli({"run", rows, "--input", "lengths:" + lengths, "--output", dir.path("rows.json")});
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_cli({"run", labelled, "--input", "lengths:" + lengths, "--output", dir.path("labelled.json")});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto unlabelled = nlohmann::json::parse(io::read_file(dir.path("rows.json")))["outputs"];
  const auto pairs = nlohmann::json::parse(io::read_file(dir.path("labelled.json")))["outputs"];
  ASSERT_EQ(pairs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(pairs[i][0]["data"][0], 1.0) << i;  // the label sums to 1 with every entry 0 or 1
    EXPECT_EQ(pairs[i][1]["data"][0], 0.0) << i;
    EXPECT_EQ(pairs[i][2], unlabelled[i]) << i;
  }
  std::string two_rows = dir.write("t.acr", "def main(p: (f32[2, 3], f32[n, 4])) -> f32[n, 4] { let (y, x) = p; x }\n");
  r = run_cli({"run", two_rows, "--input", "lengths:" + lengths});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "or pairs (f32[1, C], f32[n, ...]) of a label and such rows")) << r.err;

  std::string pair = dir.write("p.acr", "def main(p: (f32[n, 2], f32[n, 2])) -> f32[n, 2] { p.0 + p.1 }\n");
  std::string in = dir.write("in.jsonl", "[[[1, 2]], [[3, 4]]]\n[[[1, 2], [3, 4]], [[1, 2]]]\n");
  r = run_cli({"run", pair, "--input", "json:" + in});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, in + ":2:1: error: at $[1]: expected an array of 2 elements (dimension 0 of a "
                                   "tensor [n, 2] (with n = 2; a size variable is at least 1)), found array"))
      << r.err;

  std::string listy = dir.write("l.acr", "def main(xs: List[f32[n, 2]]) -> int { length(xs) }\n");
  r = run_cli({"check", listy});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, listy + ":1:10: error: entry function 'main': its size 'n' must be a dimension "
                                      "of a tensor of its parameter (directly or in a tuple)"))
      << r.err;
}

}  // namespace
}  // namespace acrobat::test
