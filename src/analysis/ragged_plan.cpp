#include "analysis/ragged_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>

#include "analysis/fused_runs.h"
#include "ops/ops.h"

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
  if (op.rhs->attrs.is_size(0)) return RaggedView::None;  // its begin differs per instance
  return normalize_axis(op.rhs->attrs.ints[2], in.size()) == 1 ? RaggedView::Columns : RaggedView::None;
}

RaggedStep step_of(const StaticBlock& s, const BlockOp& op) {
  switch (op_info(op.rhs->op).op_class) {
    case OpClass::Gemm: {
      // Weights: a right operand of one fixed shape that is no value of the block.
      const BlockOperand& w = op.operands[1];
      const auto& ws = operand_shape(s, w);
      if (w.local || ws.size() != 2 || is_ragged(ws)) return RaggedStep::GemmPerInstance;
      const BlockArg& a = s.args[w.index];
      return a.known && a.mode == ArgMode::Reuse ? RaggedStep::GemmShared : RaggedStep::GemmIndexed;
    }
    case OpClass::Elementwise: return RaggedStep::Elementwise;
    case OpClass::RowWise: return RaggedStep::RowWise;
    default: break;
  }
  if (op.rhs->op == OpId::Concat && !op.operands[0].local) {
    const auto& shape = operand_shape(s, op.operands[0]);
    if (!shape.empty() && normalize_axis(op.rhs->attrs.ints[0], shape.size()) == 0) return RaggedStep::Append;
  }
  return RaggedStep::PerInstance;
}

// An argument of one element for every instance (a constant or a scalar param).
bool scalar_arg(const StaticBlock& s, const BlockOperand& o) {
  if (o.local) return false;
  const BlockArg& a = s.args[o.index];
  return !is_ragged(a.shape) && num_elements(a.shape) == 1 && a.known && a.mode == ArgMode::Reuse;
}

// An argument that is one row [1, N] or [N] for each instance (a bias: the same for all, or an
// indexed param's row).
bool row_arg(const StaticBlock& s, const BlockOperand& o, int64_t n) {
  if (o.local) return false;
  const BlockArg& a = s.args[o.index];
  return !is_ragged(a.shape) && !a.shape.empty() && a.shape.back() == n && num_elements(a.shape) == n;
}

// An argument of one element for each instance.
bool scalar_per_instance(const StaticBlock& s, const BlockOperand& o) {
  return !o.local && !is_ragged(s.args[o.index].shape) && num_elements(s.args[o.index].shape) == 1;
}

// Fusion of the operators after matmul `k` into it (the header's 3.).
void fuse_into_matmul(const StaticBlock& s, RaggedPlan& p, const std::vector<std::vector<int>>& readers,
                      size_t k) {
  RaggedOpPlan& mm = p.ops[k];
  mm.store = static_cast<int>(k);
  // The one reader of operator `i` when it is `i`'s only one and `i` does not escape.
  auto sole_reader = [&](size_t i) -> int {
    return readers[i].size() == 1 && !s.ops[i].escapes ? readers[i][0] : -1;
  };
  auto fuse = [&](int c) {
    p.ops[static_cast<size_t>(c)].step = RaggedStep::Alias;
    p.ops[static_cast<size_t>(c)].alias = static_cast<int>(k);
    mm.store = c;
  };
  auto other_operand = [&](const BlockOp& op, size_t self) -> const BlockOperand* {
    if (op.operands.size() != 2) return nullptr;
    for (int side = 0; side < 2; ++side)
      if (op.operands[side].local && op.operands[side].index == static_cast<int>(self))
        return &op.operands[1 - side];
    return nullptr;
  };
  const BlockOp& self = s.ops[k];
  if (mm.step == RaggedStep::GemmShared || mm.step == RaggedStep::GemmIndexed) {
    const int64_t n = self.shape.back();
    int c = sole_reader(k);
    if (c < 0 || s.ops[c].rhs->op != OpId::Add) return;
    const BlockOperand* x = other_operand(s.ops[c], k);
    if (!x) return;
    if (row_arg(s, *x, n)) {  // A @ W + b
      mm.init = true;
      mm.init_row = x->index;
      fuse(c);
      return;
    }
    // x + A @ W, then perhaps + b: x is the result's shape and is there before the matmul runs.
    const bool before = !x->local || x->index < static_cast<int>(k);
    if (operand_shape(s, *x) != self.shape || !before ||
        (x->local && p.ops[x->index].step == RaggedStep::View))
      return;
    mm.init = true;
    mm.init_from = *x;
    fuse(c);
    int c2 = sole_reader(static_cast<size_t>(c));
    if (c2 < 0 || s.ops[c2].rhs->op != OpId::Add) return;
    const BlockOperand* b = other_operand(s.ops[c2], static_cast<size_t>(c));
    if (b && row_arg(s, *b, n)) {
      mm.init_row = b->index;
      fuse(c2);
    }
    return;
  }
  if (mm.step != RaggedStep::GemmPerInstance) return;
  size_t last = k;
  int c = sole_reader(last);
  if (c >= 0 && s.ops[c].rhs->op == OpId::Mul) {
    const BlockOperand* x = other_operand(s.ops[c], last);
    if (x && scalar_arg(s, *x)) {
      mm.scale = x->index;
      fuse(c);
      last = static_cast<size_t>(c);
      c = sole_reader(last);
    }
  }
  if (c >= 0 && s.ops[c].rhs->op == OpId::MergeHeads && self.shape.size() == 3) {
    mm.merged = true;
    fuse(c);
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
    case RaggedStep::Append: return "append";
    case RaggedStep::Alias: return "fused";
    case RaggedStep::Fused: return "fused-loop";
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

// How operand `o` of an elementwise operator of shape `shape` could be read in a fused loop over
// packed rows: nullopt when it cannot (a view, a broadcast other than a scalar or a last-axis row,
// an argument not shared by every instance that is not of the result's shape).
std::optional<FusedLoad> fused_load(const StaticBlock& s, const RaggedPlan& p, const BlockOperand& o,
                                    const std::vector<int64_t>& shape, int group) {
  if (o.local) {
    const RaggedOpPlan& producer = p.ops[o.index];
    if (producer.group == group) return FusedLoad::Register;
    if (producer.step == RaggedStep::View) return std::nullopt;
    return s.ops[o.index].shape == shape ? std::optional(FusedLoad::Full) : std::nullopt;
  }
  const auto& a = s.args[o.index].shape;
  if (a == shape) return FusedLoad::Full;
  if (scalar_per_instance(s, o)) return FusedLoad::Splat;
  if (!shape.empty() && !is_size_var(shape.back()) && row_arg(s, o, shape.back()))
    return FusedLoad::RowBroadcast;
  return std::nullopt;
}

// Groups of elementwise operators (the header's 4.), decided after the other steps.
// A group is known by its first operator's index; fused_load reads the members so far from registers.
void form_fused_groups(const StaticBlock& s, RaggedPlan& p, const std::vector<std::vector<int>>& readers) {
  auto joins = [&](size_t first, size_t k) {
    const std::vector<int64_t>& shape = s.ops[first].shape;
    if (p.ops[k].step != RaggedStep::Elementwise || s.ops[k].shape != shape) return false;
    std::vector<FusedLoad> loads;
    for (const BlockOperand& o : s.ops[k].operands) {
      auto l = fused_load(s, p, o, shape, static_cast<int>(first));
      if (!l) return false;
      loads.push_back(*l);
    }
    p.ops[k].group = static_cast<int>(first);
    p.ops[k].loads = std::move(loads);
    return true;
  };
  auto close = [&](size_t first, size_t end) {
    for (size_t i = first; i < end; ++i) {
      p.ops[i].step = RaggedStep::Fused;
      bool outside = s.ops[i].escapes;
      for (int r : readers[i]) outside = outside || r >= static_cast<int>(end);
      p.ops[i].stored = outside;
    }
  };
  fused_runs(s.ops.size(), [](size_t) { return false; }, joins, close);
}

}  // namespace

RaggedPlan plan_ragged(const StaticBlock& s) {
  RaggedPlan p;
  if (!s.ragged()) return p;
  p.ops.resize(s.ops.size());
  std::vector<std::vector<int>> readers(s.ops.size());
  for (size_t k = 0; k < s.ops.size(); ++k)
    for (const BlockOperand& o : s.ops[k].operands)
      if (o.local) readers[o.index].push_back(static_cast<int>(k));
  for (size_t k = 0; k < s.ops.size(); ++k) {
    const BlockOp& op = s.ops[k];
    RaggedOpPlan& o = p.ops[k];
    if (o.step == RaggedStep::Alias) continue;  // fused into an earlier matmul
    o.view = view_of(s, p.ops, op);
    o.step = o.view != RaggedView::None ? RaggedStep::View : step_of(s, op);
    if (op_info(op.rhs->op).op_class == OpClass::Gemm) fuse_into_matmul(s, p, readers, k);
    if (op.rhs->op != OpId::Slice) continue;
    const auto& in = operand_shape(s, op.operands[0]);
    const OpAttrs& a = op.rhs->attrs;
    const int64_t n = in[static_cast<size_t>(normalize_axis(a.ints[2], in.size()))];
    if (a.is_size(1)) {
      if (a.ints[1] != n) p.checks.push_back(SizeCheck{static_cast<int>(k), a.ints[1], n});
    } else if (is_size_var(n)) {
      p.checks.push_back(SizeCheck{static_cast<int>(k), a.ints[1], n});
    }
    // A begin at a size (slice(x, n - 1, n)) is at least 0, and the length at least 1 unless the
    // slice begins at 0.
    const int64_t length = op.shape[static_cast<size_t>(normalize_axis(a.ints[2], in.size()))];
    if (a.is_size(0)) p.checks.push_back(SizeCheck{static_cast<int>(k), 0, a.ints[0]});
    if (is_size_var(length) && (a.is_size(0) || a.ints[0] != 0))
      p.checks.push_back(SizeCheck{static_cast<int>(k), 1, length});
  }
  form_fused_groups(s, p, readers);
  return p;
}

std::string ragged_plan_str(const StaticBlock& s, const RaggedPlan& p) {
  std::string out;
  auto operand = [&](const BlockOperand& o) { return fmt::format("{}{}", o.local ? "op" : "arg", o.index); };
  for (size_t k = 0; k < p.ops.size(); ++k) {
    const RaggedOpPlan& o = p.ops[k];
    std::string extra;
    if (o.step == RaggedStep::Alias) extra += fmt::format(" into op{}", o.alias);
    if (o.init) {
      extra += " plus ";
      if (o.init_from.index >= 0) extra += operand(o.init_from) + (o.init_row >= 0 ? " + " : "");
      if (o.init_row >= 0) extra += fmt::format("row arg{}", o.init_row);
    }
    if (o.scale >= 0) extra += fmt::format(", scaled by arg{}", o.scale);
    if (o.merged) extra += ", heads merged";
    if (o.step == RaggedStep::Fused) {
      std::vector<std::string> loads;
      for (FusedLoad l : o.loads)
        loads.push_back(l == FusedLoad::Register ? "reg" : l == FusedLoad::Full ? "load" : l == FusedLoad::Splat ? "splat" : "row");
      extra += fmt::format(" #{} ({}){}", o.group, fmt::join(loads, ", "), o.stored ? ", stored" : "");
    }
    if (o.store >= 0 && o.store != static_cast<int>(k)) extra += fmt::format(", writes op{}", o.store);
    out += fmt::format("  op{} {}: {}{}{}{}\n", k, op_info(s.ops[k].rhs->op).name, step_name(o.step),
                       view_name(o.view), extra, s.ops[k].escapes ? ", escapes" : "");
  }
  for (const SizeCheck& c : p.checks)
    out += fmt::format("  check per instance: {} <= {} (op{})\n", dim_str(c.small), dim_str(c.large), c.op);
  return out;
}

}  // namespace acrobat::analysis
