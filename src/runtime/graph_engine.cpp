#include "runtime/graph_engine.h"

#include <algorithm>
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

struct GraphEngine::Lane {
  Lane(const analysis::Plan& plan, std::shared_ptr<const PackedIndex> packed, Scheduler scheduler,
       std::shared_ptr<ThreadPool> pool, bool fibers)
      : graph(plan, std::move(packed), scheduler, std::move(pool)), driver(fibers) {}
  Graph graph;
  InstanceDriver driver;
  std::unique_ptr<Program> program;
};

GraphEngine::GraphEngine(std::shared_ptr<const ir::Module> module,
                         std::shared_ptr<const ParamStore> params, Scheduler scheduler, int threads,
                         bool fibers)
    : module_(std::move(module)),
      params_(std::move(params)),
      scheduler_(scheduler),
      threads_(std::max(1, threads)),
      fibers_(fibers) {
  plan_of(*module_);
  packed_ = std::make_shared<const PackedIndex>(*params_);
  if (threads_ > 1) pool_ = std::make_shared<ThreadPool>(threads_);
}

GraphEngine::~GraphEngine() = default;

GraphEngine::Lane& GraphEngine::lane(size_t k) {
  while (lanes_.size() <= k) {
    auto lane = std::make_unique<Lane>(*module_->plan, packed_, scheduler_, pool_, fibers_);
    lane->program = make_program(lane->graph, lane->driver);
    lanes_.push_back(std::move(lane));
  }
  return *lanes_[k];
}

void GraphEngine::start(Lane& l, int func, const std::vector<Value>& inputs, size_t first_instance,
                        RunStats& stats) {
  const analysis::Plan& plan = *module_->plan;
  l.graph.reset(stats);
  l.program->begin_run(func, inputs, stats);
  Program* program = l.program.get();
  Lane* lp = &l;
  l.driver.start(inputs.size(), plan.tensor_reads, plan.concurrency.num_groups > 0, first_instance,
                 [program](size_t i) { program->run_instance(i); },
                 [lp] { lp->graph.flush(lp->program->executor()); });
}

std::vector<Value> GraphEngine::finish(Lane& l, size_t n, RunStats& stats) {
  l.driver.finish();
  stats.host_seconds = l.driver.seconds() - l.graph.flush_seconds();
  l.graph.flush(l.program->executor());
  std::vector<Value> outputs;
  outputs.reserve(n);
  for (size_t i = 0; i < n; ++i) outputs.push_back(l.program->output(i));
  stats.instances = static_cast<int64_t>(n);
  stats.nodes = *l.graph.num_nodes();
  return outputs;
}

RunResult GraphEngine::run(const std::vector<Value>& inputs, const std::string& entry,
                           size_t first_instance) {
  const int func = entry_function(*module_, entry);
  RunResult result;
  auto t0 = Clock::now();
  Lane& l = lane(0);
  start(l, func, inputs, first_instance, result.stats);
  result.outputs = finish(l, inputs.size(), result.stats);
  result.stats.wall_seconds = seconds_since(t0);
  return result;
}

RunResult GraphEngine::run_batches(const std::vector<Value>& inputs, size_t batch,
                                   const std::string& entry) {
  const size_t step = batch == 0 ? std::max<size_t>(inputs.size(), 1) : batch;
  // A program that reads tensors runs batches while its host program runs (the driver's flush):
  // its batches stay one after the other, and so does everything on one thread.
  if (threads_ == 1 || module_->plan->tensor_reads || inputs.size() <= step)
    return Engine::run_batches(inputs, batch, entry);
  const int func = entry_function(*module_, entry);

  struct InFlight {
    size_t begin = 0;
    std::vector<Value> inputs;
    RunStats stats;
    Lane* lane = nullptr;
  };
  RunResult result;
  auto t0 = Clock::now();
  auto launch = [&](size_t begin, size_t k) {
    auto b = std::make_unique<InFlight>();
    b->begin = begin;
    b->inputs.assign(inputs.begin() + static_cast<ptrdiff_t>(begin),
                     inputs.begin() + static_cast<ptrdiff_t>(std::min(inputs.size(), begin + step)));
    b->lane = &lane(k % 2);
    start(*b->lane, func, b->inputs, begin, b->stats);
    return b;
  };
  // The lanes' peaks add up while both hold a batch: the largest of each lane is reported.
  int64_t lane_peak[2] = {0, 0};
  std::unique_ptr<InFlight> current = launch(0, 0);
  for (size_t k = 0; current; ++k) {
    // Batch k's host programs are done (or failed: nothing else is in flight yet).
    current->lane->driver.finish();
    std::unique_ptr<InFlight> next;
    if (current->begin + step < inputs.size()) {
      try {
        next = launch(current->begin + step, k + 1);
      } catch (...) {
        // An input of batch k + 1 that cannot be converted: batch k's errors come first.
        finish(*current->lane, current->inputs.size(), current->stats);
        throw;
      }
    }
    std::vector<Value> outputs;
    try {
      // What finish() does after the driver, now while batch k + 1's host programs run.
      outputs = finish(*current->lane, current->inputs.size(), current->stats);
    } catch (...) {
      // Batch k's error comes first; batch k + 1 is waited for and its outcome dropped.
      if (next) {
        try {
          next->lane->driver.finish();
        } catch (...) {
        }
      }
      throw;
    }
    lane_peak[k % 2] = std::max(lane_peak[k % 2], current->stats.peak_bytes);
    result.stats.add(current->stats);
    for (auto& v : outputs) result.outputs.push_back(std::move(v));
    current = std::move(next);
  }
  result.stats.peak_bytes = lane_peak[0] + lane_peak[1];
  result.stats.wall_seconds = seconds_since(t0);
  return result;
}

}  // namespace acrobat
