// Vectorised exp, log, tanh and sigmoid on simd::Vec, shared by the elementwise and row-wise
// kernels. Range reductions and polynomials follow Cephes' single-precision functions (expf, logf,
// tanhf).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/simd.h"

namespace acrobat::kernels::simd {

// Cody-Waite split of ln 2: n * kLn2Hi is exact for the n that occur, so x - n*ln2 loses nothing.
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;

inline Vec exp(Vec x) {
  // Beyond these bounds e^x is +inf or rounds to 0 in float; clamping keeps n inside ldexp's range
  // while the scaling still overflows or underflows exactly as std::exp does. max(lo, x) keeps NaN.
  x = min(splat(89.0f), max(splat(-104.0f), x));
  // e^x = 2^n * e^r with n = round(x / ln 2), so |r| <= ln2 / 2.
  const Vec n = round(x * splat(1.44269504088896341f));
  Vec r = fmadd(n, splat(-kLn2Hi), x);
  r = fmadd(n, splat(-kLn2Lo), r);
  Vec p = splat(1.9875691500e-4f);
  p = fmadd(p, r, splat(1.3981999507e-3f));
  p = fmadd(p, r, splat(8.3334519073e-3f));
  p = fmadd(p, r, splat(4.1665795894e-2f));
  p = fmadd(p, r, splat(1.6666665459e-1f));
  p = fmadd(p, r, splat(5.0000001201e-1f));
  p = fmadd(p, r * r, r + splat(1.0f));
  return ldexp(p, n);
}

inline Vec log(Vec x) {
  // x = m * 2^e with m in [sqrt(1/2), sqrt(2)), then log x = e ln2 + log1p(f) for f = m - 1, which
  // is exact, so there is no cancellation near x = 1.
  Vec e;
  Vec m = frexp(x, e);  // m in [0.5, 1)
  const Mask below = m < splat(0.707106781186547524f);
  e = e - select(below, splat(1.0f), splat(0.0f));
  const Vec f = select(below, m + m, m) - splat(1.0f);
  const Vec z = f * f;
  Vec p = splat(7.0376836292e-2f);
  p = fmadd(p, f, splat(-1.1514610310e-1f));
  p = fmadd(p, f, splat(1.1676998740e-1f));
  p = fmadd(p, f, splat(-1.2420140846e-1f));
  p = fmadd(p, f, splat(1.4249322787e-1f));
  p = fmadd(p, f, splat(-1.6668057665e-1f));
  p = fmadd(p, f, splat(2.0000714765e-1f));
  p = fmadd(p, f, splat(-2.4999993993e-1f));
  p = fmadd(p, f, splat(3.3333331174e-1f));
  Vec y = p * f * z;
  y = fmadd(e, splat(kLn2Lo), y);
  y = fmadd(z, splat(-0.5f), y);
  Vec result = fmadd(e, splat(kLn2Hi), f + y);

  // frexp is only meaningful for finite x > 0; everything else takes std::log's answer.
  constexpr float kInf = std::numeric_limits<float>::infinity();
  result = select(x == splat(0.0f), splat(-kInf), result);
  result = select(x < splat(0.0f), splat(std::numeric_limits<float>::quiet_NaN()), result);
  result = select(x == splat(kInf), x, result);
  return select(is_nan(x), x, result);
}

inline Vec tanh(Vec x) {
  // tanh is odd: both branches work on |x| and the sign is put back at the end, which also keeps
  // tanh(-0) == -0.
  const Vec a = abs(x);
  // Small |x|: odd polynomial, accurate relative to tanh(x) itself (so tanh(x) == x for tiny x).
  const Vec z = a * a;
  Vec p = splat(-5.70498872745e-3f);
  p = fmadd(p, z, splat(2.06390887954e-2f));
  p = fmadd(p, z, splat(-5.37397155531e-2f));
  p = fmadd(p, z, splat(1.33314422036e-1f));
  p = fmadd(p, z, splat(-3.33332819422e-1f));
  const Vec small = fmadd(p * z, a, a);
  // Larger |x|: 1 - 2 / (e^2|x| + 1), which saturates to exactly 1 once e^2|x| overflows to inf.
  const Vec one = splat(1.0f);
  const Vec large = one - splat(2.0f) / (exp(a + a) + one);
  // NaN fails the comparison and flows through the exp branch.
  return copysign(select(a < splat(0.625f), small, large), x);
}

inline Vec sigmoid(Vec x) {
  // e^-x overflowing to inf for very negative x gives exactly 0, and underflowing to 0 gives 1.
  const Vec one = splat(1.0f);
  return one / (one + exp(-x));
}

}  // namespace acrobat::kernels::simd

namespace acrobat::kernels {

// argmax's rule on every engine: the first NaN if x holds one, else the first maximum. The library's
// kernels::argmax is the vectorised form of the same rule; generated code calls this one.
inline int64_t argmax_scalar(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t j = 0; j < n; ++j) {
    if (x[j] != x[j]) return j;
    if (x[j] > x[best]) best = j;
  }
  return best;
}

// argmax(x, rank=r)'s rule on every engine (topk's r-th index): the entry r places down the order in
// which every NaN comes first and then the values from the largest, ties (and NaNs) by position; rank
// 0 is argmax_scalar. Keeps the r + 1 first entries seen, in order: O(n r) at worst, r is small.
// Requires rank < n (the type checker's rule).
template <class T>  // float; double in the operators' double forward (autodiff/adjoints.h)
int64_t ranked_argmax(const T* x, int64_t n, int64_t rank) {
  auto ahead = [&](int64_t i, int64_t j) {  // entry i (later in x) comes before entry j
    const bool nan_i = x[i] != x[i], nan_j = x[j] != x[j];
    return nan_j ? false : nan_i || x[i] > x[j];
  };
  std::vector<int64_t> first;  // the leading entries, in order
  first.reserve(static_cast<size_t>(rank) + 1);
  for (int64_t i = 0; i < n; ++i) {
    if (static_cast<int64_t>(first.size()) > rank && !ahead(i, first.back())) continue;
    size_t at = first.size();
    while (at > 0 && ahead(i, first[at - 1])) --at;
    if (static_cast<int64_t>(first.size()) > rank) first.pop_back();
    first.insert(first.begin() + static_cast<std::ptrdiff_t>(at), i);
  }
  return first[static_cast<size_t>(rank)];
}

// sample's rule on every engine: a categorical draw from the distribution softmax(x) by the uniform
// number u in [0, 1) that `seed` gives (splitmix64, its top 53 bits): the first index k whose
// cumulative weight, left to right in double, exceeds u times the total, the weights
// exp(x_j - max x) in double. A NaN in x gives the first NaN (as argmax), and so does nothing else.
inline double sample_uniform(int64_t seed) {
  uint64_t z = static_cast<uint64_t>(seed) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}
template <class T>  // float; double in the operators' double forward (autodiff/adjoints.h)
int64_t sample_scalar(const T* x, int64_t n, int64_t seed) {
  double top = -INFINITY, total = 0;
  for (int64_t j = 0; j < n; ++j) {
    if (x[j] != x[j]) return j;
    top = x[j] > top ? x[j] : top;
  }
  if (top == -INFINITY) return 0;  // every weight 0: the first index, as argmax
  for (int64_t j = 0; j < n; ++j) total += std::exp(static_cast<double>(x[j]) - top);
  const double target = sample_uniform(seed) * total;
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    sum += std::exp(static_cast<double>(x[j]) - top);
    if (sum > target) return j;
  }
  return n - 1;  // rounding: the target at the total
}

}  // namespace acrobat::kernels
