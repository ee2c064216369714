#include "engines/interpreter.h"

#include <algorithm>
#include <bit>
#include <optional>

#include "analysis/plan.h"
#include "ir/host_ops.h"
#include "ir/match.h"
#include "runtime/reference_kernels.h"
#include "support/sizes.h"

namespace acrobat {

std::string gather_index_message(const std::string& param, int64_t index, int64_t entry, int64_t count) {
  return "index " + std::to_string(index) + " (entry " + std::to_string(entry) +
         " of the list) is out of range for param '" + param + "' of " + std::to_string(count) + " entries";
}

std::string gather_empty_message(const std::string& param) {
  return "param '" + param + "' gathered by an empty list: a tensor needs at least one row";
}

std::string step_budget_message(int64_t max_steps, const std::string& function) {
  return "more than " + std::to_string(max_steps) + " calls (the instance's step budget; a loop's " +
         "iterations count) at this call of '" + function + "': a loop that does not end?";
}

void Interpreter::count_step(const Span& site, int func) {
  if (max_steps_ > 0 && ++steps_ > max_steps_)
    throw UserError(site.begin, step_budget_message(max_steps_, m_.functions[func].name));
}

Interpreter::Interpreter(const ir::Module& module, const ParamStore& params, RunStats& stats)
    : m_(module), params_(params), stats_(&stats) {
  if (module.plan) tail_calls_ = &module.plan->tail_call;
}

Value Interpreter::call(int func, std::vector<Value> args, const Span& site, int depth) {
  if (++depth > kMaxCallDepth)
    throw UserError(site.begin, "recursion deeper than " + std::to_string(kMaxCallDepth) +
                                    " calls (in '" + m_.functions[func].name + "')");
  if (depth > 1) count_step(site, func);  // a call the program makes (not the entry's)
  const ir::Function& f = m_.functions[func];
  // Frames come from a pool: a call allocates nothing once the pool is warm.
  std::vector<Value> frame;
  if (!frame_pool_.empty()) {
    frame.swap(frame_pool_.back());
    frame_pool_.pop_back();
  }
  frame.resize(f.vars.size());
  for (size_t i = 0; i < f.params.size(); ++i) frame[f.params[i]] = std::move(args[i]);
  Value result = block(f.body, frame, depth);
  // A tail call (analysis/tail_calls.h) left its arguments: the body runs again on them, in this
  // frame, at this depth.
  while (tail_pending_) {
    tail_pending_ = false;
    for (size_t i = 0; i < f.params.size(); ++i) frame[f.params[i]] = std::move(tail_args_[i]);
    result = block(f.body, frame, depth);
  }
  frame.clear();
  frame_pool_.push_back(std::move(frame));
  return result;
}

Value Interpreter::block(const ir::Block& b, std::vector<Value>& frame, int depth) {
  for (size_t i = 0; i < b.bindings.size();) {
    const ir::Binding& bind = b.bindings[i];
    if (bind.rhs->kind == ir::RhsKind::Op &&
        op_info(bind.rhs->op).op_class != OpClass::HostRead) {
      i += tensor_ops(b, i, frame);
      continue;
    }
    frame[bind.var] = host_binding(*bind.rhs, frame, depth);
    ++i;
  }
  return atom(b.result, frame);
}

Value Interpreter::atom(const ir::Atom& a, const std::vector<Value>& frame) {
  switch (a.kind) {
    case ir::Atom::Var: return frame[a.var];
    case ir::Atom::Int: return Value::of_int(a.int_value);
    case ir::Atom::Float: return Value::of_float(a.float_value);
    case ir::Atom::Bool: return Value::of_bool(a.bool_value);
    case ir::Atom::Unit: return Value::unit();
    case ir::Atom::Func: return Value::closure(a.func, {});
  }
  return Value::unit();
}

std::vector<Value> Interpreter::atoms(const std::vector<ir::Atom>& as,
                                      const std::vector<Value>& frame) {
  std::vector<Value> out;
  out.reserve(as.size());
  for (const auto& a : as) out.push_back(atom(a, frame));
  return out;
}

Value Interpreter::host_binding(const ir::Rhs& r, std::vector<Value>& frame, int depth) {
  switch (r.kind) {
    case ir::RhsKind::Copy: return atom(r.args[0], frame);
    case ir::RhsKind::Op:
      if (op_info(r.op).op_class == OpClass::HostRead) return host_read(r, frame);
      return run_op(r, frame);
    case ir::RhsKind::Host: return host_op(r, frame);
    case ir::RhsKind::Call: {
      auto args = atoms(r.args, frame);
      if (tail_calls_ && (*tail_calls_)[r.site]) {
        // The last thing the function does: nothing runs between here and the loop in call().
        count_step(r.span, r.callee_func);
        tail_args_ = std::move(args);
        tail_pending_ = true;
        return Value::unit();
      }
      Value result;
      if (r.callee_func >= 0) {
        result = call(r.callee_func, std::move(args), r.span, depth);
      } else {
        Value callee = atom(r.callee, frame);
        // A closure's captured values come before the call's arguments.
        std::vector<Value> full = callee.agg->fields;
        full.insert(full.end(), std::make_move_iterator(args.begin()),
                    std::make_move_iterator(args.end()));
        result = call(callee.agg->func, std::move(full), r.span, depth);
      }
      return result;
    }
    case ir::RhsKind::Construct: return Value::adt(r.ctor, atoms(r.args, frame));
    case ir::RhsKind::MakeTuple: return Value::tuple(atoms(r.args, frame));
    case ir::RhsKind::Proj: return atom(r.args[0], frame).agg->fields[r.index];
    case ir::RhsKind::ParamLoad: {
      const Value& v = params_.params[r.index].value;
      param_read(r.index, v, {});
      return v;
    }
    case ir::RhsKind::ParamIndex: {
      int64_t i = atom(r.args[0], frame).i;
      const auto& p = params_.params[r.index];
      if (i < 0 || i >= p.count)
        throw UserError(r.span.begin, "index " + std::to_string(i) +
                                          " is out of range for param '" +
                                          m_.params[r.index].name + "' of " +
                                          std::to_string(p.count) + " entries");
      Value v = Value::of_tensor(p.row(i));
      param_read(r.index, v, std::span<const int64_t>(&i, 1));
      return v;
    }
    case ir::RhsKind::ParamGather: {
      const auto& p = params_.params[r.index];
      const int64_t n = atom(r.sizes[0].value, frame).i, row = num_elements(p.elem_shape);
      if (n == 0) throw UserError(r.span.begin, gather_empty_message(m_.params[r.index].name));
      Tensor out = Tensor::allocate({n, row});
      std::vector<int64_t> rows(static_cast<size_t>(n));
      const Value* cur = &frame[r.args[0].var];
      for (int64_t k = 0; k < n; ++k, cur = &cur->agg->fields[1]) {
        const int64_t i = rows[k] = cur->agg->fields[0].i;
        if (i < 0 || i >= p.count)
          throw UserError(r.span.begin, gather_index_message(m_.params[r.index].name, i, k, p.count));
        std::copy_n(p.tensor.data.get() + i * row, row, out.data.get() + k * row);
      }
      Value v = Value::of_tensor(std::move(out));
      param_read(r.index, v, rows);
      return v;
    }
    case ir::RhsKind::MakeClosure: return Value::closure(r.callee_func, atoms(r.args, frame));
    case ir::RhsKind::If: {
      bool cond = atom(r.args[0], frame).b;
      return block(cond ? r.then_block : r.else_block, frame, depth);
    }
    case ir::RhsKind::Match: {
      Value scrut = atom(r.args[0], frame);
      for (size_t c = 0; c < r.clauses.size(); ++c)
        if (match(*r.clauses[c].pattern, scrut, frame)) {
          return block(r.clauses[c].body, frame, depth);
        }
      throw UserError(r.span.begin,
                      "no match clause matches the value (the match is not exhaustive for "
                      "nested patterns)");
    }
  }
  return Value::unit();
}

bool Interpreter::match(const ir::Pattern& p, const Value& v, std::vector<Value>& frame) {
  struct Ops {
    std::vector<Value>& frame;
    ir::Pattern::Kind kind(const ir::Pattern& q) const { return q.kind; }
    size_t arity(const ir::Pattern& q) const { return q.subs.size(); }
    const ir::Pattern& sub(const ir::Pattern& q, size_t i) const { return *q.subs[i]; }
    bool has_ctor(const Value& x, const ir::Pattern& q) const { return x.agg->ctor == q.ctor; }
    const Value& field(const Value& x, size_t i) const { return x.agg->fields[i]; }
    void bind(const ir::Pattern& q, const Value& x) const { frame[q.var] = x; }
  } ops{frame};
  return ir::match_pattern(p, v, ops);
}


Value Interpreter::host_op(const ir::Rhs& r, const std::vector<Value>& frame) {
  if (r.host_op == ir::HostOp::Length) {
    int64_t n = 0;
    for (const Value* cur = &frame[r.args[0].var]; !cur->agg->fields.empty(); cur = &cur->agg->fields[1]) ++n;
    return Value::of_int(n);
  }
  Value a = atom(r.args[0], frame);
  if (r.host_op == ir::HostOp::Not) return Value::of_bool(!a.b);
  if (r.host_op == ir::HostOp::ToFloat) return Value::of_float(static_cast<double>(a.i));
  if (r.host_op == ir::HostOp::Emit) {
    emitted(a);
    return a;
  }
  if (r.host_op == ir::HostOp::FloatBits) return Value::of_int(std::bit_cast<int64_t>(a.f));
  if (r.host_op == ir::HostOp::ToInt) {
    int64_t out = 0;
    if (!float_to_int(a.f, out)) throw UserError(r.span.begin, int_error_message(IntError::Conversion));
    return Value::of_int(out);
  }
  if (r.host_op == ir::HostOp::Neg) {
    if (a.kind != Value::Kind::Int) return Value::of_float(-a.f);
    if (a.i == INT64_MIN) throw UserError(r.span.begin, int_error_message(IntError::Overflow));
    return Value::of_int(-a.i);
  }
  Value b = atom(r.args[1], frame);
  if (a.kind == Value::Kind::Int) return int_op(r, a.i, b.i);
  if (a.kind == Value::Kind::Bool)
    return Value::of_bool(r.host_op == ir::HostOp::Eq ? a.b == b.b : a.b != b.b);
  double x = a.f, y = b.f;
  if (auto c = host_compare(r.host_op, x, y)) return Value::of_bool(*c);
  switch (r.host_op) {
    case ir::HostOp::Add: return Value::of_float(x + y);
    case ir::HostOp::Sub: return Value::of_float(x - y);
    case ir::HostOp::Mul: return Value::of_float(x * y);
    case ir::HostOp::Div: return Value::of_float(x / y);
    default: break;
  }
  ACROBAT_ASSERT(false, "host float op");
  return Value::unit();
}

Value Interpreter::int_op(const ir::Rhs& r, int64_t x, int64_t y) {
  if (auto c = host_compare(r.host_op, x, y)) return Value::of_bool(*c);
  int64_t out = 0;
  if (auto e = int_arith(r.host_op, x, y, out)) throw UserError(r.span.begin, int_error_message(*e));
  return Value::of_int(out);
}

Value Interpreter::host_read(const ir::Rhs& r, const std::vector<Value>& frame) {
  const Tensor* t = &tensor_contents(frame[r.args[0].var]);
  const std::span<const Tensor* const> inputs(&t, 1);
  Tensor out = Tensor::allocate({1});
  // A read of a tensor with sizes (a ranked argmax of a ragged row) checks the instance's shape.
  const OpAttrs attrs = r.sizes.empty() ? r.attrs : instance_shape(r, frame, inputs).attrs;
  reference_kernel(r.op)(attrs, inputs, out);
  // Host work, like the generated code's reads: not part of the dataflow graph's useful FLOPs.
  stats_->kernel_calls++;
  stats_->tensor_ops++;
  if (r.type->kind == TypeKind::Int) return Value::of_int(static_cast<int64_t>(out.data[0]));
  return Value::of_float(out.data[0]);
}

void Interpreter::instance_sizes(const ir::Rhs& r, const std::vector<Value>& frame, std::vector<int64_t>& dims,
                                 std::vector<int64_t>& values) {
  for (const ir::SizeArg& z : r.sizes) {
    dims.push_back(z.dim);
    values.push_back(atom(z.value, frame).i);
  }
}

OpAttrs Interpreter::instance_attrs(const ir::Rhs& r, const std::vector<Value>& frame) {
  if (r.sizes.empty()) return r.attrs;
  std::vector<int64_t> dims, values;
  instance_sizes(r, frame, dims, values);
  return bind_attr_sizes(r.attrs, dims.data(), values.data(), dims.size());
}

Value Interpreter::run_op(const ir::Rhs& r, const std::vector<Value>& frame) {
  const Tensor* small[8];
  std::vector<const Tensor*> many;
  const Tensor** inputs = small;
  if (r.args.size() > 8) {
    many.resize(r.args.size());
    inputs = many.data();
  }
  for (size_t i = 0; i < r.args.size(); ++i) inputs[i] = frame[r.args[i].var].tensor.get();
  if (!r.sizes.empty()) return run_sized_op(r, frame, std::span<const Tensor* const>(inputs, r.args.size()));
  Tensor out = Tensor::allocate(r.type->shape);
  reference_kernel(r.op)(r.attrs, std::span<const Tensor* const>(inputs, r.args.size()), out);
  stats_->kernel_calls++;
  stats_->tensor_ops++;
  stats_->flops += r.flops;
  return Value::of_tensor(std::move(out));
}

Interpreter::InstanceShape Interpreter::instance_shape(const ir::Rhs& r, const std::vector<Value>& frame,
                                                       std::span<const Tensor* const> inputs) const {
  std::vector<int64_t> dims, values;
  instance_sizes(r, frame, dims, values);
  const OpAttrs attrs = bind_attr_sizes(r.attrs, dims.data(), values.data(), dims.size());
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor* t : inputs) shapes.push_back(t->shape);
  ShapeResult res = op_info(r.op).shape(shapes, attrs);
  const bool fits = res.type && (!is_tensor(res.type) ||
                                 checked_product<int64_t>(res.type->shape).value_or(INT64_MAX) <= kMaxTensorElements);
  if (!fits) {
    static const std::vector<std::string> none;
    SizeNamesScope names(m_.plan ? m_.plan->size_names : none);
    std::string sizes;
    for (size_t i = 0; i < dims.size(); ++i)
      sizes += (sizes.empty() ? "" : ", ") + dim_str(dims[i]) + " = " + std::to_string(values[i]);
    throw UserError(r.span.begin, instance_shape_error(r.op, shapes, attrs, sizes));
  }
  return {res.type, attrs, std::move(shapes)};
}

// An operator whose shapes have size variables: its result's shape and FLOPs are the instance's.
Value Interpreter::run_sized_op(const ir::Rhs& r, const std::vector<Value>& frame,
                                std::span<const Tensor* const> inputs) {
  const InstanceShape s = instance_shape(r, frame, inputs);
  Tensor out = Tensor::allocate(is_tensor(s.type) ? s.type->shape : std::vector<int64_t>{1});
  reference_kernel(r.op)(s.attrs, inputs, out);
  stats_->kernel_calls++;
  stats_->tensor_ops++;
  stats_->flops += op_info(r.op).flops(s.operands, out.shape, s.attrs);
  return Value::of_tensor(std::move(out));
}

}  // namespace acrobat
