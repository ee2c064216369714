// Fuzzes the JSON-lines reader and the conversion of its values into model values of several types
// (scalars, tensors, lists, trees, a data type of the model's own, tuples of those), and back to
// JSON: any text must give values or a UserError.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/json_lines.h"
#include "lang/frontend.h"
#include "engines/inputs.h"

namespace {

constexpr const char* kTypes =
    "type Shape = Circle(float) | Rect(float, float) | Group(List[Shape])\n"
    "def a(x: int) -> int { 0 }\n"
    "def b(x: float) -> int { 0 }\n"
    "def c(x: f32[2, 3]) -> int { 0 }\n"
    "def d(x: List[int]) -> int { 0 }\n"
    "def e(x: Tree) -> int { 0 }\n"
    "def f(x: Shape) -> int { 0 }\n"
    "def g(x: (bool, f32[1], List[(int, Shape)], ())) -> int { 0 }\n";

// The parameter types of the functions above, from one checked module that owns their definitions.
const std::vector<acrobat::Type>& input_types() {
  static const auto module = acrobat::parse_model_text("types.acr", kTypes, {});
  static const std::vector<acrobat::Type> types = [] {
    std::vector<acrobat::Type> out;
    for (const auto& f : module->funcs)
      if (f->span.begin.file == "types.acr") out.push_back(f->params[0].var->type);
    return out;
  }();
  return types;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<acrobat::io::JsonLine> lines;
  try {
    lines = acrobat::io::parse_json_lines("fuzz.jsonl", text);
  } catch (const acrobat::UserError&) {
    return 0;
  }
  for (const auto& line : lines) {
    for (const acrobat::Type& type : input_types()) {
      try {
        acrobat::Value v = acrobat::value_from_json(line.value, type, line.loc);
        acrobat::value_to_json(v, type).dump();
      } catch (const acrobat::UserError&) {
      }
    }
  }
  return 0;
}
