// Runs the host programs of a batch's instances for every batched engine, on the calling thread: on
// a large stack (they recurse once per model call), one instance after the other, or, when the
// program reads tensors, each instance on a fiber of its own (runtime/fibers.h) so that a read
// of a pending value suspends it until every instance waits and the pending work runs as large
// batches. Independent calls inside an instance (analysis/concurrency.h) run on child fibers of
// the instance's. A user error in an instance names it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "support/big_stack.h"  // kInterpreterStackBytes
#include "runtime/fibers.h"
#include "runtime/graph.h"

namespace acrobat {

class InstanceDriver {
 public:
  // `fibers` false runs the instances of a program that reads tensors one after the other, each
  // read running the pending graph there and then, and concurrent calls one after the other (for
  // comparison).
  explicit InstanceDriver(bool fibers = true);

  // Fibers alive at once (the instances' and their children), beyond which a fork runs its calls
  // one after the other on the forking fiber: each fiber reserves kFiberStackBytes of address space
  // and two memory mappings (Linux allows 65530 mappings per process by default).
  static constexpr size_t kMaxLiveFibers = 4096;
  ~InstanceDriver();

  // Runs body(i) for every i in [0, n) on the calling thread: one after the other on a fiber with a
  // large stack, or each on a fiber of its own when they read tensors. `flush` runs the graph's
  // pending work (what waiting reads demand). A UserError thrown by body(i) fails the run as
  // "instance first_instance + i: ...", for the lowest such i. `forks`: the program has concurrent
  // calls (one instance then runs on a fiber too).
  void run(size_t n, bool reads_tensors, bool forks, size_t first_instance,
           const std::function<void(size_t)>& body, std::function<void()> flush);
  // An open run (continuous batching, InstanceFibers::run_open): every instance on a fiber of its
  // own, on the calling thread, returning when `open.admit` ends it. Errors reach `open.ended`
  // as thrown (the caller numbers the instance); one of flush() or of admit() ends the run and
  // is thrown here.
  void run_open(const InstanceFibers::Open& open);
  // How long the host programs of the last run() took (flushes during them included).
  double seconds() const { return seconds_; }

  // From an instance's host program: runs body(k) for k in [0, n), on child fibers when the
  // instance runs on one (and the limit allows), else one after the other. Either way the error of
  // the lowest k, if any, is the one thrown.
  void concurrently(size_t n, FunctionRef<void(size_t)> body);

  // From an instance's host program: returns once `node` of `graph` is computed. On a fiber it
  // may wait for two flushes (an open run's flush may run only other instances' reads first).
  void wait_for(Graph& graph, int32_t node);

 private:
  bool fibers_;
  std::unique_ptr<InstanceFibers> instance_fibers_;
  std::unique_ptr<InstanceFibers> stack_;  // the programs' stack when they run one after the other
  std::function<void()> flush_;  // run()'s, while it runs
  double seconds_ = 0;
};

}  // namespace acrobat
