// The batched engine: runs the host program of every instance, records their tensor work lazily as a
// dataflow graph, and executes it as batched kernels (ACRoBat's dynamic half).
//
// Algorithm:
//  1. Static blocks (analysis/blocks.h) are formed at compile time: runs of tensor operators with no
//     host control flow between them. Each execution of one becomes one DFG node holding its
//     arguments (lazy handles of earlier nodes, or concrete tensors such as parameters and embedding
//     rows); only outputs that code after the block reads outlive their batch.
//  2. Recording. Each instance's host program runs to completion. With inline depth, a node's phase
//     is the latest phase among the pending values it reads and its depth 1 + the deepest of them
//     in that phase (ghost levels included; values an earlier flush computed count as ready
//     inputs, like parameters), computed right there; the node goes straight into bucket
//     [phase][depth][block] and no graph traversal follows. Values returned by calls the depth
//     analysis marks as phase ends move to the next phase; branches it marks add ghost levels to
//     the values they return (analysis/depth.h).
//  3. Scheduling. inline-depth: the buckets as recorded, phase by phase. depth (DyNet): depths
//     recomputed by a pass over the graph after recording. agenda (DyNet): repeatedly run, among the
//     blocks with ready nodes, the one whose ready nodes have the lowest average depth.
//  4. Execution. One batched kernel call per operator of a bucket's block. A reuse argument (from
//     the reuse analysis) is passed as one shared tensor; others whose B values are one tensor are
//     passed shared too, values already adjacent at a fixed stride in place (`contiguous`), the
//     rest gathered into a panel or read where they lie (`scatter`). Outputs of a bucket are
//     contiguous [B, ...] blocks in a per-run arena, recycled by the next run.
//  5. A tensor-to-host read in any instance runs everything recorded so far, then continues.
#pragma once

#include <memory>
#include <string>

#include "runtime/big_stack.h"
#include "runtime/engine.h"

namespace acrobat {

enum class Scheduler { InlineDepth, Depth, Agenda };
const char* scheduler_name(Scheduler s);
// Parses "inline-depth", "depth" or "agenda"; anything else is a UserError listing them.
Scheduler parse_scheduler(const std::string& name);

class BatchedEngine : public Engine {
 public:
  // `threads` > 1 splits each large kernel call across that many threads. `fibers` false runs the
  // instances of a program that reads tensors one after the other, each read running the pending
  // graph there and then (for comparison).
  BatchedEngine(std::shared_ptr<const ir::Module> module, std::shared_ptr<const ParamStore> params,
                Scheduler scheduler = Scheduler::InlineDepth, int threads = 1, bool fibers = true);
  ~BatchedEngine() override;
  const char* name() const override { return scheduler_name(scheduler_); }
  // All inputs form one batch.
  RunResult run(const std::vector<Value>& inputs, const std::string& entry = "main",
                size_t first_instance = 0) override;

  struct State;

 private:
  std::shared_ptr<const ir::Module> module_;
  std::shared_ptr<const ParamStore> params_;
  Scheduler scheduler_;
  bool fibers_;
  std::unique_ptr<State> state_;  // segments found so far and the arenas, kept across runs
  std::unique_ptr<StackThread> worker_;  // runs the interpreter (deep recursion needs its stack)
};

}  // namespace acrobat
