// The text of a generated C++ file, line by line: each line indented two spaces for every block
// open around it, and only Writer::Block opens and closes one, so no caller counts levels.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace acrobat::codegen {

class Writer {
 public:
  // The lines written while it lives are one level deeper than the line that opened it; it writes
  // its closing line (a brace unless given another, none when empty) as it goes out of scope.
  class [[nodiscard]] Block {
   public:
    Block(const Block&) = delete;
    Block& operator=(const Block&) = delete;
    ~Block() {
      --w_.depth_;
      if (!close_.empty()) w_.line(close_);
    }
    // Ends this part of the block with `between` and goes on with the next part ("} else {").
    void next(std::string_view between) {
      --w_.depth_;
      w_.line(between);
      ++w_.depth_;
    }

   private:
    friend class Writer;
    Block(Writer& w, std::string close) : w_(w), close_(std::move(close)) { ++w_.depth_; }
    Writer& w_;
    std::string close_;
  };

  void line(std::string_view s) {
    out_.append(static_cast<size_t>(depth_) * 2, ' ');
    out_ += s;
    out_ += '\n';
  }
  void blank() { out_ += '\n'; }
  // `open` on a line of its own, then a block.
  Block block(std::string_view open, std::string close = "}") {
    line(open);
    return Block(*this, std::move(close));
  }
  // Text as it is, indentation and line ends its own (the fixed prelude).
  void text(std::string_view s) { out_ += s; }

  // A position in the text, and text put in at one written before (a label found needed later).
  size_t position() const { return out_.size(); }
  void insert(size_t at, std::string_view s) { out_.insert(at, s); }

  std::string take() { return std::move(out_); }

 private:
  std::string out_;
  int depth_ = 0;
};

}  // namespace acrobat::codegen
