#include "io/vocab.h"

#include <map>

#include <gtest/gtest.h>

#include "io/ptb.h"
#include "io_test_util.h"

namespace acrobat::io {
namespace {

using test::bad_file;
using test::fails_with;
using test::source_path;
using test::TempDir;

TEST(Vocabulary, LooksUpWordsAndIds) {
  TempDir dir;
  const std::string path = dir.write("v.txt", "<unk>\nthe\n,\n-LRB-\nn't\n");
  Vocabulary v = Vocabulary::load(path);
  EXPECT_EQ(v.size(), 5u);
  EXPECT_EQ(v.id("the"), 1);
  EXPECT_EQ(v.id("-LRB-"), 3);
  EXPECT_EQ(v.id("n't"), 4);
  EXPECT_EQ(v.id("<unk>"), 0);
  EXPECT_EQ(v.id("The"), Vocabulary::kUnkId);  // case-sensitive
  EXPECT_EQ(v.id(""), Vocabulary::kUnkId);
  EXPECT_EQ(v.word(0), "<unk>");
  EXPECT_EQ(v.word(2), ",");
  EXPECT_TRUE(fails_with([&] { v.word(5); }, "",
                         "token id 5 is out of range for the vocabulary " + path + " (ids 0-4)"));
  EXPECT_TRUE(fails_with([&] { v.word(-1); }, "", "token id -1 is out of range"));
}

TEST(Vocabulary, HandlesBomAndCrlf) {
  TempDir dir;
  const std::string path = dir.write("v.txt", "\xEF\xBB\xBF<unk>\r\nthe\r\na");
  Vocabulary v = Vocabulary::load(path);
  EXPECT_EQ(v.size(), 3u);
  EXPECT_EQ(v.id("the"), 1);
  EXPECT_EQ(v.word(2), "a");
}

// data/sst/vocab.txt (made by scripts/make_vocab.py) holds exactly the leaf words of the SST files,
// by descending frequency then byte order.
TEST(Vocabulary, SstVocabularyMatchesTheTrees) {
  Vocabulary v = Vocabulary::load(source_path("data/sst/vocab.txt"));
  EXPECT_EQ(v.size(), 21702u);
  std::map<std::string, int64_t> counts;
  for (const char* split : {"train", "dev", "test"}) {
    for (const PtbTree& tree :
         read_ptb_file(source_path(std::string("data/sst/") + split + ".txt"))) {
      for (const std::string& word : ptb_leaves(tree)) {
        ++counts[word];
        ASSERT_NE(v.id(word), Vocabulary::kUnkId) << word;
      }
    }
  }
  EXPECT_EQ(counts.size() + 1, v.size());
  for (int64_t id = 1; id < static_cast<int64_t>(v.size()); ++id) {
    ASSERT_EQ(v.id(v.word(id)), id);
    if (id > 1) {
      const std::string& prev = v.word(id - 1);
      const std::string& word = v.word(id);
      ASSERT_TRUE(counts[prev] > counts[word] || (counts[prev] == counts[word] && prev < word))
          << "ids " << id - 1 << " and " << id << " are out of order: " << prev << ", " << word;
    }
  }
  EXPECT_EQ(v.word(1), ".");
  EXPECT_EQ(v.id("the"), 3);
}

struct BadVocab {
  const char* file;
  const char* where;
  const char* phrase;
};

class BadVocabFile : public ::testing::TestWithParam<BadVocab> {};

TEST_P(BadVocabFile, FailsAtThePosition) {
  const BadVocab& bad = GetParam();
  const std::string path = bad_file(bad.file);
  EXPECT_TRUE(fails_with([&] { Vocabulary::load(path); }, path + ":" + bad.where, bad.phrase));
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, BadVocabFile,
    ::testing::Values(
        BadVocab{"vocab_empty.txt", "1:1", "expected '<unk>' on line 1, found an empty file"},
        BadVocab{"vocab_no_unk.txt", "1:1",
                 "expected '<unk>' on line 1 (id 0 is the unknown word), found 'the'"},
        BadVocab{"vocab_duplicate.txt", "4:1", "duplicate token 'the', first on line 2"},
        BadVocab{"vocab_whitespace.txt", "3:4", "token 'ice cream' contains whitespace"},
        BadVocab{"vocab_empty_line.txt", "3:1",
                 "expected the token with id 2, found an empty line"}),
    [](const ::testing::TestParamInfo<BadVocab>& info) {
      std::string name = info.param.file;
      return name.substr(0, name.find('.'));
    });

}  // namespace
}  // namespace acrobat::io
