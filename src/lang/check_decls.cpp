// Declarations: top-level names, data types and their constructors, params, function signatures,
// and the resolution of type syntax into types.
#include <algorithm>
#include <cctype>
#include <functional>
#include <set>

#include "ops/ops.h"
#include "lang/checker.h"

namespace acrobat::checker {

void Checker::claim_name(const std::string& name, const Span& span, const char* what) {
  auto [it, inserted] = top_names_.emplace(name, span.begin);
  if (!inserted) {
    sink_.error(span.begin, std::string("redefinition of ") + quote(name) + " as a " + what +
                                "; it was first defined at " + it->second.str());
    redefined_.insert(name);
  } else if (find_op(name) || find_builtin(name)) {
    sink_.error(span.begin, quote(name) + " is a built-in operator and cannot be redefined as a " +
                                what);
  }
}

void Checker::declare_types() {
  for (auto& t : m_.types) {
    claim_name(t->name, t->span, "type");
    t->def = std::make_unique<AdtDef>();
    t->def->name = t->name;
    t->def->type_params = t->type_params;
    t->def->span = t->span;
    adts_.emplace(t->name, t->def.get());  // a redefinition must not capture earlier uses
  }
  for (auto& t : m_.types) {
    int tag = 0;
    for (auto& c : t->ctors) {
      // `type Pair[a] = Pair(a, a)`: a constructor may share its own type's name (types and
      // constructors never appear in the same position).
      if (c.name != t->name || ctors_.count(c.name)) claim_name(c.name, c.span, "constructor");
      auto ctor = std::make_unique<CtorDef>();
      ctor->name = c.name;
      ctor->adt = t->def.get();
      ctor->tag = tag++;
      ctor->span = c.span;
      for (auto& f : c.fields) ctor->fields.push_back(resolve_type(*f, t->type_params));
      ctors_.emplace(c.name, ctor.get());
      t->def->ctors.push_back(std::move(ctor));
    }
  }
}

void Checker::declare_params() {
  for (auto& p : m_.params) {
    claim_name(p->name, p->span, "param");
    if (p->count) {
      if (auto n = dims_.eval(*p->count, sink_)) {
        if (*n <= 0)
          sink_.error(p->count->span.begin, "param " + quote(p->name) +
                                                " must have a positive count, found " +
                                                std::to_string(*n));
        p->resolved_count = *n;
      }
    }
    Type t = resolve_type(*p->type_expr, {}, "param " + quote(p->name) + ":");
    if (t->kind != TypeKind::Tensor) {
      if (t->kind != TypeKind::Var)
        sink_.error(p->type_expr->span.begin, "param " + quote(p->name) +
                                                  " must have a tensor type f32[...], found " +
                                                  type_str(t));
      broken_params_.insert(p->name);
      continue;
    }
    p->shape = t->shape;
    params_.emplace(p->name, p.get());
  }
}

void Checker::declare_funcs() {
  for (auto& f : m_.funcs) {
    claim_name(f->name, f->span, "function");
    std::vector<Type> params;
    std::set<std::string> seen;
    // Parameter types declare the function's size variables; the result may only use them.
    std::vector<std::pair<std::string, int64_t>> sizes;
    size_scope_ = &sizes;
    sizes_declarable_ = true;
    for (auto& p : f->params) {
      if (!seen.insert(p.name).second)
        sink_.error(p.span.begin, "duplicate parameter " + quote(p.name) + " of function " +
                                      quote(f->name));
      p.var = std::make_shared<LocalVar>(LocalVar{p.name, resolve_type(*p.type_expr,
                                                                          f->type_params),
                                                  p.span});
      params.push_back(p.var->type);
    }
    sizes_declarable_ = false;
    // A lower-case name in the result that no parameter declares is a size the function makes.
    const size_t param_sizes = sizes.size();
    made_declarable_ = true;
    Type ret = resolve_type(*f->ret_expr, f->type_params);
    made_declarable_ = false;
    f->type = func_type(params, ret);
    size_scope_ = nullptr;
    for (size_t k = 0; k < sizes.size(); ++k)
      (k < param_sizes ? f->size_params : f->made_sizes).push_back(sizes[k].second);
    if (!f->made_sizes.empty()) check_made_sizes(*f);
    funcs_.emplace(f->name, f.get());  // the first definition keeps its callers (the prelude's)
  }
}

// A size the function makes is returned beside its result (lowering): only tensors the result
// holds directly or in tuples may show it, not a list's elements, a data type's fields or a
// function's types, whose sizes no single value could tell.
void Checker::check_made_sizes(const FuncDecl& f) {
  std::function<void(const Type&, bool)> walk = [&](const Type& t, bool inside) {
    if (t->kind == TypeKind::Tensor) {
      if (!inside) return;
      for (int64_t joined : t->shape)
        for (const auto& term : size_sum(joined).terms)
          if (std::find(f.made_sizes.begin(), f.made_sizes.end(), term.first) != f.made_sizes.end()) {
            sink_.error(f.ret_expr->span.begin,
                        "the result of function " + quote(f.name) + " has size " +
                            quote(dim_str(term.first)) +
                            ", which no parameter names, so the function makes it: such a size may "
                            "appear in the result's tensors and tuples of them, not in a list's "
                            "elements, a data type's fields or a function's types (" +
                            type_str(f.type->ret) + ")");
            return;
          }
      return;
    }
    const bool deeper = inside || t->kind != TypeKind::Tuple;
    for (const auto& a : t->args) walk(a, deeper);
    if (t->ret) walk(t->ret, deeper);
  };
  walk(f.type->ret, false);
}

std::optional<SizeSum> Checker::size_expr(const DimExpr& d, bool& none) {
  auto size = [&](const std::string& name) -> std::optional<int64_t> {
    if (dims_.find(name)) return std::nullopt;
    auto it = std::find_if(size_scope_->begin(), size_scope_->end(),
                           [&](const auto& s) { return s.first == name; });
    return it == size_scope_->end() ? std::nullopt : std::optional(it->second);
  };
  // Names a size variable (in a parameter's type: any name that is no dim, which would declare one).
  std::function<bool(const DimExpr&)> mentions = [&](const DimExpr& e) {
    for (const DimExpr* x = &e; x; x = x->kind == DimExpr::Binary ? x->lhs.get() : nullptr) {
      if (x->kind == DimExpr::Name && (size(x->name) || (sizes_declarable_ && !dims_.find(x->name) &&
                                                         !dims_.broken(x->name))))
        return true;
      if (x->kind == DimExpr::Binary && mentions(*x->rhs)) return true;
    }
    return false;
  };
  none = !mentions(d);
  if (none) return std::nullopt;
  if (sizes_declarable_) {
    sink_.error(d.span.begin, "a parameter's size is a constant or one size variable, found a size "
                              "expression: the caller's sizes bind the function's, not the other "
                              "way round");
    return std::nullopt;
  }
  std::function<std::optional<SizeSum>(const DimExpr&)> sum = [&](const DimExpr& e) -> std::optional<SizeSum> {
    switch (e.kind) {
      case DimExpr::Lit: return SizeSum{{}, e.value};
      case DimExpr::Name: {
        if (auto v = size(e.name)) return SizeSum{{{*v, 1}}, 0};
        auto c = dims_.eval(e, sink_);
        return c ? std::optional(SizeSum{{}, *c}) : std::nullopt;
      }
      case DimExpr::Binary: {
        // Along the chain by a loop, first operand first (a chain's length is not nesting).
        std::vector<const DimExpr*> chain;
        for (const DimExpr* x = &e; x->kind == DimExpr::Binary; x = x->lhs.get()) chain.push_back(x);
        std::optional<SizeSum> l = sum(*chain.back()->lhs);
        for (size_t i = chain.size(); l && i-- > 0;) {
          const DimExpr& link = *chain[i];
          std::optional<SizeSum> r = sum(*link.rhs);
          if (!r) return std::nullopt;
          if (link.op == '+') {
            l = add_sums(*l, *r);
          } else if (link.op == '*' && (l->terms.empty() || r->terms.empty())) {
            l = l->terms.empty() ? add_sums(SizeSum{}, *r, l->constant) : add_sums(SizeSum{}, *l, r->constant);
          } else {
            sink_.error(link.span.begin, std::string("a size expression with size variables may add sizes "
                                                     "and multiply them by constants (t + 1, n + m, 2 * t), "
                                                     "found '") + link.op + "'");
            return std::nullopt;
          }
          if (!l) sink_.error(link.span.begin, "size expression overflows 64-bit integers");
        }
        return l;
      }
    }
    return std::nullopt;
  };
  std::optional<SizeSum> out = sum(d);
  if (!out) return std::nullopt;
  for (const auto& term : out->terms)
    if (term.second <= 0 || out->constant < 0) {
      sink_.error(d.span.begin, "a size expression with size variables must be a sum of sizes "
                                "(positive counts, a constant >= 0)");
      return std::nullopt;
    }
  return out;
}

// Resolves type syntax; unknown names are reported and become fresh variables (no cascades).
Type Checker::resolve_type(const TypeExpr& t, const std::vector<std::string>& type_params,
                           const std::string& owner) {
  switch (t.kind) {
    case TypeExpr::Int: return int_type();
    case TypeExpr::Float: return float_type();
    case TypeExpr::Bool: return bool_type();
    case TypeExpr::Tensor: {
      std::vector<int64_t> shape;
      bool ok = true;
      for (auto& d : t.dims) {
        if (d->kind == DimExpr::Binary && size_scope_) {
          bool none = false;
          std::optional<SizeSum> sum = size_expr(*d, none);
          if (!none) {
            if (sum) shape.push_back(joined_size(*sum));
            ok = ok && sum;
            continue;
          }
        }
        if (d->kind == DimExpr::Name && !dims_.find(d->name) && !dims_.broken(d->name) &&
            !size_scope_ && std::islower(static_cast<unsigned char>(d->name[0]))) {
          sink_.error(d->span.begin,
                      "unknown size " + quote(d->name) +
                          ": expected an integer or a dim declared earlier (a size that varies "
                          "per instance can only be a function parameter's)");
          ok = false;
          continue;
        }
        if (d->kind == DimExpr::Name && !dims_.find(d->name) && !dims_.broken(d->name) &&
            size_scope_) {
          // A size variable of the function: known already, or declared by a parameter's type.
          auto it = std::find_if(size_scope_->begin(), size_scope_->end(),
                                 [&](const auto& s) { return s.first == d->name; });
          if (it != size_scope_->end()) {
            shape.push_back(it->second);
            continue;
          }
          if ((sizes_declarable_ || made_declarable_) && std::islower(static_cast<unsigned char>(d->name[0]))) {
            size_scope_->emplace_back(d->name, new_size(d->name, true));
            shape.push_back(size_scope_->back().second);
            continue;
          }
          sink_.error(d->span.begin,
                      "unknown size " + quote(d->name) +
                          (sizes_declarable_
                               ? ": expected an integer, a dim declared earlier, or a size "
                                 "variable (a lower-case name)"
                               : ": expected an integer, a dim declared earlier, or a size "
                                 "variable of the function's parameters"));
          ok = false;
          continue;
        }
        auto v = dims_.eval(*d, sink_);
        if (!v) {
          ok = false;
        } else if (*v <= 0) {
          sink_.error(d->span.begin, "tensor sizes must be positive, found " + std::to_string(*v));
          ok = false;
        } else {
          shape.push_back(*v);
        }
      }
      if (ok) ok = admit_tensor(shape, t.span.begin, owner);
      return ok ? tensor_type(shape) : error_type();
    }
    case TypeExpr::Tuple: {
      std::vector<Type> elems;
      for (auto& a : t.args) elems.push_back(resolve_type(*a, type_params));
      return tuple_type(elems);
    }
    case TypeExpr::Func: {
      std::vector<Type> params;
      for (auto& a : t.args) params.push_back(resolve_type(*a, type_params));
      return func_type(params, resolve_type(*t.ret, type_params));
    }
    case TypeExpr::Named: {
      if (std::find(type_params.begin(), type_params.end(), t.name) != type_params.end()) {
        if (!t.args.empty())
          sink_.error(t.span.begin, "type parameter " + quote(t.name) + " takes no arguments");
        return param_type(t.name);
      }
      if (redefined_.count(t.name)) return error_type();  // reported
      auto it = adts_.find(t.name);
      if (it == adts_.end()) {
        std::string hint = t.name == "Tensor" || t.name == "tensor" || t.name == "f64" ||
                                   t.name == "f16"
                               ? " (tensors are written f32[d1, d2, ...])"
                               : "";
        sink_.error(t.span.begin, "unknown type " + quote(t.name) + hint);
        return error_type();
      }
      const AdtDef* adt = it->second;
      if (t.args.size() != adt->type_params.size()) {
        sink_.error(t.span.begin, "type " + quote(adt->name) + " expects " +
                                      std::to_string(adt->type_params.size()) +
                                      " type argument(s), found " + std::to_string(t.args.size()));
        return error_type();
      }
      std::vector<Type> args;
      for (auto& a : t.args) args.push_back(resolve_type(*a, type_params));
      return adt_type(adt, args);
    }
  }
  return error_type();
}

}  // namespace acrobat::checker
