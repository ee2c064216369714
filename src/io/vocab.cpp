#include "io/vocab.h"

#include <fmt/format.h>

#include "io/files.h"
#include "support/diagnostics.h"

namespace acrobat::io {

Vocabulary Vocabulary::load(const std::string& path) {
  const std::string text = read_file(path);
  const std::vector<TextLine> lines = split_lines(text, path);
  if (lines.empty())
    throw UserError(SourceLoc{path, 1, 1},
                    fmt::format("expected '{}' on line 1, found an empty file", kUnkToken));

  Vocabulary vocab;
  vocab.path_ = path;
  vocab.words_.reserve(lines.size());
  vocab.ids_.reserve(lines.size());
  for (const TextLine& line : lines) {
    const int64_t id = static_cast<int64_t>(vocab.words_.size());
    if (line.text.empty())
      throw UserError(line_loc(path, line, 0),
                      fmt::format("expected the token with id {}, found an empty line", id));
    for (size_t i = 0; i < line.text.size(); ++i) {
      if (is_space(line.text[i]))
        throw UserError(line_loc(path, line, i),
                        fmt::format("token {} contains whitespace; expected one token per line",
                                    quote(line.text)));
    }
    if (id == kUnkId && line.text != kUnkToken)
      throw UserError(line_loc(path, line, 0),
                      fmt::format("expected '{}' on line 1 (id {} is the unknown word), found {}",
                                  kUnkToken, kUnkId, quote(line.text)));
    auto [it, inserted] = vocab.ids_.emplace(std::string(line.text), id);
    if (!inserted)
      throw UserError(line_loc(path, line, 0), fmt::format("duplicate token {}, first on line {}",
                                                           quote(line.text), it->second + 1));
    vocab.words_.emplace_back(line.text);
  }
  return vocab;
}

int64_t Vocabulary::id(std::string_view word) const {
  auto it = ids_.find(word);
  return it == ids_.end() ? kUnkId : it->second;
}

const std::string& Vocabulary::word(int64_t id) const {
  if (id < 0 || static_cast<uint64_t>(id) >= words_.size())
    throw UserError(fmt::format("token id {} is out of range for the vocabulary {} (ids 0-{})", id,
                                path_, words_.size() - 1));
  return words_[static_cast<size_t>(id)];
}

}  // namespace acrobat::io
