#include "runtime/reference_engine.h"

#include <chrono>
#include <cmath>
#include <unordered_map>

#include "runtime/reference_kernels.h"

namespace acrobat {

int entry_function(const ir::Module& module, const std::string& entry) {
  int index = module.find_function(entry);
  if (index < 0) throw UserError("the model has no function '" + entry + "' to run");
  const auto& f = module.functions[index];
  if (f.params.size() != 1)
    throw UserError(f.span.begin, "entry function '" + entry + "' must take exactly one parameter "
                                  "(the input instance), found " + std::to_string(f.params.size()));
  return index;
}

namespace {

using Clock = std::chrono::steady_clock;

// Runs one instance. Every user-facing failure is a UserError whose position is the binding that
// failed.
class Interpreter {
 public:
  Interpreter(const ir::Module& m, const ParamStore& params, RunStats& stats,
              std::unordered_map<const ir::Rhs*, int64_t>& flop_cache)
      : m_(m), params_(params), stats_(stats), flop_cache_(flop_cache) {}

  Value call(int func, std::vector<Value> args, const Span& site) {
    if (++depth_ > ReferenceEngine::kMaxCallDepth)
      throw UserError(site.begin, "recursion deeper than " +
                                      std::to_string(ReferenceEngine::kMaxCallDepth) +
                                      " calls (in '" + m_.functions[func].name + "')");
    const ir::Function& f = m_.functions[func];
    std::vector<Value> frame(f.vars.size());
    for (size_t i = 0; i < f.params.size(); ++i) frame[f.params[i]] = std::move(args[i]);
    Value result = block(f.body, frame);
    --depth_;
    return result;
  }

 private:
  Value block(const ir::Block& b, std::vector<Value>& frame) {
    for (const auto& bind : b.bindings) frame[bind.var] = rhs(*bind.rhs, frame);
    return atom(b.result, frame);
  }

  static Value atom(const ir::Atom& a, const std::vector<Value>& frame) {
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

  std::vector<Value> atoms(const std::vector<ir::Atom>& as, const std::vector<Value>& frame) {
    std::vector<Value> out;
    out.reserve(as.size());
    for (const auto& a : as) out.push_back(atom(a, frame));
    return out;
  }

  Value rhs(const ir::Rhs& r, std::vector<Value>& frame) {
    switch (r.kind) {
      case ir::RhsKind::Copy: return atom(r.args[0], frame);
      case ir::RhsKind::Op: return op(r, frame);
      case ir::RhsKind::Host: return host(r, frame);
      case ir::RhsKind::Call: {
        auto args = atoms(r.args, frame);
        if (r.callee_func >= 0) return call(r.callee_func, std::move(args), r.span);
        Value callee = atom(r.callee, frame);
        // A closure's captured values come before the call's arguments.
        std::vector<Value> full = callee.agg->fields;
        full.insert(full.end(), std::make_move_iterator(args.begin()),
                    std::make_move_iterator(args.end()));
        return call(callee.agg->func, std::move(full), r.span);
      }
      case ir::RhsKind::Construct: return Value::adt(r.ctor, atoms(r.args, frame));
      case ir::RhsKind::MakeTuple: return Value::tuple(atoms(r.args, frame));
      case ir::RhsKind::Proj: return atom(r.args[0], frame).agg->fields[r.index];
      case ir::RhsKind::ParamLoad: return Value::of_tensor(params_.params[r.index].tensor);
      case ir::RhsKind::ParamIndex: {
        int64_t i = atom(r.args[0], frame).i;
        const auto& p = params_.params[r.index];
        if (i < 0 || i >= p.count)
          throw UserError(r.span.begin, "index " + std::to_string(i) + " is out of range for param '" +
                                            m_.params[r.index].name + "' of " +
                                            std::to_string(p.count) + " entries");
        return Value::of_tensor(p.row(i));
      }
      case ir::RhsKind::MakeClosure: return Value::closure(r.callee_func, atoms(r.args, frame));
      case ir::RhsKind::If:
        return block(atom(r.args[0], frame).b ? r.then_block : r.else_block, frame);
      case ir::RhsKind::Match: {
        Value scrut = atom(r.args[0], frame);
        for (const auto& c : r.clauses)
          if (match(*c.pattern, scrut, frame)) return block(c.body, frame);
        throw UserError(r.span.begin, "no match clause matches the value (the match is not "
                                      "exhaustive for nested patterns)");
      }
    }
    return Value::unit();
  }

  bool match(const ir::Pattern& p, const Value& v, std::vector<Value>& frame) {
    switch (p.kind) {
      case ir::Pattern::Wildcard: return true;
      case ir::Pattern::Bind: frame[p.var] = v; return true;
      case ir::Pattern::Ctor:
        if (v.agg->ctor != p.ctor) return false;
        [[fallthrough]];
      case ir::Pattern::Tuple:
        for (size_t i = 0; i < p.subs.size(); ++i)
          if (!match(*p.subs[i], v.agg->fields[i], frame)) return false;
        return true;
    }
    return false;
  }

  Value host(const ir::Rhs& r, const std::vector<Value>& frame) {
    Value a = atom(r.args[0], frame);
    if (r.host_op == ir::HostOp::Not) return Value::of_bool(!a.b);
    if (r.host_op == ir::HostOp::Neg)
      return a.kind == Value::Kind::Int ? Value::of_int(-a.i) : Value::of_float(-a.f);
    Value b = atom(r.args[1], frame);
    if (a.kind == Value::Kind::Int) return int_op(r, a.i, b.i);
    if (a.kind == Value::Kind::Bool) {
      return Value::of_bool(r.host_op == ir::HostOp::Eq ? a.b == b.b : a.b != b.b);
    }
    double x = a.f, y = b.f;
    switch (r.host_op) {
      case ir::HostOp::Add: return Value::of_float(x + y);
      case ir::HostOp::Sub: return Value::of_float(x - y);
      case ir::HostOp::Mul: return Value::of_float(x * y);
      case ir::HostOp::Div: return Value::of_float(x / y);
      case ir::HostOp::Lt: return Value::of_bool(x < y);
      case ir::HostOp::Le: return Value::of_bool(x <= y);
      case ir::HostOp::Gt: return Value::of_bool(x > y);
      case ir::HostOp::Ge: return Value::of_bool(x >= y);
      case ir::HostOp::Eq: return Value::of_bool(x == y);
      case ir::HostOp::Ne: return Value::of_bool(x != y);
      default: break;
    }
    ACROBAT_ASSERT(false, "host float op");
    return Value::unit();
  }

  Value int_op(const ir::Rhs& r, int64_t x, int64_t y) {
    switch (r.host_op) {
      case ir::HostOp::Add: return Value::of_int(static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y)));
      case ir::HostOp::Sub: return Value::of_int(static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y)));
      case ir::HostOp::Mul: return Value::of_int(static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y)));
      case ir::HostOp::Div:
      case ir::HostOp::Mod:
        if (y == 0) throw UserError(r.span.begin, "integer division by zero");
        if (x == INT64_MIN && y == -1) throw UserError(r.span.begin, "integer division overflows");
        return Value::of_int(r.host_op == ir::HostOp::Div ? x / y : x % y);
      case ir::HostOp::Lt: return Value::of_bool(x < y);
      case ir::HostOp::Le: return Value::of_bool(x <= y);
      case ir::HostOp::Gt: return Value::of_bool(x > y);
      case ir::HostOp::Ge: return Value::of_bool(x >= y);
      case ir::HostOp::Eq: return Value::of_bool(x == y);
      case ir::HostOp::Ne: return Value::of_bool(x != y);
      default: break;
    }
    ACROBAT_ASSERT(false, "host int op");
    return Value::unit();
  }

  Value op(const ir::Rhs& r, const std::vector<Value>& frame) {
    const Tensor* in[8];
    std::vector<const Tensor*> many;
    const Tensor** inputs = in;
    if (r.args.size() > 8) {
      many.resize(r.args.size());
      inputs = many.data();
    }
    for (size_t i = 0; i < r.args.size(); ++i) inputs[i] = frame[r.args[i].var].tensor.get();
    bool host_read = op_info(r.op).op_class == OpClass::HostRead;
    Tensor out = Tensor::allocate(host_read ? std::vector<int64_t>{1} : r.type->shape);
    reference_kernel(r.op)(r.attrs, std::span<const Tensor* const>(inputs, r.args.size()), out);
    stats_.kernel_calls++;
    stats_.tensor_ops++;
    stats_.flops += flops(r, inputs);
    if (!host_read) return Value::of_tensor(std::move(out));
    if (r.type->kind == TypeKind::Int) return Value::of_int(static_cast<int64_t>(out.data[0]));
    return Value::of_float(out.data[0]);
  }

  int64_t flops(const ir::Rhs& r, const Tensor* const* inputs) {
    auto it = flop_cache_.find(&r);
    if (it != flop_cache_.end()) return it->second;
    std::vector<std::vector<int64_t>> shapes;
    for (size_t i = 0; i < r.args.size(); ++i) shapes.push_back(inputs[i]->shape);
    std::vector<int64_t> out = is_tensor(r.type) ? r.type->shape : std::vector<int64_t>{1};
    int64_t n = op_info(r.op).flops(shapes, out, r.attrs);
    flop_cache_.emplace(&r, n);
    return n;
  }

  const ir::Module& m_;
  const ParamStore& params_;
  RunStats& stats_;
  std::unordered_map<const ir::Rhs*, int64_t>& flop_cache_;
  int depth_ = 0;
};

}  // namespace

ReferenceEngine::ReferenceEngine(std::shared_ptr<const ir::Module> module,
                                 std::shared_ptr<const ParamStore> params)
    : module_(std::move(module)), params_(std::move(params)) {}

RunResult ReferenceEngine::run(const std::vector<Value>& inputs, const std::string& entry) {
  int func = entry_function(*module_, entry);
  RunResult result;
  result.outputs.reserve(inputs.size());
  std::unordered_map<const ir::Rhs*, int64_t> flop_cache;
  auto start = Clock::now();
  for (size_t i = 0; i < inputs.size(); ++i) {
    Interpreter interp(*module_, *params_, result.stats, flop_cache);
    try {
      result.outputs.push_back(interp.call(func, {inputs[i]}, module_->functions[func].span));
    } catch (const UserError& e) {
      std::vector<Diagnostic> ds = e.diagnostics();
      for (auto& d : ds) d.message = "instance " + std::to_string(i) + ": " + d.message;
      throw UserError(std::move(ds));
    }
  }
  result.stats.instances = static_cast<int64_t>(inputs.size());
  result.stats.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace acrobat
