// The leaves of a reverse pass by address: the params' tensors and the input tensors asked for
// (InputLeaf), to send an adjoint that reaches their memory to their gradients.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "autodiff/gradients.h"
#include "runtime/params.h"

namespace acrobat {

// Where the tensors of the params and the input leaves live, to send an argument's adjoint to its
// gradient. Leaf k is param k for k below the params' count, input leaf k - count from there; the
// ranges do not overlap (InputLeaf).
class LeafRanges {
 public:
  LeafRanges(const ParamStore& params, std::span<const InputLeaf> inputs)
      : params_(static_cast<int>(params.params.size())) {
    for (size_t p = 0; p < params.params.size(); ++p) {
      const Tensor& t = params.params[p].tensor;
      ranges_.push_back({t.data.get(), t.data.get() + t.size(), static_cast<int>(p)});
    }
    for (size_t k = 0; k < inputs.size(); ++k)
      ranges_.push_back({inputs[k].begin, inputs[k].begin + inputs[k].size, params_ + static_cast<int>(k)});
    std::sort(ranges_.begin(), ranges_.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  }
  // The leaf whose memory holds `p` and the offset of `p` in it; {-1, 0} for none.
  std::pair<int, int64_t> find(const float* p) const {
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), p,
                               [](const float* x, const Range& r) { return x < r.begin; });
    if (it == ranges_.begin()) return {-1, 0};
    --it;
    if (p >= it->end) return {-1, 0};
    return {it->leaf, p - it->begin};
  }
  // The same for the params alone: inputs are per-instance data, never weights to share or pack.
  std::pair<int, int64_t> find_param(const float* p) const {
    const auto found = find(p);
    return found.first < params_ ? found : std::pair<int, int64_t>{-1, 0};
  }
  bool is_param(int leaf) const { return leaf < params_; }

 private:
  struct Range {
    const float* begin;
    const float* end;
    int leaf;
  };
  int params_;
  std::vector<Range> ranges_;
};

}  // namespace acrobat
