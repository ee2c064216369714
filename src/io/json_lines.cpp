#include "io/json_lines.h"

#include <fmt/format.h>

#include "io/files.h"

namespace acrobat::io {

std::vector<JsonLine> read_json_lines(const std::string& path) {
  return parse_json_lines(path, read_file(path));
}

std::vector<JsonLine> parse_json_lines(const std::string& path, const std::string& text) {
  std::vector<JsonLine> out;
  for (const TextLine& line : split_lines(text, path)) {
    if (is_blank(line.text)) continue;
    auto where = [&](size_t offset) {
      SourceLoc loc = line_loc(path, line, offset);
      return fmt::format("{}:{}", loc.line, loc.col);
    };
    nlohmann::json value;
    if (auto error = parse_json_strict(line.text, value, where))
      throw UserError(line_loc(path, line, error->offset), error->message);
    size_t start = 0;
    while (is_space(line.text[start])) ++start;
    out.push_back(JsonLine{std::move(value), line_loc(path, line, start)});
  }
  return out;
}

std::string json_type_name(const nlohmann::json& value) {
  using T = nlohmann::json::value_t;
  switch (value.type()) {
    case T::null: return "null";
    case T::boolean: return "boolean";
    case T::number_integer:
    case T::number_unsigned: return "integer";
    case T::number_float: return "number";
    case T::string: return "string";
    case T::array: return "array";
    case T::object: return "object";
    case T::binary: return "binary";
    case T::discarded: return "discarded";
  }
  return "unknown";
}

}  // namespace acrobat::io
