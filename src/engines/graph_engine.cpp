#include "engines/graph_engine.h"
#include "support/clock.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <optional>
#include <span>
#include <system_error>
#include <thread>

#include "autodiff/reverse_mode.h"

namespace acrobat {

namespace {
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
  ReverseMode reverse;  // gradients(): its memory and packed weights kept from call to call
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

std::unique_ptr<GraphEngine::Lane> GraphEngine::make_lane(std::shared_ptr<ThreadPool> pool) {
  auto lane = std::make_unique<Lane>(*module_->plan, packed_, scheduler_, std::move(pool), fibers_);
  lane->program = make_program(lane->graph, lane->driver);
  return lane;
}

GraphEngine::Lane& GraphEngine::lane() {
  if (!pooled_) pooled_ = make_lane(pool_);
  return *pooled_;
}

void GraphEngine::start(Lane& l, int func, const std::vector<Value>& inputs, size_t first_instance,
                        RunStats& stats, bool keep_outputs) {
  const analysis::Plan& plan = *module_->plan;
  l.graph.reset(stats, keep_outputs);
  l.program->begin_run(func, inputs, stats, max_steps_);
  Program* program = l.program.get();
  Lane* lp = &l;
  l.driver.run(inputs.size(), plan.tensor_reads, plan.concurrency.num_groups > 0, first_instance,
               [program](size_t i) { program->run_instance(i); },
               [lp] { lp->graph.flush(lp->program->executor()); });
}

std::vector<Value> GraphEngine::finish(Lane& l, size_t n, RunStats& stats) {
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
  Lane& l = lane();
  start(l, func, inputs, first_instance, result.stats);
  result.outputs = finish(l, inputs.size(), result.stats);
  result.stats.wall_seconds = seconds_since(t0);
  return result;
}

GradResult GraphEngine::gradients(const std::vector<Value>& inputs, const std::string& entry,
                                  size_t first_instance, std::vector<Tensor> zeroed, GradWrt wrt) {
  const int func = loss_function(*module_, entry);
  GradResult result;
  // The instances' tensors reach the graph by address (HostRuntime::from_values): their memory is
  // a leaf of the reverse pass as a param's is.
  std::optional<InputGradients> input_grads;
  if (wrt == GradWrt::ParamsAndInputs) input_grads.emplace(*module_, *params_, inputs);
  auto t0 = Clock::now();
  // On a lane of its own, sharing the pool: its forward cuts every batch into the pieces one thread
  // would run (BatchRunner::run with keep_values) and the backward cuts its work the same way at
  // any thread count, so a gradient has the same bits whatever the threads.
  if (!gradient_lane_) gradient_lane_ = make_lane(pool_);
  Lane& l = *gradient_lane_;
  start(l, func, inputs, first_instance, result.stats, true);
  result.outputs = finish(l, inputs.size(), result.stats);
  std::vector<aot::Val> losses;
  for (size_t i = 0; i < inputs.size(); ++i) losses.push_back(l.program->output_val(i));
  result.grads = zero_grads(*params_, std::move(zeroed));
  const auto t1 = Clock::now();
  l.reverse.backward(l.graph.forward_record(), losses, *params_, result.grads, result.stats, pool_.get(),
                     &result.written, &l.program->executor(),
                     input_grads ? std::span<const InputLeaf>(input_grads->leaves()) : std::span<const InputLeaf>());
  if (input_grads) result.input_grads = input_grads->take();
  result.stats.backward_seconds = seconds_since(t1);
  result.stats.wall_seconds = seconds_since(t0);
  return result;
}

RunStats GraphEngine::run_open(InstanceFeed& feed, size_t max_live, const std::string& entry) {
  const int func = entry_function(*module_, entry);
  Lane& l = lane();
  struct Instance {
    size_t ticket;
    size_t number;
    bool cancelled = false;
    bool first_soon = false;  // streamed, and nothing emitted yet (InstanceFeed::Joining::streams)
  };
  std::vector<Instance> instances;  // of the graph's current run, by index
  std::vector<size_t> running;      // started and not ended
  std::vector<size_t> computing;    // ended: their outputs are computed at the next flush
  RunStats stats;
  const std::vector<Value> none;
  auto begin = [&] {
    l.graph.reset(stats, false, true);
    l.program->begin_run(func, none, stats, max_steps_);
    instances.clear();
  };
  begin();
  InstanceFibers::Open open;
  open.admit = [&](bool idle) {
    std::vector<size_t> ids;
    if (!idle) feed.may_yield();
    if (idle && !instances.empty()) begin();  // nothing runs: a fresh graph
    if (*l.graph.num_nodes() > kOpenRunNodes) return ids;  // not idle: let the run drain first
    const size_t room = max_live > running.size() ? max_live - running.size() : 0;
    if (room == 0) return ids;
    for (InstanceFeed::Joining& j : feed.take(idle, room)) {
      ids.push_back(l.program->join(j.input));
      instances.push_back({j.ticket, j.number, false, j.streams});
      running.push_back(ids.back());
    }
    stats.instances += static_cast<int64_t>(ids.size());
    return ids;
  };
  open.body = [&](size_t i) { l.program->run_instance(i); };
  l.program->on_emit = [&](size_t i, Value v) {
    instances[i].first_soon = false;
    feed.emitted(instances[i].ticket, v);
  };
  l.graph.set_between_batches([&feed] { feed.may_yield(); });
  struct Quiet {  // later runs drop their emits and yield nowhere again
    Program& p;
    Graph& g;
    ~Quiet() {
      p.on_emit = nullptr;
      g.set_between_batches(nullptr);
    }
  } quiet{*l.program, l.graph};
  open.cancelled = [&](size_t i) { return instances[i].cancelled; };
  open.ended = [&](size_t i, std::exception_ptr error) {
    running.erase(std::find(running.begin(), running.end(), i));
    const Instance& in = instances[i];
    if (error) {
      l.graph.drop_instance(static_cast<int64_t>(i));  // its fiber is gone: what it held goes
      try {
        std::rethrow_exception(error);
      } catch (const UserError& e) {
        feed.failed(in.ticket, for_instance(e, in.number).what(), false);
      } catch (const std::exception& e) {
        feed.failed(in.ticket, e.what(), true);
      }
    } else if (in.cancelled) {
      feed.stopped(in.ticket);
    } else {
      computing.push_back(i);
    }
  };
  bool firsts_flushed = false;  // the last flush ran only the first outputs' reads
  open.flush = [&] {
    // A cancelled instance's fibers end as soon as they are resumed, before they touch the graph
    // again: what they hold goes now, and the pending work only they need is not run.
    for (size_t i : running)
      if (!instances[i].cancelled && feed.cancelled(instances[i].ticket)) {
        instances[i].cancelled = true;
        l.graph.drop_instance(static_cast<int64_t>(i));
      }
    // Streamed instances yet to emit come first: when they wait for tensors, this flush runs only
    // what their reads need (and the ended instances' outputs); the other reads wait on to the next
    // flush, which runs everything demanded, so that arrivals at every round cannot hold the
    // running instances back. With inline depth a batch that runs takes along the ready nodes of
    // its block, so only work of other blocks (a decoder's steps beside a prompt's prefill) waits.
    std::vector<int32_t> firsts;
    if (!firsts_flushed)
      for (size_t i : running) {
        const int32_t node = instances[i].first_soon && !instances[i].cancelled ? l.program->waiting_for(i) : -1;
        if (node >= 0 && l.graph.pending(node)) firsts.push_back(node);
      }
    firsts_flushed = !firsts.empty();
    if (firsts_flushed) {
      l.graph.forget_demands();
      for (int32_t node : firsts) l.graph.demand(node);
    }
    // While instances wait for tensors, the flush runs what they and the ended ones' outputs need;
    // once none waits, everything pending (no demands: the flush need not trace what is needed).
    BlockExecutor& exec = l.program->executor();
    if (!running.empty())
      for (size_t i : computing) l.program->demand_output(i);
    l.graph.flush(exec);
    for (;;) {  // what was demanded is computed: only a safeguard
      bool pending = false;
      for (size_t i : computing) pending = l.program->demand_output(i) || pending;
      if (!pending) break;
      l.graph.flush(exec);
    }
    for (size_t i : computing) {
      Value out = l.program->output(i);
      l.program->release_output(i);
      feed.finished(instances[i].ticket, std::move(out));
    }
    computing.clear();
  };
  try {
    l.driver.run_open(open);
  } catch (const std::exception& e) {
    // A failure of the graph's work (or of acrobat): every instance not answered gets it, and the
    // next run starts afresh.
    const bool internal = dynamic_cast<const UserError*>(&e) == nullptr;
    for (size_t i : running) feed.failed(instances[i].ticket, e.what(), internal);
    for (size_t i : computing) feed.failed(instances[i].ticket, e.what(), internal);
    throw;
  }
  return stats;
}

RunResult GraphEngine::run_batches(const std::vector<Value>& inputs, size_t batch,
                                   const std::string& entry) {
  const size_t step = batch == 0 ? std::max<size_t>(inputs.size(), 1) : batch;
  if (threads_ == 1 || inputs.size() <= step) return Engine::run_batches(inputs, batch, entry);
  const int func = entry_function(*module_, entry);
  RunResult result;
  auto t0 = Clock::now();
  const size_t batches = (inputs.size() + step - 1) / step;
  const size_t whole = batches / static_cast<size_t>(threads_) * static_cast<size_t>(threads_);
  if (whole > 0) run_parallel(func, inputs, step, whole, result);
  if (whole * step < inputs.size()) run_pooled(func, inputs, whole * step, step, result);
  result.stats.wall_seconds = seconds_since(t0);
  return result;
}

void GraphEngine::run_parallel(int func, const std::vector<Value>& inputs, size_t step, size_t n,
                               RunResult& result) {
  const size_t lanes = std::min(static_cast<size_t>(threads_), n);
  while (solo_.size() < lanes) solo_.push_back(make_lane(nullptr));
  struct Done {
    RunStats stats;
    std::vector<Value> outputs;
    std::exception_ptr error;
  };
  std::vector<Done> done(n);
  std::vector<int64_t> peak(lanes, 0);
  std::atomic<size_t> next{0};
  std::atomic<size_t> failed{n};  // the lowest batch that failed: later ones are not started
  auto work = [&](size_t k) {
    Lane& l = *solo_[k];
    for (size_t b = next.fetch_add(1); b < failed.load(); b = next.fetch_add(1)) {
      Done& d = done[b];
      try {
        const size_t begin = b * step;
        std::vector<Value> chunk(
            inputs.begin() + static_cast<ptrdiff_t>(begin),
            inputs.begin() + static_cast<ptrdiff_t>(std::min(inputs.size(), begin + step)));
        start(l, func, chunk, begin, d.stats);
        d.outputs = finish(l, chunk.size(), d.stats);
        peak[k] = std::max(peak[k], d.stats.peak_bytes);
      } catch (...) {
        d.error = std::current_exception();
        size_t f = failed.load();
        while (b < f && !failed.compare_exchange_weak(f, b)) {
        }
      }
    }
  };
  std::vector<std::thread> helpers;
  for (size_t k = 1; k < lanes; ++k) {
    try {
      helpers.emplace_back(work, k);
    } catch (const std::system_error&) {
      break;  // no thread to be had: the lanes that run take every batch
    }
  }
  work(0);
  for (auto& t : helpers) t.join();
  // Every batch below the first failure ran: its error is the earliest instance's.
  RunStats stats;
  for (Done& d : done) {
    if (d.error) std::rethrow_exception(d.error);
    stats.add(d.stats);
    for (auto& v : d.outputs) result.outputs.push_back(std::move(v));
  }
  // The lanes' peaks add up while they all hold a batch: the largest of each lane is reported.
  stats.peak_bytes = 0;
  for (int64_t p : peak) stats.peak_bytes += p;
  // The lanes' times ran side by side: their mean is each one's share of the wall time.
  const double share = 1.0 / static_cast<double>(lanes);
  stats.host_seconds *= share;
  stats.schedule_seconds *= share;
  stats.kernel_seconds *= share;
  result.stats.add(stats);
}

void GraphEngine::run_pooled(int func, const std::vector<Value>& inputs, size_t first,
                             size_t step, RunResult& result) {
  Lane& l = lane();
  for (size_t begin = first; begin < inputs.size(); begin += step) {
    std::vector<Value> chunk(
        inputs.begin() + static_cast<ptrdiff_t>(begin),
        inputs.begin() + static_cast<ptrdiff_t>(std::min(inputs.size(), begin + step)));
    RunStats stats;
    start(l, func, chunk, begin, stats);
    for (auto& v : finish(l, chunk.size(), stats)) result.outputs.push_back(std::move(v));
    result.stats.add(stats);
  }
}

}  // namespace acrobat
