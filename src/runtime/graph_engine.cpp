#include "runtime/graph_engine.h"

#include <chrono>

namespace acrobat {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
const analysis::Plan& plan_of(const ir::Module& m) {
  ACROBAT_ASSERT(m.plan, "a batched engine needs a module compiled by compile_model");
  return *m.plan;
}
}  // namespace

GraphEngine::GraphEngine(std::shared_ptr<const ir::Module> module,
                         std::shared_ptr<const ParamStore> params, Scheduler scheduler, int threads,
                         bool fibers)
    : module_(std::move(module)),
      params_(std::move(params)),
      graph_(plan_of(*module_), *params_, scheduler, std::max(1, threads)),
      driver_(fibers) {}

GraphEngine::~GraphEngine() = default;

RunResult GraphEngine::run(const std::vector<Value>& inputs, const std::string& entry,
                           size_t first_instance) {
  int func = entry_function(*module_, entry);
  const analysis::Plan& plan = *module_->plan;
  RunResult result;
  RunStats& stats = result.stats;
  Program& program = *program_;
  graph_.reset(stats);
  program.begin_run(func, inputs, stats);
  auto start = Clock::now();
  std::function<void()> flush = [&] { graph_.flush(program.executor()); };
  driver_.run(inputs.size(), plan.tensor_reads, plan.concurrency.num_groups > 0, first_instance,
              [&](size_t i) { program.run_instance(i); }, flush);
  stats.host_seconds = seconds_since(start) - graph_.flush_seconds();
  flush();
  result.outputs.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) result.outputs.push_back(program.output(i));
  stats.instances = static_cast<int64_t>(inputs.size());
  stats.nodes = *graph_.num_nodes();
  stats.wall_seconds = seconds_since(start);
  return result;
}

}  // namespace acrobat
