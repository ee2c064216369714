// Lowering from the checked syntax tree to the IR: expressions become A-normal form, lambdas are
// lifted, split becomes slices, && and || become ifs, and numeric literals that meet tensors become
// `constant` operators. Only functions reachable from the user's file are kept.
#pragma once

#include <memory>

#include "ir/ir.h"
#include "lang/ast.h"

namespace acrobat {

// Takes a module that check_module accepted (the module is shared with the result, which refers to
// its data type definitions) and returns its IR.
ir::Module lower_to_ir(std::shared_ptr<const ast::Module> module);

}  // namespace acrobat
