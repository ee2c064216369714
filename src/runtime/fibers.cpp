#include "runtime/fibers.h"

#include <boost/context/fiber.hpp>
#include <boost/context/preallocated.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>
#include <algorithm>
#include <deque>
#include <vector>

#include "support/diagnostics.h"

// Every stack switch is told to the sanitizers (scripts/sanitize.sh). ASan keeps the bounds of the
// running stack: a throw unpoisons the stack from there up, and without the switch it warns
// "ignoring requested __asan_handle_no_return" at the first throw on a fiber and may report false
// stack errors later. TSan keeps a shadow call stack and a clock per thread, which a switch it does
// not know of corrupts. Boost.Context annotates only its ucontext fibers, for ASan alone
// (BOOST_USE_ASAN), and those need fiber_activation_record::current() from a libboost_context built
// for ucontext, which Debian's (built for fcontext) does not have; so the switches of the fcontext
// fibers below are annotated here. Without sanitizers the annotations are empty.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ACROBAT_ASAN_FIBERS 1
#endif
#if __has_feature(thread_sanitizer)
#define ACROBAT_TSAN_FIBERS 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(ACROBAT_ASAN_FIBERS)
#define ACROBAT_ASAN_FIBERS 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(ACROBAT_TSAN_FIBERS)
#define ACROBAT_TSAN_FIBERS 1
#endif
#ifdef ACROBAT_ASAN_FIBERS
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef ACROBAT_TSAN_FIBERS
#include <sanitizer/tsan_interface.h>
#endif

namespace acrobat {

namespace ctx = boost::context;

namespace {

// Thrown inside a fiber that is resumed only to end it (a run that failed while it waited): its
// frames unwind and its function returns, so that every fiber ends the same way.
struct Cancelled {};

// A stack as the sanitizers know it: a fiber's, or the scheduler's (the thread that calls run()).
struct SanitizerStack {
  const void* bottom = nullptr;  // for ASan
  size_t size = 0;
  void* tsan = nullptr;          // TSan's fiber
};

// TSan counts instrumented calls and returns on the shadow stack of the fiber it believes runs, so
// between telling it of a switch and making the switch no instrumented function may be entered or
// left: the helpers that tell it are inlined, and both directions of a switch go through jump()
// below, whose code is then the same on both sides of every switch.
#define ACROBAT_FIBERS_INLINE [[gnu::always_inline]] inline

ACROBAT_FIBERS_INLINE void* tsan_current() {
#ifdef ACROBAT_TSAN_FIBERS
  return __tsan_get_current_fiber();
#else
  return nullptr;
#endif
}
ACROBAT_FIBERS_INLINE void tsan_switch(void* to) {
#ifdef ACROBAT_TSAN_FIBERS
  __tsan_switch_to_fiber(to, 0);  // 0: the switch orders what came before it before what follows
#else
  (void)to;
#endif
}

#ifdef ACROBAT_TSAN_FIBERS
// The instrumentation's own hook, called on leaving an instrumented function (see start()).
extern "C" void __tsan_func_exit();
#endif

// The sanitizers' view of the stacks of a fiber scheduler's fibers. TSan's fibers are kept for the
// next fibers: making one costs a millisecond or more under TSan, and a run starts one per instance
// and per forked call.
class SanitizerStacks {
 public:
  SanitizerStacks() = default;
  SanitizerStacks(const SanitizerStacks&) = delete;
  SanitizerStacks& operator=(const SanitizerStacks&) = delete;
  ~SanitizerStacks() {
#ifdef ACROBAT_TSAN_FIBERS
    for (void* f : idle_tsan_) __tsan_destroy_fiber(f);
#endif
  }

  // A new fiber's stack.
  SanitizerStack take(const ctx::stack_context& sc) {
    SanitizerStack s;
    s.bottom = static_cast<const char*>(sc.sp) - sc.size;
    s.size = sc.size;
#ifdef ACROBAT_TSAN_FIBERS
    if (idle_tsan_.empty()) {
      s.tsan = __tsan_create_fiber(0);
    } else {
      s.tsan = idle_tsan_.back();
      idle_tsan_.pop_back();
    }
#endif
    return s;
  }
  // After the switch away from an ended fiber.
  void give_back(SanitizerStack& s) {
    if (s.tsan) idle_tsan_.push_back(s.tsan);
    s = SanitizerStack{};
  }

 private:
  [[maybe_unused]] std::vector<void*> idle_tsan_;
};

// Switches to `to`, which runs on `to_stack`, and returns when something switches back: the
// scheduler resuming a fiber, or a fiber suspending itself. `came_from`, if given, gets the bounds of
// the stack that switched back. A fiber that ends returns to the scheduler without a jump (through
// Boost); the scheduler then tells TSan itself.
[[gnu::noinline]] void jump(ctx::fiber& to, const SanitizerStack& to_stack, SanitizerStack* came_from) {
#ifdef ACROBAT_ASAN_FIBERS
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, to_stack.bottom, to_stack.size);
#endif
  void* self = tsan_current();
  tsan_switch(to_stack.tsan);
  to = std::move(to).resume();
#ifdef ACROBAT_ASAN_FIBERS
  const void* bottom = nullptr;
  size_t size = 0;
  __sanitizer_finish_switch_fiber(fake_stack, &bottom, &size);
  if (came_from) {
    came_from->bottom = bottom;
    came_from->size = size;
  }
#else
  (void)came_from;
#endif
  if (tsan_current() != self) tsan_switch(self);  // `to` ended
}

// On a fiber: its first instructions, and its last before it returns to the scheduler.
ACROBAT_FIBERS_INLINE void fiber_started(SanitizerStack& scheduler) {
#ifdef ACROBAT_ASAN_FIBERS
  __sanitizer_finish_switch_fiber(nullptr, &scheduler.bottom, &scheduler.size);
#else
  (void)scheduler;
#endif
}
// On a fiber, as it ends: `frame` is the frame address of the fiber's function. Boost's entry
// function, above it on the stack, is instantiated (so instrumented) here and never returns: ASan's
// redzones for its frame would stay poisoned after the fiber ends. When the stack's addresses are
// mapped again, for a stack at another offset, those stale marks land in the middle of another
// fiber's frames and ASan reports its writes there (stack-buffer-overflow, stack-use-after-scope).
// Nothing above `frame` is used again: it is cleared up to the top of the stack.
ACROBAT_FIBERS_INLINE void clear_entry_frames(const SanitizerStack& self, void* frame) {
#ifdef ACROBAT_ASAN_FIBERS
  const char* top = static_cast<const char*>(self.bottom) + self.size;
  ASAN_UNPOISON_MEMORY_REGION(frame, static_cast<size_t>(top - static_cast<char*>(frame)));
#else
  (void)self;
  (void)frame;
#endif
}
ACROBAT_FIBERS_INLINE void fiber_ending(const SanitizerStack& scheduler) {
#ifdef ACROBAT_ASAN_FIBERS
  __sanitizer_start_switch_fiber(nullptr, scheduler.bottom, scheduler.size);  // null: frees its fake stack
#else
  (void)scheduler;
#endif
}

}  // namespace

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

// The StackAllocator Boost.Context copies into each fiber, to give its stack back when the fiber
// ends (start() takes the stack from the cache itself: the sanitizers need its bounds).
class CachedStack {
 public:
  explicit CachedStack(StackCache& cache) : cache_(&cache) {}
  void deallocate(ctx::stack_context& sc) noexcept { cache_->give_back(sc); }

 private:
  StackCache* cache_;
};

struct InstanceFibers::Impl {
  explicit Impl(size_t stack_bytes) : stacks(stack_bytes) {}
  StackCache stacks;  // declared first: destroyed after every fiber that uses it
  SanitizerStacks sanitizer_stacks;

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
    size_t instance = 0;   // the instance whose fiber this is or descends from
    SanitizerStack stack;
  };
  std::deque<Slot> slots;  // a deque: references stay valid while fibers fork
  std::vector<int> free;   // slots of joined children, for the next fork
  std::deque<int> ready;   // runnable in this round
  std::vector<int> waiting;
  int current = -1;        // the fiber running now
  size_t live = 0;
  uint64_t next_seq = 0;
  ctx::fiber scheduler;  // inside a fiber: where wait(), fork() and the end of the fiber return to
  SanitizerStack scheduler_stack;
  bool cancelling = false;  // fibers resumed now end (destroy_all)
  const Open* open = nullptr;  // run_open's callbacks, during one

  // Whether the fiber running now is to end where it is.
  bool ending(int id) const {
    return cancelling || (open && open->cancelled && open->cancelled(slots[id].instance));
  }

  // `instance`: the instance the new fiber belongs to (k itself for an instance's own fiber).
  int start(FunctionRef<void(size_t)> body, size_t k, Join* join, size_t instance) {
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
    s.instance = instance;
    ctx::stack_context sc = stacks.take();
    s.stack = sanitizer_stacks.take(sc);
    // Boost enters the new fiber's entry function and comes back at once: for TSan, on the fiber's
    // shadow stack, where that function, which never returns, leaves its frame; it is taken off
    // again below, so that every use of a TSan fiber starts from an empty shadow stack.
    void* creator = tsan_current();
    tsan_switch(s.stack.tsan);
    ctx::fiber made(std::allocator_arg, ctx::preallocated(sc.sp, sc.size, sc), CachedStack(stacks),
                [this, id, k, body](ctx::fiber&& from) {
                  fiber_started(scheduler_stack);
                  scheduler = std::move(from);
                  if (!ending(id)) {
                    try {
                      body(k);
                    } catch (const Cancelled&) {
                      // ended by destroy_all
                    } catch (...) {
                      slots[id].error = std::current_exception();
                    }
                  }
                  slots[id].state = State::Done;
                  clear_entry_frames(slots[id].stack, __builtin_frame_address(0));
                  fiber_ending(scheduler_stack);
                  return std::move(scheduler);
                });
#ifdef ACROBAT_TSAN_FIBERS
    __tsan_func_exit();
#endif
    tsan_switch(creator);
    s.fiber = std::move(made);
    ++live;
    return id;
  }

  // From the scheduler: runs fiber `id` until it finishes, waits or forks.
  void switch_to(int id) {
    current = id;
    scheduler_stack.tsan = tsan_current();
    jump(slots[id].fiber, slots[id].stack, nullptr);
    current = -1;
  }

  void resume(int id) {
    switch_to(id);
    Slot& s = slots[id];
    switch (s.state) {
      case State::Done:
        sanitizer_stacks.give_back(s.stack);
        --live;
        if (open && !s.join) {  // an instance of an open run has ended: its slot is free again
          std::exception_ptr error = std::move(s.error);
          s.error = nullptr;
          free.push_back(id);
          open->ended(s.instance, std::move(error));
        }
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

  // A round: every runnable fiber runs until it finishes, waits or forks (its children run in the
  // same round).
  void run_ready() {
    while (!ready.empty()) {
      int id = ready.front();
      ready.pop_front();
      resume(id);
    }
  }
  // After a flush: the waiting fibers are runnable again.
  void wake_waiting() {
    for (int id : waiting) {
      slots[id].state = State::Runnable;
      ready.push_back(id);
    }
    waiting.clear();
  }

  // From inside a fiber: back to the scheduler loop.
  void suspend(State why) {
    slots[current].state = why;
    jump(scheduler, scheduler_stack, &scheduler_stack);
    if (ending(current)) throw Cancelled{};
  }

  // Ends every fiber not finished, children before their parents: each is resumed once more, to
  // unwind from its suspension (or to end at once if it never started) and return.
  void destroy_all() {
    std::vector<int> order(slots.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return slots[a].seq > slots[b].seq; });
    cancelling = true;
    for (int id : order) {
      if (slots[id].fiber) switch_to(id);
      ACROBAT_ASSERT(!slots[id].fiber, "a cancelled fiber did not end");
      sanitizer_stacks.give_back(slots[id].stack);
    }
    cancelling = false;
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
  for (size_t i = 0; i < n; ++i) im.ready.push_back(im.start(body, i, nullptr, i));
  running_ = true;
  try {
    for (;;) {
      im.run_ready();
      if (im.waiting.empty()) break;
      // Every unfinished fiber waits for a pending tensor (or for children that do).
      running_ = false;
      ++flushes_;
      flush();
      running_ = true;
      im.wake_waiting();
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

void InstanceFibers::call(FunctionRef<void()> fn) {
  ACROBAT_ASSERT(!running_, "InstanceFibers::call inside a run");
  Impl& im = *impl_;
  im.destroy_all();
  auto body = [fn](size_t) { fn(); };
  const int id = im.start(body, 0, nullptr, 0);
  im.switch_to(id);
  ACROBAT_ASSERT(im.slots[static_cast<size_t>(id)].state == Impl::State::Done, "a called fiber suspended");
  std::exception_ptr error = std::move(im.slots[static_cast<size_t>(id)].error);
  im.destroy_all();
  if (error) std::rethrow_exception(error);
}

void InstanceFibers::run_open(const Open& open) {
  ACROBAT_ASSERT(!running_, "InstanceFibers::run_open is not reentrant");
  Impl& im = *impl_;
  im.destroy_all();
  flushes_ = 0;
  forks_ = 0;
  im.open = &open;
  struct Close {
    Impl& im;
    ~Close() { im.open = nullptr; }
  } close{im};
  const std::function<void(size_t)>& body = open.body;
  running_ = true;
  try {
    for (;;) {
      running_ = false;
      const std::vector<size_t> joining = open.admit(im.live == 0);
      running_ = true;
      if (im.live == 0 && joining.empty()) break;
      for (size_t id : joining) im.ready.push_back(im.start(body, id, nullptr, id));
      const bool ran = !im.ready.empty();
      im.run_ready();
      if (ran) {
        running_ = false;
        ++flushes_;
        open.flush();
        running_ = true;
      }
      im.wake_waiting();
    }
  } catch (...) {
    running_ = false;
    im.open = nullptr;  // the fibers destroyed are not reported as ended
    im.destroy_all();
    throw;
  }
  running_ = false;
  im.destroy_all();
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
  const size_t instance = im.slots[im.current].instance;
  for (size_t k = 1; k < n; ++k) children[k - 1] = im.start(body, k, &join, instance);
  forks_ += static_cast<int64_t>(n - 1);
  for (size_t k = n - 1; k-- > 0;) im.ready.push_front(children[k]);  // next, in order
  std::exception_ptr first;
  try {
    body(0);
  } catch (const Cancelled&) {
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
