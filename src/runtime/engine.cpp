#include "runtime/engine.h"

#include <algorithm>

#include "lang/frontend.h"

namespace acrobat {

void RunStats::add(const RunStats& o) {
  instances += o.instances;
  kernel_calls += o.kernel_calls;
  tensor_ops += o.tensor_ops;
  flops += o.flops;
  nodes += o.nodes;
  batches += o.batches;
  peak_bytes = std::max(peak_bytes, o.peak_bytes);
  for (const auto& [name, c] : o.blocks) {
    blocks[name].nodes += c.nodes;
    blocks[name].batches += c.batches;
  }
  wall_seconds += o.wall_seconds;
  host_seconds += o.host_seconds;
  schedule_seconds += o.schedule_seconds;
  kernel_seconds += o.kernel_seconds;
}

int entry_function(const ir::Module& module, const std::string& entry) {
  // The checks with positions live with the syntax tree (check_entry); a module built without one
  // still gets them here, without a position.
  if (module.source) check_entry(*module.source, entry);
  int index = module.find_function(entry);
  if (index < 0) throw UserError("the model has no function '" + entry + "' to run");
  const auto& f = module.functions[index];
  if (f.params.size() != 1)
    throw UserError(f.span.begin, "entry function '" + entry +
                                      "' must take exactly one parameter (the input instance), "
                                      "found " + std::to_string(f.params.size()));
  return index;
}

RunResult Engine::run_batches(const std::vector<Value>& inputs, size_t batch,
                              const std::string& entry) {
  RunResult result;
  size_t step = batch == 0 ? std::max<size_t>(inputs.size(), 1) : batch;
  for (size_t begin = 0; begin < inputs.size(); begin += step) {
    std::vector<Value> chunk(inputs.begin() + begin,
                             inputs.begin() + std::min(inputs.size(), begin + step));
    RunResult part = run(chunk, entry, begin);
    result.stats.add(part.stats);
    for (auto& v : part.outputs) result.outputs.push_back(std::move(v));
  }
  return result;
}

}  // namespace acrobat
