// Plumbing shared by the io readers: whole-file reading and writing, splitting text into lines
// (tolerating a UTF-8 BOM and CRLF endings), and strict JSON parsing with byte positions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/diagnostics.h"

namespace acrobat::io {

// Reads the whole file as raw bytes. Throws UserError "cannot open PATH: <strerror>" when the file
// does not exist, is a directory or cannot be opened, and "cannot read PATH: ..." if reading fails.
std::string read_file(const std::string& path);

// Replaces the file with `bytes` (written to PATH.tmp, then renamed). Throws UserError on failure.
void write_file(const std::string& path, std::string_view bytes);

// `s` as one single-quoted word for /bin/sh (for paths and values put into a command line).
std::string shell_quote(const std::string& s);

// One line of a text file, without its line terminator.
struct TextLine {
  std::string_view text;  // points into the string given to split_lines
  uint32_t number = 0;    // 1-based
};

// Splits file contents into lines. A leading UTF-8 byte order mark is dropped and a '\r' before
// each '\n' (or at the very end) is removed. A final '\n' does not start another line, so "a\nb\n"
// is two lines and "" is none. Throws UserError if the file has more than 2^32-1 lines.
std::vector<TextLine> split_lines(const std::string& text, const std::string& file);

// The position of byte `offset` (0-based) of `line` in `file`.
SourceLoc line_loc(const std::string& file, const TextLine& line, size_t offset);

// ASCII whitespace, the only characters that separate tokens in the text formats.
inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}
inline bool is_blank(std::string_view text) {
  for (char c : text)
    if (!is_space(c)) return false;
  return true;
}

// `text` in single quotes for an error message: at most 40 bytes of it (then "..."), with control
// characters and bytes that are not valid UTF-8 escaped (\t, \x01, \xFF) so that the message stays
// readable.
std::string quote(std::string_view text);

// Why parse_json_strict rejected its input.
struct JsonError {
  size_t offset = 0;    // 0-based byte offset into the text (== text.size() for "end of input")
  std::string message;  // e.g. "invalid JSON: unexpected '}'; expected '[', '{', or a literal"
};

// The deepest nesting of arrays and objects parse_json_strict accepts, so that code walking the
// result recursively cannot overflow the stack. It matches the engines' limit of 5000 nested calls:
// a model walks an input recursively, so a deeper one could not run anyway.
inline constexpr size_t kMaxJsonDepth = 5000;

// Parses `text` as exactly one JSON value (surrounding whitespace allowed) into `out`. Besides
// syntax errors, rejects an object that repeats a key (nlohmann would silently keep the last) and
// nesting deeper than kMaxJsonDepth. `where` renders a byte offset for messages that mention a
// second position (e.g. "first at 3:7").
std::optional<JsonError> parse_json_strict(std::string_view text, nlohmann::json& out,
                                           const std::function<std::string(size_t)>& where);

}  // namespace acrobat::io
