// No abort on user input: a model too big for the machine, numbers out of range on the command line
// and failures of the system (memory, files) each end in one clear message and exit status 1.
#include "cli_util.h"

namespace acrobat::test {
namespace {

constexpr const char* kIndexBound =
    "a tensor holds at most 2147483647 (the kernels index elements with int)";

// `--set H=1048576` on the Tree-LSTM: its gate matrices pass the kernels' index type and its
// embedding table the machine's memory. Found by `check` as by `run`, before anything is allocated.
TEST(CliLimits, LargeDimNamesTheParams) {
  std::string model = source_path("models/treelstm.acr");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"check", model, "--set", "H=1048576"},
        std::vector<std::string>{"run", model, "--set", "H=1048576", "--input",
                                 "sst:" + source_path("data/sst/test.txt")}}) {
    CliResult r = run_cli(args);
    EXPECT_EQ(r.status, 1) << args[0] << ": " << r.err;
    EXPECT_TRUE(contains(r.err, model + ":10:15: error: param 'W_leaf': f32[1048576, 3145728] has "
                                        "3298534883328 elements; " + kIndexBound))
        << r.err;
    EXPECT_TRUE(contains(r.err, model + ":12:18: error: param 'U_node': f32[1048576, 5242880] has "
                                        "5497558138880 elements; " + kIndexBound))
        << r.err;
    EXPECT_TRUE(contains(r.err, model + ":9:1: error: param 'emb' needs 84.8 GiB (21702 tensors "
                                        "f32[1, 1048576]), and the params need 84.8 GiB in total, "
                                        "more than this machine's "))
        << r.err;
    EXPECT_EQ(r.out, "") << args[0];
  }
}

TEST(CliLimits, LargeDimInAnExpression) {
  TempDir dir;
  std::string model = dir.write("big.acr", "dim H = 1099511627776\n"
                                           "def main(x: int) -> int {\n"
                                           "  let z = zeros(1, H);\n"
                                           "  x\n"
                                           "}\n");
  std::string input = dir.write("in.jsonl", "1\n");
  for (std::string engine : {"check", "reference", "batched"}) {
    CliResult r = engine == "check"
                      ? run_cli({"check", model})
                      : run_cli({"run", model, "--engine", engine, "--input", "json:" + input});
    EXPECT_EQ(r.status, 1) << engine;
    EXPECT_EQ(r.err, model + ":3:11: error: zeros: its result f32[1, 1099511627776] has "
                             "1099511627776 elements; " + kIndexBound + "\n")
        << engine;
  }
}

// A tensor the checker admits but the process cannot allocate (a 4 GiB zeros under a 2 GB address
// space limit): std::bad_alloc becomes a message.
TEST(CliLimits, OutOfMemoryIsAMessage) {
  TempDir dir;
  std::string model = dir.write("gig.acr", "def main(x: int) -> float {\n"
                                           "  item(sum(sum(zeros(32768, 32768), axis=1), axis=0))\n"
                                           "}\n");
  std::string input = dir.write("in.jsonl", "1\n");
  for (std::string engine : {"reference", "batched"}) {
    CliResult r = run_cli({"run", model, "--engine", engine, "--input", "json:" + input},
                          "ulimit -v 2000000; ");
    EXPECT_EQ(r.status, 1) << engine << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "error: out of memory: the run needs more memory than the machine "
                                "could give; use a smaller --batch or smaller dims\n"))
        << r.err;
  }
}

TEST(CliLimits, FileSystemErrorIsAMessage) {
  CliResult r = run_cli({"bench", "--all", "--quick", "--out", "/dev/null/results"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: filesystem error: cannot create directories: Not a directory "
                   "[/dev/null/results]\n");
}

// The ragged training benchmark's arguments: --train belongs to --ragged, and PyTorch's rows from a
// file must be the script's JSON of the same kind of benchmark.
TEST(CliLimits, RaggedTrainingBenchmarkArguments) {
  TempDir dir;
  CliResult r = run_cli({"bench", "--train"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: bench: --train is a kind of --ragged benchmark (the encoder layer's training step)\n");
  const std::string lengths = source_path("tests/models/tiny_lengths.txt");
  for (const auto& [content, kind] : {std::pair<std::string, std::string>{"{\"results\": [", " --train"},
                                      {"{\"benchmark\": \"ragged-encoder-layer\", \"results\": []}", " --train"}}) {
    const std::string rows = dir.write("pytorch.json", content);
    r = run_cli({"bench", "--ragged", "--train", "--lengths", lengths, "--batch", "4", "--threads", "1",
                 "--pytorch-json", rows, "--out", dir.path("out")});
    EXPECT_EQ(r.status, 1) << content;
    EXPECT_TRUE(contains(r.err, "error: " + rows + ": not the PyTorch rows of a" + kind +
                                    " ragged benchmark (bench/ragged_pytorch.py's JSON)\n"))
        << r.err;
  }
}

using OptionCases = std::vector<std::pair<std::vector<std::string>, std::string>>;

// Runs `command` with each case's extra options; each must fail with exactly its message.
void expect_option_errors(const std::vector<std::string>& command, const OptionCases& cases) {
  for (const auto& [extra, message] : cases) {
    std::vector<std::string> args = command;
    args.insert(args.end(), extra.begin(), extra.end());
    CliResult r = run_cli(args);
    EXPECT_EQ(r.status, 1) << extra[0] << " " << extra[1];
    EXPECT_EQ(r.err, "error: " + message + "\n") << extra[0] << " " << extra[1];
  }
}

// Each numeric option is checked against its range and named in the message.
TEST(CliLimits, NumbersOutOfRange) {
  std::string model = source_path("models/treelstm.acr");
  std::string input = "sst:" + source_path("data/sst/test.txt");
  const OptionCases cases = {
      {{"--threads", "100000"}, "--threads '100000': expected an integer from 1 to 1024"},
      {{"--threads", "0"}, "--threads '0': expected an integer from 1 to 1024"},
      {{"--batch", "-1"}, "--batch '-1': expected an integer from 0 to 1048576"},
      {{"--batch", "99999999999999999999"},
       "--batch '99999999999999999999': expected an integer from 0 to 1048576"},
      {{"--limit", "0"}, "--limit '0': expected an integer from 1 to 1099511627776"},
      {{"--limit", "ten"}, "--limit 'ten': expected an integer from 1 to 1099511627776"},
      {{"--show", "-2"}, "--show '-2': expected an integer from 0 to 1099511627776"},
      {{"--seed", "-1"}, "--seed '-1': expected an integer from 0 to 18446744073709551615"},
      {{"--set", "H=99999999999999999999"},
       "--set 'H=99999999999999999999': expected NAME=VALUE with a positive integer VALUE (at "
       "most 9223372036854775807)"},
  };
  expect_option_errors({"run", model, "--input", input}, cases);
  const OptionCases bench_cases = {
      {{"--reps", "0"}, "--reps '0': expected an integer from 1 to 1000"},
      {{"--threads", "1,100000"},
       "--threads '1,100000': expected a comma-separated list of integers from 1 to 1024"},
      {{"--batch", "8,-1"},
       "--batch '8,-1': expected a comma-separated list of integers from 1 to 1048576"},
      {{"--pytorch-limit", "-5"}, "--pytorch-limit '-5': expected an integer from 0 to 1099511627776"},
  };
  expect_option_errors({"bench", model, "--input", input}, bench_cases);
}

// Command-line syntax errors (CLI11's own messages) exit 1 as well.
TEST(CliLimits, UnknownOptionExitsOne) {
  CliResult r = run_cli({"check", source_path("models/treelstm.acr"), "--bogus"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "--bogus")) << r.err;
}

}  // namespace
}  // namespace acrobat::test
