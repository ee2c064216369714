// Run-time values of the host program: host scalars, tensors, tuples, data-type values and closures.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "acrobat/aot.h"
#include "types/types.h"

namespace acrobat::kernels {
class PackedWeights;
}

namespace acrobat {

// A dense row-major float32 tensor. `data` may alias a larger buffer (a row of an indexed param).
struct Tensor {
  std::vector<int64_t> shape;
  std::shared_ptr<float[]> data;
  // Present for parameters used as the right operand of matmul: the same matrix prepared for the
  // GEMM kernels.
  std::shared_ptr<const kernels::PackedWeights> packed;

  int64_t size() const { return num_elements(shape); }
  static Tensor allocate(std::vector<int64_t> shape);  // uninitialised contents
  // `data` for memory the tensor does not own (a view of a buffer its owner keeps alive).
  static std::shared_ptr<float[]> borrow(float* p) { return std::shared_ptr<float[]>(std::shared_ptr<float[]>(), p); }
};

struct Value;
struct Aggregate;

struct Value {
  // Lazy: a tensor a batched engine has recorded but not yet computed, `ref` into its dataflow graph
  // (runtime/graph.h). Engines turn every Lazy into a Tensor before they hand values back.
  enum class Kind : uint8_t { Unit, Int, Float, Bool, Tensor, Tuple, Adt, Closure, Lazy };
  Kind kind = Kind::Unit;
  bool b = false;  // Bool
  int64_t i = 0;   // Int
  double f = 0;    // Float
  aot::Val ref{};  // Lazy
  std::shared_ptr<const Tensor> tensor;
  std::shared_ptr<const Aggregate> agg;  // Tuple, Adt, Closure

  static Value unit() { return Value{}; }
  static Value of_int(int64_t v) { Value x; x.kind = Kind::Int; x.i = v; return x; }
  static Value of_float(double v) { Value x; x.kind = Kind::Float; x.f = v; return x; }
  static Value of_bool(bool v) { Value x; x.kind = Kind::Bool; x.b = v; return x; }
  static Value of_tensor(Tensor t);
  static Value tuple(std::vector<Value> fields);
  static Value adt(const CtorDef* ctor, std::vector<Value> fields);
  static Value closure(int func, std::vector<Value> captures);
  static Value lazy(int32_t node, int32_t slot) {
    Value x;
    x.kind = Kind::Lazy;
    x.ref = aot::lazy_val(node, slot);
    return x;
  }
};

struct Aggregate {
  Aggregate() = default;
  Aggregate(const Aggregate&) = default;
  Aggregate(Aggregate&&) = default;
  Aggregate& operator=(const Aggregate&) = default;
  Aggregate& operator=(Aggregate&&) = default;
  // A long list is a chain of aggregates each owning the next: it is destroyed by a loop, not by a
  // recursion as deep as the list.
  ~Aggregate();

  const CtorDef* ctor = nullptr;  // Adt
  int func = -1;                  // Closure: index of the (lifted) function in the IR module
  std::vector<Value> fields;      // Tuple elements, Adt fields, Closure captures
};

}  // namespace acrobat
