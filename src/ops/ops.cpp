#include "ops/ops.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <optional>

#include "ops/ops_check.h"
#include "support/sizes.h"

namespace acrobat {

const char* op_class_name(OpClass c) {
  switch (c) {
    case OpClass::Gemm: return "gemm";
    case OpClass::Elementwise: return "elementwise";
    case OpClass::RowWise: return "row-wise";
    case OpClass::Reduce: return "reduce";
    case OpClass::DataMovement: return "data-movement";
    case OpClass::Constant: return "constant";
    case OpClass::HostRead: return "host-read";
  }
  return "?";
}

int normalize_axis(int64_t axis, size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) return -1;
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

namespace {

ShapeResult ok(std::vector<int64_t> shape) { return {tensor_type(std::move(shape)), ""}; }
ShapeResult fail(std::string error) { return {nullptr, std::move(error)}; }

std::string axis_error(int64_t axis, size_t rank) {
  return "axis " + std::to_string(axis) + " is out of range for a tensor of rank " +
         std::to_string(rank);
}

// ---- shape rules ----
ShapeResult shape_MatMul(Shapes in, const OpAttrs&) {
  const auto& a = in[0];
  const auto& b = in[1];
  // [M, K] @ [K, N]; a stack of matrices [H, M, K] @ [H, K, N] (one product per leading index);
  // or [H, M, K] @ [K, N] (one right operand for every matrix of the stack).
  const bool ranks = (a.size() == 2 && b.size() == 2) || (a.size() == 3 && (b.size() == 2 || b.size() == 3));
  if (!ranks)
    return fail("matmul expects [M, K] @ [K, N], [H, M, K] @ [H, K, N] or [H, M, K] @ [K, N], found " +
                shape_str(a) + " and " + shape_str(b));
  if (a.size() == 3 && b.size() == 3 && a[0] != b[0])
    return fail("matmul of two stacks of matrices needs as many in each: " + shape_str(a) + " @ " +
                shape_str(b) + " (expected " + dim_str(a[0]) + " to equal " + dim_str(b[0]) + ")");
  const int64_t k_left = a.back(), k_right = b[b.size() - 2];
  if (k_left != k_right)
    return fail("matmul inner dimensions differ: " + shape_str(a) + " @ " + shape_str(b) +
                " (expected the left operand's columns " + dim_str(k_left) +
                " to equal the right operand's rows " + dim_str(k_right) + ")");
  if (a.size() == 2) return ok({a[0], b[1]});
  return ok({a[0], a[1], b.back()});
}

ShapeResult broadcast(Shapes in, const OpAttrs&) {
  const auto& a = in[0];
  const auto& b = in[1];
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return fail("shapes " + shape_str(a) + " and " + shape_str(b) +
                  " do not broadcast (dimension " + std::to_string(i) + ": " + dim_str(da) +
                  " vs " + dim_str(db) + ")");
    out[i] = da == 1 ? db : da;  // a size variable is never 1
  }
  return ok(out);
}
ShapeResult shape_Add(Shapes in, const OpAttrs& a) { return broadcast(in, a); }
ShapeResult shape_Sub(Shapes in, const OpAttrs& a) { return broadcast(in, a); }
ShapeResult shape_Mul(Shapes in, const OpAttrs& a) { return broadcast(in, a); }
ShapeResult shape_Div(Shapes in, const OpAttrs& a) { return broadcast(in, a); }

ShapeResult same_shape(Shapes in, const OpAttrs&) { return ok(in[0]); }
ShapeResult shape_Neg(Shapes in, const OpAttrs& a) { return same_shape(in, a); }
ShapeResult shape_Sigmoid(Shapes in, const OpAttrs& a) { return same_shape(in, a); }
ShapeResult shape_Tanh(Shapes in, const OpAttrs& a) { return same_shape(in, a); }
ShapeResult shape_Relu(Shapes in, const OpAttrs& a) { return same_shape(in, a); }
ShapeResult shape_Exp(Shapes in, const OpAttrs& a) { return same_shape(in, a); }
ShapeResult shape_Log(Shapes in, const OpAttrs& a) { return same_shape(in, a); }

// softmax and log_softmax along the last axis, which the kernels read; along the one before it (a
// matrix's columns, each matrix's of a stack), which lowering turns into the last between two
// transposes (ir/lower.cpp).
ShapeResult softmax_shape(Shapes in, const OpAttrs& a) {
  if (in[0].empty()) return fail("expected a tensor of rank at least 1, found a scalar f32[]");
  const size_t rank = in[0].size();
  const int axis = normalize_axis(a.ints[0], rank);
  if (axis < 0) return fail("axis " + std::to_string(a.ints[0]) + " is out of range for f32" + shape_str(in[0]));
  return ok(in[0]);
}
ShapeResult shape_Softmax(Shapes in, const OpAttrs& a) { return softmax_shape(in, a); }
ShapeResult shape_LogSoftmax(Shapes in, const OpAttrs& a) { return softmax_shape(in, a); }

ShapeResult shape_LayerNorm(Shapes in, const OpAttrs& a) {
  if (in[0].empty()) return fail("layer_norm expects a tensor of rank at least 1, found f32[]");
  int64_t n = in[0].back();
  for (int i = 1; i <= 2; ++i) {
    if (in[i].empty() || in[i].back() != n || is_ragged(in[i]) || num_elements(in[i]) != n)
      return fail(std::string("layer_norm's ") + (i == 1 ? "gamma" : "beta") + " must be f32[" +
                  dim_str(n) + "] or f32[1, " + dim_str(n) + "], found f32" + shape_str(in[i]));
  }
  return ok(in[0]);
}

ShapeResult reduce(Shapes in, const OpAttrs& attrs) {
  int axis = normalize_axis(attrs.ints[0], in[0].size());
  if (axis < 0) return fail(axis_error(attrs.ints[0], in[0].size()));
  auto out = in[0];
  out[axis] = 1;  // reductions keep the reduced axis, so [1, H] stays two-dimensional
  return ok(out);
}
ShapeResult shape_Sum(Shapes in, const OpAttrs& a) { return reduce(in, a); }
ShapeResult shape_Mean(Shapes in, const OpAttrs& a) { return reduce(in, a); }
ShapeResult shape_Max(Shapes in, const OpAttrs& a) { return reduce(in, a); }

ShapeResult shape_Concat(Shapes in, const OpAttrs& attrs) {
  const auto& first = in[0];
  int axis = normalize_axis(attrs.ints[0], first.size());
  if (axis < 0) return fail(axis_error(attrs.ints[0], first.size()));
  auto out = first;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].size() == first.size() && is_size_var(in[i][axis]))
      return fail("concat along axis " + std::to_string(axis) + ": operand " +
                  std::to_string(i + 1) + " is f32" + shape_str(in[i]) +
                  ", whose size along it is a size variable (concat joins fixed sizes only)");
  for (size_t i = 1; i < in.size(); ++i) {
    bool compatible = in[i].size() == first.size();
    for (size_t d = 0; compatible && d < first.size(); ++d)
      if (static_cast<int>(d) != axis && in[i][d] != first[d]) compatible = false;
    if (!compatible)
      return fail("concat along axis " + std::to_string(axis) + " needs equal other dimensions: " +
                  "operand 1 is f32" + shape_str(first) + ", operand " + std::to_string(i + 1) +
                  " is f32" + shape_str(in[i]));
    std::optional<int64_t> joined = checked_add(out[axis], in[i][axis]);
    if (!joined)
      return fail("concat along axis " + std::to_string(axis) +
                  ": the joined size overflows 64-bit integers");
    out[axis] = *joined;
  }
  return ok(out);
}

ShapeResult shape_Slice(Shapes in, const OpAttrs& attrs) {
  int axis = normalize_axis(attrs.ints[2], in[0].size());
  if (axis < 0) return fail(axis_error(attrs.ints[2], in[0].size()));
  int64_t begin = attrs.ints[0], end = attrs.ints[1], n = in[0][axis];
  auto out = in[0];
  if (attrs.is_size(0))
    return fail("slice: the begin of a slice must be a constant; a size variable may only be its "
                "end, as in slice(x, 0, n)");
  if (attrs.is_size(1)) {
    // The first `end` entries of the axis; that they exist is checked per instance (slice_checks).
    if (begin != 0)
      return fail("slice [" + std::to_string(begin) + ", " + dim_str(end) +
                  "): a slice that ends at a size variable must begin at 0");
    out[axis] = end;
    return ok(out);
  }
  // Constant bounds of an axis whose size is a size variable are checked per instance.
  if (begin < 0 || (!is_size_var(n) && end > n) || begin >= end)
    return fail("slice [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") is not a non-empty range within 0.." + dim_str(n) + " of axis " +
                std::to_string(axis));
  out[axis] = end - begin;
  return ok(out);
}

ShapeResult shape_Transpose(Shapes in, const OpAttrs&) {
  const auto& x = in[0];
  if (x.size() != 2 && x.size() != 3)
    return fail("transpose expects a 2-D tensor or a stack of matrices [H, M, N], found f32" +
                shape_str(x));
  auto out = x;
  std::swap(out[out.size() - 1], out[out.size() - 2]);
  return ok(out);
}

ShapeResult shape_Heads(Shapes in, const OpAttrs& attrs) {
  const auto& x = in[0];
  const int64_t h = attrs.ints[0];
  if (x.size() != 2)
    return fail("heads expects a 2-D tensor [M, H * E], found f32" + shape_str(x));
  if (h <= 0) return fail("the number of heads must be positive, found " + std::to_string(h));
  if (is_size_var(x[1]) || x[1] % h != 0)
    return fail(std::to_string(h) + " heads need columns a multiple of " +
                std::to_string(h) + ", found f32" + shape_str(x));
  return ok({h, x[0], x[1] / h});
}

ShapeResult shape_MergeHeads(Shapes in, const OpAttrs&) {
  const auto& x = in[0];
  if (x.size() != 3 || is_size_var(x[0]) || is_size_var(x[2]))
    return fail("merge_heads expects a stack of head matrices [H, M, E] with H and E fixed, found f32" +
                shape_str(x));
  std::optional<int64_t> cols = checked_mul(x[0], x[2]);
  if (!cols) return fail("merge_heads: the merged size overflows 64-bit integers");
  return ok({x[1], *cols});
}

// causal(x): a square matrix [n, n] (or each of a stack [H, n, n]) with every entry above the
// diagonal -infinity, the mask of self-attention over a sequence's own earlier positions.
ShapeResult shape_Causal(Shapes in, const OpAttrs&) {
  const auto& x = in[0];
  if ((x.size() != 2 && x.size() != 3) || x[x.size() - 1] != x[x.size() - 2])
    return fail("causal expects square matrices, [n, n] or a stack [H, n, n], found f32" + shape_str(x));
  return ok(x);
}

ShapeResult constant_shape(Shapes, const OpAttrs& attrs) {
  for (size_t i = 0; i < attrs.ints.size(); ++i)
    if (attrs.ints[i] <= 0 && !attrs.is_size(i))
      return fail("tensor sizes must be positive, found " + std::to_string(attrs.ints[i]));
  // Too many elements for one tensor is reported by the checker, for every operator's result.
  return ok(attrs.ints);
}
ShapeResult shape_Zeros(Shapes in, const OpAttrs& a) { return constant_shape(in, a); }
ShapeResult shape_Ones(Shapes in, const OpAttrs& a) { return constant_shape(in, a); }
ShapeResult shape_Constant(Shapes, const OpAttrs&) { return ok({}); }
ShapeResult shape_HostScalar(Shapes, const OpAttrs&) { return ok({}); }

// argmax and sample read a tensor of any shape, its size per instance too (a pointer network's
// [1, n] scores). argmax's rank r > 0 (the entry r places below the first, topk's r-th index) needs a
// tensor of more than r elements, which only a fixed size shows.
// A rank above 0 of a tensor with a size variable is checked when the instance runs (the host
// reads the tensor, knowing its count); its message names the count and that one size (ragged
// engines report it from those two numbers, host_runtime.cpp), so such a tensor has one.
ShapeResult shape_Argmax(Shapes in, const OpAttrs& a) {
  const int64_t rank = a.ints[0];
  if (rank < 0) return fail("rank " + std::to_string(rank) + " is negative");
  if (rank == 0) return {int_type(), ""};
  if (std::count_if(in[0].begin(), in[0].end(), [](int64_t d) { return is_size_var(d); }) > 1)
    return fail("rank " + std::to_string(rank) + " reads a tensor with at most one size that varies per "
                "instance, found f32" + shape_str(in[0]) + " (rank 0, the first maximum, reads any)");
  if (!is_ragged(in[0]) && rank >= num_elements(in[0]))
    return fail("rank " + std::to_string(rank) + " of a tensor of " + std::to_string(num_elements(in[0])) +
                " element(s): the rank must be below the count");
  return {int_type(), ""};
}
ShapeResult shape_Sample(Shapes, const OpAttrs&) { return {int_type(), ""}; }
ShapeResult shape_Item(Shapes in, const OpAttrs&) {
  if (is_ragged(in[0]) || num_elements(in[0]) != 1)
    return fail("item reads a tensor of exactly one element, found f32" + shape_str(in[0]));
  return {float_type(), ""};
}

// ---- FLOP counts: multiply-adds count two; transcendental functions count one ----
// A product of sizes as a FLOP count. The checker bounds every tensor (kMaxTensorElements), which
// keeps real counts far below 2^63; were one larger, it saturates rather than wrapping.
int64_t flop_product(std::initializer_list<int64_t> factors) {
  return checked_product<int64_t>(factors).value_or(INT64_MAX);
}
int64_t zero_flops(Shapes, const std::vector<int64_t>&, const OpAttrs&) { return 0; }
int64_t out_elements(Shapes, const std::vector<int64_t>& out, const OpAttrs&) {
  return num_elements(out);
}
int64_t in_elements(Shapes in, const std::vector<int64_t>&, const OpAttrs&) {
  return num_elements(in[0]);
}
int64_t flops_MatMul(Shapes in, const std::vector<int64_t>& out, const OpAttrs&) {
  return flop_product({2, num_elements(out), in[0].back()});
}
#define ACROBAT_ELEMENTWISE_FLOPS(id) \
  int64_t flops_##id(Shapes in, const std::vector<int64_t>& out, const OpAttrs& a) { \
    return out_elements(in, out, a);                                               \
  }
ACROBAT_ELEMENTWISE_FLOPS(Add)
ACROBAT_ELEMENTWISE_FLOPS(Sub)
ACROBAT_ELEMENTWISE_FLOPS(Mul)
ACROBAT_ELEMENTWISE_FLOPS(Div)
ACROBAT_ELEMENTWISE_FLOPS(Neg)
ACROBAT_ELEMENTWISE_FLOPS(Sigmoid)
ACROBAT_ELEMENTWISE_FLOPS(Tanh)
ACROBAT_ELEMENTWISE_FLOPS(Relu)
ACROBAT_ELEMENTWISE_FLOPS(Exp)
ACROBAT_ELEMENTWISE_FLOPS(Log)
#undef ACROBAT_ELEMENTWISE_FLOPS
int64_t flops_Softmax(Shapes in, const std::vector<int64_t>& out, const OpAttrs&) {
  return flop_product({4, num_elements(out)});  // max, subtract, exp, divide
}
int64_t flops_LogSoftmax(Shapes in, const std::vector<int64_t>& out, const OpAttrs&) {
  return flop_product({4, num_elements(out)});
}
int64_t flops_LayerNorm(Shapes in, const std::vector<int64_t>& out, const OpAttrs&) {
  return flop_product({8, num_elements(out)});
}
int64_t flops_Sum(Shapes in, const std::vector<int64_t>& o, const OpAttrs& a) {
  return in_elements(in, o, a);
}
int64_t flops_Mean(Shapes in, const std::vector<int64_t>& o, const OpAttrs& a) {
  return in_elements(in, o, a);
}
int64_t flops_Max(Shapes in, const std::vector<int64_t>& o, const OpAttrs& a) {
  return in_elements(in, o, a);
}
int64_t flops_Argmax(Shapes in, const std::vector<int64_t>& o, const OpAttrs& a) {
  return in_elements(in, o, a);
}
int64_t flops_Sample(Shapes in, const std::vector<int64_t>& o, const OpAttrs& a) {
  return in_elements(in, o, a);
}
int64_t flops_Concat(Shapes in, const std::vector<int64_t>& o, const OpAttrs& a) {
  return zero_flops(in, o, a);
}
int64_t flops_Slice(Shapes in, const std::vector<int64_t>& o, const OpAttrs& a) {
  return zero_flops(in, o, a);
}
int64_t flops_Transpose(Shapes in, const std::vector<int64_t>& o, const OpAttrs& a) {
  return zero_flops(in, o, a);
}
int64_t flops_Heads(Shapes in, const std::vector<int64_t>& o, const OpAttrs& a) {
  return zero_flops(in, o, a);
}
int64_t flops_MergeHeads(Shapes in, const std::vector<int64_t>& o, const OpAttrs& a) {
  return zero_flops(in, o, a);
}
int64_t flops_Causal(Shapes in, const std::vector<int64_t>& o, const OpAttrs& a) {
  return zero_flops(in, o, a);
}
int64_t flops_Zeros(Shapes in, const std::vector<int64_t>& o, const OpAttrs& a) {
  return zero_flops(in, o, a);
}
int64_t flops_Ones(Shapes in, const std::vector<int64_t>& o, const OpAttrs& a) {
  return zero_flops(in, o, a);
}
int64_t flops_Constant(Shapes in, const std::vector<int64_t>& o, const OpAttrs& a) {
  return zero_flops(in, o, a);
}
int64_t flops_HostScalar(Shapes in, const std::vector<int64_t>& o, const OpAttrs& a) {
  return zero_flops(in, o, a);
}
int64_t flops_Item(Shapes in, const std::vector<int64_t>& o, const OpAttrs& a) {
  return zero_flops(in, o, a);
}

std::vector<OpAttrSpec> parse_attr_spec(const char* spec) {
  std::vector<OpAttrSpec> out;
  std::string s = spec;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    OpAttrSpec a;
    if (!item.empty() && item[0] == '*') {
      a.variadic = true;
      item = item.substr(1);
    }
    size_t eq = item.find('=');
    if (eq != std::string::npos) {
      a.has_default = true;
      a.default_value = std::strtoll(item.c_str() + eq + 1, nullptr, 10);
      item = item.substr(0, eq);
    }
    a.name = item;
    out.push_back(a);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

#define ACROBAT_OP(id, name, arity, attrs, cls, simd, adjoint) ACROBAT_CHECK_OP_ROW(id, name, arity, cls, simd, adjoint)
#include "ops/ops.def"
#undef ACROBAT_OP

const std::vector<OpInfo>& table() {
  static const std::vector<OpInfo> ops = {
#define ACROBAT_OP(id, name, arity, attrs, cls, simd, adjoint)                                              \
  OpInfo{OpId::id, name, arity, parse_attr_spec(attrs), OpClass::cls, &shape_##id, &flops_##id, #simd, #adjoint},
#include "ops/ops.def"
#undef ACROBAT_OP
  };
  return ops;
}

}  // namespace

const OpInfo& op_info(OpId id) { return table()[static_cast<size_t>(id)]; }

OpAttrs bind_attr_sizes(const OpAttrs& attrs, const int64_t* dims, const int64_t* values, size_t n) {
  OpAttrs out = attrs;
  out.sizes = 0;
  for (size_t i = 0; i < out.ints.size(); ++i)
    if (attrs.is_size(i)) out.ints[i] = size_value(attrs.ints[i], dims, values, n);
  return out;
}

std::string instance_shape_error(OpId op, Shapes in, const OpAttrs& attrs, const std::string& sizes) {
  ShapeResult r = op_info(op).shape(in, attrs);
  const std::string name = op_info(op).name;
  if (r.type) {
    if (!is_tensor(r.type)) return "";
    // As the checker bounds every fixed shape (kMaxTensorElements: the kernels index with int).
    std::optional<int64_t> n = checked_product<int64_t>(r.type->shape);
    if (n && *n <= kMaxTensorElements) return "";
    return name + ": with this instance's sizes (" + sizes + ") its result f32" + shape_str(r.type->shape) +
           " has more than " + std::to_string(kMaxTensorElements) +
           " elements, the most a tensor holds (the kernels index elements with int)";
  }
  const bool named = r.error.rfind(name + " ", 0) == 0;
  return (named ? r.error : name + ": " + r.error) + " (with this instance's sizes " + sizes + ")";
}

const OpInfo* find_op(const std::string& name) {
  static const std::map<std::string, const OpInfo*> by_name = [] {
    std::map<std::string, const OpInfo*> m;
    for (const auto& op : table()) m[op.name] = &op;
    return m;
  }();
  auto it = by_name.find(name);
  return it == by_name.end() ? nullptr : it->second;
}

}  // namespace acrobat
