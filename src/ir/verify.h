// The IR verifier: the invariants of the IR that the passes after lowering and the engines rely on,
// checked after every stage of the pipeline (the plan attached to it: analysis/verify_plan.h). A violation is a bug
// in the compiler, never in the model, so it ends in an internal error that names the stage that
// left the IR broken, the function and what is wrong.
//
// Checked, in one pass over the module (linear in its size):
//  - variables: every index within Function::vars; each variable defined once (a parameter, a
//    binding or a pattern variable); every use sees a definition in scope: a parameter, an earlier
//    binding of its block or of an enclosing block, or a variable of the enclosing clause's
//    pattern;
//  - functions: callee and function-value indices within Module::functions; a direct call passes as
//    many arguments as the callee has parameters, a closure as many values as the lifted lambda has
//    captures, a call of a function value (@f) as many as it has parameters besides captures, a
//    call through a variable of function type as many as the type has parameters; num_captures
//    within the parameters; origin names a function other than itself exactly for lambdas and
//    copies;
//  - nodes: no right-hand side appears twice in the module (passes key their results by node);
//  - per kind: operand counts of copies, projections, param reads, ifs and matches; a projection's
//    field within its operand's tuple type; an if's condition a bool; a constructor (in an
//    expression or a pattern) with as many fields as it declares; param indices within
//    Module::params;
#pragma once

#include <string>
#include <unordered_map>

#include "ir/ir.h"

namespace acrobat::ir {

// Where a node is in the module.
struct NodePlace {
  int function;
  const Block* block;
  size_t index;  // of its binding in `block`
};

// Every node of a verified module by itself and by its site, and every block with its function:
// what the checks of decisions keyed by site start from (analysis/verify_plan.h).
struct NodeIndex {
  std::unordered_map<const Rhs*, NodePlace> nodes;
  std::unordered_map<int, const Rhs*> sites;
  std::unordered_map<const Block*, int> blocks;
};

// "a call", "an if", ...: a node's kind as the verifier's messages name it.
std::string rhs_kind_name(const Rhs& r);

// The first invariant `module` breaks, as "IR verifier: after stage 'S', function @f: what is
// wrong", or "" when it keeps them all (then `index`, when given, gets the module's nodes).
std::string find_ir_problem(const Module& module, const std::string& stage, NodeIndex* index = nullptr);

// Ends in an internal error with find_ir_problem's message when `module` breaks an invariant.
void verify_module(const Module& module, const std::string& stage);

}  // namespace acrobat::ir
