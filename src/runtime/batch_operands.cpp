#include "runtime/batch_operands.h"

#include <cstring>

#include "acrobat/kernels.h"

namespace acrobat {

PackedIndex::PackedIndex(const ParamStore& params) {
  for (const auto& pv : params.params) {
    if (pv.tensor.packed) packed_[pv.tensor.data.get()] = pv.tensor.packed.get();
    int64_t row = num_elements(pv.elem_shape);
    for (size_t i = 0; i < pv.packed_rows.size(); ++i)
      packed_[pv.tensor.data.get() + static_cast<int64_t>(i) * row] = pv.packed_rows[i].get();
  }
}

aot::Operand classify_operand(const float* const* rows, int64_t B, int64_t n,
                              const PackedIndex& packed) {
  bool shared = true, strided = true;
  for (int64_t b = 1; b < B; ++b) {
    shared = shared && rows[b] == rows[0];
    strided = strided && rows[b] == rows[0] + b * n;
  }
  if (shared) return aot::Operand{rows[0], 0, nullptr, packed.find(rows[0])};
  if (strided) return aot::Operand{rows[0], n, nullptr, nullptr};
  return aot::Operand{nullptr, 0, rows, nullptr};
}

BatchOperand library_operand(const aot::Operand& x, const std::vector<int64_t>& shape, int64_t B,
                             Arena& scratch, OperandRead read) {
  BatchOperand op;
  op.shape = &shape;
  op.packed = static_cast<const kernels::PackedWeights*>(x.packed);
  const int64_t n = num_elements(shape);
  if (x.data && !(read == OperandRead::GemmPanel && B > 1 && x.stride < n)) {
    op.data = x.data;
    op.stride = x.stride;
  } else if (!x.data && read == OperandRead::Rows) {
    op.rows = x.rows;
  } else {
    float* panel = scratch.alloc(static_cast<size_t>(B * n));
    for (int64_t b = 0; b < B; ++b) std::memcpy(panel + b * n, operand_row(x, b), n * sizeof(float));
    op.data = panel;
    op.stride = n;
  }
  return op;
}

namespace {

// Matmul k's right operand is concat j along rows, read in pieces: in[0] is the left operand, in[1..]
// the concat's operands (each per instance, shared or scattered). Each instance's product is one
// GEMM per piece, on the columns of the left operand that meet the piece's rows, accumulating into
// the result: no instance's concat is written and read again. (Without pieces the product is one
// GEMM per instance too: a concat's result is a matrix of each instance's own.)
int64_t matmul_in_pieces(const analysis::StaticBlock& s, size_t k, size_t j, int64_t B,
                         const aot::Operand* in, float* out) {
  const analysis::BlockOp& op = s.ops[k];
  const analysis::BlockOp& cat = s.ops[j];
  const aot::Operand* parts = in + 1;
  const size_t P = cat.operands.size();
  const analysis::BlockOperand& left = op.operands[0];
  const std::vector<int64_t>& as = left.local ? s.ops[left.index].shape : s.args[left.index].shape;
  const int K = static_cast<int>(as.back()), M = static_cast<int>(as[0]), N = static_cast<int>(op.shape.back());
  for (int64_t b = 0; b < B; ++b) {
    const float* a = operand_row(in[0], b);
    int k0 = 0;
    for (size_t p = 0; p < P; ++p) {
      const analysis::BlockOperand& o = cat.operands[p];
      const int rows = static_cast<int>((o.local ? s.ops[o.index].shape : s.args[o.index].shape)[0]);
      kernels::gemm(M, N, rows, a + k0, K, operand_row(parts[p], b), N, out + b * M * N, N, p > 0);
      k0 += rows;
    }
  }
  return B * static_cast<int64_t>(P);
}

}  // namespace

int64_t run_library_op(const analysis::StaticBlock& s, size_t k, int64_t B, const aot::Operand* in,
                       float* out, Arena& scratch, const PackedIndex& packed, int pieces) {
  if (pieces >= 0) return matmul_in_pieces(s, k, static_cast<size_t>(pieces), B, in, out);
  const analysis::BlockOp& op = s.ops[k];
  auto shape_of = [&](size_t i) -> const std::vector<int64_t>& {
    const auto& o = op.operands[i];
    return o.local ? s.ops[o.index].shape : s.args[o.index].shape;
  };
  if (op.rhs->op == OpId::MatMul && shape_of(1).size() == 2 && !(in[1].data && in[1].stride == 0)) {
    // Weights differing between instances (an indexed param's matrices, or per-instance matrices).
    std::vector<const float*> weights(static_cast<size_t>(B));
    std::vector<const kernels::PackedWeights*> packs(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
      weights[b] = operand_row(in[1], b);
      packs[b] = packed.find(weights[b]);
    }
    BatchOperand a = library_operand(in[0], shape_of(0), B, scratch, OperandRead::GemmPanel);
    return batched_matmul_grouped(B, a, weights.data(), packs.data(), op.shape, out, scratch);
  }
  std::vector<BatchOperand> ops(op.operands.size());
  for (size_t i = 0; i < ops.size(); ++i)
    ops[i] = library_operand(in[i], shape_of(i), B, scratch,
                             op.rhs->op == OpId::Concat               ? OperandRead::Rows
                             : op.rhs->op == OpId::MatMul && i == 0 ? OperandRead::GemmPanel
                                                                      : OperandRead::Strided);
  batched_kernel(op.rhs->op)(op.rhs->attrs, B, ops, op.shape, out);
  return 1;
}

}  // namespace acrobat
