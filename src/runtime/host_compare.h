// The host comparisons, one rule for ints, floats and bools in every host program interpreter.
#pragma once

#include <optional>

#include "ir/ir.h"

namespace acrobat {

// x op y for a comparison `op`; nullopt for any other operator.
template <class T>
std::optional<bool> host_compare(ir::HostOp op, T x, T y) {
  switch (op) {
    case ir::HostOp::Lt: return x < y;
    case ir::HostOp::Le: return x <= y;
    case ir::HostOp::Gt: return x > y;
    case ir::HostOp::Ge: return x >= y;
    case ir::HostOp::Eq: return x == y;
    case ir::HostOp::Ne: return x != y;
    default: return std::nullopt;
  }
}

}  // namespace acrobat
