#include "ir/lower.h"

#include <algorithm>
#include <deque>
#include <map>

#include "ir/walk.h"

namespace acrobat {

using namespace ir;
namespace A = acrobat::ast;

namespace {

class Lowering {
 public:
  explicit Lowering(std::shared_ptr<const A::Module> src) : src_(std::move(src)) {}

  Module run() {
    SizeNamesScope names(src_->size_names);  // size variables' variables take their names
    Module m;
    m.source = src_;
    m.size_sums = src_->size_sums;
    for (auto& d : src_->dims) m.dims.emplace_back(d->name, d->resolved);
    for (auto& p : src_->params) {
      param_index_[p.get()] = static_cast<int>(m.params.size());
      m.params.push_back(Param{p->name, p->frozen, p->resolved_count, p->shape, p->span});
    }
    for (auto& t : src_->types) m.adts.push_back(t->def.get());
    // User functions in declaration order, then whatever they reach (prelude functions, lambdas).
    for (auto& f : src_->funcs)
      if (!in_prelude(f->span)) func_index(f.get());
    while (!pending_.empty()) {
      auto [decl, index] = pending_.front();
      pending_.pop_front();
      lower_function(*decl, index);
    }
    m.functions = std::move(functions_);
    number_new_sites(m);
    return m;
  }

 private:
  // ---- function bookkeeping ----
  // The prelude is the first file of every module: the front end parses it before the model. Only
  // here are functions told apart by their file; the IR keeps the answer in Function::origin.
  bool in_prelude(const Span& span) const {
    return !src_->files.empty() && span.begin.file == src_->files.front();
  }

  FunctionOrigin declared_origin(const Span& span) const {
    return FunctionOrigin{in_prelude(span) ? FunctionOrigin::Prelude : FunctionOrigin::User, -1};
  }

  int func_index(const A::FuncDecl* f) {
    auto it = func_index_.find(f);
    if (it != func_index_.end()) return it->second;
    int index = static_cast<int>(functions_.size());
    functions_.emplace_back();
    func_index_[f] = index;
    pending_.emplace_back(f, index);
    return index;
  }

  struct Context {
    Function* fn;
    int index;  // of fn in functions_
    std::map<const A::LocalVar*, int> locals;
    int lambda_count = 0;
    int block_depth = 0;  // blocks open around the one being lowered
    // Size variables: the host int variable holding each one's value (types.h).
    std::map<int64_t, int> sizes;
    // A lambda's: the function it is lowered inside, and the values its closure captures for the
    // size variables it takes from there (added as the body needs them; lower_size).
    Context* outer = nullptr;
    std::vector<Atom> size_captures;
    // A function that makes sizes (ast::FuncDecl::made_sizes): the expressions it returns and
    // what each made size is there, and the type it returns them in, (result, int, ...).
    const std::map<const A::Expr*, std::vector<int64_t>>* made_at = nullptr;
    Type made_type;
  };

  // Blocks inside blocks (the branches of if and match, the right operand of && and ||, the rest of
  // a sequence after a let that takes a data type apart) are walked recursively by every pass after
  // this one and by the engines, so their nesting is bounded here, where it is made. An else-if
  // chain nests one block per arm: 5000 arms run; more become this error, not a stack overflow.
  static constexpr int kMaxBlockNesting = 5000;

  // Opens a block one level deeper than the current one, for the code at `at`.
  void enter_block(const Span& at) {
    if (++ctx_->block_depth > kMaxBlockNesting)
      throw UserError(at.begin,
                      "blocks nested deeper than " + std::to_string(kMaxBlockNesting) +
                          " levels: each arm of an else-if chain, each match clause, each right "
                          "operand of && or || and each let that takes a data type apart opens a "
                          "block inside the one before; split the function into smaller ones or "
                          "use match");
  }

  int new_var(const std::string& name, Type type, Span span) {
    auto& vars = ctx_->fn->vars;
    vars.push_back(VarInfo{name, std::move(type), std::move(span)});
    return static_cast<int>(vars.size()) - 1;
  }

  int bind_local(const A::LocalVarPtr& local) {
    int v = new_var(local->name, local->type, local->span);
    ctx_->locals[local.get()] = v;
    return v;
  }

  Atom emit(Block& b, RhsPtr rhs, const std::string& name = "") {
    if (rhs->kind == RhsKind::Op) rhs = with_sizes(with_flops(rhs), b);
    int v = new_var(name, rhs->type, rhs->span);
    b.bindings.push_back(Binding{v, std::move(rhs)});
    return Atom::variable(v);
  }

  // Counts an operator's FLOPs once, here, where its operand shapes are known; with size variables
  // in them the engines count per instance.
  RhsPtr with_flops(const RhsPtr& rhs) {
    std::vector<std::vector<int64_t>> shapes;
    bool ragged = rhs->attrs.sizes != 0;
    for (const Atom& a : rhs->args) {
      shapes.push_back(ctx_->fn->vars[a.var].type->shape);
      ragged = ragged || is_ragged(shapes.back());
    }
    std::vector<int64_t> out = is_tensor(rhs->type) ? rhs->type->shape : std::vector<int64_t>{1};
    ragged = ragged || is_ragged(out);
    auto copy = std::make_shared<Rhs>(*rhs);
    copy->flops = ragged ? 0 : op_info(rhs->op).flops(shapes, out, rhs->attrs);
    return copy;
  }

  // An operator whose types or attributes mention size variables gets their values.
  RhsPtr with_sizes(const RhsPtr& rhs, Block& b) {
    std::vector<int64_t> dims;
    auto note = [&](int64_t d) {
      if (is_size_var(d) && std::find(dims.begin(), dims.end(), d) == dims.end()) dims.push_back(d);
    };
    for (const Atom& a : rhs->args)
      for (int64_t d : ctx_->fn->vars[a.var].type->shape) note(d);
    if (is_tensor(rhs->type))
      for (int64_t d : rhs->type->shape) note(d);
    for (size_t i = 0; i < rhs->attrs.ints.size(); ++i)
      if (rhs->attrs.is_size(i)) note(rhs->attrs.ints[i]);
    if (dims.empty()) return rhs;
    auto copy = std::make_shared<Rhs>(*rhs);
    for (int64_t d : dims) copy->sizes.push_back(SizeArg{d, lower_size(d, b, rhs->span)});
    return copy;
  }

  // The value of size `dim` in the function being lowered: a constant, or the variable holding
  // it, which a lambda captures from the function around it (and so on outwards). A joined size
  // (types.h SizeSum) that no variable in reach holds yet is computed here, in `b`, from its terms.
  Atom lower_size(int64_t dim, Block& b, const Span& at) {
    if (!is_size_var(dim)) return Atom::integer(dim);
    if (auto local = src_->run_time_sizes.find(dim); local != src_->run_time_sizes.end()) {
      auto it = ctx_->locals.find(local->second);
      ACROBAT_ASSERT(it != ctx_->locals.end(), "a position of an unbound local " + local->second->name);
      return Atom::variable(it->second);
    }
    auto sum = src_->size_sums.find(dim);
    if (sum == src_->size_sums.end() || in_reach(*ctx_, dim)) return Atom::variable(size_var_in(*ctx_, dim));
    Atom value = Atom::integer(sum->second.constant);
    for (const auto& [d, count] : sum->second.terms) {
      Atom term = lower_size(d, b, at);
      if (count != 1) term = emit(b, make_host(HostOp::Mul, {term, Atom::integer(count)}, int_type(), at));
      value = emit(b, make_host(HostOp::Add, {value, term}, int_type(), at));
    }
    ctx_->fn->vars[value.var].name = dim_str(dim);
    ctx_->sizes[dim] = value.var;
    return value;
  }
  static bool in_reach(const Context& c, int64_t dim) {
    return c.sizes.count(dim) || (c.outer && in_reach(*c.outer, dim));
  }
  int size_var_in(Context& c, int64_t dim) {
    auto it = c.sizes.find(dim);
    if (it != c.sizes.end()) return it->second;
    ACROBAT_ASSERT(c.outer, "a size variable reached lowering outside the function that binds it");
    const int outer = size_var_in(*c.outer, dim);
    Function& fn = *c.fn;
    fn.vars.push_back(VarInfo{"", int_type(), fn.span});
    const int v = static_cast<int>(fn.vars.size()) - 1;
    fn.vars[v].name = dim_str(dim);
    fn.params.insert(fn.params.begin() + fn.num_captures, v);
    ++fn.num_captures;
    c.size_captures.push_back(Atom::variable(outer));
    c.sizes[dim] = v;
    return v;
  }

  // A function that makes sizes returns them beside its result, as a tuple (result, m, ...), under
  // the name NAME$sizes; its callers take the tuple apart (lower_call). Function NAME, what an
  // engine finds as an entry, calls it and returns the result alone.
  void lower_function(const A::FuncDecl& decl, int index) {
    Function fn;
    fn.name = decl.name;
    fn.origin = declared_origin(decl.span);
    fn.type_params = decl.type_params;
    fn.ret = decl.type->ret;
    fn.span = decl.span;
    Context ctx{&fn, index, {}, 0, 0, {}, nullptr, {}, nullptr, nullptr};
    if (!decl.made_sizes.empty()) {
      fn.name += "$sizes";
      fn.ret = ctx.made_type = with_made_sizes(decl.type->ret, decl.made_sizes.size());
      fn.made_sizes = decl.made_sizes;
      ctx.made_at = &decl.made_at;
    }
    Context* saved = ctx_;
    ctx_ = &ctx;
    for (auto& p : decl.params) fn.params.push_back(bind_local(p.var));
    for (int64_t d : decl.size_params) {
      int v = new_var(dim_str(d), int_type(), decl.span);
      fn.params.push_back(v);
      fn.size_params.push_back(d);
      ctx.sizes[d] = v;
    }
    fn.body = lower_block(*decl.body);
    ctx_ = saved;
    if (!decl.made_sizes.empty()) functions_.push_back(result_alone(fn, index, decl));
    functions_[index] = std::move(fn);
  }

  static Type with_made_sizes(const Type& result, size_t count) {
    std::vector<Type> fields{result};
    fields.resize(count + 1, int_type());
    return tuple_type(fields);
  }

  // NAME for NAME$sizes: the same parameters, the result without the sizes.
  static Function result_alone(const Function& made, int made_index, const A::FuncDecl& decl) {
    Function fn;
    fn.name = decl.name;
    fn.origin = made.origin;
    fn.type_params = made.type_params;
    fn.ret = decl.type->ret;
    fn.span = made.span;
    fn.size_params = made.size_params;
    fn.made_by = made_index;
    std::vector<Atom> args;
    for (int p : made.params) {
      fn.vars.push_back(made.vars[p]);
      fn.params.push_back(static_cast<int>(fn.vars.size()) - 1);
      args.push_back(Atom::variable(fn.params.back()));
    }
    fn.vars.push_back(VarInfo{"", made.ret, made.span});
    const int both = static_cast<int>(fn.vars.size()) - 1;
    fn.body.bindings.push_back(Binding{both, make_call(made_index, args, made.ret, made.span)});
    fn.vars.push_back(VarInfo{"", fn.ret, made.span});
    const int result = static_cast<int>(fn.vars.size()) - 1;
    fn.body.bindings.push_back(Binding{result, make_proj(Atom::variable(both), 0, fn.ret, made.span)});
    fn.body.result = Atom::variable(result);
    return fn;
  }

  // Sizes a block binds (a gather's, a joined size) are forgotten after it: their variables live
  // in it. (The checker keeps such a size from leaving the block in its result.)
  Block lower_block(const A::Expr& e) {
    enter_block(e.span);
    const std::map<int64_t, int> sizes = ctx_->sizes;
    Block b;
    b.result = lower(e, b);
    ctx_->sizes = sizes;
    --ctx_->block_depth;
    return b;
  }

  // ---- expressions ----
  // An expression a function that makes sizes returns: its value with the made sizes' values
  // beside it (a call of a function returning those very sizes returns its tuple as it is, so a
  // recursion stays a tail call).
  Atom lower(const A::Expr& e, Block& b) {
    if (!ctx_->made_at) return lower_expr(e, b);
    auto it = ctx_->made_at->find(&e);
    if (it == ctx_->made_at->end()) return lower_expr(e, b);
    const std::vector<int64_t>& made = it->second;
    if (e.kind == A::ExprKind::Call) {
      const A::Expr& callee = *e.as<A::Call>().callee;
      if (callee.kind == A::ExprKind::Name && callee.as<A::Name>().made == made)
        return lower_call(e.as<A::Call>(), b, /*with_sizes=*/true);
    }
    std::vector<Atom> fields{lower_expr(e, b)};
    for (int64_t d : made) fields.push_back(lower_size(d, b, e.span));
    return emit(b, make_tuple(fields, ctx_->made_type, e.span));
  }

  Atom lower_expr(const A::Expr& e, Block& b) {
    switch (e.kind) {
      case A::ExprKind::IntLit: return Atom::integer(e.as<A::IntLit>().value);
      case A::ExprKind::FloatLit: return Atom::floating(e.as<A::FloatLit>().value);
      case A::ExprKind::BoolLit: return Atom::boolean(e.as<A::BoolLit>().value);
      case A::ExprKind::Name: return lower_name(e.as<A::Name>(), b);
      case A::ExprKind::Call: return lower_call(e.as<A::Call>(), b);
      case A::ExprKind::Index: {
        auto& ix = e.as<A::Index>();
        Atom idx = lower(*ix.index, b);
        const int param = param_index_.at(ix.base->as<A::Name>().param);
        if (ix.index->type->kind == TypeKind::Adt) {
          // A list of indices: its length is the gathered tensor's size (types.h), bound here.
          const int64_t dim = e.type->shape[0];
          Atom len = emit(b, make_host(HostOp::Length, {idx}, int_type(), ix.index->span));
          ctx_->fn->vars[len.var].name = dim_str(dim);
          ctx_->sizes[dim] = len.var;
          return emit(b, make_param_gather(param, idx, SizeArg{dim, len}, e.type, e.span));
        }
        return emit(b, make_param_index(param, idx, e.type, e.span));
      }
      case A::ExprKind::Proj: {
        auto& p = e.as<A::Proj>();
        return emit(b, make_proj(lower(*p.base, b), p.index, e.type, e.span));
      }
      case A::ExprKind::Tuple: {
        std::vector<Atom> elems;
        for (auto& x : e.as<A::Tuple>().elems) elems.push_back(lower(*x, b));
        if (elems.empty()) return Atom::unit();
        return emit(b, make_tuple(elems, e.type, e.span));
      }
      case A::ExprKind::Unary: {
        auto& u = e.as<A::Unary>();
        Atom x = lower(*u.operand, b);
        if (is_tensor(e.type)) return emit(b, make_op(OpId::Neg, {x}, {}, e.type, e.span));
        return emit(b, make_host(u.op == '!' ? HostOp::Not : HostOp::Neg, {x}, e.type, e.span));
      }
      case A::ExprKind::Binary: return lower_binary(e.as<A::Binary>(), b);
      case A::ExprKind::Let: return lower_let(e.as<A::Let>(), b);
      case A::ExprKind::If: return lower_if(e.as<A::If>(), b);
      case A::ExprKind::Match: {
        auto& m = e.as<A::Match>();
        Atom scrut = lower(*m.scrutinee, b);
        std::vector<Clause> clauses;
        for (auto& c : m.clauses) {
          PatternPtr p = lower_pattern(*c.pattern);
          clauses.push_back(Clause{p, lower_block(*c.body)});
        }
        return emit(b, make_match(scrut, std::move(clauses), e.type, e.span));
      }
      case A::ExprKind::Lambda: return lower_lambda(e.as<A::Lambda>(), b);
    }
    return Atom::unit();
  }

  Atom lower_name(const A::Name& n, Block& b) {
    switch (n.ref) {
      case A::NameRef::Local: {
        auto it = ctx_->locals.find(n.local.get());
        ACROBAT_ASSERT(it != ctx_->locals.end(), "unbound local " + n.name);
        return Atom::variable(it->second);
      }
      case A::NameRef::Dim: return Atom::integer(n.dim_value);
      case A::NameRef::Param:
        return emit(b, make_param_load(param_index_.at(n.param), n.type, n.span));
      case A::NameRef::Function: return Atom::function(func_index(n.func));
      case A::NameRef::Ctor:
        if (n.ctor->fields.empty()) return emit(b, make_construct(n.ctor, {}, n.type, n.span));
        return Atom::function(ctor_function(n.ctor, n.type));
      default: ACROBAT_ASSERT(false, "name '" + n.name + "' reached lowering unresolved");
    }
    return Atom::unit();
  }

  // A constructor used as a function value: a lifted function that applies it.
  int ctor_function(const CtorDef* ctor, const Type& type) {
    auto it = ctor_funcs_.find(ctor);
    if (it != ctor_funcs_.end()) return it->second;
    int index = static_cast<int>(functions_.size());
    functions_.emplace_back();
    ctor_funcs_[ctor] = index;
    Function fn;
    fn.name = ctor->name;
    fn.origin = declared_origin(ctor->span);
    fn.type_params = ctor->adt->type_params;
    std::vector<Type> params;
    for (auto& p : ctor->adt->type_params) params.push_back(param_type(p));
    fn.ret = adt_type(ctor->adt, params);
    fn.span = ctor->span;
    std::vector<Atom> args;
    for (size_t i = 0; i < ctor->fields.size(); ++i) {
      std::string name = std::to_string(i);
      name.insert(name.begin(), 'f');  // not "f" + ...: GCC 12 warns falsely (-Wrestrict) there
      fn.vars.push_back(VarInfo{name, ctor->fields[i], ctor->span});
      fn.params.push_back(static_cast<int>(i));
      args.push_back(Atom::variable(static_cast<int>(i)));
    }
    fn.vars.push_back(VarInfo{"", fn.ret, ctor->span});
    int out = static_cast<int>(fn.vars.size()) - 1;
    fn.body.bindings.push_back(Binding{out, make_construct(ctor, args, fn.ret, ctor->span)});
    fn.body.result = Atom::variable(out);
    functions_[index] = std::move(fn);
    return index;
  }

  // with_sizes: a call of a function that makes sizes gives its tuple (result, sizes) as it is.
  Atom lower_call(const A::Call& c, Block& b, bool with_sizes = false) {
    if (c.callee->kind == A::ExprKind::Name) {
      auto& n = c.callee->as<A::Name>();
      if (n.ref == A::NameRef::Builtin) return lower_builtin(c, n.builtin, b);
      if (n.ref == A::NameRef::Op) {
        OpId op = static_cast<OpId>(n.op);
        std::vector<Atom> args;
        for (auto& a : c.args)
          if (is_tensor(a->type)) args.push_back(lower(*a, b));
        OpAttrs attrs;
        attrs.ints = c.attrs;
        attrs.sizes = c.attr_sizes;
        if (op == OpId::Softmax || op == OpId::LogSoftmax) return lower_softmax(op, args[0], attrs, c, b);
        return emit(b, make_op(op, args, attrs, c.type, c.span));
      }
      std::vector<Atom> args;
      for (auto& a : c.args) args.push_back(lower(*a, b));
      if (n.ref == A::NameRef::Function) {
        for (int64_t d : n.sizes) args.push_back(lower_size(d, b, c.span));  // the checker solved them
        if (n.made.empty()) return emit(b, make_call(func_index(n.func), args, c.type, c.span));
        // The sizes it makes are the caller's fresh ones (checker), bound here.
        Atom both = emit(b, make_call(func_index(n.func), args, with_made_sizes(c.type, n.made.size()), c.span));
        if (with_sizes) return both;
        for (size_t k = 0; k < n.made.size(); ++k) {
          Atom size = emit(b, make_proj(both, static_cast<int>(k) + 1, int_type(), c.span));
          ctx_->fn->vars[size.var].name = dim_str(n.made[k]);
          ctx_->sizes[n.made[k]] = size.var;
        }
        return emit(b, make_proj(both, 0, c.type, c.span));
      }
      if (n.ref == A::NameRef::Ctor) return emit(b, make_construct(n.ctor, args, c.type, c.span));
      Atom callee = lower_name(n, b);
      return emit(b, make_indirect_call(callee, args, c.type, c.span));
    }
    Atom callee = lower(*c.callee, b);
    std::vector<Atom> args;
    for (auto& a : c.args) args.push_back(lower(*a, b));
    return emit(b, make_indirect_call(callee, args, c.type, c.span));
  }

  Atom lower_builtin(const A::Call& c, A::Builtin builtin, Block& b) {
    switch (builtin) {
      case A::Builtin::Split: return lower_split(c, b);
      case A::Builtin::TopK: return lower_topk(c, b);
      case A::Builtin::ToFloat:
      case A::Builtin::ToInt: {
        Atom x = lower(*c.args[0], b);
        const HostOp op = builtin == A::Builtin::ToFloat ? HostOp::ToFloat : HostOp::ToInt;
        return emit(b, make_host(op, {x}, c.type, c.span));
      }
      case A::Builtin::Emit: return emit(b, make_host(HostOp::Emit, {lower(*c.args[0], b)}, c.type, c.span));
    }
    return Atom::unit();
  }

  // topk(x, k) -> Cons(argmax(x, rank=0), Cons(argmax(x, rank=1), ... Nil))
  Atom lower_topk(const A::Call& c, Block& b) {
    Atom x = lower(*c.args[0], b);
    const AdtDef* list = c.type->adt;
    const CtorDef *nil = nullptr, *cons = nullptr;
    for (const auto& ctor : list->ctors) (ctor->fields.empty() ? nil : cons) = ctor.get();
    std::vector<Atom> ranks;
    for (int64_t r = 0; r < c.attrs[0]; ++r) {
      OpAttrs attrs;
      attrs.ints = {r};
      ranks.push_back(emit(b, make_op(OpId::Argmax, {x}, attrs, int_type(), c.span)));
    }
    Atom tail = emit(b, make_construct(nil, {}, c.type, c.span));
    for (size_t r = ranks.size(); r-- > 0;) tail = emit(b, make_construct(cons, {ranks[r], tail}, c.type, c.span));
    return tail;
  }

  // softmax(x, axis) along the last axis as it is (axis -1); along the one before it (the shape
  // rule allows no other) as transpose(softmax(transpose(x))), the kernels' last axis.
  // softmax and log_softmax along any axis: the operators' own along the last, between transposes
  // along the one before it, and along an axis further out (a stack's first) in operators that
  // reduce along it: e = exp(x - max(x)), e / sum(e), or x - max(x) - log(sum(e)).
  Atom lower_softmax(OpId op, Atom x, OpAttrs attrs, const A::Call& c, Block& b) {
    const auto& shape = c.type->shape;
    const int axis = normalize_axis(attrs.ints[0], shape.size());
    const bool last = axis + 1 == static_cast<int>(shape.size());
    attrs.ints[0] = -1;
    if (last) return emit(b, make_op(op, {x}, attrs, c.type, c.span));
    if (axis + 2 < static_cast<int>(shape.size())) {
      OpAttrs along;
      along.ints = {axis};
      auto reduced = shape;
      reduced[static_cast<size_t>(axis)] = 1;
      auto op_on = [&](OpId o, std::vector<Atom> args, OpAttrs a, const std::vector<int64_t>& s) {
        return emit(b, make_op(o, std::move(args), std::move(a), tensor_type(s), c.span));
      };
      Atom shifted = op_on(OpId::Sub, {x, op_on(OpId::Max, {x}, along, reduced)}, {}, shape);
      Atom e = op_on(OpId::Exp, {shifted}, {}, shape);
      Atom total = op_on(OpId::Sum, {e}, along, reduced);
      if (op == OpId::Softmax) return op_on(OpId::Div, {e, total}, {}, shape);
      return op_on(OpId::Sub, {shifted, op_on(OpId::Log, {total}, {}, reduced)}, {}, shape);
    }
    auto swapped = shape;
    std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
    Atom t = emit(b, make_op(OpId::Transpose, {x}, OpAttrs{}, tensor_type(swapped), c.span));
    Atom s = emit(b, make_op(op, {t}, attrs, tensor_type(swapped), c.span));
    return emit(b, make_op(OpId::Transpose, {s}, OpAttrs{}, c.type, c.span));
  }

  // split(x, n, axis) -> (slice(x, 0, k), slice(x, k, 2k), ...)
  Atom lower_split(const A::Call& c, Block& b) {
    Atom x = lower(*c.args[0], b);
    int64_t parts = c.attrs[0];
    int64_t axis = c.attrs[1];
    const auto& elems = c.type->args;
    int64_t width = elems[0]->shape[axis];
    std::vector<Atom> slices;
    for (int64_t i = 0; i < parts; ++i) {
      OpAttrs attrs;
      attrs.ints = {i * width, (i + 1) * width, axis};
      slices.push_back(emit(b, make_op(OpId::Slice, {x}, attrs, elems[i], c.span)));
    }
    return emit(b, make_tuple(slices, c.type, c.span));
  }

  // An operand of + - * / with a tensor. `scalar_size`: the checker's size variable for a host number
  // the run computes (A::Binary).
  Atom tensor_operand(const A::Expr& e, Block& b, int64_t scalar_size) {
    if (is_tensor(e.type)) return lower(e, b);
    if (scalar_size != 0) {  // host_scalar(bits), the bits those of the number as a float
      Atom x = lower(e, b);
      if (e.type->kind == TypeKind::Int) x = emit(b, make_host(HostOp::ToFloat, {x}, float_type(), e.span));
      Atom bits = emit(b, make_host(HostOp::FloatBits, {x}, int_type(), e.span));
      ctx_->fn->vars[bits.var].name = "scalar";
      ctx_->sizes[scalar_size] = bits.var;
      OpAttrs attrs;
      attrs.ints = {scalar_size};
      attrs.sizes = 1;
      return emit(b, make_op(OpId::HostScalar, {}, attrs, tensor_type({}), e.span));
    }
    // A number written in the source combined with a tensor: a rank-0 constant that broadcasts.
    OpAttrs attrs;
    attrs.value = *A::literal_number(e);
    return emit(b, make_op(OpId::Constant, {}, attrs, tensor_type({}), e.span));
  }

  // An else-if chain, by a loop (ast.h). In source order, each arm's condition is lowered into the
  // block of the arm before it (its else branch), its then-branch into a block of its own; the ifs are
  // then emitted from the innermost out, each into the else block of the arm before it, so that
  // variables are numbered as if the chain had been lowered recursively.
  Atom lower_if(const A::If& first, Block& b) {
    auto arms = A::if_chain(first);
    std::vector<Atom> conds;
    std::vector<Block> thens;
    std::deque<Block> elses;  // elses[k]: arm k's else block (a deque: pointers stay valid)
    Block* into = &b;
    const int depth = ctx_->block_depth;
    for (const A::If* arm : arms) {
      if (arm != arms.front()) enter_block(arm->span);  // into the else block of the arm before
      conds.push_back(lower(*arm->cond, *into));
      thens.push_back(lower_block(*arm->then_branch));
      into = &elses.emplace_back();
    }
    enter_block(arms.back()->else_branch->span);
    elses.back().result = lower(*arms.back()->else_branch, elses.back());
    ctx_->block_depth = depth;
    for (size_t k = arms.size(); k-- > 0;) {
      Block& target = k == 0 ? b : elses[k - 1];
      Atom result = emit(target, make_if(conds[k], std::move(thens[k]), std::move(elses[k]),
                                         arms[k]->type, arms[k]->span));
      if (k == 0) return result;
      target.result = result;
    }
    return Atom::unit();  // not reached: a chain has at least one arm
  }

  // A chain of binary operators, by a loop from its first operand out (ast.h).
  Atom lower_binary(const A::Binary& outer, Block& b) {
    auto chain = A::binary_chain(outer);
    const A::Binary& innermost = *chain.back();
    Atom acc = is_tensor(innermost.type) && innermost.op != A::BinOp::And &&
                       innermost.op != A::BinOp::Or
                   ? tensor_operand(*innermost.lhs, b, innermost.scalar_size)
                   : lower(*innermost.lhs, b);
    for (size_t i = chain.size(); i-- > 0;) acc = lower_binary_step(*chain[i], acc, b);
    return acc;
  }

  // One operator of a chain, its left operand lowered to `lhs` already.
  Atom lower_binary_step(const A::Binary& bin, Atom lhs, Block& b) {
    using A::BinOp;
    if (bin.op == BinOp::And || bin.op == BinOp::Or) {
      Block rhs_block = lower_block(*bin.rhs);
      Block constant;
      constant.result = Atom::boolean(bin.op == BinOp::Or);
      return bin.op == BinOp::And
                 ? emit(b, make_if(lhs, std::move(rhs_block), std::move(constant), bin.type, bin.span))
                 : emit(b, make_if(lhs, std::move(constant), std::move(rhs_block), bin.type, bin.span));
    }
    if (is_tensor(bin.type)) {
      Atom rhs = tensor_operand(*bin.rhs, b, bin.scalar_size);
      OpId op = bin.op == BinOp::Add   ? OpId::Add
                : bin.op == BinOp::Sub ? OpId::Sub
                : bin.op == BinOp::Mul ? OpId::Mul
                : bin.op == BinOp::Div ? OpId::Div
                                       : OpId::MatMul;
      return emit(b, make_op(op, {lhs, rhs}, {}, bin.type, bin.span));
    }
    Atom rhs = lower(*bin.rhs, b);
    HostOp op;
    switch (bin.op) {
      case BinOp::Add: op = HostOp::Add; break;
      case BinOp::Sub: op = HostOp::Sub; break;
      case BinOp::Mul: op = HostOp::Mul; break;
      case BinOp::Div: op = HostOp::Div; break;
      case BinOp::Mod: op = HostOp::Mod; break;
      case BinOp::Lt: op = HostOp::Lt; break;
      case BinOp::Le: op = HostOp::Le; break;
      case BinOp::Gt: op = HostOp::Gt; break;
      case BinOp::Ge: op = HostOp::Ge; break;
      case BinOp::Eq: op = HostOp::Eq; break;
      default: op = HostOp::Ne; break;
    }
    return emit(b, make_host(op, {lhs, rhs}, bin.type, bin.span));
  }

  // A sequence of lets, by a loop (ast.h): each binds into the current block. A let that takes a
  // single-constructor data type apart opens a one-clause match over the rest of the sequence: the
  // rest goes into the clause's block, and the matches are emitted from the innermost out once the
  // body is lowered.
  Atom lower_let(const A::Let& first, Block& outer) {
    struct Opened {
      const A::Let* let;
      Atom value;
      PatternPtr pattern;
      Block body;
    };
    std::deque<Opened> opened;  // a deque: `b` may point into it
    Block* b = &outer;
    const int depth = ctx_->block_depth;
    const std::map<int64_t, int> sizes = ctx_->sizes;  // as lower_block
    auto lets = A::let_chain(first);
    for (const A::Let* let : lets) {
      Atom value = lower(*let->value, *b);
      if (let->pattern->kind == A::Pattern::Ctor) {
        enter_block(let->span);
        opened.push_back(Opened{let, value, lower_pattern(*let->pattern), Block{}});
        b = &opened.back().body;
      } else {
        destructure(*let->pattern, value, *b);
      }
    }
    Atom result = lower(*lets.back()->body, *b);
    ctx_->block_depth = depth;
    if (!opened.empty()) ctx_->sizes = sizes;
    for (size_t i = opened.size(); i-- > 0;) {
      Opened& o = opened[i];
      o.body.result = result;
      Block& into = i == 0 ? outer : opened[i - 1].body;
      result = emit(into, make_match(o.value, {Clause{o.pattern, std::move(o.body)}}, o.let->type,
                                     o.let->span));
    }
    return result;
  }

  // The binding that has just made `value`, when it is an unnamed temporary (the value being bound,
  // read by nothing yet), else null.
  const Binding* fresh_temporary(Atom value, const Block& b) const {
    if (value.kind != Atom::Var || b.bindings.empty() || b.bindings.back().var != value.var ||
        !ctx_->fn->vars[value.var].name.empty())
      return nullptr;
    return &b.bindings.back();
  }
  // Binds variable pattern p to the unnamed temporary `var` itself, which takes p's name.
  void name_temporary(const A::Pattern& p, int var) {
    ctx_->fn->vars[var].name = p.name;
    ctx_->locals[p.var.get()] = var;
  }

  // Binds tuple/variable patterns with projections.
  void destructure(const A::Pattern& p, Atom value, Block& b) {
    switch (p.kind) {
      case A::Pattern::Wildcard: return;
      case A::Pattern::Bind: {
        // Name the temporary that holds the value rather than copying it, when there is one.
        if (fresh_temporary(value, b)) {
          name_temporary(p, value.var);
          return;
        }
        int v = bind_local(p.var);
        b.bindings.push_back(Binding{v, make_copy(value, p.var->type, p.span)});
        return;
      }
      case A::Pattern::Tuple:
        // A tuple made just before and taken apart only here (split's slices, a tuple written out)
        // is not made: its fields bind directly, and the host program allocates no object for it.
        if (const Binding* made = fresh_temporary(value, b);
            made && made->rhs->kind == RhsKind::MakeTuple && made->rhs->args.size() == p.subs.size()) {
          const std::vector<Atom> fields = made->rhs->args;
          b.bindings.pop_back();
          for (size_t i = 0; i < p.subs.size(); ++i) {
            // An element made for the tuple alone (an unnamed temporary) takes the name.
            const Atom& f = fields[i];
            if (p.subs[i]->kind == A::Pattern::Bind && f.kind == Atom::Var && ctx_->fn->vars[f.var].name.empty())
              name_temporary(*p.subs[i], f.var);
            else
              destructure(*p.subs[i], f, b);
          }
          return;
        }
        for (size_t i = 0; i < p.subs.size(); ++i) {
          if (p.subs[i]->kind == A::Pattern::Wildcard) continue;
          Atom field = emit(b, make_proj(value, static_cast<int>(i), p.subs[i]->type, p.subs[i]->span));
          destructure(*p.subs[i], field, b);
        }
        return;
      case A::Pattern::Ctor: ACROBAT_ASSERT(false, "constructor pattern in destructure");
    }
  }

  PatternPtr lower_pattern(const A::Pattern& p) {
    auto out = std::make_shared<Pattern>();
    switch (p.kind) {
      case A::Pattern::Wildcard: out->kind = Pattern::Wildcard; break;
      case A::Pattern::Bind:
        out->kind = Pattern::Bind;
        out->var = bind_local(p.var);
        break;
      case A::Pattern::Ctor:
        out->kind = Pattern::Ctor;
        out->ctor = p.ctor;
        for (auto& s : p.subs) out->subs.push_back(lower_pattern(*s));
        break;
      case A::Pattern::Tuple:
        out->kind = Pattern::Tuple;
        for (auto& s : p.subs) out->subs.push_back(lower_pattern(*s));
        break;
    }
    return out;
  }

  Atom lower_lambda(const A::Lambda& l, Block& b) {
    std::vector<Atom> captured;
    for (auto& c : l.captures) captured.push_back(Atom::variable(ctx_->locals.at(c.get())));
    int index = static_cast<int>(functions_.size());
    functions_.emplace_back();
    Function fn;
    fn.name = ctx_->fn->name + "$lambda" + std::to_string(ctx_->lambda_count++);
    fn.origin = FunctionOrigin{FunctionOrigin::Lambda, ctx_->index};
    fn.type_params = ctx_->fn->type_params;
    fn.ret = l.body->type;
    fn.span = l.span;
    fn.num_captures = static_cast<int>(l.captures.size());
    Context inner{&fn, index, {}, 0, 0, {}, nullptr, {}, nullptr, nullptr};
    inner.outer = ctx_;
    Context* outer = ctx_;
    ctx_ = &inner;
    for (auto& c : l.captures) fn.params.push_back(bind_local(c));
    for (auto& p : l.params) fn.params.push_back(bind_local(p.var));
    fn.body = lower_block(*l.body);
    ctx_ = outer;
    // Size variables of the function around it that the body uses are captured too (after the
    // checker's captures, as lower_size inserted their parameters).
    captured.insert(captured.end(), inner.size_captures.begin(), inner.size_captures.end());
    functions_[index] = std::move(fn);
    return emit(b, make_closure(index, captured, l.type, l.span));
  }

  std::shared_ptr<const A::Module> src_;
  std::vector<Function> functions_;
  std::map<const A::FuncDecl*, int> func_index_;
  std::map<const CtorDef*, int> ctor_funcs_;
  std::map<const A::ParamDecl*, int> param_index_;
  std::deque<std::pair<const A::FuncDecl*, int>> pending_;
  Context* ctx_ = nullptr;
};

}  // namespace

ir::Module lower_to_ir(std::shared_ptr<const ast::Module> module) {
  return Lowering(std::move(module)).run();
}

}  // namespace acrobat
