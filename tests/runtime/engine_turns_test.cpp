// EngineTurns (tools/engine_turns.h): the models of one server take turns on the engine's cores,
// the turn going to the waiting batcher that has used the engine least.
#include "engine_turns.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace acrobat {
namespace {

using std::chrono::milliseconds;

// Holds `id`'s turn for `ms`.
void hold(EngineTurns& turns, int id, int ms) {
  EngineTurns::Held turn(turns, id);
  std::this_thread::sleep_for(milliseconds(ms));
}

// Until `count` takers wait for the turn, at most 10 s.
void until_waiting(const EngineTurns& turns, size_t count) {
  for (int i = 0; i < 10000 && turns.waiting() < count; ++i) std::this_thread::sleep_for(milliseconds(1));
  ASSERT_EQ(turns.waiting(), count);
}

TEST(EngineTurns, TheTurnGoesToTheWaitingTakerThatUsedTheEngineLeast) {
  EngineTurns turns;
  const int a = turns.join(), b = turns.join(), c = turns.join();
  hold(turns, a, 60);
  hold(turns, b, 10);
  EXPECT_GE(turns.used(a), 0.06);
  EXPECT_LT(turns.used(b), turns.used(a));
  std::mutex m;
  std::vector<int> order;
  turns.acquire(c);
  auto take = [&](int id) {
    EngineTurns::Held turn(turns, id);
    std::lock_guard<std::mutex> lock(m);
    order.push_back(id);
  };
  std::thread ta(take, a);  // asks first
  until_waiting(turns, 1);
  std::thread tb(take, b);
  until_waiting(turns, 2);
  turns.release(c);
  ta.join();
  tb.join();
  EXPECT_EQ(order, (std::vector<int>{b, a}));  // b used less, though a asked first
}

TEST(EngineTurns, PassGivesTheTurnOnlyToATakerThatUsedLess) {
  EngineTurns turns;
  const int a = turns.join(), b = turns.join();
  hold(turns, b, 300);  // b has used 300 ms, a nothing
  turns.acquire(a);
  std::atomic<bool> b_ran{false};
  std::thread tb([&] {
    EngineTurns::Held turn(turns, b);
    b_ran = true;
  });
  until_waiting(turns, 1);
  turns.pass(a);  // a: a few ms of this turn, less than b's 300: keeps it
  EXPECT_FALSE(b_ran.load());
  std::this_thread::sleep_for(milliseconds(400));
  turns.pass(a);  // a: over 400 ms now: b's turn, then a's again
  EXPECT_TRUE(b_ran.load());
  turns.release(a);
  tb.join();
}

TEST(EngineTurns, ATakerBackFromIdlenessBanksNoTime) {
  EngineTurns turns;
  const int a = turns.join(), b = turns.join();
  hold(turns, a, 100);  // b idle meanwhile
  const double a_used = turns.used(a);
  turns.acquire(a);
  std::thread tb([&] {
    hold(turns, b, 0);
  });
  until_waiting(turns, 1);
  // b counts the least used of the others less kLag, not its own 0: a's own work resumes once
  // b has had about kLag of turns.
  EXPECT_NEAR(turns.used(b), a_used - EngineTurns::kLag, 1e-9);
  turns.release(a);
  tb.join();
}

TEST(EngineTurns, AnUrgentTakerGoesFirstThoughItUsedMoreUpToTheCredit) {
  EngineTurns turns;
  const int a = turns.join(), b = turns.join(), c = turns.join();
  hold(turns, a, 60);  // a has used the most
  hold(turns, b, 10);
  std::mutex m;
  std::vector<int> order;
  auto take = [&](int id) {
    EngineTurns::Held turn(turns, id);
    std::lock_guard<std::mutex> lock(m);
    order.push_back(id);
  };
  turns.acquire(c);
  turns.urgent(a, true);
  std::thread tb(take, b);
  until_waiting(turns, 1);
  std::thread ta(take, a);
  until_waiting(turns, 2);
  turns.pass(c);  // c (used less than a) yields to the urgent a, then waits for its turn again
  turns.release(c);
  ta.join();
  tb.join();
  EXPECT_EQ(order, (std::vector<int>{a, b}));
  // Not urgent, or urgent but more than kUrgentCredit ahead of b: a, having used the most, waits
  // for b.
  for (bool urgent : {false, true}) {
    turns.urgent(a, urgent);
    if (urgent) hold(turns, a, static_cast<int>(EngineTurns::kUrgentCredit * 1000) + 50);
    order.clear();
    turns.acquire(c);
    std::thread ta2(take, a);
    until_waiting(turns, 1);
    std::thread tb2(take, b);
    until_waiting(turns, 2);
    turns.release(c);
    ta2.join();
    tb2.join();
    EXPECT_EQ(order, (std::vector<int>{b, a})) << (urgent ? "urgent" : "not urgent");
  }
}

TEST(EngineTurns, OneTakerNeverWaits) {
  EngineTurns turns;
  const int a = turns.join();
  for (int i = 0; i < 1000; ++i) {
    EngineTurns::Held turn(turns, a);
    turns.pass(a);
    EngineTurns::GivenUp away(turns, a, true);
  }
  SUCCEED();
}

}  // namespace
}  // namespace acrobat
