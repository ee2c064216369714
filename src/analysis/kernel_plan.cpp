#include "analysis/kernel_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "analysis/fused_runs.h"
#include "ops/ops.h"

namespace acrobat::analysis {

namespace {

const std::vector<int64_t>& operand_shape(const StaticBlock& s, const BlockOperand& o) {
  return o.local ? s.ops[o.index].shape : s.args[o.index].shape;
}

bool is_elementwise(const BlockOp& op) {
  return op_info(op.rhs->op).op_class == OpClass::Elementwise && !op.fused;
}

bool row_broadcast(const std::vector<int64_t>& operand, const std::vector<int64_t>& result) {
  return operand.size() == 2 && result.size() == 2 && operand[0] == 1 && result[0] > 1 &&
         operand[1] == result[1] && result[1] % kMaxLanes == 0;
}

// An elementwise operator a fused loop can compute (see the header).
bool fusable(const StaticBlock& s, const BlockOp& op) {
  if (!is_elementwise(op)) return false;
  for (const auto& o : op.operands) {
    const auto& shape = operand_shape(s, o);
    if (shape != op.shape && num_elements(shape) != 1 && !row_broadcast(shape, op.shape)) return false;
  }
  return true;
}

const char* step_name(StepKind k) {
  switch (k) {
    case StepKind::Fused: return "fused";
    case StepKind::Gemm: return "gemm";
    case StepKind::Library: return "library";
    case StepKind::CopyView: return "copy-view";
  }
  return "?";
}

const char* load_name(FusedLoad l) {
  switch (l) {
    case FusedLoad::Register: return "reg";
    case FusedLoad::Full: return "load";
    case FusedLoad::FullPlusBias: return "load+bias";
    case FusedLoad::Splat: return "splat";
    case FusedLoad::RowBroadcast: return "row";
  }
  return "?";
}

// The operands fused step `step` reads from memory (KernelStep::inputs).
std::vector<BlockOperand> fused_inputs(const StaticBlock& s, const KernelPlan& k, const KernelStep& step) {
  std::vector<BlockOperand> in;
  const int g = k.group[size_t(step.begin)];
  for (int i = step.begin; i < step.end; ++i) {
    if (k.group[size_t(i)] != g) continue;
    for (size_t a = 0; a < s.ops[size_t(i)].operands.size(); ++a) {
      const BlockOperand& o = s.ops[size_t(i)].operands[a];
      if (k.loads[size_t(i)][a] == FusedLoad::Register) continue;
      const bool seen = std::any_of(in.begin(), in.end(), [&](const BlockOperand& x) {
        return x.local == o.local && x.index == o.index;
      });
      if (!seen) in.push_back(o);
    }
  }
  return in;
}

// The fewest rows of every operand of a concat read in pieces: a vector's floats.
constexpr int64_t kMinPieceRows = 16;

// Concats read in pieces by the one matmul that reads them (their right operand, along rows): the
// plan's concat_pieces and only_when_kept (see the header), once its fusion groups are known.
void plan_concat_pieces(const StaticBlock& s, KernelPlan& k) {
  const size_t n = s.ops.size();
  k.concat_pieces.assign(n, -1);
  k.only_when_kept.assign(n, false);
  std::vector<int> readers(n, 0);
  for (const BlockOp& op : s.ops)
    for (const auto& o : op.operands)
      if (o.local) ++readers[size_t(o.index)];
  for (size_t i = 0; i < n; ++i) {
    const BlockOp& mm = s.ops[i];
    if (mm.rhs->op != OpId::MatMul || mm.view || mm.fused || mm.operands.size() != 2 ||
        !mm.operands[1].local)
      continue;
    const size_t j = static_cast<size_t>(mm.operands[1].index);
    const BlockOp& cat = s.ops[j];
    if (cat.rhs->op != OpId::Concat || cat.view || cat.fused || cat.escapes || readers[j] != 1 ||
        k.group[j] >= 0 || cat.shape.size() != 2 || normalize_axis(cat.rhs->attrs.ints[0], 2) != 0 ||
        operand_shape(s, mm.operands[0]).size() != 2)
      continue;
    // Thin pieces would make thin products (K of a few rows): one concat and one GEMM serve better.
    const bool thick = std::all_of(cat.operands.begin(), cat.operands.end(), [&](const BlockOperand& o) {
      return operand_shape(s, o)[0] >= kMinPieceRows;
    });
    if (!thick) continue;
    k.concat_pieces[i] = static_cast<int>(j);
    k.only_when_kept[j] = true;
  }
}

}  // namespace

KernelPlan plan_kernel(const StaticBlock& s) {
  const size_t n = s.ops.size();
  KernelPlan k;
  // Storage: a fused bias add shares its matmul's buffer; a view points into its operand's.
  k.loc.resize(n);
  k.owner.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const BlockOp& op = s.ops[i];
    k.owner[i] = static_cast<int>(i);
    k.loc[i] = ValueLoc{false, static_cast<int>(i), op.size, 0};
    if (op.fused) {
      k.owner[i] = k.owner[i - 1];
      k.loc[i] = k.loc[i - 1];
    } else if (op.view) {
      const ValueLoc& base = k.loc[op.operands[0].index];
      k.loc[i] = ValueLoc{false, base.index, base.stride, base.offset + view_offset(s, op)};
      k.owner[i] = k.owner[op.operands[0].index];
    }
  }
  // Fusion groups (views in between do not break a group).
  k.group.assign(n, -1);
  int groups = 0;
  fused_runs(
      n, [&](size_t i) { return s.ops[i].view; },
      [&](size_t first, size_t i) {
        if (!fusable(s, s.ops[i]) || s.ops[i].size != s.ops[first].size) return false;
        k.group[i] = groups;
        return true;
      },
      [&](size_t, size_t) { ++groups; });
  // Which operators need memory: escaping ones, and any read outside its own group.
  k.stored.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (s.ops[i].escapes) k.stored[k.owner[i]] = true;
    // Every operator outside a fused loop writes memory (even one nothing reads).
    if (k.group[i] < 0 && !s.ops[i].view && !s.ops[i].fused) k.stored[i] = true;
    for (const auto& o : s.ops[i].operands) {
      if (!o.local) continue;
      if (k.group[o.index] < 0 || k.group[o.index] != k.group[i]) k.stored[k.owner[o.index]] = true;
    }
  }
  // The buffer of an owner whose alias group escapes is that output (the last one, when an add fused
  // into a matmul escapes as well as the matmul).
  k.buffer_slot.assign(n, -1);
  for (size_t i = 0; i < n; ++i)
    if (!s.ops[i].view && s.ops[i].escapes && k.stored[k.owner[i]])
      k.buffer_slot[k.owner[i]] = static_cast<int>(i);
  // Deferred bias adds.
  k.deferred_bias.assign(n, false);
  for (size_t i = 0; i + 1 < n; ++i) {
    const BlockOp& mm = s.ops[i];
    if (mm.bias_arg < 0 || mm.shape.size() != 2 || mm.shape[0] != 1) continue;
    std::vector<bool> derived(n, false);
    derived[i + 1] = true;
    bool ok = !s.ops[i + 1].escapes;
    for (size_t j = i + 2; j < n && ok; ++j) {
      const BlockOp& op = s.ops[j];
      bool reads = false;
      for (const auto& o : op.operands) reads = reads || (o.local && derived[o.index]);
      if (!reads) continue;
      if (op.view) {
        derived[j] = true;
        ok = !op.escapes;
      } else {
        ok = k.group[j] >= 0;
      }
    }
    if (!ok) continue;
    k.deferred_bias[i] = true;
    for (size_t j = i + 1; j < n; ++j) {
      if (!derived[j]) continue;
      k.loc[j].bias = mm.bias_arg;
      k.loc[j].bias_offset = k.loc[j].offset - k.loc[i].offset;
    }
  }
  // How each fused operator reads its operands.
  k.loads.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (k.group[i] < 0) continue;
    const BlockOp& op = s.ops[i];
    for (const auto& o : op.operands) {
      FusedLoad l = FusedLoad::Full;
      const auto& shape = operand_shape(s, o);
      if (o.local && k.group[o.index] == k.group[i]) {
        l = FusedLoad::Register;
      } else if (num_elements(shape) == 1 && op.size != 1) {
        l = FusedLoad::Splat;
      } else if (row_broadcast(shape, op.shape)) {
        l = FusedLoad::RowBroadcast;
      } else if (o.local && k.loc[o.index].bias >= 0) {
        l = FusedLoad::FullPlusBias;
      }
      k.loads[i].push_back(l);
    }
  }
  plan_concat_pieces(s, k);
  // Steps.
  for (size_t i = 0; i < n;) {
    const BlockOp& op = s.ops[i];
    if (op.view || op.fused) {
      ++i;
      continue;
    }
    if (k.group[i] >= 0) {
      size_t end = i;
      while (end < n && (s.ops[end].view || k.group[end] == k.group[i])) ++end;
      k.steps.push_back(KernelStep{StepKind::Fused, static_cast<int>(i), static_cast<int>(end), op.size});
      i = end;
      continue;
    }
    const BlockArg* w = op.operands.size() == 2 && !op.operands[1].local ? &s.args[op.operands[1].index]
                                                                        : nullptr;
    bool gemm = op.rhs->op == OpId::MatMul && w && w->known &&
                (w->mode == ArgMode::Reuse || w->mode == ArgMode::Indexed);
    KernelStep step{gemm ? StepKind::Gemm : StepKind::Library, static_cast<int>(i), static_cast<int>(i) + 1};
    step.add_bias = op.bias_arg >= 0 && !k.deferred_bias[i];
    k.steps.push_back(step);
    ++i;
  }
  for (size_t i = 0; i < n; ++i)
    if (s.ops[i].view && s.ops[i].escapes)
      k.steps.push_back(KernelStep{StepKind::CopyView, static_cast<int>(i), static_cast<int>(i) + 1});
  for (KernelStep& step : k.steps)
    if (step.kind == StepKind::Fused) step.inputs = fused_inputs(s, k, step);
  return k;
}

std::string kernel_plan_str(const StaticBlock& s, const KernelPlan& k) {
  std::string out;
  auto where = [&](const ValueLoc& l) {
    std::string w = l.arg ? fmt::format("arg{}", l.index) : fmt::format("buf{}", l.index);
    if (l.offset) w += fmt::format("+{}", l.offset);
    if (l.bias >= 0) w += fmt::format(" (+ bias arg{}+{})", l.bias, l.bias_offset);
    return w;
  };
  for (size_t i = 0; i < s.ops.size(); ++i)
    if (k.owner[i] == static_cast<int>(i) && k.stored[i])
      out += k.buffer_slot[i] >= 0
                 ? fmt::format("  buf{}: output {}, {} floats\n", i, k.buffer_slot[i], s.ops[i].size)
                 : fmt::format("  buf{}: scratch, {} floats\n", i, s.ops[i].size);
  for (const KernelStep& st : k.steps) {
    out += fmt::format("  {}", step_name(st.kind));
    if (st.kind == StepKind::Fused) {
      out += fmt::format(" x{}:", st.size);
      for (int i = st.begin; i < st.end; ++i) {
        if (k.group[i] < 0) continue;
        out += fmt::format(" {}(", op_info(s.ops[i].rhs->op).name);
        for (size_t a = 0; a < k.loads[i].size(); ++a) {
          const BlockOperand& o = s.ops[i].operands[a];
          out += a ? ", " : "";
          out += k.loads[i][a] == FusedLoad::Register
                     ? fmt::format("%{}", o.index)
                     : fmt::format("{} {}", load_name(k.loads[i][a]),
                                   o.local ? where(k.loc[o.index]) : fmt::format("arg{}", o.index));
        }
        out += fmt::format(")->%{}{}", i, k.stored[i] ? fmt::format(" [buf{}]", i) : "");
      }
    } else {
      const BlockOp& op = s.ops[st.begin];
      out += fmt::format(" {} %{} -> {}", op_info(op.rhs->op).name, st.begin, where(k.loc[st.begin]));
      if (k.concat_pieces[st.begin] >= 0)
        out += fmt::format(" (%{}'s operands read in place)", k.concat_pieces[st.begin]);
      if (k.only_when_kept[st.begin]) out += " (only when kept)";
      if (st.add_bias) out += fmt::format(" + bias arg{}", op.bias_arg);
      if (op.bias_arg >= 0 && k.deferred_bias[st.begin]) out += " (bias deferred)";
    }
    out += "\n";
  }
  return out;
}

}  // namespace acrobat::analysis
