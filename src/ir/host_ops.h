// The rules of host arithmetic every host program follows (both interpreters and generated code):
// comparisons, and the integer operations that fail instead of wrapping.
#pragma once

#include <cstdint>
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

// Why an integer operation fails; the generated code passes the number to AotHost::fail.
enum class IntError : int64_t { DivisionByZero = 0, DivisionOverflow = 1, Overflow = 2, Conversion = 3 };

inline const char* int_error_message(IntError e) {
  switch (e) {
    case IntError::DivisionByZero: return "integer division by zero";
    case IntError::DivisionOverflow: return "integer division overflows";
    case IntError::Overflow: return "integer overflow: the result does not fit in 64 bits";
    case IntError::Conversion: return "int(x) of a NaN or of a float beyond 64 bits";
  }
  return "integer error";
}

// int(x): x truncated toward zero, or false for a NaN or a value whose truncation does not fit.
inline bool float_to_int(double x, int64_t& out) {
  if (!(x >= -0x1p63 && x < 0x1p63)) return false;  // false for NaN too
  out = static_cast<int64_t>(x);
  return true;
}

// x op y for an integer arithmetic operator (+ - * / %), or the reason it has no int64 result.
inline std::optional<IntError> int_arith(ir::HostOp op, int64_t x, int64_t y, int64_t& out) {
  switch (op) {
    case ir::HostOp::Add: return __builtin_add_overflow(x, y, &out) ? std::optional(IntError::Overflow) : std::nullopt;
    case ir::HostOp::Sub: return __builtin_sub_overflow(x, y, &out) ? std::optional(IntError::Overflow) : std::nullopt;
    case ir::HostOp::Mul: return __builtin_mul_overflow(x, y, &out) ? std::optional(IntError::Overflow) : std::nullopt;
    case ir::HostOp::Div:
    case ir::HostOp::Mod:
      if (y == 0) return IntError::DivisionByZero;
      if (x == INT64_MIN && y == -1) return IntError::DivisionOverflow;
      out = op == ir::HostOp::Div ? x / y : x % y;
      return std::nullopt;
    default: return std::nullopt;
  }
}

}  // namespace acrobat
