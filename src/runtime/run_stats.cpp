#include "runtime/run_stats.h"

#include <algorithm>

namespace acrobat {

void RunStats::add(const RunStats& o) {
  instances += o.instances;
  kernel_calls += o.kernel_calls;
  tensor_ops += o.tensor_ops;
  flops += o.flops;
  nodes += o.nodes;
  shared_nodes += o.shared_nodes;
  dropped_nodes += o.dropped_nodes;
  batches += o.batches;
  peak_bytes = std::max(peak_bytes, o.peak_bytes);
  for (const auto& [name, c] : o.blocks) {
    blocks[name].nodes += c.nodes;
    blocks[name].batches += c.batches;
    blocks[name].seconds += c.seconds;
  }
  wall_seconds += o.wall_seconds;
  host_seconds += o.host_seconds;
  schedule_seconds += o.schedule_seconds;
  kernel_seconds += o.kernel_seconds;
  weight_gemm_flops += o.weight_gemm_flops;
  weight_gemm_seconds += o.weight_gemm_seconds;
  appends_in_place += o.appends_in_place;
  append_copied_floats += o.append_copied_floats;
}

}  // namespace acrobat
