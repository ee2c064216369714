// Float buffers for batch outputs (runtime/graph.h), released and reused while a run goes on: a
// released buffer waits on a free list of its size class and serves the next request of that
// class, or of a class at most half its size, in this run or a later one (early exits make the
// same operator's batches smaller as a run goes on, and a fresh buffer from the system is paid
// again in page faults). Classes are multiples of 64 bytes up to 4 KiB, then eight per
// power of two (at most 12.5% rounding). The memory the pool holds never exceeds twice the most it
// ever had in use: when a request finds no cached buffer, buffers of other classes are given back
// to the system until the new one fits under that mark.
#pragma once

#include <cstddef>
#include <map>
#include <unordered_map>
#include <vector>

namespace acrobat {

class BufferPool {
 public:
  BufferPool() = default;
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;
  ~BufferPool();

  // `n` floats, 64-byte aligned, until release(p, n).
  float* alloc(size_t n);
  void release(float* p, size_t n);

  size_t bytes_in_use() const { return in_use_ * sizeof(float); }
  size_t peak_bytes() const { return peak_ * sizeof(float); }  // since reset_peak()
  void reset_peak() { peak_ = in_use_; }
  size_t bytes_held() const { return (in_use_ + cached_) * sizeof(float); }

  // The floats a request of `n` occupies.
  static size_t size_class(size_t n);

 private:
  std::map<size_t, std::vector<float*>> free_;  // by class
  std::unordered_map<float*, size_t> capacity_;   // the class of each buffer in use
  size_t in_use_ = 0, cached_ = 0;  // floats
  size_t peak_ = 0;
  size_t most_ = 0;  // the most ever in use
};

}  // namespace acrobat
