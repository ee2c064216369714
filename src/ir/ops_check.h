// The build-time check of each ops.def row, kept free of other headers so that a test can compile it
// against a modified registry: an elementwise operator must give its fused SIMD expression (the
// code generator and the interpreter's fused loops have no other definition of it), and no other
// class may give one.
#pragma once

#include <string_view>

namespace acrobat::ops_check {

constexpr bool fused_expression_matches_class(bool elementwise, std::string_view simd) {
  return elementwise == (simd != "()");
}

}  // namespace acrobat::ops_check

// Expands one ops.def row into its check.
#define ACROBAT_CHECK_OP_ROW(id, name, cls, simd)                                              \
  static_assert(::acrobat::ops_check::fused_expression_matches_class(                          \
                    std::string_view(#cls) == "Elementwise", #simd),                           \
                "ops.def: operator '" name "': an elementwise operator needs its fused SIMD "  \
                "expression (last column, in a and b), and no other class may have one");
