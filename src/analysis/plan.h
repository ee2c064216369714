// Everything the compiler decides about a module before it runs, in one place: what the passes after
// lowering found (higher-order specialisations, the reuse analysis and its clones, static blocks and
// their kernel plans, depth and phases, ownership of lazy tensors). The pipeline attaches it to the module; engines and
// `acrobat explain` read it.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/blocks.h"
#include "analysis/concurrency.h"
#include "analysis/depth.h"
#include "analysis/kernel_plan.h"
#include "analysis/ownership.h"
#include "analysis/ragged_plan.h"
#include "analysis/reuse.h"
#include "analysis/tail_calls.h"
#include "transforms/specialise.h"

namespace acrobat::analysis {

// Switches for the ablation study; all on by default.
struct AnalysisOptions {
  bool specialise = true;  // higher-order calls specialised
  bool reuse = true;       // parameter-reuse analysis (off: argument modes discovered per batch)
  bool clone = true;       // clones per calling context (off: disagreeing contexts are scatter)
  bool ghosts = true;
  bool phases = true;
  bool concurrent = true;  // independent calls of an instance run concurrently (concurrency.h)
  bool release = true;     // batch outputs released during the run (ownership.h)
  bool share = true;       // a node repeating a pending one is that one (runtime/graph.h, 1.)
};

struct Plan {
  AnalysisOptions options;
  std::vector<SpecialisationRecord> specialisations;
  ReuseInfo reuse;  // empty when options.reuse is off
  std::vector<StaticBlock> blocks;
  std::vector<KernelPlan> kernels;  // per block: how one batched call computes it (empty: ragged)
  std::vector<RaggedPlan> ragged;   // per block: how a ragged one is computed (empty: not ragged)
  std::vector<int> block_at_site;  // by IR site: the static block starting there, -1 for none
  // The block starting at `r`, or null.
  const StaticBlock* block_at(const ir::Rhs& r) const {
    int b = block_at_site[r.site];
    return b < 0 ? nullptr : &blocks[b];
  }
  DepthPlan depth;
  ConcurrencyPlan concurrency;  // empty when options.concurrent is off
  std::vector<uint8_t> tail_call;  // by IR site: a self call run as a jump (tail_calls.h)
  bool is_tail_call(const ir::Rhs& r) const { return tail_call[r.site] != 0; }
  // Where the host program hands references to lazy tensors over and gives them up; disabled when
  // options.release is off.
  OwnershipPlan ownership;
  // The names of the size variables (types.h), for messages about an instance's sizes.
  std::vector<std::string> size_names;
  // Whether the host program reads tensors (argmax, item): the engines then run each instance on a
  // fiber of its own (runtime/fibers.h).
  bool tensor_reads = false;
};

}  // namespace acrobat::analysis
