// The input types the fuzz targets convert values into: scalars, a tensor, a list, a tree, a data
// type of the model's own, a tuple of those; each target's inputs must give values of every one or
// a UserError.
#pragma once

#include <vector>

#include "lang/frontend.h"

namespace acrobat::fuzz {

inline constexpr const char* kTypes =
    "type Shape = Circle(float) | Rect(float, float) | Group(List[Shape])\n"
    "def a(x: int) -> int { 0 }\n"
    "def b(x: float) -> int { 0 }\n"
    "def c(x: f32[2, 3]) -> int { 0 }\n"
    "def d(x: List[int]) -> int { 0 }\n"
    "def e(x: Tree) -> int { 0 }\n"
    "def f(x: Shape) -> int { 0 }\n"
    "def g(x: (bool, f32[1], List[(int, Shape)], ())) -> int { 0 }\n";

// The parameter types of the functions above, from one checked module that owns their definitions.
inline const std::vector<Type>& input_types() {
  static const auto module = parse_model_text("types.acr", kTypes, {});
  static const std::vector<Type> types = [] {
    std::vector<Type> out;
    for (const auto& f : module->funcs)
      if (f->span.begin.file == "types.acr") out.push_back(f->params[0].var->type);
    return out;
  }();
  return types;
}

}  // namespace acrobat::fuzz
