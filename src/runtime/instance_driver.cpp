#include "runtime/instance_driver.h"

#include <chrono>
#include <utility>

#include "support/fault.h"
#include "support/clock.h"

namespace acrobat {

namespace {
// Writes the seconds since its making into `out` when it goes, however its scope ends.
struct SecondsInto {
  double& out;
  Clock::time_point t0 = Clock::now();
  ~SecondsInto() { out = seconds_since(t0); }
};
}  // namespace

InstanceDriver::InstanceDriver(bool fibers) : fibers_(fibers) {}
InstanceDriver::~InstanceDriver() = default;

void InstanceDriver::run(size_t n, bool reads_tensors, bool forks, size_t first_instance,
                         const std::function<void(size_t)>& body, std::function<void()> flush) {
  flush_ = std::move(flush);
  struct Clear {  // wait_for's flush is this run's only while it runs
    std::function<void()>& flush;
    ~Clear() { flush = nullptr; }
  } clear{flush_};
  const bool faults = faults_injected();
  auto instance = [&](size_t i) {
    try {
      if (faults) ACROBAT_FAULT_POINT("instance");
      body(i);
    } catch (const UserError& e) {
      throw for_instance(e, first_instance + i);
    }
  };
  // On the calling thread: handing the programs to a thread of their own and back cost two wake-ups
  // of a sleeping core a run (about 95 us on a 2-core VM), and the run's data then lay in two cores'
  // caches.
  SecondsInto timer{seconds_};
  if (fibers_ && reads_tensors && (n > 1 || forks)) {
    if (!instance_fibers_) instance_fibers_ = std::make_unique<InstanceFibers>();
    instance_fibers_->run(n, instance, flush_);
  } else {
    if (!stack_) stack_ = std::make_unique<InstanceFibers>(kInterpreterStackBytes);
    stack_->call([&] {
      for (size_t i = 0; i < n; ++i) instance(i);
    });
  }
}

void InstanceDriver::run_open(const InstanceFibers::Open& open) {
  InstanceFibers::Open on_driver = open;
  if (faults_injected())
    on_driver.body = [&open](size_t i) {
      ACROBAT_FAULT_POINT("instance");
      open.body(i);
    };
  SecondsInto timer{seconds_};
  if (!instance_fibers_) instance_fibers_ = std::make_unique<InstanceFibers>();
  instance_fibers_->run_open(on_driver);
}

void InstanceDriver::concurrently(size_t n, FunctionRef<void(size_t)> body) {
  if (n > 1 && instance_fibers_ && instance_fibers_->inside() &&
      instance_fibers_->live() + n - 1 <= kMaxLiveFibers) {
    instance_fibers_->fork(n, body);
    return;
  }
  for (size_t k = 0; k < n; ++k) body(k);
}

void InstanceDriver::wait_for(Graph& graph, int32_t node) {
  // On a fiber the read waits for the instances' next flush, which in an open run may leave it for
  // the one after, which runs every demand; off one it flushes there and then.
  const bool on_fiber = instance_fibers_ && instance_fibers_->inside();
  const int most = on_fiber ? 2 : 1;
  for (int flushes = 0; graph.pending(node); ++flushes) {
    ACROBAT_ASSERT(flushes < most, "a tensor read resumed before its node ran");
    graph.demand(node);
    if (on_fiber) {
      instance_fibers_->wait();
    } else {
      flush_();
    }
  }
}

}  // namespace acrobat
