// The optimisers' element loops (include/acrobat/kernels.h), a register at a time. A tail shorter
// than a register goes through padded buffers, so that every element sees exactly the same code.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "acrobat/kernels.h"
#include "kernels/simd.h"

namespace acrobat::kernels {

namespace {

using simd::kLanes;
using simd::Vec;

// Runs step(p, g, m, v) on [0, n) a register at a time; a tail via padded copies.
template <class Step>
void for_registers(float* p, float* g, float* m, float* v, size_t n, Step step) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) step(p + i, g + i, m + i, v ? v + i : nullptr);
  if (i == n) return;
  float bp[kLanes] = {}, bg[kLanes] = {}, bm[kLanes] = {}, bv[kLanes] = {};
  const size_t k = n - i;
  std::copy_n(p + i, k, bp);
  std::copy_n(g + i, k, bg);
  std::copy_n(m + i, k, bm);
  if (v) std::copy_n(v + i, k, bv);
  step(bp, bg, bm, v ? bv : nullptr);
  std::copy_n(bp, k, p + i);
  std::copy_n(bg, k, g + i);
  std::copy_n(bm, k, m + i);
  if (v) std::copy_n(bv, k, v + i);
}

}  // namespace

void adam_update(const AdamStep& s, float* p, float* g, float* m, float* v, size_t n) {
  const Vec scale = simd::splat(s.grad_scale), wd = simd::splat(s.weight_decay);
  const Vec b1 = simd::splat(s.beta1), c1 = simd::splat(1 - s.beta1);
  const Vec b2 = simd::splat(s.beta2), c2 = simd::splat(1 - s.beta2);
  const Vec eps = simd::splat(s.eps), step = simd::splat(s.step_size), sb2 = simd::splat(s.sqrt_bias2);
  const Vec zero = simd::splat(0.0f);
  for_registers(p, g, m, v, n, [&](float* pp, float* gp, float* mp, float* vp) {
    const Vec x = simd::load(pp);
    const Vec grad = simd::fmadd(wd, x, simd::load(gp) * scale);
    simd::store(gp, zero);
    const Vec mm = simd::fmadd(b1, simd::load(mp), c1 * grad);
    const Vec vv = simd::fmadd(b2, simd::load(vp), c2 * grad * grad);
    simd::store(mp, mm);
    simd::store(vp, vv);
    simd::store(pp, x - step * mm / (simd::sqrt(vv) / sb2 + eps));
  });
}

void sgd_update(const SgdStep& s, float* p, float* g, float* b, size_t n) {
  const Vec scale = simd::splat(s.grad_scale), wd = simd::splat(s.weight_decay);
  const Vec lr = simd::splat(s.lr), mom = simd::splat(s.momentum);
  const bool fresh = s.first || s.momentum == 0;
  const Vec zero = simd::splat(0.0f);
  for_registers(p, g, b, nullptr, n, [&](float* pp, float* gp, float* bp, float*) {
    const Vec x = simd::load(pp);
    const Vec grad = simd::fmadd(wd, x, simd::load(gp) * scale);
    simd::store(gp, zero);
    const Vec buf = fresh ? grad : simd::fmadd(mom, simd::load(bp), grad);
    simd::store(bp, buf);
    simd::store(pp, x - lr * buf);
  });
}

double sum_squares(const float* x, size_t n) {
  // Eight independent sums (a fixed order, so the same bits every time) instead of one chain.
  double sums[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) sums[k] += double(x[i + k]) * x[i + k];
  for (; i < n; ++i) sums[0] += double(x[i]) * x[i];
  double sum = 0;
  for (double s : sums) sum += s;
  return sum;
}

bool all_zero(const float* x, size_t n) {
  // The bits without the sign, ORed a block at a time (integer ORs vectorise; no early exit inside).
  constexpr size_t kBlock = 256;
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t len = std::min(kBlock, n - i);
    uint32_t bits = 0;
    for (size_t k = 0; k < len; ++k) {
      uint32_t u;
      std::memcpy(&u, x + i + k, sizeof u);
      bits |= u << 1;
    }
    if (bits != 0) return false;
  }
  return true;
}

}  // namespace acrobat::kernels
