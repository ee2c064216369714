// Bump allocation of float buffers for one engine run: no allocation per operator, everything freed
// at once by reset(), and the chunks kept for the next run.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace acrobat {

class Arena {
 public:
  // `n` floats, 64-byte aligned, valid until reset().
  float* alloc(size_t n);
  // Forgets every allocation; keeps the memory for reuse.
  void reset();
  size_t bytes_in_use() const { return in_use_ * sizeof(float); }
  size_t peak_bytes() const { return peak_ * sizeof(float); }
  void reset_peak() { peak_ = in_use_; }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  struct Chunk {
    std::unique_ptr<float, Free> data;
    size_t size = 0;  // floats
  };
  std::vector<Chunk> chunks_;
  size_t current_ = 0;  // chunk being filled
  size_t used_ = 0;     // floats used in the current chunk
  size_t in_use_ = 0;   // floats handed out since reset, including alignment padding
  size_t peak_ = 0;
};

}  // namespace acrobat
