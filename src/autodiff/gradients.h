// What a gradient computation writes besides the params' gradients: where in them it wrote, and the
// gradients of the input tensors it was asked for.
#pragma once

#include <cstdint>
#include <vector>

namespace acrobat {

// Per param, per chunk of kGradChunk elements of its gradient: whether the gradient computation
// wrote there (1); a chunk it did not write kept the values it was given (zero, for zeroed
// gradients). Empty when the engine does not say (anything may have been written).
inline constexpr int64_t kGradChunk = 256;
using WrittenChunks = std::vector<std::vector<uint8_t>>;

// Memory of the instances' input tensors that a gradient is taken with respect to, as the params
// are: every adjoint that reaches a float of [begin, begin + size) is added to `grad` at the same
// offset. Input tensors reach a run by address (a node argument, a value of the host program), so
// an address is all a leaf needs; leaves do not overlap each other or a param.
struct InputLeaf {
  const float* begin = nullptr;
  int64_t size = 0;
  float* grad = nullptr;  // `size` floats, zero to start with
};

}  // namespace acrobat
