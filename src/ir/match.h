// The rule of matching a value against a pattern, once for every host program: both interpreters
// run it over their values, the code generator walks it to print a clause's test and bindings.
#pragma once

#include <cstddef>

#include "ir/ir.h"

namespace acrobat::ir {

// Whether value `v` matches pattern `p`, binding the pattern's variables on the way:
//  - a wildcard matches anything;
//  - a binding matches anything, and binds its variable to the value;
//  - a constructor pattern matches a value of that constructor whose fields match its
//    sub-patterns, in order;
//  - a tuple pattern matches a tuple whose elements match its sub-patterns, in order.
// The first sub-pattern that fails ends the match: the variables of a clause that does not match
// may be bound or not, and are never read.
//
// `ops` reads one representation of patterns and values:
//   kind(p)         the pattern's Pattern::Kind
//   arity(p)        how many sub-patterns it has
//   sub(p, i)       sub-pattern i
//   has_ctor(v, p)  whether `v` is a value of constructor pattern p's constructor
//   field(v, i)     field i of an aggregate value (a constructor's field, a tuple's element)
//   bind(p, v)      binds binding pattern p's variable to `v`
// Code generators pass values that are expressions and a has_ctor that records the test it would
// print and answers true, so that one walk visits the whole pattern.
template <class Pat, class Val, class Ops>
bool match_pattern(const Pat& p, const Val& v, Ops& ops) {
  switch (ops.kind(p)) {
    case Pattern::Wildcard: return true;
    case Pattern::Bind: ops.bind(p, v); return true;
    case Pattern::Ctor:
      if (!ops.has_ctor(v, p)) return false;
      [[fallthrough]];
    case Pattern::Tuple:
      for (size_t i = 0, n = ops.arity(p); i < n; ++i)
        if (!match_pattern(ops.sub(p, i), ops.field(v, i), ops)) return false;
      return true;
  }
  return false;
}

}  // namespace acrobat::ir
