// The adjoints of a kernel's fused loops (emit_parts.h, aot::AdjointCall), which the backward pass
// of a training run calls in place of the operators' adjoints one by one.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "codegen/emit_parts.h"

namespace acrobat::codegen {

using analysis::BlockOp;
using analysis::BlockOperand;
using analysis::FusedLoad;
using analysis::StaticBlock;

namespace {

// The adjoint expressions of ops.def for `op`, one per operand.
std::vector<std::string> adjoint_rules(OpId op) {
  const std::string all = op_info(op).adjoint;
  ACROBAT_ASSERT(all.size() > 2 && all != "()", "a fused operator without adjoint expressions");
  std::vector<std::string> out(1);
  int depth = 0;
  for (size_t i = 1; i + 1 < all.size(); ++i) {
    const char ch = all[i];
    depth += ch == '(' ? 1 : ch == ')' ? -1 : 0;
    if (ch == ',' && depth == 0) {
      out.emplace_back();
      continue;
    }
    out.back() += ch;
  }
  for (std::string& e : out) {
    const size_t first = e.find_first_not_of(' ');
    e = "(" + e.substr(first) + ")";
  }
  return out;
}

// The adjoint of the fused loop of step `si`: per instance and register, the loop's values
// recomputed from its operands in memory, then the operators' adjoints from the last back, in
// registers, each operand in memory getting the sum of what its readers give it.
class FusedAdjoint {
 public:
  FusedAdjoint(Writer& w, const StaticBlock& s, const analysis::KernelPlan& kp, size_t si)
      : w_(w), s_(s), kp_(kp), si_(si), step_(kp.steps[si]), g_(kp.group[step_.begin]), inputs_(step_.inputs) {}

  // How each input is read (FullPlusBias as Full: the backward's values have the bias added); false
  // when an input is read in two ways (not planned so), and the loop has no adjoint.
  bool plan_reads() {
    how_.assign(inputs_.size(), FusedLoad::Register);
    for (int k = step_.begin; k < step_.end; ++k) {
      if (!in_group(k)) continue;
      for (size_t a = 0; a < s_.ops[k].operands.size(); ++a) {
        FusedLoad l = kp_.loads[k][a];
        if (l == FusedLoad::Register) continue;
        if (l == FusedLoad::FullPlusBias) l = FusedLoad::Full;
        FusedLoad& h = how_[input_of(s_.ops[k].operands[a])];
        if (h != FusedLoad::Register && h != l) return false;
        h = l;
      }
    }
    return true;
  }

  void run() {
    w_.line(fmt::format("// adjoint of the fused loop of block #{} (step {})", s_.id, si_));
    {
      auto body = w_.block(fmt::format("void adjoint{}_{}(const AdjointCall& c) {{", s_.id, si_));
      auto instances = w_.block("for (int64_t b = 0; b < c.B; ++b) {");
      for (size_t i = 0; i < inputs_.size(); ++i) {
        line(fmt::format("const float* x{0} = row(c.in[{0}], b);", i));
        line(fmt::format("float* dx{0} = row(c.din[{0}], b);", i));
      }
      for (int k = step_.begin; k < step_.end; ++k)
        if (in_group(k) && kp_.stored[k])
          line(fmt::format("const float* g{0} = c.dout[{1}].data + b * c.dout[{1}].stride;", k, k - step_.begin));
      register_loop(w_, step_.size, [&](bool tail) {
        load_inputs(tail);
        adjoints(values(tail));
        accumulate(tail);
      });
    }
    w_.blank();
  }

 private:
  void line(std::string_view s) { w_.line(s); }
  bool in_group(int k) const { return kp_.group[k] == g_; }

  size_t input_of(const BlockOperand& o) const {
    for (size_t i = 0; i < inputs_.size(); ++i)
      if (inputs_[i].local == o.local && inputs_[i].index == o.index) return i;
    ACROBAT_ASSERT(false, "an operand in memory missing from the step's inputs");
    return size_t(0);
  }

  std::string load(const std::string& ptr, bool tail) const {
    return tail ? fmt::format("tail_load({}, {} - j)", ptr, step_.size) : fmt::format("simd::load({})", ptr);
  }

  // Each input's register `v<i>`, and its adjoint's `m<i>`, zero so far.
  void load_inputs(bool tail) {
    for (size_t i = 0; i < inputs_.size(); ++i) {
      std::string v;
      switch (how_[i]) {
        case FusedLoad::Splat: v = fmt::format("simd::splat(x{}[0])", i); break;
        case FusedLoad::RowBroadcast:
          v = fmt::format("simd::load(x{} + j % {})", i, operand_shape(s_, inputs_[i])[1]);
          break;
        default: v = load(fmt::format("x{} + j", i), tail); break;
      }
      line(fmt::format("const Vec v{} = {};", i, v));
      line(fmt::format("Vec m{} = simd::splat(0.0f);", i));
    }
  }

  // The operators' values `t<k>` and their adjoints `d<k>` so far (what the loop's outputs are
  // given); returns each operator's operand registers.
  std::vector<std::vector<std::string>> values(bool tail) {
    std::vector<std::vector<std::string>> operands(s_.ops.size());
    for (int k = step_.begin; k < step_.end; ++k) {
      if (!in_group(k)) continue;
      for (size_t a = 0; a < s_.ops[k].operands.size(); ++a) {
        const auto& o = s_.ops[k].operands[a];
        operands[k].push_back(kp_.loads[k][a] == FusedLoad::Register ? fmt::format("t{}", o.index)
                                                                     : fmt::format("v{}", input_of(o)));
      }
      line(fmt::format("const Vec t{} = {};", k, simd_expression(op_info(s_.ops[k].rhs->op).simd, operands[k])));
      line(fmt::format("Vec d{} = {};", k,
                       kp_.stored[k] ? load(fmt::format("g{} + j", k), tail) : std::string("simd::splat(0.0f)")));
    }
    return operands;
  }

  // The adjoints in reverse, each operand's added to its producer's or its input's.
  void adjoints(const std::vector<std::vector<std::string>>& operands) {
    for (int k = step_.end; k-- > step_.begin;) {
      if (!in_group(k)) continue;
      const BlockOp& op = s_.ops[k];
      const std::vector<std::string> rules = adjoint_rules(op.rhs->op);
      for (size_t a = 0; a < op.operands.size(); ++a) {
        const std::string e = simd_expression(rules[a], operands[k], fmt::format("t{}", k), fmt::format("d{}", k));
        const std::string target = kp_.loads[k][a] == FusedLoad::Register
                                       ? fmt::format("d{}", op.operands[a].index)
                                       : fmt::format("m{}", input_of(op.operands[a]));
        line(fmt::format("{0} = {0} + {1};", target, e));
      }
    }
  }

  // Each input's adjoint added to memory, as the input was read.
  void accumulate(bool tail) {
    const int64_t size = step_.size;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      switch (how_[i]) {
        case FusedLoad::Splat:
          if (tail) {
            auto scope = w_.block("{");
            line("float lanes[simd::kLanes];");
            line(fmt::format("simd::store(lanes, m{});", i));
            line(fmt::format("for (int64_t q = 0; q < {} - j; ++q) dx{}[0] += lanes[q];", size, i));
          } else {
            line(fmt::format("dx{0}[0] += simd::reduce_add(m{0});", i));
          }
          break;
        case FusedLoad::RowBroadcast: {
          const int64_t n = operand_shape(s_, inputs_[i])[1];
          line(fmt::format("simd::store(dx{0} + j % {1}, simd::load(dx{0} + j % {1}) + m{0});", i, n));
          break;
        }
        default:
          line(tail ? fmt::format("tail_store(dx{0} + j, tail_load(dx{0} + j, {1} - j) + m{0}, {1} - j);", i, size)
                    : fmt::format("simd::store(dx{0} + j, simd::load(dx{0} + j) + m{0});", i));
          break;
      }
    }
  }

  Writer& w_;
  const StaticBlock& s_;
  const analysis::KernelPlan& kp_;
  const size_t si_;
  const analysis::KernelStep& step_;
  const int g_;
  const std::vector<BlockOperand>& inputs_;
  std::vector<FusedLoad> how_;
};

}  // namespace

bool emit_fused_adjoint(Writer& w, const StaticBlock& s, const analysis::KernelPlan& kp, size_t step) {
  FusedAdjoint a(w, s, kp, step);
  if (!a.plan_reads()) return false;
  a.run();
  return true;
}

}  // namespace acrobat::codegen
