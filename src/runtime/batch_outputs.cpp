#include "runtime/batch_outputs.h"

#include <algorithm>

namespace acrobat {

void BatchOutputs::clear() {
  outputs_.clear();
  sizes_.clear();
  blocks_.clear();
  offsets_.clear();
}

int BatchOutputs::add(int block, int64_t B) {
  const int batch = static_cast<int>(outputs_.size());
  outputs_.emplace_back(plan_.blocks[block].ops.size(), nullptr);
  sizes_.push_back(B);
  blocks_.push_back(block);
  offsets_.emplace_back();
  return batch;
}

size_t BatchOutputs::output_floats(int batch, int slot) const {
  const std::vector<int64_t>& offsets = offsets_[batch];
  const int64_t B = sizes_[batch];
  if (!offsets.empty()) return static_cast<size_t>(std::max<int64_t>(1, offsets[slot * (B + 1) + B]));
  return static_cast<size_t>(B * plan_.blocks[blocks_[batch]].ops[slot].size);
}

}  // namespace acrobat
