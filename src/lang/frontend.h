// The front end as one call: read a model file, parse it after the prelude, resolve and type-check.
#pragma once

#include <memory>
#include <string>

#include "lang/ast.h"
#include "lang/check.h"

namespace acrobat {

// The text of src/lang/prelude.acr (data types and list functions every model can use).
const char* prelude_source();

// Parses and checks the model in `path` (with `overrides` for its dims). Throws UserError with every
// diagnostic found, each as file:line:col.
std::shared_ptr<ast::Module> parse_model_file(const std::string& path, const DimOverrides& overrides);
// The same for source text held in memory, named `file` in diagnostics.
std::shared_ptr<ast::Module> parse_model_text(const std::string& file, const std::string& text,
                                              const DimOverrides& overrides);

// Checks that the model can be run from `entry`: a function of the model taking exactly one
// parameter (the input instance) whose result has a JSON form (no function values in it). Throws
// UserError naming the model file, or at the function's position.
void check_entry(const ast::Module& module, const std::string& entry);

}  // namespace acrobat
