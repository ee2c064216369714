// The CLI over a malformed instance in the middle of a batch: a clear error that names the
// instance, a non-zero exit, and no outputs presented for the batch.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

struct Result {
  int exit_code;
  std::string out;  // stdout and stderr together
};

Result run(const std::string& args) {
  std::string cmd = std::string(ACROBAT_BINARY) + " " + args + " 2>&1";
  Result r{-1, ""};
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string write_trees(const std::string& name, int bad_instance, const std::string& bad_text) {
  auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream out(path);
  for (int i = 0; i < 100; ++i) {
    if (i == bad_instance && !bad_text.empty()) {
      out << bad_text << "\n";
      continue;
    }
    int right = i == bad_instance ? 999999 : i + 2;
    out << "{\"Node\": [{\"Leaf\": [" << i + 1 << "]}, {\"Leaf\": [" << right << "]}]}\n";
  }
  return path.string();
}

const std::string kModel = std::string(ACROBAT_SOURCE_DIR) + "/models/treelstm.acr";

TEST(Cli, ErrorInTheMiddleOfABatchNamesTheInstance) {
  std::string input = write_trees("acrobat_cli_bad_id.jsonl", 70, "");
  for (const char* engine : {"batched", "reference"}) {
    Result r = run("run " + kModel + " --input json:" + input + " --batch 64 --engine " + engine);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("treelstm.acr:21:29: error: instance 70: index 999999 is out of range for "
                         "param 'emb' of 21702 entries"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("#0 "), std::string::npos) << "outputs printed for a failed run:\n" << r.out;
    EXPECT_EQ(r.out.find("instances in"), std::string::npos) << r.out;
  }
}

TEST(Cli, MalformedInstanceIsReportedWithItsLine) {
  std::string input =
      write_trees("acrobat_cli_bad_json.jsonl", 41, "{\"Node\": [{\"Leaf\": [1]}, {\"Leef\": [2]}]}");
  Result r = run("run " + kModel + " --input json:" + input + " --batch 64");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find(input + ":42:1: error: at $.Node[1]: 'Leef' is not a constructor of Tree"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("#0 "), std::string::npos) << r.out;
}

TEST(Cli, OutputFileIsNotWrittenForAFailedRun) {
  std::string input = write_trees("acrobat_cli_bad_id2.jsonl", 3, "");
  auto out = std::filesystem::temp_directory_path() / "acrobat_cli_out.json";
  std::filesystem::remove(out);
  Result r = run("run " + kModel + " --input json:" + input + " --output " + out.string());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(Cli, UnknownSchedulerIsRejected) {
  Result r = run("run " + kModel + " --input sst:x --scheduler fifo");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("fifo"), std::string::npos) << r.out;
}

}  // namespace
