// Where a gradient computation wrote: the chunks of each param's gradient it added to.
#pragma once

#include <cstdint>
#include <vector>

namespace acrobat {

// Per param, per chunk of kGradChunk elements of its gradient: whether the gradient computation
// wrote there (1); a chunk it did not write kept the values it was given (zero, for zeroed
// gradients). Empty when the engine does not say (anything may have been written).
inline constexpr int64_t kGradChunk = 256;
using WrittenChunks = std::vector<std::vector<uint8_t>>;

}  // namespace acrobat
