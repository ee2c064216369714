// Size arithmetic that cannot wrap. Dims, element counts, byte counts and FLOP counts are products and
// sums of numbers a user chose (a dim, a --set, a weight file's header), so every one of them is
// computed here, with the compiler's overflow builtins, and an overflow is a value the caller
// reports, never a wrapped number. Also the bounds every tensor must fit in.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace acrobat {

// The kernels index a tensor's elements with int: no tensor may hold more elements than this.
inline constexpr int64_t kMaxTensorElements = INT32_MAX;

template <class T>
std::optional<T> checked_mul(T a, T b) {
  T out;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

template <class T>
std::optional<T> checked_add(T a, T b) {
  T out;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The product of `factors` (1 when empty), or nullopt when it overflows T.
template <class T, class Range>
std::optional<T> checked_product(const Range& factors) {
  T out = 1;
  for (auto f : factors) {
    if (__builtin_mul_overflow(out, static_cast<T>(f), &out)) return std::nullopt;
  }
  return out;
}

// The physical memory of this machine in bytes (sysconf), or INT64_MAX when it cannot be told. The
// checker bounds what a model may allocate by it.
int64_t physical_memory_bytes();

// "1.5 GiB", "12.0 MiB", "512 bytes": a byte count for messages.
std::string byte_size_str(int64_t bytes);

}  // namespace acrobat
