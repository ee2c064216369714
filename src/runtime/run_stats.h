// What a run counts and times: the statistics every engine reports (RunStats), and what one thread
// adds up while it runs a batch's kernels (KernelCounters).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace acrobat {

struct RunStats {
  int64_t instances = 0;
  int64_t kernel_calls = 0;   // kernel launches (batched engines: one per step of a block's kernel
                              // plan per call, plus each extra GEMM of a grouped matmul)
  int64_t tensor_ops = 0;     // tensor operators the host program asked for, over all instances
  int64_t flops = 0;          // useful FLOPs, from the operator registry
  int64_t nodes = 0;          // dataflow-graph nodes recorded (batched engines)
  int64_t shared_nodes = 0;   // of them, repeats of a pending node, not run (runtime/graph.h)
  int64_t dropped_nodes = 0;  // of them, pending when their instance stopped and not run
                              // (open runs: Graph::drop_instance)
  int64_t batches = 0;        // node batches executed: each is one (depth, segment) bucket
  int64_t peak_bytes = 0;     // batched engines: peak memory of the batch outputs in use plus
                              // the kernels' scratch (runtime/graph.h)
  double wall_seconds = 0;
  double host_seconds = 0;      // host program and graph construction
  double schedule_seconds = 0;  // forming batches
  double kernel_seconds = 0;    // executing batches, gathers included
  double backward_seconds = 0;  // gradients: the reverse pass (after the forward run)
  int64_t compiled_adjoints = 0;  // gradients: fused loops the reverse pass ran as compiled adjoints
  int64_t weight_products = 0;    // gradients: products by a param's matrix the reverse pass ran as
                                  // one dX GEMM over the batch's rows, dW deferred (autodiff/weight_products.h)
  // Ragged blocks: the matmuls by parameter weights (the linear layers, one GEMM over every
  // instance's rows, with their gathers and fused addends), their FLOPs and time.
  int64_t weight_gemm_flops = 0;
  double weight_gemm_seconds = 0;
  // Appends (analysis/ragged_plan.h, 6.): instance values extended in place in growing storage,
  // and the floats appends copied (the rows a value gained, and its earlier rows where it moved to
  // new storage or was copied whole).
  int64_t appends_in_place = 0;
  int64_t append_copied_floats = 0;

  double instances_per_second() const { return wall_seconds > 0 ? instances / wall_seconds : 0; }
  double useful_gflops() const { return wall_seconds > 0 ? flops / wall_seconds * 1e-9 : 0; }
  double mean_batch_size() const {
    return batches > 0 ? double(nodes - shared_nodes - dropped_nodes) / double(batches) : 0;
  }
  double weight_gemm_gflops() const {
    return weight_gemm_seconds > 0 ? weight_gemm_flops / weight_gemm_seconds * 1e-9 : 0;
  }
  double overhead_fraction() const {
    return wall_seconds > 0 ? (host_seconds + schedule_seconds) / wall_seconds : 0;
  }
  // Batched engines, per block (a segment of tensor operators, named by where it starts in the
  // model): nodes recorded, batches run, and the time they took.
  struct BlockCounts {
    int64_t nodes = 0;
    int64_t batches = 0;
    double seconds = 0;
  };
  std::map<std::string, BlockCounts> blocks;

  // Sums counters and times of consecutive runs (peak memory: the largest).
  void add(const RunStats& other);
};

// What one thread adds up while it runs a batch's kernels; folded into RunStats after the batch.
struct KernelCounters {
  int64_t kernel_calls = 0;
  int64_t flops = 0;  // ragged blocks count their FLOPs as they run (others from the graph)
  int64_t weight_gemm_flops = 0;
  double weight_gemm_seconds = 0;
  int64_t appends_in_place = 0;
  int64_t append_copied_floats = 0;
  void fold_into(RunStats& s) {
    s.kernel_calls += kernel_calls;
    s.flops += flops;
    s.weight_gemm_flops += weight_gemm_flops;
    s.weight_gemm_seconds += weight_gemm_seconds;
    s.appends_in_place += appends_in_place;
    s.append_copied_floats += append_copied_floats;
    *this = KernelCounters{};
  }
};

}  // namespace acrobat
