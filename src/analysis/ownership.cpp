// Ownership of lazy tensors: the algorithm is in ownership.h.
#include "analysis/ownership.h"

#include <algorithm>
#include <map>
#include <set>

#include "analysis/plan.h"
#include "ir/walk.h"

namespace acrobat::analysis {

namespace {

enum class Role : uint8_t { None, Owned, Borrowed };

using Live = std::set<int>;  // owned variables

bool tracked_type(const Type& t) {
  return t && (t->kind == TypeKind::Tensor || t->kind == TypeKind::Param || t->kind == TypeKind::Var);
}

// The operands of `r` a binding hands over to an owner (all of them for these kinds).
bool hands_over(const ir::Rhs& r) {
  switch (r.kind) {
    case ir::RhsKind::Copy:
    case ir::RhsKind::Call:
    case ir::RhsKind::Construct:
    case ir::RhsKind::MakeTuple:
    case ir::RhsKind::MakeClosure: return true;
    default: return false;
  }
}

// A run of bindings [begin, end) of one block that the host programs execute as one step.
struct Unit {
  enum Kind { Single, Block, Group } kind;
  size_t begin, end;
  const StaticBlock* block = nullptr;
};

class FunctionOwnership {
 public:
  FunctionOwnership(const ir::Module& m, int func, const std::vector<StaticBlock>& blocks,
                    const std::vector<int>& block_at_site, const ConcurrencyPlan& concurrency,
                    OwnershipPlan& out)
      : f_(m.functions[func]),
        func_(func),
        blocks_(blocks),
        block_at_site_(block_at_site),
        concurrency_(concurrency),
        out_(out) {}

  void run() {
    role_.assign(f_.vars.size(), Role::None);
    for (int p : f_.params)
      if (tracked_type(f_.vars[p].type)) role_[p] = Role::Owned;
    classify(f_.body);
    auto& tracked = out_.tracked[func_];
    tracked.assign(f_.vars.size(), 0);
    for (size_t v = 0; v < f_.vars.size(); ++v) tracked[v] = role_[v] != Role::None;

    BlockOwnership body;
    Live live = block(f_.body, Live{}, body);
    std::vector<int> unread;
    for (int p : f_.params)
      if (role_[p] == Role::Owned && !live.count(p)) unread.push_back(p);
    body.drops = list(unread);
    out_.bodies[func_] = body;
  }

 private:
  // ---- 1. roles ----

  void classify(const ir::Block& b) {
    for (const Unit& u : units(b)) {
      if (u.kind == Unit::Block) {
        classify_static_block(b, u);
        continue;
      }
      for (size_t i = u.begin; i < u.end; ++i) {
        const ir::Binding& bind = b.bindings[i];
        role_[bind.var] = role_of(*bind.rhs, bind.var);
        const ir::Rhs& r = *bind.rhs;
        if (r.kind == ir::RhsKind::If) {
          classify(r.then_block);
          classify(r.else_block);
        }
        for (const auto& c : r.clauses) {
          bind_pattern(*c.pattern);
          classify(c.body);
        }
      }
    }
  }

  Role role_of(const ir::Rhs& r, int var) const {
    if (!tracked_type(f_.vars[var].type)) return Role::None;
    switch (r.kind) {
      case ir::RhsKind::Call:
      case ir::RhsKind::If:
      case ir::RhsKind::Match: return Role::Owned;
      case ir::RhsKind::Copy:  // a copy of what is never lazy is never lazy
        return r.args[0].kind == ir::Atom::Var && role_[r.args[0].var] != Role::None ? Role::Owned
                                                                                     : Role::None;
      case ir::RhsKind::Proj: return Role::Borrowed;
      default: return Role::None;  // parameter loads, embedding rows, constants
    }
  }

  void bind_pattern(const ir::Pattern& p) {
    if (p.kind == ir::Pattern::Bind && tracked_type(f_.vars[p.var].type)) role_[p.var] = Role::Borrowed;
    for (const auto& s : p.subs) bind_pattern(*s);
  }

  // The variables a static block defines that code after it reads: the values its record hands
  // over, and the host bindings inside it that build on them (the rule of blocks.cpp).
  std::set<int> escaping(const ir::Block& b, const Unit& u) const {
    std::set<int> used;
    ir::vars_read(b, u.end, used);
    for (size_t k = u.end; k-- > u.begin;) {
      const ir::Binding& bind = b.bindings[k];
      if (!is_tensor_op(*bind.rhs) && used.count(bind.var)) ir::vars_read(*bind.rhs, used);
    }
    return used;
  }

  void classify_static_block(const ir::Block& b, const Unit& u) {
    const std::set<int> used = escaping(b, u);
    std::vector<uint8_t>& owned = out_.owned_outputs[u.block->id];
    owned.assign(u.block->ops.size(), 0);
    for (size_t k = 0; k < u.block->ops.size(); ++k) {
      const BlockOp& op = u.block->ops[k];
      if (!used.count(op.var)) continue;
      ACROBAT_ASSERT(op.escapes, "a static block output read after the block does not escape");
      owned[k] = 1;
      role_[op.var] = Role::Owned;
    }
    for (size_t i = u.begin; i < u.end; ++i) {
      const ir::Binding& bind = b.bindings[i];
      if (is_tensor_op(*bind.rhs) || !used.count(bind.var)) continue;
      role_[bind.var] = role_of(*bind.rhs, bind.var);
    }
  }

  // ---- 2. units ----

  std::vector<Unit> units(const ir::Block& b) const {
    std::vector<Unit> out;
    for (size_t i = 0; i < b.bindings.size();) {
      const ir::Rhs& r = *b.bindings[i].rhs;
      const int s = r.site < static_cast<int>(block_at_site_.size()) ? block_at_site_[r.site] : -1;
      if (s >= 0) {
        out.push_back(Unit{Unit::Block, i, blocks_[s].end, &blocks_[s]});
      } else if (int n = concurrency_.group_at(r)) {
        out.push_back(Unit{Unit::Group, i, i + static_cast<size_t>(n)});
      } else {
        out.push_back(Unit{Unit::Single, i, i + 1});
      }
      i = out.back().end;
    }
    return out;
  }

  // ---- 3. liveness and actions ----

  // Returns the owned variables live on entry to `b`, given those live after it; sets the result's
  // action in `self` (entry drops are the caller's: they depend on the sibling branches).
  Live block(const ir::Block& b, Live live, BlockOwnership& self) {
    if (b.result.kind == ir::Atom::Var) {
      const int v = b.result.var;
      if (role_[v] == Role::Borrowed || (role_[v] == Role::Owned && live.count(v)))
        self.dup_result = true;
      else if (role_[v] == Role::Owned)
        live.insert(v);
    }
    const std::vector<Unit> us = units(b);
    for (size_t k = us.size(); k-- > 0;) {
      const Unit& u = us[k];
      if (u.kind == Unit::Block)
        live = static_block(b, u, std::move(live));
      else if (u.kind == Unit::Group)
        live = group(b, u, std::move(live));
      else
        live = single(b.bindings[u.begin], std::move(live), nullptr);
    }
    return live;
  }

  // One binding with `live` after it. Its drops go to `group_drops` when it is a member of a group.
  Live single(const ir::Binding& bind, Live live, std::vector<int>* group_drops) {
    const ir::Rhs& r = *bind.rhs;
    std::vector<int> dups, drops;
    const bool defines_live = live.count(bind.var) > 0;
    live.erase(bind.var);
    Live before = live;
    // Owned uses: the last one of an owned variable dead afterwards moves, every other one dups.
    if (hands_over(r)) {
      std::map<int, int> uses;
      for (const ir::Atom& a : r.args)
        if (a.kind == ir::Atom::Var && role_[a.var] != Role::None) uses[a.var]++;
      for (auto [v, n] : uses) {
        const bool moves = role_[v] == Role::Owned && !live.count(v);
        dups.insert(dups.end(), static_cast<size_t>(moves ? n - 1 : n), v);
        if (role_[v] == Role::Owned) before.insert(v);
      }
    }
    // Reads that hand nothing over: a tensor read, a match scrutinee (kept for the whole match:
    // a pattern may bind it whole).
    std::vector<int> reads;
    if ((r.kind == ir::RhsKind::Op || r.kind == ir::RhsKind::Match) && !r.args.empty() &&
        r.args[0].kind == ir::Atom::Var && role_[r.args[0].var] == Role::Owned)
      reads.push_back(r.args[0].var);
    for (int v : reads) {
      if (!live.count(v)) drops.push_back(v);
      before.insert(v);
    }
    if (r.kind == ir::RhsKind::If || r.kind == ir::RhsKind::Match) {
      Live after = live;
      for (int v : reads) after.insert(v);
      const size_t n = r.kind == ir::RhsKind::If ? 2 : r.clauses.size();
      std::vector<BlockOwnership> actions(n);
      std::vector<Live> ins(n);
      for (size_t c = 0; c < n; ++c) {
        const ir::Block& body = r.kind == ir::RhsKind::If ? (c == 0 ? r.then_block : r.else_block)
                                                           : r.clauses[c].body;
        ins[c] = block(body, after, actions[c]);
        before.insert(ins[c].begin(), ins[c].end());
      }
      for (size_t c = 0; c < n; ++c) {
        std::vector<int> dead;
        std::set_difference(before.begin(), before.end(), ins[c].begin(), ins[c].end(),
                            std::back_inserter(dead));
        // What the binding's own reads keep is live into every branch by construction.
        actions[c].drops = list(dead);
      }
      out_.branches[r.site] = std::move(actions);
    }
    if (role_[bind.var] == Role::Owned && !defines_live) drops.push_back(bind.var);
    out_.dups[r.site] = list(dups);
    if (group_drops)
      group_drops->insert(group_drops->end(), drops.begin(), drops.end());
    else
      out_.drops[r.site] = list(drops);
    return before;
  }

  // A static block: its host bindings ran before the record; after it, the escaping ones hand
  // over what they hold, then what died in the block is dropped.
  Live static_block(const ir::Block& b, const Unit& u, Live live) {
    const std::set<int> used = escaping(b, u);
    std::set<int> defined, read_outside;
    for (size_t i = u.begin; i < u.end; ++i) defined.insert(b.bindings[i].var);
    for (size_t i = u.begin; i < u.end; ++i)
      for (const ir::Atom& a : b.bindings[i].rhs->args)
        if (a.kind == ir::Atom::Var && !defined.count(a.var) && role_[a.var] == Role::Owned)
          read_outside.insert(a.var);
    // The escaping host bindings in order, and how many owned uses of each variable remain from
    // each of them on (a later one keeps the variable live).
    std::vector<const ir::Rhs*> handing;
    for (size_t i = u.begin; i < u.end; ++i) {
      const ir::Rhs& r = *b.bindings[i].rhs;
      if (!is_tensor_op(r) && used.count(b.bindings[i].var) && hands_over(r)) handing.push_back(&r);
    }
    std::map<int, int> remaining;
    for (const ir::Rhs* r : handing)
      for (const ir::Atom& a : r->args)
        if (a.kind == ir::Atom::Var) remaining[a.var]++;
    std::vector<int> dups, drops;
    std::set<int> moved;
    for (const ir::Rhs* r : handing)
      for (const ir::Atom& a : r->args) {
        if (a.kind != ir::Atom::Var || role_[a.var] == Role::None) continue;
        const int v = a.var;
        const bool last = --remaining[v] == 0;
        if (role_[v] == Role::Owned && last && !live.count(v))
          moved.insert(v);
        else
          dups.push_back(v);
      }
    std::set<int> candidates = read_outside;
    for (int v : defined)
      if (role_[v] == Role::Owned) candidates.insert(v);
    for (int v : candidates)
      if (!live.count(v) && !moved.count(v)) drops.push_back(v);
    const int site = b.bindings[u.begin].rhs->site;
    out_.dups[site] = list(dups);
    out_.drops[site] = list(drops);
    for (int v : defined) live.erase(v);
    live.insert(read_outside.begin(), read_outside.end());
    return live;
  }

  // A group of concurrent calls: the members may interleave, so every variable any of them reads
  // stays live (and owned by this frame) until all have finished; then what died is dropped.
  Live group(const ir::Block& b, const Unit& u, Live live) {
    Live reads;
    std::set<int> defined_inside;
    for (size_t i = u.begin; i < u.end; ++i) {
      std::set<int> r;
      ir::vars_read(*b.bindings[i].rhs, r);
      for (int v : r)
        if (role_[v] == Role::Owned) reads.insert(v);
      defined_inside.insert(b.bindings[i].var);
      const ir::Rhs& rhs = *b.bindings[i].rhs;
      ir::for_each_block(rhs.then_block, [&](const ir::Block& x) { defs_of(x, defined_inside); });
      ir::for_each_block(rhs.else_block, [&](const ir::Block& x) { defs_of(x, defined_inside); });
      for (const auto& c : rhs.clauses)
        ir::for_each_block(c.body, [&](const ir::Block& x) { defs_of(x, defined_inside); });
    }
    for (int v : defined_inside) reads.erase(v);
    Live inner = live;
    inner.insert(reads.begin(), reads.end());
    std::vector<int> drops;
    for (size_t i = u.begin; i < u.end; ++i) single(b.bindings[i], inner, &drops);
    for (int v : reads)
      if (!live.count(v)) drops.push_back(v);
    out_.drops[b.bindings[u.begin].rhs->site] = list(drops);
    for (size_t i = u.begin; i < u.end; ++i) live.erase(b.bindings[i].var);
    live.insert(reads.begin(), reads.end());
    return live;
  }

  static void defs_of(const ir::Block& b, std::set<int>& out) {
    for (const auto& bind : b.bindings) out.insert(bind.var);
  }

  VarList list(const std::vector<int>& vs) {
    VarList l;
    l.begin = static_cast<int32_t>(out_.vars.size());
    out_.vars.insert(out_.vars.end(), vs.begin(), vs.end());
    l.end = static_cast<int32_t>(out_.vars.size());
    return l;
  }

  const ir::Function& f_;
  const int func_;
  const std::vector<StaticBlock>& blocks_;
  const std::vector<int>& block_at_site_;
  const ConcurrencyPlan& concurrency_;
  OwnershipPlan& out_;
  std::vector<Role> role_;
};

}  // namespace

OwnershipPlan analyse_ownership(const ir::Module& module, const std::vector<StaticBlock>& blocks,
                                const std::vector<int>& block_at_site,
                                const ConcurrencyPlan& concurrency) {
  OwnershipPlan plan;
  plan.enabled = true;
  plan.dups.assign(static_cast<size_t>(module.num_sites), VarList{});
  plan.drops.assign(static_cast<size_t>(module.num_sites), VarList{});
  plan.bodies.assign(module.functions.size(), BlockOwnership{});
  plan.tracked.resize(module.functions.size());
  plan.owned_outputs.resize(blocks.size());
  for (size_t f = 0; f < module.functions.size(); ++f)
    FunctionOwnership(module, static_cast<int>(f), blocks, block_at_site, concurrency, plan).run();
  return plan;
}

namespace {

class OwnershipNotes : public ir::PrintNotes {
 public:
  explicit OwnershipNotes(const ir::Module& m) : m_(m), plan_(*m.plan), own_(m.plan->ownership) {
    // Where each static block and group ends: its actions are printed there.
    for (const auto& f : m.functions)
      ir::for_each_block(f.body, [&](const ir::Block& b) {
        for (size_t i = 0; i < b.bindings.size(); ++i) {
          const ir::Rhs& r = *b.bindings[i].rhs;
          if (const StaticBlock* s = plan_.block_at(r)) {
            block_end_[b.bindings[s->end - 1].rhs->site] = s;
            starts_.insert(r.site);
          } else if (int n = plan_.concurrency.group_at(r)) {
            group_end_[b.bindings[i + static_cast<size_t>(n) - 1].rhs->site] = r.site;
            starts_.insert(r.site);
          }
        }
      });
  }

  std::vector<std::string> before(int func, const ir::Rhs& r) const override {
    std::vector<std::string> out;
    if (!plan_.block_at(r)) line(out, "dup", func, own_.dups[r.site]);
    return out;
  }
  std::vector<std::string> after(int func, const ir::Rhs& r) const override {
    std::vector<std::string> out;
    if (auto it = block_end_.find(r.site); it != block_end_.end()) {
      const StaticBlock& s = *it->second;
      const int first = s.block->bindings[s.begin].rhs->site;
      if (!s.ops.empty()) out.push_back("record #" + std::to_string(s.id));
      line(out, "dup", func, own_.dups[first]);
      line(out, "drop", func, own_.drops[first]);
    } else if (auto g = group_end_.find(r.site); g != group_end_.end()) {
      out.push_back("join");
      line(out, "drop", func, own_.drops[g->second]);
    } else if (!starts_.count(r.site)) {
      line(out, "drop", func, own_.drops[r.site]);
    }
    return out;
  }
  std::vector<std::string> entry(int func, const ir::Rhs* owner, size_t branch) const override {
    std::vector<std::string> out;
    line(out, "drop", func, owner ? own_.branch(*owner, branch).drops : own_.bodies[func].drops);
    return out;
  }
  std::string result(int func, const ir::Rhs* owner, size_t branch) const override {
    const BlockOwnership& b = owner ? own_.branch(*owner, branch) : own_.bodies[func];
    return b.dup_result ? " (dup)" : "";
  }

 private:
  void line(std::vector<std::string>& out, const char* what, int func, VarList l) const {
    if (l.empty()) return;
    std::string s = what;
    for (const int32_t* v = own_.begin(l); v != own_.end(l); ++v)
      s += (v == own_.begin(l) ? " " : ", ") + ir::var_str(m_.functions[func], *v);
    out.push_back(s);
  }

  const ir::Module& m_;
  const Plan& plan_;
  const OwnershipPlan& own_;
  std::unordered_map<int, const StaticBlock*> block_end_;
  std::unordered_map<int, int> group_end_;  // last member's site -> first member's
  std::set<int> starts_;                    // sites of static block and group starts
};

}  // namespace

std::string ownership_str(const ir::Module& module) {
  ACROBAT_ASSERT(module.plan, "ownership_str needs a module compiled with its plan");
  if (!module.plan->ownership.enabled) return ir::print_module(module);
  OwnershipNotes notes(module);
  return ir::print_module(module, &notes);
}

}  // namespace acrobat::analysis
