// What every batched engine is: the graph runtime (runtime/graph.h) and the instance driver
// (runtime/instance_driver.h) around a host program and a block executor. One run: reset the graph,
// run each instance's host program through the driver (fibers when the program reads tensors or
// forks), run what is still pending, hand the outputs back as values that own their tensors. The
// interpreted engine (batched_engine.h) and the compiled one (aot_engine.h) each supply a Program:
// the host program, the block executor and the conversion of outputs.
//
// A graph, driver and program form a lane. A single run() splits each large batch's kernels across
// the engine's threads (the pooled lane). Consecutive batches (run_batches) with T > 1 threads go
// to T solo lanes first, each with its own graph and no pool: every lane takes batch after batch
// from a shared counter on a thread of its own, host program and kernels, as long as every lane
// can get one. Whole batches side by side scale better than split kernels (no barrier per kernel,
// each core streams its own rows: Tree-LSTM at batch 64 gains 1.98x on two idle cores against
// 1.75x split), and a core shared with another process only runs fewer batches instead of holding
// the others at every kernel. The batches left over (fewer than T) run on the pooled lane.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engines/engine.h"
#include "runtime/graph.h"
#include "runtime/instance_driver.h"

namespace acrobat {

class GraphEngine : public Engine {
 public:
  ~GraphEngine() override;
  // All inputs form one batch.
  RunResult run(const std::vector<Value>& inputs, const std::string& entry = "main",
                size_t first_instance = 0) final;
  // Batches of `batch` inputs, side by side as above when that applies; the same outputs, graph
  // and batches as one run() per batch, and the error of the earliest failing instance.
  RunResult run_batches(const std::vector<Value>& inputs, size_t batch,
                        const std::string& entry = "main") final;
  // All inputs form one batch; the run keeps its outputs and its lane's ReverseMode
  // (autodiff/reverse_mode.h) differentiates it.
  // It runs on one thread (the same bits whatever the engine's threads).
  GradResult gradients(const std::vector<Value>& inputs, const std::string& entry = "loss",
                       size_t first_instance = 0, std::vector<Tensor> zeroed = {},
                       GradWrt wrt = GradWrt::Params) final;
  // Continuous batching on the pooled lane: an instance that joins starts on a fiber of its own at
  // the next round and its work joins what is pending at the next flush, at its own depth and
  // phase (with inline depth the place of a node depends only on the values it reads, so a step of
  // a late instance batches with the same step of the others); an instance whose program has
  // returned has its output computed at that flush and is answered there, its memory released.
  // A streamed instance (InstanceFeed::Joining::streams) has the reads before its first emit
  // computed by a flush of their own, one flush in two at most (the flush in graph_engine.cpp).
  // The graph is started afresh whenever nothing runs; after kOpenRunNodes nodes no instance joins
  // until those running have ended (the nodes and host objects of a run are kept until it ends).
  // An instance that stops (cancelled or failed) gives up what its values held at once, and its
  // pending nodes nothing else needs are never run (Graph::drop_instance).
  RunStats run_open(InstanceFeed& feed, size_t max_live, const std::string& entry = "main") final;
  static constexpr int32_t kOpenRunNodes = int32_t{1} << 21;

  class Program {
   public:
    virtual ~Program() = default;
    // Before the instances of a run of function `func` on `inputs` start; counters go to `stats`;
    // each instance may make `max_steps` calls (0: any number; Engine::limit_steps).
    virtual void begin_run(int func, const std::vector<Value>& inputs, RunStats& stats, int64_t max_steps) = 0;
    // Adds an instance reading `input` to the run begun (an open run); returns its index.
    virtual size_t join(const Value& input) = 0;
    // Instance i's host program: records its tensor work into the graph.
    virtual void run_instance(size_t i) = 0;
    // Instance i's output, once everything has run.
    virtual Value output(size_t i) = 0;
    // Once instance i's program has returned: the next flush computes its output (true), or it is
    // computed already (false).
    virtual bool demand_output(size_t i) = 0;
    // Gives up the run's references to instance i's output (output() may not be asked again).
    virtual void release_output(size_t i) = 0;
    // The node of the tensor instance i's program waits for now (its latest read), or -1.
    virtual int32_t waiting_for(size_t i) const = 0;
    // The same as the runtime holds it: for a tensor, its reference into the graph.
    virtual aot::Val output_val(size_t i) const = 0;
    virtual BlockExecutor& executor() = 0;
    // Told of every emit(v) of instance i as its program makes it (an open run's; null: dropped).
    std::function<void(size_t i, Value v)> on_emit;
  };

 protected:
  // `threads` > 1 splits each large batch across that many threads. `fibers` false runs the
  // instances of a program that reads tensors one after the other, each read running the pending
  // graph there and then, and concurrent calls one after the other (for comparison).
  GraphEngine(std::shared_ptr<const ir::Module> module, std::shared_ptr<const ParamStore> params,
              Scheduler scheduler, int threads, bool fibers);

  // The derived engine's program for a lane: recording into `graph`, run by `driver`.
  virtual std::unique_ptr<Program> make_program(Graph& graph, InstanceDriver& driver) = 0;

  Scheduler scheduler() const { return scheduler_; }

  std::shared_ptr<const ir::Module> module_;
  std::shared_ptr<const ParamStore> params_;

 private:
  struct Lane;
  // A lane whose graph splits kernels across `pool` (none: the lane's thread alone).
  std::unique_ptr<Lane> make_lane(std::shared_ptr<ThreadPool> pool);
  Lane& lane();  // the pooled lane, made on first use
  // Batches [0, n) of `step` inputs on the solo lanes, appended to `result`.
  void run_parallel(int func, const std::vector<Value>& inputs, size_t step, size_t n,
                    RunResult& result);
  // The inputs from `first` on in batches of `step`, one after the other on the pooled lane.
  void run_pooled(int func, const std::vector<Value>& inputs, size_t first, size_t step,
                  RunResult& result);
  // Runs the host programs of `inputs` (instances numbered from `first_instance`) on `lane`.
  void start(Lane& lane, int func, const std::vector<Value>& inputs, size_t first_instance,
             RunStats& stats, bool keep_outputs = false);
  // Then runs what is pending and returns the outputs.
  std::vector<Value> finish(Lane& lane, size_t n, RunStats& stats);

  Scheduler scheduler_;
  int threads_;
  bool fibers_;
  std::shared_ptr<const PackedIndex> packed_;  // the lanes' graphs share the packed weights
  std::shared_ptr<ThreadPool> pool_;           // the pooled lane's threads
  std::unique_ptr<Lane> pooled_;
  std::vector<std::unique_ptr<Lane>> solo_;
  std::unique_ptr<Lane> gradient_lane_;  // gradients(): one thread
};

}  // namespace acrobat
