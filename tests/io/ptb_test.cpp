#include "io/ptb.h"

#include <gtest/gtest.h>

#include "io_test_util.h"

namespace acrobat::io {
namespace {

using test::bad_file;
using test::fails_with;
using test::source_path;
using test::TempDir;

TEST(Ptb, ParsesATree) {
  PtbTree t = parse_ptb_line("(3 (2 It) (4 (2 's) (3 fun)))", "f.txt", 7);
  EXPECT_EQ(t.label, 3);
  EXPECT_EQ(t.word, "");
  EXPECT_EQ(t.loc.str(), "f.txt:7:1");
  ASSERT_EQ(t.children.size(), 2u);
  EXPECT_EQ(t.children[0].label, 2);
  EXPECT_EQ(t.children[0].word, "It");
  EXPECT_TRUE(t.children[0].children.empty());
  EXPECT_EQ(t.children[0].loc.str(), "f.txt:7:4");
  const PtbTree& right = t.children[1];
  EXPECT_EQ(right.label, 4);
  EXPECT_EQ(right.loc.col, 11u);
  ASSERT_EQ(right.children.size(), 2u);
  EXPECT_EQ(right.children[1].label, 3);
  EXPECT_EQ(right.children[1].word, "fun");
  EXPECT_EQ(ptb_leaves(t), (std::vector<std::string>{"It", "'s", "fun"}));
}

TEST(Ptb, WordsAreAnythingButWhitespaceAndParens) {
  PtbTree t = parse_ptb_line(
      "  (1\t(0 -LRB-)(2 (2 n't)  (4 ...) (2 8\xC2\xA0"
      "1\\/2) (3 'em!)))  ",
      "f", 1);
  EXPECT_EQ(ptb_leaves(t), (std::vector<std::string>{"-LRB-", "n't", "...",
                                                     "8\xC2\xA0"
                                                     "1\\/2",
                                                     "'em!"}));
  EXPECT_EQ(t.loc.col, 3u);
  EXPECT_EQ(t.children[1].children.size(), 4u);  // the parser itself accepts n-ary nodes
  EXPECT_EQ(ptb_leaves(parse_ptb_line("(2 single)", "f", 1)), std::vector<std::string>{"single"});
}

// Checks that every inner node has exactly two children and every leaf a word.
bool is_binary(const PtbTree& root) {
  std::vector<const PtbTree*> stack{&root};
  while (!stack.empty()) {
    const PtbTree* node = stack.back();
    stack.pop_back();
    if (node->children.empty()) {
      if (node->word.empty()) return false;
      continue;
    }
    if (node->children.size() != 2 || !node->word.empty()) return false;
    for (const PtbTree& child : node->children) stack.push_back(&child);
  }
  return true;
}

TEST(Ptb, ReadsSstAndEveryTreeIsBinary) {
  const std::pair<const char*, size_t> splits[] = {{"train", 8544}, {"dev", 1101}, {"test", 2210}};
  for (const auto& [name, count] : splits) {
    const std::string path = source_path(std::string("data/sst/") + name + ".txt");
    std::vector<PtbTree> trees = read_ptb_file(path);
    ASSERT_EQ(trees.size(), count) << path;
    for (size_t i = 0; i < trees.size(); ++i) {
      ASSERT_TRUE(is_binary(trees[i])) << trees[i].loc.str() << ": not a binary tree";
      ASSERT_EQ(trees[i].loc.line, i + 1);
      ASSERT_EQ(trees[i].loc.file, path);
    }
  }
  std::vector<PtbTree> test = read_ptb_file(source_path("data/sst/test.txt"));
  EXPECT_EQ(test[0].label, 2);
  EXPECT_EQ(ptb_leaves(test[0]),
            (std::vector<std::string>{"Effective", "but", "too-tepid", "biopic"}));
  EXPECT_EQ(test[0].children[1].children[0].word, "too-tepid");
  EXPECT_EQ(test[0].children[1].children[0].label, 1);
}

TEST(Ptb, HandlesBomCrlfAndBlankLines) {
  TempDir dir;
  const std::string path =
      dir.write("t.txt", "\xEF\xBB\xBF(2 (3 a) (1 b))\r\n\r\n   \r\n(4 c)\r\n");
  std::vector<PtbTree> trees = read_ptb_file(path);
  ASSERT_EQ(trees.size(), 2u);
  EXPECT_EQ(ptb_leaves(trees[0]), (std::vector<std::string>{"a", "b"}));  // no BOM in the position
  EXPECT_EQ(trees[0].loc.str(), path + ":1:1");
  EXPECT_EQ(trees[1].word, "c");  // not "c\r"
  EXPECT_EQ(trees[1].loc.line, 4u);
  const std::string broken = dir.write("b.txt", "(2 a)\r\n(2 (2 a)\r\n");
  EXPECT_TRUE(fails_with([&] { read_ptb_file(broken); }, broken + ":2:9", "found end of line"));
}

TEST(Ptb, LimitsDepthWithoutRecursing) {
  auto nested = [](size_t depth) {
    std::string text;
    for (size_t i = 0; i < depth; ++i) text += "(2 ";
    text += "w";
    return text + std::string(depth, ')');
  };
  PtbTree deepest = parse_ptb_line(nested(kMaxPtbDepth), "f", 1);
  EXPECT_EQ(ptb_leaves(deepest), std::vector<std::string>{"w"});
  EXPECT_TRUE(fails_with([&] { parse_ptb_line(nested(kMaxPtbDepth + 1), "f", 1); },
                         "f:1:" + std::to_string(3 * kMaxPtbDepth + 1),
                         "tree nested more than 5000 levels deep"));
  TempDir dir;
  const std::string path = dir.write("deep.txt", std::string(100000, '(') + "\n");
  EXPECT_TRUE(fails_with([&] { read_ptb_file(path); }, path + ":1:2",
                         "expected a sentiment label 0-4 after '('"));
  const std::string path2 = dir.write("deep2.txt", nested(100000) + "\n");
  EXPECT_TRUE(fails_with([&] { read_ptb_file(path2); },
                         path2 + ":1:" + std::to_string(3 * kMaxPtbDepth + 1),
                         "nested more than 5000 levels"));
}

TEST(Ptb, EmptyLineIsAnError) {
  EXPECT_TRUE(fails_with([&] { parse_ptb_line("   ", "f", 4); }, "f:4:4",
                         "expected '(' starting a tree, found end of line"));
}

struct BadPtb {
  const char* file;
  const char* where;  // line:col
  const char* phrase;
};

class BadPtbFile : public ::testing::TestWithParam<BadPtb> {};

TEST_P(BadPtbFile, FailsAtThePosition) {
  const BadPtb& bad = GetParam();
  const std::string path = bad_file(bad.file);
  EXPECT_TRUE(fails_with([&] { read_ptb_file(path); }, path + ":" + bad.where, bad.phrase));
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, BadPtbFile,
    ::testing::Values(
        BadPtb{"ptb_unclosed.txt", "3:29",
               "expected ')' closing the tree opened at 3:1, found end of line"},
        BadPtb{"ptb_extra_close.txt", "1:16",
               "unbalanced ')': the tree opened at 1:1 is already closed"},
        BadPtb{"ptb_missing_label.txt", "3:2",
               "expected a sentiment label 0-4 after '(', found '('"},
        BadPtb{"ptb_bad_label.txt", "1:5", "expected an integer sentiment label 0-4, found 'x'"},
        BadPtb{"ptb_label_range.txt", "1:11",
               "sentiment label out of range: expected 0-4, found '7'"},
        BadPtb{"ptb_word_and_children.txt", "1:9", "expected ')' after the word 'good', found '('"},
        BadPtb{"ptb_children_and_word.txt", "1:16",
               "found the word 'bad': a node has either a word or children"},
        BadPtb{"ptb_empty_node.txt", "1:4", "empty node '()'"},
        BadPtb{"ptb_trailing_junk.txt", "1:17",
               "expected end of line after the tree, found 'junk'"},
        BadPtb{"ptb_two_trees.txt", "2:7",
               "expected end of line after the tree, found another '('"},
        BadPtb{"ptb_two_words.txt", "1:9",
               "expected ')' after the word 'a', found a second word 'b'"},
        BadPtb{"ptb_no_word.txt", "1:6",
               "expected a word or a child tree after the label, found ')'"},
        BadPtb{"ptb_not_a_tree.txt", "1:1", "expected '(' starting a tree, found 'hello'"}),
    [](const ::testing::TestParamInfo<BadPtb>& info) {
      std::string name = info.param.file;
      return name.substr(0, name.find('.'));
    });

}  // namespace
}  // namespace acrobat::io
