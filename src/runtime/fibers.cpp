#include "runtime/fibers.h"

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>
#include <algorithm>
#include <deque>
#include <vector>

#include "support/diagnostics.h"

namespace acrobat {

namespace ctx = boost::context;

// Stacks are kept for the next run instead of unmapped: each protected stack costs an mmap, an
// mprotect for its guard page and an munmap, and the pages it touched fault in again. With
// several threads in the process each of those unmaps shoots down TLBs on every core; on a
// StackRNN run that was a fifth of the time.
class StackCache {
 public:
  explicit StackCache(size_t bytes) : make_(bytes) {}
  ~StackCache() {
    for (auto& sc : free_) make_.deallocate(sc);
  }
  StackCache(const StackCache&) = delete;
  StackCache& operator=(const StackCache&) = delete;

  ctx::stack_context take() {
    if (free_.empty()) return make_.allocate();
    ctx::stack_context sc = free_.back();
    free_.pop_back();
    return sc;
  }
  void give_back(ctx::stack_context& sc) {
    if (free_.size() < kMaxKept)
      free_.push_back(sc);
    else
      make_.deallocate(sc);
  }

 private:
  static constexpr size_t kMaxKept = 4096;
  ctx::protected_fixedsize_stack make_;
  std::vector<ctx::stack_context> free_;
};

// The StackAllocator Boost.Context copies into each fiber.
class CachedStack {
 public:
  explicit CachedStack(StackCache& cache) : cache_(&cache) {}
  ctx::stack_context allocate() { return cache_->take(); }
  void deallocate(ctx::stack_context& sc) noexcept { cache_->give_back(sc); }

 private:
  StackCache* cache_;
};

struct InstanceFibers::Impl {
  explicit Impl(size_t stack_bytes) : stacks(stack_bytes) {}
  StackCache stacks;  // declared first: destroyed after every fiber that uses it

  enum class State { Runnable, Waiting, Joining, Done };
  // One fork, on the forking fiber's stack: a fiber may fork again while its first member runs.
  struct Join {
    int fiber;              // the forking fiber
    size_t left;            // children not finished yet
    bool joining = false;   // the forking fiber waits for them
  };
  struct Slot {
    ctx::fiber fiber;
    State state = State::Runnable;
    std::exception_ptr error;
    Join* join = nullptr;  // the fork that started this fiber; null for an instance's own
    uint64_t seq = 0;      // creation order: a child is always newer than its parent
  };
  std::deque<Slot> slots;  // a deque: references stay valid while fibers fork
  std::vector<int> free;   // slots of joined children, for the next fork
  std::deque<int> ready;   // runnable in this round
  std::vector<int> waiting;
  int current = -1;        // the fiber running now
  size_t live = 0;
  uint64_t next_seq = 0;
  ctx::fiber scheduler;  // inside a fiber: where wait(), fork() and the end of the fiber return to

  int start(FunctionRef<void(size_t)> body, size_t k, Join* join) {
    int id;
    if (!free.empty()) {
      id = free.back();
      free.pop_back();
      slots[id] = Slot{};
    } else {
      id = static_cast<int>(slots.size());
      slots.emplace_back();
    }
    Slot& s = slots[id];
    s.join = join;
    s.seq = next_seq++;
    s.fiber = ctx::fiber(std::allocator_arg, CachedStack(stacks),
                         [this, id, k, body](ctx::fiber&& from) {
                           scheduler = std::move(from);
                           try {
                             body(k);
                           } catch (const ctx::detail::forced_unwind&) {
                             throw;  // the fiber is being destroyed: let Boost unwind it
                           } catch (...) {
                             slots[id].error = std::current_exception();
                           }
                           slots[id].state = State::Done;
                           return std::move(scheduler);
                         });
    ++live;
    return id;
  }

  // Runs fiber `id` until it finishes, waits or forks.
  void resume(int id) {
    current = id;
    ctx::fiber f = std::move(slots[id].fiber).resume();
    slots[id].fiber = std::move(f);
    current = -1;
    Slot& s = slots[id];
    switch (s.state) {
      case State::Done:
        --live;
        if (s.join && --s.join->left == 0 && s.join->joining) {
          slots[s.join->fiber].state = State::Runnable;
          ready.push_front(s.join->fiber);  // the forking fiber goes on before the flush
        }
        break;
      case State::Waiting: waiting.push_back(id); break;
      case State::Joining: break;  // its children are in `ready`
      case State::Runnable: ACROBAT_ASSERT(false, "a fiber returned while runnable");
    }
  }

  // From inside a fiber: back to the scheduler loop.
  void suspend(State why) {
    slots[current].state = why;
    scheduler = std::move(scheduler).resume();
  }

  // Unwinds every fiber not finished, children before their parents.
  void destroy_all() {
    std::vector<int> order(slots.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return slots[a].seq > slots[b].seq; });
    for (int id : order) slots[id].fiber = ctx::fiber();
    slots.clear();
    free.clear();
    ready.clear();
    waiting.clear();
    live = 0;
  }
};

InstanceFibers::InstanceFibers(size_t stack_bytes)
    : impl_(std::make_unique<Impl>(stack_bytes)) {}

InstanceFibers::~InstanceFibers() {
  if (impl_) impl_->destroy_all();
}

void InstanceFibers::run(size_t n, const std::function<void(size_t)>& body,
                         const std::function<void()>& flush) {
  ACROBAT_ASSERT(!running_, "InstanceFibers::run is not reentrant");
  Impl& im = *impl_;
  im.destroy_all();
  flushes_ = 0;
  forks_ = 0;
  for (size_t i = 0; i < n; ++i) im.ready.push_back(im.start(body, i, nullptr));
  running_ = true;
  try {
    for (;;) {
      while (!im.ready.empty()) {
        int id = im.ready.front();
        im.ready.pop_front();
        im.resume(id);
      }
      if (im.waiting.empty()) break;
      // Every unfinished fiber waits for a pending tensor (or for children that do).
      running_ = false;
      ++flushes_;
      flush();
      running_ = true;
      for (int id : im.waiting) {
        im.slots[id].state = Impl::State::Runnable;
        im.ready.push_back(id);
      }
      im.waiting.clear();
    }
  } catch (...) {
    running_ = false;
    im.destroy_all();
    throw;
  }
  running_ = false;
  ACROBAT_ASSERT(im.live == 0, "instance fibers left unfinished");
  std::exception_ptr first;
  for (size_t i = 0; i < n && !first; ++i) first = im.slots[i].error;
  im.destroy_all();
  if (first) std::rethrow_exception(first);
}

void InstanceFibers::wait() {
  ACROBAT_ASSERT(running_ && impl_->current >= 0, "InstanceFibers::wait outside a fiber");
  impl_->suspend(Impl::State::Waiting);
}

void InstanceFibers::fork(size_t n, FunctionRef<void(size_t)> body) {
  ACROBAT_ASSERT(running_ && impl_->current >= 0, "InstanceFibers::fork outside a fiber");
  if (n == 0) return;
  Impl& im = *impl_;
  Impl::Join join{im.current, n - 1};
  int few[8];
  std::vector<int> many;
  int* children = few;
  if (n - 1 > std::size(few)) {
    many.resize(n - 1);
    children = many.data();
  }
  for (size_t k = 1; k < n; ++k) children[k - 1] = im.start(body, k, &join);
  forks_ += static_cast<int64_t>(n - 1);
  for (size_t k = n - 1; k-- > 0;) im.ready.push_front(children[k]);  // next, in order
  std::exception_ptr first;
  try {
    body(0);
  } catch (const ctx::detail::forced_unwind&) {
    throw;
  } catch (...) {
    first = std::current_exception();
  }
  if (join.left > 0) {
    join.joining = true;
    im.suspend(Impl::State::Joining);
  }
  // Every child has finished.
  for (size_t k = 0; k + 1 < n; ++k) {
    if (!first) first = im.slots[children[k]].error;
    im.slots[children[k]].error = nullptr;
    im.free.push_back(children[k]);
  }
  if (first) std::rethrow_exception(first);
}

size_t InstanceFibers::live() const { return impl_->live; }

}  // namespace acrobat
