#include "analysis/ragged_plan.h"

#include <fmt/format.h>

#include "ir/ops.h"

namespace acrobat::analysis {

namespace {

const std::vector<int64_t>& operand_shape(const StaticBlock& s, const BlockOperand& o) {
  return o.local ? s.ops[o.index].shape : s.args[o.index].shape;
}

// Whether operand `o` is read as a transposed view (so that a column slice or heads of it, which
// need row-major rows, cannot be views too).
bool transposed(const StaticBlock& s, const std::vector<RaggedOpPlan>& ops, const BlockOperand& o) {
  if (!o.local) return false;
  const RaggedOpPlan& p = ops[o.index];
  if (p.view == RaggedView::Transpose) return true;
  if (p.view == RaggedView::None) return false;
  return transposed(s, ops, s.ops[o.index].operands[0]);
}

RaggedView view_of(const StaticBlock& s, const std::vector<RaggedOpPlan>& ops, const BlockOp& op) {
  const OpId id = op.rhs->op;
  if (id == OpId::Transpose) return RaggedView::Transpose;
  if (id != OpId::Slice && id != OpId::Heads) return RaggedView::None;
  const auto& in = operand_shape(s, op.operands[0]);
  if (in.size() != 2 || transposed(s, ops, op.operands[0])) return RaggedView::None;
  if (id == OpId::Heads) return RaggedView::Heads;
  return normalize_axis(op.rhs->attrs.ints[2], in.size()) == 1 ? RaggedView::Columns : RaggedView::None;
}

RaggedStep step_of(const StaticBlock& s, const BlockOp& op) {
  if (op.fused) return RaggedStep::FusedBias;
  switch (op_info(op.rhs->op).op_class) {
    case OpClass::Gemm: {
      // Weights: a parameter-like right operand of one fixed shape (per instance, its rows and
      // columns differ otherwise).
      const BlockOperand& w = op.operands[1];
      const auto& ws = operand_shape(s, w);
      if (w.local || ws.size() != 2 || is_ragged(ws)) return RaggedStep::GemmPerInstance;
      const BlockArg& a = s.args[w.index];
      return a.known && a.mode == ArgMode::Reuse ? RaggedStep::GemmShared : RaggedStep::GemmIndexed;
    }
    case OpClass::Elementwise: return RaggedStep::Elementwise;
    case OpClass::RowWise: return RaggedStep::RowWise;
    default: return RaggedStep::PerInstance;
  }
}

const char* step_name(RaggedStep s) {
  switch (s) {
    case RaggedStep::View: return "view";
    case RaggedStep::GemmShared: return "gemm-shared";
    case RaggedStep::GemmIndexed: return "gemm-indexed";
    case RaggedStep::GemmPerInstance: return "gemm-per-instance";
    case RaggedStep::Elementwise: return "elementwise";
    case RaggedStep::RowWise: return "row-wise";
    case RaggedStep::PerInstance: return "per-instance";
    case RaggedStep::FusedBias: return "fused-bias";
  }
  return "?";
}

const char* view_name(RaggedView v) {
  switch (v) {
    case RaggedView::None: return "";
    case RaggedView::Columns: return " (columns)";
    case RaggedView::Heads: return " (heads)";
    case RaggedView::Transpose: return " (transposed)";
  }
  return "";
}

}  // namespace

RaggedPlan plan_ragged(const StaticBlock& s) {
  RaggedPlan p;
  if (!s.ragged()) return p;
  p.ops.resize(s.ops.size());
  for (size_t k = 0; k < s.ops.size(); ++k) {
    const BlockOp& op = s.ops[k];
    RaggedOpPlan& o = p.ops[k];
    o.view = view_of(s, p.ops, op);
    o.step = o.view != RaggedView::None ? RaggedStep::View : step_of(s, op);
    if (op.rhs->op != OpId::Slice) continue;
    const auto& in = operand_shape(s, op.operands[0]);
    const OpAttrs& a = op.rhs->attrs;
    const int64_t n = in[static_cast<size_t>(normalize_axis(a.ints[2], in.size()))];
    if (a.is_size(1)) {
      if (a.ints[1] != n) p.checks.push_back(SizeCheck{static_cast<int>(k), a.ints[1], n});
    } else if (is_size_var(n)) {
      p.checks.push_back(SizeCheck{static_cast<int>(k), a.ints[1], n});
    }
  }
  return p;
}

std::string ragged_plan_str(const StaticBlock& s, const RaggedPlan& p) {
  std::string out;
  for (size_t k = 0; k < p.ops.size(); ++k)
    out += fmt::format("  op{} {}: {}{}{}\n", k, op_info(s.ops[k].rhs->op).name, step_name(p.ops[k].step),
                       view_name(p.ops[k].view), s.ops[k].escapes ? ", escapes" : "");
  for (const SizeCheck& c : p.checks)
    out += fmt::format("  check per instance: {} <= {} (op{})\n", dim_str(c.small), dim_str(c.large), c.op);
  return out;
}

}  // namespace acrobat::analysis
