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
// passes key their results by site); the copies have no site until number_new_sites.
Block deep_copy(const Block& block);

// Gives every node of `module` without a site the next free site id. Lowering numbers all its
// nodes; a pass that adds nodes numbers them before the next pass runs. Two nodes with one site (a
// copy that kept its original's) are a bug in the pass that made them; the verifier reports it.
void number_new_sites(Module& module);
// The node at each site id, by id; null for the ids of nodes a pass has dropped.
std::vector<const Rhs*> nodes_by_site(const Module& module);

}  // namespace acrobat::ir
