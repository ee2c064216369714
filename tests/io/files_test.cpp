#include "io/files.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "io/json_lines.h"
#include "io/ptb.h"
#include "io/safetensors.h"
#include "io/tokens.h"
#include "io/vocab.h"
#include "io_test_util.h"

namespace acrobat::io {
namespace {

using test::fails_with;
using test::TempDir;

std::vector<std::string> texts(const std::vector<TextLine>& lines) {
  std::vector<std::string> out;
  for (const TextLine& line : lines) out.emplace_back(line.text);
  return out;
}

TEST(SplitLines, HandlesFinalNewlineBomAndCrlf) {
  using V = std::vector<std::string>;
  EXPECT_EQ(texts(split_lines("", "f")), V{});
  EXPECT_EQ(texts(split_lines("\n", "f")), V{""});
  EXPECT_EQ(texts(split_lines("a\nb\n", "f")), (V{"a", "b"}));
  EXPECT_EQ(texts(split_lines("a\nb", "f")), (V{"a", "b"}));
  EXPECT_EQ(texts(split_lines("a\n\nb\n\n", "f")), (V{"a", "", "b", ""}));
  EXPECT_EQ(texts(split_lines("\xEF\xBB\xBF"
                              "a\r\nb\r\n",
                              "f")),
            (V{"a", "b"}));
  EXPECT_EQ(texts(split_lines("a\r\nb\r", "f")), (V{"a", "b"}));
  EXPECT_EQ(texts(split_lines("a\rb\n", "f")), V{"a\rb"});  // only a CR before LF is a line ending
  std::vector<TextLine> lines = split_lines("x\ny\nz", "f");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2].number, 3u);
}

TEST(Quote, CutsLongTextAtCharacterBoundary) {
  EXPECT_EQ(quote("abc"), "'abc'");
  EXPECT_EQ(quote(std::string(41, 'x')), fmt::format("'{}...'", std::string(40, 'x')));
  // 39 ASCII bytes then a 2-byte character straddling the 40-byte cut: the cut moves before it.
  EXPECT_EQ(quote(std::string(39, 'x') + "\xC3\xA9" + "yy"),
            fmt::format("'{}...'", std::string(39, 'x')));
}

TEST(Quote, EscapesControlCharactersAndInvalidUtf8) {
  EXPECT_EQ(quote("caf\xC3\xA9 8\xC2\xA0"
                  "1"),
            "'caf\xC3\xA9 8\xC2\xA0"
            "1'");  // valid UTF-8 stays
  EXPECT_EQ(quote("a\tb\x01\x7F"), "'a\\tb\\x01\\x7F'");
  EXPECT_EQ(
      quote("\xFF\xC3(\xE0\x80\x80\xED\xA0\x80"),
      "'\\xFF\\xC3(\\xE0\\x80\\x80\\xED\\xA0\\x80'");  // stray, truncated, overlong, surrogate
  EXPECT_EQ(quote("\xF0\x9F\x98\x80"), "'\xF0\x9F\x98\x80'");  // U+1F600
}

TEST(ParseJsonStrict, ReportsSyntaxErrorOffsets) {
  auto where = [](size_t offset) { return std::to_string(offset); };
  nlohmann::json value;
  std::optional<JsonError> error = parse_json_strict("[1, 2,, 3]", value, where);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->offset, 6u);
  EXPECT_EQ(error->message, "invalid JSON: unexpected ','; expected '[', '{', or a literal");
  error = parse_json_strict("{\"a\": tru}", value, where);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->offset, 9u);
  EXPECT_EQ(error->message, "invalid JSON: invalid literal; last read: '\"a\": tru}'");
  error = parse_json_strict("{\"a\" 1}", value, where);
  ASSERT_TRUE(error);
  EXPECT_EQ(
      error->message,
      "invalid JSON: unexpected number literal; expected ':' (while parsing object separator)");
  error = parse_json_strict("[1", value, where);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->offset, 2u);  // end of input
  EXPECT_FALSE(parse_json_strict(" {\"a\": [1, {\"b\": null}]} ", value, where));
  EXPECT_EQ(value["a"][1].size(), 1u);
}

TEST(ParseJsonStrict, RejectsDuplicateKeysAtTheirPosition) {
  auto where = [](size_t offset) { return "offset " + std::to_string(offset); };
  nlohmann::json value;
  // Same key in different objects is fine.
  EXPECT_FALSE(parse_json_strict(R"([{"a": 1}, {"a": 2, "b": {"a": 3}}])", value, where));
  std::optional<JsonError> error = parse_json_strict(R"({"a\"b": 1, "a\"b": 2})", value, where);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->offset, 12u);
  EXPECT_EQ(error->message,
            R"(invalid JSON: duplicate key "a\"b" in an object (first at offset 1))");
  // A key ending in an escaped backslash.
  error = parse_json_strict(R"({"x\\": {}, "y": 0, "x\\": 1})", value, where);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->offset, 20u);
}

TEST(ParseJsonStrict, LimitsNesting) {
  auto where = [](size_t offset) { return std::to_string(offset); };
  nlohmann::json value;
  std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_FALSE(parse_json_strict(ok, value, where));
  std::string deep = "{\"k\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  std::optional<JsonError> error = parse_json_strict(deep, value, where);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->offset, 6u + kMaxJsonDepth - 1);  // the '[' one level too deep
  EXPECT_NE(error->message.find("nested more than 5000 deep"), std::string::npos) << error->message;
}

TEST(ReadFile, EveryReaderReportsMissingFilesAndDirectories) {
  TempDir dir;
  const std::string missing = dir.path("missing.txt");
  const std::string message = "cannot open " + missing + ": No such file or directory";
  EXPECT_TRUE(fails_with([&] { read_file(missing); }, "", message));
  EXPECT_TRUE(fails_with([&] { read_safetensors(missing); }, "", message));
  EXPECT_TRUE(fails_with([&] { read_ptb_file(missing); }, "", message));
  EXPECT_TRUE(fails_with([&] { Vocabulary::load(missing); }, "", message));
  EXPECT_TRUE(fails_with([&] { read_token_lines(missing); }, "", message));
  EXPECT_TRUE(fails_with([&] { read_json_lines(missing); }, "", message));
  const std::string directory = dir.path("");
  EXPECT_TRUE(fails_with([&] { read_ptb_file(directory); }, "",
                         "cannot open " + directory + ": Is a directory"));
}

TEST(WriteFile, ReplacesContentsAndReportsFailure) {
  TempDir dir;
  write_file(dir.path("f"), "first version");
  write_file(dir.path("f"), "second");
  EXPECT_EQ(read_file(dir.path("f")), "second");
  EXPECT_FALSE(std::filesystem::exists(dir.path("f.tmp")));
  const std::string target = dir.path("no/such/dir/f");
  EXPECT_TRUE(fails_with([&] { write_file(target, "x"); }, "",
                         "cannot open for writing " + target + ".tmp: No such file or directory"));
}

}  // namespace
}  // namespace acrobat::io
