// What every batched engine is: the graph runtime (runtime/graph.h) and the instance driver
// (runtime/instance_driver.h) around a host program and a block executor. One run: reset the graph,
// run each instance's host program through the driver (fibers when the program reads tensors or
// forks), run what is still pending, hand the outputs back as values that own their tensors. The
// interpreted engine (batched_engine.h) and the compiled one (aot_engine.h) each supply a Program:
// the host program, the block executor and the conversion of outputs.
//
// Consecutive batches (run_batches) overlap when the engine has more than one thread and the
// program reads no tensors: a graph, driver and program form a lane, and with two lanes the host
// programs of batch k + 1 record into one lane's graph on its driver's thread while the calling
// thread and the pool run batch k's kernels from the other. The host program's share of the time
// (about a tenth on Tree-LSTM) then no longer runs alone.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/graph.h"
#include "runtime/instance_driver.h"

namespace acrobat {

class GraphEngine : public Engine {
 public:
  ~GraphEngine() override;
  // All inputs form one batch.
  RunResult run(const std::vector<Value>& inputs, const std::string& entry = "main",
                size_t first_instance = 0) final;
  // Batches of `batch` inputs, overlapped as above when that applies; the same outputs, graph and
  // batches as one run() per batch, and the error of the earliest failing instance.
  RunResult run_batches(const std::vector<Value>& inputs, size_t batch,
                        const std::string& entry = "main") final;

  class Program {
   public:
    virtual ~Program() = default;
    // Before the instances of a run of function `func` on `inputs` start; counters go to `stats`.
    virtual void begin_run(int func, const std::vector<Value>& inputs, RunStats& stats) = 0;
    // Instance i's host program: records its tensor work into the graph.
    virtual void run_instance(size_t i) = 0;
    // Instance i's output, once everything has run.
    virtual Value output(size_t i) = 0;
    virtual BlockExecutor& executor() = 0;
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
  Lane& lane(size_t k);  // made on first use
  // Starts the host programs of `inputs` (instances numbered from `first_instance`) on `lane`.
  void start(Lane& lane, int func, const std::vector<Value>& inputs, size_t first_instance,
             RunStats& stats);
  // Waits for them, runs what is pending and returns the outputs.
  std::vector<Value> finish(Lane& lane, size_t n, RunStats& stats);

  Scheduler scheduler_;
  int threads_;
  bool fibers_;
  std::shared_ptr<const PackedIndex> packed_;  // the lanes' graphs share the packed weights
  std::shared_ptr<ThreadPool> pool_;           // and the threads (only one lane flushes at a time)
  std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace acrobat
