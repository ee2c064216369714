// The interface every engine implements: run a model's entry function on a batch of instances.
// The reference engine runs them one by one; batched engines must produce the same outputs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "runtime/params.h"
#include "runtime/value.h"

namespace acrobat {

struct RunStats {
  int64_t instances = 0;
  int64_t kernel_calls = 0;   // kernel launches (batched engines: one per step of a block's kernel
                              // plan per call, plus each extra GEMM of a grouped matmul)
  int64_t tensor_ops = 0;     // tensor operators the host program asked for, over all instances
  int64_t flops = 0;          // useful FLOPs, from the operator registry
  int64_t nodes = 0;          // dataflow-graph nodes recorded (batched engines)
  int64_t shared_nodes = 0;   // of them, repeats of a pending node, not run (runtime/graph.h)
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
                                  // one dX GEMM over the batch's rows, dW deferred (graph_backward.cpp)
  // Ragged blocks: the matmuls by parameter weights (the linear layers, one GEMM over every
  // instance's rows, with their gathers and fused addends), their FLOPs and time.
  int64_t weight_gemm_flops = 0;
  double weight_gemm_seconds = 0;

  double instances_per_second() const { return wall_seconds > 0 ? instances / wall_seconds : 0; }
  double useful_gflops() const { return wall_seconds > 0 ? flops / wall_seconds * 1e-9 : 0; }
  double mean_batch_size() const { return batches > 0 ? double(nodes - shared_nodes) / double(batches) : 0; }
  double weight_gemm_gflops() const {
    return weight_gemm_seconds > 0 ? weight_gemm_flops / weight_gemm_seconds * 1e-9 : 0;
  }
  double overhead_fraction() const {
    return wall_seconds > 0 ? (host_seconds + schedule_seconds) / wall_seconds : 0;
  }
  // Batched engines, per block (a segment of tensor operators, named by where it starts in the
  // model): nodes recorded and batches run.
  struct BlockCounts {
    int64_t nodes = 0;
    int64_t batches = 0;
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
  void fold_into(RunStats& s) {
    s.kernel_calls += kernel_calls;
    s.flops += flops;
    s.weight_gemm_flops += weight_gemm_flops;
    s.weight_gemm_seconds += weight_gemm_seconds;
    *this = KernelCounters{};
  }
};

struct RunResult {
  std::vector<Value> outputs;  // one per instance, in input order
  RunStats stats;
};

// Per param, per chunk of kGradChunk elements of its gradient: whether the gradient computation
// wrote there (1); a chunk it did not write kept the values it was given (zero, for zeroed
// gradients). Empty when the engine does not say (anything may have been written).
inline constexpr int64_t kGradChunk = 256;
using WrittenChunks = std::vector<std::vector<uint8_t>>;

// A gradient run: each instance's loss (the entry's output, one number) and, for every param of the
// module in its order, d(sum of the instances' losses)/d(param) with the param's full shape (an
// indexed param: all its tensors, [count, ...]), and where it wrote them (`written`, WrittenChunks).
// Decisions taken from tensor values (argmax, item) are those of the forward run and are not
// differentiated.
struct GradResult {
  std::vector<Value> outputs;
  std::vector<Tensor> grads;
  RunStats stats;
  WrittenChunks written;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const char* name() const = 0;
  // Runs the function `entry` on each input. A user error in any instance (an index out of range,
  // recursion too deep, ...) throws UserError naming the instance (numbered from `first_instance`,
  // for a batch cut from a larger input); no partial result is returned.
  virtual RunResult run(const std::vector<Value>& inputs, const std::string& entry = "main",
                        size_t first_instance = 0) = 0;
  // Runs `inputs` in consecutive batches of `batch` instances (0: one batch of all); instance
  // numbers in errors count from the start of `inputs`. By default one run() per batch; the
  // batched engines run consecutive batches side by side where they can (graph_engine.h).
  virtual RunResult run_batches(const std::vector<Value>& inputs, size_t batch,
                                const std::string& entry = "main");
  // Runs the loss function `entry` (loss_function) on each input as run() does and differentiates
  // the sum of the instances' losses with respect to every param (GradResult). `zeroed`: zero
  // tensors the gradient may be added into (zero_grads), e.g. those of a training loop's previous
  // step, which its optimiser left zero.
  virtual GradResult gradients(const std::vector<Value>& inputs, const std::string& entry = "loss",
                               size_t first_instance = 0, std::vector<Tensor> zeroed = {}) = 0;
};


// Checks that `entry` exists and takes exactly one parameter; returns its index.
int entry_function(const ir::Module& module, const std::string& entry);
// The same for an entry whose output is differentiated: it must also return one number (f32[],
// f32[1], f32[1, 1], ...); a positioned UserError otherwise.
int loss_function(const ir::Module& module, const std::string& entry);
// Zero gradients, one per param of `params` with its full shape: the tensors of `zeroed` (which must
// be zero) where one has the param's shape and nothing else holds its data, new zero ones
// elsewhere. A training loop passes its previous step's, which spares it a page fault per 4 KiB of
// fresh memory and a pass over every gradient per step.
std::vector<Tensor> zero_grads(const ParamStore& params, std::vector<Tensor> zeroed = {});

// The arguments of entry function `func` for one instance: the instance, then the values of the
// function's size variables (ir::Function::size_params), read from the instance's tensor shapes.
// Shapes that do not fit the parameter's type, or give one size two values, are a UserError.
std::vector<Value> entry_arguments(const ir::Module& module, int func, const Value& input);

}  // namespace acrobat
