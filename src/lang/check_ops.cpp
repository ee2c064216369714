// Operator calls and binary operators: constant integer arguments, tensor operands and attributes
// of registry operators, split, and the typing of + - * / % @, comparisons, && and ||.
#include <algorithm>

#include "ops/ops.h"
#include "lang/checker.h"

namespace acrobat::checker {

std::optional<int64_t> Checker::const_int(const Expr& e) {
  switch (e.kind) {
    case ExprKind::IntLit: return e.as<IntLit>().value;
    case ExprKind::Name: {
      const std::string& name = e.as<Name>().name;
      // A local that shadows a dim is a value computed at run time.
      bool local = std::any_of(scope_.vars.begin(), scope_.vars.end(),
                               [&](const LocalVarPtr& v) { return v->name == name; });
      if (const int64_t* v = dims_.find(name); v && !local) return *v;
      return std::nullopt;
    }
    case ExprKind::Unary:
      if (e.as<Unary>().op == '-')
        if (auto v = const_int(*e.as<Unary>().operand); v && *v != INT64_MIN) return -*v;
      return std::nullopt;
    case ExprKind::Binary: {
      // Along the chain by a loop, first operand first. Overflow, division by zero and
      // INT64_MIN / -1 make no constant (and the argument is then reported as not constant).
      auto chain = binary_chain(e);
      std::optional<int64_t> l = const_int(*chain.back()->lhs);
      for (size_t i = chain.size(); l && i-- > 0;) {
        const Binary& b = *chain[i];
        std::optional<int64_t> r = const_int(*b.rhs);
        if (!r) return std::nullopt;
        int64_t out = 0;
        bool ok = true;
        switch (b.op) {
          case BinOp::Add: ok = !__builtin_add_overflow(*l, *r, &out); break;
          case BinOp::Sub: ok = !__builtin_sub_overflow(*l, *r, &out); break;
          case BinOp::Mul: ok = !__builtin_mul_overflow(*l, *r, &out); break;
          case BinOp::Div:
          case BinOp::Mod:
            ok = *r != 0 && !(*l == INT64_MIN && *r == -1);
            if (ok) out = b.op == BinOp::Div ? *l / *r : *l % *r;
            break;
          default: ok = false;
        }
        l = ok ? std::optional(out) : std::nullopt;
      }
      return l;
    }
    default: return std::nullopt;
  }
}

std::optional<SizeSum> Checker::position(const Expr& e) {
  switch (e.kind) {
    case ExprKind::IntLit: return SizeSum{{}, e.as<IntLit>().value};
    case ExprKind::Name: {
      const std::string& name = e.as<Name>().name;
      if (LocalVarPtr local = lookup_local(name)) {
        // A host int computed at run time is a position too (slice(x, i, i + 1)): a size variable
        // that stands for it, which no type may show (slice_at_sizes).
        if (shallow(local->type)->kind != TypeKind::Int) return std::nullopt;
        auto [known, made] = local_sizes_.emplace(local.get(), 0);
        if (made) known->second = new_size(name, true);
        return SizeSum{{{known->second, 1}}, 0};
      }
      if (const int64_t* v = dims_.find(name)) return SizeSum{{}, *v};
      auto it = std::find_if(size_scope_->begin(), size_scope_->end(),
                             [&](const auto& s) { return s.first == name; });
      if (it == size_scope_->end()) return std::nullopt;
      return size_sum(it->second);
    }
    case ExprKind::Binary: {
      // Along the chain by a loop, first operand first (a chain's length is not nesting).
      auto chain = binary_chain(e);
      std::optional<SizeSum> l = position(*chain.back()->lhs);
      for (size_t i = chain.size(); l && i-- > 0;) {
        const Binary& b = *chain[i];
        std::optional<SizeSum> r = position(*b.rhs);
        if (!r) return std::nullopt;
        if (b.op == BinOp::Add) l = add_sums(*l, *r);
        else if (b.op == BinOp::Sub) l = add_sums(*l, *r, -1);
        else if (b.op == BinOp::Mul && l->terms.empty()) l = add_sums(SizeSum{}, *r, l->constant);
        else if (b.op == BinOp::Mul && r->terms.empty()) l = add_sums(SizeSum{}, *l, r->constant);
        else return std::nullopt;
      }
      return l;
    }
    default: return std::nullopt;
  }
}

std::optional<int64_t> Checker::size_attr(const Expr& e, const std::string& attr, const char* op) {
  if (!size_scope_) return std::nullopt;
  std::optional<SizeSum> sum = position(e);
  if (sum) std::erase_if(sum->terms, [](const auto& t) { return t.second == 0; });
  if (!sum || sum->terms.empty()) return std::nullopt;  // no size: a constant, or reported as none
  const std::string text = dim_str(joined_size(*sum));
  if (attr == "seed") return joined_size(*sum);  // any number the run computes
  if (attr != "end" && attr != "begin" && attr != "shape") {
    if (const std::string* local = run_time_term(*sum)) {
      sink_.error(e.span.begin, quote(attr) + " of " + op + " must be a constant (a literal or a dim), found " +
                                    quote(text) + (text == *local ? "" : ", from " + quote(*local)) +
                                    ", an int computed when the instance runs");
      return 0;
    }
    sink_.error(e.span.begin, quote(attr) + " of " + op + " is " + quote(text) +
                                  ", a size variable: a size may only be the begin or end of a "
                                  "slice (slice(x, 0, n), slice(x, n - 1, n)), give a size to "
                                  "zeros or ones, or seed sample");
    return 0;
  }
  if (attr == "shape")
    if (const std::string* local = run_time_term(*sum)) {
      sink_.error(e.span.begin, quote(attr) + " of " + op + " is " + quote(text) +
                                    ": a size is known before the instance runs, not computed by it ('" +
                                    *local + "')");
      return 0;
    }
  bool sizes = attr != "shape" || sum->constant >= 0;
  for (const auto& term : sum->terms) sizes = sizes && term.second > 0;
  if (!sizes) {
    sink_.error(e.span.begin, quote(attr) + " of " + op + " is " + quote(text) +
                                  (attr == "shape" ? ": a size is a sum of sizes (n + 1, 2 * n)"
                                                   : ": a position is a sum of sizes plus or minus a "
                                                     "constant (n - 1, t + 1)"));
    return 0;
  }
  return joined_size(*sum);
}

// Checks tensor operands, binds integer attributes (positional after the operands, or named).
bool Checker::bind_attrs(Call& c, const OpInfo& op, size_t tensor_args, OpAttrs& attrs) {
  const auto& specs = op.attrs;
  std::vector<std::optional<int64_t>> values(specs.size());
  std::vector<bool> given(specs.size());  // given, though perhaps not as a constant
  std::vector<bool> sized(specs.size());  // given as a size variable
  bool ok = true;
  size_t spec_i = 0;
  for (size_t i = tensor_args; i < c.args.size(); ++i) {
    auto v = const_int(*c.args[i]);
    if (!v && spec_i < specs.size()) {
      if (auto size = size_attr(*c.args[i], specs[spec_i].name, op.name)) {
        if (*size == 0) {  // reported
          ok = false;
          if (!specs[spec_i].variadic) given[spec_i++] = true;
          continue;
        }
        c.args[i]->type = int_type();
        const size_t at = attrs.ints.size() + (specs[spec_i].variadic ? 0 : spec_i);
        if (specs[spec_i].variadic) {
          if (at < 64) attrs.sizes |= uint64_t{1} << at;
          attrs.ints.push_back(*size);
        } else {
          sized[spec_i] = true;
          given[spec_i] = true;
          values[spec_i++] = *size;
        }
        continue;
      }
    }
    if (!v) {
      ok = false;
      if (spec_i < specs.size() && !specs[spec_i].variadic) given[spec_i++] = true;
      if (is_error(infer(*c.args[i]))) continue;  // reported already
      sink_.error(c.args[i]->span.begin,
                  std::string("argument ") + std::to_string(i + 1) + " of " + op.name +
                      ": expected a constant integer (a literal or a dim), found an expression "
                      "computed at run time");
      continue;
    }
    c.args[i]->type = int_type();
    if (spec_i < specs.size() && specs[spec_i].variadic) {
      attrs.ints.push_back(*v);
      continue;
    }
    if (spec_i >= specs.size()) {
      sink_.error(c.args[i]->span.begin, std::string(op.name) + " takes " +
                                             std::to_string(tensor_args + specs.size()) +
                                             " argument(s), found " +
                                             std::to_string(c.args.size()));
      return false;
    }
    given[spec_i] = true;
    values[spec_i++] = *v;
  }
  for (auto& named : c.named) {
    auto it = std::find_if(specs.begin(), specs.end(),
                           [&](const OpAttrSpec& s) { return s.name == named.name; });
    if (it == specs.end() || it->variadic) {
      std::string names;
      for (auto& s : specs)
        if (!s.variadic) names += (names.empty() ? "" : ", ") + s.name;
      sink_.error(named.span.begin, std::string(op.name) + " has no argument named " +
                                        quote(named.name) +
                                        (names.empty() ? "" : " (it takes: " + names + ")"));
      ok = false;
      continue;
    }
    if (given[it - specs.begin()]) {
      sink_.error(named.span.begin, quote(named.name) + " of " + op.name +
                                        " is given twice (by position and by name)");
      ok = false;
      continue;
    }
    given[it - specs.begin()] = true;
    auto v = const_int(*named.value);
    named.value->type = int_type();
    if (!v) {
      if (auto size = size_attr(*named.value, named.name, op.name)) {
        if (*size == 0) {
          ok = false;
          continue;
        }
        sized[it - specs.begin()] = true;
        values[it - specs.begin()] = *size;
        continue;
      }
    }
    if (!v) {
      sink_.error(named.value->span.begin, quote(named.name) + " of " + op.name +
                                               ": expected a constant integer, found an "
                                               "expression computed at run time");
      ok = false;
      continue;
    }
    values[it - specs.begin()] = *v;
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].variadic) continue;
    if (values[i]) {
      if (sized[i] && attrs.ints.size() < 64) attrs.sizes |= uint64_t{1} << attrs.ints.size();
      attrs.ints.push_back(*values[i]);
    } else if (specs[i].has_default) {
      attrs.ints.push_back(specs[i].default_value);
    } else if (!given[i]) {
      sink_.error(c.span.begin, std::string(op.name) + " needs its " + quote(specs[i].name) +
                                    " argument");
      ok = false;
    }
  }
  return ok;
}

// Type of the tensor operands of an operator call, or nullptr (reported) if any is not a tensor.
bool Checker::tensor_operands(Call& c, const char* op_name, size_t n,
                              std::vector<std::vector<int64_t>>& shapes) {
  bool ok = true;
  for (size_t i = 0; i < n; ++i) {
    Type t = shallow(infer(*c.args[i]));
    if (t->kind == TypeKind::Tensor) {
      shapes.push_back(resolve_shape(t->shape));
    } else {
      if (t->kind == TypeKind::Var && error_vars_.count(t->var)) {
        // already reported
      } else if (t->kind != TypeKind::Var)
        sink_.error(c.args[i]->span.begin, std::string("operand ") + std::to_string(i + 1) +
                                               " of " + op_name +
                                               ": expected a tensor f32[...], found " +
                                               type_str(zonk(t)));
      else
        sink_.error(c.args[i]->span.begin,
                    std::string("operand ") + std::to_string(i + 1) + " of " + op_name +
                        ": its type is not known here; annotate it (e.g. fn(x: f32[1, H]))");
      ok = false;
    }
  }
  return ok;
}

size_t Checker::count_tensor_operands(const Call& c, const OpInfo& op) {
  if (op.arity >= 0) return std::min<size_t>(op.arity, c.args.size());
  // Variadic (concat): every positional argument that is not a constant integer.
  size_t n = 0;
  while (n < c.args.size() && !const_int(*c.args[n])) ++n;
  return n;
}

Type Checker::infer_op(Call& c, const OpInfo& op) {
  c.callee->as<Name>().ref = NameRef::Op;
  c.callee->as<Name>().op = static_cast<int>(op.id);
  size_t n = count_tensor_operands(c, op);
  if ((op.arity >= 0 && c.args.size() < static_cast<size_t>(op.arity)) ||
      (op.arity < 0 && n == 0)) {
    sink_.error(c.span.begin, std::string(op.name) + " expects " +
                                  (op.arity < 0 ? std::string("at least 1")
                                                : std::to_string(op.arity)) +
                                  " tensor operand(s), found " + std::to_string(c.args.size()));
    for (auto& a : c.args) infer(*a);
    return error_type();
  }
  std::vector<std::vector<int64_t>> shapes;
  bool ok = tensor_operands(c, op.name, n, shapes);
  OpAttrs attrs;
  ok = bind_attrs(c, op, n, attrs) && ok;
  if (!ok) return error_type();
  c.attrs = attrs.ints;
  c.attr_sizes = attrs.sizes;
  if (op.id == OpId::Concat) {
    const int axis = normalize_axis(attrs.ints[0], shapes[0].size());
    for (const auto& s : shapes)
      if (axis >= 0 && s.size() == shapes[0].size() && is_size_var(s[static_cast<size_t>(axis)]))
        return concat_growing(c, std::move(shapes), attrs);
  }
  if (op.id == OpId::Slice && (attrs.is_size(0) || attrs.is_size(1)))
    return slice_at_sizes(c, std::move(shapes[0]), attrs);
  ShapeResult r = op.shape(shapes, attrs);
  if (!r.type) {
    // Some shape rules name their operator already ("matmul inner dimensions differ: ...").
    bool named = r.error.rfind(std::string(op.name) + " ", 0) == 0;
    sink_.error(c.span.begin, named ? r.error : std::string(op.name) + ": " + r.error);
    return error_type();
  }
  if (is_tensor(r.type) && !admit_tensor(r.type->shape, c.span.begin, std::string(op.name) + ": its result"))
    return error_type();
  return r.type;
}

Type Checker::concat_growing(Call& c, std::vector<std::vector<int64_t>> shapes,
                             const OpAttrs& attrs) {
  const auto axis = static_cast<size_t>(normalize_axis(attrs.ints[0], shapes[0].size()));
  c.attrs[0] = static_cast<int64_t>(axis);
  std::vector<int64_t> out = shapes[0];
  SizeSum sum;
  for (size_t i = 0; i < shapes.size(); ++i) {
    bool compatible = shapes[i].size() == out.size();
    for (size_t d = 0; compatible && d < out.size(); ++d)
      if (d != axis && shapes[i][d] != out[d]) compatible = false;
    if (!compatible) {
      sink_.error(c.span.begin, "concat along axis " + std::to_string(axis) +
                                    " needs equal other dimensions: operand 1 is f32" +
                                    shape_str(out) + ", operand " + std::to_string(i + 1) +
                                    " is f32" + shape_str(shapes[i]));
      return error_type();
    }
    std::optional<SizeSum> joined = add_sums(sum, size_sum(shapes[i][axis]));
    if (!joined) {
      sink_.error(c.span.begin, "concat along axis " + std::to_string(axis) +
                                    ": the joined size overflows 64-bit integers");
      return error_type();
    }
    sum = *joined;
  }
  out[axis] = joined_size(sum);
  return tensor_type(std::move(out));
}

const std::string* Checker::run_time_term(const SizeSum& s) const {
  for (const auto& [local, dim] : local_sizes_)
    if (auto it = s.terms.find(dim); it != s.terms.end() && it->second != 0) return &local->name;
  return nullptr;
}

Type Checker::slice_at_sizes(Call& c, std::vector<int64_t> shape, const OpAttrs& attrs) {
  const int axis = normalize_axis(attrs.ints[2], shape.size());
  const std::string range = "slice [" + dim_str(attrs.ints[0]) + ", " + dim_str(attrs.ints[1]) + ")";
  if (axis < 0) {
    sink_.error(c.span.begin, "slice: axis " + std::to_string(attrs.ints[2]) +
                                  " is out of range for a tensor of rank " + std::to_string(shape.size()));
    return error_type();
  }
  // Its length: what only the instance can tell (the bounds within the axis, a length of at least
  // one) is checked per instance (analysis/ragged_plan.h).
  std::optional<SizeSum> length = add_sums(size_sum(attrs.ints[1]), size_sum(attrs.ints[0]), -1);
  bool sum = length.has_value();
  if (length) std::erase_if(length->terms, [](const auto& t) { return t.second == 0; });
  for (const auto& term : length ? length->terms : std::map<int64_t, int64_t>{}) sum = sum && term.second > 0;
  if (!sum || (length->terms.empty() && length->constant <= 0)) {
    sink_.error(c.span.begin, range + ": its length, end minus begin, must be a size (at least 1, or "
                                      "a sum of sizes), found " +
                                      (length ? dim_str(joined_size(*length)) : std::string("an overflow")));
    return error_type();
  }
  if (const std::string* local = run_time_term(*length)) {
    sink_.error(c.span.begin, range + ": its length, end minus begin, is known before the instance "
                                      "runs, not computed by it ('" + *local + "'): slice(x, i, i + 1) "
                                      "takes one row at a position i computed at run time");
    return error_type();
  }
  shape[static_cast<size_t>(axis)] = joined_size(*length);
  return tensor_type(std::move(shape));
}

// split(x, n, axis=-1): a tuple of n equal slices.
Type Checker::infer_split(Call& c) {
  auto& name = c.callee->as<Name>();
  name.ref = NameRef::Builtin;
  name.builtin = Builtin::Split;
  if (c.args.size() < 2 || c.args.size() > 3) {
    sink_.error(c.span.begin, "split expects a tensor and a number of parts, found " +
                                  std::to_string(c.args.size()) + " argument(s)");
    for (auto& a : c.args) infer(*a);
    return error_type();
  }
  std::vector<std::vector<int64_t>> shapes;
  bool ok = tensor_operands(c, "split", 1, shapes);
  static const OpInfo spec{OpId::Slice, "split", 1,
                           {OpAttrSpec{"parts"}, OpAttrSpec{"axis", true, -1}},
                           OpClass::DataMovement, nullptr, nullptr, "()", "()"};
  OpAttrs attrs;
  ok = bind_attrs(c, spec, 1, attrs) && ok;
  if (!ok) return error_type();
  c.attrs = attrs.ints;
  int64_t parts = attrs.ints[0];
  int axis = normalize_axis(attrs.ints[1], shapes[0].size());
  if (axis < 0) {
    sink_.error(c.span.begin, "split: axis " + std::to_string(attrs.ints[1]) +
                                  " is out of range for f32" + shape_str(shapes[0]));
    return error_type();
  }
  if (is_size_var(shapes[0][axis])) {
    sink_.error(c.span.begin, "split: axis " + std::to_string(axis) + " of f32" +
                                  shape_str(shapes[0]) +
                                  " has a size variable's size; split cuts fixed sizes only");
    return error_type();
  }
  if (parts <= 0 || shapes[0][axis] % parts != 0) {
    sink_.error(c.span.begin, "split: axis " + std::to_string(axis) + " of size " +
                                  std::to_string(shapes[0][axis]) +
                                  " cannot be split into " + std::to_string(parts) +
                                  " equal parts");
    return error_type();
  }
  c.attrs[1] = axis;
  auto part = shapes[0];
  part[axis] /= parts;
  return tuple_type(std::vector<Type>(parts, tensor_type(part)));
}

std::optional<Builtin> find_builtin(const std::string& name) {
  if (name == "split") return Builtin::Split;
  if (name == "topk") return Builtin::TopK;
  if (name == "float") return Builtin::ToFloat;
  if (name == "int") return Builtin::ToInt;
  if (name == "emit") return Builtin::Emit;
  return std::nullopt;
}

Type Checker::infer_builtin(Call& c, Builtin b) {
  if (b == Builtin::Split) return infer_split(c);
  auto& name = c.callee->as<Name>();
  name.ref = NameRef::Builtin;
  name.builtin = b;
  if (b == Builtin::Emit) {
    // emit(v): hands the host value v out as a partial result of the instance (a generated token,
    // streamed to a client), and is v.
    if (c.args.size() != 1 || !c.named.empty()) {
      sink_.error(c.span.begin, "emit hands out one host int, float or bool, found " +
                                    std::to_string(c.args.size() + c.named.size()) + " argument(s)");
      for (auto& a : c.args) infer(*a);
      return error_type();
    }
    Type arg = shallow(infer(*c.args[0]));
    if (is_error(arg)) return error_type();
    if (arg->kind != TypeKind::Int && arg->kind != TypeKind::Float && arg->kind != TypeKind::Bool) {
      sink_.error(c.args[0]->span.begin,
                  "emit hands out a host int, float or bool, found " + type_str(arg) +
                      (is_tensor(arg) ? "; read a number from it first (argmax(x), item(x))" : ""));
      return error_type();
    }
    return arg;
  }
  if (b == Builtin::ToFloat || b == Builtin::ToInt) {
    // float(i): the int's value, rounded to the nearest double; int(f): the float truncated toward
    // zero (a NaN, or a value beyond 64 bits, stops the instance).
    const bool to_float = b == Builtin::ToFloat;
    if (c.args.size() != 1 || !c.named.empty()) {
      sink_.error(c.span.begin, name.name + " converts one host " + (to_float ? "int" : "float") +
                                    ", found " + std::to_string(c.args.size() + c.named.size()) +
                                    " argument(s)");
      for (auto& a : c.args) infer(*a);
      return error_type();
    }
    Type arg = infer(*c.args[0]);
    if (is_tensor(shallow(arg))) {
      sink_.error(c.args[0]->span.begin, name.name + " converts a host " + (to_float ? "int" : "float") +
                                             ", found a tensor f32" + shape_str(shallow(arg)->shape) +
                                             (to_float ? "" : "; read one with item(x) first"));
      return error_type();
    }
    expect(to_float ? int_type() : float_type(), arg, c.args[0]->span.begin,
           "the argument of " + name.name);
    return to_float ? float_type() : int_type();
  }
  // topk(x, k): the indices of x's k largest entries, the largest first (argmax's order: NaNs
  // first, ties by position), as k argmax reads of ranks 0 .. k - 1.
  if (c.args.size() != 2) {
    sink_.error(c.span.begin, "topk expects a tensor and a number of indices, found " +
                                  std::to_string(c.args.size()) + " argument(s)");
    for (auto& a : c.args) infer(*a);
    return error_type();
  }
  std::vector<std::vector<int64_t>> shapes;
  bool ok = tensor_operands(c, "topk", 1, shapes);
  static const OpInfo spec{OpId::Argmax, "topk", 1, {OpAttrSpec{"k"}}, OpClass::HostRead, nullptr,
                           nullptr, "()", "()"};
  OpAttrs attrs;
  ok = bind_attrs(c, spec, 1, attrs) && ok;
  if (!ok) return error_type();
  const int64_t k = attrs.ints[0];
  if (k < 1) {
    sink_.error(c.args[1]->span.begin, "topk: k must be a constant of at least 1, found " + std::to_string(k));
    return error_type();
  }
  // Its last read, rank k - 1, says whether the tensor has k entries (or the instance will tell).
  OpAttrs last;
  last.ints = {k - 1};
  if (ShapeResult rule = op_info(OpId::Argmax).shape(shapes, last); !rule.type) {
    sink_.error(c.args[1]->span.begin, "topk: k = " + std::to_string(k) + " reads ranks 0 to " +
                                           std::to_string(k - 1) + ": " + rule.error);
    return error_type();
  }
  c.attrs = attrs.ints;
  auto list = adts_.find("List");
  ACROBAT_ASSERT(list != adts_.end(), "the prelude defines List");
  return adt_type(list->second, {int_type()});
}

// A chain of binary operators, by a loop from its first operand out: `a + b - c` types a + b, then
// (a + b) - c.
Type Checker::infer_binary(Binary& outer) {
  std::vector<Binary*> chain = binary_chain(outer);
  Type l = infer(*chain.back()->lhs);
  for (size_t i = chain.size(); i-- > 0;) {
    Type r = infer(*chain[i]->rhs);
    l = binary_type(*chain[i], shallow(l), shallow(r));
    chain[i]->type = l;
  }
  return l;
}

Type Checker::binary_type(Binary& b, const Type& l, const Type& r) {
  std::string sym = std::string("'") + binop_symbol(b.op) + "'";
  if (l->kind == TypeKind::Var || r->kind == TypeKind::Var) {
    // An unknown operand was already reported, or is a lambda parameter used before its type is
    // known: fall back to requiring equal types.
    if (b.op == BinOp::And || b.op == BinOp::Or) {
      unify(l, bool_type());
      unify(r, bool_type());
      return bool_type();
    }
    if (b.op == BinOp::MatMul) {  // equal types would be a wrong guess for all but square ones
      if (is_error(l) || is_error(r)) return error_type();
      const Expr& unknown = l->kind == TypeKind::Var ? *b.lhs : *b.rhs;
      sink_.error(unknown.span.begin, std::string(l->kind == TypeKind::Var ? "left" : "right") +
                                          " operand of '@': its type is not known here; "
                                          "annotate it (e.g. fn(x: f32[1, H]))");
      return error_type();
    }
    unify(l, r);
    bool cmp = b.op >= BinOp::Lt && b.op <= BinOp::Ne;
    return cmp ? bool_type() : l;
  }
  switch (b.op) {
    case BinOp::And:
    case BinOp::Or:
      expect(bool_type(), l, b.lhs->span.begin, "left operand of " + sym);
      expect(bool_type(), r, b.rhs->span.begin, "right operand of " + sym);
      return bool_type();
    case BinOp::Lt:
    case BinOp::Le:
    case BinOp::Gt:
    case BinOp::Ge:
    case BinOp::Eq:
    case BinOp::Ne: {
      bool eq = b.op == BinOp::Eq || b.op == BinOp::Ne;
      if (l->kind == TypeKind::Tensor || r->kind == TypeKind::Tensor) {
        sink_.error(b.span.begin, "comparison " + sym +
                                      " of tensors: compare host values instead; read a tensor "
                                      "with item(x) or argmax(x) first");
        return bool_type();
      }
      bool comparable = l->kind == TypeKind::Int || l->kind == TypeKind::Float ||
                        (eq && l->kind == TypeKind::Bool);
      if (!comparable) {
        sink_.error(b.lhs->span.begin, "left operand of " + sym + ": expected int or float" +
                                           std::string(eq ? " or bool" : "") + ", found " +
                                           type_str(l));
        return bool_type();
      }
      expect(l, r, b.rhs->span.begin, "right operand of " + sym);
      return bool_type();
    }
    case BinOp::MatMul: {
      if (l->kind != TypeKind::Tensor || r->kind != TypeKind::Tensor) {
        sink_.error(b.span.begin, "'@' multiplies two tensors, found " + type_str(l) + " @ " +
                                      type_str(r));
        return error_type();
      }
      std::vector<std::vector<int64_t>> shapes = {resolve_shape(l->shape), resolve_shape(r->shape)};
      ShapeResult res = op_info(OpId::MatMul).shape(shapes, {});
      if (!res.type) {
        sink_.error(b.span.begin, res.error);
        return error_type();
      }
      if (!admit_tensor(res.type->shape, b.span.begin, sym + ": its result")) return error_type();
      return res.type;
    }
    default: break;
  }
  // + - * / %
  if (l->kind == TypeKind::Tensor || r->kind == TypeKind::Tensor) {
    if (b.op == BinOp::Mod) {
      sink_.error(b.span.begin, "'%' is defined on host ints only, found " + type_str(l) +
                                    " % " + type_str(r));
      return error_type();
    }
    if (l->kind != TypeKind::Tensor || r->kind != TypeKind::Tensor) {
      const Expr& scalar = l->kind == TypeKind::Tensor ? *b.rhs : *b.lhs;
      Type st = l->kind == TypeKind::Tensor ? r : l;
      if (st->kind == TypeKind::Float || st->kind == TypeKind::Int) {
        // A literal is a constant; a number the run computes travels to its operator as a size
        // variable standing for its bits (an int as the float it converts to).
        if (!literal_number(scalar)) b.scalar_size = new_size("scalar", true);
        return l->kind == TypeKind::Tensor ? l : r;
      }
      sink_.error(scalar.span.begin, "operand of " + sym + " with a tensor: expected a tensor or a number, found " +
                                         type_str(st));
      return error_type();
    }
    std::vector<std::vector<int64_t>> shapes = {resolve_shape(l->shape), resolve_shape(r->shape)};
    ShapeResult res = op_info(OpId::Add).shape(shapes, {});
    if (!res.type) {
      sink_.error(b.span.begin, sym + ": " + res.error);
      return error_type();
    }
    if (!admit_tensor(res.type->shape, b.span.begin, sym + ": its result")) return error_type();
    return res.type;
  }
  if (l->kind == TypeKind::Int && r->kind == TypeKind::Int) return int_type();
  if (l->kind == TypeKind::Float && r->kind == TypeKind::Float) {
    if (b.op != BinOp::Mod) return float_type();
    sink_.error(b.span.begin, "'%' is defined on host ints only, found float % float");
    return error_type();
  }
  if ((l->kind == TypeKind::Int && r->kind == TypeKind::Float) ||
      (l->kind == TypeKind::Float && r->kind == TypeKind::Int)) {
    sink_.error(b.span.begin, "operands of " + sym + " mix int and float (" + type_str(l) + " " +
                                  binop_symbol(b.op) + " " + type_str(r) +
                                  "); write the int as a float literal, e.g. 2.0");
    return error_type();
  }
  sink_.error(b.span.begin, "operands of " + sym + ": expected numbers or tensors, found " +
                                type_str(l) + " and " + type_str(r));
  return error_type();
}

}  // namespace acrobat::checker
