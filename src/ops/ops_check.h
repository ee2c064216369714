// The build-time check of each ops.def row, kept free of other headers so that a test can compile it
// against a modified registry: an elementwise operator must give its fused SIMD expression (the
// code generator and the interpreter's fused loops have no other definition of it) and its adjoint
// SIMD expressions (the generated adjoints of fused loops have none other), and no other class may
// give either.
#pragma once

#include <string_view>

namespace acrobat::ops_check {

constexpr bool fused_expression_matches_class(bool elementwise, std::string_view simd) {
  return elementwise == (simd != "()");
}

// An adjoint expression lists one adjoint per operand: `arity` comma-separated expressions at the
// top level of its parentheses.
constexpr bool adjoint_matches_class(bool elementwise, int arity, std::string_view adjoint) {
  if (!elementwise) return adjoint == "()";
  if (adjoint.size() < 3 || adjoint.front() != '(' || adjoint.back() != ')') return false;
  int depth = 0, commas = 0;
  for (size_t i = 1; i + 1 < adjoint.size(); ++i) {
    const char c = adjoint[i];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) ++commas;
  }
  return commas + 1 == arity;
}

}  // namespace acrobat::ops_check

// Expands one ops.def row into its check.
#define ACROBAT_CHECK_OP_ROW(id, name, arity, cls, simd, adjoint)                               \
  static_assert(::acrobat::ops_check::fused_expression_matches_class(                          \
                    std::string_view(#cls) == "Elementwise", #simd),                           \
                "ops.def: operator '" name "': an elementwise operator needs its fused SIMD "  \
                "expression (in a and b), and no other class may have one");                   \
  static_assert(::acrobat::ops_check::adjoint_matches_class(std::string_view(#cls) == "Elementwise", \
                                                            arity, #adjoint),                  \
                "ops.def: operator '" name "': an elementwise operator needs one adjoint SIMD " \
                "expression per operand (last column, in a, b, y and g), and no other class may have one");
