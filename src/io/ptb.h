// Penn-Treebank-style s-expression trees, one per line, as in the Stanford Sentiment Treebank:
// `(3 (2 It) (4 (2 's) (3 fun)))`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "support/diagnostics.h"

namespace acrobat::io {

// A node: a leaf `(label word)` has a word and no children, an inner node `(label child ...)` has
// children and an empty word.
struct PtbTree {
  int label = 0;  // sentiment class 0-4
  std::string word;
  std::vector<PtbTree> children;
  SourceLoc loc;  // the node's '('
};

// Trees nested deeper than this are rejected, which keeps recursive walks of a tree (and its
// destructor) well within the stack. It matches the engines' limit of 5000 nested calls (a model
// recurses over the tree); SST trees are at most ~30 deep.
inline constexpr size_t kMaxPtbDepth = 5000;

// Parses one line holding exactly one tree. Tokens are '(', ')' and words (runs of characters other
// than ASCII whitespace and parentheses, e.g. -LRB-, 's, n't, ...); labels must be integers 0-4.
// Throws UserError at file:line:col (col = byte offset in `text` + 1) for unbalanced parentheses,
// a missing, non-integer or out-of-range label, an empty node `()`, a node with both a word and
// children (or two words, or neither), anything after the tree, and nesting beyond kMaxPtbDepth.
PtbTree parse_ptb_line(const std::string& text, const std::string& file, uint32_t line);

// Reads one tree from each line of `path` that is not empty or all whitespace (those are skipped).
// A UTF-8 BOM and CRLF line endings are accepted. Throws UserError as parse_ptb_line does, and
// "cannot open ..." if the file cannot be read.
std::vector<PtbTree> read_ptb_file(const std::string& path);
// The same for the contents of a file, named `path` in messages.
std::vector<PtbTree> parse_ptb_text(const std::string& path, const std::string& text);

// The words of the tree's leaves, left to right.
std::vector<std::string> ptb_leaves(const PtbTree& tree);

}  // namespace acrobat::io
