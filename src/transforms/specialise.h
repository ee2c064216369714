// Specialisation of higher-order calls: a call that passes a known function, or a closure built in
// the caller, for a function-typed parameter that the callee only calls or passes on unchanged to
// itself (foldl, map, ...), becomes a call of a copy of the callee in which that parameter is gone
// and its calls are direct calls (a closure's captured values become extra leading arguments).
// Afterwards the host program makes direct calls the later analyses can follow.
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"

namespace acrobat {

struct SpecialisationRecord {
  std::string callee;       // e.g. "foldl"
  std::string argument;     // the function passed, e.g. "forward" or "main$lambda0"
  std::string specialised;  // the new function, e.g. "foldl$forward"
};

struct Specialised {
  ir::Module module;
  std::vector<SpecialisationRecord> records;  // what was specialised
};

// The module with calls specialised (new functions appended; functions no longer reachable from a
// user function are kept but unused). Copies get fresh IR nodes and sites: no Rhs is shared between
// two functions.
Specialised specialise_higher_order(ir::Module module);

}  // namespace acrobat
