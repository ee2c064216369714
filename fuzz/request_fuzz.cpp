// Fuzzes the body of a predict request as `acrobat serve` reads it (values_from_request, the very
// function its endpoint calls, without HTTP) for the entry types of the served models: a tree, a
// list of word ids, a tensor, a data type of the model's own. Any bytes must give instances or a
// UserError; the instances must convert back to JSON.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "engines/inputs.h"
#include "lang/frontend.h"

namespace {

constexpr const char* kTypes =
    "type Shape = Circle(float) | Rect(float, float) | Group(List[Shape])\n"
    "def a(x: Tree) -> int { 0 }\n"
    "def b(x: List[int]) -> int { 0 }\n"
    "def c(x: f32[2, 3]) -> int { 0 }\n"
    "def d(x: Shape) -> int { 0 }\n";

// The parameter types of the functions above, from one checked module that owns their definitions.
const std::vector<acrobat::Type>& entry_types() {
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
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (const acrobat::Type& type : entry_types()) {
    try {
      for (const acrobat::Value& v : acrobat::values_from_request(body, type)) acrobat::value_to_json(v, type).dump();
    } catch (const acrobat::UserError&) {
    }
  }
  return 0;
}
