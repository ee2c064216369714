// Word vocabularies: the text file that maps words to the integer ids the models embed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace acrobat::io {

// A fixed word <-> id mapping. Id 0 is always "<unk>", the id of every word not in the file.
class Vocabulary {
 public:
  static constexpr int64_t kUnkId = 0;
  static constexpr std::string_view kUnkToken = "<unk>";

  // Reads `path`: one token per line, line i (0-based) is the token with id i, and line 0 must be
  // "<unk>". Tokens are compared byte for byte (case-sensitive). A UTF-8 BOM and CRLF line endings
  // are accepted. Throws UserError at file:line:col for an empty file, a first line other than
  // "<unk>", an empty line, a token containing ASCII whitespace or a token that appears twice, and
  // "cannot open ..." if the file cannot be read.
  static Vocabulary load(const std::string& path);

  // The id of `word`, or kUnkId if the vocabulary does not contain it.
  int64_t id(std::string_view word) const;
  // The token with id `id`. Throws UserError if id is not in [0, size()).
  const std::string& word(int64_t id) const;
  // The number of tokens, "<unk>" included: ids are 0 .. size()-1.
  size_t size() const { return words_.size(); }

 private:
  Vocabulary() = default;  // only load() makes one, so "<unk>" is always there

  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  std::string path_;  // for error messages
  std::vector<std::string> words_;
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> ids_;
};

}  // namespace acrobat::io
