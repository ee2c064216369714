// Runs a function on a thread with a large stack. The interpreters recurse on the machine stack
// once per call of the model (a tree's depth, a list's length), so they run where that recursion
// fits: the memory is reserved, not committed, until it is used.
#pragma once

#include <cstddef>
#include <functional>

namespace acrobat {

inline constexpr size_t kInterpreterStackBytes = size_t{512} << 20;

// Calls `fn` on a new thread with a stack of `bytes` and waits for it; an exception thrown by `fn`
// is rethrown in the caller.
void run_with_stack(size_t bytes, const std::function<void()>& fn);

}  // namespace acrobat
