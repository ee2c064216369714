// Instance fibers for tensor-dependent control flow. Each instance's host program runs on a fiber
// of its own (Boost.Context); a tensor read whose value is still pending suspends the fiber instead
// of running the graph there and then. When every unfinished fiber is suspended, the engine runs
// everything pending as big batches and resumes them all: instances that reach their decisions at
// about the same point of their programs decide together, so each flush is still a large batch.
// Engines use fibers only for programs that read tensors; the others run as plain calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>

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

  // Runs body(i) for i in [0, n), each on its own fiber, in rounds: every unfinished fiber runs in
  // order until it finishes or calls wait(); after a round, flush() runs and the next round
  // resumes the waiting fibers. An exception thrown by body(i) ends that fiber; when all have
  // ended, the exception of the lowest i is rethrown (the one a sequential run would have met).
  void run(size_t n, const std::function<void(size_t)>& body, const std::function<void()>& flush);

  // Whether the calling code runs on one of the fibers of a run().
  bool inside() const { return running_; }
  // From inside a fiber: suspends it until the next flush.
  void wait();

  int64_t flushes() const { return flushes_; }  // of the last run()

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool running_ = false;
  int64_t flushes_ = 0;
};

}  // namespace acrobat
