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
  // Forgets every allocation; keeps the memory for reuse: as one chunk as large as the most any run
  // used, when the last run spread over several.
  void reset();
  size_t bytes_in_use() const { return in_use_ * sizeof(float); }
  size_t peak_bytes() const { return peak_ * sizeof(float); }
  // The memory held (for tests).
  size_t chunks() const { return chunks_.size(); }
  size_t held_bytes() const;
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
  size_t high_ = 0;     // the most floats in use at once since the arena was made
  size_t reserve_ = 0;  // the size of the next chunk made, after a reset that freed the chunks
};

}  // namespace acrobat
