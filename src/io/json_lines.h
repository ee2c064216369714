// JSON-lines input files: one JSON value per non-empty line (e.g. the inputs of a model run).
// Turning the values into model values is the runtime's job; this only parses and locates them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/diagnostics.h"

namespace acrobat::io {

struct JsonLine {
  nlohmann::json value;
  SourceLoc loc;  // where the value starts (file:line:col)
};

// Reads `path`: each line that is not empty or all whitespace holds exactly one JSON value. Objects
// must not repeat a key, and nesting is limited to kMaxJsonDepth (io/files.h). A UTF-8 BOM and CRLF
// line endings are accepted. Throws UserError at file:line:col for a syntax error, a duplicate key
// or a second value on a line, and "cannot open ..." if the file cannot be read.
std::vector<JsonLine> read_json_lines(const std::string& path);
// The same for the contents of a file, named `path` in messages.
std::vector<JsonLine> parse_json_lines(const std::string& path, const std::string& text);

// The JSON type of `value` for messages: "null", "boolean", "integer" (signed or unsigned),
// "number" (floating point), "string", "array", "object" or "binary".
std::string json_type_name(const nlohmann::json& value);

}  // namespace acrobat::io
