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

namespace {

// dx = y' (the row's derivative: f(y, dy) per lane) for every row, written or added, after the
// row's reduction; dx may be dy.
template <class Reduce, class Map>
void row_backward(const float* y, const float* dy, float* dx, int rows, int cols, bool accumulate, Reduce reduce,
                  Map map) {
  for (int r = 0; r < rows; ++r) {
    const ptrdiff_t at = static_cast<ptrdiff_t>(r) * cols;
    const float* yr = y + at;
    const float* g = dy + at;
    float* d = dx + at;
    const Vec s = simd::splat(reduce(yr, g));
    int j = 0;
    for (; j + kLanes <= cols; j += kLanes) {
      Vec v = map(simd::load(yr + j), simd::load(g + j), s);
      if (accumulate) v = v + simd::load(d + j);
      simd::store(d + j, v);
    }
    if (j < cols) {  // through lane buffers, computed as the body
      float yb[kLanes] = {}, gb[kLanes] = {}, db[kLanes] = {};
      for (int i = j; i < cols; ++i) {
        yb[i - j] = yr[i];
        gb[i - j] = g[i];
        db[i - j] = accumulate ? d[i] : 0.0f;
      }
      simd::store(db, map(simd::load(yb), simd::load(gb), s) + simd::load(db));
      for (int i = j; i < cols; ++i) d[i] = db[i - j];
    }
  }
}

// The sum over a row of f(y, dy) per lane, the tail's padding lanes left out.
template <class F>
float row_sum2(const float* y, const float* g, int n, F f) {
  Vec acc = simd::splat(0.0f);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) acc = acc + f(simd::load(y + i), simd::load(g + i));
  float sum = simd::reduce_add(acc);
  if (i < n) {
    float yb[kLanes] = {}, gb[kLanes] = {};
    for (int j = i; j < n; ++j) {
      yb[j - i] = y[j];
      gb[j - i] = g[j];
    }
    float out[kLanes];
    simd::store(out, f(simd::load(yb), simd::load(gb)));
    for (int j = 0; j < n - i; ++j) sum += out[j];
  }
  return sum;
}

}  // namespace

void softmax_backward(const float* y, const float* dy, float* dx, int rows, int cols, bool accumulate,
                      float scale) {
  auto dot = [&](const float* yr, const float* g) { return row_sum2(yr, g, cols, [](Vec a, Vec b) { return a * b; }); };
  if (scale == 1.0f) {
    row_backward(y, dy, dx, rows, cols, accumulate, dot, [](Vec yv, Vec g, Vec d) { return yv * (g - d); });
    return;
  }
  const Vec c = simd::splat(scale);
  row_backward(y, dy, dx, rows, cols, accumulate, dot, [c](Vec yv, Vec g, Vec d) { return (yv * (g - d)) * c; });
}

void log_softmax_backward(const float* y, const float* dy, float* dx, int rows, int cols, bool accumulate) {
  row_backward(
      y, dy, dx, rows, cols, accumulate,
      [&](const float*, const float* g) { return row_sum(g, cols, [](Vec v) { return v; }); },
      [](Vec yv, Vec g, Vec sum) { return g - simd::exp(yv) * sum; });
}

void layer_norm_backward(const float* x, const float* gamma, const float* dy, float eps, int rows, int cols,
                         float* dx, bool accumulate, float* dgamma, float* dbeta) {
  if (cols <= 0) return;
  const int body = cols - cols % kLanes;
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<ptrdiff_t>(r) * cols;
    const float* g = dy + static_cast<ptrdiff_t>(r) * cols;
    // The row's statistics as the forward kernel takes them (relative to its first element).
    const Vec pivot = simd::splat(xr[0]);
    const float shift = row_sum(xr, cols, [&](Vec v) { return v - pivot; }) / cols;
    const Vec shift_v = simd::splat(shift);
    auto centered = [&](Vec v) { return (v - pivot) - shift_v; };
    const float var = row_sum(xr, cols, [&](Vec v) {
                        const Vec d = centered(v);
                        return d * d;
                      }) / cols;
    const float rstd = 1.0f / std::sqrt(var + eps);
    const Vec rstd_v = simd::splat(rstd);
    // One pass: the sums of g = dy * gamma and of g * xhat, and dgamma, dbeta.
    Vec sum_g = simd::splat(0.0f), sum_gx = simd::splat(0.0f);
    for (int j = 0; j < body; j += kLanes) {
      const Vec xhat = centered(simd::load(xr + j)) * rstd_v, d = simd::load(g + j);
      const Vec gj = d * simd::load(gamma + j);
      sum_g = sum_g + gj;
      sum_gx = simd::fmadd(gj, xhat, sum_gx);
      if (dgamma) simd::store(dgamma + j, simd::fmadd(d, xhat, simd::load(dgamma + j)));
      if (dbeta) simd::store(dbeta + j, simd::load(dbeta + j) + d);
    }
    float mean_g = simd::reduce_add(sum_g), mean_gx = simd::reduce_add(sum_gx);
    for (int j = body; j < cols; ++j) {
      const float xhat = ((xr[j] - xr[0]) - shift) * rstd, gj = g[j] * gamma[j];
      mean_g += gj;
      mean_gx += gj * xhat;
      if (dgamma) dgamma[j] += g[j] * xhat;
      if (dbeta) dbeta[j] += g[j];
    }
    mean_g /= cols;
    mean_gx /= cols;
    if (!dx) continue;
    float* d = dx + static_cast<ptrdiff_t>(r) * cols;
    const Vec mean_g_v = simd::splat(mean_g), mean_gx_v = simd::splat(mean_gx);
    for (int j = 0; j < body; j += kLanes) {
      const Vec xhat = centered(simd::load(xr + j)) * rstd_v;
      const Vec gj = simd::load(g + j) * simd::load(gamma + j);
      Vec v = rstd_v * (gj - mean_g_v - xhat * mean_gx_v);
      if (accumulate) v = v + simd::load(d + j);
      simd::store(d + j, v);
    }
    for (int j = body; j < cols; ++j) {
      const float xhat = ((xr[j] - xr[0]) - shift) * rstd;
      const float v = rstd * (g[j] * gamma[j] - mean_g - xhat * mean_gx);
      d[j] = accumulate ? d[j] + v : v;
    }
  }
}

}  // namespace acrobat::kernels
