#include "runtime/forward_record.h"

#include "support/diagnostics.h"

namespace acrobat {

std::vector<std::vector<int>> ForwardRecord::nodes_by_row() const {
  std::vector<std::vector<int>> members(num_batches());
  for (size_t b = 0; b < members.size(); ++b)
    members[b].assign(static_cast<size_t>(outputs_.batch_size(static_cast<int>(b))), -1);
  for (int32_t id = 0; id < *nodes_.count(); ++id) {
    const NodeStore::Node& n = nodes_[id];
    if (n.repeats >= 0) continue;
    ACROBAT_ASSERT(n.batch >= 0, "backward over a graph with pending nodes");
    members[n.batch][n.row] = id;
  }
  return members;
}

}  // namespace acrobat
