// Functions and expressions: local scopes, function bodies, names, calls of functions and
// constructors, indexing, tuple fields, unary operators, let, if and lambdas.
#include <algorithm>
#include <utility>

#include "ops/ops.h"
#include "lang/checker.h"

namespace acrobat::checker {

namespace {

std::string callee_description(const Expr& callee) {
  if (callee.kind != ExprKind::Name) return "the called expression";
  auto& n = callee.as<Name>();
  switch (n.ref) {
    case NameRef::Function: return "function " + quote(n.name);
    case NameRef::Ctor: return "constructor " + quote(n.name);
    default: return quote(n.name);
  }
}

}  // namespace

LocalVarPtr Checker::lookup_local(const std::string& name) {
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

void Checker::check_func(FuncDecl& f) {
  current_func_ = &f;
  made_names_.clear();
  scope_ = Scope{};
  for (auto& p : f.params) scope_.vars.push_back(p.var);
  // Annotations in the body may name the function's size variables.
  std::vector<std::pair<std::string, int64_t>> sizes;
  for (int64_t d : f.size_params)
    sizes.emplace_back(size_names_[static_cast<size_t>(size_var_index(d))], d);
  size_scope_ = &sizes;
  if (!f.made_sizes.empty()) {
    // Each expression the body returns is checked against the result on its own (infer_returned):
    // the sizes it makes may differ between them.
    infer_at(*f.body, true);
    size_scope_ = nullptr;
    for (auto& [at, made] : f.made_at)
      for (size_t k = 0; k < made.size(); ++k) {
        made[k] = resolve_dim(made[k]);
        if (is_size_var(made[k]) && !sizes_[static_cast<size_t>(size_var_index(made[k]))].rigid)
          sink_.error(at->span.begin, "cannot tell size " + quote(dim_str(f.made_sizes[k])) +
                                          " of the value function " + quote(f.name) +
                                          " returns here");
      }
    zonk_expr(*f.body);
    return;
  }
  Type body = infer(*f.body);
  size_scope_ = nullptr;
  // Point at the value the body returns: the expression after its lets, not the first let.
  const Expr* result = f.body.get();
  while (result->kind == ExprKind::Let) result = result->as<Let>().body.get();
  expect(f.type->ret, body, result->span.begin,
         "the body of function " + quote(f.name) + " has the wrong type");
  zonk_expr(*f.body);
}

Type Checker::infer(Expr& e, const Type& expected) {
  const bool returned = tail_ && e.kind != ExprKind::Let && e.kind != ExprKind::If &&
                        e.kind != ExprKind::Match;
  if (returned) return infer_returned(e);  // sets e.type to the value's type
  Type t = infer_inner(e, expected);
  e.type = t;
  return t;
}

Type Checker::infer_at(Expr& e, bool tail) {
  const bool saved = std::exchange(tail_, tail);
  Type t = infer(e);
  tail_ = saved;
  return t;
}

// An expression a function that makes sizes returns (a leaf of its tail positions): checked
// against the result with fresh flexible sizes for the made ones, which bind to what they are
// here (made_at, for lowering). Its type is the result with the values of the made sizes beside
// it, the type of every tail position (so let, if and match around it see one type), while the
// leaf itself keeps its own.
Type Checker::infer_returned(Expr& e) {
  FuncDecl& f = *current_func_;
  tail_ = false;
  Type value = infer_inner(e, nullptr);
  tail_ = true;
  std::vector<int64_t> made, none;
  Type expected = instantiate_sizes(f.type->ret, f.made_sizes, made, {}, none, e.span.begin);
  // A value reported already, or one that does not fit, tells nothing of the made sizes.
  if (!is_error(value) && expect(expected, value, e.span.begin, "the value function " + quote(f.name) + " returns"))
    f.made_at[&e] = made;
  std::vector<Type> with_sizes{f.type->ret};
  for (size_t k = 0; k < made.size(); ++k) with_sizes.push_back(int_type());
  e.type = value;
  return tuple_type(with_sizes);
}

Type Checker::infer_inner(Expr& e, const Type& expected) {
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

Type Checker::infer_name(Name& n) {
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
    Type t = instantiate(n.func->type, n.func->type_params, n.type_args);
    if (n.func->size_params.empty() && n.func->made_sizes.empty()) return t;
    if (&n != direct_callee_ && n.func->made_sizes.empty()) {
      sink_.error(n.span.begin, "function " + quote(n.name) +
                                    " has sizes that vary per instance (size variables) and can "
                                    "only be called, not used as a value; call it from a lambda "
                                    "instead, e.g. fn(x) { " + n.name + "(x) }");
      return error_type();
    }
    if (&n != direct_callee_) {
      sink_.error(n.span.begin, "function " + quote(n.name) + " makes the size " +
                                    quote(dim_str(n.func->made_sizes[0])) +
                                    " of its result and can only be called, not used as a value "
                                    "(each call's result has a size of its own)");
      return error_type();
    }
    Type inst = instantiate_sizes(t, n.func->size_params, n.sizes, n.func->made_sizes, n.made, n.span.begin);
    // A call's made sizes are named after the callee (pick.m), a second call's numbered (pick.m#2).
    for (int64_t d : n.made) {
      std::string& name = size_names_[static_cast<size_t>(size_var_index(d))];
      name.insert(0, n.name + ".");
      if (const int count = ++made_names_[name]; count > 1) name += "#" + std::to_string(count);
    }
    return inst;
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
  if (find_op(n.name) || find_builtin(n.name)) {
    sink_.error(n.span.begin, "operator " + quote(n.name) +
                                  " can only be called, not used as a value; wrap it in fn(x) { " +
                                  n.name + "(x) }");
    return error_type();
  }
  sink_.error(n.span.begin, "unknown name " + quote(n.name) + suggestion(n.name));
  return error_type();
}

std::vector<Type> Checker::param_types(const AdtDef* adt) {
  std::vector<Type> out;
  for (auto& p : adt->type_params) out.push_back(param_type(p));
  return out;
}

// " (did you mean 'x'?)" for the closest visible name within edit distance 2, or "".
std::string Checker::suggestion(const std::string& name) {
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

Type Checker::infer_call(Call& c) {
  if (c.callee->kind == ExprKind::Name) {
    auto& name = c.callee->as<Name>();
    bool shadowed = lookup_local(name.name) != nullptr;
    if (!shadowed && !dims_.find(name.name) && !params_.count(name.name) &&
        !funcs_.count(name.name) && !ctors_.count(name.name)) {
      if (std::optional<Builtin> b = find_builtin(name.name)) return infer_builtin(c, *b);
      if (const OpInfo* op = find_op(name.name); op && op->id != OpId::Constant && op->id != OpId::HostScalar)
        return infer_op(c, *op);
    }
  }
  if (!c.named.empty())
    sink_.error(c.named[0].span.begin, "named argument " + quote(c.named[0].name) +
                                           ": only operators take named arguments");
  // Non-lambda arguments first, so that lambdas see their parameter types.
  direct_callee_ = c.callee.get();
  Type callee = shallow(infer(*c.callee));
  direct_callee_ = nullptr;
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

// emb[ids] with ids: List[int]: the entries' rows one after another, [m, E] for entries [1, E] or
// [E]. m is a size of its own (the list's length, known when the instance runs), rigid in the
// function, so that two gathers are two sizes unless a call shows them equal.
Type Checker::gather_type(Index& ix, const ParamDecl& p) {
  const auto& e = p.shape;
  if (e.empty() || e.size() > 2 || (e.size() == 2 && e[0] != 1)) {
    sink_.error(ix.span.begin, "param " + quote(p.name) + " has entries f32" + shape_str(e) +
                                   ": a list of indices gathers rows, so entries must be f32[E] "
                                   "or f32[1, E]");
    return error_type();
  }
  std::string name = "len";
  if (ix.index->kind == ExprKind::Name) {
    name = ix.index->as<Name>().name;
    name.insert(0, "len(");
    name += ')';
  }
  const int64_t size = new_size(name, true);
  gather_sizes_.emplace(size, MadeSize{ix.span.begin, "gather"});
  return tensor_type({size, e.back()});
}

Type Checker::infer_index(Index& ix) {
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
        Type list = shallow(idx);
        if (list->kind == TypeKind::Adt && list->adt->is_list() && !list->args.empty() &&
            shallow(list->args[0])->kind == TypeKind::Int)
          return gather_type(ix, *n.param);
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

Type Checker::infer_proj(Proj& p) {
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

Type Checker::infer_unary(Unary& u) {
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

// A sequence of lets, by a loop: each binding is in scope for the rest; all have the body's type.
Type Checker::infer_let(Let& first) {
  size_t mark = scope_.vars.size();
  std::vector<Let*> lets = let_chain(first);
  // After a let that takes a data type apart, the rest of the sequence is the code of a match
  // clause (lowering): a gather made there stays there.
  size_t first_size = SIZE_MAX;
  for (Let* let : lets) {
    Type value = infer_at(*let->value, false);
    if (let->pattern->kind == Pattern::Ctor && first_size == SIZE_MAX) first_size = sizes_.size();
    if (let->annotation) {
      Type ann = resolve_type(*let->annotation, current_func_->type_params);
      expect(ann, value, let->value->span.begin, "value of the let binding");
    }
    bind_pattern(*let->pattern, value, /*refutable_ok=*/false);
  }
  Type body = infer(*lets.back()->body);
  if (first_size != SIZE_MAX) keep_gathers_inside(first_size, body, "let that takes a data type apart");
  scope_.vars.resize(mark);
  for (Let* let : lets) let->type = body;
  return body;
}

// An else-if chain, by a loop: conditions and then-branches in order, then the last else branch;
// each arm's then-branch must have the type of what follows its `else`, from the innermost out.
Type Checker::infer_if(If& first) {
  std::vector<If*> arms = if_chain(first);
  std::vector<Type> thens;
  for (If* i : arms) {
    Type cond = shallow(infer_at(*i->cond, false));
    if (cond->kind == TypeKind::Tensor)
      sink_.error(i->cond->span.begin,
                  "condition of 'if': expected bool, found a tensor " + type_str(cond) +
                      "; read it with item(x) or argmax(x) and compare the host value");
    else
      expect(bool_type(), cond, i->cond->span.begin, "condition of 'if'");
    thens.push_back(infer(*i->then_branch));
  }
  Type rest = infer(*arms.back()->else_branch);
  for (size_t k = arms.size(); k-- > 0;) {
    expect(thens[k], rest, arms[k]->else_branch->span.begin,
           "the 'else' branch must have the same type as the 'then' branch");
    arms[k]->type = thens[k];
    rest = thens[k];
  }
  return rest;
}

Type Checker::infer_lambda(Lambda& l, const Type& expected) {
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
  const size_t first_size = sizes_.size();
  Type body = infer(*l.body);
  keep_gathers_inside(first_size, body, "lambda");
  if (l.ret_expr)
    expect(resolve_type(*l.ret_expr, current_func_->type_params), body, l.body->span.begin,
           "lambda body");
  scope_.vars.resize(mark);
  scope_.lambdas.pop_back();
  return func_type(params, body);
}

}  // namespace acrobat::checker
