// Walking and rewriting IR blocks: shared by the passes after lowering and their tests.
#pragma once

#include <functional>
#include <set>

#include "ir/ir.h"

namespace acrobat::ir {

// Calls fn on `block` and on every block nested in it (if branches, match clauses), outer first.
void for_each_block(const Block& block, const std::function<void(const Block&)>& fn);

// Adds to `out` the variables `rhs` reads (its blocks' bindings and results included).
void vars_read(const Rhs& rhs, std::set<int>& out);
// Adds to `out` the variables bindings[from..] of `block` and its result read.
void vars_read(const Block& block, size_t from, std::set<int>& out);

// Replaces the right-hand side of every binding in `block` and in the blocks nested in it by
// fn(rhs) where that is not null, rebuilding only the nodes that change. Returns whether anything
// changed.
bool rewrite_rhs(Block& block, const std::function<RhsPtr(const Rhs&)>& fn);

// A copy of `block` with fresh nodes, so that every right-hand side belongs to one function (later
// passes key their results by node).
Block deep_copy(const Block& block);

}  // namespace acrobat::ir
