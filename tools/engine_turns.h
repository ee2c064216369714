// Turns on the engine's cores for the batchers of the models one server serves (serve_batcher.h).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <vector>

#include "support/clock.h"

namespace acrobat {

// The engine's cores shared by the batchers of the models a server serves: one batcher runs at a
// time. A whole-batch batcher holds its turn for a batch, run to its end; a continuous one offers
// it between the rounds of its open run and between the batches of its flushes
// (InstanceFeed::may_yield), so that the models' open runs interleave. The turn goes to the
// waiting batcher that has used the engine least (its seconds of turns held), as a fair scheduler
// gives the processor to the task with the least run time: a model with little work (short trees) runs as soon as the running
// batch ends, and one with much (a decoder's steps) takes what the others leave. A batcher that
// comes back from waiting for work counts at least kLag less than the least of those running or
// waiting, so that it gets the next turn but banks no time from its idleness. A batcher with a
// first output to hand out (a streamed request that has emitted nothing yet: urgent()) counts
// kUrgentCredit less than it has used, so that it goes before the others unless it is that far
// ahead of them: a request's time to first output is its prefill and first step plus the end of
// the batch running when it came, not a share of the other models' rounds, while a stream of such
// requests can take no more than that credit beyond its share from the others.
class EngineTurns {
 public:
  static constexpr double kLag = 0.02;           // seconds
  static constexpr double kUrgentCredit = 0.25;  // seconds

  // A batcher's place among those taking turns: the id of the calls below.
  int join() {
    std::lock_guard<std::mutex> lock(mutex_);
    takers_.emplace_back();
    return static_cast<int>(takers_.size() - 1);
  }
  void acquire(int id) {
    std::unique_lock<std::mutex> lock(mutex_);
    double least = std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < takers_.size(); ++k)
      if (static_cast<int>(k) != id && (takers_[k].waiting || holder_ == static_cast<int>(k)))
        least = std::min(least, takers_[k].used);
    // By index, not a reference held across the wait: join() may grow takers_ meanwhile (a model
    // loading while the others serve).
    const auto me = static_cast<size_t>(id);
    if (least != std::numeric_limits<double>::infinity()) takers_[me].used = std::max(takers_[me].used, least - kLag);
    takers_[me].waiting = true;
    wake_.wait(lock, [&] { return holder_ < 0 && next() == id; });
    takers_[me].waiting = false;
    holder_ = id;
    since_ = Clock::now();
  }
  // Takers waiting for the turn.
  size_t waiting() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<size_t>(std::count_if(takers_.begin(), takers_.end(), [](const Taker& t) { return t.waiting; }));
  }
  // Seconds of turns `id` has held (with the lag it was given on coming back).
  double used(int id) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return takers_[static_cast<size_t>(id)].used;
  }
  void release(int id) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      takers_[static_cast<size_t>(id)].used += std::chrono::duration<double>(Clock::now() - since_).count();
      holder_ = -1;
    }
    wake_.notify_all();
  }
  // Where a continuous run may yield: the turn goes to a waiting batcher that goes before it (the
  // one that counts less use, urgent()'s credit taken off), if one does.
  void pass(int id) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      Taker me = takers_[static_cast<size_t>(id)];
      me.used += std::chrono::duration<double>(Clock::now() - since_).count();
      const int other = next();
      if (other < 0 || !before(takers_[static_cast<size_t>(other)], me)) return;
    }
    release(id);
    acquire(id);
  }
  // Whether `id` has a first output to hand out (see above).
  void urgent(int id, bool on) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      takers_[static_cast<size_t>(id)].urgent = on;
    }
    wake_.notify_all();
  }
  struct Held {  // a turn for a scope
    Held(EngineTurns& t, int id) : turns(t), id(id) { turns.acquire(id); }
    ~Held() { turns.release(id); }
    EngineTurns& turns;
    int id;
  };
  struct GivenUp {  // a held turn given up for a scope (`give`: else kept)
    GivenUp(EngineTurns& t, int id, bool give) : turns(give ? &t : nullptr), id(id) {
      if (turns) turns->release(id);
    }
    ~GivenUp() {
      if (turns) turns->acquire(id);
    }
    EngineTurns* turns;
    int id;
  };

 private:
  struct Taker {
    double used = 0;  // seconds of turns held
    bool waiting = false;
    bool urgent = false;
  };
  // Whether `a` goes before `b`: the one that counts less use, an urgent one kUrgentCredit less.
  static double counted(const Taker& t) { return t.urgent ? t.used - kUrgentCredit : t.used; }
  static bool before(const Taker& a, const Taker& b) { return counted(a) < counted(b); }
  // The waiting taker that goes first (the lowest id among equals), or -1.
  int next() const {
    int best = -1;
    for (size_t k = 0; k < takers_.size(); ++k)
      if (takers_[k].waiting && (best < 0 || before(takers_[k], takers_[static_cast<size_t>(best)])))
        best = static_cast<int>(k);
    return best;
  }
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Taker> takers_;
  int holder_ = -1;          // the taker whose turn it is, or -1
  Clock::time_point since_;  // when it took it
};

}  // namespace acrobat
