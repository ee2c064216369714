#include "runtime/arena.h"

#include <algorithm>
#include <cstdlib>
#include <new>

namespace acrobat {

namespace {
constexpr size_t kAlignFloats = 16;             // 64 bytes
constexpr size_t kChunkFloats = size_t{1} << 22;  // 16 MiB
}  // namespace

void Arena::Free::operator()(float* p) const { std::free(p); }

float* Arena::alloc(size_t n) {
  size_t padded = (std::max<size_t>(n, 1) + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  while (current_ < chunks_.size() && used_ + padded > chunks_[current_].size) {
    ++current_;
    used_ = 0;
  }
  if (current_ == chunks_.size()) {
    size_t size = std::max(kChunkFloats, padded);
    void* p = std::aligned_alloc(64, size * sizeof(float));
    if (!p) throw std::bad_alloc();
    chunks_.push_back(Chunk{std::unique_ptr<float, Free>(static_cast<float*>(p)), size});
    used_ = 0;
  }
  float* out = chunks_[current_].data.get() + used_;
  used_ += padded;
  in_use_ += padded;
  peak_ = std::max(peak_, in_use_);
  return out;
}

void Arena::reset() {
  current_ = 0;
  used_ = 0;
  in_use_ = 0;
}

}  // namespace acrobat
