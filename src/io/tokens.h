// Token-id input files: one sequence of vocabulary ids per line (e.g. pre-tokenized sentences).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace acrobat::io {

// Reads `path`: line i is the i-th sequence, written as non-negative decimal integers separated by
// ASCII whitespace. Every line counts, so an empty (or all-whitespace) line is an empty sequence;
// a final newline does not add one. A UTF-8 BOM and CRLF line endings are accepted. Throws
// UserError at file:line:col for a character that is not a digit, a negative number or a number
// above INT64_MAX, and "cannot open ..." if the file cannot be read. Ids are not checked against a
// vocabulary here.
std::vector<std::vector<int64_t>> read_token_lines(const std::string& path);
// The same for the contents of a file, named `path` in messages.
std::vector<std::vector<int64_t>> parse_token_lines(const std::string& path, const std::string& text);

}  // namespace acrobat::io
