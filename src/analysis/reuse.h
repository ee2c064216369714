// Parameter-reuse taint analysis: for every tensor variable of every function, is it always the same
// parameter tensor (reuse), a slice of an indexed parameter chosen by a host int (indexed), or a
// per-instance value (scatter)? A static block reads its reuse arguments as one dense operand for
// the whole batch, groups its indexed arguments by slice, and reads scatter arguments row by row.
//
// The analysis is context-sensitive: a function whose calling contexts pass different weights for
// the same parameter is cloned once per distinct set of weights, so that every clone sees one weight
// per parameter and keeps `reuse` (see the algorithm note in reuse.cpp).
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"

namespace acrobat::analysis {

enum class ArgMode { Reuse, Indexed, Scatter };
const char* arg_mode_name(ArgMode mode);  // "reuse", "indexed", "scatter"

// What the analysis knows about one variable.
struct Origin {
  ArgMode mode = ArgMode::Scatter;
  int param = -1;  // Reuse: the ir::Param loaded whole; Indexed: the indexed ir::Param
};

// One clone made by the analysis, for `acrobat explain`.
struct CloneRecord {
  std::string original;  // the function cloned
  std::string clone;     // the new function's name
  std::string reason;    // which weights its contexts pass, e.g. "%W = @Wf_h, %b = @b_f"
  std::vector<std::string> call_sites;  // "file:line:col" of the calls redirected to the clone
};

struct ReuseInfo {
  std::vector<std::vector<Origin>> origins;  // [function][var] of the module after cloning
  std::vector<CloneRecord> clones;
};

struct ReuseOptions {
  bool clone = true;            // false: no cloning; contexts that disagree make a parameter scatter
  int max_clones_per_function = 16;  // beyond this, the remaining contexts share one scatter version
};

// Classifies every variable of `module`, cloning functions (appended to module.functions, calls
// redirected) where contexts pass different weights. Functions defined in the user's file (not the
// prelude, not lifted lambdas) may be called as an entry with any arguments, so each also has a
// context in which all its parameters are scatter; the original function keeps that context.
// Clones get fresh IR nodes: no Rhs is shared between two functions.
struct Reused {
  ir::Module module;  // with the clones, and the calls redirected to them
  ReuseInfo info;
};
Reused analyse_param_reuse(ir::Module module, const ReuseOptions& options = {});

}  // namespace acrobat::analysis
