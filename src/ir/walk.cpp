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
    copy->then_block = deep_copy(b.rhs->then_block);
    copy->else_block = deep_copy(b.rhs->else_block);
    for (Clause& c : copy->clauses) c.body = deep_copy(c.body);
    b.rhs = std::move(copy);
  }
  return out;
}

}  // namespace acrobat::ir
