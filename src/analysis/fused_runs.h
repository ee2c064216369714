// How a block's operators form fused loops, the rule both kernel plans follow (kernel_plan.h for
// static blocks, ragged_plan.h for ragged ones), each with its own test of which operator can join.
#pragma once

#include <cstddef>

namespace acrobat::analysis {

// Runs of consecutive operators 0..n-1 that one loop computes.
//
// Algorithm:
//  1. Scan the operators in program order. An operator `passes(i)` names (a view, read in place)
//     belongs to no run and neither starts nor ends one.
//  2. A run starts at the first operator that can join a run of its own: `joins(i, i)`.
//  3. It extends over each following operator j for which `joins(first, j)` holds (of the first
//     one's size or shape, its operands readable in the loop), passing over those of 1.; the first
//     that cannot join ends it, and may start the next run.
//  4. `close(first, end)` finishes the run of operators [first, end) (with passed-over ones among
//     them).
// `joins` records the membership it grants: a later operator's test may depend on it (an operand
// computed by a member is read from a register).
template <class Passes, class Joins, class Close>
void fused_runs(size_t n, Passes&& passes, Joins&& joins, Close&& close) {
  for (size_t first = 0; first < n;) {
    if (passes(first)) {
      ++first;
      continue;
    }
    size_t end = first;
    for (; end < n; ++end)
      if (!passes(end) && !joins(first, end)) break;
    if (end == first) {  // not even on its own
      ++first;
      continue;
    }
    close(first, end);
    first = end;
  }
}

}  // namespace acrobat::analysis
