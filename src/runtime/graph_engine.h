// What every batched engine is: the graph runtime (runtime/graph.h) and the instance driver
// (runtime/instance_driver.h) around a host program and a block executor. One run: reset the graph,
// run each instance's host program through the driver (fibers when the program reads tensors or
// forks), run what is still pending, hand the outputs back as values that own their tensors. The
// interpreted engine (batched_engine.h) and the compiled one (aot_engine.h) each supply a Program:
// the host program, the block executor and the conversion of outputs.
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

  // The derived engine's program, set by its constructor (it usually needs graph() to exist).
  void set_program(Program& program) { program_ = &program; }

  Graph& graph() { return graph_; }
  const Graph& graph() const { return graph_; }
  InstanceDriver& driver() { return driver_; }

  std::shared_ptr<const ir::Module> module_;
  std::shared_ptr<const ParamStore> params_;

 private:
  Graph graph_;
  InstanceDriver driver_;
  Program* program_ = nullptr;
};

}  // namespace acrobat
