#include "ir/walk.h"

namespace acrobat::ir {

void for_each_block(const Block& block, const std::function<void(const Block&)>& fn) {
  fn(block);
  for (const Binding& b : block.bindings) {
    const Rhs& r = *b.rhs;
    if (r.kind == RhsKind::If) {
      for_each_block(r.then_block, fn);
      for_each_block(r.else_block, fn);
    }
    for (const Clause& c : r.clauses) for_each_block(c.body, fn);
  }
}

namespace {
void atom_read(const Atom& a, std::set<int>& out) {
  if (a.kind == Atom::Var) out.insert(a.var);
}
}  // namespace

void vars_read(const Rhs& r, std::set<int>& out) {
  for (const auto& a : r.args) atom_read(a, out);
  for (const auto& z : r.sizes) atom_read(z.value, out);
  atom_read(r.callee, out);
  vars_read(r.then_block, 0, out);
  vars_read(r.else_block, 0, out);
  for (const auto& c : r.clauses) vars_read(c.body, 0, out);
}

void vars_read(const Block& b, size_t from, std::set<int>& out) {
  for (size_t i = from; i < b.bindings.size(); ++i) vars_read(*b.bindings[i].rhs, out);
  atom_read(b.result, out);
}

bool rewrite_rhs(Block& block, const std::function<RhsPtr(const Rhs&)>& fn) {
  bool changed = false;
  for (Binding& b : block.bindings) {
    if (b.rhs->kind == RhsKind::If || b.rhs->kind == RhsKind::Match) {
      auto copy = std::make_shared<Rhs>(*b.rhs);
      bool inner = false;
      if (copy->kind == RhsKind::If) {
        inner |= rewrite_rhs(copy->then_block, fn);
        inner |= rewrite_rhs(copy->else_block, fn);
      }
      for (Clause& c : copy->clauses) inner |= rewrite_rhs(c.body, fn);
      if (inner) {
        b.rhs = std::move(copy);
        changed = true;
      }
    }
    if (RhsPtr r = fn(*b.rhs)) {
      b.rhs = std::move(r);
      changed = true;
    }
  }
  return changed;
}

Block deep_copy(const Block& block) {
  Block out = block;
  for (Binding& b : out.bindings) {
    auto copy = std::make_shared<Rhs>(*b.rhs);
    copy->site = -1;
    copy->then_block = deep_copy(b.rhs->then_block);
    copy->else_block = deep_copy(b.rhs->else_block);
    for (Clause& c : copy->clauses) c.body = deep_copy(c.body);
    b.rhs = std::move(copy);
  }
  return out;
}

void number_new_sites(Module& module) {
  for (const Function& f : module.functions)
    for_each_block(f.body, [&](const Block& b) {
      for (const Binding& bind : b.bindings) {
        // Nodes are built whole and never shared; the id is the one field set afterwards.
        // Uniqueness is the IR verifier's to check (ir/verify.h), after every pass.
        Rhs& r = const_cast<Rhs&>(*bind.rhs);
        if (r.site < 0) r.site = module.num_sites++;
      }
    });
}

std::vector<const Rhs*> nodes_by_site(const Module& module) {
  std::vector<const Rhs*> out(static_cast<size_t>(module.num_sites), nullptr);
  for (const Function& f : module.functions)
    for_each_block(f.body, [&](const Block& b) {
      for (const Binding& bind : b.bindings) out[bind.rhs->site] = bind.rhs.get();
    });
  return out;
}

}  // namespace acrobat::ir
