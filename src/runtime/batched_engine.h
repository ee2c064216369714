// The batched engine: runs the host program of every instance, records their tensor work lazily as a
// dataflow graph, and executes it as batched kernels (ACRoBat's dynamic half).
//
// Algorithm:
//  1. Segments. A segment is a run of tensor operators in one IR block with no control flow between
//     them (calls, ifs, matches, tensor-to-host reads end it). It is found once, the first time an
//     instance reaches it, and becomes one DFG node per execution. Operands from outside the segment
//     are its external slots; an operator's output escapes when code after the segment uses it, and
//     only escaping outputs outlive their batch.
//  2. Recording. Each instance's host program runs to completion; a segment execution appends a node
//     holding its external operands (lazy handles of earlier nodes, or concrete tensors such as
//     parameters and embedding rows). With inline depth, the node's depth is 1 + the largest depth
//     of the nodes it reads, computed right there, and the node goes straight into bucket
//     [depth][segment]; no graph traversal follows.
//  3. Scheduling. inline-depth: the buckets as recorded. depth (DyNet): depths recomputed by a pass
//     over the graph after recording. agenda (DyNet): repeatedly run, among the segments with ready
//     nodes, the one whose ready nodes have the lowest average depth.
//  4. Execution. One batched kernel call per operator of a bucket's segment. An external slot whose
//     B tensors are one tensor is passed shared (`reuse`), tensors already adjacent at a fixed stride
//     are passed in place (`contiguous`), others are gathered into a panel (`scatter`). Outputs of a
//     bucket are contiguous [B, ...] blocks in a per-run arena, recycled by the next run.
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
  BatchedEngine(std::shared_ptr<const ir::Module> module, std::shared_ptr<const ParamStore> params,
                Scheduler scheduler = Scheduler::InlineDepth);
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
  std::unique_ptr<State> state_;  // segments found so far and the arenas, kept across runs
  std::unique_ptr<StackThread> worker_;  // runs the interpreter (deep recursion needs its stack)
};

}  // namespace acrobat
