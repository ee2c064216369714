#include "serve_batcher.h"

#include <algorithm>

#include "serve.h"
#include "support/diagnostics.h"

namespace acrobat {

Batcher::Batcher(const ServeOptions& o, Engine& engine, Metrics& metrics, const ServeCores& cores)
    : o_(o), engine_(engine), metrics_(metrics), cores_(cores), thread_([this] { loop(); }) {}

void Batcher::submit(std::vector<std::shared_ptr<Pending>>& items) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& p : items) queue_.push_back(p);
  }
  wake_.notify_one();
}

void Batcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

std::pair<size_t, size_t> Batcher::depth() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {queue_.size(), running_};
}

std::vector<std::shared_ptr<Pending>> Batcher::take() {
  const auto delay = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(o_.max_delay_ms));
  std::vector<std::shared_ptr<Pending>> batch;
  size_t dropped = 0;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    if (queue_.empty()) return batch;  // stopping, nothing left
    wake_.wait_until(lock, queue_.front()->queued + delay, [&] { return queue_.size() >= o_.max_batch || stopping_; });
    while (!queue_.empty() && batch.size() < o_.max_batch) {
      std::shared_ptr<Pending> p = std::move(queue_.front());
      queue_.pop_front();
      if (p->cancelled && *p->cancelled) {
        p->dropped = true;
        p->done.set_value({false, Value{}});
        ++dropped;
      } else {
        batch.push_back(std::move(p));
      }
    }
    running_ = batch.size();
  }
  if (dropped) metrics_.count(&Metrics::dropped_instances, dropped);
  return batch;
}

void Batcher::loop() {
  cores_.enter_engine();
  for (;;) {
    std::vector<std::shared_ptr<Pending>> batch = take();
    if (batch.empty()) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_ && queue_.empty()) return;
      continue;  // every instance taken was dropped
    }
    const auto start = Clock::now();
    for (const auto& p : batch) metrics_.queue_seconds.observe(std::chrono::duration<double>(start - p->queued).count());
    run(batch, true);
    metrics_.run_seconds.observe(seconds_since(start));
    metrics_.batch_size.observe(static_cast<double>(batch.size()));
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = 0;
  }
}

// One engine run of `batch`; when it fails and `split`, each instance again on its own.
void Batcher::run(const std::vector<std::shared_ptr<Pending>>& batch, bool split) {
  std::vector<Value> inputs;
  inputs.reserve(batch.size());
  for (const auto& p : batch) inputs.push_back(p->input);
  try {
    RunResult r = engine_.run(inputs, o_.entry, batch.size() == 1 ? batch[0]->index : 0);
    {
      std::lock_guard<std::mutex> lock(metrics_.mutex);
      ++metrics_.batches;
      metrics_.instances += batch.size();
    }
    for (size_t i = 0; i < batch.size(); ++i) batch[i]->done.set_value({true, std::move(r.outputs[i])});
  } catch (const InternalError& e) {
    // A bug, not an instance's fault: retrying the instances one by one would only meet it again.
    // The batch's requests get a 500; the engine's next run starts afresh.
    metrics_.count(&Metrics::internal_errors);
    for (const auto& p : batch) {
      p->error = e.what();
      p->internal = true;
      p->done.set_value({false, Value{}});
    }
  } catch (const std::exception& e) {
    if (split && batch.size() > 1) {
      metrics_.count(&Metrics::batch_failures);
      for (const auto& p : batch) run({p}, false);
      return;
    }
    for (const auto& p : batch) {
      p->error = e.what();
      p->done.set_value({false, Value{}});
    }
  }
}

}  // namespace acrobat
