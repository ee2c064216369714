// `acrobat explain`: what the compiler decided about a model, as text. Per function: the
// specialisations and clones that made it and why; per static block: its operators, argument modes,
// static depth, phase and FLOPs; ghost operations and phase ends where they are.
#pragma once

#include <string>

#include "ir/ir.h"

namespace acrobat::analysis {

// The module must carry a plan (compile_model attaches one).
std::string explain(const ir::Module& module);

}  // namespace acrobat::analysis
