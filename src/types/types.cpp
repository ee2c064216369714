#include "types/types.h"

#include "support/sizes.h"

namespace acrobat {

namespace {
Type make(TypeKind kind) {
  auto t = std::make_shared<TypeNode>();
  t->kind = kind;
  return t;
}
}  // namespace

Type int_type() {
  static const Type t = make(TypeKind::Int);
  return t;
}
Type float_type() {
  static const Type t = make(TypeKind::Float);
  return t;
}
Type bool_type() {
  static const Type t = make(TypeKind::Bool);
  return t;
}
Type unit_type() {
  static const Type t = make(TypeKind::Tuple);
  return t;
}

Type tensor_type(std::vector<int64_t> shape) {
  auto t = std::make_shared<TypeNode>();
  t->kind = TypeKind::Tensor;
  t->shape = std::move(shape);
  return t;
}

Type tuple_type(std::vector<Type> elems) {
  auto t = std::make_shared<TypeNode>();
  t->kind = TypeKind::Tuple;
  t->args = std::move(elems);
  return t;
}

Type adt_type(const AdtDef* adt, std::vector<Type> args) {
  auto t = std::make_shared<TypeNode>();
  t->kind = TypeKind::Adt;
  t->adt = adt;
  t->args = std::move(args);
  return t;
}

Type func_type(std::vector<Type> params, Type ret) {
  auto t = std::make_shared<TypeNode>();
  t->kind = TypeKind::Func;
  t->args = std::move(params);
  t->ret = std::move(ret);
  return t;
}

Type var_type(int id) {
  auto t = std::make_shared<TypeNode>();
  t->kind = TypeKind::Var;
  t->var = id;
  return t;
}

Type param_type(std::string name) {
  auto t = std::make_shared<TypeNode>();
  t->kind = TypeKind::Param;
  t->name = std::move(name);
  return t;
}

bool is_host_scalar(const Type& t) {
  return t->kind == TypeKind::Int || t->kind == TypeKind::Float || t->kind == TypeKind::Bool;
}

bool is_tensor(const Type& t) { return t->kind == TypeKind::Tensor; }

bool is_ragged(const std::vector<int64_t>& shape) {
  for (int64_t d : shape)
    if (is_size_var(d)) return true;
  return false;
}

namespace {
thread_local const std::vector<std::string>* size_names = nullptr;
}  // namespace

SizeNamesScope::SizeNamesScope(const std::vector<std::string>& names) : previous_(size_names) {
  size_names = &names;
}
SizeNamesScope::~SizeNamesScope() { size_names = previous_; }

int64_t num_elements(const std::vector<int64_t>& shape) {
  ACROBAT_ASSERT(!is_ragged(shape), "num_elements of a shape with size variables");
  return checked_product<int64_t>(shape).value_or(INT64_MAX);
}

int64_t size_value(int64_t dim, const int64_t* dims, const int64_t* values, size_t n) {
  if (!is_size_var(dim)) return dim;
  for (size_t i = 0; i < n; ++i)
    if (dims[i] == dim) return values[i];
  ACROBAT_ASSERT(false, "a size variable without a value");
  return 0;
}

int64_t size_value(int64_t dim, const int64_t* dims, const int64_t* values, size_t n, const SizeSums& sums) {
  auto sum = sums.find(dim);
  if (sum == sums.end()) return size_value(dim, dims, values, n);
  int64_t value = sum->second.constant;
  for (const auto& [d, count] : sum->second.terms) {
    int64_t term = 0;
    const bool overflow = __builtin_mul_overflow(size_value(d, dims, values, n), count, &term) ||
                          __builtin_add_overflow(value, term, &value);
    // The host program computed this size before any tensor of it was made.
    ACROBAT_ASSERT(!overflow, "a joined size that overflows");
  }
  return value;
}

std::vector<int64_t> bind_sizes(const std::vector<int64_t>& shape, const int64_t* dims,
                                const int64_t* values, size_t n, const SizeSums* sums) {
  std::vector<int64_t> out = shape;
  for (int64_t& d : out) d = sums ? size_value(d, dims, values, n, *sums) : size_value(d, dims, values, n);
  return out;
}

std::string dim_str(int64_t d) {
  if (!is_size_var(d)) return std::to_string(d);
  const size_t k = static_cast<size_t>(size_var_index(d));
  if (size_names && k < size_names->size()) return (*size_names)[k];
  std::string s = std::to_string(k);
  s.insert(s.begin(), '?');
  return s;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += dim_str(shape[i]);
  }
  return s + "]";
}

namespace {
std::string list_str(const std::vector<Type>& types) {
  std::string s;
  for (size_t i = 0; i < types.size(); ++i) {
    if (i) s += ", ";
    s += type_str(types[i]);
  }
  return s;
}
}  // namespace

std::string type_str(const Type& t) {
  switch (t->kind) {
    case TypeKind::Int: return "int";
    case TypeKind::Float: return "float";
    case TypeKind::Bool: return "bool";
    case TypeKind::Tensor: return "f32" + shape_str(t->shape);
    case TypeKind::Tuple: {
      // Appended piece by piece: GCC 12 reports a false -Wrestrict on "(" + std::string here.
      std::string s = "(";
      s += t->args.size() == 1 ? type_str(t->args[0]) + "," : list_str(t->args);
      s += ")";
      return s;
    }
    case TypeKind::Adt:
      return t->args.empty() ? t->adt->name : t->adt->name + "[" + list_str(t->args) + "]";
    case TypeKind::Func: return "fn(" + list_str(t->args) + ") -> " + type_str(t->ret);
    case TypeKind::Var: {
      std::string s = "?";
      s += std::to_string(t->var);
      return s;
    }
    case TypeKind::Param: return t->name;
  }
  return "?";
}

bool type_equal(const Type& a, const Type& b) {
  return a == b || same_structure(a, b, type_equal);
}

Type substitute_params(const Type& t, const std::vector<std::string>& names,
                       const std::vector<Type>& values) {
  switch (t->kind) {
    case TypeKind::Param:
      for (size_t i = 0; i < names.size(); ++i)
        if (names[i] == t->name) return values[i];
      return t;
    case TypeKind::Tuple:
    case TypeKind::Adt:
    case TypeKind::Func: {
      auto copy = std::make_shared<TypeNode>(*t);
      for (auto& a : copy->args) a = substitute_params(a, names, values);
      if (copy->ret) copy->ret = substitute_params(copy->ret, names, values);
      return copy;
    }
    default: return t;
  }
}

}  // namespace acrobat
