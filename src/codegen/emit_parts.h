// The parts of the code generator (emit_cpp.h), a file each by what they emit, and what they share;
// emit_cpp.cpp puts their text together in one translation unit.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/plan.h"
#include "codegen/writer.h"
#include "ir/ir.h"

namespace acrobat::codegen {

// What every part reads, and where it writes.
struct Emission {
  const ir::Module& module;
  const analysis::Plan& plan;
  Writer& out;
};

// The host program (emit_host.cpp): a declaration of each function and closure dispatcher, then
// one C++ function per IR function, the dispatchers and `entry`.
void emit_host_program(const Emission& e);

// The batched kernel `kernel<id>` of static block `s` (emit_kernels.cpp).
void emit_kernel(const Emission& e, const analysis::StaticBlock& s);

// The adjoint `adjoint<id>_<step>` of the fused loop of step `step` of block `s`
// (emit_adjoints.cpp); false, and nothing written, when the loop has none.
bool emit_fused_adjoint(Writer& w, const analysis::StaticBlock& s, const analysis::KernelPlan& kp,
                        size_t step);

// ---- shared by the kernels and the adjoints ----

inline const std::vector<int64_t>& operand_shape(const analysis::StaticBlock& s,
                                                const analysis::BlockOperand& o) {
  return o.local ? s.ops[o.index].shape : s.args[o.index].shape;
}

// A SIMD expression of ops.def with its operands `a`, `b` replaced by `in` and, in an adjoint
// expression, the value `y` and its adjoint `g` by `y` and `g` (emit_kernels.cpp).
std::string simd_expression(const std::string& simd, const std::vector<std::string>& in,
                            const std::string& y = "y", const std::string& g = "g");

// The loop over an instance's `size` elements a register at a time: `body(false)` on whole
// registers, then `body(true)` on the partial last one (when `size` may leave one).
template <class Body>
void register_loop(Writer& w, int64_t size, Body&& body) {
  w.line("int64_t j = 0;");
  {
    auto whole = w.block(fmt::format("for (; j + simd::kLanes <= {}; j += simd::kLanes) {{", size));
    body(false);
  }
  if (size % analysis::kMaxLanes != 0) {
    auto tail = w.block(fmt::format("if (j < {}) {{", size));
    body(true);
  }
}

}  // namespace acrobat::codegen
