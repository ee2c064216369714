#include "runtime/buffer_pool.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <new>

#include "support/diagnostics.h"

namespace acrobat {

namespace {
constexpr size_t kAlignFloats = 16;  // 64 bytes
constexpr size_t kSmall = 1024;      // floats: up to here, classes are multiples of 64 bytes
}  // namespace

size_t BufferPool::size_class(size_t n) {
  n = std::max<size_t>(n, 1);
  if (n <= kSmall) return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  // Eight classes between consecutive powers of two.
  const size_t step = (size_t{1} << (std::bit_width(n - 1) - 1)) / 8;
  return (n + step - 1) / step * step;
}

float* BufferPool::alloc(size_t n) {
  size_t c = size_class(n);
  float* p = nullptr;
  // The smallest cached buffer that holds n, if it is at most twice the class: a buffer the system
  // hands out afresh is page-faulted in again on first touch, which costs more than the memory.
  auto it = free_.lower_bound(c);
  while (it != free_.end() && it->second.empty() && it->first <= 2 * c) ++it;
  if (it != free_.end() && !it->second.empty() && it->first <= 2 * c) {
    c = it->first;
    p = it->second.back();
    it->second.pop_back();
    cached_ -= c;
  } else {
    // Give cached buffers of other classes back until the pool, with this one, holds no more than
    // twice what it ever had in use. (At once what it had in use churns: a run whose batches
    // change size frees and allocates afresh at every miss, and page faults on BERxiT base then
    // took half the run.)
    const size_t limit = std::max(2 * most_, in_use_ + c);
    for (auto f = free_.end(); in_use_ + c + cached_ > limit && f != free_.begin();) {
      --f;
      while (!f->second.empty() && in_use_ + c + cached_ > limit) {
        std::free(f->second.back());
        f->second.pop_back();
        cached_ -= f->first;
      }
    }
    p = static_cast<float*>(std::aligned_alloc(64, c * sizeof(float)));
    if (!p) throw std::bad_alloc();
  }
  in_use_ += c;
  peak_ = std::max(peak_, in_use_);
  most_ = std::max(most_, in_use_);
  capacity_[p] = c;
  return p;
}

void BufferPool::release(float* p, size_t n) {
  auto cap = capacity_.find(p);
  ACROBAT_ASSERT(cap != capacity_.end() && cap->second >= size_class(n),
                 "BufferPool::release of a buffer it did not hand out for that size");
  const size_t c = cap->second;
  capacity_.erase(cap);
  free_[c].push_back(p);
  in_use_ -= c;
  cached_ += c;
}

BufferPool::~BufferPool() {
  for (auto& [c, ps] : free_)
    for (float* p : ps) std::free(p);
}

}  // namespace acrobat
