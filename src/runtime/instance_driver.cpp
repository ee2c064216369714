#include "runtime/instance_driver.h"

#include <chrono>

#include "support/fault.h"
#include "support/clock.h"

namespace acrobat {

InstanceDriver::InstanceDriver(bool fibers) : fibers_(fibers) {}
InstanceDriver::~InstanceDriver() = default;

void InstanceDriver::start(size_t n, bool reads_tensors, bool forks, size_t first_instance,
                           std::function<void(size_t)> body, std::function<void()> flush) {
  if (!worker_) worker_ = std::make_unique<StackThread>();
  body_ = std::move(body);
  flush_ = std::move(flush);
  const bool faults = faults_injected();
  worker_->start([this, n, reads_tensors, forks, first_instance, faults] {
    const auto t0 = Clock::now();
    struct Timer {
      InstanceDriver* d;
      Clock::time_point t0;
      ~Timer() { d->seconds_ = seconds_since(t0); }
    } timer{this, t0};
    auto instance = [&](size_t i) {
      try {
        if (faults) ACROBAT_FAULT_POINT("instance");
        body_(i);
      } catch (const UserError& e) {
        throw for_instance(e, first_instance + i);
      }
    };
    if (fibers_ && reads_tensors && (n > 1 || forks)) {
      if (!instance_fibers_) instance_fibers_ = std::make_unique<InstanceFibers>();
      instance_fibers_->run(n, instance, flush_);
      return;
    }
    for (size_t i = 0; i < n; ++i) instance(i);
  });
}

void InstanceDriver::finish() {
  struct Clear {
    InstanceDriver* d;
    ~Clear() {
      d->body_ = nullptr;
      d->flush_ = nullptr;
    }
  } clear{this};
  worker_->wait();
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
  if (!graph.pending(node)) return;
  graph.demand(node);
  if (instance_fibers_ && instance_fibers_->inside())
    instance_fibers_->wait();
  else
    flush_();
  ACROBAT_ASSERT(!graph.pending(node), "a tensor read resumed before its node ran");
}

}  // namespace acrobat
