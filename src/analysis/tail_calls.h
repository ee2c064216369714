// Tail calls: the calls a host program runs as a jump instead of a nested call, so that a loop
// written as tail recursion runs in constant stack on every engine and does not count towards the
// recursion limit.
//
// A call is a tail call when it calls the function it is in, directly, and its result is the
// function's result with nothing done to it afterwards: it is the last binding of the body, or of a
// branch of an if or match that is itself in that position, and the block returns it. Not when the
// call ends a phase (its result is marked after it returns), when the branch carries ghost levels
// (likewise), or when the call is a member of a group of concurrent calls (it runs on a fiber of its
// own). Only self calls: the generated code implements them as a jump to the function's start, and
// every engine treats the same calls the same way (mutual recursion keeps the recursion limit).
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/concurrency.h"
#include "analysis/depth.h"
#include "ir/ir.h"

namespace acrobat::analysis {

// By IR site: 1 for a tail call, 0 otherwise.
std::vector<uint8_t> find_tail_calls(const ir::Module& m, const DepthPlan& depth,
                                     const ConcurrencyPlan& concurrency);

}  // namespace acrobat::analysis
