// The interface every engine implements: run a model's entry function on a batch of instances.
// The reference engine runs them one by one; batched engines must produce the same outputs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "runtime/params.h"
#include "runtime/value.h"

namespace acrobat {

struct RunStats {
  int64_t instances = 0;
  int64_t kernel_calls = 0;   // tensor operator executions (batched engines: batched launches)
  int64_t tensor_ops = 0;     // tensor operators recorded by the host program, over all instances
  int64_t flops = 0;          // useful FLOPs, from the operator registry
  double wall_seconds = 0;
  double kernel_seconds = 0;  // time inside kernels (0 where not measured)

  double instances_per_second() const { return wall_seconds > 0 ? instances / wall_seconds : 0; }
  double useful_gflops() const { return wall_seconds > 0 ? flops / wall_seconds * 1e-9 : 0; }
};

struct RunResult {
  std::vector<Value> outputs;  // one per instance, in input order
  RunStats stats;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const char* name() const = 0;
  // Runs the function `entry` on each input. A user error in any instance (an index out of range,
  // recursion too deep, ...) throws UserError naming the instance; no partial result is returned.
  virtual RunResult run(const std::vector<Value>& inputs, const std::string& entry = "main") = 0;
};

// Checks that `entry` exists and takes exactly one parameter; returns its index.
int entry_function(const ir::Module& module, const std::string& entry);

}  // namespace acrobat
