#include "analysis/concurrency.h"

#include <set>

#include "ir/walk.h"

namespace acrobat::analysis {

namespace {

bool reads_tensor(const ir::Rhs& r) {
  return r.kind == ir::RhsKind::Op && op_info(r.op).op_class == OpClass::HostRead;
}

// Host bindings that may move across a suspending binding: no tensor work, no failure, no call.
bool movable(const ir::Rhs& r) {
  switch (r.kind) {
    case ir::RhsKind::Copy:
    case ir::RhsKind::Construct:
    case ir::RhsKind::MakeTuple:
    case ir::RhsKind::Proj:
    case ir::RhsKind::ParamLoad:
    case ir::RhsKind::MakeClosure: return true;
    case ir::RhsKind::Host:
      return r.host_op != ir::HostOp::Div && r.host_op != ir::HostOp::Mod && r.host_op != ir::HostOp::Emit;
    default: return false;
  }
}

// Which functions may reach a binding that `leaf` names, through their calls: a fixed point over
// the call graph, where a call through a closure may reach any function.
class Reach {
 public:
  Reach(const ir::Module& m, bool (*leaf)(const ir::Rhs&)) : leaf_(leaf), by_function_(m.functions.size(), false) {
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t f = 0; f < m.functions.size(); ++f)
        if (!by_function_[f] && in(m.functions[f].body)) {
          by_function_[f] = true;
          any_ = changed = true;
        }
    }
  }
  bool in(const ir::Rhs& r) const {
    if (leaf_(r)) return true;
    switch (r.kind) {
      case ir::RhsKind::Call: return r.callee_func >= 0 ? bool(by_function_[r.callee_func]) : any_;
      case ir::RhsKind::If: return in(r.then_block) || in(r.else_block);
      case ir::RhsKind::Match:
        for (const auto& c : r.clauses)
          if (in(c.body)) return true;
        return false;
      default: return false;
    }
  }
  bool in(const ir::Block& b) const {
    for (const auto& bind : b.bindings)
      if (in(*bind.rhs)) return true;
    return false;
  }
  const std::vector<bool>& by_function() const { return by_function_; }
  bool any() const { return any_; }

 private:
  bool (*leaf_)(const ir::Rhs&);
  std::vector<bool> by_function_;
  bool any_ = false;
};

bool emit(const ir::Rhs& r) { return r.kind == ir::RhsKind::Host && r.host_op == ir::HostOp::Emit; }

class Grouper {
 public:
  // Functions that may emit (emit(v)) have their calls run one after the other, in program order,
  // so that an instance's emits come in the same order on every engine.
  explicit Grouper(ir::Module& m) : m_(m), suspends_(m, reads_tensor), emits_(m, emit) {}

  ConcurrencyPlan run() {
    plan_.may_suspend = suspends_.by_function();
    plan_.group_at_site.assign(static_cast<size_t>(m_.num_sites), 0);
    if (suspends_.any())
      for (auto& f : m_.functions) f.body = reorder(f.body);
    return std::move(plan_);
  }

 private:
  bool suspends(const ir::Rhs& r) const { return suspends_.in(r); }
  bool emits(const ir::Rhs& r) const { return emits_.in(r); }

  ir::Block reorder(const ir::Block& b) {
    std::vector<ir::Binding> in;
    in.reserve(b.bindings.size());
    for (const auto& bind : b.bindings) {
      const ir::Rhs& r = *bind.rhs;
      if (r.kind != ir::RhsKind::If && r.kind != ir::RhsKind::Match) {
        in.push_back(bind);
        continue;
      }
      auto copy = std::make_shared<ir::Rhs>(r);
      if (r.kind == ir::RhsKind::If) {
        copy->then_block = reorder(r.then_block);
        copy->else_block = reorder(r.else_block);
      }
      for (auto& c : copy->clauses) c.body = reorder(c.body);
      in.push_back(ir::Binding{bind.var, std::move(copy)});
    }

    ir::Block out;
    out.result = b.result;
    for (size_t i = 0; i < in.size();) {
      if (!suspends(*in[i].rhs) || emits(*in[i].rhs)) {
        out.bindings.push_back(in[i++]);
        continue;
      }
      // A group starting at in[i]: members, the movable bindings that go before and after it, and
      // those seen after the last member so far (committed when another member follows).
      std::vector<size_t> members{i}, before, after, next_before, next_after;
      std::set<int> defined{in[i].var};  // by members and by bindings that go after the group
      size_t last = i;
      for (size_t j = i + 1; j < in.size(); ++j) {
        const ir::Rhs& r = *in[j].rhs;
        std::set<int> reads;
        ir::vars_read(r, reads);
        bool dependent = false;
        for (int v : reads) dependent = dependent || defined.count(v) > 0;
        if (suspends(r)) {
          if (dependent || emits(r)) break;
          members.push_back(j);
          before.insert(before.end(), next_before.begin(), next_before.end());
          after.insert(after.end(), next_after.begin(), next_after.end());
          next_before.clear();
          next_after.clear();
          defined.insert(in[j].var);
          last = j;
        } else if (movable(r)) {
          (dependent ? next_after : next_before).push_back(j);
          if (dependent) defined.insert(in[j].var);
        } else {
          break;
        }
      }
      if (members.size() < 2) {
        out.bindings.push_back(in[i++]);
        continue;
      }
      for (size_t k : before) out.bindings.push_back(in[k]);
      // A rebuilt if or match keeps its node's site.
      plan_.group_at_site[in[members[0]].rhs->site] = static_cast<int>(members.size());
      ++plan_.num_groups;
      for (size_t k : members) out.bindings.push_back(in[k]);
      for (size_t k : after) out.bindings.push_back(in[k]);
      i = last + 1;
    }
    return out;
  }

  ir::Module& m_;
  Reach suspends_, emits_;
  ConcurrencyPlan plan_;
};

}  // namespace

Grouped group_concurrent_calls(ir::Module module) {
  ConcurrencyPlan plan = Grouper(module).run();
  return {std::move(module), std::move(plan)};
}

}  // namespace acrobat::analysis
