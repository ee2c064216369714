// Runs the host programs of a batch's instances for every batched engine: on a thread with a large
// stack (the host programs recurse once per model call), one instance after the other, or, when
// the program reads tensors, each instance on a fiber of its own (runtime/fibers.h) so that a read
// of a pending value suspends it until every instance waits and the pending work runs as large
// batches. A user error in an instance names it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "runtime/big_stack.h"
#include "runtime/fibers.h"
#include "runtime/graph.h"

namespace acrobat {

class InstanceDriver {
 public:
  // `fibers` false runs the instances of a program that reads tensors one after the other, each
  // read running the pending graph there and then (for comparison).
  explicit InstanceDriver(bool fibers = true);
  ~InstanceDriver();

  // Runs body(i) for every i in [0, n); `flush` runs the graph's pending work (what waiting reads
  // demand). A UserError thrown by body(i) fails the run as "instance first_instance + i: ...",
  // for the lowest such i.
  void run(size_t n, bool reads_tensors, size_t first_instance,
           const std::function<void(size_t)>& body, const std::function<void()>& flush);

  // From an instance's host program: returns once `node` of `graph` is computed.
  void wait_for(Graph& graph, int32_t node);

 private:
  bool fibers_;
  std::unique_ptr<StackThread> worker_;
  std::unique_ptr<InstanceFibers> instance_fibers_;
  const std::function<void()>* flush_ = nullptr;
};

}  // namespace acrobat
