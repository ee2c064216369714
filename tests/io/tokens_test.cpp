#include "io/tokens.h"

#include <gtest/gtest.h>

#include "io_test_util.h"

namespace acrobat::io {
namespace {

using test::bad_file;
using test::fails_with;
using test::TempDir;
using Lines = std::vector<std::vector<int64_t>>;

TEST(TokenLines, ReadsSequencesAndEmptyLines) {
  TempDir dir;
  const std::string path = dir.write("t.txt", "1 2 3\n\n  \n0\t42  007\n9223372036854775807\n");
  EXPECT_EQ(read_token_lines(path), (Lines{{1, 2, 3}, {}, {}, {0, 42, 7}, {INT64_MAX}}));
  EXPECT_EQ(read_token_lines(dir.write("e.txt", "")), Lines{});
  EXPECT_EQ(read_token_lines(dir.write("n.txt", "\n")), Lines{{}});
  EXPECT_EQ(read_token_lines(dir.write("c.txt",
                                       "\xEF\xBB\xBF"
                                       "5 6\r\n\r\n7\r\n")),
            (Lines{{5, 6}, {}, {7}}));
}

TEST(TokenLines, BadCharacterInCrlfFile) {
  TempDir dir;
  const std::string path = dir.write("c.txt", "1\r\n2 3\r4\r\n");  // a lone CR is whitespace
  EXPECT_EQ(read_token_lines(path), (Lines{{1}, {2, 3, 4}}));
  const std::string bad = dir.write("b.txt",
                                    "\xEF\xBB\xBF"
                                    "1 2\r\n3 4.5\r\n");
  EXPECT_TRUE(fails_with([&] { read_token_lines(bad); }, bad + ":2:4", "found '4.5'"));
}

struct BadTokens {
  const char* file;
  const char* where;
  const char* phrase;
};

class BadTokensFile : public ::testing::TestWithParam<BadTokens> {};

TEST_P(BadTokensFile, FailsAtThePosition) {
  const BadTokens& bad = GetParam();
  const std::string path = bad_file(bad.file);
  EXPECT_TRUE(fails_with([&] { read_token_lines(path); }, path + ":" + bad.where, bad.phrase));
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, BadTokensFile,
    ::testing::Values(
        BadTokens{"tokens_letter.txt", "2:4",
                  "expected a non-negative decimal token id, found '5x'"},
        BadTokens{"tokens_negative.txt", "3:3",
                  "expected a non-negative token id, found the negative number '-4'"},
        BadTokens{
            "tokens_overflow.txt", "2:21",
            "token id '9223372036854775808' is too large (the maximum is 9223372036854775807)"},
        BadTokens{"tokens_plus.txt", "1:1",
                  "expected a non-negative decimal token id, found '+5'"}),
    [](const ::testing::TestParamInfo<BadTokens>& info) {
      std::string name = info.param.file;
      return name.substr(0, name.find('.'));
    });

}  // namespace
}  // namespace acrobat::io
