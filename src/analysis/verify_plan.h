// The verifier of the plan attached to a module (analysis/plan.h): the invariants of the analyses'
// decisions that the engines and the code generator rely on, checked after the analyses. Like the IR
// verifier (ir/verify.h) it finds bugs in the compiler, never in the model.
//
// Checked, after the IR's own invariants, in one pass over the plan: one entry per function (and
// per variable for the reuse analysis's origins), one kernel plan per static block, static blocks
// within the blocks of their functions, tables by site covering every site, and every node the plan
// keys a decision by (block starts, ghosts, phase ends, tail calls, branch ownership, concurrent
// groups) a node of the module of the right kind.
#pragma once

#include <string>

#include "ir/ir.h"

namespace acrobat::analysis {

// The first invariant the module (ir/verify.h) or its plan breaks, with the verifier's message, or
// "" when they keep them all.
std::string find_plan_problem(const ir::Module& module, const std::string& stage);

// Ends in an internal error with find_plan_problem's message when the module or its plan breaks one.
void verify_plan(const ir::Module& module, const std::string& stage);

}  // namespace acrobat::analysis
