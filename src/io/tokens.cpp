#include "io/tokens.h"

#include <charconv>
#include <limits>

#include <fmt/format.h>

#include "io/files.h"
#include "support/diagnostics.h"

namespace acrobat::io {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Parses the token text[begin, end) of `line`, a run of non-whitespace characters.
int64_t parse_id(const std::string& path, const TextLine& line, size_t begin, size_t end) {
  std::string_view token = line.text.substr(begin, end - begin);
  if (token[0] == '-' && token.size() > 1 && is_digit(token[1]))
    throw UserError(line_loc(path, line, begin),
                    fmt::format("expected a non-negative token id, found the negative number {}",
                                quote(token)));
  for (size_t i = 0; i < token.size(); ++i) {
    if (!is_digit(token[i]))
      throw UserError(
          line_loc(path, line, begin + i),
          fmt::format("expected a non-negative decimal token id, found {}", quote(token)));
  }
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec == std::errc::result_out_of_range)
    throw UserError(line_loc(path, line, begin),
                    fmt::format("token id {} is too large (the maximum is {})", quote(token),
                                std::numeric_limits<int64_t>::max()));
  ACROBAT_ASSERT(ec == std::errc() && ptr == token.data() + token.size(), "digits-only token");
  return value;
}

}  // namespace

std::vector<std::vector<int64_t>> read_token_lines(const std::string& path) {
  return parse_token_lines(path, read_file(path));
}

std::vector<std::vector<int64_t>> parse_token_lines(const std::string& path, const std::string& text) {
  std::vector<std::vector<int64_t>> out;
  for (const TextLine& line : split_lines(text, path)) {
    std::vector<int64_t>& ids = out.emplace_back();
    size_t pos = 0;
    const size_t n = line.text.size();
    while (pos < n) {
      if (is_space(line.text[pos])) {
        ++pos;
        continue;
      }
      size_t end = pos;
      while (end < n && !is_space(line.text[end])) ++end;
      ids.push_back(parse_id(path, line, pos, end));
      pos = end;
    }
  }
  return out;
}

}  // namespace acrobat::io
