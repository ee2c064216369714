// Types of the model language: host scalars, static-shape tensors, tuples, algebraic data types,
// functions, and the type variables/parameters that generic prelude functions need.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/diagnostics.h"

namespace acrobat {

struct TypeNode;
using Type = std::shared_ptr<const TypeNode>;
struct AdtDef;

enum class TypeKind {
  Int,     // host int (64-bit)
  Float,   // host float (64-bit on the host; tensors are f32)
  Bool,    // host bool
  Tensor,  // f32 tensor: each dimension a constant or a size variable
  Tuple,   // (T1, T2, ...); the empty tuple is the unit type
  Adt,     // user or prelude data type applied to type arguments, e.g. List[int]
  Func,    // fn(T1, ...) -> R
  Var,     // an inference variable, solved by unification inside the checker
  Param,   // a generic function's or data type's type parameter, e.g. `a` in List[a]
};

struct TypeNode {
  TypeKind kind;
  std::vector<int64_t> shape;  // Tensor: a constant (> 0) or a size variable (< 0) per dimension
  std::vector<Type> args;      // Tuple elements, Adt type arguments, Func parameters
  Type ret;                    // Func result
  const AdtDef* adt = nullptr; // Adt
  int var = -1;                // Var
  std::string name;            // Param
};

Type int_type();
Type float_type();
Type bool_type();
Type unit_type();
Type tensor_type(std::vector<int64_t> shape);
Type tuple_type(std::vector<Type> elems);
Type adt_type(const AdtDef* adt, std::vector<Type> args);
Type func_type(std::vector<Type> params, Type ret);
Type var_type(int id);
Type param_type(std::string name);

// Size variables: a dimension fixed per instance, not per model (`n` in `f32[n, D]`). In a shape
// a size variable is a negative number: size variable k is -1 - k. The checker numbers them per
// module (a function's own are rigid inside it, and each call instantiates them afresh).
inline bool is_size_var(int64_t dim) { return dim < 0; }
inline int64_t size_var(int k) { return -1 - static_cast<int64_t>(k); }
inline int size_var_index(int64_t dim) { return static_cast<int>(-1 - dim); }
// True when some dimension of `shape` is a size variable.
bool is_ragged(const std::vector<int64_t>& shape);
// The names shape_str and type_str give size variables (by index) on this thread while one is
// alive; without one, size variable k prints as `?k`.
class SizeNamesScope {
 public:
  explicit SizeNamesScope(const std::vector<std::string>& names);
  ~SizeNamesScope();
  SizeNamesScope(const SizeNamesScope&) = delete;
  SizeNamesScope& operator=(const SizeNamesScope&) = delete;

 private:
  const std::vector<std::string>* previous_;
};

// A size that concat joins along a size variable's axis (`[t, D]` and `[1, D]` give `[t + 1, D]`)
// is a size variable of its own, the sum of the joined sizes: a count of each size variable that is
// no sum itself (a parameter's, a gather's) plus a constant. One sum is one size, however it was
// joined (`t + 1 + 1` and `t + 2`; `n + m` and `m + n`), so that a concat's result has the type a
// call wants. Its value is computed from the terms' values wherever it is needed.
struct SizeSum {
  std::map<int64_t, int64_t> terms;  // size variable -> count (> 0)
  int64_t constant = 0;
  auto operator<=>(const SizeSum&) const = default;
};
using SizeSums = std::map<int64_t, SizeSum>;  // joined size -> its sum

// The value of `dim`: itself when it is a constant, else values[i] for the size variable dims[i]
// (it must be there).
int64_t size_value(int64_t dim, const int64_t* dims, const int64_t* values, size_t n);
// The same where `dim` may be a joined size (SizeSum): its value is its terms'.
int64_t size_value(int64_t dim, const int64_t* dims, const int64_t* values, size_t n, const SizeSums& sums);
// `shape` with each size variable replaced by its value (size_value).
std::vector<int64_t> bind_sizes(const std::vector<int64_t>& shape, const int64_t* dims,
                                const int64_t* values, size_t n, const SizeSums* sums = nullptr);

bool is_host_scalar(const Type& t);
bool is_tensor(const Type& t);
// The element count of a shape without size variables. The checker admits no tensor type above
// kMaxTensorElements (support/sizes.h), so shapes it made never overflow; a larger one saturates at
// INT64_MAX rather than wrapping, so that no allocation or loop bound is ever a wrapped number.
int64_t num_elements(const std::vector<int64_t>& shape);
std::string shape_str(const std::vector<int64_t>& shape);  // "[1, 256]", "[n, 512]"
std::string dim_str(int64_t dim);                         // "256", "n"
std::string type_str(const Type& t);
// Structural equality; type variables compare by id.
bool type_equal(const Type& a, const Type& b);
// The one walk over type structure that type_equal and the checker's unification share: true when
// a and b have the same kind and the same tensor shape, variable id, parameter name or data type,
// and as many component types (tuple elements, type arguments, function parameters), and `same`
// holds for each pair of components in order and then for a function's results; it stops at the
// first pair for which `same` fails.
template <class Same>
bool same_structure(const Type& a, const Type& b, Same&& same) {
  if (a->kind != b->kind) return false;
  switch (a->kind) {
    case TypeKind::Int:
    case TypeKind::Float:
    case TypeKind::Bool: return true;
    case TypeKind::Tensor: return a->shape == b->shape;
    case TypeKind::Var: return a->var == b->var;
    case TypeKind::Param: return a->name == b->name;
    case TypeKind::Adt:
      if (a->adt != b->adt) return false;
      [[fallthrough]];
    case TypeKind::Tuple:
    case TypeKind::Func:
      if (a->args.size() != b->args.size()) return false;
      for (size_t i = 0; i < a->args.size(); ++i)
        if (!same(a->args[i], b->args[i])) return false;
      return a->kind != TypeKind::Func || same(a->ret, b->ret);
  }
  return false;
}
// Replaces Param types by name (for instantiating ADT constructor fields or generic functions).
Type substitute_params(const Type& t, const std::vector<std::string>& names,
                       const std::vector<Type>& values);

struct CtorDef {
  std::string name;
  const AdtDef* adt = nullptr;
  int tag = 0;                // index among the data type's constructors
  std::vector<Type> fields;   // may mention the data type's parameters
  Span span;
};

struct AdtDef {
  std::string name;
  std::vector<std::string> type_params;
  std::vector<std::unique_ptr<CtorDef>> ctors;
  Span span;
  // The prelude's List[a] is read and written as a JSON array rather than nested constructors.
  bool is_list() const { return name == "List"; }
};

}  // namespace acrobat
