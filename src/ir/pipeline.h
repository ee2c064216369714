// The compiler's table of contents: every stage from source text to the IR the engines run, in
// order, each with an optional dump after it.
#pragma once

#include <memory>
#include <ostream>
#include <string>

#include "ir/ir.h"
#include "lang/check.h"

namespace acrobat {

struct CompileOptions {
  DimOverrides dims;           // --set K=V
  std::string print_after;     // a stage name: "parse" (checked AST) or "lower"; "" for none
  std::ostream* dump = nullptr;
};

// Stage names accepted by --print-after, in pipeline order.
const std::vector<std::string>& pipeline_stages();

// source -> parse + resolve + type/shape check -> lower to A-normal form.
// Throws UserError for any problem in the model.
std::shared_ptr<const ir::Module> compile_model(const std::string& path, const CompileOptions& options);

}  // namespace acrobat
