#include "analysis/tail_calls.h"

namespace acrobat::analysis {

namespace {

struct Finder {
  const DepthPlan& depth;
  const ConcurrencyPlan& concurrency;
  std::vector<uint8_t>& out;
  int func;

  // `b` returns the function's result: mark the tail call its last binding is, or look into it.
  void block(const ir::Block& b) {
    if (b.bindings.empty() || b.result.kind != ir::Atom::Var) return;
    const ir::Binding& last = b.bindings.back();
    if (last.var != b.result.var) return;
    const ir::Rhs& r = *last.rhs;
    // A member of a concurrent group that ends the block: the group's first member is marked.
    for (size_t k = 0; k < b.bindings.size(); ++k) {
      const int n = concurrency.group_at(*b.bindings[k].rhs);
      if (n > 0 && k + static_cast<size_t>(n) == b.bindings.size()) return;
    }
    switch (r.kind) {
      case ir::RhsKind::Call:
        if (r.callee_func == func && !depth.ends_phase(r)) out[r.site] = 1;
        return;
      case ir::RhsKind::If:
        if (depth.ghost(r, 0) == 0) block(r.then_block);
        if (depth.ghost(r, 1) == 0) block(r.else_block);
        return;
      case ir::RhsKind::Match:
        for (size_t c = 0; c < r.clauses.size(); ++c)
          if (depth.ghost(r, c) == 0) block(r.clauses[c].body);
        return;
      default: return;
    }
  }
};

}  // namespace

std::vector<uint8_t> find_tail_calls(const ir::Module& m, const DepthPlan& depth,
                                     const ConcurrencyPlan& concurrency) {
  std::vector<uint8_t> out(static_cast<size_t>(m.num_sites), 0);
  for (size_t f = 0; f < m.functions.size(); ++f)
    Finder{depth, concurrency, out, static_cast<int>(f)}.block(m.functions[f].body);
  return out;
}

}  // namespace acrobat::analysis
