// Dims: evaluation of compile-time integer expressions (DimScope) and the `dim` declarations, with
// the command line's --set overrides applied.
#include <vector>

#include "lang/checker.h"
#include "support/surface.h"

namespace acrobat::checker {

std::optional<int64_t> DimScope::eval(const DimExpr& d, DiagnosticSink& sink) const {
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
      // A chain of operators (`1 + H + H`), by a loop from its first operand out: its length is not
      // nesting (ast.h).
      std::vector<const DimExpr*> chain;
      for (const DimExpr* e = &d; e->kind == DimExpr::Binary; e = e->lhs.get()) chain.push_back(e);
      std::optional<int64_t> l = eval(*chain.back()->lhs, sink);
      for (size_t i = chain.size(); i-- > 0;) {
        const DimExpr& link = *chain[i];
        std::optional<int64_t> r = eval(*link.rhs, sink);
        if (!l || !r) {
          l = std::nullopt;
          continue;  // the other operands may still have errors to report
        }
        int64_t out = 0;
        bool overflow = false;
        switch (link.op) {
          case '+': overflow = __builtin_add_overflow(*l, *r, &out); break;
          case '-': overflow = __builtin_sub_overflow(*l, *r, &out); break;
          case '*': overflow = __builtin_mul_overflow(*l, *r, &out); break;
          case '/':
            if (*r == 0) {
              sink.error(link.rhs->span.begin, "division by zero in a size expression");
              l = std::nullopt;
              continue;
            }
            overflow = *l == INT64_MIN && *r == -1;
            if (!overflow) out = *l / *r;
            break;
        }
        if (overflow) {
          sink.error(link.span.begin, "size expression overflows 64-bit integers");
          l = std::nullopt;
          continue;
        }
        l = out;
      }
      return l;
    }
  }
  return std::nullopt;
}

void Checker::declare_dims() {
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
    sink_.error(SourceLoc{}, given("--set", name + "=" + std::to_string(value)) +
                                 ": the model has no dim " + quote(name) +
                                 (known.empty() ? "" : " (its dims are: " + known + ")"));
  }
}

}  // namespace acrobat::checker
