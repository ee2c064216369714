#include "runtime/fibers.h"

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>
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
  struct Slot {
    ctx::fiber fiber;
    bool done = false;
    std::exception_ptr error;
  };
  std::vector<Slot> slots;
  ctx::fiber scheduler;  // inside a fiber: where wait() and the end of the fiber return to
};

InstanceFibers::InstanceFibers(size_t stack_bytes)
    : impl_(std::make_unique<Impl>(stack_bytes)) {}

InstanceFibers::~InstanceFibers() = default;

void InstanceFibers::run(size_t n, const std::function<void(size_t)>& body,
                         const std::function<void()>& flush) {
  ACROBAT_ASSERT(!running_, "InstanceFibers::run is not reentrant");
  Impl& im = *impl_;
  im.slots.clear();
  im.slots.resize(n);
  flushes_ = 0;
  for (size_t i = 0; i < n; ++i) {
    im.slots[i].fiber = ctx::fiber(
        std::allocator_arg, CachedStack(im.stacks),
        [this, i, &body](ctx::fiber&& scheduler) {
          impl_->scheduler = std::move(scheduler);
          try {
            body(i);
          } catch (const ctx::detail::forced_unwind&) {
            throw;  // the fiber is being destroyed: let Boost unwind it
          } catch (...) {
            impl_->slots[i].error = std::current_exception();
          }
          impl_->slots[i].done = true;
          return std::move(impl_->scheduler);
        });
  }
  size_t remaining = n;
  running_ = true;
  while (remaining > 0) {
    for (size_t i = 0; i < n; ++i) {
      Impl::Slot& s = im.slots[i];
      if (s.done) continue;
      s.fiber = std::move(s.fiber).resume();
      if (s.done) --remaining;
    }
    if (remaining > 0) {
      // Every unfinished fiber waits for a pending tensor.
      running_ = false;
      ++flushes_;
      try {
        flush();
      } catch (...) {
        im.slots.clear();  // unwinds the suspended fibers
        throw;
      }
      running_ = true;
    }
  }
  running_ = false;
  for (auto& s : im.slots)
    if (s.error) {
      std::exception_ptr e = s.error;
      im.slots.clear();
      std::rethrow_exception(e);
    }
  im.slots.clear();
}

void InstanceFibers::wait() {
  ACROBAT_ASSERT(running_, "InstanceFibers::wait outside a fiber");
  impl_->scheduler = std::move(impl_->scheduler).resume();
}

}  // namespace acrobat
