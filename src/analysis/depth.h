// Depth and phases: what the program fixes about where each static block's executions fall in the
// schedule, so that the engine's inline depth computation batches more of them together.
//
//  - Ghost operations. When the branches of an if or match add different numbers of blocks to the
//    longest dependency chain through them (both counts fixed by the program), the shorter branch's
//    result is padded with ghost operations: the values it returns count as that many levels deeper,
//    so the work after the branch falls at the same depth whichever branch an instance took (up to
//    256 levels of padding per branch).
//  - Phases. A call in top-level code (a function that no recursion reaches) to a function whose work
//    is unbounded (it recurses or loops) ends a phase for the values it returns: a block reading them
//    goes to the next phase, whose depths restart at 1. A block's phase is the latest phase among
//    its inputs, so independent calls still overlap (a second recursion that does not read the first
//    one's result runs in the same phase). All work of phase p runs before any of phase p+1: the
//    classifier after a tree recursion runs as one batch for trees of every height.
//  - Independent calls (no data dependence between them) start at the same depth without any
//    annotation, because a block's depth is 1 + the deepest block it reads, not its position in the
//    host program.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "analysis/blocks.h"
#include "ir/ir.h"

namespace acrobat::analysis {

struct DepthOptions {
  bool ghosts = true;
  bool phases = true;
};

struct DepthPlan {
  // By IR site, the If/Match bindings with ghost operations: the padding of each branch (If: then,
  // else; Match: one per clause). Branches with padding 0 everywhere are not listed.
  std::unordered_map<int, std::vector<int>> ghosts;
  // The sites of the call bindings whose results start the next phase (see above).
  std::unordered_set<int> phase_ends;
  // The padding of branch `branch` of `r` (0 when it has none).
  int ghost(const ir::Rhs& r, size_t branch) const {
    auto it = ghosts.find(r.site);
    return it == ghosts.end() ? 0 : it->second[branch];
  }
  bool ends_phase(const ir::Rhs& r) const { return phase_ends.count(r.site) > 0; }
  // Per function: the number of blocks on the longest dependency chain from its parameters to its
  // result when the program fixes it, -1 when unbounded (recursion, loops, calls through closures).
  std::vector<int> chain_length;
  // Per function: whether recursion reaches it (its calls cannot end phases).
  std::vector<bool> in_recursion;
};

DepthPlan analyse_depth(const ir::Module& module, const std::vector<StaticBlock>& blocks,
                        const DepthOptions& options);

// The depth plan as text (`acrobat emit depth`): per function its chain length and whether
// recursion reaches it, then in program order the ghost padding of each if/match and each call that
// ends a phase, with file:line:col.
std::string depth_plan_str(const ir::Module& module, const DepthPlan& plan);

// The lines of that text, which `acrobat explain` prints among the blocks:
// "  (chain of 3 blocks, top level)" after a function's name,
std::string depth_summary(const DepthPlan& plan, int function);
// "  if at m.acr:4:3: ghost operations per branch +0 +2\n", or "" without padding at `r`,
std::string ghost_line(const DepthPlan& plan, const ir::Rhs& r);
// "  call of @f at m.acr:9:5 ends phase 0\n", or "" when `r` ends no phase (then `phase` stays).
std::string phase_end_line(const ir::Module& module, const DepthPlan& plan, const ir::Rhs& r,
                           int& phase);

}  // namespace acrobat::analysis
