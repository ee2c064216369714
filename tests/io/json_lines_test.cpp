#include "io/json_lines.h"

#include <gtest/gtest.h>

#include "io/files.h"
#include "io_test_util.h"

namespace acrobat::io {
namespace {

using test::bad_file;
using test::fails_with;
using test::TempDir;

TEST(JsonLines, ReadsValuesWithPositions) {
  TempDir dir;
  const std::string path =
      dir.write("j.jsonl", "{\"a\": 1}\n\n  [1, 2.5, \"x\", null, true, -3]\n\"s\"\n");
  std::vector<JsonLine> lines = read_json_lines(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].value["a"], 1);
  EXPECT_EQ(lines[0].loc.str(), path + ":1:1");
  EXPECT_EQ(lines[1].loc.str(), path + ":3:3");
  EXPECT_EQ(lines[2].value, "s");
  const nlohmann::json& array = lines[1].value;
  EXPECT_EQ(json_type_name(lines[0].value), "object");
  EXPECT_EQ(json_type_name(array), "array");
  EXPECT_EQ(json_type_name(array[0]), "integer");
  EXPECT_EQ(json_type_name(array[1]), "number");
  EXPECT_EQ(json_type_name(array[2]), "string");
  EXPECT_EQ(json_type_name(array[3]), "null");
  EXPECT_EQ(json_type_name(array[4]), "boolean");
  EXPECT_EQ(json_type_name(array[5]), "integer");
}

TEST(JsonLines, HandlesBomAndCrlf) {
  TempDir dir;
  const std::string path = dir.write("j.jsonl", "\xEF\xBB\xBF[1]\r\n{\"b\": [true]}\r\n");
  std::vector<JsonLine> lines = read_json_lines(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].value, nlohmann::json::array({1}));
  EXPECT_EQ(lines[1].loc.line, 2u);
  const std::string bad = dir.write("b.jsonl", "\xEF\xBB\xBF[1]\r\n[1 2]\r\n");
  EXPECT_TRUE(fails_with([&] { read_json_lines(bad); }, bad + ":2:4",
                         "unexpected number literal; expected ']'"));
}

TEST(JsonLines, LimitsNesting) {
  TempDir dir;
  const std::string path =
      dir.write("deep.jsonl", "[]\n" + std::string(100000, '[') + std::string(100000, ']') + "\n");
  EXPECT_TRUE(fails_with([&] { read_json_lines(path); },
                         path + ":2:" + std::to_string(kMaxJsonDepth + 1),
                         "arrays and objects nested more than 5000 deep"));
}

// Found by fuzz/json_lines_fuzz.cpp: nlohmann throws out_of_range, not parse_error, for a number
// beyond a double, which escaped the reader as an exception without a position.
TEST(JsonLines, NumberOutOfRangeIsPositioned) {
  TempDir dir;
  const std::string path = dir.write("big.jsonl", "7\n[1, 922337e551]\n-1e400\n");
  EXPECT_TRUE(fails_with([&] { read_json_lines(path); }, path + ":2:5",
                         "invalid JSON: the number '922337e551' is out of range (JSON numbers here "
                         "must fit a double)"));
  const std::string last = dir.write("last.jsonl", "-1e400");
  EXPECT_TRUE(fails_with([&] { read_json_lines(last); }, last + ":1:1",
                         "the number '-1e400' is out of range"));
}

struct BadJson {
  const char* file;
  const char* where;
  const char* phrase;
};

class BadJsonLinesFile : public ::testing::TestWithParam<BadJson> {};

TEST_P(BadJsonLinesFile, FailsAtThePosition) {
  const BadJson& bad = GetParam();
  const std::string path = bad_file(bad.file);
  EXPECT_TRUE(fails_with([&] { read_json_lines(path); }, path + ":" + bad.where, bad.phrase));
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, BadJsonLinesFile,
    ::testing::Values(BadJson{"jsonl_syntax.txt", "2:13",
                              "invalid JSON: unexpected ','; expected '[', '{', or a literal"},
                      BadJson{"jsonl_two_values.txt", "1:5",
                              "invalid JSON: unexpected '['; expected end of input"},
                      BadJson{"jsonl_duplicate_key.txt", "1:24",
                              "invalid JSON: duplicate key \"k\" in an object (first at 1:16)"},
                      BadJson{"jsonl_unterminated.txt", "2:13",
                              "invalid JSON: invalid string: missing closing quote"},
                      BadJson{"jsonl_trailing_comma.txt", "1:9",
                              "expected string literal (while parsing object key)"}),
    [](const ::testing::TestParamInfo<BadJson>& info) {
      std::string name = info.param.file;
      return name.substr(0, name.find('.'));
    });

}  // namespace
}  // namespace acrobat::io
