// The batched engine: the graph runtime (runtime/graph.h) with the interpreted block executor and
// the IR interpreter as each instance's host program. Running the host program records each
// static block execution as a dataflow-graph node; the graph runs them as batches (ACRoBat's
// dynamic half), under the scheduler chosen.
#pragma once

#include <memory>
#include <string>

#include "runtime/engine.h"
#include "runtime/graph.h"

namespace acrobat {

class BatchedEngine : public Engine {
 public:
  // `threads` > 1 splits each large batch across that many threads. `fibers` false runs the
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
  std::unique_ptr<State> state_;
};

}  // namespace acrobat
