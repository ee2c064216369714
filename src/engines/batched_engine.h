// The batched engine: the graph runtime (runtime/graph.h) with the interpreted block executor and
// the IR interpreter as each instance's host program. Running the host program records each
// static block execution as a dataflow-graph node; the graph runs them as batches (ACRoBat's
// dynamic half), under the scheduler chosen.
#pragma once

#include <memory>
#include <string>

#include "engines/graph_engine.h"

namespace acrobat {

class BatchedEngine : public GraphEngine {
 public:
  // See GraphEngine for `threads` and `fibers`.
  BatchedEngine(std::shared_ptr<const ir::Module> module, std::shared_ptr<const ParamStore> params,
                Scheduler scheduler = Scheduler::InlineDepth, int threads = 1, bool fibers = true);
  ~BatchedEngine() override;

  const char* name() const override { return scheduler_name(scheduler()); }

  struct State;

 private:
  std::unique_ptr<Program> make_program(Graph& graph, InstanceDriver& driver) override;
};

}  // namespace acrobat
