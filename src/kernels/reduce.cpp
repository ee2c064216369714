// Reductions over the middle axis of [outer, len, inner] and argmax. A reduction over the last axis
// (inner == 1) runs lane-parallel along the row; otherwise whole inner rows are combined at a time,
// which vectorises without reassociating any sum.
#include <cmath>
#include <limits>

#include "acrobat/kernels.h"
#include "kernels/simd.h"
#include "support/diagnostics.h"

namespace acrobat::kernels {
namespace {

using simd::kLanes;
using simd::Vec;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Max propagates NaN, like the reductions of the frameworks models come from.
float max_nan(float acc, float v) { return std::isnan(v) || v > acc ? v : acc; }

float reduce_contiguous(ReduceOp op, const float* x, int64_t len) {
  const bool is_max = op == ReduceOp::Max;
  const float identity = is_max ? kNegInf : 0.0f;
  Vec acc = simd::splat(identity);
  int64_t i = 0;
  if (is_max) {
    for (; i + kLanes <= len; i += kLanes) acc = simd::max_propagate_nan(simd::load(x + i), acc);
  } else {
    for (; i + kLanes <= len; i += kLanes) acc = acc + simd::load(x + i);
  }
  // A NaN lane would be dropped by the hardware's horizontal max, so it is looked for first.
  if (is_max && simd::any(simd::is_nan(acc))) return std::numeric_limits<float>::quiet_NaN();
  float result = is_max ? simd::reduce_max(acc) : simd::reduce_add(acc);
  for (; i < len; ++i) result = is_max ? max_nan(result, x[i]) : result + x[i];
  return result;
}

void reduce_strided(ReduceOp op, const float* x, float* y, int64_t len, int64_t inner) {
  const bool is_max = op == ReduceOp::Max;
  for (int64_t j = 0; j < inner; ++j) y[j] = is_max ? kNegInf : 0.0f;
  for (int64_t l = 0; l < len; ++l) {
    const float* row = x + l * inner;
    if (is_max) {
      for (int64_t j = 0; j < inner; ++j) y[j] = max_nan(y[j], row[j]);
    } else {
      for (int64_t j = 0; j < inner; ++j) y[j] += row[j];
    }
  }
}

}  // namespace

void reduce(ReduceOp op, const float* x, float* y, int64_t outer, int64_t len, int64_t inner) {
  const float mean_scale = 1.0f / static_cast<float>(len);  // len == 0 gives NaN, as 0/0 should
  for (int64_t o = 0; o < outer; ++o) {
    const float* xo = x + o * len * inner;
    float* yo = y + o * inner;
    if (inner == 1) {
      *yo = reduce_contiguous(op, xo, len);
    } else {
      reduce_strided(op, xo, yo, len, inner);
    }
    if (op == ReduceOp::Mean) {
      for (int64_t j = 0; j < inner; ++j) yo[j] *= mean_scale;
    }
  }
}

int64_t argmax(const float* x, int64_t n) {
  ACROBAT_ASSERT(n > 0, "argmax of an empty range");
  // Two passes: find the maximum lane-parallel (a NaN counts as the maximum), then the first index
  // holding it, which keeps "first" well defined without tracking indices per lane.
  Vec acc = simd::splat(kNegInf);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) acc = simd::max_propagate_nan(simd::load(x + i), acc);
  bool nan = simd::any(simd::is_nan(acc));
  float best = simd::reduce_max(acc);
  for (; i < n; ++i) {
    nan = nan || std::isnan(x[i]);
    best = max_nan(best, x[i]);
  }
  const Vec target = simd::splat(best);
  auto hit = [&](Vec v) { return nan ? simd::is_nan(v) : v == target; };
  for (i = 0; i + kLanes <= n; i += kLanes) {
    const simd::Mask m = hit(simd::load(x + i));
    if (simd::any(m)) return i + simd::first_set(m);
  }
  for (; i < n; ++i) {
    if (nan ? std::isnan(x[i]) : x[i] == best) return i;
  }
  ACROBAT_ASSERT(false, "argmax found no maximum");
}

}  // namespace acrobat::kernels
