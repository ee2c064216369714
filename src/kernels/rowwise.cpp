// Row-wise kernels (softmax, log_softmax, layer_norm): each row is reduced, then rewritten, with
// the reductions vectorised across simd lanes and the max subtracted before exp for stability.
#include <algorithm>
#include <cmath>
#include <limits>

#include "acrobat/kernels.h"
#include "kernels/simd.h"
#include "kernels/vec_math.h"

namespace acrobat::kernels {
namespace {

using simd::kLanes;
using simd::Vec;

// Sums f(x[i]) over a row, lane-parallel. The tail is padded by repeating the last element, and
// only its real lanes are added.
template <class F>
float row_sum(const float* x, int n, F f) {
  Vec acc = simd::splat(0.0f);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) acc = acc + f(simd::load(x + i));
  float sum = simd::reduce_add(acc);
  if (i < n) {
    float buf[kLanes];
    for (int j = 0; j < kLanes; ++j) buf[j] = x[std::min(i + j, n - 1)];
    simd::store(buf, f(simd::load(buf)));
    for (int j = 0; j < n - i; ++j) sum += buf[j];
  }
  return sum;
}

float row_max(const float* x, int n) {
  constexpr float kLowest = -std::numeric_limits<float>::infinity();
  Vec acc = simd::splat(kLowest);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) acc = simd::max(acc, simd::load(x + i));
  float m = simd::reduce_max(acc);
  for (; i < n; ++i) m = std::fmax(m, x[i]);
  return m;
}

}  // namespace

void softmax(const float* x, float* y, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<ptrdiff_t>(r) * cols;
    float* yr = y + static_cast<ptrdiff_t>(r) * cols;
    const Vec shift = simd::splat(row_max(xr, cols));
    simd::map(xr, yr, cols, [&](Vec v) { return simd::exp(v - shift); });
    const float sum = row_sum(yr, cols, [](Vec v) { return v; });
    const Vec scale = simd::splat(1.0f / sum);
    simd::map(yr, yr, cols, [&](Vec v) { return v * scale; });
  }
}

void log_softmax(const float* x, float* y, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<ptrdiff_t>(r) * cols;
    float* yr = y + static_cast<ptrdiff_t>(r) * cols;
    const float shift = row_max(xr, cols);
    const Vec shift_v = simd::splat(shift);
    const float sum = row_sum(xr, cols, [&](Vec v) { return simd::exp(v - shift_v); });
    const Vec offset = simd::splat(shift + std::log(sum));
    simd::map(xr, yr, cols, [&](Vec v) { return v - offset; });
  }
}

void layer_norm(const float* x, const float* gamma, const float* beta, float eps, float* y,
                int rows, int cols) {
  if (cols <= 0) return;
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<ptrdiff_t>(r) * cols;
    float* yr = y + static_cast<ptrdiff_t>(r) * cols;
    // Statistics are taken relative to the row's first element: x - x[0] rounds relative to the
    // spread of the row rather than to its magnitude, so a common offset much larger than the
    // spread (a mean of 1e4 with unit variance) costs no precision, where float sums of x, and the
    // mean itself rounded to float, would. Two passes (mean, then squared deviations) rather than
    // E[x^2] - E[x]^2, which cancels catastrophically.
    const Vec pivot = simd::splat(xr[0]);
    const float shift = row_sum(xr, cols, [&](Vec v) { return v - pivot; }) / cols;  // mean - x[0]
    const Vec shift_v = simd::splat(shift);
    auto centered = [&](Vec v) { return (v - pivot) - shift_v; };
    auto squared_deviation = [&](Vec v) {
      const Vec d = centered(v);
      return d * d;
    };
    const float var = row_sum(xr, cols, squared_deviation) / cols;
    const Vec rstd = simd::splat(1.0f / std::sqrt(var + eps));
    int i = 0;
    for (; i + kLanes <= cols; i += kLanes) {
      const Vec normed = centered(simd::load(xr + i)) * rstd;
      simd::store(yr + i, simd::fmadd(normed, simd::load(gamma + i), simd::load(beta + i)));
    }
    // The tail goes through lane buffers so it is computed exactly like the body.
    if (i < cols) {
      float xb[kLanes] = {}, gb[kLanes] = {}, bb[kLanes] = {};
      for (int j = i; j < cols; ++j) {
        xb[j - i] = xr[j];
        gb[j - i] = gamma[j];
        bb[j - i] = beta[j];
      }
      const Vec normed = centered(simd::load(xb)) * rstd;
      simd::store(xb, simd::fmadd(normed, simd::load(gb), simd::load(bb)));
      for (int j = i; j < cols; ++j) yr[j] = xb[j - i];
    }
  }
}

}  // namespace acrobat::kernels
