// The operator registry (see ops.def): what the type checker, the engines and the FLOP accounting
// know about each tensor operator.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "types/types.h"

namespace acrobat {

enum class OpId {
#define ACROBAT_OP(id, name, arity, attrs, cls, simd, adjoint) id,
#include "ops/ops.def"
#undef ACROBAT_OP
};
inline constexpr int kNumOps = 0
#define ACROBAT_OP(id, name, arity, attrs, cls, simd, adjoint) +1
#include "ops/ops.def"
#undef ACROBAT_OP
    ;

// How an operator may be fused and batched.
enum class OpClass {
  Gemm,          // matrix multiply: the FLOPs
  Elementwise,   // same-shape or broadcasting arithmetic and activations
  RowWise,       // independent per row of the last axis (softmax, layer norm)
  Reduce,        // reduction along one axis
  DataMovement,  // concat, slice, transpose: copies only
  Constant,      // no inputs
  HostRead,      // tensor-to-host read (argmax, item): a tensor-dependent decision point
};
const char* op_class_name(OpClass c);

// Integer attributes of one call, after defaults are applied, plus the value of a `constant`.
// An integer attribute may be a size variable (`slice(x, 0, n)`, `zeros(n, D)`): it then holds the
// size variable's shape entry (types.h) and its bit in `sizes` is set.
struct OpAttrs {
  std::vector<int64_t> ints;
  double value = 0;
  uint64_t sizes = 0;  // bit i: ints[i] is a size variable

  bool is_size(size_t i) const { return i < 64 && ((sizes >> i) & 1) != 0; }
};

struct OpAttrSpec {
  std::string name;
  bool has_default = false;
  int64_t default_value = 0;
  bool variadic = false;
};

// Result of a shape rule: a type, or an error message saying what was expected and found.
struct ShapeResult {
  Type type;
  std::string error;
};
using Shapes = std::span<const std::vector<int64_t>>;
using ShapeRule = ShapeResult (*)(Shapes in, const OpAttrs& attrs);
using FlopRule = int64_t (*)(Shapes in, const std::vector<int64_t>& out, const OpAttrs& attrs);

struct OpInfo {
  OpId id;
  const char* name;
  int arity;  // number of tensor operands; -1 means one or more
  std::vector<OpAttrSpec> attrs;
  OpClass op_class;
  ShapeRule shape;
  FlopRule flops;
  // Elementwise operators: the fused SIMD expression of ops.def in `a` and `b`, e.g. "(a + b)";
  // "()" for the other classes.
  const char* simd;
  // Elementwise operators: the adjoint SIMD expressions of ops.def, one per operand in a, b, y
  // and g, e.g. "(g * b, g * a)"; "()" for the other classes.
  const char* adjoint;
};

const OpInfo& op_info(OpId id);
// Looks an operator up by its name in the language; nullptr when there is none.
const OpInfo* find_op(const std::string& name);

// `attrs` with its size variables replaced by their values (size_value of types.h).
OpAttrs bind_attr_sizes(const OpAttrs& attrs, const int64_t* dims, const int64_t* values, size_t n);

// An operator whose shapes have size variables checks them again when an instance runs, on that
// instance's shapes and attributes (size variables replaced by their values): the message a
// user error gives when the instance breaks the shape rule or its result has more elements than
// a tensor may, "" when neither. `sizes` names the instance's sizes, e.g. "n = 1".
std::string instance_shape_error(OpId op, Shapes in, const OpAttrs& attrs, const std::string& sizes);

// Normalises a possibly negative axis for a tensor of `rank`; returns -1 when out of range.
int normalize_axis(int64_t axis, size_t rank);

}  // namespace acrobat
