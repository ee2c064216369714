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
    size_t size = std::max({kChunkFloats, padded, reserve_});
    reserve_ = 0;
    void* p = std::aligned_alloc(64, size * sizeof(float));
    if (!p) throw std::bad_alloc();
    chunks_.push_back(Chunk{std::unique_ptr<float, Free>(static_cast<float*>(p)), size});
    used_ = 0;
  }
  float* out = chunks_[current_].data.get() + used_;
  used_ += padded;
  in_use_ += padded;
  peak_ = std::max(peak_, in_use_);
  high_ = std::max(high_, in_use_);
  return out;
}

void Arena::reset() {
  // A run whose allocations did not fit the chunks in place (one larger than the chunk it reached)
  // went on in fresh chunks, to be faulted in page by page; with sizes that change from run to run
  // (a training step's attention adjoints at each batch's lengths) that happened at every run, and
  // the chunks piled up. The next run gets one chunk for what the largest run held.
  if (chunks_.size() > 1) {
    chunks_.clear();
    reserve_ = high_;
  }
  current_ = 0;
  used_ = 0;
  in_use_ = 0;
}

size_t Arena::held_bytes() const {
  size_t floats = 0;
  for (const Chunk& c : chunks_) floats += c.size;
  return floats * sizeof(float);
}

}  // namespace acrobat
