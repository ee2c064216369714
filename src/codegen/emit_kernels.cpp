// The batched kernel of a static block (emit_parts.h), step by step as its kernel plan says:
// elementwise chains fused into one pass over each instance's row that reads scattered arguments
// through their row pointers and keeps intermediates in registers; matmuls by reuse weights as one
// GEMM over the whole batch on the pre-packed weights; other operators through the runtime.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <utility>

#include "codegen/emit_parts.h"

namespace acrobat::codegen {

using analysis::BlockOp;
using analysis::StaticBlock;

namespace {

using Src = analysis::ValueLoc;

// "file:line:col" with the file's name only (the generated code does not depend on where the
// model file lies).
std::string where(const ir::Rhs& r) {
  const SourceLoc& l = r.span.begin;
  std::string file = l.file.substr(l.file.find_last_of('/') + 1);
  return fmt::format("{}:{}:{}", file, l.line, l.col);
}

std::string row_ptr(const Src& src, const std::string& b) {
  if (src.arg) return fmt::format("row(c.args[{}], {})", src.index, b);
  return fmt::format("(o{} + {} * {} + {})", src.index, b, src.stride, src.offset);
}

// An Operand describing `sr` for the runtime's kernels.
std::string operand_expr(const Src& sr) {
  if (sr.arg) return fmt::format("c.args[{}]", sr.index);
  return fmt::format("Operand{{o{} + {}, {}, nullptr, nullptr}}", sr.index, sr.offset, sr.stride);
}

class Kernel {
 public:
  Kernel(Writer& w, const StaticBlock& s, const analysis::KernelPlan& kp)
      : w_(w), s_(s), kp_(kp), src_(kp.loc) {}

  void run() {
    // Escaping views and fused adds that escape are written to their own output slot.
    w_.line(fmt::format("// block #{} at {}", s_.id, where(*s_.ops[0].rhs)));
    {
      auto body = w_.block(fmt::format("void kernel{}(const KernelCall& c) {{", s_.id));
      line("AotContext* ctx = c.ctx;");
      line("const AotHost* host = c.host;");
      line("const int64_t B = c.B;");
      line("(void)ctx; (void)host;");
      buffers();
      for (const analysis::KernelStep& step : kp_.steps) {
        const int k = step.begin;
        switch (step.kind) {
          case analysis::StepKind::Fused: fused_loop(step); break;
          case analysis::StepKind::Gemm: matmul(k, step.add_bias); break;
          case analysis::StepKind::Library: host_kernel(k, step.add_bias); break;
          case analysis::StepKind::CopyView:
            // The runtime reads every escaping output contiguously.
            line(fmt::format("for (int64_t b = 0; b < B; ++b) std::memcpy(c.outputs[{}] + b * {}, {}, {} * sizeof(float));",
                             k, s_.ops[k].size, row_ptr(src_[k], "b"), s_.ops[k].size));
            break;
        }
      }
    }
    w_.blank();
  }

 private:
  void line(std::string_view s) { w_.line(s); }

  // The buffer of every stored owner: its output, or scratch.
  void buffers() {
    for (size_t k = 0; k < s_.ops.size(); ++k) {
      if (kp_.owner[k] != static_cast<int>(k) || !kp_.stored[k]) continue;
      if (kp_.buffer_slot[k] >= 0)
        line(fmt::format("float* o{} = c.outputs[{}];", k, kp_.buffer_slot[k]));
      else  // a run that keeps values for the backward pass gives the buffer as an output
        line(fmt::format("float* o{0} = c.outputs[{0}] ? c.outputs[{0}] : host->scratch(ctx, B * {1});", k,
                         s_.ops[k].size));
    }
  }

  Src operand_src(const analysis::BlockOperand& o) const {
    if (o.local) return src_[o.index];
    return Src{true, o.index, 0, 0};
  }

  // One pass over each instance's row for the operators of one fused step.
  void fused_loop(const analysis::KernelStep& step) {
    using analysis::FusedLoad;
    const int g = kp_.group[step.begin];
    const int64_t size = step.size;
    auto in_group = [&](int k) { return kp_.group[k] == g; };
    auto loop = w_.block(fmt::format("for (int64_t b = 0; b < B; ++b) {{  // fused: {} elements per instance", size));
    // Row pointers of every operand read from memory, and of every stored output.
    std::map<std::string, std::string> pointers;  // expression -> name
    auto pointer = [&](const std::string& e) {
      auto [it, fresh] = pointers.emplace(e, fmt::format("r{}", pointers.size()));
      if (fresh) line(fmt::format("const float* {} = {};", it->second, e));
    };
    for (int k = step.begin; k < step.end; ++k) {
      if (!in_group(k)) continue;
      for (size_t a = 0; a < s_.ops[k].operands.size(); ++a) {
        if (kp_.loads[k][a] == FusedLoad::Register) continue;
        const Src sr = operand_src(s_.ops[k].operands[a]);
        pointer(row_ptr(sr, "b"));
        if (kp_.loads[k][a] == FusedLoad::FullPlusBias) pointer(bias_ptr(sr));
      }
    }
    for (int k = step.begin; k < step.end; ++k)
      if (in_group(k) && kp_.stored[k]) line(fmt::format("float* w{} = o{} + b * {};", k, k, size));
    register_loop(w_, size, [&](bool tail) { fused_registers(step, pointers, tail); });
  }

  static std::string bias_ptr(const Src& sr) {
    return fmt::format("row(c.args[{}], b) + {}", sr.bias, sr.bias_offset);
  }

  // The operators of a fused step on one register of the row (a partial one when `tail`), their
  // operands in memory read through `pointers`.
  void fused_registers(const analysis::KernelStep& step, const std::map<std::string, std::string>& pointers,
                       bool tail) {
    using analysis::FusedLoad;
    const int g = kp_.group[step.begin];
    const int64_t size = step.size;
    auto load = [&](const std::string& ptr) {
      return tail ? fmt::format("tail_load({} + j, {} - j)", ptr, size) : fmt::format("simd::load({} + j)", ptr);
    };
    for (int k = step.begin; k < step.end; ++k) {
      if (kp_.group[k] != g) continue;
      const BlockOp& op = s_.ops[k];
      std::vector<std::string> in;
      for (size_t a = 0; a < op.operands.size(); ++a) {
        const auto& o = op.operands[a];
        if (kp_.loads[k][a] == FusedLoad::Register) {
          in.push_back(fmt::format("t{}", o.index));
          continue;
        }
        const Src sr = operand_src(o);
        const std::string& p = pointers.at(row_ptr(sr, "b"));
        switch (kp_.loads[k][a]) {
          case FusedLoad::Splat: in.push_back(fmt::format("simd::splat({}[0])", p)); break;
          case FusedLoad::RowBroadcast:
            in.push_back(fmt::format("simd::load({} + j % {})", p, operand_shape(s_, o)[1]));
            break;
          case FusedLoad::FullPlusBias:
            in.push_back("(" + load(p) + " + " + load(pointers.at(bias_ptr(sr))) + ")");
            break;
          default: in.push_back(load(p)); break;
        }
      }
      line(fmt::format("const Vec t{} = {};", k, simd_expression(op_info(op.rhs->op).simd, in)));
      if (kp_.stored[k])
        line(tail ? fmt::format("tail_store(w{} + j, t{}, {} - j);", k, k, size)
                  : fmt::format("simd::store(w{} + j, t{});", k, k));
    }
  }

  // A matmul by a param (reuse, or indexed when the whole batch picked the same matrix, as the
  // instances at one layer of a transformer do): one GEMM over all instances' rows on the packed
  // weights, onto the broadcast bias when an add was fused into it. Other batches of an indexed
  // param take the library's grouped matmul.
  void matmul(int k, bool bias) {
    const BlockOp& op = s_.ops[k];
    // A stack of matrices [H, M, K] times the weights is the panel [H * M, K] times them.
    const auto& left_shape = operand_shape(s_, op.operands[0]);
    int64_t K = left_shape.back(), M = num_elements(left_shape) / K, N = op.shape.back();
    auto scope = w_.block("{");
    line(fmt::format("const Operand& w = c.args[{}];", op.operands[1].index));
    left_panel(operand_src(op.operands[0]), M, K);
    std::string C = fmt::format("o{}", k);
    auto paths = w_.block("if (w.packed && w.data && w.stride == 0) {");
    if (bias) {
      auto rows = w_.block("for (int64_t b = 0; b < B; ++b) {");
      line(fmt::format("const float* bias = row(c.args[{}], b);", op.bias_arg));
      line(fmt::format("for (int64_t r = 0; r < {}; ++r) std::memcpy({} + (b * {} + r) * {}, bias, {} * sizeof(float));",
                       M, C, M, N, N));
    }
    line(fmt::format("host->gemm_packed(B * {}, A, lda, w.packed, {}, {}, {});", M, C, N,
                     bias ? "true" : "false"));
    paths.next("} else {");
    line(fmt::format("const Operand in[] = {{Operand{{A, lda * {}, nullptr, nullptr}}, w}};", M));
    line(fmt::format("host->op(ctx, {}, {}, B, in, {});", s_.id, k, C));
    if (bias) add_bias(C, op.bias_arg, M, N);
  }

  // The rows of a matmul's left operand `a` (M x K per instance) as one panel A with row stride
  // lda: a buffer of the kernel already is one (when M == 1 or it is contiguous); an argument is
  // when adjacent or evenly strided; else gathered.
  void left_panel(const Src& a, int64_t M, int64_t K) {
    if (!a.arg && (M == 1 || (a.stride == M * K && a.offset == 0))) {
      line(fmt::format("const float* A = o{} + {};", a.index, a.offset));
      line(fmt::format("const int64_t lda = {};", M == 1 ? a.stride : K));
    } else if (a.arg) {
      line(fmt::format("const Operand& x = c.args[{}];", a.index));
      line("const float* A = x.data;");
      line(fmt::format("int64_t lda = {};", K));
      if (M == 1) line(fmt::format("if (x.data && x.stride >= {}) lda = x.stride;", K));
      auto gather = w_.block(M == 1 ? fmt::format("if (!x.data || x.stride < {}) {{", K)
                                    : fmt::format("if (!x.data || x.stride != {}) {{", M * K));
      line(fmt::format("float* g = host->scratch(ctx, B * {});", M * K));
      line(fmt::format("for (int64_t b = 0; b < B; ++b) std::memcpy(g + b * {}, row(x, b), {} * sizeof(float));",
                       M * K, M * K));
      line("A = g;");
    } else {
      line(fmt::format("float* g = host->scratch(ctx, B * {});", M * K));
      line(fmt::format("for (int64_t b = 0; b < B; ++b) std::memcpy(g + b * {}, {}, {} * sizeof(float));",
                       M * K, row_ptr(a, "b"), M * K));
      line("const float* A = g;");
      line(fmt::format("const int64_t lda = {};", K));
    }
  }

  // out[b] += bias[b] for each of the M rows of every instance b.
  void add_bias(const std::string& out, int bias_arg, int64_t M, int64_t N) {
    auto instances = w_.block("for (int64_t b = 0; b < B; ++b) {");
    line(fmt::format("const float* bias = row(c.args[{}], b);", bias_arg));
    auto rows = w_.block(fmt::format("for (int64_t r = 0; r < {}; ++r)", M), "");
    line(fmt::format("for (int64_t j = 0; j < {}; ++j) {}[(b * {} + r) * {} + j] += bias[j];", N, out, M, N));
  }

  void host_kernel(int k, bool bias) {
    const BlockOp& op = s_.ops[k];
    std::string in;
    // A matmul reading a concat in pieces gets its left operand and the concat's operands.
    const int pieces = kp_.concat_pieces[size_t(k)];
    for (const auto& o : pieces >= 0 ? std::vector{op.operands[0]} : op.operands)
      in += (in.empty() ? "" : ", ") + operand_expr(operand_src(o));
    if (pieces >= 0)
      for (const auto& o : s_.ops[size_t(pieces)].operands) in += ", " + operand_expr(operand_src(o));
    // A concat read in pieces is computed only when the run keeps its value.
    auto scope = w_.block(kp_.only_when_kept[size_t(k)] ? fmt::format("if (c.outputs[{}]) {{", k) : "{");
    line(fmt::format("const Operand in[] = {{{}}};", in));
    line(fmt::format("host->op(ctx, {}, {}, B, in, o{});", s_.id, k, k));
    if (bias) add_bias(fmt::format("o{}", k), op.bias_arg, op.size / op.shape.back(), op.shape.back());
  }

  Writer& w_;
  const StaticBlock& s_;
  const analysis::KernelPlan& kp_;
  const std::vector<Src>& src_;
};

}  // namespace

void emit_kernel(const Emission& e, const StaticBlock& s) { Kernel(e.out, s, e.plan.kernels[s.id]).run(); }

std::string simd_expression(const std::string& simd, const std::vector<std::string>& in, const std::string& y,
                            const std::string& g) {
  std::vector<std::pair<std::string, std::string>> names = {{"y", y}, {"g", g}};
  for (size_t i = 0; i < in.size(); ++i) names.emplace_back(std::string(1, char('a' + i)), in[i]);
  std::string out;
  for (size_t i = 0; i < simd.size();) {
    char ch = simd[i];
    if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
      size_t j = i;
      while (j < simd.size() && (std::isalnum(static_cast<unsigned char>(simd[j])) || simd[j] == '_')) ++j;
      std::string word = simd.substr(i, j - i);
      bool qualified = i >= 2 && simd.compare(i - 2, 2, "::") == 0;
      auto it = std::find_if(names.begin(), names.end(), [&](const auto& n) { return n.first == word; });
      out += !qualified && it != names.end() ? it->second : word;
      i = j;
    } else {
      out += ch;
      ++i;
    }
  }
  return out;
}

}  // namespace acrobat::codegen
