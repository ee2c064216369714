// The interpreter's fused elementwise loops: one Fused step of a kernel plan (analysis/kernel_plan.h)
// evaluated without generated code. Each instance's elements go through in tiles that stay in L1;
// per tile, each operator of the group runs over the whole tile (one indirect call per operator and
// tile, not per element), with the SIMD expression ops.def gives it, the same expression the
// generated kernels inline. Values only the group reads stay in tiles; stored ones are written
// where the plan puts them.
#pragma once

#include <cstdint>

#include "acrobat/aot.h"
#include "analysis/kernel_plan.h"
#include "runtime/arena.h"

namespace acrobat {

// The fused SIMD expression of elementwise operator `op` (ops.def) over a tile: out[0, n) =
// f(a[0, n), b[0, n)) (b null for a unary operator). Null for other operators.
using TileFn = void (*)(int64_t n, const float* a, const float* b, float* out);
TileFn fused_tile_fn(OpId op);

// Runs `step` (a Fused step of plan `k` of block `s`) on instances [0, B). `values` gives each
// operator's location (instance b at data + b * stride; the plan's ValueLoc resolved to memory),
// `args` each block argument.
void run_fused_step(const analysis::StaticBlock& s, const analysis::KernelPlan& k,
                    const analysis::KernelStep& step, int64_t B, const aot::Operand* args,
                    const aot::Operand* values, Arena& scratch);

}  // namespace acrobat
