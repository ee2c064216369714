// Fuzzes the JSON-lines reader and the conversion of its values into model values of several types
// (scalars, tensors, lists, trees, a data type of the model's own, tuples of those), and back to
// JSON: any text must give values or a UserError.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/json_lines.h"
#include "engines/inputs.h"
#include "input_types.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<acrobat::io::JsonLine> lines;
  try {
    lines = acrobat::io::parse_json_lines("fuzz.jsonl", text);
  } catch (const acrobat::UserError&) {
    return 0;
  }
  for (const auto& line : lines) {
    for (const acrobat::Type& type : acrobat::fuzz::input_types()) {
      try {
        acrobat::Value v = acrobat::value_from_json(line.value, type, line.loc);
        acrobat::value_to_json(v, type).dump();
      } catch (const acrobat::UserError&) {
      }
    }
  }
  return 0;
}
