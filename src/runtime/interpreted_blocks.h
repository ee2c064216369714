// The interpreted block executor: computes a batch of a static block by executing its kernel plan
// (analysis/kernel_plan.h) step by step, with the library's batched kernels and the fused loops of
// runtime/fused_loops.h (no C++ compiler at run time). The batched (interpreter) engine is the graph
// runtime + this executor + the IR interpreter as host program.
#pragma once

#include "analysis/plan.h"
#include "runtime/graph.h"

namespace acrobat {

class InterpretedBlocks : public BlockExecutor {
 public:
  InterpretedBlocks(const analysis::Plan& plan, const PackedIndex& packed) : plan_(plan), packed_(packed) {}
  void run(const BatchCall& call) override;

 private:
  const analysis::Plan& plan_;
  const PackedIndex& packed_;
};

}  // namespace acrobat
