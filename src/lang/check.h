// Name resolution and type/shape checking of a parsed module. Fills every expression's type and every
// name's referent in place; reports all errors it can find (file:line:col, expected vs found).
#pragma once

#include <map>
#include <string>

#include "lang/ast.h"

namespace acrobat {

// `dim` values given on the command line (`--set H=512`), applied before dims are evaluated.
using DimOverrides = std::map<std::string, int64_t>;

// Algorithm:
//  1. Evaluate `dim` declarations in order, applying overrides; a dim may use earlier dims.
//  2. Declare data types, then their constructors' field types (type parameters in scope).
//  3. Resolve `param` shapes and function signatures, so bodies may call any function (recursion,
//     mutual recursion) regardless of order.
//  4. Check each body bottom-up with unification over type variables: generic functions and
//     constructors are instantiated with fresh variables at each use; lambda arguments are checked
//     after the other arguments so their parameter types are known; operator calls apply the shape
//     rule of the operator registry.
//  5. Check that matches are exhaustive and that no function recurses on every path (no base case).
// Throws UserError with every diagnostic if anything failed.
void check_module(ast::Module& module, const DimOverrides& overrides, DiagnosticSink& sink);

}  // namespace acrobat
