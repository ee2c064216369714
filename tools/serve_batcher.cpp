#include "serve_batcher.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "serve.h"
#include "support/diagnostics.h"

namespace acrobat {

Batcher::Batcher(const ServeOptions& o, const ServedModel& model, Engine& engine, Metrics& metrics,
                 const ServeCores& cores, EngineTurns& turns)
    : o_(o),
      model_(model),
      engine_(engine),
      metrics_(metrics),
      cores_(cores),
      turns_(turns),
      turn_(turns.join()),
      thread_([this] { loop(); }) {}

bool Batcher::submit(std::vector<std::shared_ptr<Pending>>& items) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queued_ + items.size() > o_.max_queue) return false;
    const size_t before = awaiting_first_;
    for (auto& p : items) {
      queues_[static_cast<size_t>(p->priority)].push_back(p);
      if (p->stream) ++awaiting_first_;
    }
    queued_ += items.size();
    if (o_.continuous && before == 0 && awaiting_first_ > 0) turns_.urgent(turn_, true);
  }
  wake_.notify_one();
  return true;
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
  return {queued_, running_};
}

bool Batcher::await_batch(size_t most) {
  const auto delay = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(o_.max_delay_ms));
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait(lock, [&] { return queued_ > 0 || stopping_; });
  if (queued_ == 0) return false;  // stopping, nothing left
  Clock::time_point oldest = Clock::time_point::max();
  for (const auto& q : queues_)
    if (!q.empty()) oldest = std::min(oldest, q.front()->queued);
  wake_.wait_until(lock, oldest + delay, [&] { return queued_ >= most || stopping_; });
  return true;
}

std::vector<std::shared_ptr<Pending>> Batcher::take(size_t most, bool wait) {
  std::vector<std::shared_ptr<Pending>> batch;
  if (wait && !await_batch(most)) return batch;
  size_t dropped = 0;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    int64_t cost = live_cost_;
    bool full = false;  // the next instance's cost would pass --max-cost
    for (size_t level = queues_.size(); level-- > 0 && batch.size() < most && !full;) {
      auto& queue = queues_[level];
      while (!queue.empty() && batch.size() < most) {
        if (model_.max_cost > 0 && cost + queue.front()->cost > model_.max_cost && (cost > 0 || !batch.empty())) {
          full = true;
          break;
        }
        std::shared_ptr<Pending> p = std::move(queue.front());
        queue.pop_front();
        --queued_;
        if (p->cancelled && *p->cancelled) {
          first_output_done(*p);
          p->dropped = true;
          p->done.set_value({false, Value{}});
          ++dropped;
        } else {
          cost += p->cost;
          batch.push_back(std::move(p));
        }
      }
    }
    running_ = live_.size() + batch.size();
  }
  if (dropped) metrics_.count(&Metrics::dropped_instances, dropped);
  const auto now = Clock::now();
  for (const auto& p : batch) metrics_.queue_seconds.observe(std::chrono::duration<double>(now - p->queued).count());
  return batch;
}

void Batcher::loop() {
  cores_.enter_engine();
  while (o_.continuous) {
    try {
      EngineTurns::Held turn(turns_, turn_);  // given up while it waits with nothing to run (take)
      engine_.run_open(*this, o_.max_batch, model_.entry);
    } catch (const std::exception&) {
      // The instances it held are answered with its error (Engine::run_open); a new run starts.
      std::lock_guard<std::mutex> lock(metrics_.mutex);
      metrics_.batch_failures += 1;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && queued_ == 0) return;
  }
  for (;;) {
    // A batch is due; then the engine's turn (the instances stay queued meanwhile: those that come
    // join the batch, those cancelled are dropped); then the batch.
    if (!await_batch(o_.max_batch)) return;  // stopping, nothing left
    EngineTurns::Held turn(turns_, turn_);
    std::vector<std::shared_ptr<Pending>> batch = take(o_.max_batch, false);
    if (batch.empty()) continue;  // every instance taken was dropped
    const auto start = Clock::now();
    run(batch);
    metrics_.run_seconds.observe(seconds_since(start));
    metrics_.batch_size.observe(static_cast<double>(batch.size()));
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = 0;
    for (const auto& p : batch) first_output_done(*p);
  }
}

// One engine run of `batch`, without the instances that fail (each answered with its error,
// numbered in its own request): the engine's run_batches with OnError::Skip.
void Batcher::run(const std::vector<std::shared_ptr<Pending>>& batch) {
  std::vector<Value> inputs;
  std::vector<size_t> numbers;
  inputs.reserve(batch.size());
  for (const auto& p : batch) {
    inputs.push_back(p->input);
    numbers.push_back(p->index);
  }
  try {
    RunResult r = run_batches(engine_, inputs, 0, model_.entry, OnError::Skip, numbers);
    metrics_.ran_batch(model_.name, batch.size() - r.failures.size(), r.failures.size());
    std::vector<uint8_t> failed(batch.size(), 0);
    for (const InstanceFailure& f : r.failures) {
      failed[f.instance] = 1;
      batch[f.instance]->error = f.message;
      batch[f.instance]->done.set_value({false, Value{}});
    }
    for (size_t i = 0; i < batch.size(); ++i)
      if (!failed[i]) batch[i]->done.set_value({true, std::move(r.outputs[i])});
  } catch (const std::exception& e) {
    // A bug (InternalError), or a failure of the batch as a whole: retrying would only meet it
    // again. The batch's requests get its error; the engine's next run starts afresh.
    const bool internal = dynamic_cast<const InternalError*>(&e) != nullptr;
    if (internal) metrics_.count(&Metrics::internal_errors);
    for (const auto& p : batch) {
      p->error = e.what();
      p->internal = internal;
      p->done.set_value({false, Value{}});
    }
  }
}

// ---- the open run's feed (continuous batching) ----

std::vector<InstanceFeed::Joining> Batcher::take(bool idle, size_t room) {
  std::vector<InstanceFeed::Joining> out;
  std::vector<std::shared_ptr<Pending>> taken;
  {
    EngineTurns::GivenUp away(turns_, turn_, idle);  // waiting with nothing to run: the other models run
    taken = take(room, idle);
  }
  for (std::shared_ptr<Pending>& p : taken) {
    const size_t ticket = next_ticket_++;
    p->started = Clock::now();
    live_cost_ += p->cost;
    out.push_back({ticket, p->input, p->index, p->stream != nullptr});
    live_.emplace(ticket, std::move(p));
  }
  if (!out.empty()) metrics_.batch_size.observe(static_cast<double>(live_.size()));
  return out;
}

bool Batcher::cancelled(size_t ticket) {
  const Pending& p = *live_.at(ticket);
  return p.cancelled && *p.cancelled;
}

std::shared_ptr<Pending> Batcher::leave(size_t ticket) {
  auto it = live_.find(ticket);
  std::shared_ptr<Pending> p = std::move(it->second);
  live_.erase(it);
  live_cost_ -= p->cost;
  std::lock_guard<std::mutex> lock(mutex_);
  running_ = live_.size();
  first_output_done(*p);
  return p;
}

void Batcher::first_output_done(Pending& p) {
  if (!p.stream || p.first_out) return;
  p.first_out = true;
  if (--awaiting_first_ == 0 && o_.continuous) turns_.urgent(turn_, false);
}

void Batcher::finished(size_t ticket, Value output) {
  std::shared_ptr<Pending> p = leave(ticket);
  metrics_.ran(model_.name, 1);
  metrics_.run_seconds.observe(seconds_since(p->started));
  p->done.set_value({true, std::move(output)});
}

void Batcher::failed(size_t ticket, const std::string& message, bool internal) {
  std::shared_ptr<Pending> p = leave(ticket);
  if (internal) metrics_.count(&Metrics::internal_errors);
  p->error = message;
  p->internal = internal;
  p->done.set_value({false, Value{}});
}

void Batcher::emitted(size_t ticket, const Value& v) {
  Pending& p = *live_.at(ticket);
  if (!p.stream) return;
  if (!p.first_out) {
    std::lock_guard<std::mutex> lock(mutex_);
    first_output_done(p);
  }
  nlohmann::json value = v.kind == Value::Kind::Int ? nlohmann::json(v.i)
                         : v.kind == Value::Kind::Float ? nlohmann::json(v.f) : nlohmann::json(v.b);
  p.stream->push("data: " + nlohmann::json{{"instance", p.index}, {"emit", std::move(value)}}.dump() + "\n\n");
}

void Batcher::stopped(size_t ticket) {
  std::shared_ptr<Pending> p = leave(ticket);
  metrics_.count(&Metrics::dropped_instances);
  p->dropped = true;
  p->done.set_value({false, Value{}});
}

}  // namespace acrobat
