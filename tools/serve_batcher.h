// The dynamic batcher of `acrobat serve`: the instances of concurrent requests wait in a queue per
// priority, and one thread takes up to max_batch of them (the highest priority first, the oldest
// first within one) once there are that many or the oldest has waited max_delay, and runs them as
// one batch on the engine. At most max_queue instances wait; a request that would make more is
// refused whole. Instances whose client went away, or whose deadline passed, before their batch
// was taken are dropped there, unrun.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engines/engine.h"
#include "engines/inputs.h"
#include "serve_metrics.h"
#include "support/clock.h"

namespace acrobat {

class ServeCores;
struct ServeOptions;

// One instance of a request, waiting for its batch.
struct Pending {
  Value input;
  size_t index = 0;  // in its request's "instances"
  Clock::time_point queued;
  int priority = 0;  // 0 to kMaxPriority: higher ones are taken first
  // Shared by a request's instances: its client is gone, or its deadline passed.
  std::shared_ptr<std::atomic<bool>> cancelled;
  std::promise<std::pair<bool, Value>> done;     // (ok, output); not ok: error text in `error`
  std::string error;
  bool internal = false;  // the error is acrobat's (InternalError): a 500, not the request's 400
  bool dropped = false;   // cancelled before its batch ran: never run
};

class Batcher {
 public:
  Batcher(const ServeOptions& o, Engine& engine, Metrics& metrics, const ServeCores& cores);
  ~Batcher() { stop(); }

  // Queues a request's instances; false (nothing queued) when max_queue would be exceeded.
  bool submit(std::vector<std::shared_ptr<Pending>>& items);
  // Runs what is queued, then ends the thread.
  void stop();
  // Instances waiting, and instances in the engine's current run.
  std::pair<size_t, size_t> depth() const;

 private:
  void loop();
  // Up to max_batch instances from the queue, once a batch is due; the cancelled ones among them
  // are dropped. Empty when stopping with nothing left.
  std::vector<std::shared_ptr<Pending>> take();
  void run(const std::vector<std::shared_ptr<Pending>>& batch);

  const ServeOptions& o_;
  Engine& engine_;
  Metrics& metrics_;
  const ServeCores& cores_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::array<std::deque<std::shared_ptr<Pending>>, kMaxPriority + 1> queues_;  // by priority
  size_t queued_ = 0;  // in all of them
  size_t running_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest is ready
};

}  // namespace acrobat
