#include "runtime/interpreted_blocks.h"

#include <cstring>

#include "runtime/batched_kernels.h"
#include "runtime/fused_loops.h"

namespace acrobat {

void InterpretedBlocks::run(const BatchCall& c) {
  const analysis::StaticBlock& s = *c.block;
  const analysis::KernelPlan& k = plan_.kernels[s.id];
  const int64_t B = c.B;
  const size_t n = s.ops.size();
  // Buffers where the plan puts them, then every operator's values located in them.
  std::vector<float*> buffers(n, nullptr);
  for (size_t i = 0; i < n; ++i)
    if (k.owner[i] == static_cast<int>(i) && k.stored[i])
      buffers[i] = k.buffer_slot[i] >= 0 ? c.outputs[k.buffer_slot[i]]
                   : c.outputs[i]            ? c.outputs[i]  // kept for the backward pass
                                             : c.scratch->alloc(static_cast<size_t>(B * s.ops[i].size));
  std::vector<aot::Operand> values(n, aot::Operand{nullptr, 0, nullptr, nullptr});
  for (size_t i = 0; i < n; ++i) {
    const analysis::ValueLoc& l = k.loc[i];
    if (buffers[l.index]) values[i] = aot::Operand{buffers[l.index] + l.offset, l.stride, nullptr, nullptr};
  }
  std::vector<aot::Operand> in;
  for (const analysis::KernelStep& step : k.steps) {
    const int i = step.begin;
    const analysis::BlockOp& op = s.ops[i];
    float* out = const_cast<float*>(values[i].data);
    switch (step.kind) {
      case analysis::StepKind::Fused:
        run_fused_step(s, k, step, B, c.args, values.data(), *c.scratch);
        break;
      case analysis::StepKind::CopyView:
        // The graph reads every escaping output as contiguous [B, size] rows.
        for (int64_t b = 0; b < B; ++b)
          std::memcpy(c.outputs[i] + b * op.size, values[i].data + b * values[i].stride,
                      op.size * sizeof(float));
        break;
      case analysis::StepKind::Gemm:
      case analysis::StepKind::Library: {
        // A concat only a matmul reads, in pieces: computed only when the run keeps its value.
        if (k.only_when_kept[i] && !c.outputs[i]) break;
        in.clear();
        const int pieces = k.concat_pieces[i];
        auto operand = [&](const analysis::BlockOperand& o) { return o.local ? values[o.index] : c.args[o.index]; };
        if (pieces >= 0) {
          in.push_back(operand(op.operands[0]));
          for (const analysis::BlockOperand& o : s.ops[pieces].operands) in.push_back(operand(o));
        } else {
          for (const analysis::BlockOperand& o : op.operands) in.push_back(operand(o));
        }
        if (pieces < 0 && step.add_bias && c.args[op.bias_arg].data && c.args[op.bias_arg].stride == 0 &&
            step.kind == analysis::StepKind::Gemm && in[1].data && in[1].stride == 0) {
          // out = the bias broadcast to every row, then += a @ w.
          const int64_t cols = op.shape.back(), rows = B * (op.size / cols);
          for (int64_t r = 0; r < rows; ++r)
            std::memcpy(out + r * cols, c.args[op.bias_arg].data, cols * sizeof(float));
          const analysis::BlockOperand& left = op.operands[0];
          BatchOperand a = library_operand(
              in[0], left.local ? s.ops[left.index].shape : s.args[left.index].shape, B, *c.scratch,
              OperandRead::GemmPanel);
          BatchOperand w = library_operand(in[1], s.args[op.operands[1].index].shape, B, *c.scratch);
          batched_matmul(B, a, w, op.shape, out, true);
          break;
        }
        // A grouped matmul launches one GEMM per matrix: the extra ones count as kernel calls.
        *c.kernel_calls +=
            run_library_op(s, static_cast<size_t>(i), B, in.data(), out, *c.scratch, packed_, pieces) - 1;
        if (step.add_bias) {
          const int64_t cols = op.shape.back(), rows = op.size / cols;
          for (int64_t b = 0; b < B; ++b) {
            const float* bias = operand_row(c.args[op.bias_arg], b);
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t j = 0; j < cols; ++j) out[(b * rows + r) * cols + j] += bias[j];
          }
        }
        break;
      }
    }
  }
  *c.kernel_calls += static_cast<int64_t>(k.steps.size());
}

}  // namespace acrobat
