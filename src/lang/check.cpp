#include "lang/check.h"

#include <algorithm>
#include <functional>
#include <set>
#include <unordered_map>

#include "ir/ops.h"

namespace acrobat {

using namespace ast;

namespace {

// Builtins that are not registry operators: `split` is sugar for slices (lowering expands it);
// `constant` is internal (float literals mixed with tensors become constants).
constexpr const char* kSplit = "split";

std::string quote(const std::string& s) { return "'" + s + "'"; }

// Evaluates dims and other compile-time integer expressions.
class DimScope {
 public:
  void define(const std::string& name, int64_t value) { values_[name] = value; }
  // A dim whose declaration was reported as wrong: its uses report nothing more.
  void define_broken(const std::string& name) { broken_.insert(name); }
  bool broken(const std::string& name) const { return broken_.count(name) > 0; }
  const int64_t* find(const std::string& name) const {
    auto it = values_.find(name);
    return it == values_.end() ? nullptr : &it->second;
  }
  std::optional<int64_t> eval(const DimExpr& d, DiagnosticSink& sink) const {
    switch (d.kind) {
      case DimExpr::Lit: return d.value;
      case DimExpr::Name: {
        if (const int64_t* v = find(d.name)) return *v;
        if (broken(d.name)) return std::nullopt;
        sink.error(d.span.begin, "unknown size " + quote(d.name) +
                                     ": expected an integer or a dim declared earlier");
        return std::nullopt;
      }
      case DimExpr::Binary: {
        auto l = eval(*d.lhs, sink);
        auto r = eval(*d.rhs, sink);
        if (!l || !r) return std::nullopt;
        int64_t out = 0;
        bool overflow = false;
        switch (d.op) {
          case '+': overflow = __builtin_add_overflow(*l, *r, &out); break;
          case '-': overflow = __builtin_sub_overflow(*l, *r, &out); break;
          case '*': overflow = __builtin_mul_overflow(*l, *r, &out); break;
          case '/':
            if (*r == 0) {
              sink.error(d.rhs->span.begin, "division by zero in a size expression");
              return std::nullopt;
            }
            overflow = *l == INT64_MIN && *r == -1;
            if (!overflow) out = *l / *r;
            break;
        }
        if (overflow) {
          sink.error(d.span.begin, "size expression overflows 64-bit integers");
          return std::nullopt;
        }
        return out;
      }
    }
    return std::nullopt;
  }

 private:
  std::unordered_map<std::string, int64_t> values_;
  std::set<std::string> broken_;
};

class Checker {
 public:
  Checker(Module& module, const DimOverrides& overrides, DiagnosticSink& sink)
      : m_(module), overrides_(overrides), sink_(sink) {}

  void run() {
    declare_dims();
    declare_types();
    declare_params();
    declare_funcs();
    for (auto& f : m_.funcs) check_func(*f);
    check_recursion();
  }

 private:
  // ---------------------------------------------------------------------------------------------
  // Declarations
  void claim_name(const std::string& name, const Span& span, const char* what) {
    auto [it, inserted] = top_names_.emplace(name, span.begin);
    if (!inserted) {
      sink_.error(span.begin, std::string("redefinition of ") + quote(name) + " as a " + what +
                                  "; it was first defined at " + it->second.str());
      redefined_.insert(name);
    } else if (find_op(name) || name == kSplit) {
      sink_.error(span.begin, quote(name) + " is a built-in operator and cannot be redefined as a " +
                                  what);
    }
  }

  void declare_dims() {
    std::set<std::string> applied;
    for (auto& d : m_.dims) {
      claim_name(d->name, d->span, "dim");
      auto it = overrides_.find(d->name);
      std::optional<int64_t> v;
      if (it != overrides_.end()) {
        v = it->second;
        d->overridden = true;
        applied.insert(d->name);
      } else {
        v = dims_.eval(*d->value, sink_);
      }
      if (!v) {
        dims_.define_broken(d->name);
        continue;
      }
      if (*v <= 0) {
        sink_.error(d->span.begin, "dim " + quote(d->name) + " must be positive, found " +
                                       std::to_string(*v));
        dims_.define_broken(d->name);
        continue;
      }
      d->resolved = *v;
      dims_.define(d->name, *v);
    }
    for (const auto& [name, value] : overrides_) {
      if (applied.count(name)) continue;
      std::string known;
      for (auto& d : m_.dims) known += (known.empty() ? "" : ", ") + d->name;
      sink_.error(SourceLoc{}, "--set " + name + "=" + std::to_string(value) +
                                   ": the model has no dim " + quote(name) +
                                   (known.empty() ? "" : " (its dims are: " + known + ")"));
    }
  }

  void declare_types() {
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

  void declare_params() {
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
      Type t = resolve_type(*p->type_expr, {});
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

  void declare_funcs() {
    for (auto& f : m_.funcs) {
      claim_name(f->name, f->span, "function");
      std::vector<Type> params;
      std::set<std::string> seen;
      for (auto& p : f->params) {
        if (!seen.insert(p.name).second)
          sink_.error(p.span.begin, "duplicate parameter " + quote(p.name) + " of function " +
                                        quote(f->name));
        p.var = std::make_shared<LocalVar>(LocalVar{p.name, resolve_type(*p.type_expr,
                                                                            f->type_params),
                                                    p.span});
        params.push_back(p.var->type);
      }
      f->type = func_type(params, resolve_type(*f->ret_expr, f->type_params));
      funcs_.emplace(f->name, f.get());  // the first definition keeps its callers (the prelude's)
    }
  }

  // Resolves type syntax; unknown names are reported and become fresh variables (no cascades).
  Type resolve_type(const TypeExpr& t, const std::vector<std::string>& type_params) {
    switch (t.kind) {
      case TypeExpr::Int: return int_type();
      case TypeExpr::Float: return float_type();
      case TypeExpr::Bool: return bool_type();
      case TypeExpr::Tensor: {
        std::vector<int64_t> shape;
        bool ok = true;
        for (auto& d : t.dims) {
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
        int64_t elements = 1;
        for (int64_t d : shape) {
          if (ok && __builtin_mul_overflow(elements, d, &elements)) {
            sink_.error(t.span.begin, "tensor shape " + shape_str(shape) +
                                          " has more elements than 64-bit integers count");
            ok = false;
          }
        }
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

  // ---------------------------------------------------------------------------------------------
  // Unification
  Type fresh() {
    subst_.push_back(nullptr);
    return var_type(static_cast<int>(subst_.size()) - 1);
  }

  // The type of an expression that already failed to check: unifies with anything and silences
  // the errors it would otherwise cause further out.
  Type error_type() {
    Type t = fresh();
    error_vars_.insert(t->var);
    return t;
  }

  bool is_error(const Type& t) const {
    Type s = shallow(t);
    return s->kind == TypeKind::Var && error_vars_.count(s->var) > 0;
  }

  bool mentions_error(const Type& t) const {
    Type s = shallow(t);
    if (s->kind == TypeKind::Var) return error_vars_.count(s->var) > 0;
    for (auto& a : s->args)
      if (mentions_error(a)) return true;
    return s->ret && mentions_error(s->ret);
  }

  Type shallow(Type t) const {
    while (t->kind == TypeKind::Var && subst_[t->var]) t = subst_[t->var];
    return t;
  }

  Type zonk(const Type& t) const {
    Type s = shallow(t);
    if (s->kind == TypeKind::Tuple || s->kind == TypeKind::Adt || s->kind == TypeKind::Func) {
      auto copy = std::make_shared<TypeNode>(*s);
      for (auto& a : copy->args) a = zonk(a);
      if (copy->ret) copy->ret = zonk(copy->ret);
      return copy;
    }
    return s;
  }

  bool occurs(int var, const Type& t) const {
    Type s = shallow(t);
    if (s->kind == TypeKind::Var) return s->var == var;
    for (auto& a : s->args)
      if (occurs(var, a)) return true;
    return s->ret && occurs(var, s->ret);
  }

  bool unify(const Type& a0, const Type& b0) {
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
    if (a->kind != b->kind) return false;
    switch (a->kind) {
      case TypeKind::Tensor: return a->shape == b->shape;
      case TypeKind::Param: return a->name == b->name;
      case TypeKind::Adt:
        if (a->adt != b->adt) return false;
        [[fallthrough]];
      case TypeKind::Tuple:
      case TypeKind::Func:
        if (a->args.size() != b->args.size()) return false;
        for (size_t i = 0; i < a->args.size(); ++i)
          if (!unify(a->args[i], b->args[i])) return false;
        return a->kind != TypeKind::Func || unify(a->ret, b->ret);
      default: return true;
    }
  }

  // Unifies and reports "<context>: expected X, found Y" at `loc` on failure.
  bool expect(const Type& expected, const Type& found, const SourceLoc& loc,
              const std::string& context) {
    if (unify(expected, found)) return true;
    if (mentions_error(expected) || mentions_error(found)) return false;
    sink_.error(loc, context + ": expected " + type_str(zonk(expected)) + ", found " +
                         type_str(zonk(found)));
    return false;
  }

  Type instantiate(const Type& t, const std::vector<std::string>& params,
                   std::vector<Type>& args_out) {
    args_out.clear();
    for (size_t i = 0; i < params.size(); ++i) args_out.push_back(fresh());
    return substitute_params(t, params, args_out);
  }

  // ---------------------------------------------------------------------------------------------
  // Scopes
  struct Scope {
    std::vector<LocalVarPtr> vars;
    // Lambdas being checked, with the scope depth at which each began: a reference to a variable
    // bound below that depth is a capture.
    std::vector<std::pair<Lambda*, size_t>> lambdas;
  };

  LocalVarPtr lookup_local(const std::string& name) {
    for (size_t i = scope_.vars.size(); i-- > 0;) {
      if (scope_.vars[i]->name != name) continue;
      for (auto& [lambda, start] : scope_.lambdas) {
        if (i < start &&
            std::find(lambda->captures.begin(), lambda->captures.end(), scope_.vars[i]) ==
                lambda->captures.end())
          lambda->captures.push_back(scope_.vars[i]);
      }
      return scope_.vars[i];
    }
    return nullptr;
  }

  // ---------------------------------------------------------------------------------------------
  // Functions and expressions
  void check_func(FuncDecl& f) {
    current_func_ = &f;
    scope_ = Scope{};
    for (auto& p : f.params) scope_.vars.push_back(p.var);
    Type body = infer(*f.body);
    // Point at the value the body returns: the expression after its lets, not the first let.
    const Expr* result = f.body.get();
    while (result->kind == ExprKind::Let) result = result->as<Let>().body.get();
    expect(f.type->ret, body, result->span.begin,
           "the body of function " + quote(f.name) + " has the wrong type");
    zonk_expr(*f.body);
  }

  void zonk_expr(Expr& e) {
    if (e.type) e.type = zonk(e.type);
    std::function<void(Pattern&)> zonk_pattern = [&](Pattern& p) {
      if (p.type) p.type = zonk(p.type);
      if (p.var && p.var->type) p.var->type = zonk(p.var->type);
      for (auto& s : p.subs) zonk_pattern(*s);
    };
    switch (e.kind) {
      case ExprKind::Name:
        for (auto& t : e.as<Name>().type_args) t = zonk(t);
        break;
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
      case ExprKind::Binary:
        zonk_expr(*e.as<Binary>().lhs);
        zonk_expr(*e.as<Binary>().rhs);
        break;
      case ExprKind::Let: {
        auto& l = e.as<Let>();
        zonk_pattern(*l.pattern);
        zonk_expr(*l.value);
        zonk_expr(*l.body);
        break;
      }
      case ExprKind::If: {
        auto& i = e.as<If>();
        zonk_expr(*i.cond);
        zonk_expr(*i.then_branch);
        zonk_expr(*i.else_branch);
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

  Type infer(Expr& e, const Type& expected = nullptr) {
    Type t = infer_inner(e, expected);
    e.type = t;
    return t;
  }

  Type infer_inner(Expr& e, const Type& expected) {
    switch (e.kind) {
      case ExprKind::IntLit: return int_type();
      case ExprKind::FloatLit: return float_type();
      case ExprKind::BoolLit: return bool_type();
      case ExprKind::Name: return infer_name(e.as<Name>());
      case ExprKind::Call: return infer_call(e.as<Call>());
      case ExprKind::Index: return infer_index(e.as<Index>());
      case ExprKind::Proj: return infer_proj(e.as<Proj>());
      case ExprKind::Tuple: {
        std::vector<Type> elems;
        for (auto& x : e.as<ast::Tuple>().elems) elems.push_back(infer(*x));
        return tuple_type(elems);
      }
      case ExprKind::Unary: return infer_unary(e.as<Unary>());
      case ExprKind::Binary: return infer_binary(e.as<Binary>());
      case ExprKind::Let: return infer_let(e.as<Let>());
      case ExprKind::If: return infer_if(e.as<If>());
      case ExprKind::Match: return infer_match(e.as<Match>());
      case ExprKind::Lambda: return infer_lambda(e.as<Lambda>(), expected);
    }
    return error_type();
  }

  Type infer_name(Name& n) {
    if (auto local = lookup_local(n.name)) {
      n.ref = NameRef::Local;
      n.local = local;
      return local->type;
    }
    if (const int64_t* v = dims_.find(n.name)) {
      n.ref = NameRef::Dim;
      n.dim_value = *v;
      return int_type();
    }
    if (dims_.broken(n.name) || broken_params_.count(n.name) || redefined_.count(n.name))
      return error_type();  // reported
    if (auto it = params_.find(n.name); it != params_.end()) {
      n.ref = NameRef::Param;
      n.param = it->second;
      if (n.param->count) {
        sink_.error(n.span.begin, "param " + quote(n.name) + " holds " +
                                      std::to_string(n.param->resolved_count) +
                                      " tensors: index it with a host int, e.g. " + n.name + "[i]");
        return error_type();
      }
      return tensor_type(n.param->shape);
    }
    if (auto it = funcs_.find(n.name); it != funcs_.end()) {
      n.ref = NameRef::Function;
      n.func = it->second;
      return instantiate(n.func->type, n.func->type_params, n.type_args);
    }
    if (auto it = ctors_.find(n.name); it != ctors_.end()) {
      n.ref = NameRef::Ctor;
      n.ctor = it->second;
      Type adt = instantiate(adt_type(n.ctor->adt, param_types(n.ctor->adt)),
                             n.ctor->adt->type_params, n.type_args);
      if (n.ctor->fields.empty()) return adt;
      std::vector<Type> fields;
      for (auto& f : n.ctor->fields)
        fields.push_back(substitute_params(f, n.ctor->adt->type_params, n.type_args));
      return func_type(fields, adt);
    }
    if (find_op(n.name) || n.name == kSplit) {
      sink_.error(n.span.begin, "operator " + quote(n.name) +
                                    " can only be called, not used as a value; wrap it in fn(x) { " +
                                    n.name + "(x) }");
      return error_type();
    }
    sink_.error(n.span.begin, "unknown name " + quote(n.name) + suggestion(n.name));
    return error_type();
  }

  static std::vector<Type> param_types(const AdtDef* adt) {
    std::vector<Type> out;
    for (auto& p : adt->type_params) out.push_back(param_type(p));
    return out;
  }

  // " (did you mean 'x'?)" for the closest visible name within edit distance 2, or "".
  std::string suggestion(const std::string& name) {
    std::vector<std::string> candidates;
    for (auto& v : scope_.vars) candidates.push_back(v->name);
    for (auto& [k, _] : top_names_) candidates.push_back(k);
    auto distance = [](const std::string& a, const std::string& b) {
      std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
      for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
      for (size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (size_t j = 1; j <= b.size(); ++j)
          cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
        std::swap(prev, cur);
      }
      return prev[b.size()];
    };
    std::string best;
    // Close enough to be a typo, and not a different short name altogether.
    size_t best_d = std::min<size_t>(3, name.size());
    for (auto& c : candidates) {
      size_t d = distance(name, c);
      if (d < best_d) {
        best_d = d;
        best = c;
      }
    }
    return best.empty() ? "" : " (did you mean " + quote(best) + "?)";
  }

  std::optional<int64_t> const_int(const Expr& e) {
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
        // Overflow, division by zero and INT64_MIN / -1 make no constant (and the argument is
        // then reported as not constant).
        auto& b = e.as<Binary>();
        auto l = const_int(*b.lhs), r = const_int(*b.rhs);
        if (!l || !r) return std::nullopt;
        int64_t out = 0;
        switch (b.op) {
          case BinOp::Add:
            return __builtin_add_overflow(*l, *r, &out) ? std::nullopt : std::optional(out);
          case BinOp::Sub:
            return __builtin_sub_overflow(*l, *r, &out) ? std::nullopt : std::optional(out);
          case BinOp::Mul:
            return __builtin_mul_overflow(*l, *r, &out) ? std::nullopt : std::optional(out);
          case BinOp::Div:
          case BinOp::Mod:
            if (*r == 0 || (*l == INT64_MIN && *r == -1)) return std::nullopt;
            return b.op == BinOp::Div ? *l / *r : *l % *r;
          default: return std::nullopt;
        }
      }
      default: return std::nullopt;
    }
  }

  Type infer_call(Call& c) {
    if (c.callee->kind == ExprKind::Name) {
      auto& name = c.callee->as<Name>();
      bool shadowed = lookup_local(name.name) != nullptr;
      if (!shadowed && !dims_.find(name.name) && !params_.count(name.name) &&
          !funcs_.count(name.name) && !ctors_.count(name.name)) {
        if (name.name == kSplit) return infer_split(c);
        if (const OpInfo* op = find_op(name.name); op && op->id != OpId::Constant)
          return infer_op(c, *op);
      }
    }
    if (!c.named.empty())
      sink_.error(c.named[0].span.begin, "named argument " + quote(c.named[0].name) +
                                             ": only operators take named arguments");
    // Non-lambda arguments first, so that lambdas see their parameter types.
    Type callee = shallow(infer(*c.callee));
    std::vector<Type> arg_types(c.args.size());
    for (size_t i = 0; i < c.args.size(); ++i)
      if (c.args[i]->kind != ExprKind::Lambda) arg_types[i] = infer(*c.args[i]);
    if (callee->kind == TypeKind::Var) {
      for (size_t i = 0; i < c.args.size(); ++i)
        if (!arg_types[i]) arg_types[i] = infer(*c.args[i]);
      if (is_error(callee)) return error_type();  // reported
      Type ret = fresh();
      unify(callee, func_type(arg_types, ret));
      return ret;
    }
    std::string what = callee_description(*c.callee);
    if (callee->kind != TypeKind::Func) {
      sink_.error(c.callee->span.begin,
                  what + " is not a function: expected something callable, found a value of type " +
                      type_str(zonk(callee)));
      for (size_t i = 0; i < c.args.size(); ++i)
        if (!arg_types[i]) infer(*c.args[i]);
      return error_type();
    }
    if (callee->args.size() != c.args.size()) {
      sink_.error(c.span.begin, what + " expects " + std::to_string(callee->args.size()) +
                                    " argument(s), found " + std::to_string(c.args.size()));
      for (size_t i = 0; i < c.args.size(); ++i)
        if (!arg_types[i]) infer(*c.args[i]);
      return callee->ret ? callee->ret : error_type();
    }
    // Unify the other arguments first: they fix the type parameters the lambdas' parameters use
    // (foldl(fn(h, x) { ... }, h0, xs) learns h from h0 and x from xs).
    for (bool lambdas : {false, true}) {
      for (size_t i = 0; i < c.args.size(); ++i) {
        if ((c.args[i]->kind == ExprKind::Lambda) != lambdas) continue;
        if (!arg_types[i]) arg_types[i] = infer(*c.args[i], zonk(callee->args[i]));
        expect(callee->args[i], arg_types[i], c.args[i]->span.begin,
               "argument " + std::to_string(i + 1) + " of " + what);
      }
    }
    return callee->ret;
  }

  static std::string callee_description(const Expr& callee) {
    if (callee.kind != ExprKind::Name) return "the called expression";
    auto& n = callee.as<Name>();
    switch (n.ref) {
      case NameRef::Function: return "function " + quote(n.name);
      case NameRef::Ctor: return "constructor " + quote(n.name);
      default: return quote(n.name);
    }
  }

  // Checks tensor operands, binds integer attributes (positional after the operands, or named).
  bool bind_attrs(Call& c, const OpInfo& op, size_t tensor_args, OpAttrs& attrs) {
    const auto& specs = op.attrs;
    std::vector<std::optional<int64_t>> values(specs.size());
    std::vector<bool> given(specs.size());  // given, though perhaps not as a constant
    bool ok = true;
    size_t spec_i = 0;
    for (size_t i = tensor_args; i < c.args.size(); ++i) {
      auto v = const_int(*c.args[i]);
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
  bool tensor_operands(Call& c, const char* op_name, size_t n,
                       std::vector<std::vector<int64_t>>& shapes) {
    bool ok = true;
    for (size_t i = 0; i < n; ++i) {
      Type t = shallow(infer(*c.args[i]));
      if (t->kind == TypeKind::Tensor) {
        shapes.push_back(t->shape);
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

  size_t count_tensor_operands(const Call& c, const OpInfo& op) {
    if (op.arity >= 0) return std::min<size_t>(op.arity, c.args.size());
    // Variadic (concat): every positional argument that is not a constant integer.
    size_t n = 0;
    while (n < c.args.size() && !const_int(*c.args[n])) ++n;
    return n;
  }

  Type infer_op(Call& c, const OpInfo& op) {
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
    ShapeResult r = op.shape(shapes, attrs);
    if (!r.type) {
      // Some shape rules name their operator already ("matmul inner dimensions differ: ...").
      bool named = r.error.rfind(std::string(op.name) + " ", 0) == 0;
      sink_.error(c.span.begin, named ? r.error : std::string(op.name) + ": " + r.error);
      return error_type();
    }
    return r.type;
  }

  // split(x, n, axis=-1): a tuple of n equal slices.
  Type infer_split(Call& c) {
    auto& name = c.callee->as<Name>();
    name.ref = NameRef::Op;
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
                             OpClass::DataMovement, nullptr, nullptr, "()"};
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

  Type infer_index(Index& ix) {
    Type idx = infer(*ix.index);
    if (ix.base->kind == ExprKind::Name) {
      auto& n = ix.base->as<Name>();
      if (!lookup_local(n.name)) {
        if (auto it = params_.find(n.name); it != params_.end()) {
          n.ref = NameRef::Param;
          n.param = it->second;
          if (!n.param->count) {
            sink_.error(ix.span.begin, "param " + quote(n.name) +
                                           " is a single tensor and cannot be indexed; declare it "
                                           "as `param " +
                                           n.name + "[N]: ...` to hold N tensors");
            return error_type();
          }
          Type shape = tensor_type(n.param->shape);
          ix.base->type = shape;
          expect(int_type(), idx, ix.index->span.begin, "index of param " + quote(n.name));
          return shape;
        }
      }
    }
    if (is_error(infer(*ix.base))) return error_type();  // reported already
    sink_.error(ix.span.begin,
                "only an indexed param can be indexed with [...] (e.g. emb[w]); use match to take "
                "a list apart and .N to take a tuple apart");
    return error_type();
  }

  Type infer_proj(Proj& p) {
    Type base = shallow(infer(*p.base));
    if (is_error(base)) return error_type();  // reported already
    if (base->kind != TypeKind::Tuple) {
      sink_.error(p.span.begin, "." + std::to_string(p.index) +
                                    " takes a field of a tuple, found a value of type " +
                                    type_str(zonk(base)));
      return error_type();
    }
    if (p.index < 0 || static_cast<size_t>(p.index) >= base->args.size()) {
      sink_.error(p.span.begin, "tuple field ." + std::to_string(p.index) +
                                    " does not exist: the tuple has " +
                                    std::to_string(base->args.size()) + " fields");
      return error_type();
    }
    return base->args[p.index];
  }

  Type infer_unary(Unary& u) {
    Type t = shallow(infer(*u.operand));
    if (u.op == '!') {
      expect(bool_type(), t, u.operand->span.begin, "operand of '!'");
      return bool_type();
    }
    if (t->kind == TypeKind::Int || t->kind == TypeKind::Float || t->kind == TypeKind::Tensor ||
        t->kind == TypeKind::Var)
      return t;
    sink_.error(u.span.begin, "operand of unary '-': expected int, float or a tensor, found " +
                                  type_str(zonk(t)));
    return error_type();
  }

  static bool is_literal(const Expr& e) {
    return e.kind == ExprKind::FloatLit || e.kind == ExprKind::IntLit;
  }

  Type infer_binary(Binary& b) {
    Type l = shallow(infer(*b.lhs));
    Type r = shallow(infer(*b.rhs));
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
        std::vector<std::vector<int64_t>> shapes = {l->shape, r->shape};
        ShapeResult res = op_info(OpId::MatMul).shape(shapes, {});
        if (!res.type) {
          sink_.error(b.span.begin, res.error);
          return error_type();
        }
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
        if ((st->kind == TypeKind::Float || st->kind == TypeKind::Int) && is_literal(scalar)) {
          return l->kind == TypeKind::Tensor ? l : r;
        }
        sink_.error(scalar.span.begin,
                    "operand of " + sym + " with a tensor: expected a tensor or a numeric literal, "
                    "found " + type_str(st) +
                        (st->kind == TypeKind::Float || st->kind == TypeKind::Int
                             ? " computed on the host (only literal constants combine with tensors)"
                             : ""));
        return error_type();
      }
      std::vector<std::vector<int64_t>> shapes = {l->shape, r->shape};
      ShapeResult res = op_info(OpId::Add).shape(shapes, {});
      if (!res.type) {
        sink_.error(b.span.begin, sym + ": " + res.error);
        return error_type();
      }
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

  Type infer_let(Let& let) {
    Type value = infer(*let.value);
    if (let.annotation) {
      Type ann = resolve_type(*let.annotation, current_func_->type_params);
      expect(ann, value, let.value->span.begin, "value of the let binding");
    }
    size_t mark = scope_.vars.size();
    bind_pattern(*let.pattern, value, /*refutable_ok=*/false);
    Type body = infer(*let.body);
    scope_.vars.resize(mark);
    return body;
  }

  Type infer_if(If& i) {
    Type cond = shallow(infer(*i.cond));
    if (cond->kind == TypeKind::Tensor)
      sink_.error(i.cond->span.begin,
                  "condition of 'if': expected bool, found a tensor " + type_str(cond) +
                      "; read it with item(x) or argmax(x) and compare the host value");
    else
      expect(bool_type(), cond, i.cond->span.begin, "condition of 'if'");
    Type t = infer(*i.then_branch);
    Type e = infer(*i.else_branch);
    expect(t, e, i.else_branch->span.begin,
           "the 'else' branch must have the same type as the 'then' branch");
    return t;
  }

  Type infer_match(Match& m) {
    Type scrut = infer(*m.scrutinee);
    Type result = fresh();
    for (auto& c : m.clauses) {
      size_t mark = scope_.vars.size();
      bind_pattern(*c.pattern, scrut, /*refutable_ok=*/true);
      Type body = infer(*c.body);
      expect(result, body, c.body->span.begin, "match clauses must all have the same type");
      scope_.vars.resize(mark);
    }
    check_exhaustive(m, shallow(scrut));
    return result;
  }

  static bool irrefutable(const Pattern& p) {
    if (p.kind == Pattern::Wildcard || p.kind == Pattern::Bind) return true;
    if (p.kind == Pattern::Tuple)
      return std::all_of(p.subs.begin(), p.subs.end(), [](auto& s) { return irrefutable(*s); });
    return false;
  }

  // A constructor pattern naming no constructor (reported by bind_pattern).
  static bool has_unknown_ctor(const Pattern& p) {
    if (p.kind == Pattern::Ctor && !p.ctor) return true;
    return std::any_of(p.subs.begin(), p.subs.end(), [](auto& s) { return has_unknown_ctor(*s); });
  }

  void check_exhaustive(const Match& m, const Type& scrut) {
    std::set<int> covered;
    for (auto& c : m.clauses) {
      if (irrefutable(*c.pattern)) return;
      if (has_unknown_ctor(*c.pattern)) return;  // what the clause meant to cover is unknown
      if (c.pattern->kind == Pattern::Ctor && c.pattern->ctor &&
          std::all_of(c.pattern->subs.begin(), c.pattern->subs.end(),
                      [](auto& s) { return irrefutable(*s); }))
        covered.insert(c.pattern->ctor->tag);
    }
    if (scrut->kind == TypeKind::Var) return;  // unknown: reported, or nothing to say
    for (auto& c : m.clauses)  // a constructor of another type: a type error, reported
      if (c.pattern->kind == Pattern::Ctor &&
          (scrut->kind != TypeKind::Adt || c.pattern->ctor->adt != scrut->adt))
        return;
    if (scrut->kind != TypeKind::Adt) {  // e.g. a tuple of data types: only a catch-all covers all
      sink_.error(m.span.begin, "match on " + type_str(zonk(scrut)) +
                                    " is not exhaustive: add a clause that matches every value, "
                                    "e.g. `_ => ...`");
      return;
    }
    std::string missing;
    for (auto& ctor : scrut->adt->ctors) {
      if (covered.count(ctor->tag)) continue;
      std::string shown = ctor->name;
      if (!ctor->fields.empty()) {
        shown += "(";
        for (size_t i = 0; i < ctor->fields.size(); ++i) shown += i ? ", _" : "_";
        shown += ")";
      }
      missing += (missing.empty() ? "" : ", ") + shown;
    }
    if (!missing.empty())
      sink_.error(m.span.begin, "match on " + type_str(zonk(scrut)) +
                                    " is not exhaustive: no clause matches " + missing +
                                    " (add clauses or a catch-all `_ => ...`)");
  }

  void bind_pattern(Pattern& p, const Type& t, bool refutable_ok) {
    p.type = t;
    switch (p.kind) {
      case Pattern::Wildcard: return;
      case Pattern::Bind: {
        p.var = std::make_shared<LocalVar>(LocalVar{p.name, t, p.span});
        scope_.vars.push_back(p.var);
        return;
      }
      case Pattern::Tuple: {
        Type s = shallow(t);
        if (is_error(s)) {  // reported already
          for (auto& sub : p.subs) bind_pattern(*sub, error_type(), refutable_ok);
          return;
        }
        if (s->kind == TypeKind::Var) {
          std::vector<Type> elems;
          for (size_t i = 0; i < p.subs.size(); ++i) elems.push_back(fresh());
          unify(s, tuple_type(elems));
          s = shallow(t);
        }
        if (s->kind != TypeKind::Tuple || s->args.size() != p.subs.size()) {
          sink_.error(p.span.begin, "tuple pattern with " + std::to_string(p.subs.size()) +
                                        " elements: expected a value of type " +
                                        type_str(zonk(t)) + " to be a tuple of that size");
          for (auto& sub : p.subs) bind_pattern(*sub, fresh(), refutable_ok);
          return;
        }
        for (size_t i = 0; i < p.subs.size(); ++i) bind_pattern(*p.subs[i], s->args[i], refutable_ok);
        return;
      }
      case Pattern::Ctor: {
        if (redefined_.count(p.name)) {  // reported; p.ctor stays null
          for (auto& sub : p.subs) bind_pattern(*sub, fresh(), refutable_ok);
          return;
        }
        auto it = ctors_.find(p.name);
        if (it == ctors_.end() && !p.has_parens) {
          // An upper-case name that is no constructor binds a variable (e.g. a matrix `A`).
          p.kind = Pattern::Bind;
          bind_pattern(p, t, refutable_ok);
          return;
        }
        if (it == ctors_.end()) {
          sink_.error(p.span.begin, "unknown constructor " + quote(p.name) + " in pattern" +
                                        suggestion(p.name));
          for (auto& sub : p.subs) bind_pattern(*sub, fresh(), refutable_ok);
          return;
        }
        const CtorDef* ctor = it->second;
        p.ctor = ctor;
        if (!refutable_ok && ctor->adt->ctors.size() > 1)
          sink_.error(p.span.begin, "let cannot take apart " + ctor->adt->name +
                                        " with constructor " + quote(p.name) +
                                        ": it has other constructors; use match");
        std::vector<Type> args;
        Type adt = instantiate(adt_type(ctor->adt, param_types(ctor->adt)),
                               ctor->adt->type_params, args);
        expect(t, adt, p.span.begin, "pattern " + quote(p.name));
        if (p.subs.size() != ctor->fields.size()) {
          sink_.error(p.span.begin, "constructor " + quote(p.name) + " has " +
                                        std::to_string(ctor->fields.size()) +
                                        " field(s), the pattern gives " +
                                        std::to_string(p.subs.size()));
          for (auto& sub : p.subs) bind_pattern(*sub, fresh(), refutable_ok);
          return;
        }
        for (size_t i = 0; i < p.subs.size(); ++i)
          bind_pattern(*p.subs[i], substitute_params(ctor->fields[i], ctor->adt->type_params, args),
                       refutable_ok);
        return;
      }
    }
  }

  Type infer_lambda(Lambda& l, const Type& expected) {
    Type exp = expected ? shallow(expected) : nullptr;
    if (exp && (exp->kind != TypeKind::Func || exp->args.size() != l.params.size())) exp = nullptr;
    size_t mark = scope_.vars.size();
    std::vector<Type> params;
    for (size_t i = 0; i < l.params.size(); ++i) {
      auto& p = l.params[i];
      Type t = p.type_expr ? resolve_type(*p.type_expr, current_func_->type_params)
                           : exp ? exp->args[i]
                                 : fresh();
      bool fits = !(p.type_expr && exp) ||
                  expect(exp->args[i], t, p.span.begin, "lambda parameter " + quote(p.name));
      p.var = std::make_shared<LocalVar>(LocalVar{p.name, t, p.span});
      params.push_back(fits ? t : error_type());  // reported: the call reports nothing more
    }
    scope_.lambdas.emplace_back(&l, mark);
    for (auto& p : l.params) scope_.vars.push_back(p.var);
    Type body = infer(*l.body);
    if (l.ret_expr)
      expect(resolve_type(*l.ret_expr, current_func_->type_params), body, l.body->span.begin,
             "lambda body");
    scope_.vars.resize(mark);
    scope_.lambdas.pop_back();
    return func_type(params, body);
  }

  // ---------------------------------------------------------------------------------------------
  // Recursion: a function (or a group of mutually recursive functions) that calls back into its
  // group on every path can never return.
  void collect_calls(const Expr& e, std::set<const FuncDecl*>& out) {
    visit(e, [&](const Expr& x) {
      if (x.kind == ExprKind::Name && x.as<Name>().ref == NameRef::Function)
        out.insert(x.as<Name>().func);
    });
  }

  // Calls fn on e and every sub-expression.
  void visit(const Expr& e, const std::function<void(const Expr&)>& fn) {
    fn(e);
    switch (e.kind) {
      case ExprKind::Call:
        visit(*e.as<Call>().callee, fn);
        for (auto& a : e.as<Call>().args) visit(*a, fn);
        break;
      case ExprKind::Index:
        visit(*e.as<Index>().base, fn);
        visit(*e.as<Index>().index, fn);
        break;
      case ExprKind::Proj: visit(*e.as<Proj>().base, fn); break;
      case ExprKind::Tuple:
        for (auto& x : e.as<ast::Tuple>().elems) visit(*x, fn);
        break;
      case ExprKind::Unary: visit(*e.as<Unary>().operand, fn); break;
      case ExprKind::Binary:
        visit(*e.as<Binary>().lhs, fn);
        visit(*e.as<Binary>().rhs, fn);
        break;
      case ExprKind::Let:
        visit(*e.as<Let>().value, fn);
        visit(*e.as<Let>().body, fn);
        break;
      case ExprKind::If:
        visit(*e.as<If>().cond, fn);
        visit(*e.as<If>().then_branch, fn);
        visit(*e.as<If>().else_branch, fn);
        break;
      case ExprKind::Match:
        visit(*e.as<Match>().scrutinee, fn);
        for (auto& c : e.as<Match>().clauses) visit(*c.body, fn);
        break;
      case ExprKind::Lambda: visit(*e.as<Lambda>().body, fn); break;
      default: break;
    }
  }

  // True when evaluating e necessarily calls a function of `group` (lambda bodies do not run).
  bool must_call(const Expr& e, const std::set<const FuncDecl*>& group) {
    switch (e.kind) {
      case ExprKind::Call: {
        auto& c = e.as<Call>();
        if (c.callee->kind == ExprKind::Name && c.callee->as<Name>().ref == NameRef::Function &&
            group.count(c.callee->as<Name>().func))
          return true;
        if (must_call(*c.callee, group)) return true;
        for (auto& a : c.args)
          if (must_call(*a, group)) return true;
        return false;
      }
      case ExprKind::Index: return must_call(*e.as<Index>().index, group);
      case ExprKind::Proj: return must_call(*e.as<Proj>().base, group);
      case ExprKind::Tuple:
        for (auto& x : e.as<ast::Tuple>().elems)
          if (must_call(*x, group)) return true;
        return false;
      case ExprKind::Unary: return must_call(*e.as<Unary>().operand, group);
      case ExprKind::Binary: {
        auto& b = e.as<Binary>();
        // The right operand of && and || may not run.
        if (b.op == BinOp::And || b.op == BinOp::Or) return must_call(*b.lhs, group);
        return must_call(*b.lhs, group) || must_call(*b.rhs, group);
      }
      case ExprKind::Let:
        return must_call(*e.as<Let>().value, group) || must_call(*e.as<Let>().body, group);
      case ExprKind::If: {
        auto& i = e.as<If>();
        return must_call(*i.cond, group) ||
               (must_call(*i.then_branch, group) && must_call(*i.else_branch, group));
      }
      case ExprKind::Match: {
        auto& m = e.as<Match>();
        if (must_call(*m.scrutinee, group)) return true;
        for (auto& c : m.clauses)
          if (!must_call(*c.body, group)) return false;
        return true;
      }
      default: return false;
    }
  }

  void check_recursion() {
    std::map<const FuncDecl*, std::set<const FuncDecl*>> calls;
    for (auto& f : m_.funcs) collect_calls(*f->body, calls[f.get()]);
    // The group of f: the functions that reach f and are reached by f (its strongly connected
    // component), computed by reachability since modules are small.
    auto reach = [&](const FuncDecl* from) {
      std::set<const FuncDecl*> seen;
      std::vector<const FuncDecl*> work = {from};
      while (!work.empty()) {
        auto* g = work.back();
        work.pop_back();
        for (auto* h : calls[g])
          if (seen.insert(h).second) work.push_back(h);
      }
      return seen;
    };
    std::map<const FuncDecl*, std::set<const FuncDecl*>> reaches;
    for (auto& f : m_.funcs) reaches[f.get()] = reach(f.get());
    for (auto& f : m_.funcs) {
      if (!reaches[f.get()].count(f.get())) continue;
      std::set<const FuncDecl*> group;
      for (auto* g : reaches[f.get()])
        if (reaches[g].count(f.get())) group.insert(g);
      if (must_call(*f->body, group)) {
        std::string names;  // in declaration order
        for (auto& g : m_.funcs)
          if (group.count(g.get())) names += (names.empty() ? "" : ", ") + quote(g->name);
        sink_.error(f->span.begin, "function " + quote(f->name) +
                                       " never returns: every path through its body calls " +
                                       names + " again; add a base case (a branch that returns "
                                       "without recursing)");
      }
    }
  }

  Module& m_;
  const DimOverrides& overrides_;
  DiagnosticSink& sink_;
  DimScope dims_;
  std::unordered_map<std::string, SourceLoc> top_names_;
  // Names defined twice (reported): which definition a use means is unknown, so uses report nothing.
  std::set<std::string> redefined_;
  std::unordered_map<std::string, const AdtDef*> adts_;
  std::unordered_map<std::string, const CtorDef*> ctors_;
  std::unordered_map<std::string, const ParamDecl*> params_;
  std::set<std::string> broken_params_;  // params whose declaration was reported as wrong
  std::unordered_map<std::string, const FuncDecl*> funcs_;
  std::vector<Type> subst_;
  std::set<int> error_vars_;
  Scope scope_;
  FuncDecl* current_func_ = nullptr;
};

}  // namespace

void check_module(Module& module, const DimOverrides& overrides, DiagnosticSink& sink) {
  Checker checker(module, overrides, sink);
  checker.run();
  sink.throw_if_errors();
}

}  // namespace acrobat
