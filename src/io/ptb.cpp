#include "io/ptb.h"

#include <fmt/format.h>

#include "io/files.h"

namespace acrobat::io {

namespace {

constexpr int kMaxLabel = 4;

// Parses one line with an explicit stack of the nodes whose ')' has not been seen yet, so malformed
// input cannot recurse deeply.
class LineParser {
 public:
  LineParser(std::string_view text, const std::string& file, uint32_t line)
      : text_(text), file_(file), line_(line) {}

  PtbTree parse() {
    skip_space();
    if (at_end() || text_[pos_] != '(')
      fail(pos_, fmt::format("expected '(' starting a tree, found {}", next_token()));
    open_node();
    PtbTree root;
    while (!open_.empty()) {
      skip_space();
      PtbTree& node = open_.back();
      if (at_end())
        fail(pos_, fmt::format("expected ')' closing the {} opened at {}:{}, found end of line",
                               open_.size() == 1 ? "tree" : "node", line_, node.loc.col));
      const char c = text_[pos_];
      if (c == '(') {
        if (!node.word.empty())
          fail(pos_, fmt::format("expected ')' after the word {}, found '(': a node has either a "
                                 "word or children, not both",
                                 quote(node.word)));
        open_node();
      } else if (c == ')') {
        if (node.word.empty() && node.children.empty())
          fail(pos_, "expected a word or a child tree after the label, found ')'");
        ++pos_;
        PtbTree done = std::move(node);
        open_.pop_back();
        if (open_.empty())
          root = std::move(done);
        else
          open_.back().children.push_back(std::move(done));
      } else {
        const size_t start = pos_;
        std::string_view word = take_token();
        if (!node.children.empty())
          fail(start,
               fmt::format("expected '(' or ')' after a child tree, found the word {}: a node "
                           "has either a word or children, not both",
                           quote(word)));
        if (!node.word.empty())
          fail(start, fmt::format("expected ')' after the word {}, found a second word {}",
                                  quote(node.word), quote(word)));
        node.word = word;
      }
    }
    skip_space();
    if (!at_end()) {
      if (text_[pos_] == '(')
        fail(pos_, "expected end of line after the tree, found another '(': put one tree per line");
      if (text_[pos_] == ')')
        fail(pos_, fmt::format("unbalanced ')': the tree opened at {}:{} is already closed", line_,
                               root.loc.col));
      fail(pos_, fmt::format("expected end of line after the tree, found {}", next_token()));
    }
    return root;
  }

 private:
  bool at_end() const { return pos_ == text_.size(); }
  static bool is_delimiter(char c) { return c == '(' || c == ')' || is_space(c); }

  void skip_space() {
    while (!at_end() && is_space(text_[pos_])) ++pos_;
  }

  // The word starting at pos_ (non-empty: the caller checked text_[pos_] is not a delimiter).
  std::string_view take_token() {
    const size_t start = pos_;
    while (!at_end() && !is_delimiter(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  // What is at pos_, for "found ..." in messages.
  std::string next_token() const {
    if (at_end()) return "end of line";
    if (text_[pos_] == '(' || text_[pos_] == ')') return fmt::format("'{}'", text_[pos_]);
    size_t end = pos_;
    while (end < text_.size() && !is_delimiter(text_[end])) ++end;
    return quote(text_.substr(pos_, end - pos_));
  }

  [[noreturn]] void fail(size_t offset, std::string message) const {
    throw UserError(line_loc(file_, TextLine{text_, line_}, offset), std::move(message));
  }

  // At a '(': reads the label and pushes the new node.
  void open_node() {
    const size_t open_paren = pos_;
    if (open_.size() == kMaxPtbDepth)
      fail(open_paren, fmt::format("tree nested more than {} levels deep", kMaxPtbDepth));
    ++pos_;
    skip_space();
    if (!at_end() && text_[pos_] == ')' && pos_ == open_paren + 1)
      fail(open_paren, "empty node '()': expected '(label word)' or '(label child ...)'");
    if (at_end() || is_delimiter(text_[pos_]))
      fail(pos_, fmt::format("expected a sentiment label 0-{} after '(', found {}", kMaxLabel,
                             next_token()));
    const size_t label_start = pos_;
    std::string_view label = take_token();
    bool digits = true;
    for (char c : label) digits = digits && c >= '0' && c <= '9';
    if (!digits)
      fail(label_start, fmt::format("expected an integer sentiment label 0-{}, found {}", kMaxLabel,
                                    quote(label)));
    if (label.size() != 1 || label[0] - '0' > kMaxLabel)
      fail(label_start, fmt::format("sentiment label out of range: expected 0-{}, found {}",
                                    kMaxLabel, quote(label)));
    PtbTree node;
    node.label = label[0] - '0';
    node.loc = line_loc(file_, TextLine{text_, line_}, open_paren);
    open_.push_back(std::move(node));
  }

  std::string_view text_;
  const std::string& file_;
  uint32_t line_;
  size_t pos_ = 0;
  std::vector<PtbTree> open_;
};

}  // namespace

PtbTree parse_ptb_line(const std::string& text, const std::string& file, uint32_t line) {
  return LineParser(text, file, line).parse();
}

std::vector<PtbTree> read_ptb_file(const std::string& path) {
  return parse_ptb_text(path, read_file(path));
}

std::vector<PtbTree> parse_ptb_text(const std::string& path, const std::string& text) {
  std::vector<PtbTree> trees;
  for (const TextLine& line : split_lines(text, path)) {
    if (is_blank(line.text)) continue;
    trees.push_back(LineParser(line.text, path, line.number).parse());
  }
  return trees;
}

std::vector<std::string> ptb_leaves(const PtbTree& tree) {
  std::vector<std::string> words;
  std::vector<const PtbTree*> stack{&tree};
  while (!stack.empty()) {
    const PtbTree* node = stack.back();
    stack.pop_back();
    if (node->children.empty()) {
      words.push_back(node->word);
      continue;
    }
    for (auto it = node->children.rbegin(); it != node->children.rend(); ++it)
      stack.push_back(&*it);
  }
  return words;
}

}  // namespace acrobat::io
