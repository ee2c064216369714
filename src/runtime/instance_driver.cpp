#include "runtime/instance_driver.h"

#include "runtime/interpreter.h"

namespace acrobat {

InstanceDriver::InstanceDriver(bool fibers) : fibers_(fibers) {}
InstanceDriver::~InstanceDriver() = default;

void InstanceDriver::run(size_t n, bool reads_tensors, bool forks, size_t first_instance,
                         const std::function<void(size_t)>& body,
                         const std::function<void()>& flush) {
  if (!worker_) worker_ = std::make_unique<StackThread>();
  flush_ = &flush;
  auto instance = [&](size_t i) {
    try {
      body(i);
    } catch (const UserError& e) {
      throw for_instance(e, first_instance + i);
    }
  };
  worker_->run([&] {
    if (fibers_ && reads_tensors && (n > 1 || forks)) {
      if (!instance_fibers_) instance_fibers_ = std::make_unique<InstanceFibers>();
      instance_fibers_->run(n, instance, flush);
      return;
    }
    for (size_t i = 0; i < n; ++i) instance(i);
  });
  flush_ = nullptr;
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
    (*flush_)();
  ACROBAT_ASSERT(!graph.pending(node), "a tensor read resumed before its node ran");
}

}  // namespace acrobat
