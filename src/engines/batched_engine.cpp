#include "engines/batched_engine.h"

#include "engines/host_interpreter.h"
#include "engines/host_runtime.h"
#include "runtime/interpreted_blocks.h"

namespace acrobat {

// The host runtime with the host interpreter as the program and the interpreted blocks as the
// executor.
struct BatchedEngine::State : HostRuntime {
  State(const ir::Module& m, const ParamStore& p, Graph& g, InstanceDriver& d)
      : HostRuntime(m, p, g, d), interpreter(m), blocks(g.plan(), g.packed()) {}

  aot::Val enter(aot::AotContext* ctx, int32_t func, const aot::Val* args) override {
    return interpreter.call(ctx, func, args);
  }
  BlockExecutor& executor() override { return blocks; }

  HostInterpreter interpreter;
  InterpretedBlocks blocks;
};

BatchedEngine::BatchedEngine(std::shared_ptr<const ir::Module> module,
                             std::shared_ptr<const ParamStore> params, Scheduler scheduler,
                             int threads, bool fibers)
    : GraphEngine(std::move(module), std::move(params), scheduler, threads, fibers) {}

std::unique_ptr<GraphEngine::Program> BatchedEngine::make_program(Graph& graph,
                                                                  InstanceDriver& driver) {
  return std::make_unique<State>(*module_, *params_, graph, driver);
}

BatchedEngine::~BatchedEngine() = default;

}  // namespace acrobat
