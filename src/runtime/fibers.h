// Instance fibers for tensor-dependent control flow. Each instance's host program runs on a fiber
// of its own (Boost.Context); a tensor read whose value is still pending suspends the fiber instead
// of running the graph there and then. When every unfinished fiber is suspended, the engine runs
// everything pending as big batches and resumes them all: instances that reach their decisions at
// about the same point of their programs decide together, so each flush is still a large batch.
//
// Inside an instance, a fiber may fork: independent calls of one function (analysis/concurrency.h)
// each run on a child fiber, and the parent resumes when all of them have finished. A child that
// waits for a tensor does not hold up its siblings, so the tensor work of a whole tree of calls
// joins the same batches. Engines use fibers only for programs that read tensors; the others run
// as plain calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "support/function_ref.h"

namespace acrobat {

// Reserved (not committed) per fiber: the interpreters recurse on it once per model call, up to
// Interpreter::kMaxCallDepth deep.
inline constexpr size_t kFiberStackBytes = size_t{64} << 20;

class InstanceFibers {
 public:
  explicit InstanceFibers(size_t stack_bytes = kFiberStackBytes);
  ~InstanceFibers();
  InstanceFibers(const InstanceFibers&) = delete;
  InstanceFibers& operator=(const InstanceFibers&) = delete;

  // Runs body(i) for i in [0, n), each on its own fiber, in rounds: every runnable fiber runs until
  // it finishes, calls wait() or forks; after a round, flush() runs and the next round resumes the
  // waiting fibers. An exception thrown by body(i) ends that fiber; when all have ended, the
  // exception of the lowest i is rethrown (the one a sequential run would have met).
  void run(size_t n, const std::function<void(size_t)>& body, const std::function<void()>& flush);

  // An open run (continuous batching): instances join it between rounds and leave it when their
  // fiber ends. Before each round `admit(idle)` gives the ids of the instances to start now (the
  // caller's numbers); `idle` says no fiber is alive, and then it may block until some come, and an
  // empty answer ends the run. After every round in which a fiber ran, flush() runs. When an
  // instance's fiber ends, `ended(id, error)` is told at once (error null when it returned or was
  // cancelled). A fiber of an instance that `cancelled(id)` names when the fiber is resumed ends
  // there: its frames unwind as a failed run's do, its children's first.
  struct Open {
    std::function<std::vector<size_t>(bool idle)> admit;
    std::function<void(size_t)> body;
    std::function<void(size_t, std::exception_ptr)> ended;
    std::function<void()> flush;
    std::function<bool(size_t)> cancelled;
  };
  void run_open(const Open& open);

  // Runs fn on a fiber of its own, from the calling thread and outside a run, and returns when fn
  // returns (its exception rethrown here): a stack of stack_bytes for a program that recurses
  // deeply, without handing the program to another thread. fn may not wait or fork (inside() is
  // false while it runs).
  void call(FunctionRef<void()> fn);

  // Whether the calling code runs on one of the fibers of a run().
  bool inside() const { return running_; }
  // From inside a fiber: suspends it until the next flush.
  void wait();
  // From inside a fiber: runs body(k) for k in [0, n) and returns when all have finished; body(0)
  // runs on the calling fiber, the others each on a child fiber that starts as soon as the caller
  // suspends. The exception of the lowest k, if any, is rethrown here.
  void fork(size_t n, FunctionRef<void(size_t)> body);
  // Fibers that have started and not finished (waiting, runnable or joining their children).
  size_t live() const;

  int64_t flushes() const { return flushes_; }  // of the last run()
  int64_t forks() const { return forks_; }      // child fibers started in the last run()

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool running_ = false;
  int64_t flushes_ = 0;
  int64_t forks_ = 0;
};

}  // namespace acrobat
