// Unification over type variables: fresh and error variables, substitution (shallow, zonk), the
// occurs check, unify and expect, instantiation of generics, and zonking a checked body.
#include <functional>

#include <set>

#include "lang/checker.h"

namespace acrobat::checker {

Type Checker::fresh() {
  subst_.push_back(nullptr);
  return var_type(static_cast<int>(subst_.size()) - 1);
}

// The type of an expression that already failed to check: unifies with anything and silences
// the errors it would otherwise cause further out.
Type Checker::error_type() {
  Type t = fresh();
  error_vars_.insert(t->var);
  return t;
}

bool Checker::is_error(const Type& t) const {
  Type s = shallow(t);
  return s->kind == TypeKind::Var && error_vars_.count(s->var) > 0;
}

bool Checker::mentions_error(const Type& t) const {
  Type s = shallow(t);
  if (s->kind == TypeKind::Var) return error_vars_.count(s->var) > 0;
  for (auto& a : s->args)
    if (mentions_error(a)) return true;
  return s->ret && mentions_error(s->ret);
}

Type Checker::shallow(Type t) const {
  while (t->kind == TypeKind::Var && subst_[t->var]) t = subst_[t->var];
  return t;
}

Type Checker::zonk(const Type& t) const {
  Type s = shallow(t);
  if (s->kind == TypeKind::Tensor && is_ragged(s->shape)) {
    std::vector<int64_t> shape = resolve_shape(s->shape);
    return shape == s->shape ? s : tensor_type(std::move(shape));
  }
  if (s->kind == TypeKind::Tuple || s->kind == TypeKind::Adt || s->kind == TypeKind::Func) {
    auto copy = std::make_shared<TypeNode>(*s);
    for (auto& a : copy->args) a = zonk(a);
    if (copy->ret) copy->ret = zonk(copy->ret);
    return copy;
  }
  return s;
}

bool Checker::occurs(int var, const Type& t) const {
  Type s = shallow(t);
  if (s->kind == TypeKind::Var) return s->var == var;
  for (auto& a : s->args)
    if (occurs(var, a)) return true;
  return s->ret && occurs(var, s->ret);
}

bool Checker::unify(const Type& a0, const Type& b0) {
  Type a = shallow(a0), b = shallow(b0);
  if (a == b) return true;
  // An error type stays one: binding it would let what it meets be reported against later.
  if (a->kind == TypeKind::Var && error_vars_.count(a->var)) return true;
  if (b->kind == TypeKind::Var && error_vars_.count(b->var)) return true;
  if (a->kind == TypeKind::Var) {
    if (b->kind == TypeKind::Var && b->var == a->var) return true;
    if (occurs(a->var, b)) return false;
    subst_[a->var] = b;
    return true;
  }
  if (b->kind == TypeKind::Var) return unify(b, a);
  if (a->kind == TypeKind::Tensor && b->kind == TypeKind::Tensor) {
    if (a->shape.size() != b->shape.size()) return false;
    for (size_t i = 0; i < a->shape.size(); ++i)
      if (!unify_dim(a->shape[i], b->shape[i])) return false;
    return true;
  }
  // Neither is a variable: the same structure as type_equal's, with components unified.
  return same_structure(a, b, [this](const Type& x, const Type& y) { return unify(x, y); });
}

// Unifies and reports "<context>: expected X, found Y" at `loc` on failure.
bool Checker::expect(const Type& expected, const Type& found, const SourceLoc& loc,
                     const std::string& context) {
  if (unify(expected, found)) return true;
  if (mentions_error(expected) || mentions_error(found)) return false;
  sink_.error(loc, context + ": expected " + type_str(zonk(expected)) + ", found " +
                       type_str(zonk(found)));
  return false;
}

Type Checker::instantiate(const Type& t, const std::vector<std::string>& params,
                          std::vector<Type>& args_out) {
  args_out.clear();
  for (size_t i = 0; i < params.size(); ++i) args_out.push_back(fresh());
  return substitute_params(t, params, args_out);
}

int64_t Checker::new_size(const std::string& name, bool rigid) const {
  sizes_.push_back(SizeVar{rigid, 0});
  size_names_.push_back(name);
  return size_var(static_cast<int>(sizes_.size()) - 1);
}

int64_t Checker::resolve_dim(int64_t d) const {
  while (is_size_var(d)) {
    const SizeVar& s = sizes_[static_cast<size_t>(size_var_index(d))];
    if (s.rigid || s.bound == 0) break;
    d = s.bound;
  }
  auto joined = sum_of_.find(d);
  if (joined == sum_of_.end()) return d;
  // Its terms are variables; one bound since it was made gives another sum.
  bool bound = false;
  for (const auto& term : joined->second.terms) bound = bound || resolve_dim(term.first) != term.first;
  if (!bound) return d;
  const SizeSum sum = size_sum(d);
  return joined_size(sum);
}

SizeSum Checker::size_sum(int64_t d) const {
  // Follows bindings only (resolve_dim would come back here for a joined size).
  while (is_size_var(d)) {
    const SizeVar& s = sizes_[static_cast<size_t>(size_var_index(d))];
    if (s.rigid || s.bound == 0) break;
    d = s.bound;
  }
  if (!is_size_var(d)) return SizeSum{{}, d};
  auto joined = sum_of_.find(d);
  if (joined == sum_of_.end()) return SizeSum{{{d, 1}}, 0};
  SizeSum out{{}, joined->second.constant};
  for (const auto& [v, k] : joined->second.terms) {
    std::optional<SizeSum> with = add_sums(out, size_sum(v), k);
    if (with) out = *with;  // made from sums that fit; a bound term keeps it within its value
  }
  return out;
}

std::optional<SizeSum> Checker::add_sums(const SizeSum& a, const SizeSum& b, int64_t k) {
  SizeSum out = a;
  std::optional<int64_t> scaled = checked_mul(b.constant, k);
  std::optional<int64_t> constant = scaled ? checked_add(out.constant, *scaled) : std::nullopt;
  if (!constant) return std::nullopt;
  out.constant = *constant;
  for (const auto& [v, count] : b.terms) {
    std::optional<int64_t> more = checked_mul(count, k);
    std::optional<int64_t> total = more ? checked_add(out.terms[v], *more) : std::nullopt;
    if (!total) return std::nullopt;
    out.terms[v] = *total;
  }
  return out;
}

int64_t Checker::joined_size(const SizeSum& sum) const {
  SizeSum s = sum;
  std::erase_if(s.terms, [](const auto& term) { return term.second == 0; });
  if (s.terms.empty()) return s.constant;
  if (s.constant == 0 && s.terms.size() == 1 && s.terms.begin()->second == 1) return s.terms.begin()->first;
  auto [known, made] = sums_.emplace(s, 0);
  if (made) {
    // Its name: the terms that add, a constant that adds, then what subtracts (`n + 1`, `4 - n`).
    std::string name;
    auto part = [&](bool add, const std::string& text) {
      name += name.empty() ? (add ? "" : "-") : (add ? " + " : " - ");
      name += text;
    };
    auto term = [](int64_t k, int64_t v) { return (k == 1 ? "" : std::to_string(k) + " * ") + dim_str(v); };
    for (const auto& [v, k] : s.terms)
      if (k > 0) part(true, term(k, v));
    if (s.constant > 0) part(true, std::to_string(s.constant));
    for (const auto& [v, k] : s.terms)
      if (k < 0) part(false, term(-k, v));
    if (s.constant < 0) part(false, std::to_string(-s.constant));
    known->second = new_size(name, true);
    sum_of_.emplace(known->second, s);
  }
  return known->second;
}

std::vector<int64_t> Checker::resolve_shape(std::vector<int64_t> shape) const {
  for (int64_t& d : shape) d = resolve_dim(d);
  return shape;
}

bool Checker::unify_dim(int64_t a, int64_t b) {
  a = resolve_dim(a);
  b = resolve_dim(b);
  if (a == b) return true;
  for (int64_t d : {a, b}) {
    if (!is_size_var(d)) continue;
    SizeVar& s = sizes_[static_cast<size_t>(size_var_index(d))];
    if (s.rigid) continue;
    const int64_t other = d == a ? b : a;
    if (size_sum(other).terms.count(d)) return false;  // d = d + ...: no size
    s.bound = other;
    return true;
  }
  // Sums (types.h SizeSum): a - b = k * f + rest, with f the one flexible variable left and k = +-1,
  // binds f = -k * rest when that is a size (`t' + 1` and `n + 1` bind t' = n).
  std::optional<SizeSum> diff = add_sums(size_sum(a), size_sum(b), -1);
  if (!diff) return false;
  int64_t f = 0, k = 0;
  SizeSum rest{{}, diff->constant};
  for (const auto& [v, count] : diff->terms) {
    if (count == 0) continue;
    if (!sizes_[static_cast<size_t>(size_var_index(v))].rigid) {
      if (f != 0) return false;
      f = v;
      k = count;
    } else {
      rest.terms[v] = count;
    }
  }
  if (f == 0 || (k != 1 && k != -1)) return false;
  std::optional<SizeSum> value = add_sums(SizeSum{}, rest, -k);
  if (!value || value->constant < 0 || (value->terms.empty() && value->constant == 0)) return false;
  for (const auto& term : value->terms)
    if (term.second < 0) return false;
  sizes_[static_cast<size_t>(size_var_index(f))].bound = joined_size(*value);
  return true;
}

Type Checker::instantiate_sizes(const Type& t, const std::vector<int64_t>& params,
                                std::vector<int64_t>& fresh_sizes, const std::vector<int64_t>& made,
                                std::vector<int64_t>& fresh_made, const SourceLoc& at) {
  // The parameters' sizes are flexible (the arguments bind them), the made ones rigid: the
  // callee binds them, so they are as unknown to the caller as a gather's length.
  fresh_sizes.clear();
  fresh_made.clear();
  std::vector<int64_t> sizes = params;
  sizes.insert(sizes.end(), made.begin(), made.end());
  std::vector<int64_t> fresh;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const bool rigid = k >= params.size();
    fresh.push_back(new_size(size_names_[static_cast<size_t>(size_var_index(sizes[k]))], rigid));
    (rigid ? fresh_made : fresh_sizes).push_back(fresh.back());
    if (rigid) gather_sizes_.emplace(fresh.back(), MadeSize{at, "call's result"});
  }
  std::function<Type(const Type&)> walk = [&](const Type& x) -> Type {
    if (x->kind == TypeKind::Tensor) {
      if (!is_ragged(x->shape)) return x;
      std::vector<int64_t> shape = x->shape;
      for (int64_t& d : shape) {
        // A joined size of the function's sizes (`-> f32[t + 1, D]`) joins the fresh ones.
        SizeSum sum = size_sum(d), renamed{{}, sum.constant};
        for (const auto& [v, count] : sum.terms) {
          int64_t to = v;
          for (size_t k = 0; k < sizes.size(); ++k)
            if (v == sizes[k]) to = fresh[k];
          renamed.terms[to] += count;
        }
        d = joined_size(renamed);
      }
      return tensor_type(std::move(shape));
    }
    if (x->args.empty() && !x->ret) return x;
    auto copy = std::make_shared<TypeNode>(*x);
    for (auto& a : copy->args) a = walk(a);
    if (copy->ret) copy->ret = walk(copy->ret);
    return copy;
  };
  return walk(t);
}

void Checker::keep_gathers_inside(size_t first, const Type& t, const char* what) {
  std::set<int64_t> seen;
  std::function<void(const Type&)> walk = [&](const Type& x) {
    Type z = shallow(x);
    if (z->kind == TypeKind::Tensor)
      for (int64_t joined : resolve_shape(z->shape))
        for (const auto& term : size_sum(joined).terms) {
          const int64_t d = term.first;
          if (static_cast<size_t>(size_var_index(d)) < first || !gather_sizes_.count(d) ||
              !seen.insert(d).second)
            continue;
          const MadeSize& made = gather_sizes_.at(d);
          sink_.error(made.at,
                      "the size " + quote(dim_str(d)) + " of this " + made.what + " would leave the " +
                          what + " that makes it, as part of its result's type " + type_str(zonk(t)) +
                          "; the size is known only inside: return something of a fixed size "
                          "from there (a sum, a slice), or move the code into a function that "
                          "returns it (`-> f32[m, E]`)");
        }
    for (const auto& a : z->args) walk(a);
    if (z->ret) walk(z->ret);
  };
  walk(t);
}

void Checker::zonk_expr(Expr& e) {
  if (e.type) e.type = zonk(e.type);
  std::function<void(Pattern&)> zonk_pattern = [&](Pattern& p) {
    if (p.type) p.type = zonk(p.type);
    if (p.var && p.var->type) p.var->type = zonk(p.var->type);
    for (auto& s : p.subs) zonk_pattern(*s);
  };
  switch (e.kind) {
    case ExprKind::Name: {
      auto& n = e.as<Name>();
      for (auto& t : n.type_args) t = zonk(t);
      // A call's sizes: each must be known from the call (its arguments, or what its result
      // must be), or lowering could not pass it.
      for (size_t i = 0; i < n.sizes.size(); ++i) {
        n.sizes[i] = resolve_dim(n.sizes[i]);
        const int64_t d = n.sizes[i];
        if (!is_size_var(d) || sizes_[static_cast<size_t>(size_var_index(d))].rigid) continue;
        sink_.error(n.span.begin, "cannot tell size " + quote(dim_str(n.func->size_params[i])) +
                                      " of this call of " + quote(n.name) +
                                      " from its arguments: pass a value whose type shows it");
      }
      break;
    }
    case ExprKind::Call: {
      auto& c = e.as<Call>();
      zonk_expr(*c.callee);
      for (auto& a : c.args) zonk_expr(*a);
      for (auto& a : c.named) zonk_expr(*a.value);
      break;
    }
    case ExprKind::Index:
      zonk_expr(*e.as<Index>().base);
      zonk_expr(*e.as<Index>().index);
      break;
    case ExprKind::Proj: zonk_expr(*e.as<Proj>().base); break;
    case ExprKind::Tuple:
      for (auto& x : e.as<ast::Tuple>().elems) zonk_expr(*x);
      break;
    case ExprKind::Unary: zonk_expr(*e.as<Unary>().operand); break;
    // Chains by loops (ast.h); the first node's type is zonked above.
    case ExprKind::Binary: {
      auto chain = binary_chain(e);
      for (Binary* b : chain) {
        if (b->type) b->type = zonk(b->type);
        zonk_expr(*b->rhs);
      }
      zonk_expr(*chain.back()->lhs);
      break;
    }
    case ExprKind::Let: {
      auto chain = let_chain(e);
      for (Let* l : chain) {
        if (l->type) l->type = zonk(l->type);
        zonk_pattern(*l->pattern);
        zonk_expr(*l->value);
      }
      zonk_expr(*chain.back()->body);
      break;
    }
    case ExprKind::If: {
      auto chain = if_chain(e);
      for (If* i : chain) {
        if (i->type) i->type = zonk(i->type);
        zonk_expr(*i->cond);
        zonk_expr(*i->then_branch);
      }
      zonk_expr(*chain.back()->else_branch);
      break;
    }
    case ExprKind::Match: {
      auto& m = e.as<Match>();
      zonk_expr(*m.scrutinee);
      for (auto& c : m.clauses) {
        zonk_pattern(*c.pattern);
        zonk_expr(*c.body);
      }
      break;
    }
    case ExprKind::Lambda: {
      auto& l = e.as<Lambda>();
      for (auto& p : l.params) p.var->type = zonk(p.var->type);
      zonk_expr(*l.body);
      break;
    }
    default: break;
  }
}

}  // namespace acrobat::checker
