// The compiler's table of contents: every stage from source text to the IR and plan the engines run,
// in order, each with an optional dump after it.
#pragma once

#include <memory>
#include <ostream>
#include <string>

#include "compiler/options.h"
#include "ir/ir.h"
#include "lang/ast.h"

namespace acrobat {

// The stages CompileOptions::print_after names, in pipeline order: `ast` (the checked syntax tree),
// `ir` (after lowering), the IR after `specialise`, `reuse` and `concurrent`, the static blocks and
// their plan (`blocks`), the depth plan (`depth`), the IR with its dups and drops (`ownership`).
const std::vector<std::string>& pipeline_stages();

// source -> parse + resolve + type/shape check -> lower to A-normal form -> specialise higher-order
// calls -> parameter-reuse analysis (cloning) -> concurrent calls -> static blocks -> depth and
// phases. The IR verifier (ir/verify.h) runs after every stage from lowering on.
// Throws UserError for any problem in the model.
std::shared_ptr<const ir::Module> compile_model(const std::string& path, const CompileOptions& options);
// The same from a checked syntax tree (parse_model_text), for models held in memory.
std::shared_ptr<const ir::Module> compile_checked(std::shared_ptr<const ast::Module> ast,
                                                 const CompileOptions& options);

}  // namespace acrobat
