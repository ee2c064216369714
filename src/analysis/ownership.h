// Ownership of lazy tensors in the host program: where a host program hands a reference to a batch
// output over (dup) and where it gives one up (drop), decided statically, Perceus-style, so that the
// graph runtime can release a batch's output buffer once no host value and no pending node can
// reach it any more (runtime/graph.h).
//
// The model. A variable that may hold a lazy tensor (a tensor, or a value of a type parameter) is
// either *owned*, holding one reference the host program must hand over or give up, or *borrowed*,
// read from an aggregate that keeps its own (a projection, a pattern variable). Owned: function
// parameters, results of calls, ifs and matches, copies, and the outputs of a static block that the
// program reads after it (the record hands the host one reference to each). Parameters, embedding
// rows and constants are never lazy and are left out. A reference is handed over by an *owned use*:
// a call argument (tail calls included), a block's result, the source of a copy, a field of a
// tuple, data-type value or closure. Aggregates never give their references up: what they hold
// stays pinned until the run ends (conservative: a missed release costs memory, a premature one
// would be a wrong answer). A static block's node reads its arguments with references of its own,
// counted by the graph when it is recorded and released after its batch has run.
//
// Algorithm, per function, one backward liveness pass over its structured blocks:
//  1. Roles, forward in program order: owned, borrowed or none (not a tensor, never lazy, or a
//     value a static block computes and nothing reads after it).
//  2. Units: a static block's bindings are one unit (its host bindings run before the record, its
//     ownership actions after it); a group of concurrent calls (analysis/concurrency.h) is one unit
//     whose variables stay live until every member has finished; every other binding is a unit.
//  3. Backward over each block with the owned variables live after each unit: an owned use of a
//     variable still live after it, or of a borrowed one, is a dup before the unit; the last owned
//     use of an owned variable is a move (nothing emitted); an owned variable read for the last time
//     without being handed over (a static block argument, a tensor read, a match scrutinee), or
//     defined and never read, is dropped after the unit. An if or match drops, on entry to each
//     branch, what is live into another branch but not into this one. A function drops on entry
//     the parameters its body never reads. Every block and function is visited once: it terminates.
// Both host programs (codegen/emit_host.cpp, engines/host_interpreter.h) execute exactly these
// actions, so both engines release the same buffers at the same points.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/blocks.h"
#include "analysis/concurrency.h"
#include "ir/ir.h"

namespace acrobat::analysis {

// A list of variables in OwnershipPlan::vars: [begin, end).
struct VarList {
  int32_t begin = 0, end = 0;
  bool empty() const { return begin == end; }
  int32_t size() const { return end - begin; }
};

// What happens when a block (a function body, a branch of an if, a clause of a match) starts and
// ends.
struct BlockOwnership {
  VarList drops;            // on entry
  bool dup_result = false;  // its result is handed over with a dup (borrowed, or still live)
};

struct OwnershipPlan {
  // False when the analysis was switched off: no dups or drops, and the graph keeps every batch
  // output until the run ends.
  bool enabled = false;
  std::vector<int32_t> vars;  // every VarList below points into it; one entry per dup or drop
  // By IR site of a binding. `dups`: one reference handed over per entry, before the binding runs
  // (inside the member, for a member of a group of concurrent calls); for the first binding of a
  // static block, after the block is recorded. `drops`: after the binding; after the whole group
  // for the first member of a group; after the dups for the first binding of a static block.
  std::vector<VarList> dups, drops;
  std::vector<BlockOwnership> bodies;  // per function
  // By IR site of an if (then, else) or a match (one per clause).
  std::unordered_map<int, std::vector<BlockOwnership>> branches;
  // By static block id, per operator: 1 when the host program owns one reference to the
  // operator's value once the block is recorded, 0 when it keeps none.
  std::vector<std::vector<uint8_t>> owned_outputs;
  // Per function, per variable: whether it is owned or borrowed (may hold a lazy tensor the
  // program accounts for). A closure call dups the captured values of the tracked parameters.
  std::vector<std::vector<uint8_t>> tracked;

  const int32_t* begin(VarList l) const { return vars.data() + l.begin; }
  const int32_t* end(VarList l) const { return vars.data() + l.end; }
  const BlockOwnership& branch(const ir::Rhs& r, size_t index) const {
    return branches.at(r.site)[index];
  }
};

// The ownership actions of every function of `module`, whose static blocks and groups of
// concurrent calls are `blocks` and `concurrency`.
OwnershipPlan analyse_ownership(const ir::Module& module, const std::vector<StaticBlock>& blocks,
                                const std::vector<int>& block_at_site,
                                const ConcurrencyPlan& concurrency);

// The IR of a module compiled with its plan, with the ownership actions in it (`acrobat emit
// ownership`, golden tests): `dup` and `drop` lines where they happen, `(dup)` after a result
// handed over with a dup, a static block's actions after its last binding following `record #id`,
// and a group's drops after its last member following `join`.
std::string ownership_str(const ir::Module& module);

}  // namespace acrobat::analysis
