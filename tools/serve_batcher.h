// The dynamic batcher of `acrobat serve`: the instances of concurrent requests wait in a queue per
// priority, and one thread takes up to max_batch of them (the highest priority first, the oldest
// first within one) once there are that many or the oldest has waited max_delay, and runs them as
// one batch on the engine. At most max_queue instances wait; a request that would make more is
// refused whole. Instances whose client went away, or whose deadline passed, before their batch
// was taken are dropped there, unrun.
// Continuous batching (--continuous, ServeOptions::continuous): one open run of the engine
// (Engine::run_open) takes queued instances between its flushes, up to max_batch running at once,
// and answers each as soon as its output is computed; the instances of a request whose client went
// away or whose deadline passed stop where they are.
// Several models (`--models`): a batcher each, taking turns on the engine's cores (EngineTurns).
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
#include <unordered_map>
#include <vector>

#include "engine_turns.h"
#include "engines/engine.h"
#include "engines/inputs.h"
#include "serve_metrics.h"
#include "support/clock.h"

namespace acrobat {

class ServeCores;
struct ServeOptions;
struct ServedModel;

// The events of a streamed answer (server-sent events, a request's "stream": true): what its
// instances emit, pushed by the engine's thread as they come and taken by the connection's.
class EventStream {
 public:
  void push(std::string event) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(std::move(event));
    }
    wake_.notify_one();
  }
  // The events queued, waiting for one until `until`.
  std::vector<std::string> take(Clock::time_point until) {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_until(lock, until, [&] { return !events_.empty(); });
    std::vector<std::string> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
    events_.clear();
    return out;
  }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::string> events_;
};

// One instance of a request, waiting for its batch.
struct Pending {
  Value input;
  size_t index = 0;  // in its request's "instances"
  Clock::time_point queued;
  Clock::time_point started;  // continuous batching: when it joined the engine's run
  int priority = 0;  // 0 to kMaxPriority: higher ones are taken first
  // Shared by a request's instances: its client is gone, or its deadline passed.
  std::shared_ptr<std::atomic<bool>> cancelled;
  std::promise<std::pair<bool, Value>> done;     // (ok, output); not ok: error text in `error`
  std::string error;
  bool internal = false;  // the error is acrobat's (InternalError): a 500, not the request's 400
  bool dropped = false;   // cancelled before its batch ran: never run
  std::shared_ptr<EventStream> stream;  // a streamed request's, shared by its instances; else null
  bool first_out = false;  // streamed: its first emit is out, or it was answered without one
  int64_t cost = 1;  // the model's cost(x) of it, with --max-cost
};

class Batcher : private InstanceFeed {
 public:
  Batcher(const ServeOptions& o, const ServedModel& model, Engine& engine, Metrics& metrics, const ServeCores& cores,
          EngineTurns& turns);
  ~Batcher() { stop(); }

  // Queues a request's instances; false (nothing queued) when max_queue would be exceeded.
  bool submit(std::vector<std::shared_ptr<Pending>>& items);
  // Runs what is queued, then ends the thread.
  void stop();
  // Instances waiting, and instances in the engine's current run.
  std::pair<size_t, size_t> depth() const;

 private:
  void loop();
  // Up to `most` instances from the queue, their costs together at most what --max-cost leaves
  // beside the running ones (an instance that costs more alone is taken alone, when nothing else
  // runs or is taken; the queue's order is kept: the next one that does not fit waits); the
  // cancelled ones among them are dropped. With `wait`, once a batch is due (blocking until then),
  // and empty only when stopping with nothing left; otherwise what is queued now.
  std::vector<std::shared_ptr<Pending>> take(size_t most, bool wait);
  // Waits until a batch is due: an instance queued, and `most` of them or the oldest's
  // max_delay; false when stopping with nothing queued.
  bool await_batch(size_t most);
  void run(const std::vector<std::shared_ptr<Pending>>& batch);

  // The open run's feed (continuous batching); tickets index live_.
  void may_yield() override { turns_.pass(turn_); }
  std::vector<Joining> take(bool idle, size_t room) override;
  bool cancelled(size_t ticket) override;
  void finished(size_t ticket, Value output) override;
  void failed(size_t ticket, const std::string& message, bool internal) override;
  void stopped(size_t ticket) override;
  void emitted(size_t ticket, const Value& v) override;
  std::shared_ptr<Pending> leave(size_t ticket);  // an instance of the open run answered
  // Streamed instance `p` has emitted, or was answered or dropped: one fewer awaiting its first
  // output (called with mutex_ held).
  void first_output_done(Pending& p);

  const ServeOptions& o_;
  const ServedModel& model_;
  Engine& engine_;
  Metrics& metrics_;
  const ServeCores& cores_;
  EngineTurns& turns_;
  const int turn_;  // this batcher's id in turns_
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::array<std::deque<std::shared_ptr<Pending>>, kMaxPriority + 1> queues_;  // by priority
  size_t queued_ = 0;  // in all of them
  size_t running_ = 0;
  bool stopping_ = false;
  std::unordered_map<size_t, std::shared_ptr<Pending>> live_;  // in the open run, by ticket
  size_t next_ticket_ = 0;
  int64_t live_cost_ = 0;  // of live_ (--max-cost)
  // Streamed instances queued or running with no output yet: while there are any, a continuous
  // batcher's turns come first (EngineTurns::urgent; a whole batch hands its outputs out at its end).
  size_t awaiting_first_ = 0;
  std::thread thread_;  // last: started once the rest is ready
};

}  // namespace acrobat
